"""`course report`: one self-contained HTML page about a graded class, from `course grade --out results.json`.

The page answers, first, who needs help and with what: the graded students below half the points, lowest
first, each with the misconception named per exercise; then the misconceptions by how many students share
them (counted by the catalogued mistake's id or the structural kind, graders/engine/kinds.py, never by the
sentence, whose numbers differ from student to student), each with who they are and the later exercises that
failed because of it (registry `depends`: the cascade is counted under the exercise that caused it); the
exercises the class missed (OUTLIER_GAP, MIN_FLAGGED); every student's verdicts in one sortable table; then the
score histogram, pass rates, errors and timeouts, and with the students' progress files the time to pass.
NOT GRADED submissions (the grader could not read or run them) and students who submitted nothing are counted
apart and left out of the scores and rates. Every number sits in an element's data-attributes, so a test (or a
script) reads it back. Plots are matplotlib figures inlined as SVG; the one script is inline (column sorting);
the page loads nothing from the network.
"""

from __future__ import annotations

import html
import io
import json
import re
import statistics
from pathlib import Path

from graders.engine.kinds import is_catalogued, is_cause, is_fact
from graders.engine.results import LessonResult

# flagged: own failure rate ≥ the mean own failure rate of the lesson's other exercises + 15 points, and at least
# 2 students: a class where one exercise is clearly the hardest (20 points above the rest) sees it flagged
OUTLIER_GAP = 0.15
MIN_FLAGGED = 2
HELP_BELOW = 0.6  # who needs help: a graded student below this share of the lesson's points (--help-below)
GRADED, NOT_GRADED, NOT_SUBMITTED = "graded", "NOT GRADED", "not submitted"
TOP_DIAGNOSES = 3  # per exercise
HIST_BINS = 10
GENERATOR = "attention-course report"


# ----------------------------------------------------------------------------------------------
# The numbers


def histogram(scores: list[float], max_score: float, bins: int | None = None) -> list[dict]:
    """Equal bins over [0, max_score]: one per point when the maximum is a whole number up to 30, else HIST_BINS.
    A score falls in bin ⌊score / width⌋, the top score in the last bin."""
    if bins is None:
        bins = int(max_score) if max_score == int(max_score) and 1 <= max_score <= 30 else HIST_BINS
    width = max_score / bins if max_score > 0 else 1.0
    counts = [0] * bins
    for s in scores:
        counts[min(bins - 1, max(0, int(s / width + 1e-9)))] += 1
    return [{"lo": round(k * width, 4), "hi": round((k + 1) * width, 4), "count": c} for k, c in enumerate(counts)]


def outliers(rates: dict[str, float], failures: dict[str, int] | None = None) -> list[dict]:
    """Exercises the class missed: own failure rate (1 − `rates`, cascades from an earlier exercise not counted)
    at least OUTLIER_GAP above the mean own failure rate of the lesson's other exercises, failed by at least
    MIN_FLAGGED students (`failures`, when given)."""
    found = []
    for ex, rate in rates.items():
        others = [1 - r for e, r in rates.items() if e != ex]
        if not others:
            continue
        fail, rest = 1 - rate, sum(others) / len(others)
        if fail - rest >= OUTLIER_GAP - 1e-9 and (failures is None or failures.get(ex, 0) >= MIN_FLAGGED):
            found.append({"exercise": ex, "failure_rate": round(fail, 3), "others": round(rest, 3)})
    return found


_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[\\/][^\s\"'`:,;()<>\\/]+){2,}")


def anonymise(text: str, names: list[str]) -> str:
    """Paths cut to their last part, and every student's name replaced by <student>."""
    text = _PATH.sub(lambda m: "…/" + re.split(r"[\\/]", m.group(0))[-1], text)
    return _names_pattern(tuple(names)).sub("<student>", text)


_NAMES: dict[tuple, re.Pattern] = {}


def _names_pattern(names: tuple) -> re.Pattern:
    """One pattern for every name, longest first, whole words only (compiled once per class)."""
    if names not in _NAMES:
        alts = "|".join(re.escape(n) for n in sorted((n for n in names if n), key=len, reverse=True))
        _NAMES.clear()
        _NAMES[names] = re.compile(rf"(?<![\w])(?:{alts})(?![\w])" if alts else r"(?!x)x")
    return _NAMES[names]


def example_message(ex) -> str:
    for c in ex.checks:
        if c.status == ex.status and c.message:
            return c.message
    return ex.reason


def load_progress(folder: Path) -> tuple[dict[str, dict], list[str]]:
    """Students' progress stores under `folder`: <student>/.course/progress.json, <student>/progress.json or
    <student>.json. Returns ({student: store}, [files that could not be read])."""
    folder = Path(folder)
    found, bad = {}, []
    candidates = [(p.parent.parent.name, p) for p in sorted(folder.glob("*/.course/progress.json"))]
    candidates += [(p.parent.name, p) for p in sorted(folder.glob("*/progress.json"))]
    candidates += [(p.stem, p) for p in sorted(folder.glob("*.json"))]
    for student, path in candidates:
        if student in found:
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict) or not isinstance(data.get("lessons"), dict):
                raise ValueError("not a progress store")
            found[student] = data
        except (OSError, ValueError) as exc:
            bad.append(f"{path.relative_to(folder)} ({type(exc).__name__})")
    return found, bad


