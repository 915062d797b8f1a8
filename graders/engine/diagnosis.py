"""Structural diagnosis: what the observations say happened, when no catalogued mistake matches.

Computed in the parent from the student's and the reference's observations (plain tensors, never student
code). A sentence here is either a FACT about the numbers ("yours is 0.5× the reference's on every failing
input", "your rows sum to 0.8, not 1", "matches the reference up to index 7 along axis -2") or a CAUSE whose
premise was checked on the inputs the failing checks used (a NaN row said to have nothing to attend to only
when the probe's mask has a row with no True). A cause that was not checked is never said: a wrong cause
sends a student to the wrong line (issue 44). The rules:

  device     a result on another device than the inputs' (the meta device first: the rest may be unwritten)
  axes       the output equals the reference with its last two axes swapped, every axis reversed (what `.T`
             does on more than two dims: said only when that is exactly the permutation), or permuted
  relation   ONE factor (or one shift) on every failing check of the exercise: said as that fact, never as
             where it enters (a reproduced mistake says that: `diagnose` and the catalogue)
  masks      wrong only at the probe's masked positions, or only at the ones it allows (the mask taken from
             the observations, never guessed from zeros, and only of a tensor it masks: the reference's 0 or
             -inf at every masked position); a boolean mask inverted (never of a constant one) or shifted by
             one (never along an axis the reference does not change along)
  zeros      all zeros; NaN or Inf and where they start; "nothing to attend to" only on the mask's empty rows
  dtype      the right values in the wrong dtype
  order      outputs returned in the wrong order: (weights, output) for (output, weights)
  rows       rows that should sum to 1 and do not: what they sum to
  extent     passes exactly the checks where Tq = Tk (named so only where weights or scores were observed;
             else the last two axes' sizes); right up to an index along one axis and wrong from
             there (never for index 0 alone; a tile named only in a tiled exercise, TILED, at a multiple of a
             block the call used), as facts

`settle` is the engine's fallback (graders/engine/diagnosis.py `diagnose`): it keeps a catalogued mistake only when its
observations really match (an exception matches only an exception with the same message), and
otherwise returns the structural diagnosis. It also leaves, on the first failing check, the data for a figure
(`CheckResult.figure`: the student's and the reference's matrix, the bad and the leaked cells), which
course_cli draws.
"""

from __future__ import annotations

import itertools
import math
import re

import torch

from . import compare
from .checks import ON_META, Check, Config
from .judges import JudgeContext, same_observations, wrong_devices

# ------------------------------------------------------------------------------------------------
# Tensor against tensor


def _close(a: torch.Tensor, e: torch.Tensor, tol: compare.Tolerance) -> bool:
    if a.shape != e.shape:
        return False
    if a.dtype == torch.bool or e.dtype == torch.bool:
        return bool(torch.equal(a.bool(), e.bool()))
    a, e = a.double(), e.double()
    return bool(torch.allclose(a, e, atol=tol.atol * 10, rtol=tol.rtol * 10, equal_nan=True))


def _bad(a: torch.Tensor, e: torch.Tensor, tol: compare.Tolerance) -> torch.Tensor:
    if a.dtype == torch.bool or e.dtype == torch.bool:
        return a.bool() != e.bool()
    a, e = a.double(), e.double()
    same_nonfinite = (a == e) | (a.isnan() & e.isnan())
    return ~((a - e).abs() <= tol.atol * 10 + tol.rtol * 10 * e.abs()) & ~same_nonfinite


def _idx(flat: int, shape) -> tuple[int, ...]:
    return tuple(int(i) for i in compare._index(flat, shape))


def simple_factor(c: float) -> str | None:
    """`8`, `1/8`, `√8`, `1/√8`, `-1` for a factor that is one of those (to 0.1 %), else None."""
    if c == 0 or not math.isfinite(c):
        return None
    sign, c = ("-" if c < 0 else ""), abs(c)
    for k in range(2, 4097):
        for value, text in ((k, f"{k}"), (1 / k, f"1/{k}"), (math.sqrt(k), f"√{k}"), (1 / math.sqrt(k), f"1/√{k}")):
            if "√" in text and math.isqrt(k) ** 2 == k:
                continue
            if abs(c - value) <= 1e-3 * value:
                return sign + text
    if abs(c - 1) <= 1e-3 and sign:
        return "-1"
    return None


def _permutation(a: torch.Tensor, e: torch.Tensor, tol) -> tuple[int, ...] | None:
    if a.dim() != e.dim() or a.dim() < 2 or a.dim() > 6 or sorted(a.shape) != sorted(e.shape):
        return None
    for p in itertools.permutations(range(e.dim())):
        if p == tuple(range(e.dim())):
            continue
        if tuple(e.shape[i] for i in p) == tuple(a.shape) and _close(a, e.permute(*p), tol):
            return p
    return None


