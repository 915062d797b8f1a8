"""test_reset_open, end to end: the tests of tests/unit/test_reset_open.py that start a child (the slow tier)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
import nbformat
import pytest
from click.testing import CliRunner
from course_cli.main import cli
from course_cli.student import open_lab
from course_cli.student.workspace_ops import init
from graders.engine import solved_cell
from graders.registry import find_lesson
from harness import solution_cell_index
from test_reset_open import CHROMEDRIVER, CHROMIUM, L01, ROOT, STALE, _free_port, solved_with_stale_output, ws  # noqa: F401 (helpers and fixtures shared with the fast tests)


@pytest.mark.slow
@pytest.mark.skipif(not (CHROMIUM.exists() and CHROMEDRIVER.exists()), reason="needs Debian's chromium and "
                    "chromium-driver (/usr/bin/chromium, /usr/bin/chromedriver)")
def test_in_the_browser_the_reloaded_notebook_shows_the_stub_and_no_stale_pass(tmp_path):
    pytest.importorskip("selenium", reason="needs selenium: pip install -e '.[test]'")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    ws = tmp_path / "ws"
    init(ws)
    solved_with_stale_output(ws / "lessons" / L01.notebook)
    tracker = ws / ".jupyter" / "lab" / "user-settings" / "@jupyterlab" / "notebook-extension"
    tracker.mkdir(parents=True)  # every cell in the page, not only those in view (JupyterLab 4's windowing)
    (tracker / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    port, token = _free_port(), os.urandom(12).hex()
    runtime = tmp_path / "runtime"  # this test's server, found by reset through its own runtime file
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COURSE_WORKSPACE": str(ws), "JUPYTER_RUNTIME_DIR": str(runtime)}
    log = open(tmp_path / "lab.log", "w")
    server = subprocess.Popen([sys.executable, "-m", "course_cli", "lab", "--no-browser", "--ip", "127.0.0.1",
                               "--port", str(port), "--", f"--IdentityProvider.token={token}",
                               "--ServerApp.port_retries=0"],
                              cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    driver = None
    text = lambda: driver.execute_script(  # noqa: E731
        "const n = document.querySelector('.jp-Notebook'); return n ? n.innerText : ''")
    try:
        for _ in range(180):
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if server.poll() is not None:
                    pytest.fail("course lab exited:\n" + (tmp_path / "lab.log").read_text()[-3000:])
                time.sleep(0.5)
        options = webdriver.ChromeOptions()
        options.binary_location = str(CHROMIUM)
        for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                     "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1280,900",
                     "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'chromium'}"):
            options.add_argument(flag)
        driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
        driver.get(f"{base}/lab/tree/{L01.notebook}?token={token}")  # `course lab` serves lessons/
        try:
            WebDriverWait(driver, 150).until(lambda d: STALE in text())
        except Exception:
            driver.save_screenshot(str(tmp_path / "not-loaded.png"))
            raise
        WebDriverWait(driver, 30).until(lambda d: json.loads(urllib.request.urlopen(
            f"{base}/api/sessions?token={token}", timeout=5).read()))  # the open tab's session

        r = subprocess.run([sys.executable, "-m", "course_cli", "reset", "lesson01", "softmax"], cwd=ws, env=env,
                           capture_output=True, text=True, timeout=120)
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
        if driver is not None:
            driver.quit()
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
