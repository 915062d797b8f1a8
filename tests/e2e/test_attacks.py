"""Attacks on class grading, one per way a submission could gain points, hurt a classmate, escape its limits,
or crash or hang the grader; each in every mode it applies to: `course check` (grade_notebook), `course grade`
(a batch with honest classmates) and `nbgrader autograde` (the real pipeline, tests/test_nbgrader.py's way).

Every attack starts from lesson 01's untouched student notebook (0 points) plus a hostile cell or function. An
attack cell that manages what the sandbox must prevent raises `ATTACK-SUCCEEDED: ...`, which would show in the
result's notes; each test also asserts the outcome itself (no points gained, classmates' marks and files intact,
the batch complete, no process left behind).

These need bubblewrap (Debian's `bubblewrap`, installed by .ci/run); without it they are skipped, except the
read-back attacks, which the parent defeats with or without the sandbox.
"""

from __future__ import annotations

import csv
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest
from click.testing import CliRunner

from course_cli.sandboxed import grading, sandbox
from course_cli.sandboxed.grading import grade_notebook
from course_cli.main import cli
from graders.registry import ROOT, find_lesson
from harness import with_code
from harness import peak_rss_since, peak_rss_start, set_limit
from nbgrader_cli import nbgrader_argv

pytestmark = pytest.mark.slow
L01 = find_lesson("lesson01")
SOFTMAX, SDPA = "softmax", "scaled_dot_product_attention"
SANDBOX = sandbox.bwrap_status()[0]
# COURSE_ATTACKS_ANYWAY=1 runs them without the sandbox too, to see which attacks it is that stops
needs_sandbox = pytest.mark.skipif(not SANDBOX and os.environ.get("COURSE_ATTACKS_ANYWAY") != "1",
                                   reason=f"bubblewrap unavailable: {sandbox.bwrap_status()[1]}")
SECRET = "s3cr3t-token-4c1d"


def attack_notebook(tmp_path: Path, name: str, cell: str | None = None, softmax: str | None = None) -> Path:
    """Lesson 01's stub with a hostile cell added after the setup cells, or a hostile `softmax`."""
    path = with_code(L01, SOFTMAX, softmax, tmp_path, f"{name}.ipynb", base=L01.student_path) if softmax \
        else tmp_path / f"{name}.ipynb"
    nb = nbformat.read(path if softmax else L01.student_path, as_version=4)
    if cell:  # last, so that what it defines is what gets graded
        nb.cells.append(nbformat.v4.new_code_cell(cell))
    nbformat.write(nb, path)
    return path


def solved_copy(tmp_path: Path, name: str) -> Path:
    nb = nbformat.read(L01.solution_path, as_version=4)
    path = tmp_path / f"{name}.ipynb"
    nbformat.write(nb, path)
    return path


def notes_text(result) -> str:
    return " ".join(result.notes) + json.dumps(result.to_dict())


def no_traceback(result) -> None:
    text = notes_text(result)
    assert "Traceback (most recent call last)" not in text
    assert 'File "/' not in text


# --- the attacks -------------------------------------------------------------------------------------------

READ_SOLUTIONS = f'''
import glob, json, os
found = []
try:
    from graders.registry import SOLUTIONS_DIR
    found += glob.glob(os.path.join(str(SOLUTIONS_DIR), "*.ipynb"))
except Exception:
    pass
for pattern in ({str(ROOT / "solutions" / "*.ipynb")!r}, "/*/solutions/*.ipynb", "/*/*/solutions/*.ipynb"):
    found += glob.glob(pattern)
for path in found:
    nb = json.load(open(path))
    for c in nb["cells"]:
        src = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        if c["cell_type"] == "code" and ("def softmax" in src or "def scaled_dot_product_attention" in src):
            exec(src)
try:
    from graders.parts import import_lesson
    _l = import_lesson("lesson01")
    softmax, scaled_dot_product_attention = _l.softmax, _l.scaled_dot_product_attention
except Exception:
    pass
'''