def _axes_message(what: str, p: tuple[int, ...]) -> str:
    """The permutation as a fact. `.T` is named only for the one permutation it makes on more than two dims
    (every axis reversed), as what the numbers show, not as a construct the code is said to contain."""
    n = len(p)
    if p == tuple(reversed(range(n))) and n > 2:
        return (f"`{what}` equals the reference with every axis reversed (what `.T` does on more than two "
                f"dims); `.transpose(-2, -1)` (or `.mT`) swaps only the last two")
    if p == tuple(range(n - 2)) + (n - 1, n - 2):
        return f"`{what}` equals the reference with its last two axes swapped (transposed)"
    return f"`{what}` equals the reference with its axes permuted: yours is `reference.permute{p}`"


def _mask_for(r: dict, key: str, shape, ed: torch.Tensor) -> torch.Tensor | None:
    """A boolean tensor of the reference's observations that broadcasts to `shape` and masks the reference's
    tensor `ed` there (`_masked_by`): the probe's mask. A boolean of the right shape that does not mask it (a
    `padded` flag, True where a mask is False; an output as wide as the keys) is passed over."""
    for m in _masks(r, key):
        try:
            full = m.expand(shape)
        except RuntimeError:
            continue
        if _masked_by(ed, full):
            return full
    return None


def _masks(r: dict, key: str) -> list[torch.Tensor]:
    """The boolean tensors among the reference's observations other than `key`. When `key` names its probe
    call (a "(...)" tag): the booleans of that call (the same tag), else those that name no call; a mask
    recorded for another call is never read as this one's, even where this call's own does not line up with
    the tensor (it would say "masked" or "nothing to attend to" of positions this call never masked)."""
    def tag_of(k: str) -> str | None:
        return k[k.find("("):] if "(" in k and k.endswith(")") else None

    tag = tag_of(key)
    cands = [(k, v) for k, v in r.items() if isinstance(v, torch.Tensor) and v.dtype == torch.bool and k != key]
    if tag is None:
        return [v for _, v in cands]
    own = [v for k, v in cands if tag_of(k) == tag]
    return own or [v for k, v in cands if tag_of(k) is None]


def _masked_by(ed: torch.Tensor, mask: torch.Tensor) -> bool:
    """Whether the reference tensor `ed` is masked by `mask` (broadcast to its shape): it has masked positions,
    and it gives each one what masking gives, exactly 0 (a weight) or -inf (a score), or NaN. A tensor that
    merely has the mask's shape (an output whose feature axis is as wide as the keys) is not: what is said of
    masked positions would be said of positions no mask touches."""
    blocked = ~mask
    if not bool(blocked.any()):
        return False
    vals = ed[blocked]
    return bool(((vals == 0) | (vals == float("-inf")) | vals.isnan()).all())


def _empty_rows(r: dict, key: str, shape, ed: torch.Tensor | None = None) -> torch.Tensor | None:
    """Over `shape[:-1]`: the rows of observation `key` whose query sees no key at all in the probe's mask
    (a row of the mask with no True), or None when the observations carry no mask that lines up with it. Of
    attention weights or scores (`ed`, the reference's), a boolean counts as their mask only when it masks
    them (`_masked_by`): a `padded` flag, True where a mask is False, has its "empty rows" where every key is
    seen."""
    for m in _masks(r, key):
        if m.dim() < 1:
            continue
        if ed is not None and ATTENTION_KEYS.search(key):
            try:
                if not _masked_by(ed, m.expand(tuple(shape))):
                    continue
            except RuntimeError:
                continue
        try:
            return (~m.any(-1)).expand(tuple(shape[:-1]))
        except RuntimeError:
            continue
    return None


def _distinct(t: torch.Tensor) -> int:
    return int(torch.unique(t).numel()) if t.numel() else 0


def relation(a, e, tol: compare.Tolerance) -> tuple[str, float] | None:
    """("×", c) when `a` is c times `e`, ("+", s) when it is `e` plus s, everywhere (the same non-finite
    positions); None otherwise, and None when `e` takes fewer than two different finite values (a single
    number, a constant: any factor or shift fits one, so it says nothing)."""
    if not (isinstance(a, torch.Tensor) and isinstance(e, torch.Tensor)) or a.shape != e.shape:
        return None
    if a.dtype != e.dtype or e.dtype == torch.bool or not e.is_floating_point() or _close(a, e, tol):
        return None
    ad, ed = a.double(), e.double()
    fin = torch.isfinite(ed) & torch.isfinite(ad)
    if not bool((torch.isfinite(ad) == torch.isfinite(ed)).all()) or int(fin.sum()) < 2:
        return None
    x, y = ad[fin], ed[fin]
    if _distinct(y) < 2:
        return None
    denom = float((y * y).sum())
    if denom > 0:
        c = float((x * y).sum()) / denom
        if abs(c - 1) > 1e-3 and _close(x, c * y, tol):
            return "×", c
    shift = float((x - y).mean())
    if abs(shift) > tol.atol * 10 and _close(x, y + shift, tol):
        return "+", shift
    return None


