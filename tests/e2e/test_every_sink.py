"""Issue 45, item 4: one hostile student name and one hostile message through every sink the course writes.

A class of three lesson-01 submissions: `alice` (the solved notebook), a student whose folder name is hostile and
whose `softmax` raises an exception whose text is hostile (the message every check reports), and a second hostile
name whose notebook is not JSON (NOT GRADED: its name is printed on the terminal and its reason in every file).
The name and message hold markup that runs script if pasted as HTML (`<img onerror>`, `</script><script>`), an
attribute breakout (`"onmouseover="`), spreadsheet formulas (`=HYPERLINK`, `@SUM`), a terminal escape
(`ESC [2J`, an OSC title), bidirectional overrides (U+202E, U+2066) and U+2028. They go through the real seats:
`course grade` (CSV, JSON, terminal), `course report` (HTML), `course check --html` (HTML, terminal), nbgrader's
generate_feedback (HTML) and export (the course's CSV), and Gradescope's run_autograder (results.json). Each
HTML page is loaded in headless Chromium: no payload ran (`window.__pwned` stays unset), no element carries an
event-handler attribute, and the hostile text is on the page as text, without its controls.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

import browser
from course_cli import safe_text
from graders.registry import ROOT, find_lesson
from harness import solution_cell_index
from nbgrader_cli import nbgrader_argv

pytestmark = [pytest.mark.slow, pytest.mark.lesson01]

L01 = find_lesson("lesson01")
NAME = ('=HYPERLINK("x","y")<img src=x onerror="window.__pwned=1">"onmouseover="window.__pwned=2'
        '\x1b[2J\u202eevil\u2066\u2028z')
BROKEN = "@SUM(1+1)<b>\x1b]0;owned\x07\u202e"  # a second hostile name; its notebook is not JSON
MSG = ("<img src=x onerror=window.__pwned=3></script><script>window.__pwned=4</script><!--"
       '"onmouseover="window.__pwned=5\x1b[2J\u202etxt.exe\u2066 \u2028+cmd')
NAME_TEXT = '=HYPERLINK("x","y")<img src=x onerror="window.__pwned=1">"onmouseover="window.__pwned=2'
MSG_TEXT = "<img src=x onerror=window.__pwned=3></script><script>window.__pwned=4</script><!--"
# what must never reach a terminal, a CSV cell or a page's text raw: C0 but newline and tab, DEL, C1, the
# bidirectional controls, the line and paragraph separators
RAW = {chr(c) for c in (*range(0, 9), *range(11, 32), *range(0x7f, 0xa0))} | set(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029")
BIN = Path(sys.executable).parent


def _raw(text: str) -> list[str]:
    return sorted({f"U+{ord(c):04X}" for c in text if c in RAW})


def _env() -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COURSE_WARM": "0", "COLUMNS": "100",
           "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("COURSE_NBGRADER", None)
    return env


def _course(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "course_cli", *args], cwd=cwd, env=_env(), capture_output=True,
                          text=True, errors="surrogateescape", timeout=900)


def _hostile_notebook(nb):
    nb = copy.deepcopy(nb)
    nb.cells[solution_cell_index(nb, "softmax")].source = f"def softmax(x, dim=-1):\n    raise RuntimeError({MSG!r})\n"
    return nb


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    from course_cli.sandboxed import sandbox

    if not sandbox.bwrap_status()[0]:
        pytest.skip("bubblewrap unavailable")
    root = tmp_path_factory.mktemp("sinks")
    subs = root / "submitted"
    for student in ("alice", NAME, BROKEN):
        (subs / student / L01.id).mkdir(parents=True)
    nbformat.write(nbformat.read(L01.solution_path, as_version=4), subs / "alice" / L01.id / L01.notebook)
    hostile = subs / NAME / L01.id / L01.notebook
    nbformat.write(_hostile_notebook(nbformat.read(L01.student_path, as_version=4)), hostile)
    (subs / BROKEN / L01.id / L01.notebook).write_text('{"cells": [', encoding="utf-8")
    out = {"root": root, "hostile": hostile, "terminal": {}}
    for name in ("results.json", "results.csv"):
        p = _course(root, "grade", "submitted", "--lesson", L01.id, "--jobs", "2", "--out", name)
        assert p.returncode in (0, 1) and "Traceback" not in p.stderr, p.stdout + p.stderr
        out["terminal"][f"grade {name}"] = p.stdout + p.stderr
    p = _course(root, "report", "results.json", "--out", "report.html")
    assert p.returncode == 0, p.stdout + p.stderr
    out["terminal"]["report"] = p.stdout + p.stderr
    p = _course(root, "check", L01.id, "--notebook", str(hostile), "--html", "check.html")
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stdout + p.stderr
    out["terminal"]["check"] = p.stdout + p.stderr
    return out


@pytest.fixture(scope="module")
def chromium():
    if not browser.AVAILABLE:
        pytest.skip(browser.MISSING)
    pytest.importorskip("selenium", reason=browser.SELENIUM_MISSING)
    driver = browser.chromium(Path(tempfile.mkdtemp(prefix="course-sinks-")), 1280, 1000)
    try:
        yield driver
    finally:
        driver.quit()


def _page(driver, path: Path) -> dict:
    """What Chromium made of the page at `path`: whether a payload ran, the event-handler attributes of its
    elements, its text, the text of the course's check reports in it, and its data-student attributes."""
    driver.get(path.as_uri())
    return driver.execute_script("""
        const handlers = [];
        for (const el of document.querySelectorAll('*'))
          for (const a of el.attributes) if (a.name.startsWith('on')) handlers.push(el.tagName + ' ' + a.name);
        return {pwned: typeof window.__pwned === 'undefined' ? null : String(window.__pwned),
                handlers: handlers, text: document.body.innerText, title: document.title,
                checks: Array.from(document.querySelectorAll('.course-check'), e => e.innerText).join('\\n'),
                students: Array.from(document.querySelectorAll('[data-student]'), e => e.dataset.student)};""")


