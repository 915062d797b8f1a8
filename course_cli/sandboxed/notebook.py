"""Reading a notebook for grading, with a student-facing message for every way it can be unreadable.

Which of its cells the grader runs, and which cell defines a name, are the notebook rules of
graders/engine/notebook.py (re-exported here for the CLI's modules).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from graders.engine.notebook import defining_cell, graded_cells, is_demo, is_test  # noqa: F401 (re-exported)


class NotebookError(Exception):
    """A notebook that cannot be graded at all; the message says why, for a student."""


def _nbformat():
    # jsonschema, which nbformat imports, loads the optional `rfc3987_syntax` IRI checker when it is
    # installed (Jupyter's dependencies install it): ~0.9 s of grammar building for a format nbformat's
    # schema never uses. Declining it keeps `course check` fast; validation is otherwise unchanged.
    if "jsonschema" not in sys.modules:
        sys.modules.setdefault("rfc3987_syntax", None)
    import nbformat

    return nbformat


def read_notebook(path: str | Path):
    nbformat = _nbformat()

    p = Path(path)
    if not p.exists():
        raise NotebookError(f"no notebook at {p}")
    if p.is_dir():
        raise NotebookError(f"{p} is a directory, not a notebook (.ipynb file)")
    try:
        text = p.read_text(encoding="utf-8")
    except PermissionError:
        raise NotebookError(f"{p} cannot be read (permission denied)") from None
    except UnicodeDecodeError as exc:
        raise NotebookError(f"{p} is not a notebook: it is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise NotebookError(f"{p} cannot be read: {exc.strerror}") from None
    if not text.strip():
        raise NotebookError(f"{p} is empty: not a notebook (was it saved while the disk was full?)")
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotebookError(f"{p} is not a notebook: not valid JSON ({exc.msg} at line {exc.lineno}, "
                            f"column {exc.colno}); a truncated save? `course reset` restores a fresh copy") from None
    if not isinstance(raw, dict) or "cells" not in raw and "worksheets" not in raw:
        raise NotebookError(f"{p} is JSON but not a Jupyter notebook (no cells)")
    try:
        nb = nbformat.reads(text, as_version=4)
    except Exception as exc:  # nbformat raises several kinds for malformed notebooks
        raise NotebookError(f"{p} is not a valid Jupyter notebook: {str(exc).splitlines()[0][:200]}") from None
    for i, cell in enumerate(nb.get("cells", [])):
        if not isinstance(cell.get("source", ""), str):
            raise NotebookError(f"{p}: cell {i + 1} has no readable source")
        meta = cell.get("metadata", {})
        bad = "metadata" if not isinstance(meta, dict) else next(
            (f"metadata.{k}" for k in ("course", "nbgrader") if k in meta and not isinstance(meta[k], dict)), None)
        if bad:
            raise NotebookError(f"{p}: cell {i + 1} has malformed {bad} (not a JSON object); "
                                f"`course reset` restores a fresh copy of that cell")
    return nb