def _slab(bad: torch.Tensor) -> tuple[int, int, str] | None:
    """(axis, index, 'from'|'until'): the bad positions are exactly those from `index` on (or before it)
    along one axis, everywhere else right."""
    for axis in range(bad.dim()):
        n = bad.shape[axis]
        if n < 2:
            continue
        along = bad.movedim(axis, 0).reshape(n, -1)
        rows = along.any(1)
        full = along.all(1)
        if not rows.any() or rows.all():
            continue
        first = int(rows.nonzero()[0])
        last = int(rows.nonzero()[-1])
        if first > 0 and bool(rows[first:].all()) and bool(full[first:].all()):
            return axis, first, "from"
        if first == 0 and bool(rows[: last + 1].all()) and not bool(rows[last + 1:].any()) and bool(full[: last + 1].all()):
            return axis, last + 1, "until"
    return None


def call_blocks(key: str, declared: tuple[int, ...] = ()) -> tuple[int, ...]:
    """The block sizes the call behind observation `key` used: named in the key ("block=8", "block_q=32",
    "blocks 32×24"), else the exercise's declared ones (TILED in its lesson module)."""
    named = [int(n) for n in re.findall(r"block(?:_[qk])?=(\d+)", key)]
    for pair in re.findall(r"blocks (\d+)×(\d+)", key):
        named += [int(n) for n in pair]
    return tuple(named) or tuple(declared)


def _nonfinite(what, ad, ed, bad_nonfinite, r) -> str:
    """NaN or Inf where the reference has numbers: where, as facts; "nothing to attend to" only when the
    probe's mask has rows with no True and the NaN rows are among them."""
    kind = "NaN" if ad[bad_nonfinite].isnan().any() else "Inf"
    first = _idx(int(bad_nonfinite.flatten().nonzero()[0]), tuple(ad.shape))
    text = (f"`{what}` has {int(bad_nonfinite.sum())} {kind} values where the reference has numbers, "
            f"starting at index {first}")
    if ad.dim() == 0:
        return text
    rows = bad_nonfinite.reshape(-1, ad.shape[-1])
    whole = rows.all(1)
    if not (whole.any() and bool((rows.any(1) == whole).all())):
        return text
    empty = _empty_rows(r or {}, what, tuple(ad.shape), ed)
    if kind == "NaN" and empty is not None and bool(empty.any()) and \
            bool((whole & ~empty.reshape(-1)).sum() == 0):
        return text + (f"; they fill {int(whole.sum())} whole rows of the last axis, rows whose mask has no True: "
                       f"a row with nothing to attend to (every score -inf) gives exp(-inf)/0 = NaN in the "
                       f"softmax")
    return text + f"; they fill {int(whole.sum())} complete rows along the last axis"