# Rewrites every reference observation file it can find (other children's output folders, the disk cache)
POISON = '''
import glob, os, torch
targets = glob.glob("/tmp/course-*/*.pt") + glob.glob("/tmp/**/attention-course/*.pt", recursive=True)
targets += glob.glob(os.path.expanduser("~/.cache/attention-course/*.pt"))
targets += glob.glob(os.environ.get("COURSE_CACHE_DIR", "/nonexistent") + "/*.pt")
for path in targets:
    try:
        torch.save({"checks": {}, "forbidden": [], "mutated": []}, path)
    except OSError:
        pass
'''


def daemon_cell(marker: Path, victims: list[Path]) -> str:
    """Double fork + setsid, then a fresh Python named by `marker.name` in its command line, that outlives
    the grading (if it can) and then edits the results."""
    script = f"""
import signal, sys, time
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
time.sleep(2.5)
for victim in {[str(v) for v in victims]!r}:
    try:
        with open(victim, "a") as f:
            f.write("\\nmallory,lesson01,softmax,passed,4.0,4.0,,,x\\n")
    except OSError:
        pass
try:
    open({str(marker)!r}, "w").write("ATTACK-SUCCEEDED: a daemon outlived the grading")
except OSError:
    pass
"""
    return f'''
import os, sys
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", {script!r}, {marker.name!r}])
    os._exit(0)
os.wait()
'''


def classmate_cell(victim: Path) -> str:
    return f'''
try:
    text = open({str(victim)!r}).read()
    open({str(victim)!r}, "w").write(text.replace("return", "return 0 *"))
    raise RuntimeError("ATTACK-SUCCEEDED: changed a classmate's notebook")
except OSError:
    pass
'''


CGROUP = '''
import os
hits = []
for line in open("/proc/self/cgroup").read().splitlines():
    _, controllers, path = line.split(":", 2)
    for root in ("/sys/fs/cgroup/pids", "/sys/fs/cgroup"):
        for target in (root + path + "/pids.max", root + "/cgroup.procs"):
            try:
                with open(target, "w") as f:
                    f.write("max" if target.endswith("pids.max") else str(os.getpid()))
                hits.append(target)
            except OSError:
                pass
if hits:
    raise RuntimeError("ATTACK-SUCCEEDED: wrote " + ", ".join(hits))
'''

ENV_SECRETS = '''
import glob, os
found = [f"{k}={v}" for k, v in os.environ.items() if "SECRET" in k or "TOKEN" in k]
for p in glob.glob("/proc/[0-9]*/environ"):
    try:
        found += [x.decode(errors="replace") for x in open(p, "rb").read().split(b"\\0") if b"SECRET" in x]
    except OSError:
        pass
if found:
    raise RuntimeError("ATTACK-SUCCEEDED: read the grader's secrets: " + ", ".join(found))
'''

HOME = '''
import os
seen = []
for p in ("/root", os.path.expanduser("~"), "/home", "/etc/shadow", "/work", "/tmp"):
    try:
        seen += [os.path.join(p, x) for x in os.listdir(p)]
    except OSError:
        pass
import json, sys
own = json.load(open(sys.argv[1]))["out"]  # the child's own output folder is the one it may see
leaks = [p for p in seen if p != own and ("solutions" in p or "tests" in p or ".cache" in p or "course-" in p
                                          or "shadow" in p)]
try:
    open("/etc/shadow").read()
    leaks.append("/etc/shadow")
except OSError:
    pass
if leaks:
    raise RuntimeError("ATTACK-SUCCEEDED: saw " + ", ".join(leaks[:5]))
'''


def network_cell(port: int) -> str:
    return f'''
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
    raise RuntimeError("ATTACK-SUCCEEDED: reached the grader's machine on port {port}")
except OSError:
    pass
'''


SIGNALS = '''
import signal
for s in (signal.SIGALRM, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGTERM, signal.SIGINT})
while True:
    pass
'''

