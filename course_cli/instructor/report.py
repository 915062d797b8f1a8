"""`course report`: one self-contained HTML page about a graded class, from `course grade --out results.json`.

What the page shows, each with its numbers in a table whose rows carry them as data-attributes (so a test, or a
script, reads them back): the score histogram, the pass rate per exercise, the most frequent diagnoses per
exercise with one anonymised example each, errors and timeouts, the exercises whose failure rate stands far
above the rest (OUTLIER_GAP), and, when the students' progress files are given, the time from a student's first
check of the lesson to each exercise's first pass. Plots are matplotlib figures inlined as SVG; the page loads
nothing from the network and runs no script.
"""

from __future__ import annotations

import html
import io
import json
import re
import statistics
from pathlib import Path

from graders.engine.results import LessonResult

OUTLIER_GAP = 0.25  # flagged: failure rate ≥ the mean failure rate of the lesson's other exercises + 25 points
TOP_DIAGNOSES = 3  # per exercise
HIST_BINS = 10
GENERATOR = "attention-course report"


# ----------------------------------------------------------------------------------------------
# The numbers


def is_grader_failure(ex) -> bool:
    return bool(ex.checks) and ex.checks[0].name == "notebook" and ex.status in ("error", "timeout")


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


def outliers(rates: dict[str, float]) -> list[dict]:
    """Exercises whose failure rate (1 − pass rate) is at least OUTLIER_GAP above the mean failure rate of the
    lesson's other exercises."""
    found = []
    for ex, rate in rates.items():
        others = [1 - r for e, r in rates.items() if e != ex]
        if not others:
            continue
        fail, rest = 1 - rate, sum(others) / len(others)
        if fail - rest >= OUTLIER_GAP - 1e-9:
            found.append({"exercise": ex, "failure_rate": round(fail, 3), "others": round(rest, 3)})
    return found


_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[\\/][^\s\"'`:,;()<>\\/]+){2,}")


def anonymise(text: str, names: list[str]) -> str:
    """Paths cut to their last part, and every student's name replaced by <student>."""
    text = _PATH.sub(lambda m: "…/" + re.split(r"[\\/]", m.group(0))[-1], text)
    for name in sorted(names, key=len, reverse=True):
        if name:
            text = re.sub(rf"(?<![\w]){re.escape(name)}(?![\w])", "<student>", text)
    return text


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


def report_data(lesson: str | None, results: dict[str, LessonResult], stores: dict[str, dict] | None = None,
                anonymous: bool = False) -> dict:
    """Everything the page shows, as plain data."""
    from course_cli.classes.batch import summary

    info = summary(results)
    names = sorted(results)
    alias = {s: (f"student {i + 1}" if anonymous else s) for i, s in enumerate(names)}
    max_score = info["max_score"]
    scores = [results[s].score for s in names]
    rates = {e["exercise"]: e["pass_rate"] for e in info["exercises"]}

    diagnoses = {}
    for d in info["diagnoses"]:
        rows = diagnoses.setdefault(d["exercise"], [])
        if len(rows) < TOP_DIAGNOSES:
            first = d["who"][0]
            ex = next(x for x in results[first].exercises if x.id == d["exercise"])
            rows.append({"diagnosis": d["diagnosis"], "count": d["students"],
                         "example": anonymise(example_message(ex), names)})
    undiagnosed = {e["exercise"]: 0 for e in info["exercises"]}
    for r in results.values():
        for ex in r.exercises:
            if ex.status == "failed" and not ex.diagnosis:
                undiagnosed[ex.id] += 1

    trouble = []
    for e in info["exercises"]:
        ex_id = e["exercise"]
        errs = [x for x in info["errors"] if x["exercise"] == ex_id]
        trouble.append({"exercise": ex_id, "errors_code": sum(x["kind"] == "code" for x in errs),
                        "errors_grader": sum(x["kind"] == "grader" for x in errs),
                        "timeouts": sum(x["exercise"] == ex_id for x in info["timeouts"])})
    ungraded = {}
    for x in info["errors"] + info["timeouts"]:
        if x["kind"] == "grader":
            ungraded.setdefault(alias[x["student"]], anonymise(x["reason"], names) if anonymous else x["reason"])

    return {
        "lesson": lesson, "students": info["students"], "mean_score": info["mean_score"],
        "median_score": round(statistics.median(scores), 3) if scores else 0.0, "max_score": max_score,
        "histogram": histogram(scores, max_score),
        "exercises": info["exercises"], "outliers": outliers(rates),
        "diagnoses": diagnoses, "undiagnosed": undiagnosed, "trouble": trouble,
        "ungraded": [{"student": s, "reason": r} for s, r in sorted(ungraded.items())],
        "time_to_pass": (time_to_pass(stores, lesson, [e["exercise"] for e in info["exercises"]])
                         if stores is not None else None),
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
       max-width: 60em; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: .2em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: .6em 0; } td, th { padding: .2em .7em; border-bottom: 1px solid #eee;
       text-align: left; vertical-align: top; } td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
