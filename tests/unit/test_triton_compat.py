"""graders/triton_compat.py: Triton 3.6's interpreter under NumPy >= 2.4 (the GPU machines' CPU checks).

Triton 3.9 is pinned here, so the old interpreter's conversion is put back for the test: the kernel with a
run-time loop bound must fail with it, and run once `patch_interpreter()` has fixed it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r'''
import numpy, torch, triton, triton.language as tl
import triton.runtime.interpreter as interpreter
from triton.runtime.errors import InterpreterError
from graders.triton_compat import patch_interpreter

real = interpreter._patch_lang_tensor

def as_in_triton_3_6(tensor, scope):  # Triton 3.6: int() of the one-element array itself
    real(tensor, scope)
    scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data))

interpreter._patch_lang_tensor = as_in_triton_3_6

@triton.jit
def total(X, Out, T, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, T, BLOCK):  # a run-time bound
        acc += tl.load(X + start + tl.arange(0, BLOCK), mask=start + tl.arange(0, BLOCK) < T, other=0.0)
    tl.store(Out, tl.sum(acc, 0))

x, out = torch.arange(100, dtype=torch.float32), torch.zeros(1)
try:
    total[(1,)](x, out, 100, BLOCK=16)
    print("old interpreter ran")
except InterpreterError as exc:
    print("old interpreter failed:", exc)
print("patched:", patch_interpreter(), patch_interpreter())
total[(1,)](x, out, 100, BLOCK=16)
print("sum:", out.item())
'''


def test_patch_interpreter_does_nothing_without_the_interpreter(monkeypatch):
    from graders.triton_compat import patch_interpreter

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert patch_interpreter() is False
