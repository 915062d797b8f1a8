"""The fast tier's guard (tests/conftest.py, `_no_child_outside_e2e`) refuses every way this interpreter starts a
process: subprocess (which on 3.11 calls its own `subprocess._fork_exec`, not `_posixsubprocess.fork_exec`),
multiprocessing, os.fork, os.posix_spawn and os.system."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys

import pytest


@pytest.mark.parametrize("start", [
    lambda: subprocess.run([sys.executable, "-c", "pass"], check=False),
    lambda: subprocess.Popen([sys.executable, "-c", "pass"]).wait(),
    lambda: subprocess.check_output(["true"]),
    lambda: os.system("true"),
    lambda: os.posix_spawn(sys.executable, [sys.executable, "-c", "pass"], dict(os.environ)),
    lambda: os.fork(),
    lambda: multiprocessing.get_context("fork").Process(target=print).start(),
    lambda: multiprocessing.get_context("spawn").Process(target=print).start(),
], ids=["subprocess.run", "Popen", "check_output", "os.system", "posix_spawn", "fork", "mp-fork", "mp-spawn"])
def test_a_fast_test_cannot_start_a_process(start):
    with pytest.raises(AssertionError, match="starts a process: move it to tests/e2e/"):
        start()
