"""Who may reach the class's cluster (mutual TLS, refused plain TCP) and what the batch's own process spends:
results from workers checked as plain data, submissions read bounded and without blocking, and a submission
that holds up the grader's own steps left behind at its deadline. No child, no cluster: the e2e tier has those
(tests/e2e/test_cluster_tls.py)."""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import os
import threading
import time

import pytest
from click.testing import CliRunner

from course_cli.classes import batch, dispatch
from course_cli.classes.journal import READ_LIMIT, checked_result, file_digest, result_to_dict, submission_bytes
from course_cli.main import cli
from graders.registry import find_lesson
from harness import peak_rss_since, peak_rss_start

L01 = find_lesson("lesson01")
needs_dask = pytest.mark.skipif(importlib.util.find_spec("distributed") is None,
                                reason="the cluster extra (dask, distributed) is not installed")


def _honest() -> dict:
    from graders.engine.verdict import error_result

    res = error_result(L01, "/subs/alice.ipynb", "cell 3 failed")
    for ex in res.exercises:
        ex.status, ex.points, ex.checks[0].status, ex.checks[0].kind = "passed", ex.max_points, "passed", "check"
    return result_to_dict(res)


# ---------------------------------------------------------------------------------------------------------
# Mutual TLS, or an explicit opt-out

@needs_dask
def test_a_plain_tcp_scheduler_is_refused_naming_the_fix(tmp_path):
    (tmp_path / "alice.ipynb").write_text("{}")
    run = lambda *a: CliRunner().invoke(cli, ["grade", str(tmp_path), "--lesson", "1", *a])  # noqa: E731
    for address in ("tcp://127.0.0.1:8786", "127.0.0.1:8786"):
        r = run("--scheduler", address)
        assert r.exit_code == 2 and "Traceback" not in r.output
        assert "tls://HOST:PORT" in r.output and "--tls-ca-file" in r.output and "--insecure-cluster" in r.output
    r = run("--scheduler", "tls://127.0.0.1:8786")
    assert r.exit_code == 2 and "needs the cluster's certificates" in r.output and "--tls-cert" in r.output
    r = run("--scheduler", "tls://127.0.0.1:8786", "--tls-ca-file", str(tmp_path / "nope.pem"),
            "--tls-cert", str(tmp_path / "nope.pem"), "--tls-key", str(tmp_path / "nope.key"))
    assert r.exit_code == 2 and "cannot be read" in r.output
    (tmp_path / "junk.pem").write_text("not a certificate\n")
    r = run("--scheduler", "tls://127.0.0.1:8786", "--tls-ca-file", str(tmp_path / "junk.pem"),
            "--tls-cert", str(tmp_path / "junk.pem"), "--tls-key", str(tmp_path / "junk.pem"))
    assert r.exit_code == 2 and "cannot be used" in r.output and "Traceback" not in r.output
    r = run("--scheduler", "local", "--tls-cert", str(tmp_path / "junk.pem"))
    assert r.exit_code == 2 and "makes its own certificates" in r.output
    r = run("--scheduler", "tls://127.0.0.1:8786", "--insecure-cluster")
    assert r.exit_code == 2 and "is for a plain tcp:// scheduler" in r.output
    r = run("--insecure-cluster")
    assert r.exit_code == 2 and "are for --scheduler" in r.output