def time_to_pass(stores: dict[str, dict], lesson: str, exercises: list[str]) -> list[dict]:
    """Per exercise: for each student with attempts at the lesson, the seconds from their first attempt to the
    first attempt where the exercise passed, and that attempt's number; medians; how many never passed."""
    per = {e: {"seconds": [], "attempts": [], "never": 0} for e in exercises}
    for store in stores.values():
        try:
            attempts = store.get("lessons", {}).get(lesson, {}).get("attempts") or []
            attempts = sorted((a for a in attempts if isinstance(a, dict)), key=lambda a: float(a["time"]))
            if not attempts:
                continue
            t0 = float(attempts[0]["time"])
            found = {}
            for e in exercises:
                found[e] = next((i for i, a in enumerate(attempts)
                                 if ((a.get("exercises") or {}).get(e) or {}).get("status") == "passed"), None)
        except (AttributeError, KeyError, TypeError, ValueError):
            continue  # a store of another shape: skipped rather than guessed at
        for e, k in found.items():
            if k is None:
                per[e]["never"] += 1
            else:
                per[e]["seconds"].append(float(attempts[k]["time"]) - t0)
                per[e]["attempts"].append(k + 1)
    rows = []
    for e, d in per.items():
        rows.append({"exercise": e, "passed": len(d["seconds"]), "never": d["never"], "seconds": d["seconds"],
                     "median_seconds": round(statistics.median(d["seconds"]), 1) if d["seconds"] else None,
                     "median_attempts": statistics.median(d["attempts"]) if d["attempts"] else None})
    return rows


def category(res: LessonResult) -> str:
    """graded, NOT GRADED (the grader could not read or run the notebook: fix and re-grade) or not submitted."""
    first = res.exercises[0].checks[0] if res.exercises and res.exercises[0].checks else None
    if first is not None and first.kind == "absent" and first.name == "submission":  # verdict.missing_result's rows
        return NOT_SUBMITTED
    if res.not_graded or any(ex.checks and ex.checks[0].kind == "grader" and ex.status in ("error", "timeout")
                             for ex in res.exercises):
        return NOT_GRADED
    return GRADED


def look_first(ex, cell: dict, group) -> dict:
    """What to look at first in a student's first exercise that failed on its own: the named cause, the group of
    the same unnamed behaviour, or what the status says (not attempted, an error, a timeout)."""
    if ex.status == "failed" and is_cause(ex.diagnosis_id):
        what = f"named cause: {misconception_label(ex.diagnosis_id, ex.diagnosis)}"
    elif ex.status == "failed" and group is not None and len(group.who) > 1:
        what = f"no named cause; shares group {group.id} with {len(group.who) - 1} other(s)"
    elif ex.status == "failed":
        what = "no named cause; " + ("a " + misconception_label(ex.diagnosis_id, None) if is_fact(ex.diagnosis_id)
                                     else "its first failing check")
    elif ex.status == "not_implemented":
        what = "not attempted"
    else:
        what = ex.status.replace("_", " ") + " in their code"
    return {"exercise": ex.id, "what": what, "group": cell.get("group")}


def misconception_label(ident: str | None, text: str | None) -> str:
    """What a misconception is called on the page: a catalogued mistake's id as is, a reproduced mutant by its
    operator (`scale-twice (reproduced edit)`), a structural cause by its kind (`nan-rows (structural)`), a
    fact about the numbers as one (`fact: scale`: not a misconception, grouped after the causes), a
    diagnosis of no known shape as `other`."""
    if not ident:
        return ""
    if is_fact(ident):
        return "fact: " + ident.split(":", 1)[-1]
    for prefix, said in (("structural:", " (structural)"), ("mutation:", " (reproduced edit)")):
        if ident.startswith(prefix):
            return ident.removeprefix(prefix) + said
    return ident


