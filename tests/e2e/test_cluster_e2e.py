"""test_cluster, end to end: the tests of tests/unit/test_cluster.py that start a child (the slow tier)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
import nbformat
import pytest
from click.testing import CliRunner
from course_cli.classes import batch, cluster
from course_cli.sandboxed import sandbox
from course_cli.sandboxed.grading import Reference, reference_key
from course_cli.classes.journal import (Journal, JournalError, file_digest, journal_seed, result_from_dict,
                                result_to_dict)
from course_cli.main import cli
from graders.registry import ROOT, find_lesson
from graders.engine.results import CheckResult, ExerciseResult, LessonResult
from harness import mistakes_of, with_code, with_mistake
from test_cluster import CLASS_SIZE, ENV_LIMITS, L01, _children_started, _grade_cli, _journal, _kills_its_worker, _spy_on_reference_children, _subset, _table, client, klass, limits, local, needs_dask  # noqa: F401 (helpers and fixtures shared with the fast tests)


def test_bad_options_are_clean_errors(tmp_path, monkeypatch):
    (tmp_path / "alice.ipynb").write_text("{}")
    run = lambda *a: CliRunner().invoke(cli, ["grade", str(tmp_path), "--lesson", "1", *a])  # noqa: E731
    r = run("--resume")
    assert r.exit_code == 2 and "--resume needs the journal" in r.output
    r = run("--workers", "2")
    assert r.exit_code == 2 and "--workers is for --scheduler local" in r.output
    journal = tmp_path / "j"
    Journal.open(journal, "lesson02", reference_key(find_lesson("lesson02"), "cpu"), resume=False).close()
    r = run("--journal", str(journal), "--resume")
    assert r.exit_code == 2 and "journal of lesson02, not lesson01" in r.output and "Traceback" not in r.output
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if the cluster extra were not installed
    r = run("--scheduler", "local")
    assert r.exit_code == 2 and "pip install 'attention-course[cluster]'" in r.output


def test_the_course_cli_imports_no_dask_without_a_scheduler():
    code = ("import sys; import course_cli.main, course_cli.classes.batch, course_cli.classes.cluster, course_cli.classes.journal; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.slow
@needs_dask
def test_a_local_cluster_gives_the_local_pools_results_field_by_field(klass, local, tmp_path, monkeypatch):
    def no_local_pool(*args, **kwargs):
        raise AssertionError("--scheduler graded on the local pool")

    monkeypatch.setattr(batch, "grade_all", no_local_pool)
    out = tmp_path / "results.json"
    r = _grade_cli(klass, out, "--scheduler", "local", "--workers", "2")
    data = json.loads(out.read_text())
    assert data == local["data"]  # the JSON the instructor gets, and below the notes too
    assert _journal(Path(str(out) + ".journal")) == local["journal"]
    assert _table(r.stdout) == _table(local["run"].stdout)  # the same summary
    n = f"{CLASS_SIZE}/{CLASS_SIZE}"
    assert n in r.stderr and n in local["run"].stderr  # the same progress bar
    csv_local, csv_cluster = tmp_path / "local.csv", tmp_path / "cluster.csv"
    batch.write({s: result_from_dict(d) for s, d in local["journal"].items()}, csv_local)
    batch.write({s: result_from_dict(d) for s, d in _journal(Path(str(out) + ".journal")).items()}, csv_cluster)
    assert csv_cluster.read_text() == csv_local.read_text()


@pytest.mark.slow
@needs_dask
def test_a_worker_killed_mid_batch_is_survived(klass, local, client):
    pids = client.run(os.getpid)  # worker address -> process id
    killed = []

    def kill_a_busy_worker(student, result):
        if killed:
            return
        for address, keys in client.processing().items():
            if keys and address in pids:
                os.kill(pids[address], signal.SIGKILL)
                killed.append((address, list(keys)))
                return

    subs = _subset(klass, ["solved0", "stub0", "mistake-no_max", "mistake-k_T", "half", "crash"])
    got = cluster.grade_on_cluster(L01, subs, client, kill_a_busy_worker)
    assert killed and killed[0][1], "no worker was busy when one was to be killed"
    assert {s: result_to_dict(r) for s, r in got.items()} == {s: local["journal"][s] for s, _ in subs}


@pytest.mark.slow
@needs_dask
def test_a_submission_that_kills_its_worker_is_an_error_row_not_retried_forever(klass, local, client):
    subs = [("killer", klass / "solved1.ipynb"), ("solved0", klass / "solved0.ipynb")]
    got = cluster.grade_on_cluster(L01, subs, client, task=_kills_its_worker)
    assert result_to_dict(got["solved0"]) == local["journal"]["solved0"]
    rows = got["killer"].exercises
    assert [e.status for e in rows] == ["error", "error"]
    assert f"died {cluster.MAX_WORKER_DEATHS + 1} times" in rows[0].reason


@pytest.mark.slow
@needs_dask
def test_a_cluster_batch_stopped_after_k_results_resumes_to_the_same_output(klass, local, client, tmp_path):
    subs = _subset(klass, ["solved2", "stub1", "half", "mistake-divide_by_dk", "mistake-inverted_mask",
                           "mistake-sum_wrong_dim", "torn"])
    journal = tmp_path / "r.json.journal"
    seen = []

    class Stop(Exception):
        pass

    def stop_after_3(student, result):
        seen.append(student)
        if len(seen) == 3:
            raise Stop

    client.run(_spy_on_reference_children)
    with pytest.raises(Stop):
        batch.grade_class(L01, subs, scheduler=client, journal=journal, on_done=stop_after_3)
    assert len(_journal(journal)) == 3
    resumed, graded = [], []
    results = batch.grade_class(L01, subs, scheduler=client, journal=journal, resume=True,
                                on_done=lambda s, r: graded.append(s), on_resumed=resumed.append)
    assert resumed == [3] and sorted(graded + seen) == sorted(s for s, _ in subs)
    started = client.run(_children_started).values()  # the workers used the shipped reference:
    assert sum(s for s, _ in started) >= len(subs) - 1 and sum(r for _, r in started) == 0  # (torn: no child)
    assert _journal(journal) == {s: local["journal"][s] for s, _ in subs}
    out, expected = tmp_path / "r.json", tmp_path / "expected.json"
    batch.write(results, out)
    batch.write({s: result_from_dict(local["journal"][s]) for s, _ in subs}, expected)
    assert out.read_text() == expected.read_text()


@pytest.mark.slow
def test_a_killed_client_resumes_to_the_uninterrupted_output(klass, local, tmp_path):
    out = tmp_path / "results.json"
    journal = Path(str(out) + ".journal")
    env = {**os.environ, **ENV_LIMITS, "PYTHONPATH": str(ROOT)}
    # the uninterrupted run's hidden seed (a fresh process would draw its own, and the hidden checks' messages
    # hold numbers of their inputs); --resume then keeps the journal's
    seed = str(local["data"]["hidden_seed"])
    proc = subprocess.Popen([sys.executable, "-m", "course_cli", "grade", str(klass), "--lesson", "lesson01",
                             "--out", str(out), "--seed", seed], env=env, cwd=tmp_path, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    graded = lambda: journal.read_bytes().count(b"\n") - 1 if journal.exists() else 0  # noqa: E731
    try:
        while graded() < 4:
            assert proc.poll() is None, "the batch ended before it could be interrupted"
            assert time.monotonic() < deadline
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not out.exists()
    done_before = len(_journal(journal))
    assert 4 <= done_before < CLASS_SIZE
    r = _grade_cli(klass, out, "--resume")
    assert f"{CLASS_SIZE}/{CLASS_SIZE}" in r.stderr
    assert _journal(journal) == local["journal"]  # every student once: only the missing were graded
    assert out.read_text() == local["out"].read_text()


@pytest.mark.slow
def test_regrading_one_student_adds_to_the_class_journal(klass, local, tmp_path):
    out = tmp_path / "results.json"
    shutil.copy(local["out"], out)
    shutil.copy(str(local["out"]) + ".journal", str(out) + ".journal")
    r = _grade_cli(klass, out, "--student", "stub1")
    assert f"{CLASS_SIZE} results kept" not in r.stderr
    lines = Path(str(out) + ".journal").read_text().splitlines()
    assert len(lines) == 1 + CLASS_SIZE + 1 and json.loads(lines[-1])["student"] == "stub1"
    assert not Path(str(out) + ".journal.bak").exists()
    assert out.read_text() == local["out"].read_text()
    r = _grade_cli(klass, out, "--resume")  # nothing is missing: nothing is graded
    assert f"{CLASS_SIZE} results kept from" in r.stderr and f"{CLASS_SIZE}/{CLASS_SIZE}" in r.stderr
    assert len(Path(str(out) + ".journal").read_text().splitlines()) == CLASS_SIZE + 2
    assert out.read_text() == local["out"].read_text()


@pytest.mark.slow
def test_without_a_shared_filesystem_the_worker_grades_the_shipped_bytes(local, limits, klass):
    reference = Reference.finish(L01, *Reference.start(L01, "cpu", trusted=True))
    content = (klass / "mistake-no_scaling.ipynb").read_bytes()
    elsewhere = "/on/the/client/mistake-no_scaling.ipynb"  # not on this "worker"
    data = json.loads(cluster.grade_task("lesson01", "mistake-no_scaling", elsewhere, content,
                                         file_digest(klass / "mistake-no_scaling.ipynb"), reference,
                                         reference_key(L01, "cpu")))
    expected = json.loads(json.dumps(local["journal"]["mistake-no_scaling"]).replace(
        json.dumps(str(klass / "mistake-no_scaling.ipynb"))[1:-1], elsewhere))
    assert data["notebook"] == elsewhere and data == expected