# Forged read-backs: at probe time the function writes what it likes into its own output folder and exits
FORGE_HEAD = '''
def softmax(x, dim=-1):
    import io, json, os, sys, zipfile, torch
    out = json.load(open(sys.argv[1]))["out"]
    target = os.path.join(out, "obs-scaled_dot_product_attention.pt")
'''
FORGE_TAIL = '''
    open(os.path.join(out, "progress"), "w").write("done")
    os._exit(0)
'''
FORGES = {
    "fifo": '''
    for name in ("cells.json", "obs-scaled_dot_product_attention.pt", "env.json"):
        p = os.path.join(out, name)
        if os.path.exists(p): os.remove(p)
        os.mkfifo(p)
''',
    "symlink": '''
    os.symlink("/dev/zero", target)
    if os.path.exists(os.path.join(out, "cells.json")): os.remove(os.path.join(out, "cells.json"))
    os.symlink("/dev/urandom", os.path.join(out, "cells.json"))
''',
    "deflate_bomb": '''
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        with zf.open("archive/data.pkl", "w", force_zip64=True) as f:
            block = bytes(1 << 20)
            for _ in range(512):  # 512 MiB of zeros in a file of a few MB
                f.write(block)
''',
    "quantized": '''
    q = torch.quantize_per_tensor(torch.randn(4), 0.1, 0, torch.qint8)
    torch.save({"checks": {"k": {"output": q}}, "forbidden": [], "mutated": []}, target)
''',
    "nested": '''
    n = torch.nested.nested_tensor([torch.randn(2), torch.randn(3)])
    torch.save({"checks": {"k": {"output": n}}, "forbidden": [], "mutated": []}, target)
''',
    "sparse": '''
    torch.save({"checks": {"k": {"output": torch.eye(3).to_sparse()}}, "forbidden": [], "mutated": []}, target)
''',
    "expanded": '''
    huge = torch.zeros(1).expand(1 << 20, 1 << 20)
    torch.save({"checks": {"k": {"output": huge}}, "forbidden": [], "mutated": []}, target)
''',
    "odd_layout": '''
    torch.save({"checks": {"k": "not a dict"}, "forbidden": [1, 2], "mutated": {"a": 1},
                "missing": "yes"}, target)
''',
    "deep_json": '''
    open(os.path.join(out, "cells.json"), "w").write("[" * 200000 + "]" * 200000)
    torch.save({"checks": {}, "forbidden": [], "mutated": []}, target)
''',
}


def forged(kind: str) -> str:
    return FORGE_HEAD + FORGES[kind] + FORGE_TAIL


@pytest.fixture
def short_limits(monkeypatch):
    """Short limits, and a secret in the grader's environment: in this process's, and in that of another
    process of the grader's user (as /proc/PID/environ shows it)."""
    set_limit(monkeypatch, "cell_timeout", 2.0)
    set_limit(monkeypatch, "exercise_timeout", 6.0)
    monkeypatch.setattr(sandbox, "GRACE", 2.0)
    monkeypatch.setenv("COURSE_TEST_SECRET_TOKEN", SECRET)
    holder = subprocess.Popen(["sleep", "600"], env={**os.environ, "COURSE_TEST_SECRET_TOKEN": SECRET})
    yield
    holder.kill()
    holder.wait()


