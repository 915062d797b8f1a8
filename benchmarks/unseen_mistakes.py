"""How often the grader names a wrong answer it has never seen (none of these is a catalogued mistake).

Each case is one edit of a solved cell of lessons 01-03. For each, the exercise is graded and its diagnosis
taken twice from the same observations: as the engine chose it before graders/diagnosis.py (the catalogued
mistake matched on exception type alone, else nothing) and as it is now (a catalogued mistake only on the same
observations, else the structural diagnosis). Prints one line per case and the two counts.

    PYTHONPATH=. python benchmarks/unseen_mistakes.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

CASES = [  # (lesson, exercise, old, new, what the student did)
    ("lesson01", "scaled_dot_product_attention", "return weights @ v, weights", "return weights, weights @ v",
     "returns (weights, output)"),
    ("lesson01", "scaled_dot_product_attention", "return weights @ v, weights", "return weights @ k, weights",
     "multiplies the weights by k"),
    ("lesson01", "scaled_dot_product_attention", "return weights @ v, weights",
     "return torch.zeros(*q.shape[:-1], v.shape[-1]), weights", "returns zeros"),
    ("lesson01", "scaled_dot_product_attention", "return weights @ v, weights", "return 2 * (weights @ v), weights",
     "doubles the output"),
    ("lesson01", "scaled_dot_product_attention", "return weights @ v, weights",
     "return weights @ v, weights.transpose(-2, -1)", "returns the weights transposed"),
    ("lesson01", "softmax", "return e / e.sum(dim=dim, keepdim=True)",
     "return (e / e.sum(dim=dim, keepdim=True)).double()", "returns float64"),
    ("lesson01", "softmax", "return e / e.sum(dim=dim, keepdim=True)",
     "return e / e.sum(dim=dim, keepdim=True) + 0.1", "adds 0.1"),
    ("lesson02", "causal_mask", "return ones.tril(diagonal=t_k - t_q)",
     "return ones.tril(diagonal=t_k - t_q).float()", "returns a float mask"),
    ("lesson03", "split_heads", "return x.view(B, T, num_heads, D // num_heads).transpose(1, 2)",
     "return x.view(B, T, num_heads, D // num_heads)", "forgets the transpose (B, T, H, Dh)"),
    ("lesson03", "repeat_kv", "return x[:, :, None].expand(B, Hkv, n_rep, T, Dh).reshape(B, Hkv * n_rep, T, Dh)",
     "return x[:, :, None].expand(B, Hkv, n_rep, T, Dh).reshape(B, Hkv * n_rep, T, Dh) * n_rep",
     "scales the repeated heads by n_rep"),
    ("lesson03", "merge_heads", "return x.transpose(1, 2).reshape(B, T, H * Dh)",
     "return x.transpose(1, 2).reshape(B, T, H * Dh).flip(1)", "reverses the positions"),
]


def main() -> None:
    import graders.engine.diagnosis as diagnosis
    from course_cli.sandboxed.grading import grade_notebook
    from graders.engine import solved_cell
    from graders.registry import find_lesson
    from harness import with_code

    seen = {}
    settle = diagnosis.settle

    def both(best, *args):
        now = settle(best, *args)
        seen["before"], seen["now"] = (best.message if best else None), now
        return now

    diagnosis.settle = both
    before = now = 0
    for lid, ex, old, new, what in CASES:
        lesson = find_lesson(lid)
        src = solved_cell(lid, ex)
        assert src.count(old) == 1, (ex, old)
        path = with_code(lesson, ex, src.replace(old, new), Path(tempfile.mkdtemp()))
        seen.clear()
        (res,) = grade_notebook(lesson, path, [ex]).exercises
        if res.status == "passed":
            print(f"{lid} {ex}: {what}: PASSED (not a wrong answer to these checks)")
            continue
        b, n = seen.get("before"), seen.get("now")
        before += b is not None
        now += n is not None
        print(f"{lid} {ex}: {what}\n    before: {b}\n    now:    {n}")
    print(f"named: before {before} of {len(CASES)}, now {now} of {len(CASES)}")


if __name__ == "__main__":
    main()
