"""A value message never shows two different numbers as the same digits (issue 47 item 2)."""

from __future__ import annotations

import re

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_cli.render import shorten
from graders.engine.compare import Tolerance, close

TIGHT = Tolerance(0.0, 0.0, "exact, for this test")
PAIR = re.compile(r"expected ([-+.\w]+), got ([-+.\w]+)")


@settings(max_examples=200, deadline=None)
@given(st.floats(-1e6, 1e6, allow_nan=False, width=32), st.integers(1, 50))
def test_expected_and_got_read_differently(x, steps):
    e = torch.tensor([x], dtype=torch.float32)
    a = e.clone()
    for _ in range(steps):  # a few float32 steps away: the case 4 significant digits hid
        a = torch.nextafter(a, torch.tensor([float("inf")]))
    msg = close(a, e, tol=TIGHT)
    assert msg is not None
    for m in (msg, shorten(msg)):
        pairs = PAIR.findall(m)
        assert pairs, m
        for want, got in pairs:
            assert want != got, m
            assert float(want) == float(e[0]) or abs(float(want) - float(e[0])) <= abs(float(e[0])) * 1e-3, m
            assert float(got) != float(want)


def test_plain_numbers_keep_four_digits():
    msg = close(torch.tensor([1.0, 5.0]), torch.tensor([1.0, 2.0]))
    assert "(expected 2, got 5)" in msg
