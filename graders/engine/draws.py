"""Drawn examples over a declared domain (checks.Domain): drawn in each child from the check's seed, the same
in the student's and the reference's child, so the parent judges example by example."""

from __future__ import annotations

from typing import Any, Callable

# Drawing imports Hypothesis (as long as a third of torch's import): the reference child draws, writes what it
# drew (`made`, in its draws.json), and the parent hands those draws to the student's child in its job (`given`),
# so a student's check imports Hypothesis only when no reference drew before it. Keyed by the domain's shape and
# the seed, so a draw handed over is the one this child would make.
_GIVEN: dict[str, list] = {}
_MADE: dict[str, list] = {}


def _key(domain, seed: int) -> str:
    return f"{domain.examples}:{','.join(str(len(v)) for _, v in domain.choices())}:{seed}"


def given(draws) -> None:
    """Use `draws` ({key: [[index, ...], ...]}, the reference child's) instead of drawing; entries that do
    not fit their key's shape are ignored (drawn here instead)."""
    _GIVEN.clear()
    if not isinstance(draws, dict):
        return
    for key, picks in list(draws.items())[:10_000]:
        if not (isinstance(key, str) and isinstance(picks, list) and len(picks) <= 10_000):
            continue
        try:
            sizes = [int(n) for n in key.split(":")[1].split(",") if n]
        except (IndexError, ValueError):
            continue
        if all(isinstance(p, list) and len(p) == len(sizes) and all(isinstance(i, int) and 0 <= i < n
                                                                      for i, n in zip(p, sizes)) for p in picks):
            _GIVEN[key] = picks


def made() -> dict[str, list]:
    """The draws this child made itself (for its parent to hand to the next child)."""
    return {k: [list(p) for p in v] for k, v in _MADE.items()}


def draw_examples(domain, seed: int) -> list[tuple[int, ...]]:
    """The examples of a check over `domain`, as indices into each choice's values: the defaults, then every
    choice's other values one at a time (each argument, dtype and layout varied alone), then `examples`
    combinations drawn by Hypothesis from `seed` (deterministic: the student's and the reference's children
    draw the same ones). Index 0 is what Hypothesis shrinks towards."""
    key = _key(domain, seed)
    if key in _GIVEN:
        return [tuple(p) for p in _GIVEN[key]]
    out = _draw(domain, seed)
    _MADE[key] = [list(p) for p in out]
    return out


def _draw(domain, seed: int) -> list[tuple[int, ...]]:
    import os

    # Hypothesis loads every installed package's "hypothesis" entry point on import (trio's, from Jupyter, here):
    # the draws must depend on the seed alone, not on what else is installed, and the plugins cost 0.15 s
    os.environ["HYPOTHESIS_NO_PLUGINS"] = "1"
    from hypothesis import HealthCheck, Phase, given, settings, seed as hseed, strategies as st

    choices = domain.choices()
    picks = [tuple([0] * len(choices))]
    for j, (_, values) in enumerate(choices):
        for v in range(1, len(values)):
            p = [0] * len(choices)
            p[j] = v
            picks.append(tuple(p))
    drawn: list[tuple[int, ...]] = []

    @hseed(seed)
    @settings(max_examples=max(domain.examples, 1), database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck), derandomize=False, print_blob=False)
    @given(st.tuples(*[st.integers(0, len(values) - 1) for _, values in choices]))
    def collect(p):
        drawn.append(p)

    if domain.examples:
        collect()
    seen, out = set(), []
    for p in picks + drawn[:domain.examples]:
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


def domain_probe(domain, run: Callable) -> Callable:
    """The probe of a check over `domain`: `run(ctx, example)` on every drawn example; each example's
    observations under "#i ", with the example itself ("#i example": the values, "#i choice": the indices)
    and "#i raised" for an exception (a NotImplementedError still makes the check not_implemented, and running out of
    memory ends the check at its first example: a bomb is not set off once per example)."""
    def probe(ctx) -> dict:  # ctx: probe.ProbeContext
        choices = domain.choices()
        picks = draw_examples(domain, ctx.seed)
        obs: dict[str, Any] = {"examples": len(picks)}
        for i, p in enumerate(picks):
            example = {name: values[k] for (name, values), k in zip(choices, p)}
            obs[f"#{i} example"] = [values[k] if isinstance(values[k], (int, float, str, bool)) or values[k] is None
                                    else str(values[k]) for (_, values), k in zip(choices, p)]
            obs[f"#{i} choice"] = list(p)
            try:
                for key, value in run(ctx, example).items():
                    obs[f"#{i} {key}"] = value
            except (NotImplementedError, MemoryError):  # not implemented; or out of memory: stop at the first
                raise
            except Exception as exc:  # noqa: BLE001 - this example's failure, said in its message
                if "out of memory" in str(exc).lower() or "can't allocate memory" in str(exc):  # torch's OOMs
                    raise
                obs[f"#{i} raised"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        return obs
    return probe
