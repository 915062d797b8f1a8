"""Issue 45, what remained of "no file is written through a predictable name": the instructor's and the
course's own writers (Gradescope's zip, `course pack`'s distribution, the cluster's certificates, the warm
server's files, the child build cache, `course nbgrader`'s course) go through course_cli/atomic.py. Each test
plants a link (to a file or folder the user owns: the victim) at the name the writer used, runs the real
writer, and asserts the victim is unchanged; each failed before the change."""

from __future__ import annotations

import io
import os
import stat
import zipfile

import pytest

from test_atomic_writes import MINE, regular, victim  # the same victim and checks as the other writers'

from course_cli import atomic
from graders.registry import LESSONS

L = LESSONS[0]


# ----------------------------------------------------------------------------------------------
# The new primitives


def test_open_append_refuses_a_link_and_a_fifo_and_creates_private(tmp_path):
    v = victim(tmp_path)
    (tmp_path / "log").symlink_to(v)
    with pytest.raises(OSError, match="symbolic link"):
        atomic.open_append(tmp_path / "log")
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(OSError, match="not a regular file"):
        atomic.open_append(tmp_path / "fifo")  # never waited on
    with atomic.open_append(tmp_path / "new.log") as f:
        f.write(b"a")
    with atomic.open_append(tmp_path / "new.log") as f:
        f.write(b"b")
    assert v.read_text() == MINE and (tmp_path / "new.log").read_bytes() == b"ab"
    assert stat.S_IMODE(os.stat(tmp_path / "new.log").st_mode) == 0o600


def test_staged_folder_is_renamed_whole_and_never_into_a_link(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with atomic.staged_folder(tmp_path / "dist") as stage:
        assert not (tmp_path / "dist").exists()  # nothing at the name until it is complete
        (stage / "a.txt").write_text("x")
    assert (tmp_path / "dist" / "a.txt").read_text() == "x"
    (tmp_path / "link").symlink_to(elsewhere)
    with pytest.raises(OSError):
        with atomic.staged_folder(tmp_path / "link") as stage:
            (stage / "a.txt").write_text("x")
    assert not list(elsewhere.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dist", "elsewhere", "link"]  # the stage removed


# ----------------------------------------------------------------------------------------------
# The writers


def test_gradescope_zip_is_not_written_through_a_link(tmp_path):
    from course_cli.instructor.gradescope import MARKER, build_zip

    v = victim(tmp_path)
    gone = tmp_path / "elsewhere" / "created.zip"
    out = tmp_path / "autograder.zip"
    out.symlink_to(v)
    # the name the zip used to be staged under (pid-named): a dangling link there made a plain open create it
    (tmp_path / f"autograder.zip.{os.getpid()}.tmp").symlink_to(gone)
    names = build_zip(L, out)
    assert v.read_text() == MINE and not gone.exists()
    assert regular(out) and MARKER in zipfile.ZipFile(out).namelist() and MARKER in names
    assert os.readlink(tmp_path / "autograder.zip.bak") == str(v)  # what was there, kept as it was
    first = out.read_bytes()
    build_zip(L, out)  # its own zip: replaced, no backup of it
    assert out.read_bytes() == first and os.readlink(tmp_path / "autograder.zip.bak") == str(v)
    assert MARKER in zipfile.ZipFile(io.BytesIO(first)).namelist()


def test_course_gradescope_into_a_missing_folder_is_one_sentence(tmp_path):
    from click.testing import CliRunner

    from course_cli.main import cli

    r = CliRunner().invoke(cli, ["gradescope", L.id, "--out", str(tmp_path / "no" / "such" / "a.zip")])
    assert r.exit_code == 2 and "could not write" in r.output and "Traceback" not in r.output, r.output


def test_the_distribution_is_never_written_into_a_folder_swapped_for_a_link(tmp_path, monkeypatch):
    """`course pack DIR` checks DIR is empty, then writes: another user who replaces the empty DIR by a link to
    a folder of the victim's had the distribution written there. Now it is built aside and renamed: refused."""
    from course_cli.instructor import pack

    monkeypatch.setattr(pack, "LESSONS", [])  # the copy of the code only: no reference children
    mine = tmp_path / "elsewhere"
    mine.mkdir()
    target = tmp_path / "dist"
    real_iterdir = type(target).iterdir

    def swapped(self):  # the emptiness check passes, then the folder is a link
        out = list(real_iterdir(self))
        if self == target:
            target.rmdir()
            target.symlink_to(mine)
        return iter(out)

    target.mkdir()
    with monkeypatch.context() as m:
        m.setattr(type(target), "iterdir", swapped)
        with pytest.raises(OSError):
            pack.make_pack(target)
    assert not list(mine.iterdir())
    target.unlink()
    done = pack.make_pack(target)
    assert done["target"] == target and (target / "graders" / "_distribution.py").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".dist.")]  # no stage left behind


def test_a_child_build_planted_at_its_predictable_name_is_never_used(tmp_path, monkeypatch):
    """The folder a sandboxed check binds as graders/ is named after a hash anyone can compute; one planted
    there (a link, or a folder others can write) would decide every check. Before: returned as it was."""
    from course_cli.sandboxed import sandbox
    from course_cli.sandboxed.child_build import ChildBuildUntrusted, child_build

    cache = tmp_path / "cache"
    built = child_build(cache, L)
    assert (built / ".complete").is_file() and stat.S_IMODE(os.stat(built).st_mode) & 0o022 == 0
    assert child_build(cache, L) == built  # the user's own build: used again
    os.rename(built, tmp_path / "moved")
    forged = tmp_path / "forged"
    forged.mkdir()
    (forged / ".complete").write_text("")
    built.symlink_to(forged)
    with pytest.raises(ChildBuildUntrusted, match="symbolic link"):
        child_build(cache, L)
    built.unlink()
    os.rename(forged, built)
    os.chmod(built, 0o777)  # a real folder, but anyone can write into it
    with pytest.raises(ChildBuildUntrusted, match="not a build of the graders"):
        child_build(cache, L)
    monkeypatch.setenv("COURSE_CACHE_DIR", str(cache))  # read by settings.cache_dir(), at each use
    with pytest.raises(sandbox.SandboxFailed, match="not a build of the graders"):  # the grader's error, never a 0
        sandbox._child_build(L.module)
    os.chmod(built, 0o700)
    (built / ".complete").unlink()
    with pytest.raises(ChildBuildUntrusted):  # never renamed into place without its mark: not the user's build
        child_build(cache, L)
    os.chmod(cache, 0o777)
    with pytest.raises(ChildBuildUntrusted, match="writable by other users"):
        child_build(tmp_path / "cache", L)


def test_course_nbgrader_writes_nothing_through_a_link(tmp_path):
    from course_cli.instructor.nbgrader_course import make_course

    v = victim(tmp_path, "notebook.ipynb")
    gone = tmp_path / "elsewhere" / "created.py"
    course = tmp_path / "course"
    nb = course / "source" / L.id / L.notebook
    nb.parent.mkdir(parents=True)
    nb.symlink_to(v)
    (course / "nbgrader_config.py").symlink_to(gone)  # dangling: a plain write created the file it names
    done = make_course(course)
    assert v.read_text() == MINE and not gone.exists()
    assert regular(nb) and nb.read_bytes() == L.solution_path.read_bytes()
    assert course / "nbgrader_config.py" in done["kept"] and regular(course / "README.md")
    assert not list(nb.parent.glob("*.bak"))  # nothing in source/ that nbgrader would release
