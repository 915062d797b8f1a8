"""test_warm, end to end: the tests of tests/unit/test_warm.py that start a child (the slow tier)."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path
import nbformat
import pytest
from course_cli.sandboxed import warm
from graders.engine.results import CheckResult, ExerciseResult, LessonResult
from graders.registry import LESSONS, ROOT, find_lesson
from test_hostile import SHORT, _short_limits
from test_warm import HOSTILE, L01, _env, _hostile, _stop_servers, _notebooks, _probe, check, hostile_folder, run_dir, server_pid, warm_checks  # noqa: F401 (helpers and fixtures shared with the fast tests)


def cold_check(path, lesson=L01, monkeypatch=None, **env) -> dict:
    """What `course check LESSON --notebook PATH --cold --json` prints, computed in this process: the CLI's own
    calls (warm.grade_notebook with warm=False: a cold sandboxed child, then `for_students`; its JSON cleaning),
    without starting an interpreter and importing the course for each notebook. `env`: the limits, as `check`'s."""
    from course_cli.safe_text import json_clean

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result = warm.grade_notebook(lesson, str(path), None, warm=False)
    return json.loads(json.dumps(json_clean(result.to_dict(), None), ensure_ascii=False))


def student_json(result, path) -> dict:
    """`cold_check`'s JSON of a cold grading at hand, of the same notebook copied to `path`."""
    from course_cli.safe_text import json_clean
    from graders.engine.results import for_students

    data = {**for_students(result).to_dict(), "notebook": str(path)}
    return json.loads(json.dumps(json_clean(data, None), ensure_ascii=False))


@pytest.mark.slow
@pytest.mark.parametrize("lesson", LESSONS, ids=[l.id for l in LESSONS])
def test_same_verdicts_warm_and_cold(lesson, tmp_path, run_dir, monkeypatch, sandbox_matrix):
    notebooks = _notebooks(lesson, tmp_path / "nb")
    # the solved and stub notebooks' cold gradings are the session's (tests/e2e/test_lessons_e2e.py reads them)
    shared = {notebooks[0]: lesson.solution_path, notebooks[1]: lesson.student_path}
    for nb in notebooks:
        if nb in shared:
            cold = student_json(sandbox_matrix.cold(lesson, shared[nb]), nb)
        else:
            cold = cold_check(nb, lesson, monkeypatch)
        warm_result = check(nb, run_dir, lesson=lesson)
        assert warm_result == cold, nb.name
    assert warm_checks(run_dir) == len(notebooks)  # every warm one was graded warm (not fallen back to cold)


@pytest.mark.slow
def test_a_hostile_check_cannot_influence_the_next(tmp_path, run_dir):
    hostile, probe = _hostile(tmp_path), _probe(tmp_path)
    clean = check(probe, run_dir, "--cold")
    assert clean["exercises"][0]["status"] == "passed"
    check(hostile, run_dir)
    pid = server_pid(run_dir)
    assert check(probe, run_dir) == clean  # right after
    time.sleep(3)  # the daemon's time
    assert check(probe, run_dir) == clean
    assert server_pid(run_dir) == pid and warm_checks(run_dir) == 3  # the same warm server served them all
    assert not list(tmp_path.glob("planted*")) and not Path("/tmp/planted").exists()
    # and the probe does see traces where there are some: the hostile cell then the probe, in one check
    both = nbformat.read(hostile, as_version=4)
    both.cells.append(nbformat.read(probe, as_version=4).cells[-1])
    nbformat.write(both, tmp_path / "both.ipynb")
    assert check(tmp_path / "both.ipynb", run_dir, "--cold")["exercises"][0]["status"] != "passed"


@pytest.mark.slow
def test_a_killed_server_is_restarted_and_a_silent_one_is_not_waited_on(tmp_path, run_dir):
    nb = tmp_path / "solution.ipynb"
    nb.write_bytes(L01.solution_path.read_bytes())
    first = check(nb, run_dir)
    pid = server_pid(run_dir)
    os.kill(pid, signal.SIGKILL)
    time.sleep(0.5)
    assert check(nb, run_dir) == first
    assert server_pid(run_dir) != pid and warm_checks(run_dir) == 2
    # a process that listens on the socket and never answers: the check goes on (a fresh server)
    os.kill(server_pid(run_dir), signal.SIGKILL)
    time.sleep(0.5)
    (sock_path,) = (run_dir / "attention-course").glob("w-*.sock")
    sock_path.unlink()
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    silent.bind(str(sock_path))
    silent.listen(8)
    try:
        assert check(nb, run_dir, timeout=300) == first
    finally:
        silent.close()
    assert warm_checks(run_dir) == 3


