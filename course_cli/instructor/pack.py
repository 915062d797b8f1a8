"""The student distribution of a graded class: what students install, with no solution code in it.

`course pack DIR` (and `course nbgrader DIR`, into DIR/student-package) writes a pip-installable project:

  graders/            the engine and the lessons' graders, with every hidden check's probe taken out, the
                      known mistakes reduced to their messages (`Mistake(..., observed=True)`: no code, no edits),
                      and then every private helper nothing left reaches (`drop_unreferenced`)
  graders/lessons/    the release notebooks (the stubs), which `course init` copies into a workspace
  graders/data/reference/<lesson>-cpu.pt
                      the reference observations of the *public* checks, and the known mistakes' observations on
                      them, as data (`torch.load(weights_only=True)`), so `course check` and the check cells grade
                      the public checks exactly as in the repository, and name the same mistakes
  course_cli/         the command line, as in the repository
  pyproject.toml, README.md

Not in it: `solutions/`, the hidden checks and their references (they stay with the instructor's repository,
where `course grade` and `nbgrader autograde` run them with a seed drawn per run), the mistakes' code, the tests.
`graders.parts.import_lesson` there uses the student's own earlier notebooks. A marker file,
`graders/_distribution.py`, tells the registry where the notebooks are.
"""

from __future__ import annotations

import ast
import importlib
import shutil
from pathlib import Path

from graders.registry import LESSONS, ROOT

MARKER = '''"""This is the student distribution of the attention course (made by `course pack`): no solutions here."""
DISTRIBUTION = "student"
'''

PYPROJECT = '''[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "attention-course-student"
version = "{version}"
description = "The attention course, student distribution: release notebooks, graders, public checks."
requires-python = ">=3.10"
dependencies = {dependencies}

[project.optional-dependencies]
triton = ["triton>=3.0"]

[project.scripts]
course = "course_cli.main:cli"

[tool.setuptools.packages.find]
include = ["graders", "graders.*", "course_cli", "course_cli.*"]

[tool.setuptools.package-data]
graders = ["*.md", "data/*.txt", "data/reference/*.pt", "lessons/*.ipynb"]
'''

README = '''# The attention course — student distribution

Install it (in a fresh virtual environment): `pip install .` (or the wheel your instructor gives you), then
`course init ~/attention && cd ~/attention` and open the notebooks in `lessons/`.

`course check LESSON` and the check cells in the notebooks grade the **public** checks here. The hidden
checks are run by your instructor when grading (with inputs drawn for each grading run), so a notebook that
passes here can still fail a hidden check: make your code right, not just the examples.
'''


def _hidden_probe(node: ast.stmt) -> bool:
    """A probe registered with `@CHECKS.probe(..., hidden=True)`."""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    for dec in node.decorator_list:
        if isinstance(dec, ast.Call) and isinstance(dec.func, ast.Attribute) and dec.func.attr == "probe":
            for kw in dec.keywords:
                if kw.arg == "hidden" and isinstance(kw.value, ast.Constant) and kw.value.value is True:
                    return True
    return False


def _registers(node: ast.stmt) -> bool:
    """A statement that may register something with the lesson's checks (a probe, a battery): it stays."""
    parts = (node.decorator_list if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
             else [node.value] if node.value is not None else [])
    return any(isinstance(n, ast.Name) and n.id == "CHECKS" for part in parts for n in ast.walk(part))


