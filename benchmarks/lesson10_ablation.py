"""Lesson 10's ablation: from lesson 08's GPT to a Llama-style decoder, one change at a time.

    python benchmarks/lesson10_ablation.py                 # the stored run: docs/data/lesson10_ablation.json
    python benchmarks/lesson10_ablation.py --small         # the notebook's version: seed 0 only, no sweep

Seven models, each the one before with one change: learned positions -> RoPE, LayerNorm -> RMSNorm,
GELU MLP -> SwiGLU, biases -> none, 4 KV heads -> 2 (GQA), tied -> untied head. Every model has the same
number of weights in its matrix products (N_mm, the head included), so the same training FLOPs per token
(6·N_mm + the attention term, the same for all), within 1 %: where a change removes weights (GQA, the biases)
or adds a third MLP matrix (SwiGLU), the MLP's hidden width is chosen to give them back. The embedding tables
(the learned position table, an untied head's second table) are lookups, not products, and are reported apart.

Every model trains on the same real text (Python's documentation, `graders/corpus.py`, character by character),
on the same batches, with the same optimiser and schedule, for three seeds (the seed draws the initial
weights). The two endpoints, the GPT and the Llama, also get a small learning-rate sweep, so that the gap is
not an artefact of one learning rate that suits one of them. The model here is written with torch's own parts
(F.layer_norm, F.rms_norm, F.scaled_dot_product_attention) so that one class covers all seven; lesson 10's
notebook shows the stored table and runs the small version with this file's `run`.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "data" / "lesson10_ablation.json"


@dataclass(frozen=True)
class Arch:
    """What differs between lesson 08's GPT and the Llama-style decoder."""

    rope: bool = False  # RoPE (half-split) on q and k instead of a learned position table
    rms: bool = False  # RMSNorm instead of LayerNorm
    swiglu: bool = False  # SwiGLU MLP instead of fc2(gelu(fc1 x))
    bias: bool = True  # biases in every Linear and LayerNorm
    n_kv_head: int = 4  # grouped-query attention when below n_head
    tied: bool = True  # head tied to the token embedding


LADDER = [("GPT (lesson 08)", Arch())]
for _label, _change in (("+ RoPE", dict(rope=True)), ("+ RMSNorm", dict(rms=True)), ("+ SwiGLU", dict(swiglu=True)),
                        ("+ no biases", dict(bias=False)), ("+ GQA (2 KV heads)", dict(n_kv_head=2)),
                        ("+ untied head = Llama", dict(tied=False))):
    LADDER.append((_label, replace(LADDER[-1][1], **_change)))


@dataclass(frozen=True)
class Size:
    vocab: int
    block: int = 64
    n_layer: int = 4
    n_head: int = 4
    d: int = 64


def rope_half(x: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """x (B, H, T, Dh) rotated in half-split pairs (x[i], x[i + Dh/2]) at positions 0..T-1."""
    T, Dh = x.shape[-2], x.shape[-1]
    inv = base ** (-torch.arange(0, Dh, 2, dtype=torch.float32) / Dh)  # (Dh/2,)
    ang = torch.arange(T, dtype=torch.float32)[:, None] * inv  # (T, Dh/2)
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    a, b = x[..., : Dh // 2], x[..., Dh // 2:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


class Norm(nn.Module):
    def __init__(self, d: int, arch: Arch):
        super().__init__()
        self.rms = arch.rms
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d)) if (arch.bias and not arch.rms) else None

    def forward(self, x):
        if self.rms:
            return F.rms_norm(x, x.shape[-1:], self.weight, eps=1e-5)
        return F.layer_norm(x, x.shape[-1:], self.weight, self.bias, eps=1e-5)


class Block(nn.Module):
    def __init__(self, s: Size, arch: Arch, hidden: int):
        super().__init__()
        self.arch, self.s = arch, s
        dh = s.d // s.n_head
        self.ln1, self.ln2 = Norm(s.d, arch), Norm(s.d, arch)
        self.q = nn.Linear(s.d, s.d, bias=arch.bias)
        self.kv = nn.Linear(s.d, 2 * arch.n_kv_head * dh, bias=arch.bias)
        self.out = nn.Linear(s.d, s.d, bias=arch.bias)
        self.up = nn.Linear(s.d, (2 if arch.swiglu else 1) * hidden, bias=arch.bias)  # SwiGLU: gate and up in one
        self.down = nn.Linear(hidden, s.d, bias=arch.bias)

    def forward(self, x):
        B, T, D = x.shape
        H, Hkv, dh = self.s.n_head, self.arch.n_kv_head, D // self.s.n_head
        h = self.ln1(x)
        q = self.q(h).view(B, T, H, dh).transpose(1, 2)
        k, v = self.kv(h).view(B, T, 2, Hkv, dh).permute(2, 0, 3, 1, 4)
        if self.arch.rope:
            q, k = rope_half(q), rope_half(k)
        k, v = k.repeat_interleave(H // Hkv, dim=1), v.repeat_interleave(H // Hkv, dim=1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(a.transpose(1, 2).reshape(B, T, D))
        u = self.up(self.ln2(x))
        if self.arch.swiglu:
            gate, up = u.chunk(2, dim=-1)
            u = F.silu(gate) * up
        else:
            u = F.gelu(u, approximate="tanh")
        return x + self.down(u)


def mlp_hidden(s: Size, arch: Arch) -> int:
    """The MLP width that gives this model the GPT's matrix weights per block (4·D² attention + 8·D² MLP)."""
    dh = s.d // s.n_head
    target = 12 * s.d * s.d
    attn = 2 * s.d * s.d + 2 * s.d * arch.n_kv_head * dh
    return round((target - attn) / ((3 if arch.swiglu else 2) * s.d))


class Model(nn.Module):
    def __init__(self, s: Size, arch: Arch):
        super().__init__()
        self.s, self.arch = s, arch
        self.wte = nn.Embedding(s.vocab, s.d)
        self.wpe = None if arch.rope else nn.Embedding(s.block, s.d)
        self.blocks = nn.ModuleList(Block(s, arch, mlp_hidden(s, arch)) for _ in range(s.n_layer))
        self.ln_f = Norm(s.d, arch)
        self.head = nn.Linear(s.d, s.vocab, bias=False)
        if arch.tied:
            self.head.weight = self.wte.weight
        for m in self.modules():  # lesson 08's init: N(0, 0.02), biases 0, residual projections scaled
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)
        for b in self.blocks:
            for p in (b.out.weight, b.down.weight):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * s.n_layer))

    def forward(self, idx, targets):
        x = self.wte(idx)
        if self.wpe is not None:
            x = x + self.wpe.weight[: idx.shape[1]]
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())

    def counts(self) -> dict:
        """Parameters (shared ones once), the matrix-product weights N_mm, and training FLOPs per token."""
        params = sum(p.numel() for p in self.parameters())
        n_mm = sum(m.weight.numel() for m in self.modules() if isinstance(m, nn.Linear))
        attn = 12 * self.s.n_layer * self.s.d * self.s.block  # PaLM's attention term, the same for every model
        return {"params": params, "n_mm": n_mm, "flops_per_token": 6 * n_mm + attn}


