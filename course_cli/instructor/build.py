"""Deriving the student notebooks in lessons/ from the solved sources in solutions/.

An ordered list of nbgrader's own preprocessors, as `nbgrader generate_assignment` applies them:
ClearSolutions turns each `### BEGIN SOLUTION` region into `raise NotImplementedError()`,
ClearHiddenTests drops `### BEGIN HIDDEN TESTS` regions from the check cells, ClearOutput empties
outputs. Only the order matters (solutions before hidden tests: a check cell holds no solution).
"""

from __future__ import annotations

from pathlib import Path

from graders.registry import LESSONS, Lesson

from course_cli.atomic import write_text


def guard_demo(source: str, names: set[str]) -> str:
    """A demo cell that uses one of `names` (the lesson's exercises), run under `with demo():`, so that while
    an exercise is still a stub the cell says so instead of raising, and a student's Run All goes on to the
    end. A final expression is still displayed, through the guard's `shown(...)` (no `display` boilerplate in
    the student's cell). Cells that use no exercise are left as they are."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    if not tree.body or not any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(tree)):
        return source
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    show = next(name for name in ("shown", "shown_", "_shown") if name not in used)
    lines = source.splitlines()
    last = tree.body[-1]
    quiet = isinstance(last, ast.Expr) and isinstance(last.value, ast.Call) and (
        (isinstance(last.value.func, ast.Attribute) and last.value.func.attr in ("show", "print"))
        or (isinstance(last.value.func, ast.Name) and last.value.func.id in ("print", "display")))
    target = ""
    if isinstance(last, ast.Expr) and not quiet:  # the value Jupyter would have shown: shown(...) displays it
        def cut(row: int, offset: int, text: str) -> None:  # ast's offsets count UTF-8 bytes
            raw = lines[row].encode()
            lines[row] = (raw[:offset] + text.encode() + raw[offset:]).decode()

        cut(last.end_lineno - 1, last.end_col_offset, ")")
        cut(last.lineno - 1, last.col_offset, f"{show}(")
        target = f" as {show}"
    body = "\n".join(("    " + l) if l.strip() else l for l in lines)
    return ("from course_cli.incell import demo\n"
            f"with demo(){target}:  # while an exercise it uses is not written yet, says so instead of stopping\n"
            + body)


def student_notebook(lesson: Lesson) -> str:
    """The student notebook's text, derived from the lesson's solved source."""
    import nbformat
    from nbgrader.preprocessors import ClearHiddenTests, ClearOutput, ClearSolutions

    from graders.engine.notebook import is_demo

    nb = nbformat.read(lesson.solution_path, as_version=4)
    resources: dict = {}
    for step in (ClearSolutions(), ClearHiddenTests(), ClearOutput()):
        nb, resources = step.preprocess(nb, resources)
    names = {e.name for e in lesson.exercises}
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.execution_count = None
            cell.outputs = []
            if is_demo(cell):
                cell.source = guard_demo(cell.source, names)
    return nbformat.writes(nb) + "\n"


def build(lessons=LESSONS, check: bool = False) -> list[Path]:
    """Write (or, with check=True, compare) every lesson's student notebook; returns those that differ."""
    stale = []
    for lesson in lessons:
        text = student_notebook(lesson)
        path = lesson.student_path
        current = path.read_text() if path.exists() else None
        if current != text:
            stale.append(path)
            if not check:
                path.parent.mkdir(parents=True, exist_ok=True)
                write_text(path, text)  # course_cli/atomic.py: an unpredictable name, then renamed
    return stale
