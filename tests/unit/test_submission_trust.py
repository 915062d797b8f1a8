"""Issue 45/50: what a submission is (a regular file inside its root, read without following links, within
bounds), whose folder a workspace is, and the atomic writer. Each test tries the attack on the real reader."""

from __future__ import annotations

import json
import os
import pwd

import nbformat
import pytest

from course_cli.sandboxed import notebook as nbmod
from course_cli.sandboxed.notebook import SubmissionRefused, read_notebook, submission_bytes
from graders.registry import LESSONS

SOLUTION = LESSONS[0].solution_path


def _honest(path):
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), path)
    return path


def test_an_honest_notebook_is_read(tmp_path):
    nb = read_notebook(_honest(tmp_path / "a.ipynb"), tmp_path)
    assert nb.cells[0].source == "x = 1"
    assert read_notebook(SOLUTION).cells  # the largest real notebooks are far inside the bounds
    assert os.path.getsize(max((l.solution_path for l in LESSONS), key=os.path.getsize)) * 30 < nbmod.MAX_BYTES


def test_a_link_to_the_solution_is_refused(tmp_path):
    (tmp_path / "alice").mkdir()
    link = tmp_path / "alice" / "lesson.ipynb"
    link.symlink_to(SOLUTION)
    with pytest.raises(SubmissionRefused, match="symbolic link"):
        read_notebook(link, tmp_path)
    with pytest.raises(SubmissionRefused, match="symbolic link"):
        read_notebook(link)  # default root: its own folder


def test_a_linked_folder_is_refused(tmp_path):
    """submitted/bob/lesson01 -> alice's folder (or nbgrader's source/): the parent is a link."""
    (tmp_path / "alice" / "lesson01").mkdir(parents=True)
    _honest(tmp_path / "alice" / "lesson01" / "nb.ipynb")
    (tmp_path / "bob").mkdir()
    (tmp_path / "bob" / "lesson01").symlink_to(tmp_path / "alice" / "lesson01")
    with pytest.raises(SubmissionRefused, match="symbolic link"):
        read_notebook(tmp_path / "bob" / "lesson01" / "nb.ipynb", tmp_path)
    with pytest.raises(SubmissionRefused, match="outside"):
        read_notebook(tmp_path / "alice" / "lesson01" / "nb.ipynb", tmp_path / "bob")


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "nb.ipynb"
    os.mkfifo(fifo)
    with pytest.raises(SubmissionRefused, match="FIFO"):
        submission_bytes(fifo, tmp_path)  # O_NONBLOCK: returns at once, no writer needed


def test_a_device_is_refused(tmp_path):
    with pytest.raises(SubmissionRefused, match="device"):
        submission_bytes("/dev/zero", "/dev")


def test_a_sparse_huge_file_is_refused_before_it_is_read(tmp_path):
    big = tmp_path / "nb.ipynb"
    with open(big, "wb") as f:
        f.truncate(8 * 2**30)  # 8 GiB apparent, nothing on disk
    with pytest.raises(SubmissionRefused, match="over the grader's bound"):
        read_notebook(big, tmp_path)


def test_a_deeply_nested_notebook_is_refused(tmp_path):
    deep = tmp_path / "nb.ipynb"
    for depth in (100, 100_000):
        nb = json.loads(nbformat.writes(nbformat.v4.new_notebook()))
        nb["metadata"]["x"] = json.loads("[" * min(depth, 500) + "]" * min(depth, 500)) if depth < 1000 else 0
        text = json.dumps(nb) if depth < 1000 else json.dumps(nb).replace('"x": 0', '"x": ' + "[" * depth + "]" * depth)
        deep.write_text(text)
        with pytest.raises(SubmissionRefused, match="deeper"):
            read_notebook(deep, tmp_path)


def test_many_cells_and_a_huge_output_are_refused(tmp_path):
    many = tmp_path / "many.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("") for _ in range(nbmod.MAX_CELLS + 1)]), many)
    with pytest.raises(SubmissionRefused, match="cells"):
        read_notebook(many, tmp_path)
    huge = tmp_path / "huge.ipynb"
    cell = nbformat.v4.new_code_cell("x = 1", outputs=[nbformat.v4.new_output("stream", name="stdout",
                                                                            text="y" * (nbmod.MAX_BYTES + 10))])
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), huge)
    with pytest.raises(SubmissionRefused, match="over the grader's bound"):
        read_notebook(huge, tmp_path)