@pytest.mark.slow
def test_a_stale_server_is_replaced(tmp_path, run_dir):
    nb = tmp_path / "solution.ipynb"
    nb.write_bytes(L01.solution_path.read_bytes())
    env = _env(run_dir)
    path = subprocess.run([sys.executable, "-c", "from course_cli.sandboxed import warm;"
                           "from course_cli.student.workspace import find_workspace;"
                           "print(warm.socket_path(find_workspace()))"],
                          capture_output=True, text=True, env=env, check=True).stdout.strip()
    old = subprocess.Popen([sys.executable, "-m", "course_cli.sandboxed.warm", "serve", path, "an-older-course"],
                           env=env, stderr=subprocess.DEVNULL)
    for _ in range(200):
        if Path(path).exists():
            break
        time.sleep(0.05)
    result = check(nb, run_dir)
    assert old.wait(timeout=30) is not None  # told to go
    assert all(e["status"] == "passed" for e in result["exercises"])
    assert warm_checks(run_dir) == 1


@pytest.mark.slow
def test_another_user_cannot_reach_the_server(tmp_path, run_dir):
    nb = tmp_path / "solution.ipynb"
    nb.write_bytes(L01.solution_path.read_bytes())
    check(nb, run_dir)
    (sock_path,) = (run_dir / "attention-course").glob("w-*.sock")
    assert stat.S_IMODE(os.stat(sock_path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(sock_path.parent).st_mode) == 0o700
    if os.getuid() != 0:
        pytest.skip("trying as another user needs root to become one")
    os.chmod(run_dir, 0o755)
    pid = os.fork()
    if pid == 0:  # as nobody: connect and ask for a grading
        code = 0
        try:
            os.setgid(65534)
            os.setuid(65534)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(5)
            s.connect(str(sock_path))
            code = 1  # connected: the folder's and the socket's modes did not stop it
        except OSError:
            pass
        os._exit(code)
    _, st = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(st) == 0


@pytest.mark.slow
def test_class_grading_never_uses_the_warm_grader(tmp_path, run_dir):
    sub = tmp_path / "class" / "alice" / "lesson01"
    sub.mkdir(parents=True)
    (sub / L01.notebook).write_bytes(L01.solution_path.read_bytes())
    r = subprocess.run([sys.executable, "-m", "course_cli", "grade", str(tmp_path / "class"), "--lesson", "1",
                        "--out", str(tmp_path / "out"), "--jobs", "1"], capture_output=True, text=True,
                       env=_env(run_dir), timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    folder = run_dir / "attention-course"
    assert not folder.exists() or not list(folder.glob("w-*")), list(folder.iterdir())


@pytest.mark.slow
def test_batch_gradescope_and_nbgrader_grade_fresh(tmp_path, run_dir, monkeypatch):
    """In this process, with warm checks on and the warm path made to fail loudly: class grading still grades
    (so it never went through it). Its own class zygotes (course_cli/sandboxed/class_forks.py: for_class=True,
    the student child build, no notebook folder) are the only zygotes it may start."""
    monkeypatch.setenv("COURSE_WARM", "1")

    def used(*a, **k):
        raise AssertionError("class grading went through the warm grader")

    zygote = warm.Zygote.__init__

    def class_zygote_only(z, *a, for_class=False, **k):
        if not for_class:
            raise AssertionError("class grading started a student's warm zygote")
        return zygote(z, *a, for_class=for_class, **k)

    monkeypatch.setattr(warm, "_grade_warm", used)
    monkeypatch.setattr(warm.Zygote, "__init__", class_zygote_only)
    monkeypatch.setattr(warm.Server, "__init__", used)
    from course_cli.classes.dispatch import grade_submission

    assert grade_submission(L01, "alice", L01.solution_path).all_passed

    from course_cli.instructor.gradescope import main as gradescope

    (tmp_path / "gs" / "submission").mkdir(parents=True)
    (tmp_path / "gs" / "submission" / L01.notebook).write_bytes(L01.solution_path.read_bytes())
    assert gradescope(["run", "--lesson", "lesson01", "--root", str(tmp_path / "gs")]) == 0
    data = json.loads((tmp_path / "gs" / "results" / "results.json").read_text())
    assert data["score"] == L01.max_score

    from course_cli.instructor.nbgrader_course import RELEASE, ApplyCourseVerdict, StartCourseGrading, release_record

    nb = nbformat.read(L01.solution_path, as_version=4)
    autograded = tmp_path / "autograded" / "alice" / "a1"  # what nbgrader copies from source/: the release record
    autograded.mkdir(parents=True)
    (autograded / RELEASE).write_text(json.dumps(release_record(L01)))
    resources = {"nbgrader": {"notebook": L01.solution_path.stem, "student": "alice", "assignment": "a1"},
                 "metadata": {"path": str(autograded)}}
    nb, resources = StartCourseGrading().preprocess(nb, resources)
    nb, resources = ApplyCourseVerdict().preprocess(nb, resources)
    outputs = [o for c in nb.cells if c.cell_type == "code"
               and c.get("metadata", {}).get("nbgrader", {}).get("grade_id", "").startswith("test_") for o in c.outputs]
    assert outputs and not any(o.get("output_type") == "error" for o in outputs)


@pytest.mark.slow
def test_the_check_cell_path_and_course_lab_s_prestart(tmp_path, run_dir, monkeypatch):
    """incell.grade calls warm.grade_cells with the kernel's cells and no folder; `course lab LESSON`
    starts the server beforehand (warm.prestart), and the check cell's first check uses it."""
    from course_cli.sandboxed.grading import grade_cells
    from course_cli.sandboxed.notebook import graded_cells, read_notebook

    monkeypatch.setenv("COURSE_WARM", "1")
    ws = tmp_path / "ws"
    ws.mkdir()
    warm.prestart(L01, ws)
    for _ in range(200):
        if list((run_dir / "attention-course").glob("w-*.pid")):
            break
        time.sleep(0.05)
    pid = server_pid(run_dir)
    cells = graded_cells(read_notebook(L01.solution_path))
    cold = grade_cells(L01, cells, "(this notebook's kernel)", ["softmax"], only_public=True)
    warm_result = warm.grade_cells(L01, cells, "(this notebook's kernel)", ["softmax"], only_public=True,
                                   workspace=ws)
    assert warm_result.to_dict() == cold.to_dict() and warm_result.notes == cold.notes
    assert server_pid(run_dir) == pid and warm_checks(run_dir) == 1
    broken = [dict(c) for c in cells]
    i = next(i for i, c in enumerate(broken) if "def softmax" in c["source"])
    broken[i]["source"] = broken[i]["source"].replace("def softmax", "def _softmax_unused") + \
        "\ndef softmax(x, dim=-1):\n    return x\n"
    from graders.engine.results import for_students  # warm.grade_cells is a student's seat: as students see it

    assert warm.grade_cells(L01, broken, "k", ["softmax"], workspace=ws).to_dict() == \
        for_students(grade_cells(L01, broken, "k", ["softmax"])).to_dict()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(p.name for p in HOSTILE.glob("*.ipynb")))
def test_the_hostile_corpus_gets_the_same_verdicts_warm(name, hostile_folder, monkeypatch, sandbox_matrix):
    """Every broken and hostile notebook of tests/fixtures/hostile: the same JSON warm and cold (time limits,
    memory, output caps, exits, signals, leftovers; wrong_device's attention reads memory torch never wrote,
    which engine.probe.filled_memory makes NaN, so its messages agree too). The cold one is the session's cold
    grading of that notebook, in the same folder and under the same limits (SHORT), which
    tests/e2e/test_hostile_e2e.py reads too: `cold_check`'s JSON of it (`student_json`)."""
    folder, run_dir, workspace = hostile_folder
    path = folder / name
    _short_limits(monkeypatch)
    cold = student_json(sandbox_matrix.hostile(name), path)
    warm_result = check(path, run_dir, **SHORT, **workspace)
    assert warm_result == cold


@pytest.mark.slow
def test_a_dead_zygote_is_replaced_and_an_idle_server_exits(tmp_path, run_dir):
    nb = tmp_path / "solution.ipynb"
    nb.write_bytes(L01.solution_path.read_bytes())
    first = check(nb, run_dir, COURSE_WARM_IDLE="6")
    pid = server_pid(run_dir)
    children = [int(c) for t in Path(f"/proc/{pid}/task").iterdir()
                for c in (t / "children").read_text().split()]
    assert children  # bwrap, with the zygote inside
    for c in children:
        os.killpg(c, signal.SIGKILL)
    assert check(nb, run_dir, COURSE_WARM_IDLE="6") == first
    assert server_pid(run_dir) == pid and warm_checks(run_dir) == 2  # the same server, a new zygote
    assert _gone(pid), "the idle server did not exit"  # idle for 6 s: it goes, and takes its zygote along
    assert not list((run_dir / "attention-course").glob("w-*.pid"))
    assert not list((run_dir / "attention-course").glob("w-*.sock"))


@pytest.mark.slow
def test_a_killed_server_s_jobs_folder_is_swept_by_the_next(tmp_path, run_dir):
    import tempfile

    nb = tmp_path / "solution.ipynb"
    nb.write_bytes(L01.solution_path.read_bytes())
    check(nb, run_dir)
    pid = server_pid(run_dir)
    left = list(Path(tempfile.gettempdir()).glob(f"course-warm-{pid}-*"))
    assert left  # its zygote's jobs folder
    os.kill(pid, signal.SIGKILL)  # no chance to clean up
    time.sleep(0.5)
    check(nb, run_dir)
    assert not any(p.exists() for p in left)


@pytest.mark.slow
def test_the_server_ends_with_the_process_it_follows(tmp_path, run_dir):
    """A notebook's kernel (or `course watch`, or JupyterLab) names itself with warm.stay_with: when it ends, its
    server goes within seconds, long before the idle limit."""
    nb = tmp_path / "solution.ipynb"
    nb.write_bytes(L01.solution_path.read_bytes())
    code = ("import os, sys, time\n"
            "from pathlib import Path\n"
            "from course_cli.sandboxed import warm\n"
            "from graders.registry import find_lesson\n"
            "warm.stay_with(os.getpid())\n"
            "print(warm.grade_notebook(find_lesson('lesson01'), sys.argv[1], workspace=Path(sys.argv[1]).parent).score,"
            " flush=True)\n"
            "time.sleep(600)\n")
    kernel = subprocess.Popen([sys.executable, "-c", code, str(nb)], env=_env(run_dir, COURSE_WARM_IDLE="900"),
                              stdout=subprocess.PIPE, text=True)
    try:
        assert kernel.stdout.readline().strip() == "10.0"
        pid = server_pid(run_dir)
        assert warm_checks(run_dir) == 1  # graded by the server, which now follows the kernel
        os.kill(pid, 0)
    finally:
        kernel.kill()
        kernel.wait()
    assert _gone(pid), "the server outlived the process it follows"


@pytest.mark.slow
def test_a_server_no_check_can_reach_exits(tmp_path, run_dir):
    """About 40 `warm serve` processes were seen after an interrupted test run: servers whose run folder (their
    socket's) or workspace had been deleted, each waiting out its idle limit (900 s) where no check could reach
    it. A server now exits within seconds once its socket is removed (or replaced) or its workspace deleted."""
    import shutil

    nb = tmp_path / "solution.ipynb"
    nb.write_bytes(L01.solution_path.read_bytes())
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {"COURSE_WORKSPACE": str(ws), "COURSE_WARM_IDLE": "900"}
    first = check(nb, run_dir, **env)
    pid = server_pid(run_dir)
    (sock,) = (run_dir / "attention-course").glob("w-*.sock")
    sock.unlink()  # as `rm -r` of the run folder does
    assert _gone(pid), "a server without its socket did not exit"
    assert check(nb, run_dir, **env) == first  # a fresh server, at the same path
    pid = server_pid(run_dir)
    shutil.rmtree(ws)
    assert _gone(pid), "a server whose workspace was deleted did not exit"
    assert warm_checks(run_dir) == 2
    log = "".join(f.read_text() for f in (run_dir / "attention-course").glob("w-*.log"))
    assert "its socket is gone: exiting" in log and "its workspace is gone: exiting" in log, log
    assert not list((run_dir / "attention-course").glob("w-*.pid"))


def _gone(pid: int, seconds: float = 30.0) -> bool:
    """Whether process `pid` ends within `seconds`."""
    for _ in range(int(seconds * 10)):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.slow
def test_a_warm_check_writes_to_a_capped_tmpfs_of_its_own_never_the_disk(tmp_path, run_dir):
    """A warm check that fills its output folder: stopped at the cap ("output limit exceeded"), the jobs folder
    on disk never grows, and the next check is graded warm as before."""
    from test_sandbox_caps import FILL_OUT, DiskWatch

    jobs = tmp_path / "jobs"  # the warm server's jobs folder (its tempfile folder), watched
    jobs.mkdir()
    hostile = nbformat.read(L01.student_path, as_version=4)
    hostile.cells.append(nbformat.v4.new_code_cell(FILL_OUT))
    nbformat.write(hostile, tmp_path / "fill.ipynb")
    solved = tmp_path / "solved.ipynb"
    solved.write_bytes(L01.solution_path.read_bytes())
    with DiskWatch(jobs) as watch:
        filled = check(tmp_path / "fill.ipynb", run_dir, TMPDIR=str(jobs))
    assert "output limit exceeded" in json.dumps(filled), json.dumps(filled)[:2000]
    assert watch.most < 2**20, watch.most
    assert check(solved, run_dir, TMPDIR=str(jobs))["score"] == 10.0
    assert warm_checks(run_dir) == 2


@pytest.mark.slow
def test_a_lesson_notebook_s_kernel_starts_its_warm_grader(tmp_path, run_dir, monkeypatch):
    """`course lab`'s kernelspec loads course_cli.kernel_warm: a kernel JupyterLab starts for a lesson notebook
    (JPY_SESSION_NAME names it) starts that lesson's warm grader before any check, whose zygote then serves the
    first check cell (no "new zygote"); a kernel for any other notebook starts none."""
    from jupyter_client.manager import start_new_kernel

    from course_cli.student.workspace_ops import init, kernel_spec

    ws = tmp_path / "ws"
    init(ws)
    monkeypatch.setenv("JUPYTER_PATH", str(kernel_spec(ws, sys.executable)))
    env = {**_env(run_dir), "COURSE_WORKSPACE": str(ws)}
    quiet = {"output_hook": lambda msg: None}
    for session in (ws / "scratch.ipynb", ws / "lessons" / L01.notebook):
        km, kc = start_new_kernel(kernel_name="python3", env={**env, "JPY_SESSION_NAME": str(session)},
                                  cwd=str(ws / "lessons"))
        try:
            kc.execute_interactive("import os; pid = os.getpid()", timeout=60, **quiet)
            if session.name == "scratch.ipynb":
                time.sleep(2)
                assert not list((run_dir / "attention-course").glob("w-*.pid"))
                continue
            for _ in range(400):  # started by the kernel itself, before any check
                if list((run_dir / "attention-course").glob("w-*.pid")):
                    break
                time.sleep(0.05)
            pid = server_pid(run_dir)
            from course_cli.sandboxed.notebook import graded_cells, read_notebook

            for cell in graded_cells(read_notebook(L01.solution_path)):
                kc.execute_interactive(cell["source"], timeout=300, **quiet)
            kc.execute_interactive('from course_cli.incell import grade; grade("lesson01", "softmax")', timeout=300,
                                   **quiet)
            assert server_pid(run_dir) == pid and warm_checks(run_dir) == 1
            log = "".join(f.read_text() for f in (run_dir / "attention-course").glob("w-*.log"))
            assert "new zygote" not in log, log
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)