def explain(a, e, what: str = "output", tol: compare.Tolerance | None = None, r: dict | None = None,
            blocks: tuple[int, ...] = ()) -> str | None:
    """One sentence on how tensor `a` (the student's) relates to `e` (the reference's), or None. `r`: the
    check's reference observations (the probe's mask among them). `blocks`: the tile sizes of a tiled
    exercise's call (a boundary is named a tile's only at a multiple of one). A constant factor or shift is
    not said here: one tensor cannot show that it holds on every failing input (`common_relation` does)."""
    if not isinstance(e, torch.Tensor) or not isinstance(a, torch.Tensor):
        return None
    tol = tol or compare.tolerance(e.dtype)
    if a.shape != e.shape:
        p = _permutation(a, e, tol)
        if p is not None:
            return _axes_message(what, p)
        if a.numel() == e.numel() and _close(a.reshape(e.shape), e, tol):
            return (f"`{what}` has the right values in the wrong shape {tuple(a.shape)} (expected "
                    f"{tuple(e.shape)}): reshape it back")
        return None
    if a.dtype != e.dtype:
        if e.dtype == torch.bool and a.dtype != torch.bool and bool(((a == 0) | (a == 1)).all()) and \
                torch.equal(a.bool(), e):
            return (f"`{what}` has the right True/False pattern as {str(a.dtype).removeprefix('torch.')} 0s and 1s; "
                    f"return a bool tensor (masks are `torch.bool`: `masked_fill` and `~` need it)")
        if e.dtype != torch.bool and a.dtype != torch.bool and _close(a.to(e.dtype), e, tol):
            dt = lambda t: str(t.dtype).removeprefix("torch.")  # noqa: E731
            return (f"`{what}` has the right values but dtype {dt(a)} instead of {dt(e)}: compute in the input's "
                    f"dtype, or cast back with `.to(x.dtype)`")
        return None
    if e.dtype == torch.bool:
        return _explain_bool(a, e, what)
    if _close(a, e, tol):
        return None
    ad, ed = a.double(), e.double()
    e_finite = torch.isfinite(ed)
    bad_nonfinite = ~torch.isfinite(ad) & e_finite
    if bad_nonfinite.any():
        return _nonfinite(what, ad, ed, bad_nonfinite, r)
    if bool((ad == 0).all()) and not bool((ed == 0).all()):
        return f"`{what}` is all zeros, where the reference is not"
    p = _permutation(a, e, tol)
    if p is not None:
        return _axes_message(what, p)
    for axis in range(a.dim()):
        if a.shape[axis] > 1 and _close(a, e.flip(axis), tol):
            return f"`{what}` is the reference reversed along axis {axis - a.dim()} (size {a.shape[axis]})"
    bad = _bad(ad, ed, tol)
    mask = _mask_for(r or {}, what, a.shape, ed)
    n_bad = int(bad.sum())
    if mask is not None:
        if bool((bad & mask).sum() == 0) and bool((~mask).any()):
            leaked = bad & ~mask
            return (f"`{what}` is right where the mask is True and wrong at {n_bad} of the {int((~mask).sum())} "
                    f"masked positions (mask False), first at {_idx(int(leaked.flatten().nonzero()[0]), a.shape)}: "
                    f"masked positions must get exactly what the reference gives them (weight 0)")
        if bool((bad & ~mask).sum() == 0) and bool(mask.any()):
            first = _idx(int(bad.flatten().nonzero()[0]), a.shape)
            return (f"`{what}` matches the reference at every masked position (mask False) and differs at "
                    f"{n_bad} of the {int(mask.sum())} positions the mask allows, first at {first}: the masking is "
                    f"right, the values it keeps are not")
    zero = ed == 0
    if mask is None and zero.any() and not zero.all() and bool((bad & ~zero).sum() == 0):
        first = _idx(int(bad.flatten().nonzero()[0]), a.shape)
        return (f"`{what}` differs from the reference only at {n_bad} of the {int(zero.sum())} positions where "
                f"the reference is exactly 0, first at {first}, where yours gives {float(ad[first]):.4g}")
    sums = _row_sums(ad, ed)
    if sums:
        return f"`{what}`: {sums}"
    slab = _slab(bad)
    if slab is not None:
        axis, i, where = slab
        ax = axis - a.dim()
        tile = next((b for b in blocks if b > 1 and i % b == 0), None)  # a tile boundary, exactly
        if where == "from" and (i > 1 or tile):  # index 0 alone right is no boundary: it may see one key
            return (f"`{what}` matches the reference up to index {i - 1} along axis {ax} (size {a.shape[axis]}) "
                    f"and differs from index {i} on" + (f": exactly the first {i // tile} tile(s) of {tile} are "
                                                         f"right" if tile else ""))
        if where == "until":
            return (f"`{what}` differs from the reference at indices 0…{i - 1} along axis {ax} (size "
                    f"{a.shape[axis]}) and matches after them" + (f": exactly the first {i // tile} tile(s) of "
                                                                 f"{tile} are wrong" if tile else ""))
    return None


def _row_sums(ad: torch.Tensor, ed: torch.Tensor) -> str | None:
    """"your rows sum to 0.8, not 1" when the reference's rows (last axis) are weights summing to 1 and yours
    sum to something else (say which: one number, or a range)."""
    if ad.dim() < 1 or ad.shape[-1] < 2 or bool((ed < 0).any()):
        return None
    es, as_ = ed.sum(-1), ad.sum(-1)
    if not bool(((es - 1).abs() <= 1e-3).all()) or bool(((as_ - 1).abs() <= 1e-3).all()):
        return None
    lo, hi = float(as_.min()), float(as_.max())
    said = f"{lo:.4g}" if abs(hi - lo) <= 1e-3 * max(1.0, abs(lo)) else f"between {lo:.4g} and {hi:.4g}"
    return f"your rows (the last axis) sum to {said}, not 1, where the reference's do"


def _explain_bool(a: torch.Tensor, e: torch.Tensor, what: str) -> str | None:
    """A boolean result (a mask) against the reference's, as facts about the True/False pattern."""
    if torch.equal(a, e):
        return None
    if torch.equal(a, ~e) and bool(e.any()) and not bool(e.all()):  # of a constant, any constant is "inverted"
        return f"`{what}` is the reference inverted (True and False swapped): True means 'may attend'"
    if a.dim() >= 2 and a.shape[-1] == a.shape[-2] and torch.equal(a, e.transpose(-2, -1)):
        return (f"`{what}` equals the reference with its last two axes swapped (transposed): rows are queries, "
                f"columns are keys")
    for axis in (-1, -2):
        if a.shape[axis] < 2:
            continue
        for s in (1, -1):
            n = a.shape[axis]
            lo, hi = (slice(s, n), slice(0, n - s)) if s > 0 else (slice(0, n + s), slice(-s, n))
            if torch.equal(e.narrow(axis, lo.start, lo.stop - lo.start), e.narrow(axis, hi.start, hi.stop - hi.start)):
                continue  # the reference does not change along this axis: any answer right past the edge would "fit"
            if torch.equal(a.narrow(axis, lo.start, lo.stop - lo.start),
                           e.narrow(axis, hi.start, hi.stop - hi.start)):
                return (f"`{what}` is the reference shifted by one position along axis {axis}: its boundary (the "
                        f"diagonal, or the window's edge) sits one position off")
    extra, missing = int((a & ~e).sum()), int((~a & e).sum())
    if extra and not missing:
        first = _idx(int((a & ~e).flatten().nonzero()[0]), a.shape)
        return (f"`{what}` allows {extra} positions the reference masks (and none fewer), first at {first}: too "
                f"permissive")
    if missing and not extra:
        first = _idx(int((~a & e).flatten().nonzero()[0]), a.shape)
        return (f"`{what}` masks {missing} positions the reference allows (and none more), first at {first}: too "
                f"strict")
    return None


