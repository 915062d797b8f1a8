"""Lesson 09's reference Triton forward on a GPU: TFLOP/s, and ratios to SDPA's backends in the same run.

    python benchmarks/lesson09_gpu.py                 # the table: T 1024..16384, D 64/128, causal or not, fp16/bf16
    python benchmarks/lesson09_gpu.py --sweep         # also time the kernel's tile shapes at T=4096 (float16)
    python benchmarks/lesson09_gpu.py --out DIR       # write results.json and results.md into DIR

The kernel is the course's solved lesson09 notebook (its graded cells, through graders.parts), never a
copy; `--sweep` launches that notebook's `flash_attention_kernel` with other tile shapes, to choose the
ones its launcher uses. Goals (issue 11), B=4, H=32 as in Triton's fused-attention tutorial:
  - at T >= 2048, D 64 and 128, causal and not, float16 and bfloat16: at least 1.0x the speed of SDPA's
    FLASH_ATTENTION backend;
  - at D=128, not causal, T >= 4096: at least 480 TFLOP/s.
FLOPs are counted as 4·B·H·T²·D per forward, half of it when causal. Times are medians of
triton.testing.do_bench (CUDA events; it clears the L2 cache before each run). Every output is checked
against SDPA before it is timed: a wrong kernel is reported, never timed.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

GOAL_VS_FLASH, GOAL_TFLOPS = 1.0, 480.0
B, H = 4, 32
SWEEP = {  # (BLOCK_M, BLOCK_N, num_warps, num_stages) tried per head size; causal needs BLOCK_N | BLOCK_M
    64: [(128, 128, 4, 3), (128, 64, 4, 3), (128, 128, 4, 4), (64, 64, 4, 4)],
    128: [(128, 128, 8, 3), (64, 64, 4, 3), (64, 64, 4, 4), (128, 64, 8, 3)],
}


def flops(T: int, D: int, causal: bool) -> int:
    return 4 * B * H * T * T * D // (2 if causal else 1)


def sdpa_backends() -> dict:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return {"SDPA default": contextlib.nullcontext,
            "SDPA flash": lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION),
            "SDPA cuDNN": lambda: sdpa_kernel(SDPBackend.CUDNN_ATTENTION)}


def median_ms(fn) -> float:
    import triton.testing

    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out.float() - ref.float()).norm() / ref.float().norm()).item()


def inputs(T: int, D: int, dtype: torch.dtype, seed: int = 0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(B, H, T, D, device="cuda", dtype=dtype, generator=gen) for _ in range(3)]


def launch(ns, q, k, v, causal: bool, tiles) -> torch.Tensor:
    """The notebook's kernel with the given tile shapes, launched as its launcher does."""
    import triton

    BLOCK_M, BLOCK_N, warps, stages = tiles
    _, _, T, D = q.shape
    out = torch.empty_like(q)

    def descriptor(t, block):
        return ns.TensorDescriptor(t, shape=[B * H, T, D], strides=[T * D, D, 1], block_shape=[1, block, D])

    ns.flash_attention_kernel[(triton.cdiv(T, BLOCK_M), B * H)](
        descriptor(q, BLOCK_M), descriptor(k, BLOCK_N), descriptor(v, BLOCK_N), descriptor(out, BLOCK_M), T,
        math.log2(math.e) / math.sqrt(D), CAUSAL=causal, D=D, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
        num_warps=warps, num_stages=stages)
    return out


