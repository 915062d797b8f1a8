"""`course watch`: re-check on every save, debounced; Ctrl-C exits cleanly."""

from __future__ import annotations

import time
from pathlib import Path


def _stamp(path: Path):
    try:
        st = path.stat()
        return (st.st_mtime_ns, st.st_size)
    except OSError:
        return None


def watch(lesson, path: Path, workspace: Path, exercises, interval: float = 0.5, record: bool = True,
          debounce: float = 0.4) -> None:
    from course_cli.sandboxed.warm import grade_notebook  # warm when it can be, else cold (the same verdict)
    from course_cli.student.progress import ProgressStore
    from course_cli.render import make_console, render_result

    console = make_console()
    last = None
    try:
        console.print(f"Watching {path} — save the notebook to re-check; Ctrl-C to stop.", style="dim")
        while True:
            now = _stamp(path)
            if now != last:
                # debounce: editors save in several writes; wait until the file holds still
                time.sleep(debounce)
                settled = _stamp(path)
                if settled != now:
                    continue
                last = settled
                if console.is_terminal:
                    console.clear()
                console.rule(f"{lesson.id} · {time.strftime('%H:%M:%S')}")
                result = grade_notebook(lesson, path, exercises)
                render_result(console, result, lesson.title)
                if record and settled is not None:
                    try:
                        ProgressStore(workspace).record(result, source="watch")
                    except OSError:
                        pass
                console.print("Waiting for the next save… (Ctrl-C to stop)", style="dim")
            time.sleep(interval)
    except KeyboardInterrupt:
        console.print("\nStopped watching.")
