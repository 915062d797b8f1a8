"""What a student sees, in a real browser: JupyterLab (127.0.0.1, a token, a temporary root) with lesson 01's
student notebook in headless Chromium, Run All, and the check cells' output read off the page.

Three notebooks: the untouched stub ("not implemented"), the solved one ("passed"), and one with a catalogued
mistake planted (the likely mistake and its figure on the page, no horizontal overflow in the output area, and
the cells after the failing check ran). Screenshots go to $COURSE_SCREENSHOTS (default: the test's temporary
folder); docs/images/ holds the ones shown in the README. Needs Debian's chromium and chromium-driver and the
`test` extra (selenium); skipped, with the reason, without them.
"""

from __future__ import annotations

import copy
import json
import os
import time
from pathlib import Path

import nbformat
import pytest

import browser
from graders.engine import mistake_source, solved_cell
from graders.registry import ROOT, find_lesson
from harness import mistakes_of, solution_cell_index

pytestmark = [pytest.mark.slow, pytest.mark.lesson01]

L01 = find_lesson("lesson01")
LAST = "print('the last cell ran')"

if not browser.AVAILABLE:
    pytest.skip(browser.MISSING, allow_module_level=True)
selenium = pytest.importorskip("selenium", reason=browser.SELENIUM_MISSING)
from selenium.webdriver.common.by import By  # noqa: E402


