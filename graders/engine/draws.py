"""Drawn examples over a declared domain (checks.Domain): drawn in each child from the check's seed, the same
in the student's and the reference's child, so the parent judges example by example."""

from __future__ import annotations

from typing import Any, Callable

def draw_examples(domain, seed: int) -> list[tuple[int, ...]]:
    """The examples of a check over `domain`, as indices into each choice's values: the defaults, then every
    choice's other values one at a time (each argument, dtype and layout varied alone), then `examples`
    combinations drawn by Hypothesis from `seed` (deterministic: the student's and the reference's children
    draw the same ones). Index 0 is what Hypothesis shrinks towards."""
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
    and "#i raised" for an exception (a NotImplementedError still makes the check not_implemented)."""
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
            except NotImplementedError:
                raise
            except Exception as exc:  # noqa: BLE001 - this example's failure, said in its message
                obs[f"#{i} raised"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        return obs
    return probe