.lead { color: #555; } .flag { color: #b3261e; font-weight: 600; } .note { color: #666; font-size: .92em; }
pre.example { white-space: pre-wrap; background: #f6f6f6; padding: .4em .6em; margin: .2em 0; font-size: .85em; }
.row { display: flex; gap: 2em; align-items: flex-start; flex-wrap: wrap; }
figure { margin: .8em 0; } figure svg { max-width: 100%; height: auto; }
"""


def _e(x) -> str:
    from course_cli.safe_text import for_html

    return for_html(x, 20_000)


def _pct(x: float) -> str:
    return f"{x * 100:.0f}%"


def _duration(s: float | None) -> str:
    if s is None:
        return "—"
    m = s / 60
    return f"{m / 60:.1f} h" if m >= 90 else f"{m:.0f} min"


def _num(x) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def render(data: dict, title: str) -> str:
    flagged = {o["exercise"] for o in data["outliers"]}
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f'<meta name="generator" content="{GENERATOR}">', '<link rel="icon" href="data:,">',
           f"<title>{_e(data['lesson'])}: class report</title><style>{CSS}</style></head><body>",
           f"<h1>{_e(data['lesson'])} — {_e(title)}: class report</h1>",
           f'<p class="lead" id="overview" data-students="{data["students"]}" data-mean-score="{data["mean_score"]:g}" '
           f'data-median-score="{data["median_score"]:g}" data-max-score="{data["max_score"]:g}">'
           f'{data["students"]} submissions · mean score {data["mean_score"]:g} / {data["max_score"]:g} · '
           f'median {data["median_score"]:g}</p>']

    out.append('<h2>What the class missed</h2><p class="note">Rule: an exercise is flagged when its failure rate '
               f"(1 − pass rate) is at least {OUTLIER_GAP * 100:.0f} percentage points above the mean failure rate of "
               "the lesson's other exercises.</p>")
    if data["outliers"]:
        out.append('<ul id="outliers">')
        for o in data["outliers"]:
            out.append(f'<li data-exercise="{_e(o["exercise"])}" data-failure-rate="{o["failure_rate"]:g}" '
                       f'data-others="{o["others"]:g}"><span class="flag">{_e(o["exercise"])}</span>: '
                       f'{_pct(o["failure_rate"])} did not pass it, against {_pct(o["others"])} on average for the '
                       "other exercises.</li>")
        out.append("</ul>")
    else:
        out.append('<ul id="outliers"></ul><p>No exercise stands out: the failures are spread evenly.</p>')

    out.append("<h2>Scores</h2>")
    out.append(f'<div class="row"><figure>{plot_histogram(data["histogram"], data["max_score"])}</figure>')
    out.append('<table id="histogram"><tr><th>score from</th><th>to</th><th class="n">students</th></tr>')
    for i, b in enumerate(data["histogram"]):
        close = "]" if i == len(data["histogram"]) - 1 else ")"
        out.append(f'<tr data-lo="{b["lo"]:g}" data-hi="{b["hi"]:g}" data-count="{b["count"]}"><td>[{b["lo"]:g}</td>'
                   f'<td>{b["hi"]:g}{close}</td><td class="n">{b["count"]}</td></tr>')
    out.append("</table></div>")

    out.append("<h2>Pass rate per exercise</h2>")
    out.append(f"<figure>{plot_pass_rates(data['exercises'], flagged)}</figure>")
    statuses = ["failed", "not_implemented", "error", "timeout", "skipped"]
    out.append('<table id="pass-rates"><tr><th>exercise</th><th class="n">points</th><th class="n">passed</th>'
               '<th class="n">pass rate</th>' + "".join(f'<th class="n">{s.replace("_", " ")}</th>' for s in statuses)
               + "</tr>")
    for e in data["exercises"]:
        st = e["statuses"]
        attrs = " ".join(f'data-{s.replace("_", "-")}="{st.get(s, 0)}"' for s in statuses)
        cls = ' class="flag"' if e["exercise"] in flagged else ""
        out.append(f'<tr data-exercise="{_e(e["exercise"])}" data-passed="{e["passed"]}" '
                   f'data-students="{data["students"]}" data-pass-rate="{e["pass_rate"]:g}" {attrs}>'
                   f'<td{cls}>{_e(e["exercise"])}</td><td class="n">{_num(e["max_points"])}</td>'
                   f'<td class="n">{e["passed"]}</td><td class="n">{_pct(e["pass_rate"])}</td>'
                   + "".join(f'<td class="n">{st.get(s, 0)}</td>' for s in statuses) + "</tr>")
    out.append("</table>")

    out.append(f"<h2>Most frequent mistakes</h2><p class=\"note\">Up to {TOP_DIAGNOSES} per exercise, with how many "
               "students made each and one anonymised example of what the grader told them.</p>")
    out.append('<table id="diagnoses"><tr><th>exercise</th><th class="n">students</th><th>likely mistake, and an '
               "example</th></tr>")
    for e in data["exercises"]:
        ex_id = e["exercise"]
        for d in data["diagnoses"].get(ex_id, []):
            out.append(f'<tr data-exercise="{_e(ex_id)}" data-count="{d["count"]}" data-diagnosis="{_e(d["diagnosis"])}">'
                       f'<td>{_e(ex_id)}</td><td class="n">{d["count"]}</td><td>{_e(d["diagnosis"])}'
                       f'<pre class="example">{_e(d["example"])}</pre></td></tr>')
        if data["undiagnosed"].get(ex_id):
            n = data["undiagnosed"][ex_id]
            out.append(f'<tr data-exercise="{_e(ex_id)}" data-undiagnosed="{n}"><td>{_e(ex_id)}</td>'
                       f'<td class="n">{n}</td><td class="note">failed, matching no known mistake</td></tr>')
    out.append("</table>")

    out.append("<h2>Errors and timeouts</h2><p class=\"note\"><em>code</em>: the student's code raised or ran out "
               "of memory; <em>grader</em>: the submission could not be graded at all (unreadable notebook, crashed "
               "process).</p>")
    out.append('<table id="errors"><tr><th>exercise</th><th class="n">errors (code)</th><th class="n">errors '
               '(grader)</th><th class="n">timeouts</th></tr>')
    for t in data["trouble"]:
        out.append(f'<tr data-exercise="{_e(t["exercise"])}" data-errors-code="{t["errors_code"]}" '
                   f'data-errors-grader="{t["errors_grader"]}" data-timeouts="{t["timeouts"]}"><td>{_e(t["exercise"])}'
                   f'</td><td class="n">{t["errors_code"]}</td><td class="n">{t["errors_grader"]}</td>'
                   f'<td class="n">{t["timeouts"]}</td></tr>')
    out.append("</table>")
    if data["ungraded"]:
        out.append('<p>Submissions that could not be graded:</p><ul id="ungraded">')
        out += [f'<li data-student="{_e(u["student"])}"><b>{_e(u["student"])}</b>: {_e(u["reason"])}</li>'
                for u in data["ungraded"]]
        out.append("</ul>")

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

    blob = json.dumps({k: v for k, v in data.items() if k != "time_to_pass"} | {"time_to_pass": [
        {k: v for k, v in r.items() if k != "seconds"} for r in data["time_to_pass"] or []]}).replace("</", "<\\/")
    out.append(f'<script type="application/json" id="report-data">{blob}</script>')
    out.append(f'<p class="note">Written by <code>course report</code> from {_e(data["lesson"])}\'s results.</p>')
    out.append("</body></html>")
    return "\n".join(out)


def write_report(results_path: Path, out: Path, progress_dir: Path | None = None, anonymous: bool = False) -> dict:
    """Read `course grade`'s JSON (and the progress files), write the page; returns the data shown. ValueError
    with a one-line reason for input that is not a results file. A file at `out` that is not a report written
    by this command is kept as `<out>.bak` first."""
    from graders.registry import UnknownLesson, find_lesson

    from course_cli.classes.batch import load

    lesson, results = load(results_path)
    if not results:
        raise ValueError(f"{results_path} holds no students")
    stores, unreadable = (load_progress(progress_dir) if progress_dir is not None else (None, []))
    data = report_data(lesson, results, stores, anonymous)
    data["progress_unreadable"] = unreadable
    try:
        title = find_lesson(lesson).title
    except (UnknownLesson, TypeError):
        title = "a lesson"
    page = render(data, title)
    out = Path(out)
    if out.exists() and GENERATOR not in out.read_text(encoding="utf-8", errors="replace")[:2000]:
        out.replace(out.with_name(out.name + ".bak"))
    out.write_text(page, encoding="utf-8")
    return data
