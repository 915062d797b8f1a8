"""The notebook rules, in one place: which cells are graded, which are demos or tests, how magics are
run, and which cell defines a name. Used by the sandboxed child, `graders.parts`, the CLI's notebook
reading (course_cli/sandboxed/notebook.py), the solved-cell lookup of known mistakes and the tests.

Graded: every code cell, in order, except demo cells (metadata `course.role == "demo"`) and nbgrader's
autograder test cells (`grade: true`, `solution: false`). So a helper in a cell of its own, a cell
split in two, or a copied cell is graded as the student wrote it; plots and checks are not re-run.

Cells may be nbformat nodes or the plain dicts of the notebook's JSON (a list source is joined). No
torch, no nbformat here: the child imports this before the student's code runs.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

_MAGIC = re.compile(r"^(\s*)([%!].*)$")


def source_of(cell: Any) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def is_code(cell: Any) -> bool:
    return cell.get("cell_type") == "code"


def is_demo(cell: Any) -> bool:
    return (cell.get("metadata", {}).get("course", {}) or {}).get("role") == "demo"


def is_test(cell: Any) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {}) or {}
    return bool(meta.get("grade")) and not meta.get("solution")


def is_graded(cell: Any) -> bool:
    return is_code(cell) and not is_demo(cell) and not is_test(cell)


def graded_cells(cells: Iterable[Any]) -> list[dict]:
    """The code cells the grader runs, as {"index": 1-based cell number, "source": text}. `cells` is a
    notebook's cell list (or a notebook, whose `cells` are taken)."""
    if not isinstance(cells, (list, tuple)):
        cells = cells["cells"] if isinstance(cells, dict) else cells.cells
    return [{"index": i, "source": source_of(c)} for i, c in enumerate(cells, start=1) if is_graded(c)]


def strip_magics(source: str) -> str | None:
    """IPython magics and shell escapes become `pass`; a cell magic (%%) skips the whole cell (None)."""
    if source.lstrip().startswith("%%"):
        return None
    lines = []
    for line in source.splitlines():
        m = _MAGIC.match(line)
        lines.append(f"{m.group(1)}pass  # skipped: {m.group(2)[:40]}" if m else line)
    return "\n".join(lines)


def defines(source: str, name: str) -> bool:
    """Does this text define `name` with a def or class statement (even text that does not compile)?"""
    return re.search(rf"^\s*(def|class)\s+{re.escape(name)}\b", source, re.M) is not None


def defining_index(cells: list[Any], name: str) -> int | None:
    """The position in `cells` of the code cell that defines `name`: the last one, as when the notebook
    runs top to bottom. `cells` are notebook cells or `graded_cells` entries."""
    found = None
    for i, cell in enumerate(cells):
        if (cell.get("cell_type", "code") == "code") and defines(source_of(cell), name):
            found = i
    return found


def defining_cell(cells: list[dict], name: str) -> dict | None:
    """The cell (of `graded_cells`'s entries, or notebook cells) whose text defines `name`."""
    i = defining_index(cells, name)
    return None if i is None else cells[i]


# ----------------------------------------------------------------------------------------------
# Which submitted notebook is graded: one policy for every seat (course grade, Dask, nbgrader, Gradescope)


def renamed_note(submitted: str, expected: str) -> str:
    """The note every seat gives a notebook graded under another name than the lesson's."""
    return f"submitted as {submitted}, expected {expected}: graded as {expected}"


def pick_notebook(names: list[str], expected: str) -> tuple[str | None, str]:
    """The submitted notebook to grade among `names` (file names), and a note. The lesson's notebook by name;
    else the only notebook, or the only one whose name starts with the lesson's (`lesson01_sdpa (1).ipynb`),
    graded with the note `renamed_note`; else None, and why (none, or several and none by name)."""
    names = sorted(n for n in names if n.endswith(".ipynb"))
    if expected in names:
        return expected, ""
    stem = expected.removesuffix(".ipynb")
    near = [n for n in names if n.startswith(stem)]
    pick = names[0] if len(names) == 1 else near[0] if len(near) == 1 else None
    if pick is not None:
        return pick, renamed_note(pick, expected)
    if not names:
        return None, f"no notebook was submitted (expected {expected})"
    shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
    return None, f"{len(names)} notebooks were submitted ({shown}) and none is {expected}: not graded"