def report_data(lesson: str | None, results: dict[str, LessonResult], stores: dict[str, dict] | None = None,
                anonymous: bool = False, help_below: float = HELP_BELOW) -> dict:
    """Everything the page shows, as plain data. Misconceptions are counted by their stable id (a catalogued
    mistake's id or a structural kind: graders/engine/kinds.py), never by their sentence; an exercise that
    failed while an exercise it calls failed too (registry `depends`, `course check`'s "fix … first") is
    counted under that exercise as a cascade, not as a failure of its own; NOT GRADED and not-submitted
    submissions are counted apart and left out of the scores and rates."""
    from course_cli.classes.batch import summary
    from course_cli.instructor.unnamed import groups as behaviours
    from course_cli.render import blocked_by

    names = sorted(results)
    alias = {s: (f"student {i + 1}" if anonymous else s) for i, s in enumerate(names)}
    rank = {alias[s]: i for i, s in enumerate(names)}  # the page's names back to the results' order
    cats = {s: category(results[s]) for s in names}
    graded = [s for s in names if cats[s] == GRADED]
    info = summary({s: results[s] for s in graded})
    max_score = max((results[s].max_score for s in names), default=0.0)
    scores = [results[s].score for s in graded]
    order = [ex.id for ex in (results[graded[0]] if graded else results[names[0]]).exercises]
    unnamed = behaviours({s: results[s] for s in graded}, lesson)  # failures with no named cause, by behaviour
    group_of = {(s, g.exercise): g for g in unnamed for s in g.who}

    # per student: each exercise's verdict, its misconception, and the earlier exercises it fails because of
    students, groups, own_fail = [], {}, {e: 0 for e in order}
    cascaded = {e: 0 for e in order}
    caused = {e: {} for e in order}  # exercise -> {downstream exercise: count}
    for s in names:
        res = results[s]
        blockers = blocked_by(res.lesson or lesson or "", res) if cats[s] == GRADED else {}
        row = {"student": alias[s], "category": cats[s], "score": res.score if cats[s] == GRADED else None,
               "max_score": res.max_score, "exercises": {}, "misconceptions": [], "look_first": None,
               "note": (anonymise(res.note, names) if anonymous else res.note) if res.note else ""}
        for ex in res.exercises:
            cell = {"status": ex.status, "misconception": None, "diagnosis": None, "cause": None}
            if cats[s] == GRADED and ex.status not in ("passed", "skipped"):
                if ex.id in blockers:
                    cell["cause"] = blockers[ex.id]
                    cascaded[ex.id] = cascaded.get(ex.id, 0) + 1
                    for d in blockers[ex.id]:
                        caused.setdefault(d, {})[ex.id] = caused.get(d, {}).get(ex.id, 0) + 1
                else:
                    own_fail[ex.id] = own_fail.get(ex.id, 0) + 1
                    if ex.status == "failed":
                        ident = ex.diagnosis_id or ("other" if ex.diagnosis else "undiagnosed")
                        cell["misconception"], cell["diagnosis"] = ident, ex.diagnosis
                        row["misconceptions"].append({"exercise": ex.id, "misconception": ident})
                        g = group_of.get((s, ex.id))
                        if g is not None:
                            cell["group"] = g.id
                        if (ex.id, ident) not in groups:  # the first student's message is the example
                            groups[ex.id, ident] = {"exercise": ex.id, "misconception": ident,
                                                    "label": misconception_label(ident, ex.diagnosis), "who": [],
                                                    "example": anonymise(ex.diagnosis or example_message(ex), names),
                                                    "catalogued": is_catalogued(ident), "fact": is_fact(ident)}
                        groups[ex.id, ident]["who"].append(alias[s])
            row["exercises"][ex.id] = cell
            if row["look_first"] is None and cats[s] == GRADED and ex.status not in ("passed", "skipped") \
                    and not cell["cause"]:
                row["look_first"] = look_first(ex, cell, group_of.get((s, ex.id)))
        students.append(row)

    graded_n = len(graded)
    rates = {e: (1 - own_fail.get(e, 0) / graded_n) if graded_n else 1.0 for e in order}
    position = {e: i for i, e in enumerate(order)}
    misconceptions = sorted(groups.values(), key=lambda g: (g["fact"], -len(g["who"]),  # facts after causes
                                                              position.get(g["exercise"], 99), g["misconception"]))
    by_alias = {r["student"]: r for r in students}
    for g in misconceptions:
        g["cascade"] = {}  # the later exercises these students failed because of this one
        for a in g["who"]:
            for e, cell in by_alias[a]["exercises"].items():
                if cell["cause"] and g["exercise"] in cell["cause"]:
                    g["cascade"][e] = g["cascade"].get(e, 0) + 1
        g["count"] = len(g["who"])
        g["who"] = sorted(g["who"], key=rank.__getitem__)
    undiagnosed = {e: groups[e, "undiagnosed"]["count"] if (e, "undiagnosed") in groups else 0 for e in order}

    help_line = help_below * max_score
    needs_help = sorted((r for r in students if r["category"] == GRADED and r["score"] < help_line - 1e-9),
                        key=lambda r: (r["score"], rank[r["student"]]))

    trouble = []
    for e in info["exercises"]:
        ex_id = e["exercise"]
        errs = [x for x in info["errors"] if x["exercise"] == ex_id]
        trouble.append({"exercise": ex_id, "errors_code": sum(x["kind"] == "code" for x in errs),
                        "timeouts": sum(x["exercise"] == ex_id for x in info["timeouts"])})
    ungraded = []
    for s in names:
        if cats[s] != GRADED:
            reason = results[s].not_graded or (results[s].exercises[0].reason if results[s].exercises else "")
            by_alias[alias[s]]["why"] = anonymise(reason, names) if anonymous else reason
            ungraded.append({"student": alias[s], "category": cats[s],
                             "reason": anonymise(reason, names) if anonymous else reason})

    exercises = []
    for e in info["exercises"]:
        ex_id = e["exercise"]
        exercises.append({**e, "students": graded_n, "own_failures": own_fail.get(ex_id, 0),
                          "cascaded": cascaded.get(ex_id, 0), "caused": caused.get(ex_id, {})})

    return {
        "lesson": lesson, "students": len(names), "graded": graded_n,
        "not_graded": sum(c == NOT_GRADED for c in cats.values()),
        "not_submitted": sum(c == NOT_SUBMITTED for c in cats.values()),
        "mean_score": round(sum(scores) / graded_n, 3) if graded_n else 0.0,
        "median_score": round(statistics.median(scores), 3) if scores else 0.0, "max_score": max_score,
        "histogram": histogram(scores, max_score),
        "exercises": exercises, "outliers": outliers(rates, own_fail),
        "misconceptions": misconceptions, "undiagnosed": undiagnosed, "trouble": trouble,
        "needs_help": [r["student"] for r in needs_help], "help_below": help_line, "help_share": help_below,
        "unnamed": [{**g.to_dict(), "who": sorted((alias[w] for w in g.who), key=rank.__getitem__),
                     "first": anonymise(g.first, names) if anonymous else g.first}
                    for g in unnamed if len(g.who) >= 2],
        "renamed": [{"student": r["student"], "note": r["note"]} for r in students if r["note"]],
        "per_student": students,
        "ungraded": ungraded,
        "time_to_pass": (time_to_pass(stores, lesson, order) if stores is not None else None),
    }


