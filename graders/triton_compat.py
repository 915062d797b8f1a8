"""Triton's interpreter across the versions the course meets (3.6 on the GPU machines, 3.9 pinned here).

Triton 3.6's interpreter turns a loop bound such as `range(0, T, BLOCK)` into a Python int with
`int(array)`, on a one-element array; NumPy 2.4 and later refuse that ("only 0-dimensional arrays can
be converted to Python scalars"), so every kernel with a run-time loop bound fails there. Later Triton
squeezes the array first; `patch_interpreter()` makes any version do so (once per process). Graded
children and `graders.parts` call it before a lesson's cells run; it touches Triton only when
TRITON_INTERPRET=1 and triton is importable.
"""

from __future__ import annotations

import os


def patch_interpreter() -> bool:
    """Make the interpreter's tensor-to-int conversion squeeze first. Returns True if it patched."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return False
    try:
        import triton.runtime.interpreter as interpreter
    except Exception:  # no triton, or one without an interpreter: nothing to patch
        return False
    original = getattr(interpreter, "_patch_lang_tensor", None)
    if original is None or getattr(original, "_course_patched", False):
        return False
    # Squeezing first is what later versions do: harmless where the conversion is already right.

    def patched(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.squeeze()))

    patched._course_patched = True
    interpreter._patch_lang_tensor = patched
    return True
