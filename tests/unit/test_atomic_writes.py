"""Issue 45 item 2, the writes: every file the course writes outside the sandbox (results CSV/JSON, the journal,
the report, `course check --html`, `course draft-mistake`, Classroom's files, `course init` and `course reset`'s
notebooks and backups) goes through course_cli/atomic.py. Each test plants symbolic links to a file the user
owns (the victim) at the target's name and at every name the course used to choose predictably (`.bak`,
`<name>-<timestamp>.ipynb`), runs the real writer, and asserts the victim is unchanged and the file written."""

from __future__ import annotations

import json
import os
import stat
import time

import pytest
from click.testing import CliRunner

from course_cli import atomic
from course_cli.classes import batch
from course_cli.classes.journal import Journal, JournalError
from course_cli.main import cli
from graders.engine.results import CheckResult, ExerciseResult, LessonResult
from graders.registry import LESSONS

L = LESSONS[0]
MINE = "the user's own file\n"


def victim(tmp_path, name="precious.txt"):
    v = tmp_path / "elsewhere" / name
    v.parent.mkdir(exist_ok=True)
    v.write_text(MINE)
    return v


def nowhere(tmp_path, name):
    """A name in an existing folder where nothing is yet: a dangling link to it lets a plain write create it."""
    (tmp_path / "elsewhere").mkdir(exist_ok=True)
    return tmp_path / "elsewhere" / name


def plant(at, target):
    at.parent.mkdir(parents=True, exist_ok=True)
    at.symlink_to(target)
    return at


def regular(path):
    return stat.S_ISREG(os.lstat(path).st_mode)


def result(name="ana", passed=True):
    res = LessonResult(L.id, f"{name}/{L.notebook}")
    for e in L.exercises:
        status = "passed" if passed else "failed"
        res.exercises.append(ExerciseResult(e.name, status, float(e.points) if passed else 0.0, float(e.points),
                                            [CheckResult("ok", status)]))
    return res


# ----------------------------------------------------------------------------------------------
# The writer itself


def test_a_link_at_the_target_or_its_backup_is_replaced_never_written_through(tmp_path):
    v = victim(tmp_path)
    out = plant(tmp_path / "out.txt", v)
    atomic.write_text(out, "new")
    assert v.read_text() == MINE and regular(out) and out.read_text() == "new"
    plant(tmp_path / "out.txt.bak", v)
    atomic.write_text(out, "newer", backup=True)
    assert v.read_text() == MINE and out.read_text() == "newer" and (tmp_path / "out.txt.bak").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "out.txt", "out.txt.bak"]  # no temporaries


def test_a_replaced_file_keeps_its_mode_and_its_backup_its_content(tmp_path):
    out = tmp_path / "results.csv"
    out.write_text("old")
    out.chmod(0o600)
    atomic.write_text(out, "new", backup=True)
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and out.read_text() == "new"
    assert (tmp_path / "results.csv.bak").read_text() == "old"


def test_create_new_never_replaces_anything_a_dangling_link_included(tmp_path):
    gone = nowhere(tmp_path, "not-yet.txt")
    at = plant(tmp_path / "new.txt", gone)
    with pytest.raises(FileExistsError):
        atomic.create_new(at, b"x")
    assert not gone.exists() and os.path.islink(at)
    atomic.create_new(tmp_path / "fresh.txt", b"x")
    assert (tmp_path / "fresh.txt").read_bytes() == b"x"


def test_open_regular_refuses_a_link_a_fifo_and_a_device_without_waiting(tmp_path):
    v = victim(tmp_path)
    with pytest.raises(OSError, match="symbolic link"):
        atomic.read_bytes(plant(tmp_path / "l", v))
    os.mkfifo(tmp_path / "f")
    with pytest.raises(OSError, match="not a regular file"):
        atomic.read_bytes(tmp_path / "f")
    with pytest.raises(OSError, match="not a regular file"):
        atomic.read_bytes("/dev/zero")  # a device: refused before it is opened, never read forever
    assert atomic.read_bytes(v) == MINE.encode()


# ----------------------------------------------------------------------------------------------
# The course's writers


