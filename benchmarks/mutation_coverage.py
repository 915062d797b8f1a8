"""The mutation engine (issue 44 item 2, graders/engine/mutations.py), measured.

    python benchmarks/mutation_coverage.py --fired                      # operators and candidates, every lesson
    python benchmarks/mutation_coverage.py --withheld lesson01 lesson02 # catalogue mistakes named by a mutant
    python benchmarks/mutation_coverage.py --cost --before /tmp/base lesson01  # reference build, cache, check

--fired: per lesson and exercise, which operator families fire on the solved defining cell and how many
candidates (after the cap) it gives; pure ast, no torch run.
--exact: per lesson, the catalogue mistakes whose code a candidate is exactly (ast-normalised); pure ast.
--withheld: each catalogued mistake (edits) planted, graded in process with its own catalogue entry withheld
and the engine's mutants (every candidate, or --budget seconds per exercise as the reference child runs
them): named by a mutant (the library found it), by another catalogued mistake, structurally, as a fact
(no cause), or not at all; `--json FILE` merges each lesson's counts and per-mistake outcome into FILE
(docs/data/mutation_coverage.json).
--cost: against `--before` (a checkout of the code before, e.g. `git archive main | tar -x -C /tmp/base`),
in one run, interleaved: the reference build (`course check LESSON --solution` with an empty cache), the
cache file's size, and `course check` of a notebook with one catalogued mistake and of the solved notebook
with the reference cached (best of --runs, interleaved).
"""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(HERE), str(HERE / "tests")]


def fired() -> None:
    from graders.engine.mistakes import solved_cell
    from graders.engine.mutations import CAP, fired as sites, mutants
    from graders.registry import LESSONS

    every = []
    for lesson in LESSONS:
        rows = []
        for ex in lesson.exercises:
            try:
                src = solved_cell(lesson.id, ex.name)
            except LookupError:
                continue
            rows.append((ex.name, sites(src, ex.name), len(mutants(src, ex.name))))
            every.append(rows[-1][2])
        fams = sorted({f for _, s, _ in rows for f in s})
        print(f"{lesson.id}: {len(fams)} operator families fire ({', '.join(fams)}); candidates per exercise "
              + ", ".join(f"{n} {c}" for n, _, c in rows))
    every.sort()
    print(f"all: {len(every)} exercises, candidates per exercise min {every[0]}, median "
          f"{every[len(every) // 2]}, max {every[-1]}; {sum(c >= CAP for c in every)} at the cap of {CAP}")


def exact(lessons: list[str]) -> None:
    """Per lesson: the catalogue mistakes (edits) for which a candidate's code *is* the mistake's (the same
    source after ast normalisation). Pure ast, no torch run: a lower bound on what --withheld can name, and
    no proof of it (an earlier candidate with the same observations is named first)."""
    import ast

    import harness
    from graders.engine import mistake_source
    from graders.engine.mistakes import solved_cell
    from graders.engine.mutations import mutants
    from graders.registry import find_lesson

    for lid in lessons:
        hits, n = [], 0
        for m in harness.mistakes_of(find_lesson(lid)):
            if not m.edits:
                continue
            n += 1
            want = ast.unparse(ast.parse(mistake_source(m, lid)))
            op = next((c.operator for c in mutants(solved_cell(lid, m.exercise), m.exercise)
                       if ast.unparse(ast.parse(c.source)) == want), None)
            if op:
                hits.append(f"{m.id}={op}")
        print(f"{lid}: {len(hits)}/{n} catalogue mistakes are a candidate's exact code ({', '.join(hits)})")


def _record(path: Path, lesson: str, row: dict) -> None:
    """Merge one lesson's row into the JSON file at `path` (other lessons' rows, from other runs, kept)."""
    import json

    data = json.loads(path.read_text()) if path.exists() else {}
    data.setdefault("lessons", {})[lesson] = row
    data["command"] = "python benchmarks/mutation_coverage.py --withheld LESSON --json " + str(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)


