"""test_lab, end to end: the tests of tests/unit/test_lab.py that start a child (the slow tier)."""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
import pytest
from click.testing import CliRunner
from course_cli.main import cli
from course_cli.student.workspace_ops import JUPYTER_DIR, init
from test_lab import CHROMEDRIVER, CHROMIUM, ROOT, _free_port, ws  # noqa: F401 (helpers and fixtures shared with the fast tests)


@pytest.mark.slow
@pytest.mark.skipif(not (CHROMIUM.exists() and CHROMEDRIVER.exists()), reason="needs Debian's chromium and "
                    "chromium-driver (/usr/bin/chromium, /usr/bin/chromedriver)")
def test_course_lab_starts_headless_and_opens_a_lesson_in_chromium(tmp_path):
    pytest.importorskip("selenium", reason="needs selenium: pip install -e '.[test]'")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    ws = tmp_path / "ws"
    init(ws)
    port, token = _free_port(), os.urandom(12).hex()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COURSE_WORKSPACE": str(ws)}
    log = open(tmp_path / "lab.log", "w")
    server = subprocess.Popen([sys.executable, "-m", "course_cli", "lab", "lesson01", "--no-browser", "--ip",
                               "127.0.0.1", "--port", str(port), "--", f"--IdentityProvider.token={token}",
                               "--ServerApp.port_retries=0"], cwd=tmp_path, env=env, stdout=log,
                              stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    driver = None
    try:
        for _ in range(180):
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if server.poll() is not None:
                    pytest.fail("course lab exited:\n" + (tmp_path / "lab.log").read_text()[-3000:])
                time.sleep(0.5)
        else:
            pytest.fail("course lab did not start:\n" + (tmp_path / "lab.log").read_text()[-3000:])
        text = (tmp_path / "lab.log").read_text()
        if os.geteuid() == 0:
            assert "running as root" in text and "--allow-root" in text
        options = webdriver.ChromeOptions()
        options.binary_location = str(CHROMIUM)
        for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                     "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1280,900",
                     "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'chromium'}"):
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
        driver.get(f"{base}/lab/tree/lesson01_sdpa.ipynb?token={token}")
        WebDriverWait(driver, 90).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".jp-Notebook .jp-Cell"))
        WebDriverWait(driver, 30).until(lambda d: "lesson01_sdpa.ipynb" in d.execute_script(
            "return [...document.querySelectorAll('.lm-TabBar-tabLabel')].map(t => t.textContent).join(' ')"))
        time.sleep(3)  # the news question, when asked, comes as a toast a moment after the page is up
        toasts = driver.execute_script(
            "return [...document.querySelectorAll('.Toastify__toast, .jp-toast-message')].map(t => t.textContent)")
        assert not [t for t in toasts if "news" in t.lower()], toasts
        driver.save_screenshot(str(tmp_path / "lab.png"))
    finally:
        if driver is not None:
            driver.quit()
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
