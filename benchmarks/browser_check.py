"""A check cell in JupyterLab, from the key press to the rendered result, in a real browser (issue 33).

    python benchmarks/browser_check.py [--runs 7] [--lessons lesson01 lesson10] [--workspace DIR]

Starts JupyterLab on a fresh student workspace (`course init`), opens each lesson's solved notebook in headless
Chromium (Debian's chromium and chromium-driver, driven by selenium), runs all its cells once (the warm server
starts with the first check cell), then, `--runs` times per lesson, focuses the first exercise's check cell and
presses Shift+Enter. The page measures the time itself: a keydown listener notes `performance.now()`, and a
MutationObserver notes when a new `.course-check` result appears in that cell's output. Goals: lesson 01 at most
0.5 s, lesson 10 at most 1.5 s (the probes' own work). The workspace must not be under /tmp (warm checks are off
there); the default is a fresh folder under the current directory's `build/`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
import browser  # noqa: E402  (tests/browser.py: the course's one way to drive Chromium and JupyterLab)

ARM = """
const cell = arguments[0];
window.__t0 = null; window.__t1 = null;
for (const e of cell.querySelectorAll('.course-check')) e.dataset.old = '1';
if (window.__observer) window.__observer.disconnect();
window.__observer = new MutationObserver(() => {
  if (window.__t0 !== null && window.__t1 === null
      && [...cell.querySelectorAll('.course-check')].some(e => !e.dataset.old)) window.__t1 = performance.now();
});
window.__observer.observe(cell, {childList: true, subtree: true});
if (!window.__keyed) {
  window.__keyed = true;
  document.addEventListener('keydown', e => {
    if (e.key === 'Enter' && e.shiftKey) window.__t0 = performance.now();
  }, true);
}
"""


def _wait(predicate, timeout: float, what: str):
    def fail(what):
        raise SystemExit(f"timed out waiting for {what}")
    return browser.wait(predicate, timeout, what, interval=0.05, on_timeout=fail)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--lessons", nargs="+", default=["lesson01", "lesson10"])
    ap.add_argument("--workspace", type=Path, default=None)
    args = ap.parse_args()

    from course_cli.student.workspace_ops import JUPYTER_DIR, init
    from graders.registry import find_lesson

    (ROOT / "build").mkdir(exist_ok=True)
    ws = args.workspace or Path(tempfile.mkdtemp(prefix="browser-check-", dir=ROOT / "build"))
    init(ws)
    settings = ws / JUPYTER_DIR / "lab" / "user-settings" / "@jupyterlab"
    (settings / "notebook-extension").mkdir(parents=True, exist_ok=True)  # every cell rendered, not a window
    (settings / "notebook-extension" / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    for lid in args.lessons:  # the solved notebook, as a student who finished the lesson has it
        lesson = find_lesson(lid)
        shutil.copy(lesson.solution_path, ws / "lessons" / lesson.notebook)
    port, token = browser.free_port(), os.urandom(12).hex()
    run_dir = Path(tempfile.mkdtemp(prefix="cwb-", dir=ROOT / "build"))  # the warm server's socket, private
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JUPYTER_CONFIG_DIR": str(ws / JUPYTER_DIR),
           "JUPYTER_PREFER_ENV_PATH": "0", "COURSE_WORKSPACE": str(ws), "COURSE_WARM": "1",
           "XDG_RUNTIME_DIR": str(run_dir)}
    results = {}
    try:
        with browser.server(browser.jupyter_lab(port, token, ws), port, token, ws / "jupyter.log", ws, env) as base:
            driver = browser.chromium(ws / ".chromium", 1280, 1000)
            try:
                _measure(driver, base, token, args, results)
            finally:
                driver.quit()
    finally:
        for pidfile in (run_dir / "attention-course").glob("w-*.pid"):
            try:
                os.kill(int(pidfile.read_text()), 15)
            except (OSError, ValueError):
                pass
    print(f"measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f} at the end")


def _measure(driver, base: str, token: str, args, results: dict) -> None:
    """Per lesson: Run All once, then `--runs` Shift+Enter presses on the first exercise's check cell."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    from graders.registry import find_lesson

    for lid in args.lessons:
        lesson = find_lesson(lid)
        exercise = lesson.exercises[0].name
        driver.get(f"{base}/lab/workspaces/{lid}/tree/lessons/{lesson.notebook}?reset&token={token}")
        status = ("const e = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) "
                  ".jp-Notebook-ExecutionIndicator'); return e ? e.getAttribute('data-status') : null;")
        _wait(lambda: driver.find_elements(By.CSS_SELECTOR, ".jp-NotebookPanel .jp-Cell"), 90, "the notebook")
        _wait(lambda: driver.execute_script(status) == "idle" and "Idle" in driver.find_element(
            By.CSS_SELECTOR, ".jp-StatusBar-Widget, #jp-main-statusbar").text, 120, "an idle kernel")
        _wait(lambda: driver.find_element(
            By.CSS_SELECTOR, ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell").click() or True, 30, "a cell")
        driver.find_element(By.XPATH, "//div[contains(@class,'lm-MenuBar-itemLabel') and text()='Run']").click()
        _wait(lambda: driver.find_element(By.XPATH, "//div[contains(@class,'lm-Menu-itemLabel') and "
                                                    "text()='Run All Cells']"), 10, "the Run menu").click()
        n_checks = len(lesson.exercises)
        _wait(lambda: len(driver.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output .course-check"))
              >= n_checks and driver.execute_script(status) == "idle", 600, f"Run All of {lid}")
        cell = _wait(lambda: next(c for c in driver.find_elements(By.CSS_SELECTOR, ".jp-NotebookPanel .jp-CodeCell")
                                  if f'grade("{lid}", "{exercise}")' in c.text), 30, "the check cell")
        times = []
        for _ in range(args.runs):
            driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", cell)
            cell.find_element(By.CSS_SELECTOR, ".jp-InputArea-prompt").click()  # select it (command mode)
            driver.execute_script(ARM, cell)
            ActionChains(driver).key_down(Keys.SHIFT).send_keys(Keys.ENTER).key_up(Keys.SHIFT).perform()
            _wait(lambda: driver.execute_script("return window.__t1 !== null && window.__t0 !== null"), 120,
                  f"the {exercise} check's result")
            times.append(driver.execute_script("return window.__t1 - window.__t0") / 1000)
            _wait(lambda: driver.execute_script(status) == "idle", 60, "an idle kernel")
        results[lid] = (exercise, times)
        print(f"{lid} `{exercise}` check cell, key press to rendered result: median {statistics.median(times):.2f} s "
              f"(min {min(times):.2f}, max {max(times):.2f}, {len(times)} runs)", flush=True)


if __name__ == "__main__":
    main()
