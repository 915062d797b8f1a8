"""test_triton_compat, end to end: the tests of tests/unit/test_triton_compat.py that start a child (the slow tier)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
import pytest
from test_triton_compat import ROOT, SCRIPT  # noqa: F401 (helpers and fixtures shared with the fast tests)


def test_patch_interpreter_fixes_run_time_loop_bounds():
    import numpy

    if tuple(int(p) for p in numpy.__version__.split(".")[:2]) < (2, 4):
        pytest.skip("NumPy < 2.4 converts one-element arrays: nothing to fix")
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "old interpreter failed" in proc.stdout, proc.stdout  # the bug is real with this NumPy
    assert "patched: True False" in proc.stdout, proc.stdout  # patched once, then left alone
    assert "sum: 4950.0" in proc.stdout, proc.stdout  # 0 + 1 + ... + 99