# ----------------------------------------------------------------------------------------------
# The plots (matplotlib, no pyplot: no global state, no display needed)


def _svg(fig, salt: str) -> str:
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": salt, "svg.fonttype": "path"}):
        fig.savefig(buf, format="svg", bbox_inches="tight")
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _figure(w: float, h: float):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), dpi=100)
    return fig, fig.subplots()


def plot_histogram(bins: list[dict], max_score: float) -> str:
    fig, ax = _figure(6.4, 2.8)
    ax.bar([b["lo"] for b in bins], [b["count"] for b in bins], width=[b["hi"] - b["lo"] for b in bins],
           align="edge", color="#4c78a8", edgecolor="white")
    ax.set_xlim(0, max(max_score, 1e-9))
    ax.set_xlabel("score")
    ax.set_ylabel("students")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig, "histogram")


def plot_pass_rates(exercises: list[dict], flagged: set[str]) -> str:
    fig, ax = _figure(6.4, 0.45 * len(exercises) + 0.9)
    names = [e["exercise"] for e in exercises][::-1]
    rates = [e["pass_rate"] * 100 for e in exercises][::-1]
    ax.barh(names, rates, color=["#e45756" if n in flagged else "#54a24b" for n in names])
    for y, r in enumerate(rates):
        ax.text(min(r + 1, 92), y, f"{r:.0f}%", va="center", fontsize=9)
    ax.set_xlim(0, 100)
    ax.set_xlabel("passed (% of submissions)")
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig, "pass-rates")


def plot_time_to_pass(rows: list[dict]) -> str:
    fig, ax = _figure(6.4, 0.45 * len(rows) + 0.9)
    shown = [r for r in rows if r["seconds"]][::-1]
    if shown:
        hours = [[s / 3600 for s in r["seconds"]] for r in shown]
        try:
            ax.boxplot(hours, orientation="horizontal", widths=0.5)
        except TypeError:  # matplotlib < 3.10
            ax.boxplot(hours, vert=False, widths=0.5)
        ax.set_yticks(range(1, len(shown) + 1), [r["exercise"] for r in shown])
    ax.set_xlabel("hours from the first check of the lesson to the exercise's first pass")
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(fig, "time-to-pass")


# ----------------------------------------------------------------------------------------------
# The page

CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #222; margin: 2em auto;
       max-width: 72em; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: .2em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: .6em 0; } td, th { padding: .2em .7em; border-bottom: 1px solid #eee;
       text-align: left; vertical-align: top; } td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
