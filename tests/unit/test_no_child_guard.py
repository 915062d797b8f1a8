"""The fast tier's guard (tests/conftest.py, _no_child_outside_e2e) refuses every way Python starts a process:
on 3.11 subprocess binds `_posixsubprocess.fork_exec` at import, which the guard once missed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import StartsAChild


@pytest.mark.parametrize("start", [
    lambda: subprocess.run([sys.executable, "-c", "pass"]),
    lambda: subprocess.Popen(["true"]),
    lambda: os.system("true"),
    lambda: os.fork(),
], ids=["subprocess.run", "Popen", "os.system", "os.fork"])
def test_starting_a_process_fails_the_fast_test(start):
    with pytest.raises(StartsAChild):
        start()