def _private_definition(node: ast.stmt) -> str | None:
    """The name a module-level `def _f`, `class _C` or `_x = ...` binds, if it is private and registers nothing."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        name = node.name
    elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        name = node.targets[0].id
    elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        name = node.target.id
    else:
        return None
    if not name.startswith("_") or name.startswith("__") or _registers(node):
        return None
    return name


def drop_unreferenced(body: list[ast.stmt], keep: frozenset[str] = frozenset()) -> list[ast.stmt]:
    """Dead code out: the module's private functions, classes and values that nothing left in the module
    reaches (nor another shipped module imports: `keep`). Everything else in the module is a root; a private
    definition is live once a live statement names it, and the marking runs to a fixed point, so what only
    a hidden probe or a mistake's code used goes, with what only it used, and so on (cycles included).
    A private name bound twice stays, whatever refers to it."""
    defined = {i: name for i, node in enumerate(body) if (name := _private_definition(node)) is not None}
    twice = {name for name in defined.values() if list(defined.values()).count(name) > 1}
    refs = [{n.id for n in ast.walk(node) if isinstance(n, ast.Name)} for node in body]
    live = {i for i in range(len(body)) if i not in defined or defined[i] in twice | keep}
    named: set[str] = set()
    frontier = set(live)
    while frontier:
        for i in frontier:
            named |= refs[i]
        frontier = {i for i, name in defined.items() if name in named and i not in live}
        live |= frontier
    return [node for i, node in enumerate(body) if i in live]


def strip_grader(source: str, mistakes, keep: frozenset[str] = frozenset(), keep_hidden: bool = False,
                 keep_mistakes: bool = True) -> str:
    """A lesson's grader module without its hidden probes (unless keep_hidden: the sandboxed child's build of
    the graders keeps them), without its mistakes' code (keep_mistakes=False: without the mistakes at all,
    messages included), and without the private helpers that only those used (`keep`: the names other shipped
    modules import from it)."""
    tree = ast.parse(source)
    impl_names = {m.impl.__name__ for m in mistakes if getattr(m, "impl", None) is not None}
    body = []
    for node in tree.body:
        if _hidden_probe(node) and not keep_hidden:
            continue
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in impl_names:
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "MISTAKES" for t in targets):
                if not keep_mistakes:
                    body.append(ast.parse("MISTAKES = ()").body[0])
                    continue
                entries = ", ".join(f"Mistake({m.exercise!r}, {m.id!r}, {m.message!r}, observed=True)" for m in mistakes)
                body.append(ast.parse(f"MISTAKES = ({entries}{',' if len(mistakes) == 1 else ''})").body[0])
                continue
        body.append(node)
    tree.body = drop_unreferenced(body, keep)
    text = ast.unparse(tree)
    if "Mistake" in text and "import Mistake" not in text and " Mistake," not in text and ", Mistake" not in text:
        text = "from graders.engine import Mistake\n" + text
    return text + "\n"


def _imported_names(files) -> dict[str, frozenset[str]]:
    """For each graders module, the names other modules import from it (`from .lesson08_gpt import _Cache`)."""
    out: dict[str, set[str]] = {}
    for f in files:
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                stem = node.module.rsplit(".", 1)[-1]
                out.setdefault(stem, set()).update(a.name for a in node.names)
    return {stem: frozenset(names) for stem, names in out.items()}


def _lesson_closure(graders: Path, stem: str) -> set[str]:
    """The lesson modules `stem` imports (`from .lesson08_gpt import _Cache`), transitively, and itself."""
    import re

    seen, todo = set(), [stem]
    while todo:
        cur = todo.pop()
        if cur in seen or not (graders / f"{cur}.py").exists():
            continue
        seen.add(cur)
        todo += re.findall(r"(lesson\d\d_\w+)", (graders / f"{cur}.py").read_text(encoding="utf-8"))
    return seen


def child_build(cache: Path, lesson=None) -> Path:
    """The graders as a student's sandboxed child sees them: every probe, public and hidden, and nothing of
    the answers: no catalogued mistake (their `edits` quote the solved cells, their `impl` is solved code with
    a slip, their messages name the fix; the reference child alone observes them, from the real graders) and
    none of the private helpers only those used. (The probes' own test doubles stay: lesson 10's RoPE, lesson
    08's toy model, lesson 02's reference mask; they coincide with a few solved lines, listed in
    tests/test_child_build.py.) Built once per version of graders/ into `cache`/child-graders-KEY/
    (atomically); returns the folder to bind in place of graders/. With `lesson`, only that lesson's grader
    module and those it imports are in it: never a later lesson's."""
    import hashlib
    import os
    import tempfile

    src = ROOT / "graders"
    files = sorted(p for p in src.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    h = hashlib.sha256(b"child-build-3" + (lesson.id.encode() if lesson is not None else b""))
    for f in files:
        h.update(str(f.relative_to(src)).encode() + b"\0" + f.read_bytes())
    dest = Path(cache) / f"child-graders-{lesson.id + '-' if lesson is not None else ''}{h.hexdigest()[:20]}"
    if (dest / ".complete").exists():
        return dest
    Path(cache).mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".child-graders-", dir=cache))
    shutil.copytree(src, tmp, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    imported = _imported_names([*tmp.rglob("*.py"), *(ROOT / "course_cli").rglob("*.py")])
    wanted = _lesson_closure(src, f"{lesson.id}_{lesson.slug}") if lesson is not None else None
    for other in LESSONS:
        f = tmp / f"{other.id}_{other.slug}.py"
        if wanted is not None and f.stem not in wanted:
            f.unlink(missing_ok=True)  # a lesson this one does not build on: not in view at all
            continue
        module = importlib.import_module(other.module)
        f.write_text(strip_grader(f.read_text(encoding="utf-8"), getattr(module, "MISTAKES", ()),
                                  keep=imported.get(f.stem, frozenset()), keep_hidden=True, keep_mistakes=False))
    (tmp / ".complete").write_text("")
    try:
        os.rename(tmp, dest)
    except OSError:  # another grader built it meanwhile
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _reference(lesson, device: str = "cpu") -> dict:
    """The public checks' reference observations and the mistakes' observations on them."""
    from course_cli.sandboxed import sandbox
    from course_cli.sandboxed.grading import _read_obs
    from course_cli.sandboxed.notebook import graded_cells, read_notebook

    cells = graded_cells(read_notebook(lesson.solution_path))
    child = sandbox.start(lesson.module, cells, [e.name for e in lesson.exercises], device, mistakes=True,
                          only_public=True, visible=[ROOT / "solutions"]).wait()
    try:
        if child.death():
            raise RuntimeError(f"the reference of {lesson.id} failed to run: {child.death()}")
        data = {"exercises": {e.name: dict(_read_obs(child.out / f"obs-{e.name}.pt")) for e in lesson.exercises},
                "mistakes": {}}
        for f in child.out.glob("mistake-*.pt"):
            obs = _read_obs(f)
            if obs is not None and not hasattr(obs, "message"):
                data["mistakes"][f.stem.removeprefix("mistake-")] = dict(obs)
        return data
    finally:
        child.cleanup()


def make_pack(target: Path) -> dict:
    """Write the student distribution of every lesson into `target` (a new or empty folder)."""
    import tomllib

    import torch

    target = Path(target)
    if target.exists() and any(target.iterdir()):
        raise FileExistsError(f"{target} is not empty: give a new folder for the student distribution")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "course_cli", target / "course_cli", ignore=ignore)
    shutil.copytree(ROOT / "graders", target / "graders", ignore=ignore)
    g = target / "graders"
    (g / "_distribution.py").write_text(MARKER)
    (g / "lessons").mkdir()
    (g / "data" / "reference").mkdir(parents=True, exist_ok=True)
    imported = _imported_names([*g.rglob("*.py"), *(target / "course_cli").rglob("*.py")])
    for lesson in LESSONS:
        module = importlib.import_module(lesson.module)
        src = g / f"{lesson.id}_{lesson.slug}.py"
        src.write_text(strip_grader(src.read_text(encoding="utf-8"), getattr(module, "MISTAKES", ()),
                                    keep=imported.get(src.stem, frozenset())))
        shutil.copy(lesson.student_path, g / "lessons" / lesson.notebook)
        torch.save(_reference(lesson), g / "data" / "reference" / f"{lesson.id}-cpu.pt")
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = "[" + ", ".join(f'"{d}"' for d in meta["dependencies"]) + "]"
    (target / "pyproject.toml").write_text(PYPROJECT.format(version=meta["version"], dependencies=deps))
    (target / "README.md").write_text(README)
    if (ROOT / "constraints.txt").exists():
        shutil.copy(ROOT / "constraints.txt", target / "constraints.txt")
    return {"lessons": [l.id for l in LESSONS], "target": target}
