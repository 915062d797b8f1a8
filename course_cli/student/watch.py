"""`course watch`: re-check on every save, debounced; Ctrl-C exits cleanly."""

from __future__ import annotations

import os
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
    from course_cli.render import make_console, render_result
    from course_cli.student.checking import check_and_record

    from course_cli.sandboxed.warm import stay_with

    stay_with(os.getpid())  # the warm grader ends when this watch does (or when idle)
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
                result, _ = check_and_record(lesson, path, exercises, workspace, "watch",
                                             record_it=record and settled is not None)
                render_result(console, result, lesson.title)
                console.print("Waiting for the next save… (Ctrl-C to stop)", style="dim")
            time.sleep(interval)
    except KeyboardInterrupt:
        console.print("\nStopped watching.")