@pytest.mark.slow
def test_warm_checks_work_with_the_course_and_its_venv_under_tmp(tmp_path, run_dir):
    """A clone and a venv made under /tmp, as a new student in a container does: a check's fork mounts a fresh
    /tmp, and the zygote's binds there (the course, the venv, the notebook's folder) are bound through into it.
    Before, warm checks turned off there without a word (cold, every time)."""
    import shutil
    import site
    import tempfile

    top = Path(tempfile.mkdtemp(prefix="course-under-tmp-", dir="/tmp"))
    try:
        course = top / "clone"
        for part in ("graders", "course_cli", "solutions", "lessons"):
            shutil.copytree(ROOT / part, course / part, ignore=shutil.ignore_patterns("__pycache__"))
        for f in ("pyproject.toml", "constraints.txt"):
            shutil.copy(ROOT / f, course / f)
        venv = top / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
        (py,) = venv.glob("lib/python3*/site-packages")
        (py / "course-deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
        python = str(venv / "bin" / "python")
        nb = tmp_path / "solution.ipynb"
        nb.write_bytes(L01.solution_path.read_bytes())

        def run(*flags):
            r = subprocess.run([python, "-m", "course_cli", "check", L01.id, "--notebook", str(nb), "--json", *flags],
                               capture_output=True, text=True, env=_env(run_dir, PYTHONPATH=str(course)),
                               timeout=600)
            assert r.returncode in (0, 1), r.stderr[-3000:]
            return json.loads(r.stdout)

        cold = run("--cold")
        assert run() == cold and cold["exercises"][0]["status"] == "passed"
        assert warm_checks(run_dir) == 1  # graded warm, not fallen back to cold
        # what is bound through stays read-only: a cell that writes into the course leaves nothing there
        both = nbformat.read(nb, as_version=4)
        both.cells.insert(1, nbformat.v4.new_code_cell(
            f"for p in ({str(course / 'planted')!r}, {str(venv / 'planted')!r}):\n"
            "    try:\n        open(p, 'w').write('x')\n    except OSError:\n        pass\n"))
        nbformat.write(both, nb)
        assert run()["exercises"][0]["status"] == "passed" and warm_checks(run_dir) == 2
        assert not (course / "planted").exists() and not (venv / "planted").exists()
    finally:
        _stop_servers(run_dir)
        shutil.rmtree(top, ignore_errors=True)
