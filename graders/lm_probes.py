"""What lessons 08 and 10 probe alike in a language model: a KV cache, parameters set by name, causality, a
cache fed in pieces, the config's fields, the training-step timer.

The child runs the probes (student code); the judges run in the parent. Each lesson passes its own sizes,
names and advice, so its messages stay its own."""

from __future__ import annotations

import math
import time
import zlib

import torch
import torch.nn as nn

from .engine import same
from .engine.compare import close
from .interface import arguments


class Cache:
    """A KV cache with the course's interface: update(layer_idx, k, v) -> (k_all, v_all), len()."""

    def __init__(self):
        self.k, self.v = {}, {}

    def update(self, layer_idx, k, v):
        if layer_idx in self.k:
            k, v = torch.cat([self.k[layer_idx], k], dim=-2), torch.cat([self.v[layer_idx], v], dim=-2)
        self.k[layer_idx], self.v[layer_idx] = k, v
        return k, v

    def __len__(self):
        return self.k[0].shape[-2] if 0 in self.k else 0


def fill_by_name(model: nn.Module, seed: int, embeddings: tuple[str, ...], embedding_scale: float) -> nn.Module:
    """Give every parameter seeded values chosen by its name, so that two models with the course's parameter
    names compute the same function whatever order they initialised in: norm gains near 1, biases near 0,
    the `embeddings` at `embedding_scale`, every matrix at 1/sqrt(fan-in)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            g = torch.Generator().manual_seed(seed + zlib.crc32(name.encode()))
            t = torch.randn(tuple(p.shape), generator=g)
            if p.dim() == 1:
                t = 0.1 * t + (1.0 if name.endswith("weight") else 0.0)
            elif name in embeddings:
                t = embedding_scale * t
            else:
                t = t / math.sqrt(p.shape[1])
            p.copy_(t.to(p.dtype))
    return model


def tokens(ctx, *shape, vocab: int):
    """Token ids drawn from the check's generator, on the check's device."""
    return torch.randint(0, vocab, shape, generator=ctx.gen).to(ctx.device)


def forward(ctx, model, idx, *args, **kwargs):
    """The model's (logits, loss), with a clear error when it returns anything else."""
    return ctx.unpack(ctx.call(model, idx, *args, **kwargs), 2, "a pair (logits, loss)")


def call_text(kwargs: dict) -> str:
    """`vocab_size=0, n_head=3`: a call's arguments as the student would write them."""
    return ", ".join(f"{k}={v!r}" for k, v in kwargs.items())


# ----------------------------------------------------------------------------------------------
# The config: its fields, and the values it must reject


def config_fields(ctx, fields_of, required: dict, custom: dict, bad: tuple) -> dict:
    """The config's class (`ctx.target`) built with `required` and with `custom`, read back field by field
    (`fields_of` is the grader's own config without validation), and called with each of `bad`'s kwargs."""
    import dataclasses

    Config = ctx.target
    fields = [f.name for f in dataclasses.fields(fields_of)]
    default = ctx.call(Config, **required)
    made = ctx.call(Config, **custom)
    obs = {"is a dataclass": dataclasses.is_dataclass(Config),
           "defaults": {f: getattr(default, f, "missing") for f in fields},
           "custom": {f: getattr(made, f, "missing") for f in fields}}
    for kwargs, _name in bad:
        obs[call_text(kwargs)] = ctx.raised(Config, **{**required, **kwargs})
    return obs


def config_made(ctx, fields_of, order: tuple[str, ...], kw: dict, passed: str, invalid: list[str]) -> dict:
    """The config's class (`ctx.target`) called with `kw`, by keyword or positionally in the fields' `order`
    (`passed`, interface.PASSED): what it raised, or its fields read back (`fields_of`: the grader's own config).
    `invalid`: the fields the exercise's rules reject in `kw` (empty: a valid config)."""
    import dataclasses

    args, kwargs = arguments(order, kw, {}, passed)
    obs = {"invalid fields": invalid, "call": call_text(kw) if kwargs else ", ".join(map(repr, args))}
    try:
        made = ctx.call(ctx.target, *args, **kwargs)
    except NotImplementedError:
        raise
    except Exception as exc:  # noqa: BLE001 - what the student raised is the observation
        return {**obs, "error": type(exc).__name__[:100], "error message": str(exc)[:300]}
    return {**obs, "error": "nothing", "error message": "",
            "fields": {f.name: getattr(made, f.name, "missing") for f in dataclasses.fields(fields_of)}}


