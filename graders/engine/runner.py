"""The one function that runs a notebook's graded cells and a lesson's probes, wherever it runs.

    run_notebook(module, cells, exercises, configs, ...) ─ run_cells ─ probe_all ─▶ (namespace, cells, obs)

It runs in the sandboxed child (course_cli/sandboxed/child.py, started cold or forked by the warm zygote) and,
for trusted code only, in process (tests/harness.py; graders/parts.py's `import_lesson` runs an earlier
lesson's cells through `run_cells`). What differs between those seats is a `Seat`: the time limits, the guard
put back after the student's code, the progress file, the output cap, where observations go. The rules (which
cell runs, how an error or a timeout or `sys.exit` is reported, the seed, Triton's interpreter) are here alone.

Runs in the child: it imports nothing that judges (tests/unit/test_import_contract.py).
"""

from __future__ import annotations

import builtins
import contextlib

from .notebook import strip_magics
from .probe import ExerciseTimeout, probe_exercise, register_source, student_traceback


class Seat:
    """Where the runner runs, as hooks. This base is the in-process seat (trusted code: no time limit, no
    guard, nothing written); course_cli/sandboxed/child.py's seat adds the sandboxed child's."""

    raise_errors = False  # True: a cell's exception propagates (import_lesson), instead of its report

    def cell(self, index):
        """Around one cell's code (the child: its progress line and the cell's alarm)."""
        return contextlib.nullcontext()

    def exercise(self, name: str):
        """Around one exercise's probes (the child: progress, the guard put back, the exercise's alarm)."""
        return contextlib.nullcontext()

    def failed(self) -> None:
        """After a cell raised (the child puts back what the student's code changed)."""

    def cell_done(self, report: dict) -> None:
        """After each cell, with its report (the child adds the output cap's note)."""

    def cells_done(self, reports: list[dict]) -> None:
        """After the last cell (the child stops what the cells left running and writes cells.json)."""

    def observed(self, name: str, obs: dict) -> None:
        """An exercise's observations, as soon as they exist (the child saves them: a later crash keeps them)."""


def namespace() -> dict:
    """A fresh namespace for a notebook's cells, as a kernel's `__main__`."""
    return {"__name__": "__main__", "__builtins__": builtins}


def configs_of(module, device: str) -> tuple:
    """The configs of `module`'s checks on `device`, in a fixed order."""
    return tuple(sorted({c for check in module.CHECKS for c in check.configs if c.device == device},
                        key=lambda c: c.key))


def run_cells(cells: list[dict], ns: dict, seat: Seat = Seat(), label: str = "cell") -> list[dict]:
    """Run `cells` ({"index", "source"}, as graders.engine.notebook.graded_cells returns them) into `ns`, magics
    skipped. Returns each cell's report: {"index", "status": ok | skipped | error | timeout, "error"?}."""
    if any("triton" in (cell["source"] or "") for cell in cells):
        from graders.triton_compat import patch_interpreter

        patch_interpreter()  # Triton 3.6's interpreter under NumPy >= 2.4 (graders/triton_compat.py)
    reports = []
    for cell in cells:
        index, source = cell["index"], strip_magics(cell["source"])
        report = {"index": index, "status": "ok"}
        reports.append(report)
        if source is None:
            report["status"] = "skipped"
            continue
        filename = f"<{label} {index}>"
        register_source(filename, source)  # tracebacks show the student's lines; @triton.jit reads its source
        try:
            code = compile(source, filename, "exec", dont_inherit=True)  # not our __future__ flags
        except SyntaxError as exc:
            if seat.raise_errors:
                raise
            report.update(status="error", error=f"{type(exc).__name__}: {exc.msg} (cell {index}, line {exc.lineno})")
            continue
        try:
            with seat.cell(index):
                exec(code, ns)
        except ExerciseTimeout as exc:
            if seat.raise_errors:
                raise
            report.update(status="timeout", error=f"cell {index} {exc}")
        except SystemExit as exc:
            if seat.raise_errors:
                raise
            report.update(status="error", error=f"cell {index} called sys.exit({exc.code!r}); grading went on "
                                                 f"without the rest of that cell")
        except BaseException as exc:  # anything the student's cell raises is reported, never fatal
            if seat.raise_errors:
                raise
            seat.failed()
            report.update(status="error", error=student_traceback(exc))
        seat.cell_done(report)
    seat.cells_done(reports)
    return reports


def probe_all(module, ns: dict, exercises: list[str], configs: tuple, only_public: bool = False,
              hidden_seed: int | None = None, seat: Seat = Seat()) -> dict:
    """Every exercise's observations on `ns`; an exercise whose alarm fired between checks is a timeout."""
    obs = {}
    for name in exercises:
        try:
            with seat.exercise(name):
                obs[name] = probe_exercise(module, ns, name, configs, only_public, hidden_seed)
        except ExerciseTimeout as exc:
            obs[name] = {"checks": {}, "timeout": True, "forbidden": [], "mutated": [], "message": str(exc)}
        seat.observed(name, obs[name])
    return obs


def run_notebook(module, cells: list[dict], exercises: list[str], configs: tuple, only_public: bool = False,
                 hidden_seed: int | None = None, seat: Seat = Seat()) -> tuple[dict, list[dict], dict]:
    """A notebook's cells, then its exercises' probes: (namespace, the cells' reports, {exercise: obs})."""
    import torch

    torch.manual_seed(0)
    ns = namespace()
    reports = run_cells(cells, ns, seat)
    return ns, reports, probe_all(module, ns, exercises, configs, only_public, hidden_seed, seat)
