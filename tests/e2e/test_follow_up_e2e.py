"""A failing check follows up on the mutation candidates the reference child's time budget left (issue 44: a
course check names a mutant only when it reached that candidate; lessons 07-10's modules reached 0-4 of 40 in
2 s). COURSE_MUTANT_BUDGET=0 makes the reference child probe none, so every cause below is found by the follow-up:
the real sandboxed reference child, the real disk cache, a real `course check`, cold and warm."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import harness
from test_warm import run_dir, warm_checks  # noqa: F401 (the warm tests' run folder and their count of checks)
from graders.engine import mutations
from graders.engine.mistakes import solved_cell
from graders.registry import find_lesson

pytestmark = pytest.mark.slow

# A module with 40 candidates, as lesson 07's TransformerBlock and lesson 10's Llama have: lesson 03's
# MultiHeadAttention, whose candidates this test's oracle probes whole in 13 s where TransformerBlock's took 56.
# The budget of 0 makes every candidate of any exercise a late one.
LESSON = find_lesson("lesson03")
EXERCISE = "MultiHeadAttention"
ROOT = Path(__file__).resolve().parents[2]


def _late_mutants(tmp_path: Path, n_wanted: int = 2) -> list[tuple[Path, str]]:
    """The solved notebook with one of the exercise's last candidates in place of its cell, and the
    diagnosis id the in-process grader gives it with every candidate probed (tests/harness.py, no budget): the
    last `n_wanted` candidates named, each named differently."""
    cands = mutations.mutants(solved_cell(LESSON.id, EXERCISE), EXERCISE, mutations.CAP)
    assert len(cands) > 30
    found: list[tuple[Path, str]] = []
    for n in range(len(cands) - 1, 0, -1):
        path = harness.with_code(LESSON, EXERCISE, cands[n].source, tmp_path, name=f"late-{n}.ipynb")
        want = harness.check_one(LESSON, path, EXERCISE, mutants=True)
        if want.status == "failed" and (want.diagnosis_id or "").startswith("mutation:") and \
                want.diagnosis_id not in {d for _, d in found}:
            found.append((path, want.diagnosis_id))
            if len(found) == n_wanted:
                return found
    raise AssertionError(f"too few late candidates of {EXERCISE} are named in process")


def _check(path: Path, cache: Path, code: int = 1, **env) -> tuple[dict, float]:
    import time

    full = {**os.environ, "PYTHONPATH": str(ROOT), "COURSE_CACHE_DIR": str(cache), "COURSE_MUTANT_BUDGET": "0",
            "COURSE_WARM": "0", **env}
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "course_cli", "check", LESSON.id, "--notebook", str(path), "--json"],
                       capture_output=True, text=True, env=full, cwd=ROOT, timeout=600)
    assert r.returncode == code, r.stderr[-3000:]
    return json.loads(r.stdout), time.perf_counter() - t


def _idle_probes_ended(run_dir: Path, started: int | None = None, limit: float = 600.0) -> None:
    """Wait until the warm server's log says `started` idle probes have started, or (None) until every probe it
    started has ended and none started for 5 s."""
    import re
    import time

    t0, last = time.monotonic(), None
    while time.monotonic() - t0 < limit:
        text = "".join(p.read_text() for p in run_dir.glob("*/w-*.log"))
        began = len(re.findall(r"^\S+ \S+: idle probe of \S+ \(", text, re.M))
        ended = len(re.findall(r"^\S+ \S+: idle probe of \S+ (?:done|ended)", text, re.M))
        if started is not None and began >= started:
            return
        if started is None and began and began == ended:
            if last == text:
                return
            last = text
            time.sleep(5)
            continue
        time.sleep(0.5)
    raise AssertionError(f"the idle probes did not end within {limit:g} s:\n{text[-3000:]}")


def _block(result: dict) -> dict:
    return next(e for e in result["exercises"] if e["id"] == EXERCISE)


def _cached_counts(cache: Path) -> dict:
    import torch

    (main,) = [p for p in cache.glob(f"{LESSON.id}-cpu-*.pt") if ".mistakes-" not in p.name]
    return torch.load(main, weights_only=True)["mutation"][EXERCISE]


def _copy_reference(src: Path, dst: Path) -> None:
    """The reference files of a cache (not its child build) into a new cache folder."""
    import shutil

    dst.mkdir(parents=True)
    for p in src.glob(f"{LESSON.id}-cpu-*"):
        shutil.copy2(p, dst / p.name)


def _stamps(cache: Path) -> dict:
    return {p.name: p.stat().st_mtime_ns for p in cache.glob(f"{LESSON.id}-cpu-*")}


def test_a_late_candidate_is_named_by_the_follow_up_cold_and_warm_and_kept(tmp_path, run_dir):
    """The follow-up screens the candidates on the student's failing check (only those it does not rule out run
    every check): the cause named is the one every candidate probed whole names, a check that fails the same way
    again starts no follow-up, and another student's mistake is named from what the cache kept."""
    (path, want), (other, other_want) = _late_mutants(tmp_path)
    # without the follow-up, no mutant is named: the budget of 0 probed none
    off, _ = _check(path, tmp_path / "unprobed", COURSE_FOLLOW_UPS="0")
    assert _block(off)["status"] == "failed" and not (_block(off)["diagnosis_id"] or "").startswith("mutation:")
    assert _cached_counts(tmp_path / "unprobed")["skipped"] == _cached_counts(tmp_path / "unprobed")["candidates"]
    _copy_reference(tmp_path / "unprobed", tmp_path / "cold")
    _copy_reference(tmp_path / "unprobed", tmp_path / "warm")

    first, _ = _check(path, tmp_path / "cold")
    assert _block(first)["status"] == "failed" and _block(first)["diagnosis_id"] == want
    counts = _cached_counts(tmp_path / "cold")
    assert counts["skipped"] == 0 and counts["tried"] + counts["broken"] + counts["screened"] == counts["candidates"] > 30
    stamps = _stamps(tmp_path / "cold")
    again, _ = _check(path, tmp_path / "cold")
    assert again == first  # from the cache, without a follow-up: the same words
    assert _stamps(tmp_path / "cold") == stamps  # nothing probed again: the cache was not written
    # another mistake in the same exercise: its cause too, as with every candidate probed whole
    second, _ = _check(other, tmp_path / "cold")
    assert _block(second)["status"] == "failed" and _block(second)["diagnosis_id"] == other_want

    # warm: the first check follows up inside the server, the next is judged from the server's memory; the same
    # words as cold
    warm = [_check(path, tmp_path / "warm", COURSE_WARM="1", XDG_RUNTIME_DIR=str(run_dir))[0] for _ in range(2)]
    assert warm_checks(run_dir) >= 1
    assert all(r == first for r in warm)
    assert _cached_counts(tmp_path / "warm")["skipped"] == 0

    # a warm server left idle probes what the reference left (its idle probes): a check while they run gets the
    # same words; once they end, every candidate is probed whole and a failing check starts no follow-up
    # (a server of other settings, another key: it replaces the one above, in the same short run folder)
    idle, idle_run = tmp_path / "idle", run_dir
    _copy_reference(tmp_path / "unprobed", idle)
    probing = {"COURSE_WARM": "1", "COURSE_IDLE_PROBES": "1", "XDG_RUNTIME_DIR": str(idle_run)}
    solved = path.parent / "solved.ipynb"
    solved.write_bytes(LESSON.solution_path.read_bytes())
    try:
        assert _check(solved, idle, code=0, **probing)[0]["score"] == LESSON.max_score  # starts the server
        _idle_probes_ended(idle_run, started=1)  # a probe has started
        during, _ = _check(path, idle, **probing)
        assert during == first
        _idle_probes_ended(idle_run)
        counts = _cached_counts(idle)
        assert counts["skipped"] == 0 and counts["screened"] == 0 and counts["done"] is True
        stamps = _stamps(idle)
        after, _ = _check(other, idle, **probing)
        assert after == second
        assert _stamps(idle) == stamps  # named from what the idle probes kept: no follow-up wrote the cache
    finally:
        for line in "".join(p.read_text() for p in idle_run.glob("*/w-*.log")).splitlines():
            print(line)  # shown when the test fails: the probes and the checks, with their phases

    # class grading (`course grade`: a trusted reference in memory, the class's hidden seed) follows up too, by
    # count: the same causes as `course check`, whatever the reference child's budget reached on this machine
    klass = tmp_path / "class"
    klass.mkdir()
    for student, nb in (("ada", path), ("bo", other)):
        (klass / f"{student}.ipynb").write_bytes(nb.read_bytes())
    out = tmp_path / "class.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COURSE_CACHE_DIR": str(tmp_path / "class-cache"),
           "COURSE_MUTANT_BUDGET": "0", "COURSE_WARM": "0"}
    r = subprocess.run([sys.executable, "-m", "course_cli", "grade", str(klass), "--lesson", LESSON.id, "--jobs", "1",
                        "--out", str(out)], capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    students = json.loads(out.read_text())["students"]
    for student, cold in (("ada", first), ("bo", second)):
        graded = next(e for e in students[student]["exercises"] if e["id"] == EXERCISE)
        assert graded["status"] == "failed" and graded["diagnosis"] == _block(cold)["diagnosis"], student


def test_a_candidate_that_kills_the_reference_child_costs_only_what_comes_after_it(tmp_path, monkeypatch):
    """Lesson 05's rms_norm_triton had candidates that corrupt memory under Triton's interpreter (malloc aborts,
    SIGSEGV): a size or an argument changed where the exercise launches its kernel. Probed past the budget, the
    reference child used to die and take the whole reference with it ("the reference solution of lesson05 failed
    to run"); since, the reference stands with what came before the candidate (the counts of a killed child:
    tests/unit/test_reference_split.py, test_follow_up_screen.py). Such candidates are no longer made
    (graders/engine/mutations.py AT_LAUNCH_FAMILIES): every candidate of every exercise is probed, and the child
    lives."""
    from course_cli.sandboxed import grading

    L05 = find_lesson("lesson05")
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COURSE_MUTANT_BUDGET", "100000")  # every candidate, as far as the child lives
    reference = grading.Reference.finish(L05, *grading.Reference.start(L05, "cpu"), "cpu")
    assert set(reference.exercises) == {e.name for e in L05.exercises}
    for name, c in reference.mutation.items():
        assert c["next"] + c["skipped"] == c["candidates"], (name, c)
        assert c.get("done") is True, (name, c)
    assert grading.grade_notebook(L05, L05.solution_path).all_passed
