"""Lesson 08 — assembling GPT: `GPTConfig`, `GPT`, `KVCache`, `count_parameters`, `generate`,
`load_gpt2_state_dict`.

Reads like the lesson: a few helpers the probes share (a config, a cache and a tiny language model of the
grader's own, so that each exercise is checked on its own), then each exercise's probes and judges, then
the known mistakes. Probes run in the sandboxed child (student code); judges run in the parent.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from .engine.compare import close
from .engine import (CPU, CPU_AND_GPU, Checks, Mistake, WrongResult, expect_value_error, raises_value_error,
                     same)
from .engine.checks import Arg, Domain
from .interface import PASSED, UPDATE_CALLED, arguments, layout_first, state_layout, update
from .engine.probe import relaid, seed_global
from . import lm_probes as lm
from .lm_probes import (Cache, cache_judge, call_text, causal_judge, fill_by_name, forward, future_changed,
                        kv_steps, kv_updates, precision_judge, tokens, training_steps,
                        TRAINING_COLUMNS, TRAINING_NOTE)

CHECKS = Checks("lesson08")
# What this lesson's checks import lazily (a meta-device probe),
# imported once by the warm zygote (zygote.preload); tests/e2e/test_warm_imports.py names what is missing.
WARM_IMPORTS = ("torch.utils._device",)

FORBIDDEN: dict[str, tuple[str, ...]] = {}  # nothing here is a one-call built-in

GPT2_SMALL_PARAMETERS = 124_439_808  # stated in the lesson; the probe counts it, the judge only quotes it


# ----------------------------------------------------------------------------------------------
# Helpers the probes share. They stand in for the student's other exercises, so that GPT is checked
# with a cache of the grader's, generate with a model of the grader's, and so on.


@dataclass
class _Config:
    """GPTConfig's fields, without the validation that is the GPTConfig exercise."""

    vocab_size: int = 50257
    block_size: int = 1024
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0
    bias: bool = True


TINY = dict(vocab_size=67, block_size=16, n_layer=2, n_head=4, n_embd=32)  # every size different


def _fill(model: nn.Module, seed: int) -> nn.Module:
    return fill_by_name(model, seed, ("wte.weight", "wpe.weight", "lm_head.weight"), 0.2)


def _tiny_gpt(ctx, **overrides):
    """The student's GPT at the tiny config, parameters set by name, in eval mode, on the config's device."""
    cfg = _Config(**{**TINY, **overrides})
    ctx.manual_seed()
    model = ctx.call(ctx.get("GPT"), cfg)
    _fill(model, ctx.seed)
    return model.eval()


def _tokens(ctx, *shape, vocab=TINY["vocab_size"]):
    return tokens(ctx, *shape, vocab=vocab)


def _own_draws(ctx, ex: dict) -> None:
    """Draw this example's inputs from a seed of its own (the check's seed and the example), so that an example
    where the student's code stopped half-way (an exception) does not shift the draws of the examples after it."""
    seed = ctx.seed + zlib.crc32(repr(sorted(ex.items())).encode())
    ctx.gen.manual_seed(seed)
    # and torch's global generator: code that samples without a generator (generate(..., generator=None)) then
    # samples the same in the student's child as in the reference child's run of a catalogued mistake
    seed_global(seed)


def _observed_like(hints: dict | None = None, scale: float = 5.0):
    """A drawn example's judge: every observation the reference made, tensors within the tolerance times
    `scale` (dtype kept), the rest equal. `hints`: {key: words added when that observation differs}."""
    def judge(s, r, ctx):
        for key, ref in r.items():
            if key in ("example", "choice"):
                continue
            got = s.get(key)
            if isinstance(ref, torch.Tensor):
                msg = close(got, ref, key, tol=ctx.tol.scaled(scale))
            else:
                msg = None if got == ref else f"{key}: expected {ref!r}, got {got!r}"
            if msg:
                return msg + (hints or {}).get(key, "")
        return None
    return judge


# ----------------------------------------------------------------------------------------------
# GPTConfig


def _config_judge(s, r, ctx):
    if s["is a dataclass"] is not True:
        return "GPTConfig should stay a @dataclass"
    if s["defaults"] != r["defaults"]:
        diff = [f"{k}={s['defaults'].get(k)!r} (expected {v!r})" for k, v in r["defaults"].items()
                if s["defaults"].get(k) != v]
        return "the defaults should be GPT-2 small's: " + ", ".join(diff)
    if s["custom"] != r["custom"]:
        return f"GPTConfig(**{r['custom']}) should keep those values, got {s['custom']}"
    for kwargs, name in _BAD_CONFIGS:
        case = call_text(kwargs)
        msg = expect_value_error(s[case], f"GPTConfig({case})", name)
        if msg:
            return msg
    return None


_BAD_CONFIGS = (({"vocab_size": 0}, "vocab_size"), ({"block_size": 0}, "block_size"), ({"n_layer": -1}, "n_layer"),
                ({"n_head": 0}, "n_head"), ({"n_embd": 0}, "n_embd"), ({"n_embd": 30, "n_head": 4}, "n_embd"),
                ({"dropout": 1.0}, "dropout"), ({"dropout": -0.1}, "dropout"))


@CHECKS.probe("GPTConfig", "GPT-2 small's defaults; impossible configs raise ValueError naming the field",
              _config_judge, CPU,
              rule="rejected at once, with a `ValueError` whose message names the field")
def config_fields(ctx):
    custom = dict(vocab_size=67, block_size=16, n_layer=2, n_head=4, n_embd=32, dropout=0.1, bias=False)
    return lm.config_fields(ctx, _Config, {}, custom, _BAD_CONFIGS)


_SIZES = ("vocab_size", "block_size", "n_layer", "n_head", "n_embd")


def _invalid_fields(kw: dict) -> list[str]:
    """The fields the exercise's rules reject in `kw`, derived from the rules as the lesson states them."""
    bad = [name for name in _SIZES if kw[name] < 1]
    if kw["n_head"] >= 1 and kw["n_embd"] % kw["n_head"]:
        bad.append("n_embd")
    if not 0.0 <= kw["dropout"] < 1.0:
        bad.append("dropout")
    return bad


# The declared domain of GPTConfig: every field at its default, at the smallest valid value and just outside
# its range (0, a width not divisible by the heads, dropout 1.0 and below 0), bias off, and a second config
# built first, by keyword or positionally in the fields' order. A valid config keeps its values; an invalid one
# raises ValueError naming a field it breaks.
CONFIG_DOMAIN = Domain(
    args=(Arg("vocab_size", (50257, 1, 0)), Arg("block_size", (1024, 1, 0)), Arg("n_layer", (12, 1, 0)),
          Arg("n_head, n_embd", ("12, 768", "1, 1", "4, 32", "0, 768", "5, 768", "4, 0")),
          Arg("dropout", (0.0, 0.999, 1.0, -0.1)), Arg("bias", (True, False)),
          Arg("instances", ("one", "after another config was built")), PASSED),
    tensors=False, examples=4)

# The fields in the order the lesson's table (and the dataclass it gives) lists them: a positional call's order.
_CONFIG_ORDER = ("vocab_size", "block_size", "n_layer", "n_head", "n_embd", "dropout", "bias")


@CHECKS.domain("GPTConfig", CONFIG_DOMAIN, lm.config_domain_judge("GPTConfig"))
def config_domain(ctx, ex):
    _own_draws(ctx, ex)
    heads, embd = (int(n) for n in ex["n_head, n_embd"].split(", "))
    kw = dict(vocab_size=ex["vocab_size"], block_size=ex["block_size"], n_layer=ex["n_layer"], n_head=heads,
              n_embd=embd, dropout=ex["dropout"], bias=ex["bias"])
    if ex["instances"] != "one":
        ctx.call(ctx.target, **TINY, dropout=0.1, bias=not ex["bias"])
    return lm.config_made(ctx, _Config, _CONFIG_ORDER, kw, ex["passed"], _invalid_fields(kw))


# ----------------------------------------------------------------------------------------------
# GPT


def _names_judge(s, r, ctx):
    for key in ("names", "names (bias=False)"):
        got, want = s[key], r[key]
        if got != want:
            extra = sorted(set(got) - set(want))
            missing = sorted(set(want) - set(got))
            hint = ""
            if "lm_head.weight" in extra:
                hint = (" `lm_head.weight` is a parameter of its own: tie it, assigning the Parameter `wte.weight` "
                        "itself to `lm_head.weight` (the same Parameter), not a copy")
            return (f"the model's parameters ({key}) should be the course's layout; extra: {extra[:4]}, "
                    f"missing: {missing[:4]}.{hint}")
    return None


@CHECKS.probe("GPT", "parameters named wte, wpe, blocks.{i}.(ln1, attn.*_proj, ln2, mlp.fc1/fc2), ln_f; head tied",
              _names_judge, CPU,
              rule="builds `wte`, `wpe`, dropout, `blocks` (an `nn.ModuleList` of `n_layer` `GPTBlock`s)")
def gpt_names(ctx):
    GPT = ctx.target
    ctx.manual_seed()
    model = ctx.call(GPT, _Config(**TINY))
    ctx.manual_seed()
    no_bias = ctx.call(GPT, _Config(**{**TINY, "bias": False}))
    return {"names": sorted(n for n, _ in model.named_parameters()),
            "names (bias=False)": sorted(n for n, _ in no_bias.named_parameters())}


