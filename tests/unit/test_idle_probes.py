"""The warm server's idle probes (course_cli/sandboxed/warm.py `Server.idle_probes`): which exercise a probe takes,
when none starts, what a check's follow-up does to a probe in flight, and when an exercise is given up. The
follow-up child itself (grading.FollowUp) is replaced by a recorder here: the real one, its child and the cache it
writes are tests/e2e/test_follow_up_e2e.py's."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from course_cli.sandboxed import grading, warm
from graders.registry import find_lesson

L01, L03 = find_lesson("lesson01"), find_lesson("lesson03")


class _Reference:
    """What the probes read of a reference: its cache path, which exercises are unprobed, the counts."""

    def __init__(self, unprobed: set[str]):
        self.path = Path("/nonexistent/ref.pt")
        self.left = set(unprobed)
        self.mutation: dict = {e: {"next": 0} for e in unprobed}

    def unprobed(self, exercise: str) -> bool:
        return exercise in self.left


class _Child:
    def __init__(self):
        self.killed = self.cleaned = False

    def kill_all(self):
        self.killed = True

    def cleanup(self):
        self.cleaned = True


class _FollowUp:
    started: list = []
    outcome = "done"  # "done": every candidate probed; "nothing": the child ended without a result

    def __init__(self, lesson, reference, exercises):
        self.lesson, self.reference, self.exercises = lesson, reference, exercises
        self.plan = {e: {"candidates": [0, 1, 2]} for e in exercises}
        self.child = _Child()
        self.finished = False

    @classmethod
    def start(cls, lesson, reference, exercises, screen=None, trusted=False, nice=0):
        assert nice == 19 and screen is None and not trusted
        follow = cls(lesson, reference, exercises)
        cls.started.append(follow)
        return follow

    def finish(self):
        self.finished = True
        if type(self).outcome == "done":
            for e in self.exercises:
                self.reference.left.discard(e)
                self.reference.mutation[e] = {"next": 3}
            return list(self.exercises)
        return []


@pytest.fixture
def server(monkeypatch, tmp_path):
    monkeypatch.setattr(grading, "FollowUp", _FollowUp)
    _FollowUp.started, _FollowUp.outcome = [], "done"
    s = warm.Server(tmp_path / "w.sock", "key")
    s.last = time.monotonic() - 60  # idle for a minute
    return s


def test_a_probe_takes_the_most_recent_lesson_s_first_unprobed_exercise(server):
    server.references["lesson01"] = _Reference({"softmax"})
    server.references["lesson03"] = _Reference({"merge_heads", "MultiHeadAttention"})
    lesson_id, exercise, follow = server._start_probe()
    order = [e.name for e in L03.exercises]
    assert lesson_id == "lesson03"
    assert exercise == min(("merge_heads", "MultiHeadAttention"), key=order.index)
    assert follow.exercises == [exercise] and server.probing == (lesson_id, exercise, follow)


def test_no_probe_while_a_check_waits_or_ran_a_moment_ago(server):
    server.references["lesson01"] = _Reference({"softmax"})
    server.last = time.monotonic()
    assert server._start_probe() is None
    server.last = time.monotonic() - 60
    server.busy = 1
    assert server._start_probe() is None and not _FollowUp.started
    server.busy = 0
    assert server._start_probe() is not None


def test_nothing_is_probed_where_every_candidate_was(server):
    server.references["lesson01"] = _Reference(set())
    assert server._start_probe() is None and not _FollowUp.started


def test_what_a_probe_found_joins_and_the_next_exercise_follows(server):
    ref = server.references["lesson01"] = _Reference({"softmax", "scaled_dot_product_attention"})
    first = server._start_probe()
    server._finish_probe(*first)
    assert first[2].finished and server.probing is None and not ref.unprobed(first[1])
    second = server._start_probe()
    assert second[1] != first[1] and second[1] in {"softmax", "scaled_dot_product_attention"}
    server._finish_probe(*second)
    assert server._start_probe() is None


def test_a_check_following_up_on_the_probed_exercise_stops_the_probe_and_its_result_is_dropped(server):
    ref = server.references["lesson01"] = _Reference({"softmax", "scaled_dot_product_attention"})
    lesson_id, exercise, follow = server._start_probe()
    other = ({"softmax", "scaled_dot_product_attention"} - {exercise}).pop()
    server._yield_probe("lesson03", [exercise])  # another lesson's exercise of that name: not this probe
    server._yield_probe(lesson_id, [other])  # another exercise: the probe goes on
    assert not follow.child.killed and server.probing is not None
    server._yield_probe(lesson_id, [exercise, other])
    assert follow.child.killed and server.probing is None
    server._finish_probe(lesson_id, exercise, follow)  # the probe's thread, once its child has ended
    assert not follow.finished and follow.child.cleaned and ref.unprobed(exercise)


def test_an_exercise_whose_probe_twice_ends_without_a_result_is_left_to_the_follow_ups(server):
    _FollowUp.outcome = "nothing"
    server.references["lesson01"] = _Reference({"softmax"})
    for _ in range(warm.Server.PROBE_TRIES):
        got = server._start_probe()
        assert got is not None and got[1] == "softmax"
        server._finish_probe(*got)
    assert server._start_probe() is None


def test_a_probe_that_cannot_start_counts_as_a_try(server, monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("no sandbox here")

    server.references["lesson01"] = _Reference({"softmax"})
    monkeypatch.setattr(_FollowUp, "start", classmethod(lambda cls, *a, **k: refuse()))
    for _ in range(warm.Server.PROBE_TRIES):
        assert server._start_probe() is None
    monkeypatch.undo()
    monkeypatch.setattr(grading, "FollowUp", _FollowUp)
    assert server._start_probe() is None and not _FollowUp.started  # given up on
