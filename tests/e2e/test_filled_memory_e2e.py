"""engine.probe.filled_memory in a fresh interpreter (moved from tests/unit/test_filled_memory.py: it starts one):
entering it imports no module."""

from __future__ import annotations

import json
import subprocess
import sys

from graders.registry import ROOT


def test_entering_it_imports_nothing():
    """torch.use_deterministic_algorithms would import torch._inductor's config (900 modules, torch._dynamo among
    them) on the first probe of every lesson; the mode is set through torch._C instead."""
    code = ("import json, sys, torch; import graders.engine.probe as p; before = set(sys.modules)\n"
            "with p.filled_memory(torch.device('cpu')):\n    t = torch.empty(4)\n"
            "print(json.dumps([sorted(set(sys.modules) - before), bool(t.isnan().all())]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    new, nan = json.loads(out.stdout.strip().splitlines()[-1])
    assert new == [] and nan, new[:10]