# ------------------------------------------------------------------------------------------------
# Observations against observations


def _tensors(obs: dict) -> dict:
    return {k: v for k, v in obs.items() if isinstance(v, torch.Tensor)}


def explain_obs(s: dict, r: dict, tol: compare.Tolerance | None = None, tiled: tuple[int, ...] | None = None) -> str | None:
    """The first structural reason among one check's observations (outputs swapped before each one alone)."""
    if not isinstance(s, dict) or not isinstance(r, dict) or "__error__" in s or "__error__" in r:
        return None

    moved = wrong_devices(s, r, "the probe's device")
    if moved:
        key, dev = next(iter(moved.items()))
        return (f"`{key}` comes back on {dev}, not on the inputs' device: a tensor made without device= (or moved "
                f"with .cpu()/.cuda()) somewhere in your code")
    rt = _tensors(r)
    wrong = [k for k, e in rt.items() if not (isinstance(s.get(k), torch.Tensor) and s[k].dtype == e.dtype and
                                              _close(s[k], e, tol or compare.tolerance(e.dtype)))]
    for k in wrong:  # does the student's k hold what another observation should be?
        a = s.get(k)
        if not isinstance(a, torch.Tensor):
            continue
        for k2 in wrong:
            t = tol or compare.tolerance(rt[k2].dtype)
            if k2 != k and isinstance(s.get(k2), torch.Tensor) and _close(a, rt[k2], t) and \
                    _close(s[k2], rt[k], t) and not _close(rt[k], rt[k2], t):  # a real swap, of two different things
                return (f"`{k}` holds what `{k2}` should be: the outputs are returned in the wrong order "
                        f"(check the order in the `return` line)")
    for k in wrong:
        msg = explain(s.get(k), rt[k], k, tol, r, call_blocks(k, tiled) if tiled is not None else ())
        if msg:
            return msg
    return None


ATTENTION_KEYS = re.compile(r"^(?:#\d+ )?(?:attention )?(?:weights|scores)\b")  # (..., Tq, Tk) by the probe's name


def _square(obs: dict, attention: bool = False) -> bool | None:
    """Whether the check's tensors are square in their last two axes (None: no such tensor); with `attention`,
    only its attention weights and scores, the tensors whose last two axes are (Tq, Tk)."""
    shapes = [tuple(v.shape) for k, v in _tensors(obs).items() if v.dim() >= 2 and v.dtype != torch.bool
              and (not attention or ATTENTION_KEYS.search(str(k)))]
    if not shapes:
        return None
    return all(sh[-1] == sh[-2] for sh in shapes)


def common_relation(ran, s_checks: dict, r_checks: dict) -> str | None:
    """"`output` is 0.5× the reference's on every failing input": said only when ONE factor (or one shift)
    relates every wrong tensor of every failing check of the exercise (`ran`: (check, config, status)). A
    check that raised, or failed with no tensor showing it, or one tensor off some other way: nothing said.
    Where the factor enters (scores, weights, output, a parameter) is not said: only a reproduction shows it."""
    rels, names, n = [], [], 0
    for check, config, st in ran:
        if st == "passed":
            continue
        s, r = s_checks.get(check.key(config)) or {}, r_checks.get(check.key(config)) or {}
        if st != "failed" or "__error__" in s or "__error__" in r:
            return None
        tol = JudgeContext(config).tol
        wrong = [k for k, e in _tensors(r).items()
                 if not (isinstance(s.get(k), torch.Tensor) and s[k].shape == e.shape and _close(s[k], e, tol))]
        if not wrong:
            return None
        for k in wrong:
            rel = relation(s.get(k), r[k], tol)
            if rel is None:
                return None
            rels.append(rel)
            name = re.sub(r" \(.*\)$| (?:for|with) .*$", "", re.sub(r"^#\d+ ", "", k))  # sizes and call aside
            if name not in names:
                names.append(name)
        n += 1
    if not rels or len({op for op, _ in rels}) != 1:
        return None
    op, v = rels[0]
    if op == "×":
        if any(abs(c - v) > 5e-3 * abs(v) for _, c in rels):  # one factor, to bfloat16's precision
            return None
        named = simple_factor(v)
        said = f"{v:.4g}×" + (f" (= {named})" if named and named != f"{v:.4g}" else "")
    else:
        if any(abs(c - v) > 1e-3 * max(1.0, abs(v)) for _, c in rels):
            return None
        said = f"{v:+.4g}"
    what = f"`{names[0]}`" + (f" and {len(names) - 1} other wrong result{'s' if len(names) > 2 else ''}"
                              if len(names) > 1 else "")
    verb = "is" if len(names) == 1 else "are"
    checks = f"{n} failing check" + ("" if n == 1 else "s")
    if op == "×":
        return f"{what} {verb} {said} the reference's on every failing input ({checks})"
    return f"{what} {verb} the reference's {said} on every failing input ({checks}): one constant added everywhere"


