"""The parent's side, per check: the shared judges a lesson uses (`same`, `agrees_with`,
`raises_value_error`, ...), the judge's context (tolerance), and comparing observations."""

from __future__ import annotations

import torch

from . import compare
from .checks import Judge, JudgeContext  # noqa: F401 (JudgeContext: a judge's argument)


def wrong_devices(s_obs: dict, r_obs: dict, device: str) -> dict:
    """The student's observations that came back on another device than the reference's did."""
    s_moved, r_moved = s_obs.get("__devices__"), r_obs.get("__devices__")
    s_moved = s_moved if isinstance(s_moved, dict) else {}
    r_moved = r_moved if isinstance(r_moved, dict) else {}
    return {k: d for k, d in s_moved.items() if r_moved.get(k, device) != d}



def same(*keys: str, scale: float = 1.0, check_dtype: bool = True) -> Judge:
    """A judge: the student's observations under `keys` (default: every tensor the reference
    observed) match the reference's within the config's tolerance times `scale`."""
    def judge(s: dict, r: dict, ctx: "JudgeContext") -> str | None:
        for k in keys or [k for k, v in r.items() if isinstance(v, torch.Tensor)]:
            msg = compare.close(s.get(k), r[k], what=k, tol=ctx.tol.scaled(scale), check_dtype=check_dtype)
            if msg:
                return msg
        return None
    return judge


def agrees_with(*keys: str | tuple[str, str], scale: float = 1.0, half_scale: float = 1.0, label: str = "",
                prefix: str = "torch ", note: str = "") -> Judge:
    """A judge: the student's observation `key` agrees with torch's answer, which the probe records as
    `prefix + key` (only the reference child's copy is ever read). A key may be a pair (mine, theirs) to
    compare with another reference observation. Without keys: every key whose `prefix + key` the
    reference observed. `half_scale` widens the tolerance for float16/bfloat16 further (torch
    accumulates in float32); `label` names torch's function in the message; `note` is appended to it."""
    def judge(s: dict, r: dict, ctx: "JudgeContext") -> str | None:
        pairs = [k if isinstance(k, tuple) else (k, prefix + k) for k in keys] or \
            [(k, prefix + k) for k in r if not k.startswith(prefix) and prefix + k in r]
        half = ctx.config.dtype in ("float16", "bfloat16")
        tol = ctx.tol.scaled(scale * (half_scale if half else 1.0))
        for mine, theirs in pairs:
            msg = compare.close(s.get(mine), r[theirs], f"{mine} (against {label or theirs})", tol=tol)
            if msg:
                return msg + note
        return None
    return judge


def expect_value_error(obs: dict, what: str, name: str | None = None, why: str = "") -> str | None:
    """None when the observation (from `ctx.raised`) is a ValueError whose message names `name`."""
    if obs.get("raised") != "ValueError":
        got = "it raised nothing" if obs.get("raised") in ("nothing", None) else \
            f"it raised {obs.get('raised')}: {obs.get('message')}"
        return f"{what} should raise ValueError{f' ({why})' if why else ''}, but {got}"
    if name and name not in obs.get("message", ""):
        return f"{what} raised ValueError, but its message does not name `{name}`: {obs.get('message')!r}"
    return None


def raises_value_error(*cases: tuple, why: str = "") -> Judge:
    """A judge of `ctx.raised` observations: each case (key, what[, name]) raised a ValueError, whose
    message names `name` when given."""
    def judge(s: dict, r: dict, ctx: "JudgeContext") -> str | None:
        for key, what, *name in cases:
            msg = expect_value_error(s.get(key, {}), what, name[0] if name else None, why)
            if msg:
                return msg
        return None
    return judge



def made_on_meta(what: str) -> Judge:
    """A judge of `on_meta` observations: the result is on the meta device, with the reference's shape
    and dtype (code that builds on the CPU and moves, or computes values, would not be)."""
    def judge(s: dict, r: dict, ctx: "JudgeContext") -> str | None:
        if s.get("device") != "meta":
            got = f"a tensor on {s['device']!r}" if s.get("device") else f"a {s.get('got')}"
            return (f"{what} with device=\"meta\" gave {got}, not a tensor on the meta device: make every "
                    f"tensor on `device` (torch.ones(..., device=device), torch.arange(..., device=device))")
        for k in ("shape", "dtype"):
            if s.get(k) != r.get(k):
                return f"{what} with device=\"meta\" gave {k} {s.get(k)}, expected {r.get(k)}"
        return None
    return judge






def same_observations(a: dict, b: dict, tol: compare.Tolerance) -> bool:
    """Every observation in `b` is in `a` and equal within `tol` (NaN equal to NaN, inf to inf)."""
    for key, vb in b.items():
        va = a.get(key)
        if isinstance(vb, torch.Tensor):
            if not isinstance(va, torch.Tensor) or va.shape != vb.shape:
                return False
            if vb.dtype == torch.bool or va.dtype == torch.bool:
                if not torch.equal(va, vb):
                    return False
            elif not torch.allclose(va.double(), vb.double(), atol=tol.atol, rtol=tol.rtol, equal_nan=True):
                return False
        elif isinstance(vb, dict) and isinstance(va, dict):
            if not same_observations(va, vb, tol):
                return False
        elif va != vb:
            return False
    return True


