"""Markers from the registry (`pytest -m "lesson01 and softmax"` selects what `course check lesson01 softmax`
runs) and the test tiers, which are folders:

    tests/unit/     no child process: the engine, compare, verdicts, diagnoses, the CLI's pure parts
    tests/lessons/  every lesson's grader in process (tests/harness.py): solution, stub, mistakes, the texts
    tests/e2e/      everything that starts a child, a server or a browser: the slow tier

One rule: `-m slow` is exactly tests/e2e/ (every test there is marked slow here; a slow mark anywhere else is
refused at collection, so a tier can never be declared twice).

    python -m pytest -q -n auto            # the fast tier: unit/ and lessons/
    python -m pytest -q -n auto -m slow    # the slow tier: e2e/
    python -m pytest -q -n auto --all-tiers  # both
A `-m` expression of your own (e.g. `-m lesson03`) selects across both tiers, and so does naming test files
(`python -m pytest tests/e2e/test_gpu.py`).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
# harness.py and classdata.py, and the fast tests' helpers that an e2e twin imports (`from test_cli import ...`)
for _folder in (HERE, HERE / "unit", HERE / "lessons"):
    sys.path.insert(0, str(_folder))
# In-process probes (tests/harness.py) run Triton kernels on the CPU, as the sandboxed child does: the
# interpreter must be chosen before anything imports triton (torch._dynamo does). Children set their own.
os.environ.setdefault("TRITON_INTERPRET", "1")
# Tests grade cold unless they ask for the warm grader (tests/test_warm.py): a warm server per temporary
# workspace would outlive the test that started it.
os.environ.setdefault("COURSE_WARM", "0")
os.environ.setdefault("COURSE_INIT_REFERENCES", "0")  # `course init` in a test does not build every reference
# A warm server a test starts probes no candidate while idle (course_cli/sandboxed/warm.py, the idle probes): each
# would spend its idle seconds on a lesson's candidates beside the other tests; tests/e2e/test_follow_up_e2e.py
# turns them on.
os.environ.setdefault("COURSE_IDLE_PROBES", "0")
# An xdist worker is one of N processes sharing the cores: with torch's default pool in each, N x cores threads
# busy-wait on the cores and every worker runs ~3x slower (the fast tier on 2 cores, 2 workers: 3 min 38 s with
# torch's default threads, 1 min 10 s with one thread per worker; docs/benchmarks.md). Each worker takes its
# share, set before anything imports torch; a value the caller chose is kept. Children set their own (sandbox).
if os.environ.get("PYTEST_XDIST_WORKER"):
    _SHARE = max(1, (os.cpu_count() or 1) // max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)))
    os.environ.setdefault("OMP_NUM_THREADS", str(_SHARE))
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

# jsonschema (which nbformat, imported by most test modules, imports) loads the optional `rfc3987_syntax` IRI
# checker when Jupyter's dependencies installed it: 1.7 s of grammar building per process for a format no schema
# here uses. Declined, as `course check` declines it (course_cli/sandboxed/notebook.py `_nbformat`).
if "jsonschema" not in sys.modules:
    sys.modules.setdefault("rfc3987_syntax", None)

from graders.registry import LESSONS  # noqa: E402


E2E = HERE / "e2e"
LESSONS_DIR = HERE / "lessons"


def pytest_addoption(parser):
    parser.addoption("--all-tiers", action="store_true", help="run the slow tier too (end-to-end tests)")
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite tests/golden/ from this run (a change meant to change verdicts)")


def _grouped(config, items) -> None:
    """A module's tests that share a module-scoped fixture (a graded corpus, a JupyterLab, an nbgrader course, an
    installed venv, an Ubuntu root) run on one xdist worker, so the fixture is made once, not once per worker that
    happens to get one of them; a lesson's tests in tests/lessons/ run on one worker too (what they share is
    cached per process); the other tests are spread one by one. Each worker writes {test id: module} for
    such tests where the controller's scheduler (`pytest_xdist_make_scheduler` below) reads them: xdist's own
    `--dist loadgroup` puts the group in the test's id, which pytest 9 no longer lets a plugin change (xdist 3.8
    sets `item._nodeid`; pytest 9.2's `nodeid` is `str(item._id)`), so its groups never formed."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker or not config.getvalue("loadgroup"):  # a worker's `dist` is "no"; xdist keeps this flag
        return
    groups = {}
    ids = {lesson.id for lesson in LESSONS}
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        defs = info.name2fixturedefs.values() if info is not None else ()
        if any(d.scope in ("module", "class", "package") for chain in defs for d in chain):
            groups[item.nodeid] = Path(str(item.fspath)).stem
        for mark in item.iter_markers("xdist_group"):  # an explicit group, as xdist documents it
            groups[item.nodeid] = str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
        if item.nodeid not in groups and LESSONS_DIR in Path(str(item.fspath)).parents:
            # a lesson's in-process tests on one worker: its reference, its catalogue's and its mutants'
            # observations (tests/harness.py, cached per process) are then computed once, not once per worker
            lesson_ids = {m.name for m in item.iter_markers() if m.name in ids}
            if len(lesson_ids) == 1:
                groups[item.nodeid] = f"in-process {lesson_ids.pop()}"
    folder = config._tmp_path_factory.getbasetemp().parent / "xdist-groups"
    folder.mkdir(exist_ok=True)
    tmp = folder / f".{worker}.json"
    tmp.write_text(json.dumps(groups))
    tmp.replace(folder / f"{worker}.json")


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # a hook of xdist: none without it
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup` (pyproject.toml's addopts): xdist's load-scope scheduler, with the groups the workers
    wrote (`_grouped`) as scopes and every other test a scope of its own. Scopes are handed out biggest first
    (xdist's --loadscope-reorder), so a module's shared fixture starts early rather than at the tail."""
    if config.getvalue("dist") != "loadgroup":
        return None
    import json as _json

    from xdist.scheduler import LoadScopeScheduling

    folder = config._tmp_path_factory.getbasetemp() / "xdist-groups"

    class FixtureGroups(LoadScopeScheduling):
        groups: dict | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # first called once every worker has collected (and written its file)
                self.groups = {}
                for path in sorted(folder.glob("gw*.json")):
                    self.groups.update(_json.loads(path.read_text()))
            return self.groups.get(nodeid, nodeid)

    return FixtureGroups(config, log)


def _named(config, folder: Path) -> bool:
    """Whether a path on the command line is `folder` or inside it (`tests/e2e/test_gpu.py`, `tests/unit`)."""
    for arg in config.args:
        path = (config.invocation_params.dir / str(arg).split("::")[0]).resolve()
        if path == folder or folder in path.parents:
            return True
    return False


def pytest_ignore_collect(collection_path, config):
    """A tier's run does not import the other tier's modules only to deselect their tests: each xdist worker
    collects everything it is given, and half of the fast tier's 16 s of collecting per worker was tests/e2e/
    (docs/benchmarks.md). `--all-tiers`, a `-m` of one's own, or a folder or file named on the command line
    collects as before."""
    path = Path(str(collection_path))
    if path.parent != HERE or path.name not in ("e2e", "unit", "lessons") or config.getoption("--all-tiers") \
            or _named(config, path):
        return None
    markexpr = (config.getoption("markexpr") or "").strip()
    if not markexpr:
        return True if path == E2E else None  # the fast tier
    if markexpr == "slow":
        return True if path != E2E else None  # the slow tier is exactly tests/e2e/
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    import re

    from graders.registry import LESSONS

    ids = {lesson.id for lesson in LESSONS}
    misplaced = []
    for item in items:
        # a test parametrized over lessons carries each one's marker ("[lesson05-torch_only]" is in -m lesson05)
        params = item.name.partition("[")[2]
        for lesson_id in set(re.findall(r"lesson\d\d", params)) & ids:
            if item.get_closest_marker(lesson_id) is None:
                item.add_marker(getattr(pytest.mark, lesson_id))
        in_e2e = E2E in Path(str(item.fspath)).parents
        if in_e2e:
            item.add_marker(pytest.mark.slow)
        elif item.get_closest_marker("slow") is not None:
            misplaced.append(item.nodeid)
    _quarantine(items)
    _grouped(config, items)
    if misplaced:
        raise pytest.UsageError("slow tests live in tests/e2e/ (the tier is the folder): move "
                                + ", ".join(misplaced[:5]))
    if config.getoption("--all-tiers") or config.getoption("markexpr"):
        return
    if config.args and all(".py" in a for a in config.args):
        return  # test files named on the command line run whole, both tiers
    fast = [i for i in items if i.get_closest_marker("slow") is None]
    if len(fast) < len(items):
        config.hook.pytest_deselected(items=[i for i in items if i.get_closest_marker("slow") is not None])
        items[:] = fast


def pytest_configure(config):
    names = set()
    for lesson in LESSONS:
        names.add(lesson.id)
        names.update(e.name for e in lesson.exercises)
    for name in sorted(names):
        config.addinivalue_line("markers", f"{name}: checks of {name} (from graders/registry.py)")
    config.addinivalue_line("markers", "slow: end to end (the sandbox, nbgrader, a browser, the CLI); run with "
                            "-m slow or --all-tiers")


def marks(lesson, exercise=None):
    out = [getattr(pytest.mark, lesson.id)]
    if exercise:
        out.append(getattr(pytest.mark, exercise))
    return out


@pytest.fixture(autouse=True)
def _isolated_workspace(tmp_path, monkeypatch):
    """No test writes progress into the developer's clone."""
    monkeypatch.setenv("COURSE_WORKSPACE", str(tmp_path / "workspace"))


@pytest.fixture(scope="session")
def sandbox_matrix(tmp_path_factory):
    """The lessons' own notebooks (every catalogued mistake, the solved and the stub notebooks) graded in the
    sandbox once per test session, shared by the tests that read them (tests/harness.py SandboxMatrix): in a
    folder all xdist workers of this session see."""
    from harness import SandboxMatrix

    base = tmp_path_factory.getbasetemp()
    return SandboxMatrix((base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "sandbox-matrix")


def _fonts_listed() -> None:
    """matplotlib lists the system's fonts (`fc-list`, a process) the first time it is imported on a machine
    without its font cache, as a fresh CI machine with fontconfig is: a figure drawn in a fast test would then
    start a process that is the library's one-time set-up, not the test's. Done once per worker, before the
    guard below."""
    if "matplotlib.font_manager" not in sys.modules:
        try:
            import matplotlib.font_manager  # noqa: F401
        except ImportError:
            pass


class StartsAChild(AssertionError):
    """A fast-tier test started a process: it belongs in tests/e2e/."""


@pytest.fixture(autouse=True)
def _no_child_outside_e2e(request, monkeypatch):
    """The fast tier (tests/unit/, tests/lessons/) never starts a process: every way Python starts one
    (subprocess, multiprocessing, os.fork/forkpty/posix_spawn/system) fails the test with the reason, so the folder
    is the tier. subprocess keeps its own reference to fork_exec (3.11: `subprocess._fork_exec`): patched too."""
    if E2E in Path(str(request.node.fspath)).parents:
        return
    _fonts_listed()
    import _posixsubprocess
    import subprocess

    def refuse(*args, **kwargs):
        raise StartsAChild(f"{request.node.nodeid} starts a process: move it to tests/e2e/ (the slow tier)")

    monkeypatch.setattr(_posixsubprocess, "fork_exec", refuse)
    if getattr(subprocess, "_fork_exec", None) is not None:
        monkeypatch.setattr(subprocess, "_fork_exec", refuse)
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, refuse)


# End-to-end tests that failed in a full slow run and are not yet fixed: {node id prefix: what broke}, marked xfail
# (not strict) so that each still runs and is reported; each entry is named in that stop's closing note. Empty
# since 2026-12-02 (every test quarantined after the domains of issue 28 passes again). Remove an entry when its
# test passes again.
QUARANTINED: dict[str, str] = {}


def _quarantine(items) -> None:
    for item in items:
        for prefix, why in QUARANTINED.items():
            if item.nodeid.startswith(prefix):
                item.add_marker(pytest.mark.xfail(reason=f"quarantined: {why}", strict=False))



# Where a tier's time goes (docs/benchmarks.md "CI time per tier"): with COURSE_TEST_TIMES=DIR each worker appends
# one JSON line per test to DIR/<worker>.jsonl: its wall clock, this process's CPU and its waited-for children's
# CPU (a sandboxed child, a CLI run; not a detached warm server's forks), its start (epoch seconds), and where a
# cpuacct cgroup can be made, all the CPU of the worker's processes during the test (`cgroup_cpu`, warm servers and
# sandboxed children included). A test whose wall clock is far above its CPU waits (a deadline, a server, a
# browser): such tests overlap when more workers than cores run them.
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    folder = os.environ.get("COURSE_TEST_TIMES")
    if not folder:
        yield
        return
    import json
    import resource
    import time

    def cpu():
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        return time.process_time(), kids.ru_utime + kids.ru_stime

    usage = _cpu_cgroup()
    start, wall, (own, kids), group = time.time(), time.perf_counter(), cpu(), _cgroup_cpu(usage)
    yield
    own2, kids2 = cpu()
    line = {"test": item.nodeid, "wall": round(time.perf_counter() - wall, 3), "cpu": round(own2 - own, 3),
            "children_cpu": round(kids2 - kids, 3), "outcome": getattr(item, "_course_outcome", "passed"),
            "start": round(start, 1)}
    if usage is not None:
        line["cgroup_cpu"] = round(_cgroup_cpu(usage) - group, 3)
    Path(folder).mkdir(parents=True, exist_ok=True)
    with open(Path(folder) / f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.jsonl", "a") as f:
        f.write(json.dumps(line) + "\n")


_CPU_GROUP: list = []


def _cpu_cgroup() -> Path | None:
    """This worker's own cpuacct cgroup (cgroup v1, where this user may make one), joined once: every process it
    starts after that is counted in it, the sandboxed children and warm servers included (`children_cpu` misses
    them: they are not waited for by this process). None where there is none to make (cgroup v2 without a
    delegated tree): the line then has no `cgroup_cpu`."""
    if not _CPU_GROUP:
        group = Path("/sys/fs/cgroup/cpuacct") / f"course-tests-{os.getpid()}"
        try:
            group.mkdir(exist_ok=True)
            (group / "cgroup.procs").write_text(str(os.getpid()))
            _CPU_GROUP.append(group / "cpuacct.usage")
        except OSError:
            _CPU_GROUP.append(None)
    return _CPU_GROUP[0]


def _cgroup_cpu(usage: Path | None) -> float:
    return int(usage.read_text()) / 1e9 if usage is not None else 0.0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """The test's outcome for COURSE_TEST_TIMES's line: the first phase that did not pass (setup, call, teardown)."""
    report = (yield).get_result()
    if report.outcome != "passed" and getattr(item, "_course_outcome", "passed") == "passed":
        item._course_outcome = f"{report.outcome} ({report.when})"