def data(block: int):
    import sys

    sys.path.insert(0, str(ROOT))  # run from a checkout, installed or not
    from graders.corpus import load_text, split

    text = load_text()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    train, val = split(text, 0.9)
    enc = lambda t: torch.tensor([stoi[c] for c in t])
    return len(chars), enc(train), enc(val)


def batch(d, gen, bsz, block):
    starts = torch.randint(len(d) - block - 1, (bsz,), generator=gen)
    return torch.stack([d[s:s + block] for s in starts]), torch.stack([d[s + 1:s + 1 + block] for s in starts])


def train_one(arch: Arch, s: Size, train, val, seed: int, lr: float, steps: int, bsz: int = 16) -> float:
    """The validation loss (the mean over 8 fixed held-out batches) after `steps` steps."""
    torch.manual_seed(seed)
    model = Model(s, arch)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    warm = max(1, steps // 10)
    gen = torch.Generator().manual_seed(0)  # the same batches for every model and seed
    for step in range(steps):
        frac = min(1.0, (step + 1) / warm) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / steps)))
        for g in opt.param_groups:
            g["lr"] = lr * frac
        loss = model(*batch(train, gen, bsz, s.block))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    model.eval()
    vgen = torch.Generator().manual_seed(1234)
    with torch.no_grad():
        return sum(model(*batch(val, vgen, bsz, s.block)).item() for _ in range(8)) / 8


def run(steps=250, seeds=(0, 1, 2), lr=3e-3, sweep=(1e-3, 3e-3, 1e-2), d=64, n_layer=4, ladder=LADDER,
        log=print) -> dict:
    """Train every rung of `ladder` for each seed, then the endpoints at each learning rate of `sweep`."""
    t0 = time.perf_counter()
    vocab, train, val = data(64)
    s = Size(vocab=vocab, d=d, n_layer=n_layer)
    rows = []
    for label, arch in ladder:
        counts = Model(s, arch).counts()
        losses = [train_one(arch, s, train, val, seed, lr, steps) for seed in seeds]
        mean = sum(losses) / len(losses)
        std = (sum((x - mean) ** 2 for x in losses) / max(len(losses) - 1, 1)) ** 0.5
        rows.append({"label": label, "arch": asdict(arch), "hidden": mlp_hidden(s, arch), **counts,
                     "val_loss": losses, "mean": mean, "std": std})
        log(f"{label:24s} params {counts['params']:>7,}  N_mm {counts['n_mm']:>7,}  val {mean:.3f} ± {std:.3f}  "
            f"({time.perf_counter() - t0:.0f} s)")
    lr_sweep = {}
    for label, arch in (ladder[0], ladder[-1]):
        lr_sweep[label] = {}
        for rate in sweep:
            if rate == lr:
                losses = next(r["val_loss"] for r in rows if r["label"] == label)
            else:
                losses = [train_one(arch, s, train, val, seed, rate, steps) for seed in seeds]
            lr_sweep[label][str(rate)] = losses
            log(f"lr {rate:g} {label:24s} val {sum(losses) / len(losses):.3f}  ({time.perf_counter() - t0:.0f} s)")
    return {"size": asdict(s), "steps": steps, "batch": 16, "seeds": list(seeds), "lr": lr, "rows": rows,
            "lr_sweep": lr_sweep, "seconds": round(time.perf_counter() - t0, 1),
            "threads": torch.get_num_threads(), "torch": torch.__version__, "machine": platform.machine()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", action="store_true", help="the notebook's version: one seed, no sweep")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.small:
        run(seeds=(0,), sweep=())
        return
    result = run()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"{result['seconds']:.0f} s; wrote {args.out}")


if __name__ == "__main__":
    main()