@CHECKS.probe("GPT", "logits and loss match the reference (parameters set by name)",
              precision_judge("logits", "loss", kind="model", against="the float32 model"), CPU_AND_GPU,
              rule="logits `(B, T, vocab_size)`, the loss `F.cross_entropy` over all positions")
def gpt_logits(ctx):
    model = _tiny_gpt(ctx)
    idx, targets = _tokens(ctx, 3, 11), _tokens(ctx, 3, 11)
    obs = {}
    if ctx.dtype != torch.float32:
        model32 = model.to(ctx.device)
        logits, loss = forward(ctx, model32, idx, targets=targets)
        obs = {"logits (float32)": logits.float(), "loss (float32)": loss.float()}
    model = model.to(device=ctx.device, dtype=ctx.dtype)
    logits, loss = forward(ctx, model, idx, targets=targets)
    logits_only, no_loss = forward(ctx, model, idx)
    if no_loss is not None:
        raise WrongResult("without targets, forward should return (logits, None)")
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        raise WrongResult("with targets, the loss should be a scalar tensor (the mean cross-entropy)")
    return {**obs, "logits": logits, "loss": loss}


@CHECKS.probe("GPT", "the future does not change the past",
              causal_judge(". Are the blocks causal (causal=True)?"), CPU,
              rule="The logits at position `t` depend on no token after `t`")
def gpt_causal(ctx):
    return future_changed(ctx, _tiny_gpt(ctx), TINY["vocab_size"])


_CACHE_JUDGE = cache_judge("the cache (a prompt of 4, then 2, then one at a time)", 4,
                           "the first chunk agrees, so do the positions of later chunks continue from len(cache)?")


@CHECKS.probe("GPT", "logits with a cache, fed in pieces, equal the full forward", _CACHE_JUDGE, CPU,
              rule="a sequence fed through a cache in pieces gets the same logits as one full forward")
def gpt_cache(ctx):
    model = _tiny_gpt(ctx)
    idx = _tokens(ctx, 2, 10)
    full, _ = forward(ctx, model, idx)
    cache, pieces = Cache(), []
    for chunk in (idx[:, :4], idx[:, 4:6], *idx[:, 6:].split(1, dim=1)):  # a prompt, a pair, then singles
        logits, _ = forward(ctx, model, chunk, cache=cache)
        pieces.append(logits)
    return {"full forward": full, "through the cache": torch.cat(pieces, dim=1), "cached positions": len(cache)}


def _block_size_judge(s, r, ctx):
    return (expect_value_error(s["17 tokens at block_size=16"], "a sequence of 17 tokens at block_size=16", "block_size")
            or expect_value_error(s["3 new tokens after 14 cached"], "3 new tokens after 14 cached positions "
                                  "(block_size=16)", "block_size")
            or (None if s["16 tokens"] == "ok" else f"a sequence of exactly block_size tokens should run: {s['16 tokens']}"))


@CHECKS.probe("GPT", "ValueError naming block_size when the sequence runs past it", _block_size_judge, CPU,
              rule="raise a `ValueError` whose message names `block_size`")
def gpt_block_size(ctx):
    model = _tiny_gpt(ctx)
    full = ctx.raised(model, _tokens(ctx, 1, 16))
    cache = Cache()
    forward(ctx, model, _tokens(ctx, 1, 14), cache=cache)
    return {"17 tokens at block_size=16": ctx.raised(model, _tokens(ctx, 1, 17)),
            "3 new tokens after 14 cached": ctx.raised(model, _tokens(ctx, 1, 3), cache=cache),
            "16 tokens": "ok" if full["raised"] == "nothing" else f"{full['raised']}: {full['message']}"}


def _tied_judge(s, r, ctx):
    if not s["lm_head.weight is wte.weight"]:
        how = ("they share storage but are two Parameter objects" if s["same storage"] else
               "the head has a tensor of its own (a copy)")
        return (f"lm_head.weight should be the very Parameter wte.weight; here {how}. "
                "Assign the Parameter `wte.weight` itself to `lm_head.weight`")
    if not s["the head sees a change to wte"]:
        return "after changing wte.weight in place, lm_head.weight did not change: they are not tied"
    return None


@CHECKS.probe("GPT", "the head is tied: lm_head.weight is wte.weight (shared storage)", _tied_judge, CPU,
              rule="tying means two modules holding **the same `Parameter` object**")
def gpt_tied(ctx):
    ctx.manual_seed()
    model = ctx.call(ctx.target, _Config(**TINY))
    head, wte = model.lm_head.weight, model.wte.weight
    with torch.no_grad():
        wte.add_(1.0)
    return {"lm_head.weight is wte.weight": head is wte,
            "same storage": head.data_ptr() == wte.data_ptr(),
            "the head sees a change to wte": bool(torch.equal(model.lm_head.weight, model.wte.weight))}


def _count_judge(s, r, ctx):
    if s["allocated"]:
        return f"building the model on the meta device still allocated {s['allocated']} (create tensors on the default device)"
    if s["GPT-2 small"] != r["GPT-2 small"]:
        extra = s["GPT-2 small"] - r["GPT-2 small"]
        why = (f" — {extra:,} too many is exactly one more vocab_size × n_embd matrix: is the head a copy "
               "instead of tied?" if extra == 50257 * 768 else "")
        return (f"GPT-2 small (the default config) should have {r['GPT-2 small']:,} parameters, yours has "
                f"{s['GPT-2 small']:,}{why}")
    if s["tiny, bias=False"] != r["tiny, bias=False"]:
        return (f"with bias=False the tiny model should have {r['tiny, bias=False']:,} parameters, yours has "
                f"{s['tiny, bias=False']:,} (no biases in the Linear layers and LayerNorms)")
    return None