def _processes_with(marker: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.append(int(pid))
            except OSError:
                pass
    return found


# --- course check ----------------------------------------------------------------------------------------

@needs_sandbox
@pytest.mark.parametrize("name,cell", [
    ("read_solutions", READ_SOLUTIONS), ("cgroup", CGROUP), ("env_secrets", ENV_SECRETS), ("home", HOME),
])
def test_check_sandbox_attacks_gain_nothing(tmp_path, short_limits, name, cell):
    result = grade_notebook(L01, attack_notebook(tmp_path, name, cell))
    assert "ATTACK-SUCCEEDED" not in notes_text(result), result.notes
    assert result.score == 0.0, [(e.id, e.status) for e in result.exercises]
    no_traceback(result)


@needs_sandbox
def test_check_network_is_unreachable(tmp_path, short_limits):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    try:
        result = grade_notebook(L01, attack_notebook(tmp_path, "network", network_cell(server.getsockname()[1])))
    finally:
        server.close()
    assert "ATTACK-SUCCEEDED" not in notes_text(result), result.notes


@needs_sandbox
def test_check_daemon_does_not_outlive_grading(tmp_path, short_limits):
    marker, victim = tmp_path / f"daemon-{tmp_path.name}", tmp_path / "results.csv"
    victim.write_text("student,score\n")
    result = grade_notebook(L01, attack_notebook(tmp_path, "daemon", daemon_cell(marker, [victim])))
    assert result.score == 0.0
    time.sleep(4)  # the daemon would have written by now (it waits 2.5 s)
    assert not marker.exists()
    assert victim.read_text() == "student,score\n"
    assert not _processes_with(marker.name)


@needs_sandbox
def test_check_signals_ignored_are_stopped_at_the_cell_limit(tmp_path, short_limits):
    result = grade_notebook(L01, attack_notebook(tmp_path, "signals", SIGNALS))
    assert {e.status for e in result.exercises} == {"timeout"}, [(e.id, e.status, e.reason) for e in result.exercises]
    assert "did not stop when told to" in notes_text(result)
    assert "2 s limit of one cell" in notes_text(result)  # the cell's limit, not the notebook's


@pytest.mark.parametrize("kind", sorted(FORGES))
def test_check_forged_read_backs_are_errors_not_crashes(tmp_path, short_limits, kind):
    """FIFOs, symbolic links, a DEFLATE bomb, odd tensors, odd layouts, deep JSON: an error verdict for the
    exercise, read without hanging, without unpacking a gigabyte, without a traceback."""
    before = peak_rss_start()
    box = {}
    t = threading.Thread(target=lambda: box.update(r=grade_notebook(L01, attack_notebook(tmp_path, kind, softmax=forged(kind)))),
                         daemon=True)
    t.start()
    t.join(timeout=240)
    assert not t.is_alive(), "the grader hung on a forged read-back"
    result = box["r"]
    assert peak_rss_since(before) < 300 * 2**20  # never inflated the 512 MiB bomb
    sdpa = next(e for e in result.exercises if e.id == SDPA)
    assert sdpa.status in ("error", "timeout", "not_implemented") and sdpa.points == 0.0, (sdpa.status, sdpa.reason)
    assert result.score == 0.0
    no_traceback(result)
    if kind in ("deflate_bomb", "quantized", "nested", "sparse", "expanded", "odd_layout"):
        assert "could not accept" in sdpa.reason, sdpa.reason


# --- course grade: a class with honest classmates ----------------------------------------------------------

@needs_sandbox
def test_grade_batch_of_attackers_and_honest_classmates(tmp_path, short_limits):
    subs = tmp_path / "submitted"
    marker = tmp_path / f"daemon-{tmp_path.name}"
    out = tmp_path / "results.csv"
    honest = {}
    for student in ("alice", "bob"):
        (subs / student / "lesson01").mkdir(parents=True)
        honest[student] = subs / student / "lesson01" / L01.notebook
        honest[student].write_bytes(solved_copy(tmp_path, student).read_bytes())
    original = {s: p.read_bytes() for s, p in honest.items()}
    attacks = {
        "mallory_poison": POISON, "mallory_read": READ_SOLUTIONS, "mallory_env": ENV_SECRETS,
        "mallory_daemon": daemon_cell(marker, [out, honest["bob"]]), "mallory_classmate": classmate_cell(honest["alice"]),
        "mallory_cgroup": CGROUP, "=HYPERLINK(\"x\")": None, "mallory_signals": SIGNALS,
    }
    for student, cell in attacks.items():
        (subs / student / "lesson01").mkdir(parents=True)
        src = attack_notebook(tmp_path, student.replace("=", "").replace('"', "").replace("(", "").replace(")", ""), cell)
        (subs / student / "lesson01" / L01.notebook).write_bytes(src.read_bytes())
    for kind in ("fifo", "deflate_bomb", "quantized"):
        (subs / f"mallory_{kind}" / "lesson01").mkdir(parents=True)
        src = attack_notebook(tmp_path, kind, softmax=forged(kind))
        (subs / f"mallory_{kind}" / "lesson01" / L01.notebook).write_bytes(src.read_bytes())
    # malformed cell metadata: a NotebookError for that notebook alone
    (subs / "mallory_meta" / "lesson01").mkdir(parents=True)
    bad = json.loads(L01.student_path.read_text())
    bad["cells"][1]["metadata"] = {"course": "demo", "nbgrader": ["grade"]}
    (subs / "mallory_meta" / "lesson01" / L01.notebook).write_text(json.dumps(bad))

    r = CliRunner().invoke(cli, ["grade", str(subs), "--lesson", "lesson01", "--jobs", "2", "--out", str(out)])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    text = out.read_text()
    time.sleep(4)  # a daemon would have edited the results by now
    assert out.read_text() == text, "the results file changed after grading"
    assert not marker.exists()
    assert not _processes_with(marker.name)
    every = list(csv.DictReader(text.splitlines()))
    rows = [row for row in every if row["exercise"] != "TOTAL"]
    scores = {}
    for row in rows:
        scores[row["student"]] = scores.get(row["student"], 0.0) + float(row["points"])
    students = {row["student"] for row in every}
    assert len(students) == 2 + len(attacks) + 4, "\n".join(sorted(students))  # nobody dropped, the batch completed
    assert scores["alice"] == scores["bob"] == 10.0  # classmates keep their marks
    assert {s: p.read_bytes() for s, p in honest.items()} == original  # and their files
    for student, score in scores.items():
        if student not in ("alice", "bob"):
            assert score == 0.0, (student, score)
    assert "ATTACK-SUCCEEDED" not in text
    assert any(s.startswith("'=HYPERLINK") for s in students)  # a formula-looking name is neutralised
    assert not any(s.startswith("=") for s in students)
    # malformed metadata: that notebook alone is NOT GRADED (one TOTAL row, no points, the reason)
    meta_rows = [row for row in every if row["student"] == "mallory_meta"]
    assert [row["exercise"] for row in meta_rows] == ["TOTAL"] and meta_rows[0]["status"] == "NOT GRADED"
    assert meta_rows[0]["points"] == "" and "mallory_meta" not in scores
    assert "metadata" in meta_rows[0]["reason"]
    assert r.exit_code == 1  # some submission could not be graded (the malformed one)


def test_grade_refuses_to_run_without_the_sandbox(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "_BWRAP", (False, "bubblewrap (bwrap) is not installed"))
    subs = tmp_path / "subs"
    subs.mkdir()
    solved_copy(subs, "alice")
    r = CliRunner().invoke(cli, ["grade", str(subs), "--lesson", "lesson01", "--out", str(tmp_path / "r.json")])
    assert r.exit_code == 2, r.output
    assert "bubblewrap" in r.output and "apt-get install bubblewrap" in r.output and "--insecure" in r.output
    assert not (tmp_path / "r.json").exists()
    r = CliRunner().invoke(cli, ["grade", str(subs), "--lesson", "lesson01", "--insecure", "--out",
                                 str(tmp_path / "r.json")])
    assert r.exit_code == 0, r.output
    assert "WITHOUT the sandbox" in r.output
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["insecure"] is True and data["students"]["alice"]["score"] == 10.0


# --- nbgrader autograde ------------------------------------------------------------------------------------

@needs_sandbox
def test_nbgrader_autograde_attacks(tmp_path, monkeypatch):
    from course_cli.instructor.nbgrader_course import make_course

    monkeypatch.setenv("COURSE_TEST_SECRET_TOKEN", SECRET)
    monkeypatch.setenv("COURSE_CELL_TIMEOUT", "3")
    holder = subprocess.Popen(["sleep", "600"], env={**os.environ, "COURSE_TEST_SECRET_TOKEN": SECRET})
    course = tmp_path / "course"
    make_course(course)
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}

    def nbgrader(*args):
        p = subprocess.run(nbgrader_argv(*args), cwd=course, env=env, capture_output=True, text=True,
                           timeout=900)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
        return p.stdout + p.stderr

    nbgrader("generate_assignment", "lesson01", "--force")
    release = course / "release" / "lesson01" / L01.notebook
    marker = tmp_path / f"daemon-{tmp_path.name}"
    gradebook = course / "gradebook.db"

    def submit(student, cell=None):
        nb = nbformat.read(release, as_version=4)
        if cell:
            nb.cells.append(nbformat.v4.new_code_cell(cell))
        folder = course / "submitted" / student / "lesson01"
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / L01.notebook)
        return folder / L01.notebook

    honest = submit("alice")
    sol = nbformat.read(L01.solution_path, as_version=4)
    nb = nbformat.read(honest, as_version=4)
    for i, c in enumerate(nb.cells):  # alice's notebook is the release one with the solutions filled in
        gid = c.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if gid in (SOFTMAX, SDPA):
            nb.cells[i].source = next(s.source for s in sol.cells
                                      if s.get("metadata", {}).get("nbgrader", {}).get("grade_id") == gid)
    nbformat.write(nb, honest)
    alice_before = honest.read_bytes()
    submit("mallory_read", READ_SOLUTIONS)
    submit("mallory_poison", POISON)
    submit("mallory_env", ENV_SECRETS)
    submit("mallory_cgroup", CGROUP)
    submit("mallory_daemon", daemon_cell(marker, [gradebook, honest]))
    submit("mallory_classmate", classmate_cell(honest))
    out = nbgrader("autograde", "lesson01", "--force")
    assert "ATTACK-SUCCEEDED" not in out
    time.sleep(4)
    assert not marker.exists()
    nbgrader("export", "--to", str(tmp_path / "grades.csv"))
    grades = {row["student_id"]: float(row["raw_score"]) for row in csv.DictReader((tmp_path / "grades.csv").open())}
    assert grades["alice"] == 10.0, grades
    for student, score in grades.items():
        if student != "alice":
            assert score == 0.0, (student, score)
    assert honest.read_bytes() == alice_before
    autograded = (course / "autograded" / "mallory_env" / "lesson01" / L01.notebook).read_text()
    holder.kill()
    assert SECRET not in autograded