def _assert_inert(page: dict, where: str) -> None:
    assert page["pwned"] is None, f"{where}: a payload ran (window.__pwned = {page['pwned']})"
    assert not page["handlers"], f"{where}: event-handler attributes in the DOM: {page['handlers']}"
    assert not _raw(page["text"]), f"{where}: raw control characters on the page: {_raw(page['text'])}"
    assert "pwned" not in page["title"]


def test_terminal_output_holds_no_control_character(made):
    for what, text in made["terminal"].items():
        assert not _raw(text), f"`course {what}` printed {_raw(text)}"
        assert "\x1b" not in text
    grade = made["terminal"]["grade results.csv"]
    assert "@SUM(1+1)<b>\\x1b]0;owned\\x07\\u202e" in grade  # named, with its controls shown as escapes
    check = made["terminal"]["check"]
    assert "RuntimeError: <img src=x" in check and "\\x1b[2J\\u202e" in check  # the message, its controls escaped


def test_csv_cells_are_no_formulas_and_hold_no_control(made):
    text = (made["root"] / "results.csv").read_text(encoding="utf-8")
    assert not _raw(text.replace("\r\n", "\n")), _raw(text)
    rows = list(csv.DictReader(io.StringIO(text)))
    students = {r["student"] for r in rows}
    assert len(students) == 3 and "alice" in students
    for r in rows:
        for cell in r.values():
            assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), cell
    hostile = [r for r in rows if r["student"].startswith("'=HYPERLINK")]
    broken = [r for r in rows if r["student"].startswith("'@SUM")]
    assert hostile and broken
    softmax = next(r for r in hostile if r["exercise"] == "softmax")
    assert softmax["status"] == "error" and MSG_TEXT in softmax["reason"]
    assert all(r["status"] == "NOT GRADED" for r in broken)
    totals = {r["student"]: r["points"] for r in rows if r["exercise"] == "TOTAL"}
    assert float(totals["alice"]) == L01.max_score and float(totals[hostile[0]["student"]]) == 0