class _NoInitOnMeta(TorchFunctionMode):
    """Initialising a meta tensor computes nothing, but the first in-place random op on one imports
    torch._dynamo (seconds). Skip in-place calls (`normal_`, `nn.init.zeros_`, ...) on meta tensors: the
    count does not depend on values."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        first = next((a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)), None)
        if name.endswith("_") and not name.startswith("__") and first is not None and first.is_meta:
            return first  # nn.init.normal_(tensor=...) passes its tensor by keyword
        return func(*args, **kwargs)


@CHECKS.probe("GPT", f"GPT-2 small has {GPT2_SMALL_PARAMETERS:,} parameters (built on the meta device)",
              _count_judge, CPU,
              rule="124,439,808 parameters; create its tensors on the default device")
def gpt_count(ctx):
    with torch.device("meta"), _NoInitOnMeta():
        ctx.manual_seed()
        big = ctx.call(ctx.target, _Config())
        small = ctx.call(ctx.target, _Config(**{**TINY, "bias": False}))
    allocated = sorted({str(p.device) for p in big.parameters() if p.device.type != "meta"})
    return {"GPT-2 small": sum(p.numel() for p in big.parameters()),
            "tiny, bias=False": sum(p.numel() for p in small.parameters()),
            "allocated": ", ".join(allocated)}


INIT = dict(vocab_size=67, block_size=64, n_layer=4, n_head=4, n_embd=256)  # ≥ 16k draws per std


def _init_judge(s, r, ctx):
    L = INIT["n_layer"]
    rules = (("std of wte / 0.02", "wte.weight should be drawn from N(0, 0.02)"),
             ("std of wpe / 0.02", "wpe.weight should be drawn from N(0, 0.02)"),
             ("std of q/k/v_proj and fc1 weights / 0.02",
              "the Linear weights (q_proj, k_proj, v_proj, fc1) should be drawn from N(0, 0.02)"),
             ("std of out_proj and fc2 weights / 0.02",
              f"the residual projections (attn.out_proj, mlp.fc2) should be drawn with std 0.02/√(2·n_layer) = "
              f"{0.02 / math.sqrt(2 * L):.5f}"))
    for key, rule in rules:
        got = s[key]
        if got != r[key]:
            shown = f"about {got * 0.02:.4f}" if isinstance(got, (int, float)) else repr(got)
            return f"{rule}; yours have std {shown} (n_layer={L}, n_embd={INIT['n_embd']})"
    if s["largest |bias|"] != 0:
        return f"biases should start at 0; the largest is {s['largest |bias|']:.3g}"
    if not s["LayerNorm gains are 1"]:
        return "LayerNorm weights (gains) should start at 1"
    if not s["loss at init within 0.3 of ln V"]:
        return (f"the loss at initialisation should be close to ln(vocab_size) = {math.log(INIT['vocab_size']):.2f}; "
                f"yours is about {s['loss at init, rounded']}")
    return None


@CHECKS.probe("GPT", "init: N(0, 0.02), residual projections scaled by 1/√(2·n_layer), loss at init ≈ ln V",
              _init_judge, CPU,
              rule="draws every Linear and Embedding weight from N(0, 0.02²), every bias 0, and LayerNorm's gain 1 "
                   "and bias 0")
def gpt_init(ctx):
    ctx.manual_seed()
    model = ctx.call(ctx.target, _Config(**INIT)).eval()
    blocks = list(model.blocks)

    # Pooled stds relative to 0.02, rounded to one decimal: the sample sizes put every correct draw many
    # standard errors from a rounding boundary, so any correct init (in any order) observes the same values.
    def ratio(ts):
        return round(torch.cat([t.detach().flatten().float() for t in ts]).std().item() / 0.02, 1)

    biases = [p for n, p in model.named_parameters() if n.endswith("bias")]
    gains = [p for n, p in model.named_parameters() if n.endswith("weight") and p.dim() == 1]
    idx = _tokens(ctx, 4, 16, vocab=INIT["vocab_size"])
    with torch.no_grad():
        _, loss = forward(ctx, model, idx, targets=_tokens(ctx, 4, 16, vocab=INIT["vocab_size"]))
    return {"std of wte / 0.02": ratio([model.wte.weight]),
            "std of wpe / 0.02": ratio([model.wpe.weight]),
            "std of q/k/v_proj and fc1 weights / 0.02": ratio([w for b in blocks for w in (
                b.attn.q_proj.weight, b.attn.k_proj.weight, b.attn.v_proj.weight, b.mlp.fc1.weight)]),
            "std of out_proj and fc2 weights / 0.02": ratio([w for b in blocks for w in (
                b.attn.out_proj.weight, b.mlp.fc2.weight)]),
            "largest |bias|": round(max((p.abs().max().item() for p in biases), default=0.0), 2),
            "LayerNorm gains are 1": all(bool((p == 1).all()) for p in gains),
            "loss at init within 0.3 of ln V": abs(float(loss) - math.log(INIT["vocab_size"])) < 0.3,
            "loss at init, rounded": round(float(loss))}


_EMBEDDING_DROPOUT = "training mode changes the logits (every block's output projections zeroed)"


def _embedding_dropout(s, r, ctx):
    if s.get("eval mode is repeatable") is False:
        return None  # dropout acting in eval mode too: the mode checks and the domain say so
    if r.get(_EMBEDDING_DROPOUT) and s.get(_EMBEDDING_DROPOUT) is False:
        return ("with every block's attn.out_proj and mlp.fc2 zeroed, training mode (dropout=0.5) gave the "
                "eval-mode logits: nothing drops after the embeddings. Apply dropout to wte(idx) + wpe(pos) "
                "before the first block (nn.Dropout(config.dropout))")
    if s.get(_EMBEDDING_DROPOUT) is not r.get(_EMBEDDING_DROPOUT):
        return f"{_EMBEDDING_DROPOUT}: expected {r.get(_EMBEDDING_DROPOUT)!r}, got {s.get(_EMBEDDING_DROPOUT)!r}"
    return None


@CHECKS.probe("GPT", "dropout after the embeddings (every block's output projections zeroed)", _embedding_dropout, CPU,
              rule="after the embeddings, on the attention weights, on each branch's")
def gpt_embedding_dropout(ctx):
    """The blocks' two projections into the residual stream (attn.out_proj, mlp.fc2) zeroed: every block adds
    zero (dropout of zero is zero), so only a dropout after the embeddings can make training mode differ."""
    model = _tiny_gpt(ctx, dropout=0.5)
    with torch.no_grad():
        for i, block in enumerate(getattr(model, "blocks", None) or ()):
            for path in ("attn.out_proj", "mlp.fc2"):
                try:
                    lin = block.get_submodule(path)
                except AttributeError:
                    lin = None
                if not isinstance(lin, nn.Linear):
                    raise WrongResult(f"blocks.{i}.{path} should be an nn.Linear (the names the lesson gives)")
                lin.weight.zero_()
                if lin.bias is not None:
                    lin.bias.zero_()
    idx = _tokens(ctx, 2, 8)
    ctx.manual_seed()
    in_eval = forward(ctx, model, idx)[0]
    again = forward(ctx, model, idx)[0]  # the generator has moved on: only dropout could change it
    model.train()
    ctx.manual_seed()
    in_training = forward(ctx, model, idx)[0]

    def differ(a, b) -> bool:
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
                and bool(((a - b).abs() > 1e-4).any()))

    return {_EMBEDDING_DROPOUT: differ(in_training, in_eval), "eval mode is repeatable": not differ(in_eval, again)}


@CHECKS.probe("GPT", "gradients match, the tied weight's from both of its uses", same(scale=10), CPU, hidden=True,
              rule="one tensor, two uses, and the gradients from both uses add up in it")
def gpt_grads(ctx):
    model = _tiny_gpt(ctx)
    _, loss = forward(ctx, model, _tokens(ctx, 2, 9), targets=_tokens(ctx, 2, 9))
    loss.backward()
    named = dict(model.named_parameters())
    return {f"gradient of {n}": (named[n].grad if n in named else None)
            for n in ("wte.weight", "wpe.weight", "blocks.0.attn.q_proj.weight", "blocks.1.mlp.fc2.weight", "ln_f.weight")}


_GPT_HINTS = {
    "logits": " (the model in eval mode, parameters set by name, on the same tokens: dropout must be off in eval "
              "mode, nn.Dropout modules or training=self.training; what the model makes, positions and masks, is "
              "made on idx's device)",
    "logits through the cache": " (fed through a cache in pieces; the positions continue from len(cache))",
    "logits in training mode": " (with dropout=0.0 training mode must equal eval mode)",
    "training mode changes the logits": " (with dropout > 0, training mode should drop: nn.Dropout(config.dropout))",
}

# The declared domain of GPT: every config field, each at other values and its edges (a vocabulary of 1, a
# block_size of 1, one layer, one head, heads of width 2, no bias, dropout in eval and training mode), forward's
# arguments (targets or not, a cache fed a prompt then single tokens, or single tokens from empty), a batch of
# 1, one token and a sequence of exactly block_size, idx int64 or int32 in any layout, float64 parameters, and a second model
# built, or another length run, before this one's forward; torch's default device set to meta (idx on the CPU)
# shows a tensor made without device=idx.device, as a GPU would; targets and cache by keyword or positionally
# (None given explicitly).
GPT_DOMAIN = Domain(
    args=(Arg("config.vocab_size", (67, 1, 300)), Arg("config.block_size", (16, 1, 40)),
          Arg("config.n_layer", (2, 1, 3)), Arg("config.n_head, config.n_embd", ("4, 32", "1, 8", "8, 16")),
          Arg("config.dropout, mode", ("0.0, eval", "0.1, eval", "0.0, train", "0.2, train")),
          Arg("config.bias", (True, False)), Arg("B", (2, 1)), Arg("T", ("5", "1", "block_size")),
          Arg("targets", (None, "given")), Arg("cache", (None, "a prompt, then one at a time", "one at a time")),
          Arg("calls", ("one", "after another GPT was built", "after a forward of another length")),
          Arg("model dtype", ("float32", "float64")), Arg("default device", ("cpu", "meta")), PASSED),
    dtypes=(("idx", ("int64", "int32")),), layouts=(("idx", ("contiguous", "transposed", "strided")),), examples=5)


@CHECKS.domain("GPT", GPT_DOMAIN, layout_first(_observed_like(_GPT_HINTS), who="GPT"))
def gpt_domain(ctx, ex):
    _own_draws(ctx, ex)
    heads, d = (int(n) for n in ex["config.n_head, config.n_embd"].split(", "))
    p, mode = ex["config.dropout, mode"].split(", ")
    V, bs, B = ex["config.vocab_size"], ex["config.block_size"], ex["B"]
    cfg = _Config(vocab_size=V, block_size=bs, n_layer=ex["config.n_layer"], n_head=heads, n_embd=d,
                  dropout=float(p), bias=ex["config.bias"])
    ctx.manual_seed()
    model = ctx.call(ctx.target, cfg)
    layout = {"state_dict": state_layout(model)}
    _fill(model, ctx.seed)
    model = model.to(device=ctx.device, dtype=getattr(torch, ex["model dtype"])).eval()
    T = bs if ex["T"] == "block_size" else min(int(ex["T"]), bs)
    idx = relaid(_tokens(ctx, B, T, vocab=V).to(getattr(torch, ex["dtype of idx"])), ex["layout of idx"])
    if ex["calls"] == "after another GPT was built":
        ctx.manual_seed()
        ctx.call(ctx.target, _Config(**{**TINY, "vocab_size": 13, "block_size": 8, "n_layer": 1}))
    elif ex["calls"] == "after a forward of another length":
        forward(ctx, model, _tokens(ctx, B, 1 if T > 1 else min(2, bs), vocab=V))
    kwargs = {"targets": _tokens(ctx, B, T, vocab=V)} if ex["targets"] else {}
    if ex["default device"] == "meta":  # idx stays on the CPU: a tensor made without device= lands on meta
        with torch.device("meta"):
            return {"logits": forward(ctx, model, idx)[0], **layout}
    args, kwargs = arguments(("targets", "cache"), kwargs, {"targets": None, "cache": None}, ex["passed"])
    logits, loss = forward(ctx, model, idx, *args, **kwargs)
    obs = {"logits": logits, **layout}
    if ex["targets"]:
        obs["loss"] = loss
    else:
        obs["loss is None without targets"] = loss is None
    if ex["passed"] != PASSED.values[0]:  # both given, in the signature's order: (idx, targets, cache)
        both = forward(ctx, model, idx, _tokens(ctx, B, T, vocab=V), Cache())
        obs.update({"logits of model(idx, targets, cache)": both[0], "loss of model(idx, targets, cache)": both[1]})
    if ex["cache"]:
        cache = Cache()
        first = T // 2 + 1 if ex["cache"].startswith("a prompt") else 1
        args, kwargs = arguments(("targets", "cache"), {"cache": cache}, {"targets": None}, ex["passed"])
        pieces = [forward(ctx, model, chunk, *args, **kwargs)[0] for chunk in (idx[:, :first], *idx[:, first:].split(1, 1))]
        obs.update({"logits through the cache": torch.cat(pieces, dim=1), "cached positions": len(cache)})
    if mode == "train":
        model.train()
        ctx.manual_seed()
        trained = forward(ctx, model, idx)[0]
        if p == "0.0":
            obs["logits in training mode"] = trained
        else:
            obs["training mode changes the logits"] = (isinstance(trained, torch.Tensor) and trained.shape == logits.shape
                                                       and bool(((trained - logits).abs() > 1e-4).any()))
    return obs


# ----------------------------------------------------------------------------------------------
# KVCache


def _kv_inputs(ctx):
    return kv_steps(ctx, (3, 2, 1))


@CHECKS.probe("KVCache", "update appends along the time axis and returns all of that layer's so far", same(), CPU,
              rule="appends them **along the time axis** (dim −2) to what that layer already holds, and returns the "
                   "whole of it")
def kv_update(ctx):
    return kv_updates(ctx, ctx.call(ctx.target), _kv_inputs(ctx), "{what} of layer {layer} after step {step}")


def _len_judge(s, r, ctx):
    if s["lengths"] != r["lengths"]:
        return (f"len(cache) should count cached positions: empty, then after steps of 3, 2 and 1 new positions "
                f"(2 layers each) it should read {r['lengths']}; yours read {s['lengths']}")
    return None


@CHECKS.probe("KVCache", "len(cache) is the number of cached positions, 0 when empty", _len_judge, CPU,
              rule="`len(cache)` is the number of positions cached so far")
def kv_len(ctx):
    cache = ctx.call(ctx.target)
    lengths = [len(cache)]
    for layers in _kv_inputs(ctx):
        for layer, (k, v) in enumerate(layers):
            ctx.call(cache.update, layer, k, v)
        lengths.append(len(cache))
    return {"lengths": lengths}


@CHECKS.probe("KVCache", "two caches do not share their contents", same(), CPU, hidden=True,
              rule="two caches share nothing")
def kv_separate(ctx):
    a, b = ctx.call(ctx.target), ctx.call(ctx.target)
    k1, v1, k2, v2 = (ctx.randn(1, 2, 4, 3) for _ in range(4))
    ctx.call(a.update, 0, k1, v1)
    k_b, v_b = ctx.unpack(ctx.call(b.update, 0, k2, v2), 2, "a pair (k_all, v_all)")
    return {"keys of the second cache": k_b, "values of the second cache": v_b}


# The declared domain of KVCache: batch, heads and head widths from 1 up, steps of several new positions and
# of one, one layer to four, keys and values of different dtypes (float16 included) and layouts, each varied
# alone, two caches filled in turn (no state shared between instances), and `update(layer_idx, k, v)` called
# positionally, as a model does, or by its parameters' names.
KV_DOMAIN = Domain(
    args=(Arg("B, H, Dh", ("2, 3, 5", "1, 1, 1", "1, 2, 64")),
          Arg("steps (new positions)", ("3, 2, 1", "1", "1, 1, 1, 1, 1", "7, 4")),
          Arg("layer_idx", ("0, 1", "0", "0, 1, 2, 3")), Arg("instances", ("one", "two caches filled in turn")),
          UPDATE_CALLED),
    dtypes=(("k", ("float32", "float64", "float16")), ("v", ("float32", "float64", "float16"))),
    layouts=(("k", ("contiguous", "transposed", "strided")), ("v", ("contiguous", "transposed", "strided"))),
    examples=5)


@CHECKS.domain("KVCache", KV_DOMAIN, _observed_like(scale=1.0))
def kv_domain(ctx, ex):
    _own_draws(ctx, ex)
    B, H, Dh = (int(n) for n in ex["B, H, Dh"].split(", "))
    steps = [int(t) for t in ex["steps (new positions)"].split(", ")]
    layers = [int(i) for i in ex["layer_idx"].split(", ")]
    caches = [ctx.call(ctx.target) for _ in range(1 if ex["instances"] == "one" else 2)]
    obs = {"len when empty": len(caches[0])}
    for step, t in enumerate(steps, 1):
        for c, cache in enumerate(caches):
            tag = f"cache {c + 1}: " if len(caches) > 1 else ""
            for layer in layers:
                k = relaid(ctx.randn(B, H, t, Dh, dtype=getattr(torch, ex["dtype of k"])), ex["layout of k"])
                v = relaid(ctx.randn(B, H, t, Dh, dtype=getattr(torch, ex["dtype of v"])), ex["layout of v"])
                k_all, v_all = ctx.unpack(update(ctx, cache, ex, layer, k, v), 2, "a pair (k_all, v_all)")
                obs[f"{tag}keys of layer {layer} after step {step}"] = k_all
                obs[f"{tag}values of layer {layer} after step {step}"] = v_all
            obs[f"{tag}len after step {step}"] = len(cache)
    return obs


# ----------------------------------------------------------------------------------------------
# count_parameters


class _Shared(nn.Module):
    """An embedding and a head that share one weight, and one block used twice."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(23, 7)
        self.head = nn.Linear(7, 23, bias=False)
        self.head.weight = self.emb.weight
        block = nn.Linear(7, 7)
        self.stack = nn.ModuleList([block, nn.LayerNorm(7), block])


