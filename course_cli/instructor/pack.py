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


from course_cli.sandboxed.child_build import (_imported_names, child_build, drop_unreferenced,  # noqa: E402,F401
                                             strip_grader)


def _reference(lesson, device: str = "cpu") -> dict:
    """The public checks' reference observations and the mistakes' observations on them."""
    from course_cli.sandboxed import sandbox
    from course_cli.sandboxed.grading import _read_obs
    from course_cli.sandboxed.notebook import graded_cells, read_notebook

    cells = graded_cells(read_notebook(lesson.solution_path))
    # the catalogue's mistakes only: the distribution ships no engine mutant (a student's follow-up needs the
    # solved notebook, which it does not ship), so the child probes none (they cost up to 2 s an exercise)
    child = sandbox.start(lesson.module, cells, [e.name for e in lesson.exercises], device, mistakes=True,
                          only_public=True, visible=[ROOT / "solutions"], job_extra={"mutants": False}).wait()
    try:
        if child.death():
            raise RuntimeError(f"the reference of {lesson.id} failed to run: {child.death()}")
        data = {"exercises": {e.name: dict(_read_obs(child.files / f"obs-{e.name}.pt")) for e in lesson.exercises},
                "mistakes": {}}
        for f in child.files.glob("mistake-*.pt"):
            obs = _read_obs(f)
            if obs is not None and not hasattr(obs, "message"):
                data["mistakes"][f.stem.removeprefix("mistake-")] = dict(obs)
        return data
    finally:
        child.cleanup()


def make_pack(target: Path) -> dict:
    """Write the student distribution of every lesson into `target` (a new or empty folder): built in a private
    folder of an unpredictable name beside it (course_cli/atomic.py's staged_folder), renamed into place whole."""
    import tomllib

    import torch

    from course_cli.atomic import staged_folder

    target = Path(target)
    if target.exists() and any(target.iterdir()):
        raise FileExistsError(f"{target} is not empty: give a new folder for the student distribution")
    target.parent.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    with staged_folder(target) as stage:
        shutil.copytree(ROOT / "course_cli", stage / "course_cli", ignore=ignore)
        shutil.copytree(ROOT / "graders", stage / "graders", ignore=ignore)
        g = stage / "graders"
        (g / "_distribution.py").write_text(MARKER)
        (g / "lessons").mkdir()
        (g / "data" / "reference").mkdir(parents=True, exist_ok=True)
        imported = _imported_names([*g.rglob("*.py"), *(stage / "course_cli").rglob("*.py")])
        for lesson in LESSONS:
            module = importlib.import_module(lesson.module)
            src = g / f"{lesson.id}_{lesson.slug}.py"
            src.write_text(strip_grader(src.read_text(encoding="utf-8"), getattr(module, "MISTAKES", ()),
                                        keep=imported.get(src.stem, frozenset())))
            shutil.copy(lesson.student_path, g / "lessons" / lesson.notebook)
            torch.save(_reference(lesson), g / "data" / "reference" / f"{lesson.id}-cpu.pt")
        meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
        deps = "[" + ", ".join(f'"{d}"' for d in meta["dependencies"]) + "]"
        (stage / "pyproject.toml").write_text(PYPROJECT.format(version=meta["version"], dependencies=deps))
        (stage / "README.md").write_text(README)
        if (ROOT / "constraints.txt").exists():
            shutil.copy(ROOT / "constraints.txt", stage / "constraints.txt")
    return {"lessons": [l.id for l in LESSONS], "target": target}