def test_the_grader_gives_not_graded_never_a_score(tmp_path):
    """grade_notebook (every seat's call) on a link to the solution: NOT GRADED with the reason, no child run."""
    from course_cli.sandboxed.grading import grade_notebook

    link = tmp_path / "nb.ipynb"
    link.symlink_to(SOLUTION)
    result = grade_notebook(LESSONS[0], link, root=tmp_path)
    assert result.not_graded and "symbolic link" in result.not_graded
    assert result.score is None and all(ex.status == "error" for ex in result.exercises)  # no score


def test_the_batch_refuses_before_any_worker(tmp_path):
    """course grade's batch: the hostile ones NOT GRADED with their reason, without a child (no reference)."""
    from course_cli.classes import batch

    lesson = LESSONS[0]
    subs = []
    for student, make in (("linked", lambda p: p.symlink_to(SOLUTION)), ("fifo", os.mkfifo),
                          ("sparse", lambda p: open(p, "wb").truncate(2**33))):
        folder = tmp_path / student / lesson.id
        folder.mkdir(parents=True)
        make(folder / lesson.notebook)
        subs.append((student, folder / lesson.notebook))
    found, _, missing = batch.find_class(tmp_path, lesson)
    assert sorted(s for s, _ in found) == ["fifo", "linked", "sparse"] and not missing
    results = batch.grade_class(lesson, subs, root=tmp_path)
    assert set(results) == {"linked", "fifo", "sparse"}
    assert "symbolic link" in results["linked"].not_graded
    assert "FIFO" in results["fifo"].not_graded
    assert "bound" in results["sparse"].not_graded


# ---- workspaces


def _other_uid() -> int:
    """Another user's id (root may chown to it; no user is created: the fast tier starts no process)."""
    try:
        return pwd.getpwnam("nobody").pw_uid
    except KeyError:
        return 65534


@pytest.mark.skipif(os.geteuid() != 0, reason="planting a folder owned by another user needs root")
def test_a_planted_workspace_is_refused(tmp_path, monkeypatch):
    from course_cli.student.workspace import UnsafeWorkspace, locate

    monkeypatch.delenv("COURSE_WORKSPACE", raising=False)
    shared = tmp_path / "shared"
    (shared / ".course").mkdir(parents=True)
    (shared / ".jupyter").mkdir()
    os.chown(shared / ".course", _other_uid(), -1)
    (shared / "victim").mkdir()
    with pytest.raises(UnsafeWorkspace, match=r"\.course is owned by uid .*chown"):
        locate(shared / "victim")
    os.chown(shared / ".course", 0, -1)
    os.chmod(shared / ".jupyter", 0o777)
    with pytest.raises(UnsafeWorkspace, match=r"\.jupyter is writable by others"):
        locate(shared / "victim")
    os.chmod(shared / ".jupyter", 0o755)
    assert locate(shared / "victim") == (shared, "marker")


def test_progress_is_written_through_an_unpredictable_name(tmp_path):
    """A link planted at the old predictable temporary name (progress.<pid>.tmp) is never written through."""
    from types import SimpleNamespace

    from course_cli.student.progress import ProgressStore

    victim = tmp_path / "precious.txt"
    victim.write_text("mine")
    store = ProgressStore(tmp_path)
    store.dir.mkdir()
    for pid in range(os.getpid() - 2, os.getpid() + 3):
        (store.dir / f"progress.{pid}.tmp").symlink_to(victim)
    (store.dir / "progress.lock").symlink_to(victim)
    ex = SimpleNamespace(id="sdpa", status="passed", points=1.0)
    try:
        store.record(SimpleNamespace(lesson="lesson01", score=1.0, max_score=1.0, exercises=[ex]))
    except OSError:
        pass  # the planted lock is refused (O_NOFOLLOW), not followed
    assert victim.read_text() == "mine"
    (store.dir / "progress.lock").unlink()
    store.record(SimpleNamespace(lesson="lesson01", score=1.0, max_score=1.0, exercises=[ex]))
    assert victim.read_text() == "mine" and store.load()["lessons"]["lesson01"]["best"]["sdpa"]["status"] == "passed"
    assert not [p for p in store.dir.iterdir() if p.name.endswith(".tmp") and not p.is_symlink()]
