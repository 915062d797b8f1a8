"""The grader measured from outside (issue 44): wrong code the course was never told about, graded as `course check`
grades it, and each diagnosis sorted into named right, named wrong, or facts only.

The library is benchmarks/outside_cases.py (edits of the solved cells, written without reading the course's
catalogues, mutation operators or fixtures). For each case this script
1. proves it wrong OUTSIDE the grader: the solved namespace with the edited cell in place, run through
   benchmarks/outside_oracles.py (torch's own functions or float64; the oracle must pass the solution first);
2. grades it in this process with the engine's mutants, as the reference child does (tests/harness.py
   check_one(mutants=True));
3. classifies the result: rejected or accepted; for a rejected one, the diagnosis shown (the "likely mistake") is
   judged by the human judgement stored in outside_cases.JUDGED when the diagnosis is the one that was judged,
   else by the case's phrases (a `wrong` phrase: named wrong; a `right` phrase: named right; no diagnosis: facts
   only) and, when it matches neither, flagged UNJUDGED for a human to read. Every failing check's message is
   scanned for the case's `wrong` phrases too (a check that leads the student the wrong way).

    PYTHONPATH=. python benchmarks/outside_measure.py [--lessons lesson01 ...] [--json docs/data/outside_measure.json]

Prints one line per case, then the counts per lesson. Exit status 0 (a measure, not a test).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))


def edited(src: str, edits) -> str:
    for old, new in edits:
        if src.count(old) != 1:
            raise ValueError(f"edit {old[:60]!r} occurs {src.count(old)} times in the cell")
        src = src.replace(old, new)
    return src


def prove(lesson_id: str, exercise: str, src: str, oracle, base_ns: dict) -> list[str]:
    """The oracle's failures on the solved namespace with `src` run over it."""
    ns = dict(base_ns)
    exec(compile(src, f"<outside {lesson_id} {exercise}>", "exec", dont_inherit=True), ns)
    return oracle(ns)


def matches(text: str | None, phrases) -> list[str]:
    low = (text or "").lower()
    return [p for p in phrases if p.lower() in low]


def classify(case: dict, res, judged: dict | None, mistakes=()) -> dict:
    """What the student was shown, and whether its cause is the student's (`judge_diagnosis`); the failing checks
    whose message holds a `wrong` phrase are listed (a check that leads the student the wrong way)."""
    out = {"status": res.status, "diagnosis": res.diagnosis}
    failing = [c for c in res.checks if c.status not in ("passed", "skipped")]
    out["lead_check"] = f"{failing[0].name}: {failing[0].message}" if failing else None
    out["misleading_checks"] = [f"{c.name}: {c.message}" for c in failing if matches(c.message, case["wrong"])]
    if res.status == "passed":
        out["class"] = "accepted"
        return out
    out.update(judge_diagnosis(case, res.diagnosis, judged, mistakes))
    return out


def judge_diagnosis(case: dict, d: str | None, judged, mistakes=()) -> dict:
    """class and by (and reason, diagnosis_id, source) of a rejected case's diagnosis `d`: the human judgement
    when it is of this very diagnosis; else facts when nothing or a fact (kinds.py) is said; else by phrases, a
    `wrong` phrase or no phrase at all leaving it UNJUDGED for a human to read."""
    from graders.engine.kinds import diagnosis_id, is_catalogued, is_fact

    ident = diagnosis_id(d, mistakes, case["exercise"])
    judged = next((j for j in ([judged] if isinstance(judged, dict) else judged or []) if j.get("diagnosis") == d), None)
    out = {"diagnosis_id": ident,
           "source": None if not d else "catalogue" if is_catalogued(ident) else "mutant"
           if str(ident).startswith("mutation:") else "structural"}
    if judged:
        out["class"], out["reason"], out["by"] = judged["verdict"], judged["reason"], "judged"
    elif not d:
        out["class"], out["by"] = "facts", "no diagnosis"
    elif matches(d, case["wrong"]):
        out["class"], out["by"] = "unjudged", f"wrong phrase {matches(d, case['wrong'])}: read it"
    elif is_fact(ident):
        out["class"], out["by"] = "facts", f"{ident} (a fact)"
    elif matches(d, case["right"]):
        out["class"], out["by"] = "right", f"phrase {matches(d, case['right'])} (not read by a human)"
    else:
        out["class"], out["by"] = "unjudged", "a cause that matches neither list: read it"
    return out


def rejudge(row: dict, case: dict, judged: dict | None) -> dict:
    """A stored row judged again (the stored judgements, the case's phrases and not_wrong as they are now)."""
    row = {k: v for k, v in row.items() if k != "alternative"} | (
        {"alternative": case["not_wrong"]} if case["not_wrong"] else {})
    if row.get("class") in (None, "accepted"):
        return row
    from graders.registry import find_lesson

    mistakes = getattr(importlib.import_module(find_lesson(row["lesson"]).module), "MISTAKES", ())
    return dict(row, **judge_diagnosis(case, row.get("diagnosis"), judged, mistakes))