def _int_judge(*keys):
    def judge(s, r, ctx):
        for key in keys:
            got, want = s[key], r[key]
            if not isinstance(got, int) or isinstance(got, bool):
                return f"{key}: count_parameters should return a Python int, got {type(got).__name__} {got!r}"
            if got != want:
                return f"{key}: expected {want:,} parameters, got {got:,}"
        return None
    return judge


@CHECKS.probe("count_parameters", "counts every parameter of a plain model", _int_judge("MLP 13→29→11"), CPU,
              rule="the number of scalar parameters of any `model` as a Python `int`")
def count_plain(ctx):
    ctx.manual_seed()
    mlp = nn.Sequential(nn.Linear(13, 29), nn.GELU(), nn.Linear(29, 11, bias=False))
    return {"MLP 13→29→11": ctx.call(ctx.target, mlp)}


@CHECKS.probe("count_parameters", "a tied weight, and a module used twice, count once",
              _int_judge("embedding and head tied, a block used twice"), CPU,
              rule="a shared one (your tied head) counted once")
def count_shared(ctx):
    ctx.manual_seed()
    return {"embedding and head tied, a block used twice": ctx.call(ctx.target, _Shared())}


@CHECKS.probe("count_parameters", "works on the meta device; frozen parameters count too",
              _int_judge("tied 50257×768 embedding and head on the meta device", "half frozen"), CPU, hidden=True,
              rule="It should work on a model built on the `meta` device")
def count_meta(ctx):
    with torch.device("meta"), _NoInitOnMeta():
        emb = nn.Embedding(50257, 768)
        head = nn.Linear(768, 50257, bias=False)
        head.weight = emb.weight
        big = nn.ModuleDict({"wte": emb, "lm_head": head, "ln": nn.LayerNorm(768)})
    half = nn.Sequential(nn.Linear(6, 9), nn.Linear(9, 4))
    half[0].requires_grad_(False)
    return {"tied 50257×768 embedding and head on the meta device": ctx.call(ctx.target, big),
            "half frozen": ctx.call(ctx.target, half)}


class _CountModel(nn.Module):
    """A GPT-shaped model of torch's modules for counting: embeddings, `n_layer` blocks (the first possibly used
    twice), a final LayerNorm and a head, tied from either side or not; biases or not; maybe a buffer."""

    def __init__(self, n_layer: int, bias: bool, head: str, reuse: bool, buffer: bool, V: int = 29, D: int = 12):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, D), nn.Embedding(16, D)
        blocks = [nn.Sequential(nn.LayerNorm(D, bias=bias), nn.Linear(D, 4 * D, bias=bias), nn.GELU(),
                                nn.Linear(4 * D, D, bias=bias)) for _ in range(n_layer)]
        self.blocks = nn.ModuleList(blocks + blocks[:1] if reuse else blocks)
        self.ln_f = nn.LayerNorm(D, bias=bias)
        self.lm_head = nn.Linear(D, V, bias=False)
        if head == "tied":
            setattr(self.lm_head, "weight", self.wte.weight)  # one Parameter for both
        elif head == "tied from the head's side":
            self.wte.weight = self.lm_head.weight
        if buffer:
            self.register_buffer("causal_mask", torch.ones(16, 16).tril())  # a buffer: not a parameter


# The declared domain of count_parameters: models with and without biases, tied (from either module's side)
# or not, one block or several, a block used twice, a frozen block, a buffer (not a parameter), on the CPU and
# on the meta device.
COUNT_DOMAIN = Domain(
    args=(Arg("model.bias", (True, False)), Arg("model.head", ("tied", "untied", "tied from the head's side")),
          Arg("model.n_layer", (2, 1, 3)), Arg("model.blocks", ("each its own", "the first used twice")),
          Arg("model.frozen", ("none", "the first block")), Arg("model.buffers", ("none", "a causal-mask buffer")),
          Arg("model.device", ("cpu", "meta"))),
    tensors=False, examples=4)


