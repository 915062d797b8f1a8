"""The student distribution of a graded class (`course pack`): installed into a fresh virtual environment, it
holds no solution source, grades the public checks as the repository does, and says the hidden ones are the
instructor's."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import nbformat
import pytest

from course_cli.instructor.pack import drop_unreferenced, make_pack, strip_grader
from graders.registry import LESSONS, find_lesson

pytestmark = pytest.mark.slow
L01 = find_lesson("lesson01")


def solution_lines(lesson) -> list[str]:
    """The non-trivial lines of every reference body (between BEGIN and END SOLUTION) of a lesson."""
    nb = json.loads(lesson.solution_path.read_text())
    out = []
    for cell in nb["cells"]:
        src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        for body in re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", src, re.S):
            for line in body.splitlines():
                line = line.split("  #")[0].strip()
                if len(line) >= 24 and not line.startswith(("#", '"""', "'''")):
                    out.append(line)
    return out


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The distribution, pip-installed into a fresh venv that borrows only torch & co. from this one."""
    root = tmp_path_factory.mktemp("dist")
    dist = root / "student-package"
    make_pack(dist)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)  # pip, setuptools: borrowed
    site = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    # this venv's packages (torch, nbformat, ...) by path only: its .pth files (the editable install of the
    # course repository among them) are not processed from there
    (site / "borrowed.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COURSE_WORKSPACE")}
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--no-index", str(dist)], check=True, env=env, cwd=root)
    return {"venv": venv, "site": site, "env": env, "root": root}


def _without_hints(source: str) -> str:
    """registry.py without its hints: `course hint` reveals them to students on purpose, one tier at a time
    (the last near the answer), in the distribution as in self-study."""
    import ast

    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            node.keywords = [k for k in node.keywords if k.arg != "hints"]
    return ast.unparse(tree)


def test_no_solution_source_is_reachable(installed):
    """No reference body's line in the installed code. (The release notebooks' own text is checked by
    tests/test_teaching.py; an idiom of one lesson's answer may appear in an earlier lesson's demo.)"""
    site = installed["site"]
    files = [p for d in ("graders", "course_cli") for p in (site / d).rglob("*") if p.is_file()]
    assert not (site / "solutions").exists()
    assert any(p.name == "lesson01_sdpa.ipynb" for p in files)  # the release notebooks are there
    texts = {p: p.read_text(encoding="utf-8") for p in files if p.suffix in (".py", ".md", ".txt")}
    texts = {p: _without_hints(t) if p.name == "registry.py" else t for p, t in texts.items()}
    leaks = [f"{lesson.id}: {line!r} in {p.relative_to(site)}"
             for lesson in LESSONS for line in solution_lines(lesson) for p, text in texts.items() if line in text]
    assert not leaks, "\n".join(leaks[:20])
    # and the course's own helper does not reach the solutions either
    r = subprocess.run([str(installed["venv"] / "bin" / "python"), "-c",
                        "from graders.parts import import_lesson; import_lesson('lesson01')"],
                       capture_output=True, text=True, env=installed["env"], cwd=installed["root"])
    assert r.returncode != 0 and "cannot find your lesson01_sdpa.ipynb" in r.stderr


def test_hidden_checks_and_mistake_code_are_not_shipped(installed):
    site = installed["site"]
    text = (site / "graders" / "lesson01_sdpa.py").read_text()
    assert "hidden=True" not in text
    assert "def sdpa__" not in text and "edits=" not in text
    assert "observed=True" in text  # the mistakes' messages stay, for the diagnosis


def _check(installed, nb_path: Path, lesson=L01) -> dict:
    r = subprocess.run([str(installed["venv"] / "bin" / "course"), "check", lesson.id, "--notebook", str(nb_path),
                        "--json"], capture_output=True, text=True, env=installed["env"], cwd=nb_path.parent)
    assert r.stdout.strip(), r.stderr[-2000:]
    return json.loads(r.stdout)


def test_check_grades_public_checks_from_the_distribution(installed, tmp_path):
    site = installed["site"]
    stub = tmp_path / L01.notebook
    stub.write_bytes((site / "graders" / "lessons" / L01.notebook).read_bytes())
    res = _check(installed, stub)
    assert {e["status"] for e in res["exercises"]} == {"not_implemented"}

    solved = nbformat.read(L01.solution_path, as_version=4)  # the student's finished work
    path = tmp_path / "solved" / L01.notebook
    path.parent.mkdir()
    nbformat.write(solved, path)
    res = _check(installed, path)
    assert res["score"] == res["max_score"] == 10.0, res
    names = {c["name"] for e in res["exercises"] for c in e["checks"]}
    assert "huge magnitudes (±1e4) give no inf or NaN" in names  # a property public in the repository too
    assert not any(n.endswith("(fresh inputs)") for n in names)  # its hidden twin is not shipped

    from harness import mistakes_of, with_mistake

    mistake = next(m for m in mistakes_of(L01) if m.id == "divide_by_dk")
    res = _check(installed, with_mistake(L01, mistake, tmp_path))
    sdpa = next(e for e in res["exercises"] if e["id"] == "scaled_dot_product_attention")
    assert sdpa["status"] == "failed" and sdpa["diagnosis"] == mistake.message  # named, from data alone


def _workspace(folder: Path, lesson) -> Path:
    """A student's folder: the earlier lessons solved in lessons/ (what `import_lesson` reads there)."""
    (folder / "lessons").mkdir(parents=True)
    for earlier in LESSONS:
        if earlier.id < lesson.id:
            nbformat.write(nbformat.read(earlier.solution_path, as_version=4), folder / "lessons" / earlier.notebook)
    return folder


