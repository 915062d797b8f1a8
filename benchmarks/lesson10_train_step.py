"""One training step of lesson 10's reference decoder against the same model built from torch's own parts
(nn.RMSNorm, F.scaled_dot_product_attention with enable_gqa instead of repeat_kv, F.silu), measured in one run.

    python benchmarks/lesson10_train_step.py [--device cpu] [--repeats 7] [--threads N]

The timing code is the grader's own `benchmark` (what `course bench lesson10` runs on a student's notebook),
here on the solved lesson. Both models have the same parameters under the same names (TorchLlama loads the
course model's state dict; tests/test_lesson10.py checks that they compute the same logits).
"""

from __future__ import annotations

import argparse

import torch

from graders import lesson10_llama
from graders.parts import import_lesson


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's choice)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    solved = import_lesson("lesson10")  # the course's solved notebook, built on lessons 03, 05, 06 and 08
    report = lesson10_llama.benchmark(vars(solved), args.device, repeats=args.repeats)
    print(report["title"], f"(torch {torch.__version__}, {torch.get_num_threads()} threads)")
    widths = [max(len(str(x)) for x in col) for col in zip(report["columns"], *report["rows"])]
    for row in [report["columns"], *report["rows"]]:
        print("  ".join(str(x).rjust(w) for x, w in zip(row, widths)))
    print(f"ratio (ours / torch): {', '.join(f'{row[4]:.3f}x' for row in report['rows'])}")


if __name__ == "__main__":
    main()
