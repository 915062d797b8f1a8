"""One timer for the lessons' benchmarks (`torch.utils.benchmark`, median of blocked runs)."""

from __future__ import annotations

from typing import Callable


def median_ms(fn: Callable, *args, min_run_time: float = 0.2) -> float:
    """The median time of fn(*args) in milliseconds, by torch.utils.benchmark.Timer (which warms up,
    synchronises CUDA and picks the number of runs): the one timer of every `course bench`."""
    from torch.utils.benchmark import Timer

    timer = Timer(stmt="fn(*args)", globals={"fn": fn, "args": args})
    return timer.blocked_autorange(min_run_time=min_run_time).median * 1e3


