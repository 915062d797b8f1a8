"""Dtype-aware tensor comparison with feedback a tensor person can act on.

`close(actual, expected, ...)` returns None when the two agree and otherwise one message that says
what differs: shape, dtype, NaN/Inf, max abs/rel error, the first bad index and the tolerance used
(and why that tolerance, from the dtype and device).
"""

from __future__ import annotations

from dataclasses import dataclass

import contextlib
import contextvars
import torch


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float
    why: str

    def scaled(self, factor: float) -> "Tolerance":
        return Tolerance(self.atol * factor, self.rtol * factor, self.why)

    def __str__(self) -> str:
        return f"atol={self.atol:.0e}, rtol={self.rtol:.0e} ({self.why})"


TOLERANCES = {
    "float64": Tolerance(1e-9, 1e-7, "float64"),
    "float32": Tolerance(1e-5, 1e-4, "float32, with room for a different order of summation"),
    "float16": Tolerance(2e-3, 2e-3, "float16 keeps about 3 significant digits"),
    "bfloat16": Tolerance(2e-2, 2e-2, "bfloat16 keeps about 2 significant digits"),
}


def tolerance(dtype: str | torch.dtype, device: str = "cpu") -> Tolerance:
    name = str(dtype).removeprefix("torch.")
    tol = TOLERANCES.get(name, TOLERANCES["float32"])
    return Tolerance(tol.atol, tol.rtol, f"{tol.why}; on {device}")


def describe(x) -> str:
    if isinstance(x, torch.Tensor):
        return f"a Tensor of shape {tuple(x.shape)} and dtype {str(x.dtype).removeprefix('torch.')}"
    if isinstance(x, dict) and "__type__" in x:
        return f"a {x['__type__']}"
    return f"a {type(x).__name__}"


def _index(flat_index: int, shape) -> tuple:
    idx = []
    for size in reversed(shape):
        idx.append(flat_index % size if size else 0)
        flat_index //= max(size, 1)
    return tuple(reversed(idx))


def _fmt(v: float) -> str:
    return f"{v:.4g}"


def _pair(expected: float, got: float) -> tuple[str, str]:
    """`expected` and `got` with 4 significant digits, or as many more as it takes for two different numbers
    to read differently (never "expected -1.325, got -1.325")."""
    e, g = float(expected), float(got)
    for digits in range(4, 18):
        se, sg = f"{e:.{digits}g}", f"{g:.{digits}g}"
        if se != sg or e == g:
            return se, sg
    return repr(e), repr(g)


# How a failure was found, recorded where its message is made (not read back from its wording): the verdict
# collects the failures a judge's comparisons produced (`collecting`) and tells a wrong shape or dtype first.
_COLLECTED: contextvars.ContextVar[list | None] = contextvars.ContextVar("compare_failures", default=None)


@contextlib.contextmanager
def collecting():
    """Within this block, every failure `close` reports is recorded as (message, what): "shape", "dtype" or
    "values"; yields the list."""
    found: list[tuple[str, str]] = []
    token = _COLLECTED.set(found)
    try:
        yield found
    finally:
        _COLLECTED.reset(token)


def _failed(message: str, what: str) -> str:
    found = _COLLECTED.get()
    if found is not None:
        found.append((message, what))
    return message


def broken_rule(message: str) -> str:
    """A judge's message that says which rule the code's own outputs break between them (one row alone against
    the same row in a batch, LN(a·x + b) against LN(x)), with the comparison of those outputs inside it: recorded
    as a "property" failure, which feedback tells before a comparison with the reference (course_cli/render.py
    `explains`). The message must contain the inner comparison's whole text."""
    return _failed(message, "property")


def close(actual, expected, what: str = "output", tol: Tolerance | None = None,
          check_dtype: bool = True) -> str | None:
    """None when `actual` matches `expected` within `tol`; otherwise a message saying how it differs."""
    msg = _close(actual, expected, what, tol, check_dtype)
    if msg is None:
        return None
    kind = "values"
    if not isinstance(actual, torch.Tensor) or actual.shape != expected.shape:
        kind = "shape"
    elif check_dtype and actual.dtype != expected.dtype:
        kind = "dtype"
    return _failed(msg, kind)


