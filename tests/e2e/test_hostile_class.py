"""Issue 50, "Measured": one class holding honest submissions beside hostile ones, graded together by
`course grade` on the local pool (2 jobs).

Honest: lesson 01's solved notebook and its untouched stub. Hostile, one for each of the grader's bounds before
any sandbox (course_cli/sandboxed/notebook.py; docs/architecture.md, "What a submission is"): a sparse file of
4 GiB apparent size (nothing on disk), a valid notebook whose metadata nests deeper than MAX_DEPTH, one nested
past the interpreter's recursion limit, one whose output is larger than MAX_BYTES, one with more cells than
MAX_CELLS. Every honest student must get exactly the result they get when graded alone (the same hidden seed),
each hostile one a NOT GRADED row naming the bound it broke, the batch no crash, and the grading parent's own
peak memory (VmHWM, read in the process that runs `course grade`; see harness.PEAK) must stay under the documented bound of
1 GiB (docs/deploying.md, "The batch's own resources"), and above the honest class's own peak by no more than
what the bounds let it read (JOBS x 4 x MAX_BYTES). The largest of its children's peaks (RUSAGE_CHILDREN: the
sandboxed graders, each counted from the parent's pages it was forked with) is printed beside it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_cli.sandboxed import notebook as nbread
from graders.registry import ROOT, find_lesson
from harness import PEAK

pytestmark = [pytest.mark.slow, pytest.mark.lesson01]

L01 = find_lesson("lesson01")
SEED = 1234
PARENT_PEAK_BOUND = 1024 * 2**20  # docs/deploying.md and docs/benchmarks.md: the batch's parent under 1 GiB
JOBS = 2


def _notebook(path: Path, nb) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


def _honest(subs: Path) -> None:
    _notebook(subs / "solved" / L01.id / L01.notebook, nbformat.read(L01.solution_path, as_version=4))
    _notebook(subs / "stub" / L01.id / L01.notebook, nbformat.read(L01.student_path, as_version=4))


def _hostile(subs: Path) -> dict[str, str]:
    """Write the hostile submissions; {student: the words of the bound its NOT GRADED reason must name}."""
    def where(student):
        p = subs / student / L01.id / L01.notebook
        p.parent.mkdir(parents=True)
        return p

    with open(where("sparse"), "wb") as f:  # 4 GiB apparent size, no block on disk
        f.truncate(4 * 2**30)
    solved = nbformat.read(L01.solution_path, as_version=4)
    deep = nbformat.from_dict(json.loads(json.dumps(solved)))
    nest: dict = {}
    for _ in range(nbread.MAX_DEPTH + 20):
        nest = {"a": nest}
    deep.cells[0].metadata["x"] = nest  # valid JSON and a valid notebook, only too deep
    nbformat.write(deep, where("deep"))
    where("abyss").write_text('{"cells": ' + "[" * 50_000 + "]" * 50_000 + "}")  # past the recursion limit
    big = nbformat.from_dict(json.loads(json.dumps(solved)))
    big.cells.append(nbformat.v4.new_code_cell("print('x' * 17_000_000)", outputs=[
        nbformat.v4.new_output("stream", name="stdout", text="x" * (nbread.MAX_BYTES + 2**20))]))
    nbformat.write(big, where("huge_output"))
    many = nbformat.from_dict(json.loads(json.dumps(solved)))
    many.cells += [nbformat.v4.new_code_cell("pass") for _ in range(nbread.MAX_CELLS + 500)]
    nbformat.write(many, where("many_cells"))
    return {"sparse": f"{nbread.MAX_BYTES:,} bytes", "deep": f"bound of {nbread.MAX_DEPTH} levels",
            "abyss": f"bound of {nbread.MAX_DEPTH} levels", "huge_output": f"{nbread.MAX_BYTES:,} bytes",
            "many_cells": f"bound of {nbread.MAX_CELLS:,} cells"}


def _grade(folder: Path, out: Path) -> tuple[subprocess.CompletedProcess, int, int]:
    """`course grade` on `folder`: the process, its own peak RSS and the largest child's (bytes)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COURSE_CELL_TIMEOUT": "20", "COURSE_EXERCISE_TIMEOUT": "60"}
    done = subprocess.run([sys.executable, "-c", PEAK, "grade", folder.name, "--lesson", L01.id, "--jobs", str(JOBS),
                           "--seed", str(SEED), "--out", str(out)], cwd=folder.parent, env=env,
                          capture_output=True, text=True, timeout=900)
    assert "PEAK_KIB" in done.stdout, done.stdout[-2000:] + done.stderr[-3000:]
    own, children = done.stdout.split("PEAK_KIB")[1].split()[:2]
    return done, int(own) * 1024, int(children) * 1024


def _honest_view(student: dict) -> dict:
    """What a student's result is: score, and per exercise its status, points and checks' statuses."""
    return {"score": student["score"], "max_score": student["max_score"],
            "exercises": [(e["id"], e["status"], e["points"], e.get("reason"),
                           [(c["name"], c["status"], c.get("message")) for c in e.get("checks", [])])
                          for e in student["exercises"]]}


def test_a_hostile_class_is_graded_as_its_honest_students_alone(tmp_path):
    from course_cli.sandboxed import sandbox

    if not sandbox.bwrap_status()[0]:
        pytest.skip("bubblewrap unavailable")
    alone_dir, mixed_dir = tmp_path / "alone" / "submitted", tmp_path / "mixed" / "submitted"
    _honest(alone_dir)
    _honest(mixed_dir)
    bounds = _hostile(mixed_dir)

    done, alone_own, _ = _grade(alone_dir, tmp_path / "alone.json")
    assert done.returncode == 0, done.stderr[-3000:]
    done, own, child = _grade(mixed_dir, tmp_path / "mixed.json")
    print(f"the grading parent's peak RSS: {own / 2**20:.0f} MiB with the hostile submissions, "
          f"{alone_own / 2**20:.0f} MiB for the honest ones alone (bound {PARENT_PEAK_BOUND / 2**20:.0f} MiB); "
          f"the largest child's: {child / 2**20:.0f} MiB")
    assert done.returncode == 1, done.stderr[-3000:]  # some were not graded: exit 1, no crash
    assert "Traceback" not in done.stdout + done.stderr, done.stderr[-3000:]

    alone = json.loads((tmp_path / "alone.json").read_text())["students"]
    mixed = json.loads((tmp_path / "mixed.json").read_text())["students"]
    assert set(mixed) == {"solved", "stub", *bounds}
    assert alone["solved"]["score"] == L01.max_score and alone["stub"]["score"] == 0
    for student in ("solved", "stub"):
        assert _honest_view(mixed[student]) == _honest_view(alone[student]), student
    for student, bound in bounds.items():
        row = mixed[student]
        assert bound in (row.get("not_graded") or ""), (student, bound, json.dumps(row)[:1500])
        assert row["score"] is None and {e["points"] for e in row["exercises"]} == {0}  # no score, no points
    assert own < PARENT_PEAK_BOUND
    # what the hostile submissions may add over the honest class alone: each of the JOBS submissions in flight
    # read to at most MAX_BYTES, held as bytes, text and parsed JSON (4x, generously); a reader that read a
    # submission whole (the 4 GiB sparse file) or parsed past a bound would break it
    assert own <= alone_own + JOBS * 4 * nbread.MAX_BYTES