def explain_exercise(checks, s_checks: dict, r_checks: dict, results, tiled: tuple[int, ...] | None = None) -> str | None:
    """The structural diagnosis of one exercise: across its checks first (a meta tensor, one factor on every
    failing input, passing exactly where Tq = Tk), then the first failing check that says something."""
    status = {(c.name, c.device, c.dtype): c.status for c in results}
    ran = []
    for check in checks:
        for config in check.configs:
            st = status.get((check.name, config.device, config.dtype))
            if st in ("passed", "failed", "error"):
                ran.append((check, config, st))
    for check, config, st in ran:  # a meta tensor anywhere: the other checks' numbers may be memory never written
        err = (s_checks.get(check.key(config)) or {}).get("__error__")
        if st != "passed" and isinstance(err, dict) and err.get("message") == ON_META:
            return ("a result comes back on meta, not on the inputs' device: a tensor made without device=x.device "
                    "(it lands on torch's default device, which some checks set to meta) or moved with "
                    ".to(\"meta\") somewhere in your code")
    same = common_relation(ran, s_checks, r_checks)
    if same:
        return same
    # Tq and Tk are named only where the checks observed attention weights or scores, whose last two axes they
    # are; elsewhere (a norm over (B, T, D) that passes when T = D) the sizes are said as what they are
    attention = any(ATTENTION_KEYS.search(str(k)) and isinstance(v, torch.Tensor) and v.dim() >= 2
                    for c, cfg, st in ran for k, v in (r_checks.get(c.key(cfg)) or {}).items())
    squares = [(_square(r_checks.get(c.key(cfg), {}), attention), st) for c, cfg, st in ran if st != "error"]
    squares = [(sq, st) for sq, st in squares if sq is not None]
    if squares and any(st == "failed" for _, st in squares) and any(st == "passed" for _, st in squares):
        if all((st == "passed") == sq for sq, st in squares):
            if not attention:
                return ("passes every check where the last two axes of its results have the same size and fails "
                        "every one where they differ: look for a place where those two sizes are taken one for "
                        "the other")
            return ("passes every check where Tq = Tk and fails every one where Tq ≠ Tk: look for a place where "
                    "Tq and Tk are taken one for the other (the scores are (..., Tq, Tk), normalised over Tk)")
    for check, config, st in sorted(ran, key=lambda x: x[2] != "failed"):
        if st == "passed":
            continue
        r_obs = r_checks.get(check.key(config)) or {}
        if any(isinstance(k, str) and k.startswith("#") for k in r_obs):
            # a declared domain's examples ("#i output"): its message already names the simplest failing one;
            # a pattern read off another example would name the wrong input (and its internal key)
            continue
        msg = explain_obs(s_checks.get(check.key(config)) or {}, r_checks.get(check.key(config)) or {},
                          JudgeContext(config).tol, tiled)
        if msg:
            return msg
    return None


# ------------------------------------------------------------------------------------------------
# The engine's fallback


def _strict(check, config, s_obs, m_obs, r_obs) -> bool:
    """A catalogued mistake's match: the engine's rule (exceptions by type and by their text, sizes included,
    addresses and file paths aside; an exception type alone is not an observation)."""

    return _matches(check, config, s_obs, m_obs, r_obs)


def settle(best, module, name, checks, s_checks, r_checks, mistakes, results) -> str | None:
    """The diagnosis of a failing exercise: a catalogued mistake that really matches, else a structural one.
    Leaves a figure's data on the first failing check it can draw."""
    try:
        attach_figure(checks, s_checks, r_checks, results)
    except Exception:  # a figure is a convenience; never let it cost the verdict
        pass
    try:
        if best is not None:  # engine.diagnose matched it by the strict rule above
            return best.message
        return explain_exercise(checks, s_checks, r_checks, results, getattr(module, "TILED", {}).get(name))
    except Exception:
        return best.message if best is not None else None


# ------------------------------------------------------------------------------------------------
# Figures: a readable matrix, student against reference

MAX_SIDE = 24
READABLE = re.compile(r"weight|mask|bias|score|attn|attention|table|position|mean|var|std|stat", re.I)  # drawn first


