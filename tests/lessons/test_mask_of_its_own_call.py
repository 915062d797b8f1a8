"""A mask recorded for one probe call is never read as another call's (issue 44 item 1: a structural statement
only with its premise checked on the inputs the failing check used).

A probe that makes two calls records each call's mask under that call's tag ("mask (call 1)" beside
"output (call 1)"). When the call's own mask does not line up with the observed tensor, the diagnosis used to
fall through to the other call's mask and say of this call's rows what only that mask shows ("rows whose mask
has no True", "right where the mask is True"). Both plantings below got the cause before the fix
(graders/engine/diagnosis.py `_masks`), and now get a fact."""

from __future__ import annotations

import torch

from graders.engine.diagnosis import explain
from graders.engine.kinds import is_fact, structural_kind

INF = float("inf")


def _r(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_nan_rows_are_not_explained_by_another_calls_empty_rows():
    own = torch.ones(3, 7, dtype=torch.bool)  # call 1's mask: 3 queries, none empty; not the output's 5 rows
    other = torch.ones(2, 5, 6, dtype=torch.bool).tril(1)  # call 2's mask, with an empty row (1, 2)
    other[1, 2] = False
    e = _r(2, 5, 4)  # call 1's output (B, Tq, Dv)
    a = e.clone()
    a[1, 2] = float("nan")  # a NaN row exactly where call 2's mask is empty: nothing to do with call 1
    r = {"output (call 1)": e, "mask (call 1)": own, "mask (call 2)": other}
    msg = explain(a, e, "output (call 1)", r=r)
    assert "attend" not in msg and structural_kind(msg) == "structural:nan", msg
    # the true case beside it: the same rows, call 2's own output and mask
    msg = explain(a, e, "output (call 2)", r={"output (call 2)": e, "mask (call 2)": other})
    assert structural_kind(msg) == "structural:nan-rows", msg


def test_wrong_masked_positions_are_not_read_from_another_calls_mask():
    own = torch.ones(3, 7, dtype=torch.bool).tril(4)  # call 1's mask, for 3 queries: does not fit 5
    other = torch.ones(5, 6, dtype=torch.bool).tril(1)  # call 2's causal mask, 5 queries over 6 keys
    e = _r(2, 5, 6).masked_fill(~other, -INF).softmax(-1)  # weights that happen to be 0 where call 2 masks
    a = e.clone()
    a[~other.expand_as(a)] = 0.05  # wrong exactly at call 2's masked positions
    r = {"weights (call 1)": e, "mask (call 1)": own, "mask (call 2)": other}
    msg = explain(a, e, "weights (call 1)", r=r)
    kind = structural_kind(msg) if msg else None
    assert kind != "structural:masked-positions-wrong" and (kind is None or is_fact(kind)), msg
    # with call 1's own mask absent, an untagged mask (one that names no call) is still read
    msg = explain(a, e, "weights (call 1)", r={"weights (call 1)": e, "mask": other})
    assert structural_kind(msg) == "structural:masked-positions-wrong", msg
