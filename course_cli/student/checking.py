"""One "check then record" for every place a student checks: `course check`, `course watch` and the
notebook's check cells grade through the same sandboxed path and record the attempt the same way."""

from __future__ import annotations

from pathlib import Path


def record(result, workspace: Path | None, source: str) -> list[str]:
    """Record a check's result in the workspace's progress store. Never raises: progress is a convenience and
    must never fail a check; what went wrong comes back as warnings, for the caller to show or drop."""
    from course_cli.student.progress import ProgressStore

    if workspace is None:
        from course_cli.student.workspace import find_workspace

        workspace = find_workspace()
    try:
        store = ProgressStore(workspace)
        store.record(result, source=source)
    except Exception as exc:  # noqa: BLE001 - an unwritable or odd store is a warning, never a failed check
        return [f"could not record progress ({exc})"]
    return list(store.warnings)


def check_and_record(lesson, path: Path | str, exercises: list[str] | None, workspace: Path | None, source: str,
                     only_public: bool = False, record_it: bool = True, warm: bool = True):
    """Grade the notebook at `path` (sandboxed, as every check; through the workspace's warm grader when it can
    be, else cold: the same verdict) and record the attempt; (result, warnings)."""
    from course_cli.sandboxed.warm import grade_notebook
    from course_cli.student.workspace import find_workspace

    # the warm server is the workspace's: the one the check records into, else (--solution, --notebook) the one
    # the command runs in
    result = grade_notebook(lesson, path, exercises, only_public=only_public, warm=warm,
                            workspace=workspace if workspace is not None else find_workspace())
    return result, (record(result, workspace, source) if record_it else [])
