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

from .engine import register_source
from .engine.notebook import graded_cells, strip_magics
from .registry import ROOT, find_lesson


def _cells(path: Path) -> list[str]:
    """The notebook's graded cells (graders/notebook.py's rules), magics skipped as the child does."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [src for src in (strip_magics(c["source"]) for c in graded_cells(nb.get("cells", []))) if src is not None]


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
    cells = _cells(path)
    if lesson.triton:
        from .triton_compat import patch_interpreter

        patch_interpreter()  # Triton 3.6's interpreter under NumPy >= 2.4
    try:
        for i, code in enumerate(cells):
            filename = f"<{lesson.id} cell {i + 1}>"
            register_source(filename, code)  # @triton.jit reads its function's source through linecache
            exec(compile(code, filename, "exec", dont_inherit=True), module.__dict__)
    except BaseException:
        del sys.modules[name]
        raise
    return module