def report(results: list[dict], json_path: str | None, command: str | None = None) -> dict:
    """Counts per lesson (printed; written with every row to `json_path`)."""
    per = {}
    for row in results:
        if row.get("alternative"):
            c = per.setdefault(row["lesson"], Counter())
            c["alternatives"] += 1
            c["alternatives accepted"] += row.get("class") == "accepted" and not row["proven_wrong"]
            continue
        if not row["proven_wrong"]:
            continue
        c = per.setdefault(row["lesson"], Counter())
        c["cases"] += 1
        if "class" in row:
            c["rejected"] += row["class"] != "accepted"
            c[row["class"]] += 1
    total = sum(per.values(), Counter())
    print("\nlesson    cases rejected right wrong facts unjudged alternatives accepted")
    for lid in sorted(per) + ["all"]:
        c = total if lid == "all" else per[lid]
        print(f"{lid:9} {c['cases']:5} {c['rejected']:8} {c['right']:5} {c['wrong']:5} {c['facts']:5} {c['unjudged']:8}"
              f" {c['alternatives']:12} {c['alternatives accepted']:8}")
    unproven = [r["id"] for r in results if not r["proven_wrong"] and not r.get("alternative")]
    if unproven:
        print(f"not proven wrong outside the grader (left out of the counts): {unproven}")
    flagged = [r["id"] for r in results if r.get("class") == "unjudged" or r.get("misleading_checks")]
    if flagged:
        print(f"for a human to read (unjudged diagnoses, misleading checks): {flagged}")
    out = {"command": command or "python benchmarks/outside_measure.py --json " + (json_path or "FILE"),
           "counts": {k: dict(v) for k, v in per.items()} | {"all": dict(total)},
           "unproven": unproven, "flagged": flagged, "cases": results}
    if json_path:
        Path(json_path).write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lessons", nargs="*", help="only these lessons (default: all)")
    ap.add_argument("--cases", nargs="*", help="only these case ids")
    ap.add_argument("--json", help="write the per-case results and the counts here")
    ap.add_argument("--no-grade", action="store_true", help="only prove the cases wrong (no grading)")
    ap.add_argument("--merge", nargs="*", help="no grading: join these stored runs (a later file's row replaces an "
                    "earlier one's), apply the stored judgements, count")
    args = ap.parse_args(argv)
    if args.merge:
        from outside_cases import CASES, JUDGED

        rows = {}
        for f in args.merge:
            rows.update({r["id"]: r for r in json.loads(Path(f).read_text())["cases"]})
        report([rejudge(rows[c["id"]], c, JUDGED.get(c["id"])) for c in CASES if c["id"] in rows], args.json,
               "python benchmarks/outside_measure.py " + " ".join(argv if argv is not None else sys.argv[1:]))
        return 0

    from harness import check_one, reference, with_code
    from outside_cases import CASES, JUDGED
    from outside_oracles import ORACLES

    from graders.engine import solved_cell
    from graders.registry import find_lesson

    cases = [c for c in CASES if (not args.lessons or c["lesson"] in args.lessons)
             and (not args.cases or c["id"] in args.cases)]
    results, solution_ok = [], {}
    tmp = Path(tempfile.mkdtemp(prefix="outside-"))
    for case in cases:
        lid, ex = case["lesson"], case["exercise"]
        lesson = find_lesson(lid)
        src = solved_cell(lid, ex)
        ns, _ = reference(lesson)
        oracle = ORACLES[lid, ex]
        if (lid, ex) not in solution_ok:
            solution_ok[lid, ex] = prove(lid, ex, src, oracle, ns)
            if solution_ok[lid, ex]:
                print(f"ORACLE FAILS THE SOLUTION {lid} {ex}: {solution_ok[lid, ex]}")
        row = {"id": case["id"], "lesson": lid, "exercise": ex, "what": case["what"]}
        try:
            row["proof"] = prove(lid, ex, edited(src, case["edits"]), oracle, ns)
        except Exception as exc:  # noqa: BLE001 - a cell that does not even run is wrong too
            row["proof"] = [f"the cell raised {type(exc).__name__}: {exc}"]
        if solution_ok[lid, ex]:
            row["proof"] = []  # an oracle that fails the solution proves nothing
        row["proven_wrong"] = bool(row["proof"])
        if case["not_wrong"]:
            row["alternative"] = case["not_wrong"]  # a correct alternative: the oracle must agree, the grader accept
        if not args.no_grade:
            t = time.perf_counter()
            path = with_code(lesson, ex, edited(src, case["edits"]), tmp, f"{case['id']}.ipynb")
            res = check_one(lesson, path, ex, mutants=True)
            row.update(classify(case, res, JUDGED.get(case["id"]),
                                getattr(importlib.import_module(lesson.module), "MISTAKES", ())))
            row["grade_s"] = round(time.perf_counter() - t, 2)
        results.append(row)
        print(f"{case['id']}: proven_wrong={row['proven_wrong']} {row.get('status', '')} {row.get('class', '')} "
              f"[{row.get('by', '')}]\n    what: {case['what']}\n    diagnosis: {row.get('diagnosis')}\n"
              f"    lead: {(row.get('lead_check') or '')[:300]}\n    proof: {'; '.join(row['proof'])[:300]}"
              + "".join(f"\n    MISLEADING CHECK: {m[:300]}" for m in row.get("misleading_checks", [])),
              flush=True)

    report(results, args.json, "python benchmarks/outside_measure.py " + " ".join(argv if argv is not None else sys.argv[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