@needs_dask
def test_a_plain_tcp_scheduler_with_the_opt_out_is_warned_and_recorded(tmp_path, monkeypatch):
    from course_cli.sandboxed import sandbox

    monkeypatch.setattr(sandbox, "_BWRAP", (True, ""))  # bwrap usable, not probed: the fast tier starts no process
    from course_cli.classes import grade as klass

    (tmp_path / "alice.ipynb").write_text("{}")
    seen = {}

    def fake_run(p, *args, **kwargs):
        seen["access"] = p.access
        return {"alice": batch.result_from_dict(_honest())}

    monkeypatch.setattr(klass, "run", fake_run)
    out = tmp_path / "r.json"
    r = CliRunner().invoke(cli, ["grade", str(tmp_path), "--lesson", "1", "--scheduler", "tcp://127.0.0.1:1",
                                 "--insecure-cluster", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert klass.INSECURE_WARNING in r.output and seen["access"].insecure
    assert json.loads(out.read_text())["insecure_cluster"] is True


def test_the_journal_header_records_an_insecure_cluster(tmp_path):
    from course_cli.classes.journal import Journal

    path = tmp_path / "j"
    Journal.open(path, "lesson01", "key", resume=False, insecure_cluster=True).close()
    assert json.loads(path.read_text())["insecure_cluster"] is True
    Journal.open(path, "lesson01", "key", resume=True, insecure_cluster=True).close()  # resumed: said again
    assert path.read_text().splitlines()[1] == '{"insecure_cluster": true}'
    with Journal.open(path, "lesson01", "key", resume=True) as j:
        assert j.done == {}


# ---------------------------------------------------------------------------------------------------------
# A worker's result is plain data of the schema

def test_an_honest_result_is_taken_as_it_was_sent():
    data = _honest()
    assert result_to_dict(checked_result(json.dumps(data), L01)) == data


FORGERIES = {
    "not text": lambda d: d,
    "too long": lambda d: json.dumps({**d, "notebook": "x" * (8 * 2**20)}),
    "not JSON": lambda d: "cos\nsystem\n(S'id'\ntR.",
    "another lesson": lambda d: json.dumps({**d, "lesson": "lesson02"}),
    "an unknown field": lambda d: json.dumps({**d, "__reduce__": "os.system"}),
    "full marks past the lesson's points": lambda d: json.dumps(
        {**d, "exercises": [{**e, "status": "passed", "points": 1e9} for e in d["exercises"]]}),
    "max points changed": lambda d: json.dumps(
        {**d, "exercises": [{**e, "points": 100.0, "max_points": 100.0} for e in d["exercises"]]}),
    "NaN points": lambda d: json.dumps({**d, "exercises": [{**e, "points": float("nan")} for e in d["exercises"]]}),
    "points as a boolean": lambda d: json.dumps({**d, "exercises": [{**e, "points": True} for e in d["exercises"]]}),
    "an exercise twice": lambda d: json.dumps({**d, "exercises": d["exercises"] + d["exercises"][:1]}),
    "an exercise of no lesson": lambda d: json.dumps({**d, "exercises": [{**d["exercises"][0], "id": "rm -rf"}]}),
    "an unknown status": lambda d: json.dumps({**d, "exercises": [{**e, "status": "pwned"} for e in d["exercises"]]}),
    "a check of unknown kind": lambda d: json.dumps({**d, "exercises": [
        {**e, "checks": [{**c, "kind": "evil"} for c in e["checks"]]} for e in d["exercises"]]}),
    "a note that is an object": lambda d: json.dumps({**d, "notes": [{"x": 1}]}),
    "deep nesting": lambda d: json.dumps({**d, "notes": []})[:-1] + ', "note": ' + "[" * 100000 + "]" * 100000 + "}",
}


@pytest.mark.parametrize("how", sorted(FORGERIES))
def test_a_forged_or_malformed_result_is_refused(how):
    with pytest.raises(ValueError):
        checked_result(FORGERIES[how](copy.deepcopy(_honest())), L01)


# ---------------------------------------------------------------------------------------------------------
# The batch's own reading: bounded, never blocking

def _in_thread(fn, seconds: float):
    box = []
    t = threading.Thread(target=lambda: box.append(fn()), daemon=True)
    t.start()
    t.join(seconds)
    assert box, f"still running after {seconds} s"
    return box[0]


def test_a_fifo_submission_does_not_block_the_batch(tmp_path):
    fifo = tmp_path / "bob.ipynb"
    os.mkfifo(fifo)  # open() for reading waits for a writer that never comes
    assert _in_thread(lambda: file_digest(fifo), 5) is None
    assert _in_thread(lambda: submission_bytes(fifo), 5) is None


def test_a_huge_sparse_submission_is_not_read(tmp_path):
    big = tmp_path / "carol.ipynb"
    with open(big, "wb") as f:
        f.truncate(2 * 2**30)  # 2 GiB apparent, nothing on disk
    before = peak_rss_start()
    t = time.perf_counter()
    assert file_digest(big) is None and submission_bytes(big) is None
    assert time.perf_counter() - t < 5
    assert peak_rss_since(before) < 64 * 2**20  # nothing read
    fits = tmp_path / "dave.ipynb"
    fits.write_bytes(b"x" * READ_LIMIT)
    assert file_digest(fits) == hashlib.sha256(fits.read_bytes()).hexdigest()
    fits.write_bytes(b"x" * (READ_LIMIT + 1))
    assert file_digest(fits) is None


# ---------------------------------------------------------------------------------------------------------
# The grader's own steps have a deadline per submission

def test_a_submission_that_hangs_the_graders_own_steps_is_left_behind_and_the_others_are_graded(monkeypatch):
    from course_cli.sandboxed import grading

    class NoReference:
        @staticmethod
        def start(*a, **k):
            return (None, None)

        @staticmethod
        def finish(*a, **k):
            return None

    release = threading.Event()

    def grade(lesson, student, path, **kwargs):
        if student == "stuck":
            release.wait(120)  # a parent-side step that does not return (a blocking read, a hung judge)
        return batch.result_from_dict({**_honest(), "notebook": str(path)})

    monkeypatch.setattr(grading, "Reference", NoReference)
    monkeypatch.setattr(dispatch, "grade_submission", grade)
    monkeypatch.setattr(dispatch, "deadline", lambda: 2.0)
    subs = [("stuck", "/s/stuck.ipynb")] + [(f"s{i}", f"/s/s{i}.ipynb") for i in range(5)]
    done = []
    t = time.perf_counter()
    try:
        got = _in_thread(lambda: batch.grade_all(L01, subs, jobs=2, on_done=lambda s, r: done.append(s)), 30)
    finally:
        release.set()
    assert time.perf_counter() - t < 15
    assert sorted(got) == sorted(s for s, _ in subs) and sorted(done) == sorted(got)
    assert all(got[f"s{i}"].exercises[0].status == "passed" for i in range(5))
    stuck = got["stuck"].exercises[0]
    assert stuck.status == "error" and "within 2 s" in stuck.reason and stuck.checks[0].kind == "grader"
