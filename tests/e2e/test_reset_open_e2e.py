"""test_reset_open, end to end: the tests of tests/unit/test_reset_open.py that start a child (the slow tier)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest

import browser
from course_cli.student.workspace_ops import init
from test_reset_open import L01, ROOT, STALE, solved_with_stale_output


@pytest.mark.slow
@pytest.mark.skipif(not browser.AVAILABLE, reason=browser.MISSING)
def test_in_the_browser_the_reloaded_notebook_shows_the_stub_and_no_stale_pass(tmp_path):
    pytest.importorskip("selenium", reason=browser.SELENIUM_MISSING)
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    ws = tmp_path / "ws"
    init(ws)
    solved_with_stale_output(ws / "lessons" / L01.notebook)
    tracker = ws / ".jupyter" / "lab" / "user-settings" / "@jupyterlab" / "notebook-extension"
    tracker.mkdir(parents=True)  # every cell in the page, not only those in view (JupyterLab 4's windowing)
    (tracker / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    port, token = browser.free_port(), os.urandom(12).hex()
    runtime = tmp_path / "runtime"  # this test's server, found by reset through its own runtime file
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COURSE_WORKSPACE": str(ws), "JUPYTER_RUNTIME_DIR": str(runtime)}
    with browser.server(browser.course_lab(port, token), port, token, tmp_path / "lab.log", tmp_path, env,
                        timeout=90) as base:
        driver = browser.chromium(tmp_path / "chromium", 1280, 900)
        text = lambda: driver.execute_script(  # noqa: E731
            "const n = document.querySelector('.jp-Notebook'); return n ? n.innerText : ''")
        try:
            driver.get(f"{base}/lab/tree/{L01.notebook}?token={token}")  # `course lab` serves lessons/
            try:
                WebDriverWait(driver, 150).until(lambda d: STALE in text())
            except Exception:
                driver.save_screenshot(str(tmp_path / "not-loaded.png"))
                raise
            WebDriverWait(driver, 30).until(lambda d: json.loads(urllib.request.urlopen(
                f"{base}/api/sessions?token={token}", timeout=5).read()))  # the open tab's session

            r = subprocess.run([sys.executable, "-m", "course_cli", "reset", "lesson01", "softmax"], cwd=ws,
                               env=env, capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, r.stdout + r.stderr
            assert "File → Reload Notebook from Disk" in r.stdout, r.stdout
            assert STALE in text()  # JupyterLab does not reload by itself: hence the advice

            driver.find_element(By.XPATH, "//li[contains(@class,'lm-MenuBar-item')][.//*[text()='File']]").click()
            WebDriverWait(driver, 10).until(lambda d: d.find_elements(
                By.XPATH, "//li[contains(@class,'lm-Menu-item')][.//*[text()='Reload Notebook from Disk']]"))[0].click()
            time.sleep(1)
            for b in driver.find_elements(By.CSS_SELECTOR, ".jp-Dialog .jp-mod-accept"):
                b.click()
            WebDriverWait(driver, 30).until(lambda d: STALE not in text())
            page = text()
            assert "raise NotImplementedError" in page  # the restored stub
            assert "softmax: passed" not in page and "scaled_dot_product_attention: passed" in page
            driver.save_screenshot(str(tmp_path / "reset.png"))
        finally:
            driver.quit()