@CHECKS.domain("count_parameters", COUNT_DOMAIN, _int_judge("parameters"))
def count_domain(ctx, ex):
    _own_draws(ctx, ex)

    def build():
        return _CountModel(ex["model.n_layer"], ex["model.bias"], ex["model.head"],
                           ex["model.blocks"] != "each its own", ex["model.buffers"] != "none")

    ctx.manual_seed()
    if ex["model.device"] == "meta":
        with torch.device("meta"), _NoInitOnMeta():
            model = build()
    else:
        model = build()
    if ex["model.frozen"] != "none":
        model.blocks[0].requires_grad_(False)
    return {"parameters": ctx.call(ctx.target, model)}


# ----------------------------------------------------------------------------------------------
# generate: checked on a small language model of the grader's own, so that your GPT does not matter here


class _ToyLM(nn.Module):
    """One causal attention layer over token and position embeddings, speaking GPT's calling convention:
    forward(idx, targets=None, cache=None) -> (logits, None), keys and values through cache.update(0, k, v),
    `config.block_size`. Like GPT, it raises ValueError past block_size."""

    def __init__(self, vocab_size=41, block_size=16, d=24, seed=8):
        super().__init__()
        self.config = _Config(vocab_size=vocab_size, block_size=block_size, n_layer=1, n_head=1, n_embd=d)
        g = torch.Generator().manual_seed(seed)
        self.emb = nn.Parameter(torch.randn(vocab_size, d, generator=g))
        self.pos = nn.Parameter(torch.randn(block_size, d, generator=g) * 0.5)
        self.wq, self.wk, self.wv = (nn.Parameter(torch.randn(d, d, generator=g) / math.sqrt(d)) for _ in range(3))
        self.head = nn.Parameter(torch.randn(d, vocab_size, generator=g) * (1.5 / math.sqrt(d)))

    def forward(self, idx, targets=None, cache=None):
        B, T = idx.shape
        past = 0 if cache is None else len(cache)  # positions already cached
        end = past + T
        if end > self.config.block_size:
            raise ValueError(f"position {end} is past block_size={self.config.block_size}")
        x = self.emb[idx] + self.pos[past:end]  # (B, T, d)
        q, k, v = ((x @ w).unsqueeze(1) for w in (self.wq, self.wk, self.wv))  # (B, 1, T, d)
        if cache is not None:
            k, v = cache.update(0, k, v)
        t_all = k.shape[-2]
        mask = torch.ones(T, t_all, dtype=torch.bool, device=idx.device).tril(t_all - T)
        scores = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(~mask, float("-inf"))
        y = (torch.softmax(scores, dim=-1) @ v).squeeze(1)  # (B, T, d)
        return (x + y) @ self.head, None


def _prompt(ctx, B, T, vocab=41):
    return torch.randint(0, vocab, (B, T), generator=ctx.gen).to(ctx.device)


def _tokens_judge(*keys):
    def judge(s, r, ctx):
        for key in keys:
            got, want = s[key], r[key]
            if not isinstance(got, torch.Tensor) or got.shape != want.shape:
                return close(got, want, key)
            if not torch.equal(got[:, :r["prompt length"]], want[:, :r["prompt length"]]):
                return f"{key}: the output should start with the prompt, unchanged"
            if got.dtype != want.dtype:
                return f"{key} has dtype {str(got.dtype).removeprefix('torch.')}, expected int64 token ids"
            if not torch.equal(got, want):
                i = tuple(int(j) for j in (got != want).nonzero()[0])
                return (f"{key}: the tokens differ from the reference's from index {i} on (got {int(got[i])}, "
                        f"expected {int(want[i])}); greedy decoding takes the argmax of the last position's logits")
        return None
    return judge


@CHECKS.probe("generate", "greedy (temperature=0) continues the prompt like the reference",
              _tokens_judge("greedy tokens"), CPU,
              rule="**Greedy**: take the argmax. Deterministic, and prone to loops on small models. Here "
                   "`temperature=0`")
def gen_greedy(ctx):
    model, idx = _ToyLM(), _prompt(ctx, 3, 5)
    return {"greedy tokens": ctx.call(ctx.target, model, idx, 8, temperature=0), "prompt length": 5}


def _cache_same_judge(s, r, ctx):
    a, b = s["with the cache"], s["without the cache"]
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and not torch.equal(a, b):
        return "greedy generation gives different tokens with and without the cache: they must agree"
    return _tokens_judge("without the cache", "with the cache")(s, r, ctx)


@CHECKS.probe("generate", "greedy generation is the same with and without the cache", _cache_same_judge, CPU,
              rule="the cache must not change a single logit")
def gen_cache(ctx):
    model, idx = _ToyLM(), _prompt(ctx, 2, 4)
    return {"without the cache": ctx.call(ctx.target, model, idx, 9, temperature=0, use_cache=False),
            "with the cache": ctx.call(ctx.target, model, idx, 9, temperature=0, use_cache=True),
            "prompt length": 4}


@CHECKS.probe("generate", "crops the context to block_size when running without a cache",
              _tokens_judge("greedy tokens past block_size"), CPU,
              rule="Without a cache, each step runs the model on the sequence so far, **cropped to its last "
                   "`block_size` tokens**")
def gen_crop(ctx):
    model, idx = _ToyLM(), _prompt(ctx, 2, 14)
    return {"greedy tokens past block_size": ctx.call(ctx.target, model, idx, 7, temperature=0, use_cache=False),
            "prompt length": 14}


N_SAMPLES = 20_000


def _gap_at_k(logits: torch.Tensor, k: int) -> float:
    """How far the k-th largest of `logits` (V,) is above the next one (inf when k keeps them all): a top-k
    check draws logits where this is clearly above 0, so keeping exactly k and keeping every tie agree."""
    top = torch.topk(logits, min(k + 1, logits.numel())).values
    return float(top[k - 1] - top[k]) if k < logits.numel() else float("inf")


