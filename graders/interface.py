"""How the outside reaches an exercise: its arguments in the signature's order, and a module's state_dict layout.

A student's code is called by others in two ways the keyword calls of the checks never show: positionally, in
the order the curriculum's signature gives (`causal_mask(4, 6, "cpu")`), and through a checkpoint, whose keys
and shapes are the module's `state_dict`. The domain checks draw both (`PASSED` is the choice they draw;
`state_layout` what they observe of a module; `layout_first` the judge that reads it before anything else), and a
cache's `update` by position or by its parameters' names (`UPDATE_CALLED`, `update`).
"""

from __future__ import annotations

from typing import Callable

from .engine.checks import Arg

# The drawn choice of how the arguments reach the exercise: by name (the default), or every optional parameter
# positionally in the signature's order, those not given at their stated defaults.
PASSED = Arg("passed", ("by keyword", "in the signature's order"))


# How a cache's `update(layer_idx, k, v)` is called: positionally, as the course's models call it (the usual), or
# by the names the signature gives its parameters.
UPDATE_CALLED = Arg("update called", ("positionally", "by keyword (layer_idx=, k=, v=)"))


def update(ctx, cache, ex: dict, layer_idx: int, k, v):
    """`cache.update(layer_idx, k, v)` through `ctx.call`, the way the example `ex` draws (UPDATE_CALLED)."""
    if ex.get(UPDATE_CALLED.name, UPDATE_CALLED.values[0]) == UPDATE_CALLED.values[0]:
        return ctx.call(cache.update, layer_idx, k, v)
    return ctx.call(cache.update, layer_idx=layer_idx, k=k, v=v)


def arguments(order: tuple[str, ...], given: dict, defaults: dict, passed: str) -> tuple[tuple, dict]:
    """(args, kwargs) for the optional parameters `order` (in the signature's order, after those the caller
    passes positionally itself) of which `given` are given: as keywords, or, for `passed` = "in the signature's
    order", as a positional tuple of all of them, those not given at their stated defaults (`defaults`)."""
    unknown = set(given) - set(order)
    if unknown:
        raise ValueError(f"{sorted(unknown)} are not in the signature {order}")
    if passed == PASSED.values[0]:
        return (), dict(given)
    return tuple(given[n] if n in given else defaults[n] for n in order), {}


def state_layout(module) -> list[str]:
    """"name (shape)" for every entry of the module's state_dict, in its order: the names and shapes a
    checkpoint loads through (parameters and persistent buffers alike)."""
    return [f"{name} {tuple(t.shape)}" for name, t in module.state_dict().items()]


def layout_message(mine, theirs: list[str], who: str) -> str | None:
    """None when the student's state_dict layout `mine` is `theirs` (order aside); otherwise what differs."""
    if not isinstance(mine, list):
        return f"{who}'s state_dict could not be read ({mine!r})"
    extra = [e for e in mine if e not in theirs]
    missing = [e for e in theirs if e not in mine]
    if not extra and not missing:
        return None
    parts = []
    if missing:
        parts.append(f"it lacks {', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''}")
    if extra:
        parts.append(f"it has {', '.join(extra[:4])}{' ...' if len(extra) > 4 else ''} besides")
    return (f"{who}'s state_dict differs from the reference's: {'; '.join(parts)}. Its names and shapes are the "
            f"interface a checkpoint loads through, so they must be exactly the ones the exercise names")


def layout_first(judge: Callable, key: str = "state_dict", who: str = "the module") -> Callable:
    """A judge that reads the state_dict layout observed under `key` (each drawn example's, in a domain
    check) before handing the rest to `judge`."""
    def judged(s, r, ctx):
        if key in r:
            msg = layout_message(s.get(key), r[key], who)
            if msg:
                return msg
        # the rest without the layout: its order is the module's own (the order its layers were made in)
        return judge({k: v for k, v in s.items() if k != key}, {k: v for k, v in r.items() if k != key}, ctx)
    return judged
