"""test_lab, end to end: the tests of tests/unit/test_lab.py that start a child (the slow tier)."""

from __future__ import annotations

import os
import sys
import time

import pytest

import browser
from course_cli.student.workspace_ops import init
from graders.registry import ROOT


@pytest.mark.slow
@pytest.mark.skipif(not browser.AVAILABLE, reason=browser.MISSING)
def test_course_lab_starts_headless_and_opens_a_lesson_in_chromium(tmp_path):
    pytest.importorskip("selenium", reason=browser.SELENIUM_MISSING)
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    ws = tmp_path / "ws"
    init(ws)
    port, token = browser.free_port(), os.urandom(12).hex()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COURSE_WORKSPACE": str(ws)}
    with browser.server(browser.course_lab(port, token, "lesson01"), port, token, tmp_path / "lab.log", tmp_path,
                        env, timeout=90) as base:
        text = (tmp_path / "lab.log").read_text()
        if os.geteuid() == 0:
            assert "running as root" in text and "--allow-root" in text
        driver = browser.chromium(tmp_path / "chromium", 1280, 900, logs=("browser",))
        try:
            driver.get(f"{base}/lab/tree/lesson01_sdpa.ipynb?token={token}")
            WebDriverWait(driver, 90).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".jp-Notebook .jp-Cell"))
            WebDriverWait(driver, 30).until(lambda d: "lesson01_sdpa.ipynb" in d.execute_script(
                "return [...document.querySelectorAll('.lm-TabBar-tabLabel')].map(t => t.textContent).join(' ')"))
            time.sleep(3)  # the news question, when asked, comes as a toast a moment after the page is up
            toasts = driver.execute_script(
                "return [...document.querySelectorAll('.Toastify__toast, .jp-toast-message')].map(t => t.textContent)")
            assert not [t for t in toasts if "news" in t.lower()], toasts
            driver.save_screenshot(str(tmp_path / "lab.png"))
            # the notebook's kernel is the workspace's python3 spec (this Python, course_cli.kernel_warm), and it
            # started: its session reaches idle
            import json
            import urllib.request

            def api(path):
                with urllib.request.urlopen(f"{base}/api/{path}?token={token}", timeout=10) as r:
                    return json.load(r)

            spec = api("kernelspecs")["kernelspecs"]["python3"]["spec"]
            assert spec["argv"][0] == sys.executable and "--ext=course_cli.kernel_warm" in spec["argv"], spec
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                states = [x["kernel"]["execution_state"] for x in api("sessions")
                          if x["path"].endswith("lesson01_sdpa.ipynb")]
                if "idle" in states:
                    break
                time.sleep(0.5)
            assert "idle" in states, states
        finally:
            driver.quit()