def _sampled(ctx, **kwargs):
    """N_SAMPLES draws of one next token after one prompt, as frequencies over the vocabulary; and the
    probabilities softmax(logits / temperature) restricted to the top k, computed here from the model."""
    model, k = _ToyLM(), kwargs.get("top_k")
    for _attempt in range(20):  # a prompt whose logits have no tie at the k-th value (the spec leaves ties open)
        prompt = _prompt(ctx, 1, 5)
        with torch.no_grad():
            logits = model(prompt)[0][0, -1].double() / kwargs["temperature"]  # (V,)
        if not k or _gap_at_k(logits, k) > 1e-3:
            break
    if k and _gap_at_k(logits, k) <= 1e-3:
        raise RuntimeError(f"the grader found no prompt without a tie at the {k}-th logit")
    idx = prompt.expand(N_SAMPLES, -1).contiguous()
    out = ctx.call(ctx.target, model, idx, 1, use_cache=False, generator=torch.Generator().manual_seed(ctx.seed),
                   **kwargs)
    again = [ctx.call(ctx.target, model, idx[:64], 3, use_cache=False,
                      generator=torch.Generator().manual_seed(ctx.seed), **kwargs) for _ in range(2)]
    if not isinstance(out, torch.Tensor) or out.shape != (N_SAMPLES, 6):
        raise WrongResult(f"generate should return ({N_SAMPLES}, 6) token ids for a ({N_SAMPLES}, 5) prompt and one "
                          f"new token, got {out.shape if isinstance(out, torch.Tensor) else type(out).__name__}")
    if k:
        kth = torch.topk(logits, k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return {"frequencies": torch.bincount(out[:, -1].long(), minlength=model.config.vocab_size).double() / N_SAMPLES,
            "expected probabilities": torch.softmax(logits, dim=-1),
            "same generator seed, same tokens": bool(isinstance(again[0], torch.Tensor) and torch.equal(*again))}


def _distribution_judge(what):
    def judge(s, r, ctx):
        freq, p = s["frequencies"], r["expected probabilities"]
        outside = (freq > 0) & (p == 0)
        if outside.any():
            ranks = (p > 0).sum().item()
            return (f"{what}: {outside.sum().item()} token(s) outside the {ranks} most likely were sampled "
                    f"(with probability {freq[outside].sum().item():.3f} in all): top-k must keep exactly k")
        tv = 0.5 * (freq - p).abs().sum().item()
        if tv > 0.04:
            return (f"{what}: the sampled frequencies are far from softmax(logits / temperature) — total variation "
                    f"distance {tv:.3f} over {N_SAMPLES:,} draws (the reference's is below 0.02). Divide the logits by "
                    f"the temperature before the softmax, and sample with torch.multinomial")
        if not s["same generator seed, same tokens"]:
            return f"{what}: two runs with equally seeded generators drew different tokens: pass `generator` to torch.multinomial"
        return None
    return judge


@CHECKS.probe("generate", "temperature=0.6 samples from softmax(logits / 0.6)",
              _distribution_judge("temperature=0.6"), CPU,
              rule="**Temperature** τ: sample from softmax(z / τ)")
def gen_temperature(ctx):
    return _sampled(ctx, temperature=0.6)


@CHECKS.probe("generate", "top_k=4 keeps exactly the 4 most likely tokens", _distribution_judge("top_k=4"), CPU,
              rule="keep the `k` largest logits, set the rest to −∞, then softmax and sample: exactly `k` candidates")
def gen_top_k(ctx):
    return _sampled(ctx, temperature=1.3, top_k=4)


_bad_args_judge = raises_value_error(("temperature=-1", "generate(..., temperature=-1)", "temperature"),
                                     ("top_k=0", "generate(..., top_k=0)", "top_k"))


@CHECKS.probe("generate", "ValueError for a negative temperature or top_k < 1", _bad_args_judge, CPU, hidden=True,
              rule="Raise `ValueError`, its message naming the argument, for a negative temperature or `top_k < 1`")
def gen_bad_args(ctx):
    model, idx = _ToyLM(), _prompt(ctx, 1, 3)
    return {"temperature=-1": ctx.raised(ctx.target, model, idx, 2, temperature=-1.0),
            "top_k=0": ctx.raised(ctx.target, model, idx, 2, top_k=0)}


class _RecordingLM(_ToyLM):
    """The grader's language model, noting the mode of every forward generate runs."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.modes: list[bool] = []

    def forward(self, idx, targets=None, cache=None):
        self.modes.append(self.training)
        return super().forward(idx, targets, cache)


def _within_top_k(model: _ToyLM, out: torch.Tensor, T: int, k: int) -> bool:
    """Was every new token of `out` (after the prompt's T) among the k largest logits of the model at its step,
    its context cropped to block_size? A token tied with the k-th largest counts as among them (either way of
    breaking a tie at the k-th value is allowed), within float32 rounding of the cached and uncached paths."""
    bs, mode = model.config.block_size, model.training
    model.eval()
    try:
        with torch.no_grad():
            for j in range(T, out.shape[1]):
                logits = _ToyLM.forward(model, out[:, :j][:, -bs:])[0][:, -1]  # (B, V)
                kth = torch.topk(logits, min(k, logits.shape[-1]), dim=-1).values[:, -1:]  # (B, 1)
                if not bool((logits.gather(1, out[:, j:j + 1].long()) >= kth - 1e-4).all()):
                    return False
    finally:
        model.train(mode)
    return True


_GEN_HINTS = {
    "tokens": " (greedy, temperature=0 or top_k=1: the argmax of the last position's logits at every step; with the "
              "cache, once len(cache) reaches block_size start a fresh cache from the cropped sequence)",
    "model in training mode afterwards": " (generate puts the model in eval mode and, at the end, back in the "
                                         "mode it was handed in)",
    "every forward in eval mode": " (dropout must be off while generating: model.eval() before the first forward)",
    "each new token is among the top_k at its step": " (top-k keeps the k largest logits; the k-th largest is "
                                                     "at index k − 1 of a descending sort)",
    "same seed, same tokens": " (pass `generator` to torch.multinomial)",
}

# The declared domain of generate: every argument (temperature 0 = greedy, below and above 1; top_k None, 1,
# 4 and the whole vocabulary; max_new_tokens 0, 1 and enough to run past block_size, with the cache and
# without; a seeded generator or None), prompts of one token and of exactly block_size, a batch of 1, a prompt
# of int64 or int32 ids (the result keeps the prompt's dtype) in any layout, the arguments by keyword or in the
# signature's order, models of another block_size and vocabulary, a model handed over in training mode, and a
# call after another call (another prompt, another model: nothing kept between calls). Sampled tokens are
# compared through what is deterministic: greedy tokens, top-k membership at every step (ties at the k-th
# value accepted either way), the prompt kept, reproducibility under a seeded generator, the mode.
GEN_DOMAIN = Domain(
    args=(Arg("temperature", (1.0, 0.0, 0.6, 2.0)), Arg("top_k", (None, 1, 4, "V")), Arg("max_new_tokens", (4, 0, 1, 20)),
          Arg("use_cache", (True, False)), Arg("T", (5, 1, "block_size")), Arg("B", (2, 1)),
          Arg("generator", ("seeded", None)),
          Arg("model.config.block_size, model vocabulary", ("16, 41", "6, 41", "16, 5")),
          Arg("model mode", ("eval", "train")),
          Arg("calls", ("one", "after a call with another prompt", "after a call on another model")), PASSED),
    dtypes=(("idx", ("int64", "int32")),), layouts=(("idx", ("contiguous", "transposed", "strided")),), examples=6)


@CHECKS.domain("generate", GEN_DOMAIN, _observed_like(_GEN_HINTS))
def gen_domain(ctx, ex):
    _own_draws(ctx, ex)
    bs, V = (int(n) for n in ex["model.config.block_size, model vocabulary"].split(", "))
    B, n, temperature = ex["B"], ex["max_new_tokens"], ex["temperature"]
    k = V if ex["top_k"] == "V" else ex["top_k"]
    model = _RecordingLM(vocab_size=V, block_size=bs).to(ctx.device).train(ex["model mode"] == "train")
    T = bs if ex["T"] == "block_size" else min(ex["T"], bs)
    idx = relaid(_prompt(ctx, B, T, vocab=V).to(getattr(torch, ex["dtype of idx"])), ex["layout of idx"])

    def kwargs():
        gen = torch.Generator().manual_seed(ctx.seed) if ex["generator"] else None
        return dict(temperature=temperature, top_k=k, use_cache=ex["use_cache"], generator=gen)

    if ex["calls"] == "after a call with another prompt":
        ctx.call(ctx.target, model, _prompt(ctx, 1, min(3, bs), vocab=V), 2, **kwargs())
    elif ex["calls"] == "after a call on another model":
        ctx.call(ctx.target, _RecordingLM(vocab_size=V, block_size=4, seed=9), _prompt(ctx, 3, 2, vocab=V), 3,
                 **kwargs())
    model.train(ex["model mode"] == "train")
    model.modes.clear()
    args, kw = arguments(("temperature", "top_k", "use_cache", "generator"), kwargs(), {}, ex["passed"])
    out = ctx.call(ctx.target, model, idx, n, *args, **kw)
    obs = {"model in training mode afterwards": model.training, "every forward in eval mode": not any(model.modes)}
    if not isinstance(out, torch.Tensor) or out.shape != (B, T + n):
        return {**obs, "shape of the result": list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__}
    obs.update({"shape of the result": list(out.shape), "starts with the prompt": torch.equal(out[:, :T], idx),
                "dtype of the result": str(out.dtype).removeprefix("torch.")})
    if temperature == 0 or k == 1:
        obs["tokens"] = out
        return obs
    obs["new tokens are ids in [0, V)"] = bool(((out[:, T:] >= 0) & (out[:, T:] < V)).all())
    if k:
        obs["each new token is among the top_k at its step"] = _within_top_k(model, out, T, k)
    if ex["generator"]:
        args, kw = arguments(("temperature", "top_k", "use_cache", "generator"), kwargs(), {}, ex["passed"])
        again = ctx.call(ctx.target, model, idx, n, *args, **kw)
        obs["same seed, same tokens"] = isinstance(again, torch.Tensor) and torch.equal(again, out)
    return obs


# ----------------------------------------------------------------------------------------------
# load_gpt2_state_dict: a synthetic checkpoint in Hugging Face's GPT-2 layout, loaded into a skeleton of
# the course's parameter names built from torch's modules (so your GPT does not matter here)


class _Attn(nn.Module):
    def __init__(self, D):
        super().__init__()
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(D, D) for _ in range(4))


class _Mlp(nn.Module):
    def __init__(self, D):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)


class _Block(nn.Module):
    def __init__(self, D):
        super().__init__()
        self.ln1, self.attn, self.ln2, self.mlp = nn.LayerNorm(D), _Attn(D), nn.LayerNorm(D), _Mlp(D)


class _Skeleton(nn.Module):
    """The course's GPT parameter layout, every parameter zero, head tied."""

    def __init__(self, cfg: _Config):
        super().__init__()
        self.config = cfg
        self.wte, self.wpe = nn.Embedding(cfg.vocab_size, cfg.n_embd), nn.Embedding(cfg.block_size, cfg.n_embd)
        self.blocks = nn.ModuleList(_Block(cfg.n_embd) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.wte.weight = self.lm_head.weight  # tied from the embedding's side: one Parameter, listed as wte.weight
        with torch.no_grad():
            for p in self.parameters():
                p.zero_()


def _hf_checkpoint(cfg: _Config, seed: int) -> dict:
    """Seeded tensors under GPT2LMHeadModel's keys and shapes (Conv1D weights stored (in, out))."""
    g = torch.Generator().manual_seed(seed)
    D, V = cfg.n_embd, cfg.vocab_size
    r = lambda *shape: torch.randn(*shape, generator=g)  # noqa: E731
    sd = {"transformer.wte.weight": r(V, D), "transformer.wpe.weight": r(cfg.block_size, D)}
    for i in range(cfg.n_layer):
        h = f"transformer.h.{i}."
        sd.update({h + "ln_1.weight": 1 + 0.1 * r(D), h + "ln_1.bias": r(D),
                   h + "attn.c_attn.weight": r(D, 3 * D), h + "attn.c_attn.bias": r(3 * D),
                   h + "attn.c_proj.weight": r(D, D), h + "attn.c_proj.bias": r(D),
                   h + "ln_2.weight": 1 + 0.1 * r(D), h + "ln_2.bias": r(D),
                   h + "mlp.c_fc.weight": r(D, 4 * D), h + "mlp.c_fc.bias": r(4 * D),
                   h + "mlp.c_proj.weight": r(4 * D, D), h + "mlp.c_proj.bias": r(D)})
    sd.update({"transformer.ln_f.weight": 1 + 0.1 * r(D), "transformer.ln_f.bias": r(D)})
    sd["lm_head.weight"] = sd["transformer.wte.weight"]
    return sd


LOAD = dict(vocab_size=67, block_size=16, n_layer=2, n_head=4, n_embd=32)


@CHECKS.probe("load_gpt2_state_dict", "every weight lands in place: Conv1D weights transposed, c_attn split into q, k, v",
              same(), CPU,
              rule="Copy every weight of `state_dict` (the keys above) into `model` in place, converted to our "
                   "layout")
def load_values(ctx):
    cfg = _Config(**LOAD)
    model = _Skeleton(cfg)
    ctx.call(ctx.target, model, _hf_checkpoint(cfg, ctx.seed))
    return dict(model.named_parameters())


def _tie_kept_judge(s, r, ctx):
    if not s["lm_head.weight is wte.weight"]:
        return ("after loading, lm_head.weight is no longer the Parameter wte.weight: copy into the existing "
                "parameters (param.copy_ under torch.no_grad()) instead of assigning new ones")
    return same("lm_head.weight")(s, r, ctx)


@CHECKS.probe("load_gpt2_state_dict", "the head stays tied to wte after loading", _tie_kept_judge, CPU,
              rule="the tie must survive: copy *into* the existing parameters")
def load_tied(ctx):
    cfg = _Config(**LOAD)
    model = _Skeleton(cfg)
    ctx.call(ctx.target, model, _hf_checkpoint(cfg, ctx.seed))
    return {"lm_head.weight is wte.weight": model.lm_head.weight is model.wte.weight,
            "lm_head.weight": model.lm_head.weight}


@CHECKS.probe("load_gpt2_state_dict", "skips the attn.bias / attn.masked_bias buffers of older checkpoints",
              same(), CPU, hidden=True,
              rule="the causal mask stored as a buffer, not weights. Skip them")
def load_buffers(ctx):
    cfg = _Config(**{**LOAD, "n_layer": 1})
    sd = _hf_checkpoint(cfg, ctx.seed)
    sd["transformer.h.0.attn.bias"] = torch.ones(1, 1, cfg.block_size, cfg.block_size).tril()
    sd["transformer.h.0.attn.masked_bias"] = torch.tensor(-1e4)
    model = _Skeleton(cfg)
    ctx.call(ctx.target, model, sd)
    return {"blocks.0.attn.q_proj.weight": model.blocks[0].attn.q_proj.weight, "ln_f.bias": model.ln_f.bias}


_LOAD_HINTS = {"lm_head.weight is wte.weight": " (copy into the existing parameters, param.copy_ under "
                                                "torch.no_grad(), so the head stays tied)"}


# The declared domain of load_gpt2_state_dict: checkpoints of other sizes (one layer and three, one head of 8
# and heads of a width of 48, a vocabulary of 1 and of 300, block_size 1 and 64), with the old attn.bias
# buffers or without, its tensors in float32, float64 or float16 and in any layout (a real checkpoint's
# tensors may be views), into a float32 or a float64 model: every parameter lands in place in the model's
# own dtype, and the head stays tied.
LOAD_DOMAIN = Domain(
    args=(Arg("model.config.n_layer", (2, 1, 3)), Arg("model.config.n_embd", (32, 8, 48)),
          Arg("model.config.vocab_size", (67, 1, 300)), Arg("model.config.block_size", (16, 1, 64)),
          Arg("buffers in the checkpoint", ("none", "attn.bias and attn.masked_bias")),
          Arg("model dtype", ("float32", "float64"))),
    dtypes=(("state_dict", ("float32", "float64", "float16")),),
    layouts=(("state_dict", ("contiguous", "transposed", "strided")),), examples=4)


@CHECKS.domain("load_gpt2_state_dict", LOAD_DOMAIN, _observed_like(_LOAD_HINTS, scale=1.0))
def load_domain(ctx, ex):
    _own_draws(ctx, ex)
    cfg = _Config(vocab_size=ex["model.config.vocab_size"], block_size=ex["model.config.block_size"],
                  n_layer=ex["model.config.n_layer"], n_head=4, n_embd=ex["model.config.n_embd"])
    dtype = getattr(torch, ex["dtype of state_dict"])
    sd = {key: relaid(t.to(dtype), ex["layout of state_dict"]) for key, t in _hf_checkpoint(cfg, ctx.seed).items()}
    sd["lm_head.weight"] = sd["transformer.wte.weight"]
    if ex["buffers in the checkpoint"] != "none":
        for i in range(cfg.n_layer):
            sd[f"transformer.h.{i}.attn.bias"] = torch.ones(1, 1, cfg.block_size, cfg.block_size).tril()
            sd[f"transformer.h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    model = _Skeleton(cfg).to(getattr(torch, ex["model dtype"]))
    ctx.call(ctx.target, model, sd)
    return {**{name: p.detach().clone() for name, p in model.named_parameters()},
            "lm_head.weight is wte.weight": model.lm_head.weight is model.wte.weight}


_wrong_size_judge = raises_value_error(
    ("a checkpoint with n_embd=40 into n_embd=32", "loading a checkpoint with n_embd=40 into a model with n_embd=32"),
    ("a checkpoint without transformer.ln_f.bias", "loading a checkpoint without transformer.ln_f.bias", "ln_f"))


@CHECKS.probe("load_gpt2_state_dict", "ValueError for a checkpoint of another size or with a key missing",
              _wrong_size_judge, CPU, hidden=True,
              rule="Raise a `ValueError` naming the key when a tensor's shape does not fit the model")
def load_wrong(ctx):
    cfg = _Config(**LOAD)
    other = _hf_checkpoint(_Config(**{**LOAD, "n_embd": 40}), ctx.seed)
    missing = _hf_checkpoint(cfg, ctx.seed)
    del missing["transformer.ln_f.bias"]
    return {"a checkpoint with n_embd=40 into n_embd=32": ctx.raised(ctx.target, _Skeleton(cfg), other),
            "a checkpoint without transformer.ln_f.bias": ctx.raised(ctx.target, _Skeleton(cfg), missing)}


# ----------------------------------------------------------------------------------------------
# Known mistakes. Each is run on the same probes as the reference; a student whose observations match
# one is told which. GPT's are edits of the solved cell (`edits={old: new}`); the others are whole
# functions, written as a student would, that use the notebook's names (KVCache).


def count__tied_counted_twice(model):
    total = 0
    for module in model.modules():
        total += sum(p.numel() for p in module.parameters(recurse=False))
    return total


def load__square_weights_not_transposed(model, state_dict):
    sd = {k.removeprefix("transformer."): v for k, v in state_dict.items()}
    D = model.config.n_embd
    params = dict(model.named_parameters())

    def put(name, tensor):
        if tensor.shape != params[name].shape:
            tensor = tensor.t()  # transpose when the shapes say so
        params[name].data.copy_(tensor)

    put("wte.weight", sd["wte.weight"])
    put("wpe.weight", sd["wpe.weight"])
    put("ln_f.weight", sd["ln_f.weight"])
    put("ln_f.bias", sd["ln_f.bias"])
    for i in range(model.config.n_layer):
        h, b = f"h.{i}.", f"blocks.{i}."
        put(b + "ln1.weight", sd[h + "ln_1.weight"])
        put(b + "ln1.bias", sd[h + "ln_1.bias"])
        put(b + "ln2.weight", sd[h + "ln_2.weight"])
        put(b + "ln2.bias", sd[h + "ln_2.bias"])
        q, k, v = sd[h + "attn.c_attn.weight"].split(D, dim=1)
        qb, kb, vb = sd[h + "attn.c_attn.bias"].split(D)
        for name, w, bias in (("q_proj", q, qb), ("k_proj", k, kb), ("v_proj", v, vb)):
            put(b + f"attn.{name}.weight", w)
            put(b + f"attn.{name}.bias", bias)
        put(b + "attn.out_proj.weight", sd[h + "attn.c_proj.weight"])
        put(b + "attn.out_proj.bias", sd[h + "attn.c_proj.bias"])
        put(b + "mlp.fc1.weight", sd[h + "mlp.c_fc.weight"])
        put(b + "mlp.fc1.bias", sd[h + "mlp.c_fc.bias"])
        put(b + "mlp.fc2.weight", sd[h + "mlp.c_proj.weight"])
        put(b + "mlp.fc2.bias", sd[h + "mlp.c_proj.bias"])


def count__buffers_counted(model):
    tensors = {id(t): t for t in [*model.parameters(), *model.buffers()]}  # every tensor of the model, once
    return sum(t.numel() for t in tensors.values())


MISTAKES = (
    Mistake("GPTConfig", "n_layer_zero_accepted", "n_layer=0 is accepted: a GPT needs at least one block, so "
            "n_layer must be positive (≥ 1), like the other sizes, and 0 raises ValueError naming n_layer.",
            edits={'for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):':
                   'for name in ("vocab_size", "block_size", "n_head", "n_embd"):',
                   "        if self.n_embd % self.n_head:":
                   "        if self.n_layer < 0:\n"
                   "            raise ValueError(f\"n_layer must not be negative, got {self.n_layer}\")\n"
                   "        if self.n_embd % self.n_head:"},
            hint="Which config sizes must be at least 1? Try building a config with zero blocks."),
    Mistake("GPT", "embedding_dropout_in_eval", "F.dropout(x, p) defaults to training=True, so the embeddings are "
            "dropped in eval mode too: use the nn.Dropout module self.drop (or pass training=self.training).",
            edits={"x = self.drop(self.wte(idx) + self.wpe(pos))":
                   "x = F.dropout(self.wte(idx) + self.wpe(pos), self.config.dropout)"},
            hint="Put the model in eval mode, run the same tokens twice and compare the logits: does dropout "
                 "still act?"),
    Mistake("GPT", "head_copied", "the head is a copy of the token embedding, not tied to it: a second "
            "vocab_size × n_embd matrix that drifts apart in training. Assign the Parameter "
            "`wte.weight` itself to `lm_head.weight`.", edits={
                "        self.lm_head.weight = self.wte.weight  # tied: the same Parameter, not a copy\n": "",
                "            nn.init.normal_(block.mlp.fc2.weight, mean=0.0, std=0.02 / math.sqrt(2 * L))\n":
                "            nn.init.normal_(block.mlp.fc2.weight, mean=0.0, std=0.02 / math.sqrt(2 * L))\n"
                "        self.lm_head.weight = nn.Parameter(self.wte.weight.detach().clone())  # the same values, for now\n",
            },
            hint="After building the model, change one entry of the token embedding and print the head's "
                 "weight: does it change too?"),
    Mistake("GPT", "no_causal_mask", "the attention has no causal mask, so every position sees the tokens it should "
            "predict: pass lesson 02's bottom-right causal mask (True = may attend) as attn_mask.",
            edits={"attn_mask=causal,": "attn_mask=None,"},
            hint="Change the tokens from some position on and check whether the logits at earlier positions "
                 "move."),
    Mistake("GPT", "no_position_embeddings", "the position embeddings never reach the model: add "
            "`self.wpe(positions)` to the token embeddings, or attention cannot tell the order of the tokens.",
            edits={"x = self.drop(self.wte(idx) + self.wpe(pos))": "x = self.drop(self.wte(idx))"},
            hint="Feed the same tokens in two different orders: can your model tell them apart? Follow the "
                 "position embeddings through your forward."),
    Mistake("GPT", "residual_init_not_scaled", "the residual projections (attn.out_proj and mlp.fc2) keep std "
            "0.02: scale it by 1/√(2·n_layer), so the residual stream does not grow with depth at initialisation.",
            edits={"        for block in self.blocks:  # the two projections that add into the residual stream\n"
                   "            nn.init.normal_(block.attn.out_proj.weight, mean=0.0, std=0.02 / math.sqrt(2 * L))\n"
                   "            nn.init.normal_(block.mlp.fc2.weight, mean=0.0, std=0.02 / math.sqrt(2 * L))\n": ""},
            hint="Print the standard deviation of each projection's weight right after construction: which "
                 "ones should be smaller, and by how much?"),
    Mistake("GPT", "cache_positions_from_zero", "with a cache, the new tokens' positions restart at 0: they must "
            "continue from len(cache), i.e. torch.arange(len(cache), len(cache) + T).",
            edits={"pos = torch.arange(start, start + T, device=idx.device)": "pos = torch.arange(T, device=idx.device)"},
            hint="Feed a sequence through the cache in two pieces and print the positions each piece is "
                 "embedded at: where should the second piece start?"),
    Mistake("count_parameters", "tied_counted_twice", "a tied weight is counted once for every module that holds it: "
            "sum over model.parameters(), which yields each shared Parameter once.", count__tied_counted_twice,
            hint="Build a model whose head is tied to its embedding and count: is the shared matrix counted "
                 "once or twice?"),
    Mistake("generate", "cache_never_rebuilt", "with the cache, generation runs past block_size: once len(cache) + "
            "the new tokens would pass block_size, start a fresh KVCache from the last block_size tokens.",
            edits={"            if len(cache) + new.shape[1] > block_size:  # full: positions are baked into the cached "
                   "keys\n                cache, new = KVCache(), out[:, -block_size:]\n": ""},
            hint="Generate more tokens than block_size with the cache on, and print the cache's length at each "
                 "step: what happens when it reaches the limit?"),
    Mistake("generate", "mode_not_restored", "generate leaves the model in eval mode: note whether it was training "
            "before model.eval() and put it back in that mode at the end.",
            edits={"    model.train(was_training)\n": ""},
            hint="Put the model in training mode, call generate, and print model.training afterwards: is the "
                 "mode what it was before?"),
    Mistake("generate", "temperature_after_softmax", "the temperature divides the probabilities after the softmax, "
            "where renormalising cancels it: divide the logits by the temperature before the softmax.",
            edits={"            logits = logits / temperature  # before the softmax\n": "",
                   "probs = torch.softmax(logits, dim=-1)": "probs = torch.softmax(logits, dim=-1) / temperature"},
            hint="Sample with temperature 0.5 and with 2.0 and compare the frequencies: does the temperature "
                 "change anything? Where is it applied?"),
    Mistake("generate", "top_k_keeps_k_plus_1", "top-k lets k + 1 tokens through: in a descending sort the k-th "
            "largest logit is at index k − 1 (or use torch.topk(logits, k).values[:, -1:]).",
            edits={"kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]  # (B, 1)":
                   "kth = logits.sort(dim=-1, descending=True).values[:, [top_k]]  # (B, 1)"},
            hint="With top_k = 4, count how many tokens can still be sampled: is the threshold the k-th "
                 "largest logit?"),
    Mistake("count_parameters", "buffers_counted", "buffers (a registered mask, running statistics) are counted "
            "as parameters: sum over model.parameters() only.", count__buffers_counted,
            hint="Register a buffer on a small model and count again: should it change the count?"),
    Mistake("load_gpt2_state_dict", "data_assigned", "param.data = tensor puts the checkpoint's own tensor in the "
            "model, in its dtype (a float64 checkpoint makes a float64 model); copy into the parameter instead, "
            "param.copy_(tensor) under torch.no_grad(), which keeps the model's dtype.",
            edits={"param.copy_(ours[name])": "param.data = ours[name]"},
            hint="Load a float64 checkpoint into a float32 model and print the parameters' dtype: is the "
                 "checkpoint's tensor copied in or put in place?"),
    Mistake("load_gpt2_state_dict", "square_weights_not_transposed", "only the weights whose shapes differ are "
            "transposed; Conv1D stores every weight as (in, out), so the square ones (attn.c_proj and the q, k, v "
            "blocks of c_attn) need .t() too.", load__square_weights_not_transposed,
            hint="Which of the checkpoint's weights are stored (in, out)? Check whether your loader treats the "
                 "square ones like the others."),
)


# ----------------------------------------------------------------------------------------------
# `course bench lesson08`: a training step of your GPT against the same model built from torch's modules


class TorchGPT(nn.Module):
    """GPT-2's architecture from torch's own modules: nn.TransformerEncoderLayer (pre-LN, tanh GELU, causal);
    the tied head is F.linear with the token embedding's weight."""

    def __init__(self, cfg):
        super().__init__()
        D = cfg.n_embd
        self.wte, self.wpe = nn.Embedding(cfg.vocab_size, D), nn.Embedding(cfg.block_size, D)
        layer = nn.TransformerEncoderLayer(D, cfg.n_head, 4 * D, dropout=cfg.dropout, batch_first=True,
                                           norm_first=True, activation=nn.GELU(approximate="tanh"), bias=cfg.bias)
        self.stack = nn.TransformerEncoder(layer, cfg.n_layer, enable_nested_tensor=False)
        self.ln_f = nn.LayerNorm(D, bias=cfg.bias)

    def forward(self, idx, targets=None):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        mask = nn.Transformer.generate_square_subsequent_mask(T, device=idx.device)
        x = self.stack(x, mask=mask, is_causal=True)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # the head, tied: (B, T, D) @ (V, D)^T
        loss = None if targets is None else F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        return logits, loss


BENCH_CONFIGS = ({"vocab_size": 65, "block_size": 128, "n_layer": 4, "n_head": 4, "n_embd": 128, "batch": 16},
                 {"vocab_size": 512, "block_size": 256, "n_layer": 6, "n_head": 6, "n_embd": 384, "batch": 8})


def benchmark(ns: dict, device: str, configs=BENCH_CONFIGS, repeats: int = 7) -> dict:
    """Median time of one AdamW training step (forward, backward, step) of your GPT and of TorchGPT of the
    same size, measured in the same run."""
    def build(c):
        cfg = _Config(**c)
        return ns["GPT"](cfg), TorchGPT(cfg)

    rows = training_steps(configs, build,
                          lambda c, b: f"L={c['n_layer']} D={c['n_embd']} T={c['block_size']} B={b}", device, repeats)
    return {"title": f"GPT training step on {device}: yours against nn.TransformerEncoderLayer",
            "columns": TRAINING_COLUMNS, "rows": rows, "notes": [TRAINING_NOTE]}


# The input battery: KVCache takes tensors and gets every entry; the others take none the battery could
# change (their probes would draw no floating input, and generate's would still spend ~3 s finding that out).
CHECKS.add_battery(skip={
    "GPTConfig": "takes numbers, no tensor",
    "GPT": "its input is integer token ids; its parameters are set by name by the grader, in float32",
    "count_parameters": "takes a module, not a tensor: it counts, it does not compute on values",
    "generate": "its prompt is integer token ids, and the model is the grader's",
    "load_gpt2_state_dict": "takes a checkpoint the grader builds (a dict of float32 weights), not a drawn input",
})
