"""One way to drive a real browser for the tests and the benchmarks: Debian's headless Chromium through selenium,
and a JupyterLab server (`jupyter lab` or `course lab`) started, awaited and stopped.

Needs Debian's chromium and chromium-driver (`apt-get install chromium chromium-driver`) and the `test` extra
(selenium). Tests skip with `MISSING` as the reason when `AVAILABLE` is false.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
AVAILABLE = CHROMIUM.exists() and CHROMEDRIVER.exists()
MISSING = "needs Debian's chromium and chromium-driver (/usr/bin/chromium, /usr/bin/chromedriver)"
SELENIUM_MISSING = "needs selenium: pip install -e '.[test]'"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait(predicate, timeout: float, what: str, interval: float = 0.5, on_timeout=None):
    """Poll `predicate` until it returns something truthy (exceptions count as "not yet": the page is still
    changing); past `timeout` call `on_timeout(what)` (default: raise TimeoutError)."""
    end = time.time() + timeout
    while time.time() < end:
        try:
            value = predicate()
            if value:
                return value
        except Exception:
            pass
        time.sleep(interval)
    if on_timeout is not None:
        return on_timeout(what)
    raise TimeoutError(f"timed out waiting for {what}")


def chromium(profile: Path, width: int = 1280, height: int = 1000, logs: tuple[str, ...] = ()):
    """Headless Chromium with a fresh profile in `profile` and no background networking, at `width` x `height`.
    `logs` keeps them for `driver.get_log(...)`: "browser" (the page's console), "performance" (its requests)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", f"--window-size={width},{height}",
                 "--disable-dev-shm-usage", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    if logs:
        options.set_capability("goog:loggingPrefs", {kind: "ALL" for kind in logs})
    return webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)


def jupyter_lab(port: int, token: str, root: Path) -> list[str]:
    """The command line of a plain JupyterLab serving `root` on 127.0.0.1:`port` (as `course lab` starts it)."""
    return ([str(Path(sys.executable).parent / "jupyter"), "lab", "--no-browser", "--ServerApp.ip=127.0.0.1",
             f"--ServerApp.port={port}", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
             "--ServerApp.port_retries=0"] + (["--allow-root"] if os.geteuid() == 0 else []))


def course_lab(port: int, token: str, *args: str) -> list[str]:
    """The command line of `course lab [args]` on 127.0.0.1:`port` with `token`, no browser of its own."""
    return ([sys.executable, "-m", "course_cli", "lab", *args, "--no-browser", "--ip", "127.0.0.1", "--port",
             str(port), "--", f"--IdentityProvider.token={token}", "--ServerApp.port_retries=0"])


class ServerFailed(RuntimeError):
    """The server exited or never answered; the message ends with its log."""


@contextlib.contextmanager
def server(command: list[str], port: int, token: str, log_path: Path, cwd: Path, env: dict, timeout: float = 90):
    """Start `command` (a Jupyter server), wait until its API answers, yield its base URL, and stop it at the end
    (terminate, then kill after 20 s). Raises ServerFailed, with the log's tail, if it exits or never answers."""
    log = open(log_path, "w")
    proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        def up():
            if proc.poll() is not None:
                raise ServerFailed("the server exited:\n" + Path(log_path).read_text()[-3000:])
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2):
                    return True
            except OSError:
                return False

        end = time.time() + timeout
        while not up():
            if time.time() > end:
                raise ServerFailed("the server did not start:\n" + Path(log_path).read_text()[-3000:])
            time.sleep(0.5)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