def _close(actual, expected, what: str, tol: Tolerance | None, check_dtype: bool) -> str | None:
    if not isinstance(expected, torch.Tensor):
        raise TypeError(f"reference {what} is {describe(expected)}, not a Tensor")
    if not isinstance(actual, torch.Tensor):
        return f"{what} should be a Tensor of shape {tuple(expected.shape)}, but it is {describe(actual)}"
    if actual.shape != expected.shape:
        return f"{what} has shape {tuple(actual.shape)}, expected {tuple(expected.shape)}"
    if check_dtype and actual.dtype != expected.dtype:
        return (f"{what} has dtype {str(actual.dtype).removeprefix('torch.')}, expected "
                f"{str(expected.dtype).removeprefix('torch.')} (keep the input's dtype)")
    tol = tol or tolerance(expected.dtype)
    if actual.dtype == torch.bool or expected.dtype == torch.bool:
        bad = actual != expected
        if bad.any():
            i = _index(int(bad.flatten().nonzero()[0]), actual.shape)
            return (f"{what} differs at {int(bad.sum())} of {bad.numel()} positions; first at index {i}: "
                    f"expected {bool(expected[i])}, got {bool(actual[i])}")
        return None
    a, e = actual.detach().double(), expected.detach().double()
    a_nan, e_nan = torch.isnan(a), torch.isnan(e)
    if (a_nan & ~e_nan).any():
        i = _index(int((a_nan & ~e_nan).flatten().nonzero()[0]), a.shape)
        return (f"{what} has {int((a_nan & ~e_nan).sum())} NaN values where the reference has numbers; "
                f"first at index {i} (expected {_fmt(e[i])})")
    a_inf, e_inf = torch.isinf(a), torch.isinf(e)
    if (a_inf & ~(e_inf & (a == e))).any():
        mask = a_inf & ~(e_inf & (a == e))
        i = _index(int(mask.flatten().nonzero()[0]), a.shape)
        return f"{what} has {int(mask.sum())} infinite values the reference lacks; first at index {i}"
    # torch.isclose's rule (torch.testing.assert_close's, without its first call's import of
    # torch.distributed.tensor, 1.5 s on a slow machine): |a - e| <= atol + rtol * |e|, NaN where NaN, an
    # infinity only where the same infinity
    finite = ~(e_nan | e_inf)
    diff = torch.where(finite, (a - e).abs(), torch.zeros_like(a))
    diff = torch.where(e_nan & ~a_nan, torch.full_like(a, float("inf")), diff)
    bad = (diff > tol.atol + tol.rtol * e.abs()) | (e_nan & ~a_nan) | (e_inf & (a != e))
    if not bool(bad.any()):
        return None
    rel = diff / e.abs().clamp_min(1e-12)
    n_bad = int(bad.sum())
    first = _index(int(bad.flatten().nonzero()[0]), a.shape)
    # The first index within rounding of the largest error: where errors tie (a constant offset, a uniform
    # row), argmax would pick whichever rounding made a hair larger, and that differs between CPUs. "Within
    # rounding": a few float32 steps of the largest value compared, or a millionth of the error itself.
    top = diff.max()
    if bool(torch.isfinite(top)):
        scale = torch.where(finite, e.abs(), torch.zeros_like(e)).max()
        near = diff.flatten() >= top - torch.maximum(1e-6 * top, 2.0 ** -20 * scale)
    else:
        near = diff.flatten() == top
    worst = _index(int(near.nonzero()[0]), a.shape)
    return (f"{what} differs from the reference at {n_bad} of {a.numel()} positions: "
            f"max abs error {_fmt(diff.max())} at index {worst} (expected {'%s, got %s' % _pair(e[worst], a[worst])}), "
            f"max rel error {_fmt(rel[finite].max()) if finite.any() else 'n/a'}; first bad index {first} "
            f"(expected {'%s, got %s' % _pair(e[first], a[first])}); tolerance {tol}")


def first_failure(*messages: str | None) -> str | None:
    for m in messages:
        if m:
            return m
    return None
