"""Attacks on what a sandboxed child can see (issue 30, item 1: the mounts are an allowlist, never derived from
where the grader was started). Each grades a hostile lesson-01 notebook whose extra cell tries to open and list
the folders the grader was started from — a class (nbgrader) course folder with `source/` (the solved
notebooks), `submitted/<classmate>/` and `gradebook.db`; the checkout's `solutions/` when the checkout lies
inside the Python prefix — and raises `ATTACK-SUCCEEDED: <what it read>` if it can. Each asserts that the
score is 0, that nothing of those files reached the verdict or the results, and that the attack's cell ran.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_cli.sandboxed import sandbox
from course_cli.sandboxed.grading import grade_notebook
from graders.registry import ROOT, find_lesson

pytestmark = pytest.mark.slow
L01 = find_lesson("lesson01")
SANDBOX = sandbox.bwrap_status()[0]
needs_sandbox = pytest.mark.skipif(not SANDBOX, reason=f"bubblewrap unavailable: {sandbox.bwrap_status()[1]}")
MARK_SOURCE, MARK_CLASSMATE, MARK_DB = "SOURCE-MARKER-81f2", "CLASSMATE-MARKER-c4d9", "GRADEBOOK-MARKER-77aa"


def snoop_cell(targets: list[str]) -> str:
    """A cell that lists and reads every file under `targets` it can, and sends what it read back in the message
    of every check of `softmax` (it raises it)."""
    return f'''
import os
got = []
for top in {targets!r}:
    for dirpath, dirs, files in os.walk(top):
        got.append("dir " + dirpath + ": " + ",".join(sorted(dirs + files)))
        for f in files:
            try:
                got.append(open(os.path.join(dirpath, f), errors="replace").read(4000))
            except OSError:
                pass
    try:
        got.append(open(top, errors="replace").read(4000))
    except OSError:
        pass
open("/tmp/attack-ran", "w").write("1")
msg = ("ATTACK-SUCCEEDED: " + " | ".join(got)[:3000]) if any(g.strip() for g in got) else "attack cell ran: nothing readable"
def softmax(x, dim=-1):  # what it read comes back in every check's message
    raise RuntimeError(msg)
'''


def attack_notebook(path: Path, cell: str) -> Path:
    nb = nbformat.read(L01.student_path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(cell))
    nbformat.write(nb, path)
    return path


def class_folder(tmp_path: Path) -> Path:
    """An nbgrader-like course folder: source/ with a solved notebook, submitted/ with a classmate's, a
    gradebook, each holding a marker the attack would send back."""
    course = tmp_path / "my-course"
    nb = nbformat.read(L01.solution_path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(f"# {MARK_SOURCE}"))
    (course / "source" / "lesson01").mkdir(parents=True)
    nbformat.write(nb, course / "source" / "lesson01" / L01.notebook)
    (course / "submitted" / "other_student" / "lesson01").mkdir(parents=True)
    nb.cells[-1] = nbformat.v4.new_code_cell(f"# {MARK_CLASSMATE}")
    nbformat.write(nb, course / "submitted" / "other_student" / "lesson01" / L01.notebook)
    (course / "gradebook.db").write_text(MARK_DB)
    return course


def assert_nothing_leaked(text: str) -> None:
    assert "ATTACK-SUCCEEDED" not in text, text[:2000]
    for mark in (MARK_SOURCE, MARK_CLASSMATE, MARK_DB, "def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:"):
        assert mark not in text


@needs_sandbox
def test_check_from_inside_a_class_folder_sees_none_of_it(tmp_path, monkeypatch):
    course = class_folder(tmp_path)
    monkeypatch.chdir(course)
    monkeypatch.syspath_prepend(str(course))  # as nbgrader and `python -m` put it there
    (tmp_path / "student").mkdir()  # the notebook's own folder is the student's, and in view
    nb = attack_notebook(tmp_path / "student" / "attack.ipynb", snoop_cell([str(course), str(ROOT / "solutions")]))
    result = grade_notebook(L01, nb)
    text = " ".join(result.notes) + json.dumps(result.to_dict())
    assert "attack cell ran" in text  # the attack ran, and read nothing
    assert_nothing_leaked(text)
    assert result.score == 0.0


@needs_sandbox
def test_python_m_grade_from_the_class_folder_sees_none_of_it(tmp_path):
    """`python -m course_cli grade` run in the class folder: `-m` puts that folder on sys.path."""
    course = class_folder(tmp_path)
    subs = course / "autograded_in"
    (subs / "mallory" / "lesson01").mkdir(parents=True)
    attack_notebook(subs / "mallory" / "lesson01" / L01.notebook,
                    snoop_cell([str(course / "source"), str(course / "submitted"), str(course / "gradebook.db"),
                                str(ROOT / "solutions")]))
    out = course / "results.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COURSE_CELL_TIMEOUT": "5"}
    r = subprocess.run([sys.executable, "-m", "course_cli", "grade", str(subs), "--lesson", "lesson01",
                        "--out", str(out)], cwd=course, env=env, capture_output=True, text=True, timeout=600)
    assert out.exists(), r.stdout + r.stderr
    text = out.read_text() + r.stdout + r.stderr
    assert "attack cell ran" in text, text[:3000]
    assert_nothing_leaked(text)
    assert json.loads(out.read_text())["students"]["mallory"]["score"] == 0.0


@needs_sandbox
def test_a_checkout_inside_the_python_prefix_keeps_its_solutions(tmp_path):
    """The course checkout inside the venv's folder (sys.prefix): solutions/ must stay out of view."""
    prefix = tmp_path / "venv"
    checkout = prefix / "course"
    for sub in ("graders", "course_cli", "solutions", "lessons"):
        shutil.copytree(ROOT / sub, checkout / sub, ignore=shutil.ignore_patterns("__pycache__"))
    (checkout / "solutions" / "MARK.txt").write_text(MARK_SOURCE)
    (prefix / "results.json").write_text(MARK_DB)  # anything else in the prefix (graders/ is meant to be seen)
    (tmp_path / "student").mkdir()
    nb = attack_notebook(tmp_path / "student" / "attack.ipynb",
                         snoop_cell([str(checkout / "solutions"), str(prefix / "results.json")]))
    script = (f"import sys, json; sys.prefix = sys.exec_prefix = {str(prefix)!r}\n"
              "from course_cli.sandboxed.grading import grade_notebook\n"
              "from graders.registry import find_lesson, ROOT\n"
              f"assert str(ROOT) == {str(checkout)!r}, ROOT\n"
              f"r = grade_notebook(find_lesson('lesson01'), {str(nb)!r})\n"
              "print(json.dumps({'score': r.score, 'text': ' '.join(r.notes) + json.dumps(r.to_dict())}))\n")
    env = {**os.environ, "PYTHONPATH": str(checkout), "COURSE_CELL_TIMEOUT": "5",
           "COURSE_CACHE_DIR": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    data = json.loads(r.stdout.strip().splitlines()[-1])
    assert "attack cell ran" in data["text"], data["text"][:1500]
    assert_nothing_leaked(data["text"])
    assert data["score"] == 0.0


def test_a_checkout_inside_a_shown_folder_is_covered(tmp_path, monkeypatch):
    """A checkout under a folder the sandbox shows (a course under /usr, say): covered by an empty tmpfs, with
    graders/ and course_cli/ bound on top; so are the grader's working folder and the graded folders."""
    shown = tmp_path / "usr"
    root = shown / "local" / "course"
    for sub in ("graders", "course_cli", "solutions"):
        (root / sub).mkdir(parents=True)
    work = shown / "share" / "class"
    (work / "submitted").mkdir(parents=True)
    monkeypatch.setattr(sandbox, "ROOT", root)
    monkeypatch.chdir(work)
    monkeypatch.setattr(sandbox, "HIDDEN_PATHS", {str(shown / "share" / "graded")})
    hidden = sandbox._hidden([str(shown)])
    assert str(root) in hidden and str(work) in hidden and str(shown / "share" / "graded") in hidden
    # the essentials are never covered, whatever the working folder
    monkeypatch.chdir("/usr")
    assert "/usr" not in sandbox._hidden(["/usr"])