@pytest.mark.parametrize("suffix", [".csv", ".json"])
def test_course_grade_results_are_not_written_through_a_link(tmp_path, suffix):
    v = victim(tmp_path)
    out = plant(tmp_path / f"results{suffix}", v)
    plant(tmp_path / f"results{suffix}.bak", v)
    batch.write({"ana": result()}, out)
    assert v.read_text() == MINE and regular(out) and "ana" in out.read_text()
    batch.write({"ben": result("ben")}, out, update=True)  # re-grading one student: the file read, then replaced
    assert v.read_text() == MINE and "ana" in out.read_text() and "ben" in out.read_text()
    assert "ben" not in (tmp_path / f"results{suffix}.bak").read_text()  # the file replaced is kept
    (tmp_path / f"results{suffix}").unlink()
    plant(tmp_path / f"results{suffix}", v)
    with pytest.raises(OSError, match="symbolic link"):  # --student over a link: it is not read either
        batch.write({"ben": result("ben")}, out, update=True)
    assert v.read_text() == MINE


def test_course_grade_says_why_it_cannot_write_its_results(tmp_path, monkeypatch):
    """`course grade --student` over a link at OUT: one sentence (a CourseError: exit code 2), no traceback."""
    from course_cli.sandboxed import sandbox

    monkeypatch.setattr(sandbox, "_BWRAP", (True, ""))  # bwrap usable, not probed: the fast tier starts no process
    from course_cli.main import CourseError, _render_class

    v = victim(tmp_path)
    out = plant(tmp_path / "results.json", v)
    with pytest.raises(CourseError, match="could not write .*symbolic link"):
        _render_class(L, {"ben": result("ben")}, str(out), ("ben",), None)
    assert v.read_text() == MINE


def test_the_journal_is_created_and_appended_without_following_a_link(tmp_path):
    gone = nowhere(tmp_path, "created.journal")
    path = plant(tmp_path / "results.json.journal", gone)  # dangling: a plain open(path, "wb") creates it
    Journal.open(path, L.id, "ref", resume=False).close()
    assert not gone.exists() and regular(path)
    v = victim(tmp_path)
    path.unlink()
    plant(path, v)
    os.replace(plant(tmp_path / "l", v), tmp_path / "results.json.journal.bak")
    log = Journal.open(path, L.id, "ref", resume=False)
    log.record("ana", "ana/x.ipynb", "d1", result())
    # another user swaps the journal for a link mid-run: the appends stay in the journal's own file
    os.rename(path, tmp_path / "moved")
    plant(path, v)
    log.record("ben", "ben/x.ipynb", "d2", result("ben"))
    log.close()
    assert v.read_text() == MINE
    lines = (tmp_path / "moved").read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[2])["student"] == "ben"
    with pytest.raises(JournalError, match="symbolic link"):  # resuming from a link: refused, not followed
        Journal.open(path, L.id, "ref", resume=True)
    assert not Journal.matches(path, L.id, "ref") and v.read_text() == MINE
    os.replace(tmp_path / "moved", path)
    with Journal.open(path, L.id, "ref", resume=True) as log:  # an honest resume appends as before
        assert set(log.done) == {"ana", "ben"}
        log.record("cai", "cai/x.ipynb", "d3", result("cai"))
    assert len(path.read_text().splitlines()) == 4


def test_the_report_is_not_written_through_a_link(tmp_path):
    from course_cli.instructor.report import GENERATOR, write_report

    results = tmp_path / "results.json"
    batch.write({"ana": result(), "ben": result("ben", passed=False)}, results)
    gone = nowhere(tmp_path, "created.html")
    out = plant(tmp_path / "report.html", gone)  # dangling: a plain write creates the file it names
    write_report(results, out)
    assert not gone.exists() and regular(out) and "ana" in out.read_text()
    assert os.readlink(tmp_path / "report.html.bak") == str(gone)  # what was at report.html, kept as it was
    # a link to another report of the user's (the page's own marker in it): replaced, that report untouched
    other = victim(tmp_path, "other.html")
    other.write_text(f'<meta name="generator" content="{GENERATOR}"> the other class')
    out.unlink()
    plant(out, other)
    write_report(results, out)
    assert other.read_text().endswith("the other class") and regular(out) and "ana" in out.read_text()
    write_report(results, out)  # its own page is simply replaced
    assert regular(out) and "ana" in out.read_text()