def config_domain_judge(name: str):
    """config_made's observations judged: an invalid config raises ValueError naming a field it breaks; a valid
    one raises nothing and keeps every field as given."""
    def judge(s, r, ctx):
        bad, call = r["invalid fields"], r["call"]
        if bad:
            names = " or ".join(f"`{b}`" for b in bad)
            if s.get("error") != "ValueError":
                got = "it raised nothing" if s.get("error") == "nothing" else f"it raised {s.get('error')}"
                return f"{name}({call}) should raise ValueError naming {names}, but {got}"
            if not any(b in s.get("error message", "") for b in bad):
                return (f"{name}({call}) raised ValueError, but its message names none of {names}: "
                        f"{s['error message']!r}")
            return None
        if s.get("error") != "nothing":
            return f"{name}({call}) is a valid config, but it raised {s.get('error')}: {s.get('error message')}"
        if s["fields"] != r["fields"]:
            diff = [f"{k}={s['fields'].get(k)!r} (given {v!r})" for k, v in r["fields"].items()
                    if s["fields"].get(k) != v]
            return f"{name}({call}) is a valid config and should keep every field as given: " + ", ".join(diff)
        return None
    return judge


# ----------------------------------------------------------------------------------------------
# A KV cache's update steps


def kv_steps(ctx, sizes: tuple[int, ...]) -> list:
    """Two layers, one step per entry of `sizes` new positions; (B, H, T_new, Dh) = (2, 3, T_new, 5)."""
    return [[(ctx.randn(2, 3, t, 5), ctx.randn(2, 3, t, 5)) for _layer in range(2)] for t in sizes]


def kv_updates(ctx, cache, steps: list, returned: str) -> dict:
    """Every layer's (k_all, v_all) at every step, keyed `returned` with {what}, {layer} and {step}
    ("{what} of layer {layer} after step {step}")."""
    obs = {}
    for step, layers in enumerate(steps):
        for layer, (k, v) in enumerate(layers):
            k_all, v_all = ctx.unpack(ctx.call(cache.update, layer, k, v), 2, "a pair (k_all, v_all)")
            obs[returned.format(what="keys", layer=layer, step=step + 1)] = k_all
            obs[returned.format(what="values", layer=layer, step=step + 1)] = v_all
    return obs


# ----------------------------------------------------------------------------------------------
# Causality: changing the future leaves the past alone


CHANGED_FROM = 7


def future_changed(ctx, model, vocab: int) -> dict:
    """The logits of two sequences of 13 that agree up to position 7 and differ from there on."""
    idx = tokens(ctx, 2, 13, vocab=vocab)
    changed = idx.clone()
    changed[:, CHANGED_FROM:] = (changed[:, CHANGED_FROM:] + 5) % vocab
    return {"logits": forward(ctx, model, idx)[0], "logits with the future changed": forward(ctx, model, changed)[0]}


def causal_judge(advice: str = ""):
    """Earlier positions' logits must not move when the future changes; then the logits as the reference's."""
    def judge(s, r, ctx):
        a, b = s["logits"], s["logits with the future changed"]
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape:
            moved = (a[:, :CHANGED_FROM] - b[:, :CHANGED_FROM]).abs().max().item()
            if moved > 1e-5:
                return (f"changing the tokens from position {CHANGED_FROM} on moved the logits of earlier positions "
                        f"by up to {moved:.3g}: the future leaks into the past{advice}")
        return same("logits")(s, r, ctx)
    return judge


# ----------------------------------------------------------------------------------------------
# A cache fed in pieces against the full forward


