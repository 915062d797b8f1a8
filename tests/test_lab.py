"""`course lab` anywhere: as root (a container, Codespaces, a cloud VM) it passes --allow-root and says so; it
takes --no-browser, --port and --ip, and hands anything after `--` to JupyterLab; the student's lab shows no
Jupyter news toast. The slow test starts it headless, as root when the tests run as root, through the `course`
command itself, and opens a lesson in headless Chromium."""

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

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")


@pytest.fixture
def ws(tmp_path, monkeypatch):
    init(tmp_path / "ws")
    monkeypatch.setenv("COURSE_WORKSPACE", str(tmp_path / "ws"))
    return tmp_path / "ws"


def argv(output: str) -> list[str]:
    line = next(ln for ln in output.splitlines() if "JUPYTER_CONFIG_DIR=" in ln)
    return shlex.split(line)[2:]  # after the two environment assignments


def test_as_root_it_passes_allow_root_and_says_so(ws, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    r = CliRunner().invoke(cli, ["lab", "lesson01", "--print-command"])
    assert r.exit_code == 0, r.output
    assert "--allow-root" in argv(r.output)
    assert "running as root" in r.output and "--allow-root" in r.output.splitlines()[0]


def test_as_a_user_it_does_not(ws, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    r = CliRunner().invoke(cli, ["lab", "lesson01", "--print-command"])
    assert r.exit_code == 0 and "--allow-root" not in r.output and "root" not in r.output.lower().replace(
        str(ws).lower(), "")


def test_flags_and_everything_after_the_double_dash_reach_jupyterlab(ws, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    r = CliRunner().invoke(cli, ["lab", "lesson01", "--no-browser", "--port", "9123", "--ip", "0.0.0.0",
                                 "--print-command", "--", "--ServerApp.token=s3cret", "--debug"])
    assert r.exit_code == 0, r.output
    args = argv(r.output)
    assert args[1] == "lab" and args[2].endswith("lesson01_sdpa.ipynb")
    assert args[3:] == ["--no-browser", "--port=9123", "--ip=0.0.0.0", "--ServerApp.token=s3cret", "--debug"]
    # no lesson: the lessons folder, and the flags still JupyterLab's
    r = CliRunner().invoke(cli, ["lab", "--print-command", "--", "--ServerApp.token=x"])
    assert r.exit_code == 0, r.output
    args = argv(r.output)
    assert args[2] == str(ws / "lessons") and args[3:] == ["--ServerApp.token=x"]


def test_a_bad_port_is_a_clean_error(ws):
    r = CliRunner().invoke(cli, ["lab", "--port", "99999", "--print-command"])
    assert r.exit_code == 2 and "Traceback" not in r.output and "99999" in r.output


def test_no_news_toast_in_the_students_lab_even_in_an_older_workspace(ws):
    quiet = ws / JUPYTER_DIR / "jupyter_server_config.d" / "attention-course-quiet.json"
    settings = (ws / JUPYTER_DIR / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension" /
                "notification.jupyterlab-settings")
    assert json.loads(quiet.read_text())["LabApp"]["news_url"] is None
    assert json.loads(settings.read_text()) == {"fetchNews": "false", "checkForUpdates": False}
    quiet.unlink()
    settings.unlink()  # a workspace made before these files existed: `course lab` adds them
    r = CliRunner().invoke(cli, ["lab", "--print-command"])
    assert r.exit_code == 0 and quiet.exists() and settings.exists()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
