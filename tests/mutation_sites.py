"""The mutation engine's candidates of a small source, by operator id (the unit tests of graders/engine/
mutations*.py share it)."""

from __future__ import annotations

import ast

from graders.engine import mutations as M


def by_op(src: str, name: str = "f", cap: int = 10_000) -> dict[str, list[M.Mutant]]:
    """{operator id: its candidates of `name` in `src`, in the engine's order}: every candidate, no cap."""
    out: dict[str, list[M.Mutant]] = {}
    for m in M.mutants(src, name, cap=cap):
        out.setdefault(m.operator, []).append(m)
    return out


def body(m: M.Mutant) -> str:
    """A candidate's source, ast-normalised."""
    return ast.unparse(ast.parse(m.source))