def cache_judge(what: str, first: int, advice: str):
    """The logits fed through a cache in pieces (`what`: how, and the split) against the student's own full
    forward; when only positions after the first chunk (`first` long) differ, `advice` says where to look."""
    def judge(s, r, ctx):
        full, pieces = s["full forward"], s["through the cache"]
        if not isinstance(pieces, torch.Tensor) or not isinstance(full, torch.Tensor) or pieces.shape != full.shape:
            return close(pieces, r["through the cache"], "logits through the cache")
        msg = close(pieces, full, f"logits fed through {what} against your own full forward", tol=ctx.tol.scaled(5))
        if msg:
            bad = ((pieces - full).abs().amax(dim=(0, 2)) > 1e-3).nonzero().flatten().tolist()
            where = (f"; positions {bad[:6]} differ" + (f": {advice}" if bad[0] >= first else "")) if bad else ""
            return msg + where
        if "cached positions" in r and s.get("cached positions") != r["cached positions"]:
            return (f"after the last step the cache holds {s.get('cached positions')} positions, expected "
                    f"{r['cached positions']}")
        return None
    return judge


# ----------------------------------------------------------------------------------------------
# Low precision on a GPU: against the reference's float32 result


def precision_judge(*keys, hint=None, kind: str = "module", against: str = "float32"):
    """In float32, `keys` as the reference's (with `hint(s, r)` added to a failure); in float16 / bfloat16, each
    key must keep the model's dtype and be close to the reference's float32 result (`KEY (float32)`). `kind`
    and `against` word the messages ("a bfloat16 module should give bfloat16", "... against float32")."""
    def judge(s, r, ctx):
        if ctx.config.dtype == "float32":
            msg = same(*keys)(s, r, ctx)
            return msg + (hint(s, r) if hint and msg else "") if msg else None
        for key in keys:
            got = s.get(key)
            if isinstance(got, torch.Tensor) and got.dtype != getattr(torch, ctx.config.dtype):
                return (f"{key} has dtype {str(got.dtype).removeprefix('torch.')}: a {ctx.config.dtype} {kind} "
                        f"should give {ctx.config.dtype}")
            msg = close(got, r[f"{key} (float32)"], f"{key} in {ctx.config.dtype} against {against}",
                        tol=ctx.tol.scaled(5), check_dtype=False)
            if msg:
                return msg
        return None
    return judge


# ----------------------------------------------------------------------------------------------
# The training-step benchmark


def step_time(model, x, y, repeats: int) -> float:
    """Median seconds of one AdamW step (forward with targets, backward, update), after three warm-up steps."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        _, loss = model(x, targets=y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(3):
        step()
    times = []
    for _ in range(repeats):
        if x.is_cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        step()
        if x.is_cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def training_steps(configs, build, describe, device: str, repeats: int) -> list:
    """One row per config: `build(fields) -> (yours, torch's)` (models in train mode), each timed by
    step_time on the same random batch; `describe(cfg, batch)` names the row."""
    rows = []
    for c in configs:
        c = dict(c)
        batch = c.pop("batch")
        torch.manual_seed(0)
        ours, theirs = (m.to(device).train() for m in build(c))
        n_ours = sum(p.numel() for p in ours.parameters())
        n_theirs = sum(p.numel() for p in theirs.parameters())
        x = torch.randint(0, c["vocab_size"], (batch, c["block_size"]), device=device)
        y = torch.randint(0, c["vocab_size"], (batch, c["block_size"]), device=device)
        t_ours = step_time(ours, x, y, repeats)
        t_theirs = step_time(theirs, x, y, repeats)
        rows.append([describe(c, batch), f"{n_ours:,}" + ("" if n_ours == n_theirs else f" (torch's: {n_theirs:,})"),
                     round(t_ours * 1e3, 2), round(t_theirs * 1e3, 2), round(t_ours / t_theirs, 3),
                     round(batch * c["block_size"] / t_ours)])
    return rows


TRAINING_COLUMNS = ["config", "parameters", "yours (ms)", "torch (ms)", "ratio", "tokens/s (yours)"]
TRAINING_NOTE = "one AdamW step: forward, cross-entropy, backward, update; median of several after warm-up"