.lead { color: #555; } .flag { color: #b3261e; font-weight: 600; } .note { color: #666; font-size: .92em; }
pre.example { white-space: pre-wrap; background: #f6f6f6; padding: .4em .6em; margin: .2em 0; font-size: .85em; }
.row { display: flex; gap: 2em; align-items: flex-start; flex-wrap: wrap; }
figure { margin: .8em 0; } figure svg { max-width: 100%; height: auto; }
table.sortable th { cursor: pointer; user-select: none; } table.sortable th:hover { background: #f3f3f3; }
table.sortable th[data-dir="asc"]::after { content: " ▲"; } table.sortable th[data-dir="desc"]::after { content: " ▼"; }
#students { table-layout: fixed; width: 100%; } #students td, #students th { font-size: .84em;
       overflow-wrap: anywhere; padding: .2em .45em; } #students td.why { color: #555; }
.renamed { font-size: .8em; color: #a15c00; border: 1px solid #e0c080; border-radius: 3px; padding: 0 .25em; } .passed { color: #2e7d32; } .failed, .error { color: #b3261e; }
.timeout { color: #a15c00; } .not_implemented, .skipped, .cascade { color: #777; } .cat { color: #b3261e; }
details summary { cursor: pointer; color: #555; }
div.wide { overflow-x: auto; margin: 0 calc(50% - 50vw + 1.5em); }  /* the page's width, not the text's */
"""

# Click a column's header to sort by it (again to reverse); cells sort by their data-sort, numbers as numbers.
SORT_SCRIPT = """
for (const table of document.querySelectorAll("table.sortable")) {
  const heads = table.tHead.rows[0].cells;
  for (let i = 0; i < heads.length; i++) {
    heads[i].addEventListener("click", () => {
      const dir = heads[i].dataset.dir === "asc" ? "desc" : "asc";
      for (const h of heads) delete h.dataset.dir;
      heads[i].dataset.dir = dir;
      const body = table.tBodies[0], sign = dir === "asc" ? 1 : -1;
      const key = (r) => { const c = r.cells[i]; if (!c) return ""; return c.dataset.sort !== undefined ? c.dataset.sort : c.textContent; };
      const rows = Array.from(body.rows);
      rows.sort((a, b) => {
        const x = key(a), y = key(b), nx = Number(x), ny = Number(y);
        const cmp = x !== "" && y !== "" && !isNaN(nx) && !isNaN(ny) ? nx - ny : x.localeCompare(y);
        return sign * cmp || (Number(a.dataset.order) - Number(b.dataset.order));
      });
      for (const r of rows) body.appendChild(r);
    });
  }
}
"""

# every glyph in DejaVu Sans (Debian's and most Linux desktops' default; macOS and Windows have them too): the
# clock the terminal shows for a timeout (U+23F1) has no glyph there, and a page showed a box for it
SYMBOL = {"passed": "✓", "failed": "✗", "error": "!", "timeout": "◷", "not_implemented": "·", "skipped": "–"}
_RANK = {"failed": 0, "error": 1, "timeout": 2, "not_implemented": 3, "skipped": 4, "passed": 5}


def _e(x) -> str:
    from course_cli.safe_text import for_html

    return for_html(x, 20_000)


def _breakable(name: str) -> str:
    """An identifier that may wrap after an underscore or before an inner capital (a narrow column's header)."""
    return re.sub(r"(_)|(?<=[a-z])(?=[A-Z])", lambda m: (m.group(1) or "") + "<wbr>", _e(name))


def _pct(x: float) -> str:
    return f"{x * 100:.0f}%"


def _duration(s: float | None) -> str:
    if s is None:
        return "—"
    m = s / 60
    return f"{m / 60:.1f} h" if m >= 90 else f"{m:.0f} min"


def _num(x) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def _names(who: list[str], shown: int = 12) -> str:
    """Names, the first `shown` inline and the rest behind a disclosure (a big class's group stays one line)."""
    head = ", ".join(_e(w) for w in who[:shown])
    if len(who) <= shown:
        return head
    rest = ", ".join(_e(w) for w in who[shown:])
    return f"{head}, <details><summary>and {len(who) - shown} more</summary>{rest}</details>"


def _cell(ex_id: str, cell: dict) -> str:
    """One exercise's verdict in the per-student table: its status and misconception, or the exercise it
    failed because of."""
    st = cell["status"]
    mis, cause = cell.get("misconception"), cell.get("cause")
    attrs = (f'data-exercise="{_e(ex_id)}" data-status="{_e(st)}" data-misconception="{_e(mis or "")}" '
             f'data-cause="{_e(",".join(cause or []))}"')
    if cause:
        text, cls, tip = f"↳ {', '.join(cause)}", "cascade", f"fails because {', '.join(cause)} fails too"
        sort = f"{_RANK.get(st, 9) + 6}:{','.join(cause)}"
    else:
        label = misconception_label(mis, cell.get("diagnosis")) if mis else \
            "not attempted" if st == "not_implemented" else st.replace("_", " ")
        text = SYMBOL.get(st, "?") + ("" if st == "passed" else f" {label}")
        cls, tip, sort = st, cell.get("diagnosis") or "", f"{_RANK.get(st, 9)}:{mis or ''}"
    title = f' title="{_e(tip)}"' if tip else ""
    return f'<td class="{_e(cls)}" {attrs} data-sort="{_e(sort)}"{title}>{_breakable(text)}</td>'


def render(data: dict, title: str) -> str:
    flagged = {o["exercise"] for o in data["outliers"]}
    order = [e["exercise"] for e in data["exercises"]] or list(next(iter(data["per_student"]))["exercises"])
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f'<meta name="generator" content="{GENERATOR}">', '<link rel="icon" href="data:,">',
           f"<title>{_e(data['lesson'])}: class report</title><style>{CSS}</style></head><body>",
           f"<h1>{_e(data['lesson'])} — {_e(title)}: class report</h1>",
           f'<p class="lead" id="overview" data-students="{data["students"]}" data-graded="{data["graded"]}" '
           f'data-not-graded="{data["not_graded"]}" data-not-submitted="{data["not_submitted"]}" '
           f'data-mean-score="{data["mean_score"]:g}" data-median-score="{data["median_score"]:g}" '
           f'data-max-score="{data["max_score"]:g}">'
           f'{data["students"]} students: {data["graded"]} graded, {data["not_graded"]} NOT GRADED, '
           f'{data["not_submitted"]} not submitted'
           + (f' ({len(data["renamed"])} submitted under another file name, marked <i>renamed</i>)'
              if data["renamed"] else "") + f' · graded: mean score {data["mean_score"]:g} / '
           f'{data["max_score"]:g}, median {data["median_score"]:g}</p>']

    # --- who needs help
    rows = {r["student"]: r for r in data["per_student"]}
    out.append(f'<h2>Who needs help</h2><p class="note">Rule: a graded student whose score is below '
               f'{data["help_share"] * 100:.0f}% of the lesson\'s points (below {data["help_below"]:g} of '
               f'{data["max_score"]:g}; <code>course report --help-below SHARE</code> moves the line), lowest '
               "first, with what to look at first: the first exercise that failed on its own, and its named cause, "
               "its group of the same unnamed behaviour, or <i>not attempted</i>. An exercise that failed because "
               "an earlier one did (↳) is that earlier one's to fix.</p>")
    out.append('<ol id="needs-help">')
    for a in data["needs_help"]:
        r = rows[a]
        first = r["look_first"]
        lead = (f'look first at <b>{_e(first["exercise"])}</b>: {_e(first["what"])}' if first
                else "every exercise they did not pass fails because of another")
        rest = []
        for e, c in r["exercises"].items():
            if first and e == first["exercise"] or c["status"] in ("passed", "skipped") or c["cause"]:
                continue
            what = (misconception_label(c["misconception"], None) if c["status"] == "failed" else
                    "not attempted" if c["status"] == "not_implemented" else c["status"])
            rest.append(f'{_e(e)}: {_e(what)}')
        n_casc = sum(1 for c in r["exercises"].values() if c["cause"])
        if n_casc:
            rest.append(f'<span class="cascade">{n_casc} more because of an earlier exercise</span>')
        then = f'; then {"; ".join(rest)}' if rest else ""
        out.append(f'<li data-student="{_e(a)}" data-score="{r["score"]:g}" '
                   f'data-first="{_e(first["exercise"] if first else "")}" '
                   f'data-first-what="{_e(first["what"] if first else "")}"><b>{_e(a)}</b> '
                   f'({r["score"]:g} / {r["max_score"]:g}): {lead}{then}</li>')
    out.append("</ol>")
    if not data["needs_help"]:
        out.append("<p>No graded student is below that line.</p>")
    for cat, ident in ((NOT_GRADED, "not-graded"), (NOT_SUBMITTED, "not-submitted")):
        items = [u for u in data["ungraded"] if u["category"] == cat]
        what = ("could not be graded (fix the notebook or the grader, then re-grade them: their 0 is not a "
                "mark)" if cat == NOT_GRADED else "handed in nothing gradable")
        out.append(f'<p><b>{len(items)} {_e(cat)}</b>: submissions that {what}. They are counted apart and '
                   "left out of every score and rate below.</p>")
        out.append(f'<ul id="{ident}">' + "".join(
            f'<li data-student="{_e(u["student"])}"><b>{_e(u["student"])}</b>: {_e(u["reason"])}</li>'
            for u in items) + "</ul>")

    # --- misconceptions
    out.append("<h2>Misconceptions, by how many students share them</h2><p class=\"note\">Counted by the "
               "catalogued mistake's id (or, when no catalogued mistake matched, the structural kind of what the "
               "grader saw: <i>nan-rows (structural)</i>), on graded submissions; failures caused by an earlier "
               "exercise are counted under that exercise (the last column), not as mistakes of their own. "
               "<i>undiagnosed</i>: failed, matching no known mistake or shape. Rows labelled <i>fact:</i> come "
               "last: what the grader saw in the numbers where no cause reproduced, not a misconception.</p>")
    out.append('<table id="misconceptions" class="sortable"><thead><tr><th>exercise</th><th class="n">students'
               "</th><th>misconception</th><th>who</th><th>made these fail too</th></tr></thead><tbody>")
    for i, g in enumerate(data["misconceptions"]):
        casc = ", ".join(f"{_e(e)} ({n})" for e, n in g["cascade"].items())
        example = f'<pre class="example">{_e(g["example"])}</pre>' if g["example"] else ""
        out.append(f'<tr data-order="{i}" data-exercise="{_e(g["exercise"])}" data-misconception="{_e(g["misconception"])}" '
                   f'data-count="{g["count"]}" data-fact="{int(g.get("fact", False))}" data-cascade="{_e(json.dumps(g["cascade"]))}">'
                   f'<td>{_e(g["exercise"])}</td><td class="n">{g["count"]}</td>'
                   f'<td><b>{_e(g["label"])}</b>{example}</td><td>{_names(g["who"])}</td><td>{casc}</td></tr>')
    out.append("</tbody></table>")

    # --- unnamed behaviours
    out.append("<h2>Failures with no named cause, grouped by behaviour</h2><p class=\"note\">Graded submissions "
               "that failed an exercise on its own with no catalogued mistake named, grouped when they fail the "
               "same checks with the same messages (one grading run draws one set of inputs, so the same code "
               "gives the same messages). A group is a mistake the course does not name yet: "
               "<code>course draft-mistake RESULTS GROUP</code> writes its simplest example and one student's "
               "code as a draft catalogue entry.</p>")
    out.append('<table id="unnamed"><thead><tr><th>group</th><th class="n">students</th><th>differs first at'
               "</th><th>who</th></tr></thead><tbody>")
    for g in data["unnamed"]:
        out.append(f'<tr data-group="{_e(g["id"])}" data-exercise="{_e(g["exercise"])}" data-count="{g["students"]}">'
                   f'<td><code>{_e(g["id"])}</code></td><td class="n">{g["students"]}</td>'
                   f'<td>{g["students"]} students: same unnamed mistake in <code>{_e(g["exercise"])}</code>, '
                   f'differs first at <pre class="example">{_e(g["first"])}</pre></td><td>{_names(g["who"])}</td></tr>')
    out.append("</tbody></table>")
    if not data["unnamed"]:
        out.append("<p>No two students share a failure the course does not name.</p>")

    # --- flagged exercises
    out.append('<h2>What the class missed</h2><p class="note">Rule: an exercise is flagged when its own failure '
               "rate (graded submissions that did not pass it, leaving out those that failed because an earlier "
               f"exercise did) is at least {OUTLIER_GAP * 100:.0f} percentage points above the mean own failure "
               f"rate of the lesson's other exercises, and at least {MIN_FLAGGED} students failed it.</p>")
    out.append('<ul id="outliers">')
    for o in data["outliers"]:
        out.append(f'<li data-exercise="{_e(o["exercise"])}" data-failure-rate="{o["failure_rate"]:g}" '
                   f'data-others="{o["others"]:g}"><span class="flag">{_e(o["exercise"])}</span>: '
                   f'{_pct(o["failure_rate"])} did not pass it, against {_pct(o["others"])} on average for the '
                   "other exercises.</li>")
    out.append("</ul>")
    if not data["outliers"]:
        out.append("<p>No exercise stands out: the failures are spread evenly.</p>")

    # --- every student
    out.append('<h2>Every student</h2><p class="note">Sorted by score, lowest first (NOT GRADED and not submitted '
               "before them, with why, once); click a column's header to sort by it: an exercise's column groups "
               f"the students by verdict and misconception. {SYMBOL['passed']} passed · {SYMBOL['failed']} failed, "
               f"with the misconception · {SYMBOL['error']} error · {SYMBOL['timeout']} timeout · "
               f"{SYMBOL['not_implemented']} not attempted · ↳ failed because the named exercise fails too · "
               "<i>renamed</i>: submitted under another file name (graded; hover for the note).</p>")
    out.append('<div class="wide"><table id="students" class="sortable"><colgroup><col style="width:8em">'
               '<col style="width:3.5em"><col style="width:7em">' + "<col>" * len(order) + "</colgroup>"
               '<thead><tr><th>student</th><th class="n">score</th><th>status</th>'
               + "".join(f"<th>{_breakable(e)}</th>" for e in order) + "</tr></thead><tbody>")
    ordered = sorted(data["per_student"], key=lambda r: (r["score"] if r["score"] is not None else
                                                         (-2 if r["category"] == NOT_SUBMITTED else -1)))
    for i, r in enumerate(ordered):
        score = "" if r["score"] is None else f'{r["score"]:g}'
        sort = score or ("-2" if r["category"] == NOT_SUBMITTED else "-1")
        if r["category"] == GRADED:
            cells = "".join(_cell(e, r["exercises"][e]) if e in r["exercises"] else "<td></td>" for e in order)
        else:  # why, once, across the exercises' columns
            cells = (f'<td class="why" colspan="{len(order)}" data-why="{_e(r.get("why", ""))}" data-sort="">'
                     f'{_e(r.get("why", ""))}</td>')
        renamed = (f' <span class="renamed" title="{_e(r["note"])}">renamed</span>' if r["note"] else "")
        out.append(f'<tr data-order="{i}" data-student="{_e(r["student"])}" data-score="{score}" '
                   f'data-category="{_e(r["category"])}" data-renamed="{"1" if r["note"] else ""}">'
                   f'<td>{_e(r["student"])}{renamed}</td>'
                   f'<td class="n" data-sort="{sort}">{score or "—"}</td>'
                   f'<td class="{"" if r["category"] == GRADED else "cat"}">{_e(r["category"])}</td>{cells}</tr>')
    out.append("</tbody></table></div>")

    # --- scores
    out.append(f"<h2>Scores</h2><p class=\"note\">The {data['graded']} graded submissions.</p>")
    out.append(f'<div class="row"><figure>{plot_histogram(data["histogram"], data["max_score"])}</figure>')
    out.append('<table id="histogram"><tr><th>score from</th><th>to</th><th class="n">students</th></tr>')
    for i, b in enumerate(data["histogram"]):
        close = "]" if i == len(data["histogram"]) - 1 else ")"
        out.append(f'<tr data-lo="{b["lo"]:g}" data-hi="{b["hi"]:g}" data-count="{b["count"]}"><td>[{b["lo"]:g}</td>'
                   f'<td>{b["hi"]:g}{close}</td><td class="n">{b["count"]}</td></tr>')
    out.append("</table></div>")

    out.append("<h2>Pass rate per exercise</h2><p class=\"note\">Of the graded submissions; <i>own failures</i> "
               "leave out those that failed because an earlier exercise did (<i>cascaded</i>).</p>")
    out.append(f"<figure>{plot_pass_rates(data['exercises'], flagged)}</figure>")
    statuses = ["failed", "not_implemented", "error", "timeout", "skipped"]
    out.append('<table id="pass-rates"><tr><th>exercise</th><th class="n">points</th><th class="n">passed</th>'
               '<th class="n">pass rate</th>' + "".join(f'<th class="n">{s.replace("_", " ")}</th>' for s in statuses)
               + '<th class="n">own failures</th><th class="n">cascaded</th></tr>')
    for e in data["exercises"]:
        st = e["statuses"]
        attrs = " ".join(f'data-{s.replace("_", "-")}="{st.get(s, 0)}"' for s in statuses)
        cls = ' class="flag"' if e["exercise"] in flagged else ""
        out.append(f'<tr data-exercise="{_e(e["exercise"])}" data-passed="{e["passed"]}" '
                   f'data-students="{e["students"]}" data-pass-rate="{e["pass_rate"]:g}" {attrs} '
                   f'data-own-failures="{e["own_failures"]}" data-cascaded="{e["cascaded"]}">'
                   f'<td{cls}>{_e(e["exercise"])}</td><td class="n">{_num(e["max_points"])}</td>'
                   f'<td class="n">{e["passed"]}</td><td class="n">{_pct(e["pass_rate"])}</td>'
                   + "".join(f'<td class="n">{st.get(s, 0)}</td>' for s in statuses)
                   + f'<td class="n">{e["own_failures"]}</td><td class="n">{e["cascaded"]}</td></tr>')
    out.append("</table>")

    out.append("<h2>Errors and timeouts</h2><p class=\"note\">In graded submissions: the student's code raised, "
               "ran out of memory or ran past its time limit.</p>")
    out.append('<table id="errors"><tr><th>exercise</th><th class="n">errors</th><th class="n">timeouts</th></tr>')
    for t in data["trouble"]:
        out.append(f'<tr data-exercise="{_e(t["exercise"])}" data-errors-code="{t["errors_code"]}" '
                   f'data-timeouts="{t["timeouts"]}"><td>{_e(t["exercise"])}</td><td class="n">{t["errors_code"]}'
                   f'</td><td class="n">{t["timeouts"]}</td></tr>')
    out.append("</table>")

    if data["time_to_pass"] is not None:
        out.append("<h2>Time to pass</h2><p class=\"note\">From the students' progress files: the time from a "
                   "student's first <code>course check</code> of the lesson to the first check where the exercise "
                   "passed (wall-clock time, breaks included), and that check's number.</p>")
        out.append(f"<figure>{plot_time_to_pass(data['time_to_pass'])}</figure>")
        out.append('<table id="time-to-pass"><tr><th>exercise</th><th class="n">passed</th><th class="n">median time'
                   '</th><th class="n">median checks</th><th class="n">not yet passed</th></tr>')
        for r in data["time_to_pass"]:
            med_s = "" if r["median_seconds"] is None else f'{r["median_seconds"]:g}'
            med_a = "" if r["median_attempts"] is None else f'{r["median_attempts"]:g}'
            out.append(f'<tr data-exercise="{_e(r["exercise"])}" data-passed="{r["passed"]}" data-never="{r["never"]}" '
                       f'data-median-seconds="{med_s}" data-median-attempts="{med_a}"><td>{_e(r["exercise"])}</td>'
                       f'<td class="n">{r["passed"]}</td><td class="n">{_duration(r["median_seconds"])}</td>'
                       f'<td class="n">{med_a or "—"}</td><td class="n">{r["never"]}</td></tr>')
        out.append("</table>")
        if data.get("progress_unreadable"):
            out.append('<p class="note">Progress files that could not be read: '
                       + _e(", ".join(data["progress_unreadable"])) + "</p>")

    from course_cli.safe_text import for_script_json

    blob = for_script_json({k: v for k, v in data.items() if k != "time_to_pass"} | {"time_to_pass": [
        {k: v for k, v in r.items() if k != "seconds"} for r in data["time_to_pass"] or []]})
    out.append(f'<script type="application/json" id="report-data">{blob}</script>')
    out.append(f"<script>{SORT_SCRIPT}</script>")
    out.append(f'<p class="note">Written by <code>course report</code> from {_e(data["lesson"])}\'s results.</p>')
    out.append("</body></html>")
    return "\n".join(out)


def write_report(results_path: Path, out: Path, progress_dir: Path | None = None, anonymous: bool = False,
                 help_below: float = HELP_BELOW) -> dict:
    """Read `course grade`'s JSON (and the progress files), write the page; returns the data shown. ValueError
    with a one-line reason for input that is not a results file. A file at `out` that is not a report written
    by this command is kept as `<out>.bak` first."""
    from graders.registry import UnknownLesson, find_lesson

    from course_cli.classes.batch import load

    lesson, results = load(results_path)
    if not results:
        raise ValueError(f"{results_path} holds no students")
    stores, unreadable = (load_progress(progress_dir) if progress_dir is not None else (None, []))
    data = report_data(lesson, results, stores, anonymous, help_below)
    data["progress_unreadable"] = unreadable
    try:
        title = find_lesson(lesson).title
    except (UnknownLesson, TypeError):
        title = "a lesson"
    page = render(data, title)
    from course_cli.atomic import read_bytes, write_text

    out = Path(out)
    try:  # a report this command wrote is replaced; anything else (a link too: not followed) is kept as .bak
        ours = GENERATOR in read_bytes(out, 2000).decode("utf-8", errors="replace")
    except OSError:
        ours = False
    write_text(out, page, backup=not ours)
    return data
