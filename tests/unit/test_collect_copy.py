"""The course's nbgrader collect copy (course_cli/instructor/nbgrader_exchange.py, issue 45 item 1): what nbgrader's
own do_copy copies from an honest submission, it copies alike; a link (to a file, to a folder, the submission
itself), a FIFO or a socket is neither copied nor followed, and is named in what it returns; a submission over a
bound on all of it (nbgrader's max_dir_size, MAX_ENTRIES) is refused whole, where nbgrader's copy raises."""

from __future__ import annotations

import os
import shutil
import socket
import stat
from pathlib import Path

from course_cli.instructor.nbgrader_exchange import MAX_DEPTH, MAX_ENTRIES, copy_submission, refusal
from nbgrader.utils import ignore_patterns

SECRET = "only the instructor reads this"


def _tree(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None, stat.S_IMODE(p.stat().st_mode))
            for p in sorted(root.rglob("*"))}


def _honest(src: Path) -> Path:
    src.mkdir()
    (src / "lesson01.ipynb").write_text('{"cells": []}')
    (src / "timestamp.txt").write_text("2026-12-06 00:00:00.000000 UTC")
    (src / "data").mkdir()
    (src / "data" / "x.csv").write_text("1,2\n")
    (src / "data" / "run.sh").write_text("#!/bin/sh\n")
    (src / "data" / "run.sh").chmod(0o755)
    (src / ".ipynb_checkpoints").mkdir()
    (src / ".ipynb_checkpoints" / "lesson01-checkpoint.ipynb").write_text("{}")
    (src / "big.bin").write_bytes(b"\0" * 3000)
    (src / "a.pyc").write_bytes(b"\0")
    return src


def test_an_honest_submission_is_copied_as_nbgrader_copies_it(tmp_path):
    src = _honest(tmp_path / "src")
    ignore = [".ipynb_checkpoints", "*.pyc"]
    shutil.copytree(src, tmp_path / "theirs", ignore=ignore_patterns(exclude=ignore, include=["*"], max_file_size=2))
    assert copy_submission(src, tmp_path / "ours", ignore, ["*"], max_file_size=2) == []
    assert _tree(tmp_path / "ours") == _tree(tmp_path / "theirs")
    assert "big.bin" not in _tree(tmp_path / "ours")  # over max_file_size (kB), as nbgrader


def test_links_fifos_and_sockets_are_not_copied_nor_followed(tmp_path):
    secret = tmp_path / "private.txt"
    secret.write_text(SECRET)
    src = _honest(tmp_path / "src")
    (src / "notes.txt").symlink_to(secret)
    (src / "solution.ipynb").symlink_to(secret)
    (src / "data" / "up").symlink_to(tmp_path, target_is_directory=True)
    os.mkfifo(src / "pipe")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(src / "sock"))
    try:
        refused = copy_submission(src, tmp_path / "dest")
    finally:
        sock.close()
    assert sorted(refused) == ["data/up (a symbolic link)", "notes.txt (a symbolic link)", "pipe (a FIFO)",
                               "sock (a socket)", "solution.ipynb (a symbolic link)"]
    got = [p for p in (tmp_path / "dest").rglob("*")]
    assert {str(p.relative_to(tmp_path / "dest")) for p in got} >= {"lesson01.ipynb", "data/x.csv"}
    assert not [p for p in got if p.is_symlink() or not (p.is_file() or p.is_dir())]
    assert not [p for p in got if p.is_file() and SECRET.encode() in p.read_bytes()]
    why = refusal(refused)
    assert "notes.txt (a symbolic link)" in why and "not graded" in why


def test_a_submission_that_is_itself_a_link_copies_nothing(tmp_path):
    src = _honest(tmp_path / "elsewhere")
    (tmp_path / "alice+lesson01+x").symlink_to(src, target_is_directory=True)
    refused = copy_submission(tmp_path / "alice+lesson01+x", tmp_path / "dest")
    assert refused == ["alice+lesson01+x itself (a symbolic link)"]
    assert list((tmp_path / "dest").iterdir()) == []


def test_bounds_folders_too_deep_and_a_class_over_max_dir_size(tmp_path):
    src = tmp_path / "src"
    deep = src.joinpath(*["d"] * (MAX_DEPTH + 2))
    deep.mkdir(parents=True)
    (deep / "f").write_text("x")
    refused = copy_submission(src, tmp_path / "dest")
    assert len(refused) == 1 and "nested deeper" in refused[0]
    (src / "big").write_bytes(b"\1" * 5000)
    # nbgrader's own copy raises here, which ends the collect of every later student: one refused submission
    assert copy_submission(src, tmp_path / "dest2", max_dir_size=2) == ["src (more than 2,000 bytes in all "
                                                                        "(CourseDirectory.max_dir_size))"]
    assert list((tmp_path / "dest2").iterdir()) == []  # nothing half-copied left behind
    many = tmp_path / "many"
    many.mkdir()
    for i in range(MAX_ENTRIES + 1):
        (many / str(i)).touch()
    refused = copy_submission(many, tmp_path / "dest3")
    assert len(refused) == 1 and "more than 10,000 files" in refused[0] and not list((tmp_path / "dest3").iterdir())


def test_what_the_instructor_cannot_read_is_refused_not_a_crash(tmp_path, monkeypatch):
    """A file or folder its student made unreadable (EACCES: as root here, so the open is made to answer as it
    does for an instructor who is not root): refused, and the rest of the class is still collected."""
    import errno

    from course_cli.instructor import nbgrader_exchange

    src = _honest(tmp_path / "src")
    (src / "locked.txt").write_text("x")
    (src / "locked").mkdir()
    real_open = os.open

    def open_(path, flags, *args, **kw):
        if str(path) in ("locked.txt", "locked"):
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_open(path, flags, *args, **kw)

    monkeypatch.setattr(nbgrader_exchange.os, "open", open_)
    refused = copy_submission(src, tmp_path / "dest")
    assert sorted(refused) == ["locked (Permission denied)", "locked.txt (Permission denied)"]
    assert (tmp_path / "dest" / "lesson01.ipynb").is_file()