def withheld(lessons: list[str], budget: float, json_path: Path | None = None) -> None:
    import harness
    from graders.registry import find_lesson

    harness_budget = budget
    if harness_budget != float("inf"):  # as the reference child: a time budget per exercise
        from graders.engine import mutations

        orig = mutations.probe_mutants

        def bounded(*a, **k):
            k["budget"] = harness_budget
            return orig(*a, **k)

        harness.probe_mutants = bounded  # noqa
        import graders.engine.mutations as gm
        gm.probe_mutants = bounded
    tmp = Path(tempfile.mkdtemp())
    total = {"mutant": 0, "catalogue": 0, "structural": 0, "fact": 0, "none": 0, "passed": 0}
    for lid in lessons:
        lesson = find_lesson(lid)
        counts = dict.fromkeys(total, 0)
        named, rows = [], []
        start, load = time.perf_counter(), os.getloadavg()[0]
        for m in harness.mistakes_of(lesson):
            if not m.edits:
                continue
            ex = harness.check_one(lesson, harness.with_mistake(lesson, m, tmp), m.exercise, mutants=True,
                                   withheld=[m.id])
            ident = ex.diagnosis_id or ""
            kind = ("passed" if ex.status == "passed" else "mutant" if ident.startswith("mutation:")
                    else "structural" if ident.startswith("structural:") else "fact" if ident.startswith("fact:")
                    else "none" if not ident or ident == "other" else "catalogue")
            counts[kind] += 1
            rows.append({"exercise": m.exercise, "mistake": m.id, "status": ex.status, "outcome": kind,
                         "diagnosis_id": ident or None})
            if kind == "mutant":
                named.append(f"{m.id}={ident.removeprefix('mutation:')}")
        n = sum(counts.values())
        for k in total:
            total[k] += counts[k]
        cand = {k: v for (l, _), v in harness._MUTANT_COUNTS.items() if l == lid for k, v in [(_, v)]}
        kept = sum(v["kept"] for v in cand.values())
        tried = sum(v["tried"] for v in cand.values())
        skipped = sum(v["skipped"] for v in cand.values())
        reused = sum(v.get("reused", 0) for v in cand.values())
        print(f"{lid}: {counts['mutant']}/{n} catalogue mistakes named by a mutant ({', '.join(named)}); "
              f"by another catalogue entry {counts['catalogue']}, structural {counts['structural']}, a fact "
              f"{counts['fact']}, none {counts['none']}; mutants tried {tried}, kept {kept}, skipped {skipped}; check results reused {reused}", flush=True)
        if json_path is not None:
            import torch

            _record(json_path, lid, {
                "counts": counts, "mistakes": rows, "mutants": {"tried": tried, "kept": kept, "skipped": skipped},
                "budget_s_per_exercise": None if budget == float("inf") else budget,
                "seconds": round(time.perf_counter() - start, 1), "load_average_1min_at_start": round(load, 2),
                "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "torch": torch.__version__})
    n = sum(total.values())
    print(f"all: {total['mutant']}/{n} ({total['mutant'] / max(n, 1):.0%}) named by a mutant, {total}")


def _check(tree: Path, cache: Path, lesson: str, notebook: str | None) -> float:
    env = dict(os.environ, PYTHONPATH=str(tree), COURSE_CACHE_DIR=str(cache))
    args = [sys.executable, "-m", "course_cli", "check", lesson] + (["--notebook", notebook] if notebook else ["--solution"])
    t = time.perf_counter()
    subprocess.run(args, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def cost(before: Path, lessons: list[str], runs: int = 2) -> None:
    import harness
    from graders.registry import find_lesson

    for lid in lessons:
        lesson = find_lesson(lid)
        m = next(m for m in harness.mistakes_of(lesson) if m.edits)
        tmp = Path(tempfile.mkdtemp())
        nbs = {"one mistake": str(harness.with_mistake(lesson, m, tmp)), "passing": str(lesson.solution_path)}
        times = {}
        for label, tree in (("before", before), ("after", HERE)):
            cache = tmp / f"cache-{label}"
            build = _check(tree, cache, lid, None)  # an empty cache: the reference (and mistakes, mutants) built
            size = sum(p.stat().st_size for p in cache.glob("*.pt"))
            times[label] = (build, size)
        checks = {(label, kind): [] for label in ("before", "after") for kind in nbs}
        for _ in range(runs):  # interleaved, the reference cached
            for kind, nb in nbs.items():
                for label, tree in (("before", before), ("after", HERE)):
                    checks[label, kind].append(_check(tree, tmp / f"cache-{label}", lid, nb))
        (bb, bs), (ab, as_) = times["before"], times["after"]
        load = os.getloadavg()[0]
        print(f"{lid}: reference build before {bb:.1f} s, after {ab:.1f} s ({ab / bb:.2f}x); cache {bs / 1e6:.2f} MB "
              f"-> {as_ / 1e6:.2f} MB ({as_ / max(bs, 1):.2f}x); load {load:.1f}", flush=True)
        for kind in nbs:
            cb, ca = min(checks["before", kind]), min(checks["after", kind])
            what = f"`{m.id}`" if kind == "one mistake" else "the solution"
            print(f"  course check --notebook ({kind}: {what}), the reference cached, best of {runs}: before "
                  f"{cb:.2f} s, after {ca:.2f} s ({ca / cb:.2f}x)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("lessons", nargs="*", default=[])
    ap.add_argument("--fired", action="store_true")
    ap.add_argument("--withheld", action="store_true")
    ap.add_argument("--exact", action="store_true", help="catalogue mistakes that are a candidate's exact code")
    ap.add_argument("--budget", type=float, default=float("inf"), help="seconds per exercise (default: all)")
    ap.add_argument("--json", type=Path, help="--withheld: merge each lesson's counts and rows into this file")
    ap.add_argument("--cost", action="store_true")
    ap.add_argument("--before", type=Path)
    ap.add_argument("--runs", type=int, default=2, help="--cost: interleaved runs of each check (best is kept)")
    args = ap.parse_args()
    if args.fired:
        fired()
    if args.exact:
        exact(args.lessons)
    if args.withheld:
        withheld(args.lessons, args.budget, args.json)
    if args.cost:
        if not args.before:
            ap.error("--cost needs --before")
        cost(args.before, args.lessons, args.runs)


if __name__ == "__main__":
    main()