def test_results_json_keeps_the_names_as_data(made):
    data = json.loads((made["root"] / "results.json").read_text(encoding="utf-8"))
    assert set(data["students"]) == {"alice", NAME, BROKEN}
    assert data["students"]["alice"]["score"] == L01.max_score
    softmax = next(e for e in data["students"][NAME]["exercises"] if e["id"] == "softmax")
    assert MSG_TEXT in json.dumps(softmax, ensure_ascii=False)


def test_report_in_chromium(made, chromium):
    page = _page(chromium, made["root"] / "report.html")
    _assert_inert(page, "course report")
    assert NAME_TEXT in page["text"]  # the name, as text
    assert any(s.startswith(NAME_TEXT) for s in page["students"])  # and whole inside its attribute


def test_check_html_in_chromium(made, chromium):
    page = _page(chromium, made["root"] / "check.html")
    _assert_inert(page, "course check --html")
    assert MSG_TEXT in page["checks"] and NAME_TEXT in page["text"]


def test_nbgrader_feedback_in_chromium(chromium, tmp_path):
    from course_cli.instructor.nbgrader_course import make_course

    course = tmp_path / "nbcourse"
    make_course(course)

    def nbgrader(*args):
        p = subprocess.run(nbgrader_argv(*args), cwd=course, env=_env(), capture_output=True, text=True,
                           timeout=900)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]

    nbgrader("generate_assignment", L01.id, "--force")
    release = nbformat.read(course / "release" / L01.id / L01.notebook, as_version=4)
    (course / "submitted" / NAME / L01.id).mkdir(parents=True)
    nbformat.write(_hostile_notebook(release), course / "submitted" / NAME / L01.id / L01.notebook)
    nbgrader("autograde", L01.id, "--force")
    nbgrader("generate_feedback", L01.id, "--force")
    feedback = course / "feedback" / NAME / L01.id / L01.notebook.replace(".ipynb", ".html")
    page = _page(chromium, feedback)
    _assert_inert(page, "nbgrader feedback")
    assert MSG_TEXT in page["checks"]  # the check cell's report, not only the student's code shown above it
    nbgrader("export", "--to", "grades.csv", "--assignment", L01.id)  # the course's CourseExport
    text = (course / "grades.csv").read_text(encoding="utf-8")
    assert not _raw(text.replace("\r\n", "\n")), _raw(text)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 1 and None not in rows[0], rows  # one row, no cell spilled into an extra column
    row = rows[0]
    assert row["student_id"] == safe_text.for_csv(NAME) and row["status"] == "graded", row
    assert float(row["raw_score"]) == 0 and float(row["max_score"]) == L01.max_score
    assert not [v for v in row.values() if v.startswith(("=", "+", "-", "@", "\t", "\r"))], row


def test_gradescope_results_json(tmp_path):
    from click.testing import CliRunner

    from course_cli.main import cli
    from test_gradescope import _run, _tree

    zip_path = tmp_path / "autograder.zip"
    r = CliRunner().invoke(cli, ["gradescope", L01.id, "--out", str(zip_path)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    nb = tmp_path / L01.notebook
    nbformat.write(_hostile_notebook(nbformat.read(L01.student_path, as_version=4)), nb)
    data = _run(_tree(tmp_path, zip_path, nb))
    # Gradescope renders each output as its output_format says: plain text, never HTML, Markdown or ANSI
    assert data.get("output_format") == "text"
    assert all(t.get("output_format", "text") == "text" for t in data["tests"])
    strings = []

    def walk(x):
        if isinstance(x, str):
            strings.append(x)
        for v in (x.values() if isinstance(x, dict) else x if isinstance(x, list) else ()):
            walk(v)

    walk(data)
    assert not _raw("".join(strings)), _raw("".join(strings))
    softmax = next(t for t in data["tests"] if t["name"] == "softmax")
    assert MSG_TEXT in softmax["output"] and softmax["score"] == 0