# Graded through the grader's test doubles, which the distribution ships rewritten: lesson 08's toy language
# model (generate) and lesson 10's growing cache from lesson 08 (Llama's offsets).
@pytest.mark.parametrize("lesson_id, exercise, mistake_id", [("lesson08", "generate", "temperature_after_softmax"),
                                                             ("lesson10", "Llama", "offset_per_layer")])
def test_check_grades_lessons_on_test_doubles_from_the_distribution(installed, tmp_path, lesson_id, exercise,
                                                                     mistake_id):
    import importlib

    from harness import mistakes_of, with_mistake

    lesson = find_lesson(lesson_id)
    checks = importlib.import_module(lesson.module).CHECKS
    public = {(c.exercise, c.name) for c in checks if not c.hidden}
    hidden = {(c.exercise, c.name) for c in checks if c.hidden} - public

    stub = _workspace(tmp_path / "stub", lesson) / lesson.notebook
    stub.write_bytes((installed["site"] / "graders" / "lessons" / lesson.notebook).read_bytes())
    res = _check(installed, stub, lesson)
    assert {e["status"] for e in res["exercises"]} == {"not_implemented"}, res

    solved = _workspace(tmp_path / "solved", lesson) / lesson.notebook
    nbformat.write(nbformat.read(lesson.solution_path, as_version=4), solved)
    res = _check(installed, solved, lesson)
    assert {e["status"] for e in res["exercises"]} == {"passed"}, res
    ran = {(e["id"], c["name"]) for e in res["exercises"] for c in e["checks"]}
    assert public <= ran and not ran & hidden  # every public check (as in the repository), no hidden one

    mistake = next(m for m in mistakes_of(lesson) if m.id == mistake_id)
    res = _check(installed, with_mistake(lesson, mistake, _workspace(tmp_path / "mistake", lesson)), lesson)
    ex = next(e for e in res["exercises"] if e["id"] == exercise)
    assert ex["status"] == "failed" and ex["diagnosis"] == mistake.message, ex
    assert {e["status"] for e in res["exercises"] if e["id"] != exercise} == {"passed"}


def test_strip_grader_removes_hidden_probes_and_mistakes():
    import graders.lesson01_sdpa as g

    text = strip_grader(Path(g.__file__).read_text(), g.MISTAKES)
    ns: dict = {"__name__": "graders.stripped_lesson01", "__package__": "graders"}
    exec(compile(text, "stripped", "exec"), ns)
    public = [(c.exercise, c.name) for c in g.CHECKS if not c.hidden]
    assert public and len(public) < len(list(g.CHECKS)), "lesson 01 has public and hidden checks"
    stripped = list(ns["CHECKS"])
    assert [(c.exercise, c.name) for c in stripped if not c.hidden] == public  # the probes, the declared domains
    # what stays hidden is the input battery, built from the public checks by the engine's own (public) code
    assert all(c.variant is not None for c in stripped if c.hidden)
    assert [(c.exercise, c.name) for c in stripped if c.hidden] == \
        [(c.exercise, c.name) for c in g.CHECKS if c.variant is not None]
    assert "hidden=True" not in text
    # the catalogue keeps its messages (the diagnosis a student reads) and loses the code that makes each mistake
    assert [m.id for m in ns["MISTAKES"]] == [m.id for m in g.MISTAKES]
    assert all(m.impl is None and not m.edits for m in ns["MISTAKES"]) and all(m.edits for m in g.MISTAKES)


def test_strip_grader_drops_what_only_hidden_probes_used():
    """Dead code out, to a fixed point, with nothing a public check, or a module importing a helper, needs. A hidden check's judges stay: its property is public (its public twin uses them)."""
    import graders.lesson10_llama as g10

    text = strip_grader(Path(g10.__file__).read_text(), g10.MISTAKES)
    assert "def _rolling_bad_judge" in text and "def _load_bad_judge" in text  # hidden=True checks' judges
    assert "hidden=True" not in text
    assert "class _Rolling(Cache)" in text and "def _window_mask" in text  # public checks' doubles
    # what another module imports is kept: a private helper the stripping drops comes back when named in `keep`
    import re

    from graders.registry import LESSONS

    for lesson in LESSONS:
        module = __import__(lesson.module, fromlist=["MISTAKES"])
        source = Path(module.__file__).read_text()
        bare = strip_grader(source, module.MISTAKES)
        dropped = [n for n in re.findall(r"^def (_\w+)", source, re.M) if f"def {n}(" not in bare]
        if dropped:
            break
    assert dropped, "no lesson has a helper that only mistakes or hidden checks use"
    assert f"def {dropped[0]}(" in strip_grader(source, module.MISTAKES, keep=frozenset({dropped[0]}))


def test_drop_unreferenced_runs_to_a_fixed_point():
    import ast

    body = ast.parse("def _a(): return _b()\n"  # only _c (dead) reaches _a; _a reaches _b
                     "def _b(): return 1\n"
                     "def _c(): return _a()\n"
                     "def _d(): return _e()\n"  # reached from a public function
                     "def _e(): return _d()\n"  # a cycle, live
                     "def _f(): return _g()\n"  # a cycle, dead
                     "def _g(): return _f()\n"
                     "_h = _b\n"
                     "def public(): return _d()\n"
                     "@CHECKS.probe('x', 'y', None)\n"
                     "def _probe(ctx): return 0\n").body
    kept = {getattr(n, "name", None) or n.targets[0].id for n in drop_unreferenced(body)}
    assert kept == {"_d", "_e", "public", "_probe"}
    assert {getattr(n, "name", None) or n.targets[0].id for n in drop_unreferenced(body, frozenset({"_h"}))} == \
        {"_b", "_d", "_e", "_h", "public", "_probe"}
