"""Every total capped, the child alone pays (issue 30, item 3): attacks that fill the output folder, write to
the sandbox's / and /dev, fill /dev/shm, fork processes that together take more memory than the cap, and leave
a folder nested 1,500 deep. Each asserts the attacker's outcome (an error that says why), that the grader and
the classmates are untouched, and that nothing is left behind."""

from __future__ import annotations

import csv
import io
import os
import tempfile

import nbformat
import pytest
from click.testing import CliRunner

from course_cli.main import cli
from course_cli.sandboxed import sandbox
from course_cli.sandboxed.grading import grade_notebook
from graders.registry import find_lesson
from harness import set_limit

pytestmark = pytest.mark.slow
L01 = find_lesson("lesson01")
needs_sandbox = pytest.mark.skipif(not sandbox.bwrap_status()[0], reason=f"bubblewrap unavailable: {sandbox.bwrap_status()[1]}")


@pytest.fixture
def own_tmp(tmp_path, monkeypatch):
    """The children's output folders in a folder of this test's own (other runs use /tmp too)."""
    d = tmp_path / "children"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    return d


def notebook(path, cell):
    nb = nbformat.read(L01.student_path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(cell))
    nbformat.write(nb, path)
    return path


# many files of 8 MiB each (under the one-file limit) in the output folder
FILL_OUT = '''
import json, os, sys
out = json.load(open(sys.argv[1]))["out"]
for i in range(400):
    try:
        with open(os.path.join(out, f"fill-{i}"), "wb") as f:
            f.write(b"x" * (8 << 20))
    except OSError:
        break
'''

# writes where the sandbox has no room: /, /dev, past /dev/shm's and /tmp's sizes; reports what it managed
WRITES = '''
import os
got = []
for path in ("/evil", "/dev/evil", "/usr/evil"):
    try:
        open(path, "w").write("x")
        got.append(path)
    except OSError:
        pass
for folder in ("/dev/shm", "/tmp"):
    n = 0
    try:
        with open(folder + "/fill", "wb") as f:
            for _ in range(1024):
                f.write(b"x" * (1 << 20))
                f.flush()
                n += 1
    except OSError:
        pass
    if n >= 512:
        got.append(f"{folder} took {n} MiB")
msg = "ATTACK-SUCCEEDED " + ", ".join(got) if got else "writes refused"
def softmax(x, dim=-1):
    raise RuntimeError(msg)
'''

DEEP = '''
import os
os.chdir(os.environ.get("TMPDIR", "/tmp"))
import json, sys
out = json.load(open(sys.argv[1]))["out"]
os.chdir(out)
for i in range(1500):
    os.mkdir("d")
    os.chdir("d")
open("leaf", "w").write("x")
'''

# processes that, together, take more memory than the cap (each under its own address-space limit)
FORK_MEMORY = '''
import os, time
pids = []
for i in range(5):
    pid = os.fork()
    if pid == 0:
        try:
            b = bytearray(700 << 20)
            for j in range(0, len(b), 4096):
                b[j] = 1
            time.sleep(30)
        finally:
            os._exit(0)
    pids.append(pid)
for pid in pids:
    os.waitpid(pid, 0)
'''


@needs_sandbox
def test_filling_the_output_folder_is_that_students_error_alone(tmp_path, monkeypatch, own_tmp):
    set_limit(monkeypatch, "cell_timeout", 20.0)
    subs = tmp_path / "subs"
    for student in ("alice", "bob", "mallory"):
        (subs / student / "lesson01").mkdir(parents=True)
    for student in ("alice", "bob"):
        nbformat.write(nbformat.read(L01.solution_path, as_version=4), subs / student / "lesson01" / L01.notebook)
    notebook(subs / "mallory" / "lesson01" / L01.notebook, FILL_OUT)
    for run in range(2):  # and the next run works
        out = tmp_path / f"r{run}.csv"
        r = CliRunner().invoke(cli, ["grade", str(subs), "--lesson", "lesson01", "--jobs", "2", "--out", str(out)])
        assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
        rows = list(csv.DictReader(io.StringIO(out.read_text())))
        totals = {row["student"]: float(row["points"]) for row in rows if row["exercise"] == "TOTAL"}
        assert totals == {"alice": 10.0, "bob": 10.0, "mallory": 0.0}, totals
        reasons = " ".join(row["reason"] for row in rows if row["student"] == "mallory")
        assert "output limit exceeded" in reasons, reasons
    assert not os.listdir(own_tmp)


class DiskWatch:
    """The most bytes a folder held while a run went on (sampled every 5 ms, in a thread)."""

    def __init__(self, folder):
        import threading

        self.folder, self.most, self.stop = folder, 0, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stop.is_set():
            self.most = max(self.most, sandbox.tree_size(self.folder))
            self.stop.wait(0.005)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


needs_sized_tmpfs = pytest.mark.skipif(not (sandbox.bwrap_status()[0] and sandbox._bwrap_sizes()),
                                       reason="needs bubblewrap >= 0.7 (--size): older ones fall back to a watched "
                                              "folder on the grader's disk")


@needs_sized_tmpfs
def test_what_the_child_writes_never_reaches_the_graders_disk(tmp_path, own_tmp):
    """The output folder is a tmpfs of the child's own: the kernel refuses its writes past the cap, and the
    grader's disk (where the host folder lies) never holds more than the job file, however fast it writes."""
    path = notebook(tmp_path / "fill.ipynb", FILL_OUT)
    with DiskWatch(own_tmp) as watch:
        result = grade_notebook(L01, path)
    assert watch.most < 2**20, watch.most
    assert "output limit exceeded" in str(result.to_dict())
    assert not os.listdir(own_tmp)


@needs_sandbox
def test_no_room_on_root_dev_or_past_the_tmpfs_sizes(tmp_path):
    result = grade_notebook(L01, notebook(tmp_path / "w.ipynb", WRITES))
    text = str(result.to_dict())
    assert "writes refused" in text, text[:2000]
    assert "ATTACK-SUCCEEDED" not in text


@needs_sandbox
def test_a_folder_nested_1500_deep_is_gone_after_grading(tmp_path, own_tmp):
    result = grade_notebook(L01, notebook(tmp_path / "deep.ipynb", DEEP))
    assert result.score == 0.0
    assert not os.listdir(own_tmp)


def test_remove_tree_removes_deep_and_unreadable_folders(tmp_path):
    top = tmp_path / "top"
    cur = top
    cur.mkdir()
    os.chdir(cur)
    for _ in range(1500):
        os.mkdir("d")
        os.chdir("d")
    os.chdir(tmp_path)
    (top / "locked").mkdir()
    (top / "locked" / "f").write_text("x")
    os.chmod(top / "locked", 0)
    sandbox.remove_tree(top)
    assert not top.exists()


@needs_sandbox
@pytest.mark.skipif(sandbox._memory_base() is None, reason="no memory cgroup can be made here")
def test_memory_of_forked_processes_together_kills_the_child_not_the_grader(tmp_path, monkeypatch):
    set_limit(monkeypatch, "memory", 2 * 2**30)
    set_limit(monkeypatch, "cell_timeout", 40.0)
    result = grade_notebook(L01, notebook(tmp_path / "fork.ipynb", FORK_MEMORY))
    assert result.score == 0.0
    text = " ".join(result.notes) + str(result.to_dict())
    assert "out of memory" in text, text[:2000]
