"""What one Gradescope submission costs (`run_autograder`, one process per submission), with the trusted
reference's mutants probed up front (the engine's budget, COURSE_MUTANT_BUDGET=2, as before issue 46's change) and
on demand (the seat's default now: the catalogue only, and a follow-up for an exercise that fails with no cause
named). Two submissions per lesson: the solved notebook, and one failing with a mistake no catalogue entry names
(lesson 01: the output doubled; lesson 10: GELU in SwiGLU's gate where SiLU belongs), so the second pays the
follow-up. The two modes are interleaved, run after run, in one process's loop: the ratio is measured within one
run on one machine.

    PYTHONPATH=. python benchmarks/gradescope_run.py [--lessons lesson01 lesson10] [--runs 3] [--json F]

Prints each run's wall seconds (from the start of run_autograder to results.json), the score and the failed tests; whether the feedback is the same in every run; then the medians. Exit status 0 (a measure, not a test)."""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

# exercise, the code that replaces its solution: a mistake no catalogue entry of the lesson names
UNNAMED = {
    "lesson01": ("scaled_dot_product_attention", "def scaled_dot_product_attention(q, k, v, mask=None):\n"
                 "    import math\n    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
                 "    if mask is not None:\n        scores = scores.masked_fill(~mask, float('-inf'))\n"
                 "    weights = softmax(scores, dim=-1)\n    return 2 * (weights @ v), weights\n"),
    "lesson10": ("SwiGLU", "class SwiGLU(nn.Module):\n"
                 "    def __init__(self, d_model: int, hidden_dim: int, bias: bool = False):\n"
                 "        super().__init__()\n"
                 "        self.gate_proj = nn.Linear(d_model, hidden_dim, bias=bias)\n"
                 "        self.up_proj = nn.Linear(d_model, hidden_dim, bias=bias)\n"
                 "        self.down_proj = nn.Linear(hidden_dim, d_model, bias=bias)\n\n"
                 "    def forward(self, x):\n"
                 "        return self.down_proj(F.gelu(self.gate_proj(x)) * self.up_proj(x))\n"),
}


def _tree(zip_path: Path, notebook: Path, where: Path) -> Path:
    """An /autograder tree as Gradescope lays it out: source/ (the zip), run_autograder, submission/, results/."""
    (where / "source").mkdir(parents=True)
    zipfile.ZipFile(zip_path).extractall(where / "source")
    shutil.copy(where / "source" / "run_autograder", where / "run_autograder")
    (where / "run_autograder").chmod(0o755)
    (where / "results").mkdir()
    (where / "submission").mkdir()
    shutil.copy(notebook, where / "submission" / notebook.name)
    return where


def _once(tree: Path, budget: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COURSE_MUTANT_BUDGET")}
    env.update(AUTOGRADER_ROOT=str(tree), COURSE_PYTHON=sys.executable)
    if budget is not None:
        env["COURSE_MUTANT_BUDGET"] = budget
    t = time.perf_counter()
    proc = subprocess.run([str(tree / "run_autograder")], cwd=tree, env=env, capture_output=True, text=True,
                          timeout=1800)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(proc.stdout[-2000:] + proc.stderr[-2000:])
    data = json.loads((tree / "results" / "results.json").read_text())
    failed = [t for t in data["tests"] if t["score"] < t["max_score"]]
    return {"wall_s": round(wall, 2), "score": data["score"],
            "failed": [t["name"] for t in failed], "feedback": [t["output"] for t in failed]}


def main() -> None:
    from click.testing import CliRunner

    from course_cli.main import cli
    from graders.registry import find_lesson
    from harness import with_code

    ap = argparse.ArgumentParser()
    ap.add_argument("--lessons", nargs="+", default=["lesson01"])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="gs-run-"))
    rows = []
    for lid in args.lessons:
        lesson = find_lesson(lid)
        zip_path = work / f"{lid}.zip"
        r = CliRunner().invoke(cli, ["gradescope", lid, "--out", str(zip_path)], catch_exceptions=False)
        assert r.exit_code == 0, r.output
        subs = {"solved": lesson.solution_path}
        if lid in UNNAMED:
            exercise, code = UNNAMED[lid]
            subs["unnamed mistake"] = with_code(lesson, exercise, code, work, name=lesson.notebook)
        for run in range(args.runs):
            for kind, nb in subs.items():
                for mode, budget in (("up front (budget 2 s)", "2"), ("on demand (default)", None)):
                    tree = _tree(zip_path, nb, work / f"{lid}-{kind.split()[0]}-{run}-{budget}")
                    got = _once(tree, budget)
                    rows.append({"lesson": lid, "submission": kind, "mode": mode, "run": run, **got})
                    print(f"{lid} {kind:16} {mode:22} run {run}: {got['wall_s']:6.1f} s, score {got['score']}, "
                          f"failed {got['failed']}", flush=True)
                    shutil.rmtree(tree, ignore_errors=True)
        for kind in subs:  # the student reads the same feedback either way
            said = {json.dumps(r["feedback"]) for r in rows if (r["lesson"], r["submission"]) == (lid, kind)}
            print(f"{lid} {kind}: the feedback is {'the same' if len(said) == 1 else 'NOT the same'} in every run")
    print()
    summary = []
    for lid in args.lessons:
        for kind in dict.fromkeys(r["submission"] for r in rows if r["lesson"] == lid):
            bw, aw = (statistics.median(r["wall_s"] for r in rows if (r["lesson"], r["submission"], r["mode"]) ==
                                        (lid, kind, m)) for m in dict.fromkeys(r["mode"] for r in rows))
            summary.append({"lesson": lid, "submission": kind, "wall_before": bw, "wall_after": aw})
            print(f"{lid} {kind:16} median {bw:.1f} -> {aw:.1f} s ({aw / bw:.2f}x)")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": platform.node(), "load": os.getloadavg(),
                                               "runs": rows, "summary": summary}, indent=1))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
