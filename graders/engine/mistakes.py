"""Mistakes as code: a catalogued mistake's source is the solved notebook's defining cell with the
mistake's edits applied, so the reference code exists once (the diagnosis and the tests' fixtures use it)."""

from __future__ import annotations

import importlib

from .checks import Mistake


# ----------------------------------------------------------------------------------------------
# Mistakes as code: the same source drives the diagnosis and the test fixtures


def mistake_source(mistake: Mistake, lesson: str | None = None) -> str:
    """The mistake's code as a student would write it: the exercise's own name, no prefix. For a mistake
    given as edits, the solved notebook's defining cell with the edits applied (each must match once)."""
    import inspect
    import re
    import textwrap

    if mistake.edits:
        src = solved_cell(lesson or _lesson_of(mistake), mistake.exercise)
        for old, new in mistake.edits:
            n = src.count(old)
            if n != 1:
                raise ValueError(f"mistake {mistake.id}: the edit {old!r} matches {n} times in the solved cell "
                                 f"of `{mistake.exercise}` (it must match exactly once)")
            src = src.replace(old, new)
        return src
    src = textwrap.dedent(inspect.getsource(mistake.impl))
    return re.sub(rf"\b(def|class)\s+{re.escape(mistake.impl.__name__)}\b", rf"\1 {mistake.exercise}", src, count=1)


def solved_cell(lesson: str, name: str) -> str:
    """The source of the solved notebook's code cell that defines `name` (the last one, as when run)."""
    import json

    from .notebook import defining_cell, graded_cells
    from ..registry import find_lesson

    nb = json.loads(find_lesson(lesson).solution_path.read_text(encoding="utf-8"))
    found = defining_cell(graded_cells(nb.get("cells", [])), name)
    if found is None:
        raise LookupError(f"{lesson}: no solved cell defines `{name}`")
    return found["source"]


def _lesson_of(mistake: Mistake) -> str:
    from ..registry import LESSONS

    for lesson in LESSONS:
        module = importlib.import_module(lesson.module)
        if any(m is mistake for m in getattr(module, "MISTAKES", ())):
            return lesson.id
    raise LookupError(f"mistake {mistake.id} is in no lesson's MISTAKES")
