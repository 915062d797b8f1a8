"""Earlier lessons' parts, for later lessons: the one source is each lesson's notebook.

    from graders.parts import import_lesson
    l03 = import_lesson("lesson03")             # the course's solved lesson03
    l03 = import_lesson("lesson03", mine=True)  # your own lesson03 notebook instead
    attn = l03.MultiHeadAttention(64, 4)

The notebook's graded cells (not its demos, not its check cells) run once into a fresh module, cached
for the process. No copy of an earlier lesson's code is ever kept elsewhere.
"""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path

from .engine.notebook import graded_cells
from .engine.runner import Seat, run_cells
from .registry import ROOT, find_lesson


class _Trusted(Seat):
    """import_lesson's seat: an earlier lesson's cells run in this process, and an error in them is raised."""

    raise_errors = True


def _cells(path: Path) -> list[dict]:
    """The notebook's graded cells (graders/engine/notebook.py's rules), numbered as they run (magics skipped by the
    runner, as in the child)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [{"index": k, "source": c["source"]} for k, c in enumerate(graded_cells(nb.get("cells", [])), start=1)]


def _student_notebook(notebook: str) -> Path:
    roots = [Path(os.environ["COURSE_WORKSPACE"])] if os.environ.get("COURSE_WORKSPACE") else []
    here = Path.cwd()
    roots += [here, *here.parents][:4] + [ROOT]
    for root in roots:
        for p in (root / "lessons" / notebook, root / notebook):
            if p.exists():
                return p
    raise FileNotFoundError(f"cannot find your {notebook}; looked in {', '.join(str(r) for r in roots)}")


def import_lesson(key: str, mine: bool = False) -> types.ModuleType:
    """Lesson `key`'s exercises as a module: the solved ones, or (mine=True) the student's own."""
    lesson = find_lesson(key)
    name = f"course_parts.{lesson.id}{'_mine' if mine else ''}"
    if name in sys.modules:
        return sys.modules[name]
    if not lesson.solution_path.exists():
        mine = True  # the student distribution: your own earlier notebooks, the only ones there
        name = f"course_parts.{lesson.id}_mine"
        if name in sys.modules:
            return sys.modules[name]
    path = _student_notebook(lesson.notebook) if mine else lesson.solution_path
    module = types.ModuleType(name, f"{lesson.id} ({'your notebook' if mine else 'the course solution'}): {path}")
    module.__file__ = str(path)
    sys.modules[name] = module
    try:
        run_cells(_cells(path), module.__dict__, _Trusted(), label=f"{lesson.id} cell")
    except BaseException:
        del sys.modules[name]
        raise
    return module