def figure_data(a, e, what: str, r: dict, tol: compare.Tolerance) -> dict | None:
    """The 2-D slice holding the first bad index of two same-shaped tensors, as plain lists, or None when the
    tensors are not a matrix a person can read (fewer than 2 dims, or a side over MAX_SIDE)."""
    if not (isinstance(a, torch.Tensor) and isinstance(e, torch.Tensor)) or a.shape != e.shape or a.dim() < 2:
        return None
    if a.shape[-1] > MAX_SIDE or a.shape[-2] > MAX_SIDE or a.dtype != e.dtype:
        return None
    bad = _bad(a, e, tol)
    if not bad.any():
        return None
    first = _idx(int(bad.flatten().nonzero()[0]), a.shape)
    lead = first[:-2]
    mask = _mask_for(r, what, a.shape, e.double())
    blocked = (~mask)[lead] if mask is not None else (e[lead] == 0) if e.dtype != torch.bool else None
    sa, se = a[lead], e[lead]
    leaked = (blocked & (sa != se)) if blocked is not None else torch.zeros_like(sa, dtype=torch.bool)
    conv = (lambda t: t.int().tolist()) if a.dtype == torch.bool else (lambda t: [[float(x) for x in row] for row in t.double().tolist()])  # noqa: E731
    return {"what": what, "index": list(lead), "kind": "bool" if a.dtype == torch.bool else "float",
            "student": conv(sa), "reference": conv(se), "bad": bad[lead].int().tolist(),
            "leaked": leaked.int().tolist(), "first": list(first[-2:]),
            "blocked": blocked.int().tolist() if blocked is not None else None}


def attach_figure(checks, s_checks, r_checks, results) -> None:
    """Put `figure` on the first failing check (in the order feedback tells them) that has a readable matrix."""

    by_key = {(c.name, c.device, c.dtype): c for c in results}
    for check in checks:
        for config in check.configs:
            res = by_key.get((check.name, config.device, config.dtype))
            if res is None or res.status != "failed":
                continue
            s, r = s_checks.get(check.key(config)) or {}, r_checks.get(check.key(config)) or {}
            if "__error__" in s or "__error__" in r:
                continue
            tol = JudgeContext(config).tol
            keys = sorted(_tensors(r), key=lambda k: not READABLE.search(re.sub(r"\(.*?\)", "", k)))  # weights first
            for k in keys:
                data = figure_data(s.get(k), r[k], k, r, tol)
                if data is not None:
                    res.figure = data
                    return


# ----------------------------------------------------------------------------------------------
# Catalogued mistakes: the one whose observations match the most failed checks


def _matches(check: Check, config: Config, s_obs: dict | None, m_obs: dict | None, r_obs: dict) -> bool:
    """Does the student's observation look like the mistake's (and is the mistake visible here)?"""
    if s_obs is None or m_obs is None:
        return False
    s_err, m_err = s_obs.get("__error__"), m_obs.get("__error__")
    if s_err or m_err:  # the same error, said the same way: an exception type alone is not an observation
        return bool(s_err and m_err and s_err["kind"] == m_err["kind"] == "error" and s_err["type"] == m_err["type"]
                    and _error_head(s_err) == _error_head(m_err))
    try:
        if check.judge(m_obs, r_obs, JudgeContext(config)) is None:
            return False  # the mistake does not show on this check
    except Exception:
        return False
    return same_observations(s_obs, m_obs, JudgeContext(config).tol)


def _same_failure(s_obs: dict | None, m_obs: dict) -> bool:
    """The same failure said the same way, of any kind (a WrongResult too): consistent with the mistake,
    though not counted as evidence for it."""
    s_err, m_err = (s_obs or {}).get("__error__"), m_obs.get("__error__")
    return bool(s_err and m_err and s_err.get("kind") == m_err.get("kind") and s_err.get("type") == m_err.get("type")
                and _error_head(s_err) == _error_head(m_err))


def _error_head(err: dict) -> str:
    """An error observation's first line, "Type: message", without where it was raised (the student's
    cell numbers and the mistake's differ)."""
    import re

    text = err.get("message", "").split("\n  at ")[0].strip()
    text = re.sub(r"0x[0-9a-fA-F]+", "0x…", text)  # object addresses
    return re.sub(r"(/[\w.+-]+)+/|<cell \d+>", "…/", text)  # where the code happened to live



def _mistake_fails(check: Check, config: Config, m_obs: dict, r_obs: dict) -> bool:
    """Does the mistake fail this check (its judge says so, or it raised)?"""
    if "__error__" in m_obs:
        return True
    try:
        return check.judge(m_obs, r_obs, JudgeContext(config)) is not None
    except Exception:
        return True


def mistake_fits(check_list, s_checks, r_checks, m_checks, status: dict) -> int:
    """How many failed checks a catalogued mistake explains, or 0 when it does not fit exactly: the student
    fails exactly the checks the mistake fails (among those both ran), with the mistake's observations on
    each. A mistake that fails a check the student passes, or passes one the student fails, is another
    mistake: naming it would send the student to the wrong line."""
    count = 0
    for check in check_list:
        for config in check.configs:
            st = status.get((check.name, config.device, config.dtype))
            k = check.key(config)
            m_obs = m_checks.get(k)
            if st not in ("passed", "failed", "error") or not isinstance(m_obs, dict) or "__inapplicable__" in m_obs:
                continue
            r_obs = r_checks.get(k, {})
            if st == "passed":
                if _mistake_fails(check, config, m_obs, r_obs):
                    return 0
                continue
            fit = fits_failed_check(check, config, s_checks.get(k), m_obs, r_obs)
            if fit is None:
                return 0
            count += fit
    return count


