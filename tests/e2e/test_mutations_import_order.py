"""graders.engine.mutations_shape registers its operator families in mutations.OPERATORS whichever of the two
modules a process imports first (each case a fresh interpreter, hence the slow tier)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("first", ["graders.engine.mutations_shape", "graders.engine.mutations"])
def test_either_module_may_be_imported_first(first):
    code = (f"import importlib; importlib.import_module({first!r}); from graders.engine import mutations as M; "
            "from graders.engine import mutations_shape as S; assert all(op in M.OPERATORS for op in S.OPERATORS)")
    subprocess.run([sys.executable, "-c", code], check=True)
