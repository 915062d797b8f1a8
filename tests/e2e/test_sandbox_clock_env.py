"""Attacks on the sandbox's environment and clock (issue 30, items 6 and 4).

- Secrets by prefix: the grader's environment holds NVIDIA_API_KEY, TORCH_HUB_TOKEN, CUDA_SECRET, OMP_SECRET;
  a cell reads os.environ and sends it back in every check's message. None may reach the child (`course
  check` and `course grade`).
- The watchdog's clock: a cell that blocks SIGALRM and ignores it, and rewrites its progress file every half
  second (names the schedule does not hold, earlier cells, later exercises, "done"), is stopped near its own
  limit + grace, far below the notebook's whole budget.
"""

from __future__ import annotations

import json
import time

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
SECRETS = {"NVIDIA_API_KEY": "nv-5ecret-01", "TORCH_HUB_TOKEN": "th-5ecret-02", "CUDA_SECRET": "cu-5ecret-03",
           "OMP_SECRET": "omp-5ecret-04", "TRITON_TOKEN": "tr-5ecret-05", "PYTORCH_KEY": "pt-5ecret-06"}

ENV_CELL = '''
import os
seen = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items()))
def softmax(x, dim=-1):
    raise RuntimeError("ENV " + seen)
'''


def notebook(path, *cells):
    nb = nbformat.read(L01.student_path, as_version=4)
    for c in cells:
        nb.cells.append(nbformat.v4.new_code_cell(c))
    nbformat.write(nb, path)
    return path


@pytest.fixture
def planted(monkeypatch):
    for k, v in SECRETS.items():
        monkeypatch.setenv(k, v)


def _assert_no_secret(text: str) -> None:
    assert "ENV " in text  # the attack ran and sent its environment back
    for k, v in SECRETS.items():
        assert v not in text, k
        assert k not in text, k


@needs_sandbox
def test_check_child_sees_no_planted_secret(tmp_path, planted):
    result = grade_notebook(L01, notebook(tmp_path / "env.ipynb", ENV_CELL))
    _assert_no_secret(" ".join(result.notes) + json.dumps(result.to_dict()))
    assert result.score == 0.0


@needs_sandbox
def test_grade_child_sees_no_planted_secret(tmp_path, planted):
    subs = tmp_path / "subs"
    (subs / "mallory" / "lesson01").mkdir(parents=True)
    notebook(subs / "mallory" / "lesson01" / L01.notebook, ENV_CELL)
    out = tmp_path / "r.json"
    r = CliRunner().invoke(cli, ["grade", str(subs), "--lesson", "lesson01", "--out", str(out)])
    _assert_no_secret(out.read_text() + r.output)


def test_child_env_is_an_exact_list(monkeypatch):
    """Every name the child gets is in ENV_NAMES or set by the course; no prefix lets a secret through."""
    for k, v in SECRETS.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    env = sandbox.child_env("cpu", False, True)
    assert env["OMP_NUM_THREADS"] == "3"
    assert not set(SECRETS) & set(env)
    ours = {"PATH", "LANG", "LC_ALL", "PYTHONPATH", "MPLBACKEND", "PYTHONDONTWRITEBYTECODE", "HOME", "TMPDIR",
            "MPLCONFIGDIR", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "COURSE_SANDBOXED"}
    assert set(env) <= set(sandbox.ENV_NAMES) | ours


# A cell that ignores the alarm and, every half second, names another phase: ones the schedule does not hold,
# earlier and later cells, the exercises (later in the schedule) and "done".
RENAMER = '''
import itertools, json, signal, sys, time
signal.signal(signal.SIGALRM, signal.SIG_IGN)
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
out = json.load(open(sys.argv[1]))["out"]
names = ["phase %d" % i for i in range(3)] + ["running cell %d" % i for i in range(200)]
names += ["checking softmax", "checking scaled_dot_product_attention", "done", "starting: importing torch"]
for name in itertools.cycle(names):
    try:
        open(out + "/progress", "w").write(name)
    except BaseException:
        pass
    t = time.monotonic()
    while time.monotonic() - t < 0.5:
        try:
            pass
        except BaseException:
            pass
'''


@needs_sandbox
def test_a_phase_renaming_cell_is_stopped_near_its_own_limit(tmp_path, monkeypatch):
    cell_t, ex_t, grace = 3.0, 6.0, 2.0
    set_limit(monkeypatch, "cell_timeout", cell_t)
    set_limit(monkeypatch, "exercise_timeout", ex_t)
    monkeypatch.setattr(sandbox, "GRACE", grace)
    # 40 quick cells before it: the notebook's whole budget is large
    path = notebook(tmp_path / "renamer.ipynb", *["x = 1"] * 40, RENAMER)
    nb = nbformat.read(path, as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code"]
    whole = sandbox.STARTUP_ALLOWANCE + cell_t * len(cells) + ex_t * len(L01.exercises)
    t0 = time.monotonic()
    result = grade_notebook(L01, path)
    elapsed = time.monotonic() - t0
    assert {e.status for e in result.exercises} == {"timeout"}, [(e.id, e.status) for e in result.exercises]
    # its own cell's limit + grace, at worst the exercises left after it: far below the whole budget
    # (startup, the reference's run and the quick cells count in the elapsed time, hence the slack)
    bound = sandbox.STARTUP_ALLOWANCE + cell_t + ex_t * len(L01.exercises) + 3 * grace
    assert whole > bound + 60
    assert elapsed < bound, (elapsed, bound, whole)
