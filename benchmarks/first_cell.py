"""The first check cell of a lesson in a fresh kernel, with and without course lab's kernelspec (whose
course_cli.kernel_warm starts the lesson's warm grader when the kernel starts), every figure in one run.

    python benchmarks/first_cell.py [--lessons 01,03,08] [--wait 10]

Per lesson and kernel kind: no warm server running; a kernel started for the lesson's solved notebook (as
JupyterLab starts one, JPY_SESSION_NAME naming it); `--wait` seconds (the student reads); the notebook's graded
cells run; then its first exercise's check cell is timed, execute to result. `import torch` is timed just before.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from warm_checks import stop_servers, timed  # noqa: E402


def first_cell(lesson, env: dict, kernel_path: str | None, wait: float) -> float:
    from jupyter_client.manager import start_new_kernel

    from course_cli.sandboxed.notebook import graded_cells, read_notebook

    if kernel_path is None:
        os.environ.pop("JUPYTER_PATH", None)  # the environment's own python3 kernelspec
    else:
        os.environ["JUPYTER_PATH"] = kernel_path
    quiet = {"output_hook": lambda msg: None}
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(lesson.solution_path.parent),
                              env={**env, "JPY_SESSION_NAME": str(lesson.solution_path)})
    try:
        time.sleep(wait)
        for cell in graded_cells(read_notebook(lesson.solution_path)):
            kc.execute_interactive(cell["source"], timeout=300, **quiet)
        kc.execute_interactive("from course_cli.incell import grade", timeout=60, **quiet)
        t = time.perf_counter()
        kc.execute_interactive(f'grade("{lesson.id}", "{lesson.exercises[0].name}")', timeout=600, **quiet)
        return time.perf_counter() - t
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lessons", default="01,03,08")
    ap.add_argument("--wait", type=float, default=10.0)
    args = ap.parse_args()
    from course_cli.sandboxed import references
    from course_cli.student.workspace_ops import kernel_spec
    from graders.registry import find_lesson

    references.build(references.missing())
    run_dir = Path(tempfile.mkdtemp(prefix="cwf-"))
    spec = kernel_spec(Path(tempfile.mkdtemp(prefix="cws-")), sys.executable)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_RUNTIME_DIR": str(run_dir), "COURSE_WARM": "1"}
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, wait {args.wait:g} s")
    print("| lesson | check cell | import torch (s) | plain kernel (s) | course lab's kernel (s) |")
    print("|---|---|---|---|---|")
    for n in args.lessons.split(","):
        lesson = find_lesson(f"lesson{int(n):02d}")
        stop_servers(run_dir)
        t_import = timed([sys.executable, "-c", "import torch"], env)
        plain = first_cell(lesson, env, None, args.wait)
        stop_servers(run_dir)
        ours = first_cell(lesson, env, str(spec), args.wait)
        stop_servers(run_dir)
        print(f"| {lesson.id} | `{lesson.exercises[0].name}` | {t_import:.2f} | {plain:.2f} | {ours:.2f} |", flush=True)


if __name__ == "__main__":
    main()