def test_course_check_html_is_not_written_through_a_link(tmp_path, monkeypatch):
    from course_cli.sandboxed import sandbox

    monkeypatch.setattr(sandbox, "_BWRAP", (True, ""))  # bwrap usable, not probed: the fast tier starts no process
    import course_cli.student.checking as checking

    v = victim(tmp_path, "page.html")
    out = plant(tmp_path / "check.html", v)
    monkeypatch.setattr(checking, "check_and_record", lambda *a, **k: (result(), []))
    r = CliRunner().invoke(cli, ["check", L.id, "--solution", "--cold", "--html", str(out)])
    assert r.exit_code == 0, r.output
    assert v.read_text() == MINE and regular(out) and L.id in out.read_text()
    assert os.path.islink(tmp_path / "check.html.bak")
    page = out.read_text()
    r = CliRunner().invoke(cli, ["check", L.id, "--solution", "--cold", "--html", str(out)])
    assert r.exit_code == 0 and (tmp_path / "check.html.bak").read_text() == page  # the page replaced, kept


def test_draft_mistake_is_not_written_through_a_link(tmp_path, monkeypatch):
    import course_cli.instructor.unnamed as unnamed

    gone = nowhere(tmp_path, "created.py")
    results = tmp_path / "results.json"
    batch.write({"ana": result()}, results)
    group = type("G", (), {"id": "x:1", "headline": lambda self: "1 student: a group"})()
    monkeypatch.setattr(unnamed, "find_group", lambda *a: group)
    monkeypatch.setattr(unnamed, "draft", lambda *a: "MISTAKE = 1\n")
    out = plant(tmp_path / "draft.py", gone)  # dangling: a plain write creates the file it names
    r = CliRunner().invoke(cli, ["draft-mistake", str(results), "x:1", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert not gone.exists() and regular(out) and out.read_text() == "MISTAKE = 1\n"
    assert os.readlink(tmp_path / "draft.py.bak") == str(gone)


def test_classroom_files_are_not_written_through_a_link(tmp_path):
    from course_cli.instructor import classroom

    gone = nowhere(tmp_path, "created.yml")
    wf = plant(tmp_path / "repo" / ".github" / "workflows" / "classroom.yml", gone)  # dangling
    v = victim(tmp_path)
    aj = plant(tmp_path / "repo" / ".github" / "classroom" / "autograding.json", v)
    done = dict(classroom.write(tmp_path / "repo", [L], "attention-course"))
    assert not gone.exists() and regular(wf) and done[wf] == "wrote" and "course_cli.instructor.classroom check" in wf.read_text()
    assert v.read_text() == MINE and regular(aj) and done[aj] == "wrote"
    assert os.readlink(aj.with_name(aj.name + ".bak")) == str(v)


def test_course_init_writes_no_notebook_through_a_link(tmp_path):
    from course_cli.student.workspace_ops import init

    gone = nowhere(tmp_path, "created-by-init.ipynb")
    ws = tmp_path / "ws"
    plant(ws / "lessons" / L.notebook, gone)  # dangling: a plain copy would create it
    copied, kept = init(ws)
    assert not gone.exists() and ws / "lessons" / L.notebook in kept
    assert len(copied) == len(LESSONS) - 1 and all(regular(p) for p in copied)


def test_course_reset_backs_up_and_restores_without_following_links(tmp_path):
    from course_cli.student.workspace import MARKER
    from course_cli.student.workspace_ops import reset

    v = victim(tmp_path, "mine.ipynb")
    ws = tmp_path / "ws"
    nb = plant(ws / "lessons" / L.notebook, v)
    # dangling links at every backup name the next seconds would choose
    backups = ws / MARKER / "backups"
    made = nowhere(tmp_path, "made")
    made.mkdir()
    now = time.time()
    for s in range(-1, 4):
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now + s))
        for n in ("", "-2", "-3"):
            plant(backups / f"{nb.stem}-{stamp}{n}.ipynb", made / f"{stamp}{n}")
    said = reset(L, nb, ws)
    assert v.read_text() == MINE and regular(nb) and json.loads(nb.read_text())["cells"]
    assert not list(made.iterdir())  # no planted backup name was written through
    saved = [p for p in backups.iterdir() if regular(p)]
    assert len(saved) == 1 and saved[0].read_text() == MINE and str(saved[0]) in said