def fits_failed_check(check: Check, config: Config, s_obs: dict | None, m_obs: dict, r_obs: dict) -> int | None:
    """mistake_fits's rule for one check the student failed: 1 when the mistake gives the student's outputs
    there, 0 when it fails the same way said the same way (consistent, not evidence), None when it does not fit
    (it passes there, or fails otherwise)."""
    if not _mistake_fails(check, config, m_obs, r_obs):
        return None
    if _matches(check, config, s_obs, m_obs, r_obs):
        return 1
    return 0 if _same_failure(s_obs, m_obs) else None


def rules_out(check: Check, config: Config, s_obs: dict | None, m_obs, r_obs: dict) -> bool:
    """Does a candidate's observation on one check the student failed prove that it cannot be the student's
    mistake (mistake_fits would give 0 whatever its other checks show)? A follow-up screens candidates on it
    (mutations.probe_mutants `screen`): only those it does not rule out run the whole battery."""
    return isinstance(m_obs, dict) and "__inapplicable__" not in m_obs and \
        fits_failed_check(check, config, s_obs, m_obs, r_obs) is None


class Named(str):
    """A diagnosis sentence that carries its stable id (kinds.py `diagnosis_id` reads it): a mutant's."""

    ident: str = ""

    def __new__(cls, text: str, ident: str = ""):
        self = super().__new__(cls, text)
        self.ident = ident
        return self


class _Reproduced:
    """A mutant that reproduces the student's observations, as settle() takes a catalogued mistake. When other
    changes reproduce them just as well (`others`: mutants that fit as many failed checks; the mutant's
    `"also"`: candidates with the same observations on every check), the checks cannot tell which one the
    student made: every one is said (at most three), never the first alone."""

    def __init__(self, mutant: dict, others: list[dict] = ()):
        found: dict[str, tuple] = {}  # sentence -> (its earliest candidate, its operator)
        for m in (mutant, *others):
            for a in (m, *(a for a in m.get("also") or () if isinstance(a, dict))):
                s, n = a.get("sentence"), a.get("n")
                n = n if isinstance(n, int) else float("inf")
                if isinstance(s, str) and (s not in found or n < found[s][0]):
                    found[s] = (n, str(a.get("operator", mutant["operator"])))
        # in the candidates' order, whichever a budget or a follow-up reached first: every seat says the same
        said = sorted(found, key=lambda s: found[s][0])[:3]
        text = said[0] if len(said) == 1 else \
            f"{said[0]} (or, with the same outputs on every input checked: {'; or '.join(said[1:])})"
        self.message = Named(text, f"mutation:{found[said[0]][1]}")


def diagnose(module, name, checks, s_checks, r_checks, mistakes, results) -> str | None:
    """The catalogued mistake that reproduces the student's observations (the most failed checks), else the
    engine's first mutant that does (mutations.py: the same rule, `mistake_fits`), else what settle() says."""
    status = {(r.name, r.device, r.dtype): r.status for r in results}
    best, best_count = None, 0
    for mistake in getattr(module, "MISTAKES", ()):
        if mistake.exercise != name or mistake.id not in mistakes:
            continue
        count = mistake_fits(checks, s_checks, r_checks, mistakes[mistake.id]["checks"], status)
        if count > best_count:
            best, best_count = mistake, count
    if best is None:  # catalogued mistakes first: theirs is the written, reviewed wording
        head = f"mutant:{name}:"  # mutations.py `key` (not imported: mutations imports this module)
        tied: list[dict] = []  # the mutants that fit as many failed checks as the best
        for obs in (mistakes[k] for k in sorted(mistakes) if isinstance(k, str) and k.startswith(head)):
            mutant = obs.get("mutant") if isinstance(obs, dict) else None
            if not (isinstance(mutant, dict) and isinstance(mutant.get("sentence"), str)
                    and isinstance(mutant.get("operator"), str) and isinstance(obs.get("checks"), dict)):
                continue
            count = mistake_fits(checks, s_checks, r_checks, obs["checks"], status)
            if count > best_count:
                tied, best_count = [mutant], count
            elif count == best_count and tied:
                tied.append(mutant)
        if tied:
            best = _Reproduced(tied[0], tied[1:])
    if best is None and any(r.name == "leaves its inputs unchanged" and r.status == "failed" for r in results):
        # the inputs were modified in place: every later number is suspect, and that check says why
        try:
            attach_figure(checks, s_checks, r_checks, results)
        except Exception:
            pass
        return None
    return settle(best, module, name, checks, s_checks, r_checks, mistakes, results)