def test_one_submission_crashing_the_grader_is_an_error_row(tmp_path, monkeypatch):
    """An exception inside the grader for one student: that student's error row, the others graded, the
    results file written, exit code 1."""
    from course_cli.classes import batch

    real = grading.grade_notebook

    def flaky(lesson, path, **kw):
        if "bob" in str(path):
            raise KeyError("something no one planned for")
        return real(lesson, path, **kw)

    monkeypatch.setattr(grading, "grade_notebook", flaky)
    subs = tmp_path / "subs"
    subs.mkdir()
    solved_copy(subs, "alice")
    solved_copy(subs, "bob")
    out = tmp_path / "r.csv"
    r = CliRunner().invoke(cli, ["grade", str(subs), "--lesson", "lesson01", "--out", str(out), "--insecure"])
    assert r.exit_code == 1, r.output
    rows = [row for row in csv.DictReader(out.read_text().splitlines()) if row["exercise"] != "TOTAL"]
    assert {row["student"] for row in rows} == {"alice", "bob"}
    assert {row["status"] for row in rows if row["student"] == "bob"} == {"error"}
    assert "could not grade" in next(row["reason"] for row in rows if row["student"] == "bob")
    assert sum(float(row["points"]) for row in rows if row["student"] == "alice") == 10.0
    assert "bob" in r.output and batch.any_errors({}) is False
