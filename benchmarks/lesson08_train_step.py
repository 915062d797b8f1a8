"""One training step of lesson 08's reference GPT against the same model built from torch's own modules
(nn.TransformerEncoderLayer, pre-LN, tanh-GELU, causal; nn.LayerNorm; tied head), measured in one run.

    python benchmarks/lesson08_train_step.py [--device cpu] [--repeats 7] [--threads N]

The goal: the course's GPT at most 1.05x torch's stack. The timing code is the grader's own
`benchmark` (what `course bench lesson08` runs on a student's notebook), here on the solved lesson.
"""

from __future__ import annotations

import argparse

import torch

from graders import lesson08_gpt
from graders.parts import import_lesson


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's choice)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    solved = import_lesson("lesson08")  # the course's solved notebook: its GPT, built on lessons 03, 04, 07
    report = lesson08_gpt.benchmark(vars(solved), args.device, repeats=args.repeats)
    print(report["title"], f"(torch {torch.__version__}, {torch.get_num_threads()} threads)")
    widths = [max(len(str(x)) for x in col) for col in zip(report["columns"], *report["rows"])]
    for row in [report["columns"], *report["rows"]]:
        print("  ".join(str(x).rjust(w) for x, w in zip(row, widths)))
    worst = max(row[4] for row in report["rows"])
    print(f"ratio (ours / torch): worst {worst:.3f}x; goal <= 1.05x: {'met' if worst <= 1.05 else 'NOT met'}")


if __name__ == "__main__":
    main()