def sweep(ns, T: int = 4096) -> list[dict]:
    rows = []
    for D, configs in SWEEP.items():
        for causal in (False, True):
            q, k, v = inputs(T, D, torch.float16, seed=1)
            ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            for tiles in configs:
                row = {"T": T, "D": D, "causal": causal, "tiles": list(tiles)}
                try:
                    err = rel_error(launch(ns, q, k, v, causal, tiles), ref)
                    row["rel_error"] = err
                    if err < 1e-2:
                        row["ms"] = median_ms(lambda: launch(ns, q, k, v, causal, tiles))
                        row["tflops"] = flops(T, D, causal) / row["ms"] / 1e9
                except Exception as exc:  # a tile shape that does not fit (shared memory, registers)
                    row["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
                rows.append(row)
                print(f"sweep D={D} causal={causal!s:5} tiles={tiles}: "
                      + (f"{row['tflops']:.0f} TFLOP/s" if "tflops" in row else row.get("error", f"err {row.get('rel_error')}")),
                      flush=True)
    return rows


def table(ns, Ts) -> list[dict]:
    rows, backends = [], sdpa_backends()
    for dtype in (torch.float16, torch.bfloat16):
        for D in (64, 128):
            for causal in (False, True):
                for T in Ts:
                    q, k, v = inputs(T, D, dtype)
                    row = {"dtype": str(dtype).removeprefix("torch."), "B": B, "H": H, "T": T, "D": D,
                           "causal": causal}
                    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    ours = ns.flash_attention_triton(q, k, v, causal=causal)
                    row["rel_error"] = rel_error(ours, ref)
                    if row["rel_error"] < 1e-2:
                        row["ours ms"] = median_ms(lambda: ns.flash_attention_triton(q, k, v, causal=causal))
                    for name, ctx in backends.items():
                        try:
                            with ctx():
                                F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                                row[name + " ms"] = median_ms(
                                    lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
                        except Exception as exc:  # a backend that does not take this shape or dtype
                            row[name + " ms"] = None
                            row[name + " error"] = f"{type(exc).__name__}: {str(exc)[:120]}"
                    work = flops(T, D, causal)
                    for key in [name for name in list(row) if name.endswith(" ms")]:
                        if row[key]:
                            row[key.removesuffix(" ms") + " TFLOP/s"] = work / row[key] / 1e9
                    if row.get("ours ms"):
                        for name in backends:
                            if row.get(name + " ms"):
                                row[f"vs {name}"] = row[name + " ms"] / row["ours ms"]  # > 1: ours is faster
                    rows.append(row)
                    print(format_row(row), flush=True)
    return rows


def format_row(r: dict) -> str:
    def f(x, spec):
        return "-" if x is None else format(x, spec)
    return (f"{r['dtype']:8} T={r['T']:5} D={r['D']:3} causal={r['causal']!s:5} err={r['rel_error']:.1e} "
            f"ours {f(r.get('ours TFLOP/s'), '5.0f')} | flash {f(r.get('SDPA flash TFLOP/s'), '5.0f')} "
            f"default {f(r.get('SDPA default TFLOP/s'), '5.0f')} cuDNN {f(r.get('SDPA cuDNN TFLOP/s'), '5.0f')} TFLOP/s"
            f" | x flash {f(r.get('vs SDPA flash'), '.2f')} x default {f(r.get('vs SDPA default'), '.2f')}"
            f" x cuDNN {f(r.get('vs SDPA cuDNN'), '.2f')}")


def goals(rows: list[dict]) -> dict:
    vs_flash = [r for r in rows if r["T"] >= 2048]
    worst = min(vs_flash, key=lambda r: r.get("vs SDPA flash") or 0.0)
    big = [r for r in rows if r["D"] == 128 and not r["causal"] and r["T"] >= 4096]
    slowest = min(big, key=lambda r: r.get("ours TFLOP/s") or 0.0)
    return {"worst ratio to SDPA flash at T>=2048": worst.get("vs SDPA flash"),
            "where": {k: worst[k] for k in ("dtype", "T", "D", "causal")},
            "met: >= 1.0x SDPA flash": (worst.get("vs SDPA flash") or 0.0) >= GOAL_VS_FLASH,
            "lowest TFLOP/s at D=128, not causal, T>=4096": slowest.get("ours TFLOP/s"),
            "where (TFLOP/s)": {k: slowest[k] for k in ("dtype", "T")},
            "met: >= 480 TFLOP/s": (slowest.get("ours TFLOP/s") or 0.0) >= GOAL_TFLOPS}


def environment() -> dict:
    import triton

    env = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "device": torch.cuda.get_device_name(), "capability": list(torch.cuda.get_device_capability()),
           "torch": torch.__version__, "triton": triton.__version__, "cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version(), "python": platform.python_version()}
    try:
        env["nvidia-smi"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu",
             "--format=csv,noheader"], capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return env


def markdown(result: dict) -> str:
    lines = [f"device: {result['environment']['device']}; torch {result['environment']['torch']}, "
             f"triton {result['environment']['triton']}; {result['environment']['date']}", "",
             "| dtype | T | D | causal | ours TFLOP/s | SDPA flash | SDPA default | SDPA cuDNN | × flash | × default | × cuDNN |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["table"]:
        def f(key, spec=".0f"):
            return "-" if r.get(key) is None else format(r[key], spec)
        lines.append(f"| {r['dtype']} | {r['T']} | {r['D']} | {r['causal']} | {f('ours TFLOP/s')} | "
                     f"{f('SDPA flash TFLOP/s')} | {f('SDPA default TFLOP/s')} | {f('SDPA cuDNN TFLOP/s')} | "
                     f"{f('vs SDPA flash', '.2f')} | {f('vs SDPA default', '.2f')} | {f('vs SDPA cuDNN', '.2f')} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", action="store_true", help="time the kernel's tile shapes first")
    parser.add_argument("--T", type=int, nargs="+", default=[1024, 2048, 4096, 8192, 16384])
    parser.add_argument("--out", type=Path, help="folder for results.json and results.md")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: this benchmark needs a GPU (benchmarks/lesson09_cpu.py runs on CPU)")
        return 2
    from graders.parts import import_lesson

    ns = import_lesson("lesson09")
    result = {"environment": environment()}
    print(json.dumps(result["environment"]), flush=True)
    if args.sweep:
        result["sweep"] = sweep(ns)
    result["table"] = table(ns, args.T)
    result["goals"] = goals(result["table"])
    print(json.dumps(result["goals"], indent=1))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.json").write_text(json.dumps(result, indent=1))
        (args.out / "results.md").write_text(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
