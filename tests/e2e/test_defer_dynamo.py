"""engine.probe.defer_dynamo (issue 33): a meta-device tril no longer imports torch._dynamo (1.3-2.5 s of the
first check of lessons 02 and 07), and nothing else changes: the same tensors, and torch's own
`torch._dynamo.disable` wrapper in place as soon as torch._dynamo is imported (torch.compile still works)."""

from __future__ import annotations

import json
import subprocess
import sys

from graders.registry import ROOT

PROBE = r"""
import json, sys
sys.path.insert(0, {root!r})
import torch
if {defer}:
    from graders.engine import probe
x = torch.ones(3, 5, device="meta")
m = x.tril(1)
w = torch.where(x > 0, x, -x)
print(json.dumps({{"dynamo": "torch._dynamo" in sys.modules, "tril": [str(m.device), list(m.shape), str(m.dtype)],
                  "where": [str(w.device), list(w.shape), str(w.dtype)]}}))
"""

AFTER = r"""
import gc, json, sys
sys.path.insert(0, {root!r})
import torch
from graders.engine import probe
torch.ones(3, 5, device="meta").tril()  # through the stand-in, torch._dynamo not imported
import torch._dynamo
a = torch.randn(4, 4)
compiled = torch.compile(lambda t: torch.where(t > 0, t, -t).tril(), backend="eager")
same = bool(torch.equal(compiled(a), torch.where(a > 0, a, -a).tril()))
torch.ones(3, 5, device="meta").tril()  # torch._dynamo imported: the stand-in hands over to torch's wrapper
code = torch._compile._disable_dynamo(lambda: None).__code__
caches = []
for inner in gc.get_referrers(code):
    if getattr(inner, "__code__", None) is code and inner.__closure__:
        fn = dict(zip(code.co_freevars, (c.cell_contents for c in inner.__closure__)))["fn"]
        if getattr(fn, "__dynamo_disable", None) is not None:
            caches.append(getattr(fn.__dynamo_disable, "_torchdynamo_disable", False))
print(json.dumps({{"same": same, "torch's": sum(caches), "stand-ins": len(caches) - sum(caches)}}))
"""


def run(script: str, **kw) -> dict:
    out = subprocess.run([sys.executable, "-c", script.format(root=str(ROOT), **kw)], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_meta_tril_imports_torch_dynamo_without_it_and_not_with_it():
    plain, deferred = run(PROBE, defer=False), run(PROBE, defer=True)
    # the control: if torch stops importing torch._dynamo here, defer_dynamo is dead code and can go
    assert plain["dynamo"], "a meta-device tril no longer imports torch._dynamo: defer_dynamo is not needed"
    assert not deferred["dynamo"]
    assert deferred["tril"] == plain["tril"] == ["meta", [3, 5], "torch.float32"]
    assert deferred["where"] == plain["where"]


def test_once_torch_dynamo_is_imported_torch_s_own_wrapper_takes_over():
    got = run(AFTER)
    assert got["same"], "torch.compile gave another result after defer_dynamo"
    assert got["torch's"] >= 1, "a stand-in called after torch._dynamo was imported did not hand over"
    assert got["stand-ins"] > 0  # the ones never called since: still deferred, harmlessly