def _notebooks(lessons: Path) -> dict[str, Path]:
    """The student notebook as released, solved, and with one mistake; each ends with a cell that prints."""
    stub = nbformat.read(L01.student_path, as_version=4)
    solved = nbformat.read(L01.student_path, as_version=4)
    for ex in L01.exercises:
        solved.cells[solution_cell_index(solved, ex.name)].source = solved_cell(L01.id, ex.name)
    mistake = next(m for m in mistakes_of(L01) if m.id == "divide_by_dk")
    planted = nbformat.read(L01.student_path, as_version=4)
    planted.cells = copy.deepcopy(solved.cells)
    planted.cells[solution_cell_index(planted, mistake.exercise)].source = mistake_source(mistake)
    out = {}
    for name, nb in (("stub", stub), ("solved", solved), ("mistake", planted)):
        nb.cells.append(nbformat.v4.new_code_cell(LAST))
        path = lessons / f"{name}.ipynb"
        nbformat.write(nb, path)
        out[name] = path
    return out


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    from course_cli.student.workspace_ops import JUPYTER_DIR, init

    root = tmp_path_factory.mktemp("lab")
    init(root)  # a student's workspace: .course/, lessons/, .jupyter/ (no nbgrader instructor UI)
    notebooks = _notebooks(root / "lessons")
    # every cell in the page, not only the visible ones (JupyterLab 4 renders a window of cells by default)
    settings = root / JUPYTER_DIR / "lab" / "user-settings" / "@jupyterlab"
    (settings / "notebook-extension").mkdir(parents=True)
    (settings / "notebook-extension" / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    (settings / "apputils-extension").mkdir(parents=True, exist_ok=True)  # init writes the student's no-news settings there
    (settings / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    port, token = browser.free_port(), os.urandom(12).hex()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JUPYTER_CONFIG_DIR": str(root / JUPYTER_DIR),
           "JUPYTER_PREFER_ENV_PATH": "0", "COURSE_WORKSPACE": str(root)}  # as `course lab` starts it
    env.pop("COURSE_NBGRADER", None)
    try:
        with browser.server(browser.jupyter_lab(port, token, root), port, token, root / "jupyter.log", root, env,
                            timeout=120) as base:
            driver = browser.chromium(tmp_path_factory.mktemp("chromium"), 1280, 1000)
            try:
                yield {"driver": driver, "base": base, "token": token, "notebooks": notebooks, "root": root}
            finally:
                driver.quit()
    except browser.ServerFailed as e:
        pytest.fail(str(e))


def _wait(predicate, timeout: float, what: str, driver=None):
    def fail(what):
        shot = ""
        if driver is not None:
            shot = str(_shots() / f"timeout-{int(time.time())}.png")
            driver.save_screenshot(shot)
        pytest.fail(f"timed out waiting for {what} (screenshot: {shot})")
    return browser.wait(predicate, timeout, what, on_timeout=fail)


def _shots() -> Path:
    folder = Path(os.environ.get("COURSE_SCREENSHOTS") or ROOT / "build" / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _status(driver) -> str:
    return driver.execute_script(
        "const e = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator');"
        "return e ? e.getAttribute('data-status') : null;") or ""


def run_all(lab, name: str, done) -> object:
    """Open `name` in JupyterLab, Run All Cells from the menu, and wait for `done(driver)`."""
    driver = lab["driver"]
    # a workspace of its own, reset: this notebook is the only one open
    driver.get(f"{lab['base']}/lab/workspaces/{name}/tree/lessons/{name}.ipynb?reset&token={lab['token']}")
    _wait(lambda: driver.find_elements(By.CSS_SELECTOR, ".jp-NotebookPanel .jp-Cell"), 90, "the notebook", driver)
    _wait(lambda: _status(driver) == "idle" and "Idle" in driver.find_element(
        By.CSS_SELECTOR, ".jp-StatusBar-Widget, #jp-main-statusbar").text, 120, "an idle kernel", driver)
    driver.find_element(By.CSS_SELECTOR, ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell").click()  # focus it
    driver.find_element(By.XPATH, "//div[contains(@class,'lm-MenuBar-itemLabel') and text()='Run']").click()
    _wait(lambda: driver.find_element(By.XPATH, "//div[contains(@class,'lm-Menu-itemLabel') and "
                                                "text()='Run All Cells']"), 10, "the Run menu", driver).click()
    _wait(lambda: done(driver) and _status(driver) == "idle", 300, f"Run All of {name}", driver)
    return driver


def _checks(driver):
    return driver.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output .course-check")


def _text(driver) -> str:
    return driver.find_element(By.CSS_SELECTOR, ".jp-NotebookPanel").text


def _overflowing(driver) -> list[str]:
    """Output areas (and the notebook) wider than their box: what a student would have to scroll sideways."""
    return driver.execute_script("""
        const bad = [];
        for (const e of document.querySelectorAll('.jp-NotebookPanel .jp-OutputArea-output, .jp-NotebookPanel-notebook')) {
            if (e.scrollWidth > e.clientWidth + 1) bad.push(e.className + ' ' + e.scrollWidth + '>' + e.clientWidth);
        }
        return bad;""")


def _shoot(driver, element, name: str) -> Path:
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", element)
    time.sleep(0.5)
    path = _shots() / f"{name}.png"
    driver.save_screenshot(str(path))
    return path


def test_stub_says_not_implemented(lab):
    driver = run_all(lab, "stub", lambda d: len(_checks(d)) == 2)
    reports = _checks(driver)
    assert all("not implemented" in r.text for r in reports), [r.text for r in reports]
    assert "Traceback" not in "".join(r.text for r in reports)
    _shoot(driver, reports[0], "notebook-stub")


def test_solved_says_passed(lab):
    driver = run_all(lab, "solved", lambda d: "the last cell ran" in _text(d))
    reports = _checks(driver)
    assert len(reports) == 2 and all("passed" in r.text for r in reports), [r.text for r in reports]
    assert not driver.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output svg.course-figure")
    _shoot(driver, reports[1], "notebook-passed")


def test_planted_mistake_shows_the_likely_mistake_and_its_figure_and_run_all_goes_on(lab):
    driver = run_all(lab, "mistake", lambda d: "the last cell ran" in _text(d))
    failed = driver.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output .course-check.failed")
    assert len(failed) == 1, [r.text for r in _checks(driver)]
    report = failed[0]
    assert "Likely mistake" in report.text and "instead of √dk" in report.text
    figure = report.find_elements(By.CSS_SELECTOR, "svg.course-figure")
    assert figure and figure[0].size["width"] > 100
    assert not _overflowing(driver), _overflowing(driver)
    # the cells after the failing check ran: the heatmap demo drew its image, and the last cell printed
    assert driver.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output img")
    assert "the last cell ran" in _text(driver)
    assert "incell.py" not in _text(driver) and "Traceback" not in report.text
    _shoot(driver, report, "notebook-mistake")
    # a student's JupyterLab shows none of nbgrader's instructor UI
    menus = [e.text for e in driver.find_elements(By.CSS_SELECTOR, ".lm-MenuBar-itemLabel")]
    assert "Nbgrader" not in menus and "Formgrader" not in driver.page_source
    assert "Create Assignment" not in driver.page_source
