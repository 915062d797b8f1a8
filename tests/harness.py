"""Test helpers shared by every lesson's tests: notebooks with one exercise swapped, graded in process
(the fast tier) or end to end (the slow tier).

A lesson's known mistakes live beside its checks in graders/<lesson>.py, as edits of the solved cell;
`with_code` / `with_mistake` turn one into a fixture notebook (the solved notebook with that exercise's
cell replaced). `check_one` / `check_in_process` grade a fixture in this process (same cells, probes,
mistakes and verdict rules, no sandbox: for the course's own code only); `grade_one` grades it by the
path of `course check --notebook`, through the sandboxed child.
"""

from __future__ import annotations

import copy
import importlib
from pathlib import Path

import nbformat

from course_cli.sandboxed.grading import grade_notebook
from graders.engine import mistake_source
from graders.engine.notebook import defining_index
from graders.registry import Lesson

HOSTILE = Path(__file__).parent / "fixtures" / "hostile"  # the corpus of broken and hostile notebooks


def solution_cell_index(nb, exercise: str) -> int:
    """The index in nb.cells of the code cell that defines `exercise` (graders/notebook.py's rule)."""
    i = defining_index(nb.cells, exercise)
    if i is None:
        raise LookupError(f"no cell defines {exercise}")
    return i


def partners_kept(lesson: Lesson, exercise: str, cell_source: str, code: str) -> str:
    """`code` as the new text of `exercise`'s defining cell. When that cell also defines other exercises (a
    step with two exercises, e.g. split_heads and merge_heads) that `code` does not, only the cell's own
    top-level definitions of what `code` defines are replaced, by `code`, where the first of them stood: the
    partners and their helpers stay. A cell of one exercise is simply replaced."""
    import ast

    from graders.engine.notebook import defines

    if not any(defines(cell_source, e.name) and not defines(code, e.name) for e in lesson.exercises):
        return code
    try:
        tree = ast.parse(cell_source)
    except SyntaxError:
        return code
    try:
        replaced = {getattr(n, "name", None) for n in ast.parse(code).body} | {exercise}
    except SyntaxError:  # a fixture of a broken cell: it stands where the exercise did
        replaced = {exercise}
    lines, parts, placed = cell_source.splitlines(), [], False
    for node in tree.body:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
        if getattr(node, "name", None) in replaced:
            if not placed:
                parts.append(code.strip("\n"))
                placed = True
        else:
            parts.append("\n".join(lines[first:node.end_lineno]))
    if not placed:
        parts.append(code.strip("\n"))
    return "\n\n\n".join(parts) + "\n"


def with_code(lesson: Lesson, exercise: str, code: str, tmp_path: Path, name: str | None = None,
              base: Path | None = None) -> Path:
    """The solved notebook (or `base`) with `exercise`'s definition replaced by `code`: its defining cell
    becomes `code`, keeping the definitions of other exercises that share the cell (`partners_kept`)."""
    nb = nbformat.read(base or lesson.solution_path, as_version=4)
    nb = copy.deepcopy(nb)
    i = solution_cell_index(nb, exercise)
    nb.cells[i].source = partners_kept(lesson, exercise, nb.cells[i].source, code)
    path = tmp_path / (name or f"{lesson.id}-{exercise}.ipynb")
    nbformat.write(nb, path)
    return path


def with_mistake(lesson: Lesson, mistake, tmp_path: Path) -> Path:
    return with_code(lesson, mistake.exercise, mistake_source(mistake), tmp_path, f"{lesson.id}-{mistake.id}.ipynb")


def mistakes_of(lesson: Lesson):
    return importlib.import_module(lesson.module).MISTAKES


def grade_one(lesson: Lesson, path: Path, exercise: str):
    """Grade only `exercise` of the notebook at `path`; returns its ExerciseResult."""
    result = grade_notebook(lesson, path, [exercise])
    (ex,) = result.exercises
    return ex


def explain(ex) -> str:
    lines = [f"{ex.id}: {ex.status} ({ex.points}/{ex.max_points}) diagnosis={ex.diagnosis!r}"]
    lines += [f"  {c.name} [{c.device}/{c.dtype}] {c.status}: {c.message}" for c in ex.checks if c.status != "skipped"]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# In process, for trusted code only (the course's solutions and its own mistakes): the same probes and
# judges as `course check`, without a sandbox child. The sandbox itself is tested in the slow tier.

_SOLVED: dict[str, tuple[dict, dict]] = {}  # lesson id -> (solved namespace, reference observations)
_MISTAKE_OBS: dict[tuple[str, str], dict] = {}  # (lesson id, mistake id) -> observations


def _configs(module):
    from graders.engine.runner import configs_of

    return configs_of(module, "cpu")


def run_in_process(lesson: Lesson, path: Path) -> tuple[dict, list[dict]]:
    """The notebook's graded cells run into a fresh namespace by the child's own runner
    (graders.engine.runner.run_notebook, with the in-process seat: no time or memory limit, no guard: trusted
    notebooks only). Returns (namespace, the cells' reports as cells.json has them)."""
    ns, reports, _ = _run(lesson, path, [])
    return ns, reports


def _run(lesson: Lesson, path: Path, exercises: list[str]) -> tuple[dict, list[dict], dict]:
    """graders.engine.runner.run_notebook on the notebook at `path`, in process: (namespace, cells, obs)."""
    from course_cli.sandboxed.notebook import read_notebook
    from graders.engine.notebook import graded_cells
    from graders.engine.runner import run_notebook

    module = importlib.import_module(lesson.module)
    return run_notebook(module, graded_cells(read_notebook(path)), exercises, _configs(module))


def reference(lesson: Lesson) -> tuple[dict, dict]:
    """(solved namespace, {exercise: observations}) for `lesson`, computed once per test process."""
    if lesson.id not in _SOLVED:
        ns, reports, obs = _run(lesson, lesson.solution_path, [e.name for e in lesson.exercises])
        assert all(r["status"] == "ok" for r in reports), reports
        _SOLVED[lesson.id] = (ns, obs)
    return _SOLVED[lesson.id]


def mistake_observations(lesson: Lesson, mistake) -> dict:
    """The observations of the solved namespace with `mistake`'s code in place of its exercise."""
    from graders.engine import probe_exercise, register_source

    if (lesson.id, mistake.id) in _MISTAKE_OBS:
        return _MISTAKE_OBS[lesson.id, mistake.id]
    module = importlib.import_module(lesson.module)
    ns, _ = reference(lesson)
    m_ns = dict(ns)
    src = mistake_source(mistake, lesson.id)
    register_source(f"<mistake {mistake.id}>", src)
    exec(compile(src, f"<mistake {mistake.id}>", "exec", dont_inherit=True), m_ns)
    _MISTAKE_OBS[lesson.id, mistake.id] = probe_exercise(module, m_ns, mistake.exercise, _configs(module))
    return _MISTAKE_OBS[lesson.id, mistake.id]


def mutant_observations(lesson: Lesson, exercise: str) -> dict:
    """The engine's mutants of `exercise` that show on a check, probed in this process as the reference child
    probes them (graders/engine/mutations.py), every candidate (no time budget: the same set on any machine);
    computed once per test process. {mutant key: observations}."""
    from graders.engine.mutations import probe_mutants

    if (lesson.id, exercise) not in _MUTANT_OBS:
        module = importlib.import_module(lesson.module)
        ns, ref = reference(lesson)
        kept, counts = probe_mutants(module, ns, exercise, _configs(module), ref[exercise], budget=float("inf"))
        _MUTANT_OBS[lesson.id, exercise] = kept
        _MUTANT_COUNTS[lesson.id, exercise] = counts
    return _MUTANT_OBS[lesson.id, exercise]


_MUTANT_OBS: dict[tuple[str, str], dict] = {}
_MUTANT_COUNTS: dict[tuple[str, str], dict] = {}


def _mistakes(lesson: Lesson, module, names: set[str], mutants: bool, withheld) -> dict:
    """The catalogued mistakes' observations of `names` (less the `withheld` ids), and with mutants=True the
    engine's mutants' beside them."""
    out = {m.id: mistake_observations(lesson, m) for m in module.MISTAKES
           if m.exercise in names and m.id not in set(withheld)}
    if mutants:
        for name in sorted(names):
            out.update(mutant_observations(lesson, name))
    return out


def judge_in_process(lesson: Lesson, exercise: str, student: dict, mutants: bool = False, withheld=()):
    """Judge `student`'s observations of `exercise` against the in-process reference and every known
    mistake of that exercise, as `course check` does (CPU only); mutants=True: the engine's mutants too."""
    from graders.engine import judge_exercise

    module = importlib.import_module(lesson.module)
    _, ref = reference(lesson)
    ex = next(e for e in lesson.exercises if e.name == exercise)
    mistakes = _mistakes(lesson, module, {exercise}, mutants, withheld)
    return judge_exercise(module, ex, student, ref[exercise], mistakes, gpu=False)


def check_in_process(lesson: Lesson, path: Path, exercises: list[str] | None = None, mutants: bool = False,
                     withheld=()):
    """`course check --notebook path` for a trusted notebook (a test's fixture), in this process: the
    same runner (graders.engine.runner), mistakes and verdict rules (graders/verdict.py) as the sandboxed path.
    mutants=True adds the engine's mutants (as the reference child does); `withheld`: catalogued ids left out."""
    from course_cli.sandboxed.notebook import read_notebook
    from graders.engine.notebook import graded_cells
    from graders.engine.verdict import StudentRun, judge_lesson

    module = importlib.import_module(lesson.module)
    _, ref = reference(lesson)
    wanted = [e for e in lesson.exercises if exercises is None or e.name in exercises]
    cells = graded_cells(read_notebook(path))
    _, reports, obs = _run(lesson, path, [e.name for e in wanted])
    mistakes = _mistakes(lesson, module, {e.name for e in wanted}, mutants, withheld)
    return judge_lesson(lesson, module, StudentRun(obs, reports), ref, mistakes, cells, str(path), wanted)


def check_one(lesson: Lesson, path: Path, exercise: str, mutants: bool = False, withheld=()):
    """`grade_one`, in process (for the course's own fixtures): only `exercise`'s ExerciseResult."""
    (ex,) = check_in_process(lesson, path, [exercise], mutants, withheld).exercises
    return ex


def set_limit(monkeypatch, field: str, value) -> None:
    """One of the sandbox's limits (course_cli/settings.py Limits field) for this test, through the environment
    variable the run reads (so in process, in a CLI command and in the processes the test starts alike)."""
    from course_cli.settings import Limits

    name, unit = Limits.ENV[field]
    monkeypatch.setenv(name, repr(value / unit) if unit != 1 else repr(value))


_NUMBER = __import__("re").compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
_INDEX = __import__("re").compile(r"index \(([\d, ]*)\)")


def golden_differences(got, want, where: str = "") -> list[str]:
    """Where two stored verdicts differ, as paths. Every status, score, name and diagnosis must match exactly,
    and a message word for word and index for index; but a number printed in a message may differ by up to 1 %
    (float32 sums in another order, on another CPU's vector width, move the 4th significant digit of an error,
    and the count of low-precision elements just at the tolerance by one or two, never the verdict), and up to
    5 % in a message about bfloat16 or float16 inputs (a wrong answer's largest error in bfloat16 moved 1.02 %
    between two x86 CPUs)."""
    if isinstance(want, dict) and isinstance(got, dict):
        if sorted(got) != sorted(want):
            return [f"{where}: keys {sorted(set(got) ^ set(want))}"]
        return [d for k in want for d in golden_differences(got[k], want[k], f"{where}.{k}")]
    if isinstance(want, list) and isinstance(got, list):
        if len(got) != len(want):
            return [f"{where}: {len(got)} items, stored {len(want)}"]
        return [d for i, (g, w) in enumerate(zip(got, want)) for d in golden_differences(g, w, f"{where}[{i}]")]
    if isinstance(want, str) and isinstance(got, str) and got != want:
        if _NUMBER.split(got) != _NUMBER.split(want) or _INDEX.findall(got) != _INDEX.findall(want):
            return [f"{where}: {got!r} != {want!r}"]
        low = "bfloat16" in want or "float16" in want  # 8 or 11 bits: another CPU's kernels move the 3rd digit
        for g, w in zip(_NUMBER.findall(got), _NUMBER.findall(want)):
            if abs(float(g) - float(w)) > (5e-2 if low else 1e-2) * max(abs(float(w)), 1e-30):
                return [f"{where}: {g} != {w} in {got!r}"]
        return []
    return [] if got == want else [f"{where}: {got!r} != {want!r}"]


def peak_rss_start() -> int:
    """Start measuring this process's peak RSS from now: resets the address space's high-water mark (writing 5
    to /proc/self/clear_refs) and returns the RSS now, in bytes. RUSAGE_SELF's ru_maxrss can't do it: it only
    grows, so a pytest worker that peaked in an earlier test hides any growth below that peak."""
    Path("/proc/self/clear_refs").write_text("5")
    return _status_kib("VmRSS") * 1024


def peak_rss_since(start: int) -> int:
    """How far this process's RSS rose above `start` (peak_rss_start's value) since that call, in bytes."""
    return _status_kib("VmHWM") * 1024 - start


def _status_kib(field: str) -> int:
    return next(int(line.split()[1]) for line in Path("/proc/self/status").read_text().splitlines()
                if line.startswith(field + ":"))


# `python -c PEAK <course arguments>`: runs the course's CLI, then prints "PEAK_KIB <own> <children>": the
# process's own peak RSS and the largest of its waited-for children's (RUSAGE_CHILDREN), in KiB. Its own is VmHWM
# (/proc/self/status: this address space's high-water mark, new at exec), never RUSAGE_SELF's ru_maxrss: Linux
# carries that across exec from the forking process (subprocess's vfork shares the pytest worker's pages), so it
# read the worker's peak from earlier tests (1087 MiB in CI, for a class whose grader peaks near 350 MiB)
PEAK = ("import resource, sys\n"
        "from course_cli.main import cli\n"
        "try:\n"
        "    cli(sys.argv[1:], prog_name='course')\n"
        "except SystemExit as exc:\n"
        "    code = exc.code\n"
        "own = next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:'))\n"
        "print('PEAK_KIB', own, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, flush=True)\n"
        "sys.exit(code)\n")


# ----------------------------------------------------------------------------------------------
# The slow tier's matrix: every catalogued mistake of a lesson graded in the sandbox once per test session


def _matrix_key(lesson: Lesson) -> str:
    """What a lesson's matrix depends on: its solved notebook, its grader module and every mistake's code."""
    import hashlib

    module = importlib.import_module(lesson.module)
    h = hashlib.sha256(lesson.solution_path.read_bytes())
    h.update(Path(module.__file__).read_bytes())
    for m in module.MISTAKES:
        h.update(f"\0{m.id}\0{m.exercise}\0{mistake_source(m, lesson.id)}".encode())
    return h.hexdigest()[:16]


def grade_mistakes_in_the_sandbox(lesson: Lesson, folder: Path, whole: bool = False) -> dict:
    """{mistake id: LessonResult}: each catalogued mistake of `lesson` (the solved notebook with that mistake's
    code in place of its exercise) graded on that exercise alone, as `grade_one` grades it (whole=True: on every
    exercise, as `course check LESSON` grades it), through one sandbox start for the lesson: a
    warm zygote (course_cli/sandboxed/warm.py: bubblewrap, torch and the graders imported once) forks one check
    per mistake, and each check runs course_cli.sandboxed.child's `run` on its notebook exactly as a fresh cold
    child does (tests/e2e/test_warm_e2e.py holds warm = cold). The reference is read once (the disk cache, as
    `course check`'s). Without bubblewrap (no sandbox on this machine) each is graded cold, as grade_one."""
    import copy

    from course_cli.sandboxed import grading, sandbox, warm
    from course_cli.sandboxed.notebook import read_notebook
    from graders.engine.notebook import graded_cells

    notebooks = folder / lesson.id
    logs = folder / f"{lesson.id}-logs"
    notebooks.mkdir(parents=True, exist_ok=True)
    logs.mkdir(exist_ok=True)
    paths = {m.id: (m, with_mistake(lesson, m, notebooks)) for m in mistakes_of(lesson)}
    if not sandbox.bwrap_status()[0]:
        return {mid: grade_notebook(lesson, path, None if whole else [m.exercise]) for mid, (m, path) in paths.items()}
    reference = grading.Reference.finish(lesson, *grading.Reference.start(lesson, "cpu"), "cpu")
    zygote = warm.Zygote(lesson, str(notebooks), logs)
    try:
        out = {}
        for mid, (m, path) in paths.items():
            g = grading.Grading(lesson, graded_cells(read_notebook(path)), str(path), None if whole else [m.exercise],
                                cwd=str(notebooks), runner=zygote.runner, reference=reference.for_one_grading())
            out[mid] = g.finish()
        return out
    finally:
        zygote.stop()


class SandboxMatrix:
    """The slow tier's gradings of the lessons' own notebooks, each made once per test session and shared by the
    tests that read them: every catalogued mistake of a lesson (`mistake`, `graded`: the first test of a lesson to
    ask grades its whole catalogue, `grade_mistakes_in_the_sandbox`) and the solved and stub notebooks graded cold
    (`cold`). Each is stored under `shared`, keyed by the code it depends on; the tests after it, in any xdist
    worker, read it. A test that asks while another worker is still grading the same thing does not wait: it
    grades what it needs itself, cold (as `grade_one`), so no worker stands idle. `shared`: a folder every worker
    of the session sees."""

    def __init__(self, shared: Path):
        self.shared = shared
        self.results: dict[str, object] = {}

    def mistake(self, lesson: Lesson, mistake):
        """The ExerciseResult of `mistake`'s notebook, graded in the sandbox."""
        (ex,) = self.graded(lesson, mistake).exercises
        return ex

    def graded(self, lesson: Lesson, mistake):
        """The LessonResult (its notes too) of `mistake`'s notebook (`with_mistake`'s) graded on its exercise."""
        matrix = self._once(f"{lesson.id}-mistakes-{_matrix_key(lesson)}",
                            lambda: grade_mistakes_in_the_sandbox(lesson, self.shared / "notebooks"))
        if matrix is None:  # another worker is grading this lesson now: this one mistake, cold
            import tempfile

            with tempfile.TemporaryDirectory(dir=self.shared) as tmp:
                return grade_notebook(lesson, with_mistake(lesson, mistake, Path(tmp)), [mistake.exercise])
        return matrix[mistake.id]

    def whole(self, lesson: Lesson, mistake):
        """The LessonResult of `mistake`'s notebook graded on every exercise (what `course check LESSON` prints for
        it), all the lesson's mistakes through one warm zygote (`grade_mistakes_in_the_sandbox`, whole=True), once
        per session; a fresh cold child for this one while another worker grades them."""
        matrix = self._once(f"{lesson.id}-whole-{_matrix_key(lesson)}",
                            lambda: grade_mistakes_in_the_sandbox(lesson, self.shared / "whole", whole=True))
        if matrix is None:
            import tempfile

            with tempfile.TemporaryDirectory(dir=self.shared) as tmp:
                return grade_notebook(lesson, with_mistake(lesson, mistake, Path(tmp)))
        return matrix[mistake.id]

    def cold(self, lesson: Lesson, path: Path):
        """The LessonResult of the lesson's own notebook at `path` (its solved or its stub notebook), every
        exercise, graded by a fresh cold sandboxed child (`grade_notebook`), once per session."""
        import hashlib

        key = hashlib.sha256(path.read_bytes() + _matrix_key(lesson).encode()).hexdigest()[:16]
        got = self._once(f"{lesson.id}-{path.stem}-{path.parent.name}-{key}", lambda: grade_notebook(lesson, path))
        return got if got is not None else grade_notebook(lesson, path)

    def hostile_corpus(self) -> Path:
        """tests/fixtures/hostile/'s notebooks, copied into one folder of this session's (every worker's) shared
        folder: the folder every grading of the corpus reads them from (`hostile`), so that a message naming a
        notebook's path names the same path in each test. A child never writes there (its root is read-only,
        its working folder one of its own), so a grading cannot leave anything for the next."""
        import os
        import threading

        folder = self.shared / "hostile-corpus"
        folder.mkdir(parents=True, exist_ok=True)
        for nb in sorted(HOSTILE.glob("*.ipynb")):
            if not (folder / nb.name).exists():  # another worker or thread may be copying it too: whole or not at all
                tmp = folder / f".{nb.name}.{os.getpid()}-{threading.get_ident()}.tmp"
                tmp.write_bytes(nb.read_bytes())
                tmp.replace(folder / nb.name)
        return folder

    def hostile(self, name: str):
        """The LessonResult of the corpus's notebook `name` (lesson 01; in `hostile_corpus()`), every exercise,
        graded by a fresh cold sandboxed child (`grade_notebook`) under the limits this process's environment sets
        (the corpus's short limits, tests/unit/test_hostile.py SHORT), once per session: the corpus's test
        (tests/e2e/test_hostile_e2e.py) and its warm twin (tests/e2e/test_warm_e2e.py) read the same grading. The
        key holds the notebook, lesson 01's matrix key and every limit's variable, so a test under other limits
        never reads it."""
        import hashlib
        import os

        from course_cli.settings import Limits
        from graders.registry import find_lesson

        lesson = find_lesson("lesson01")
        path = self.hostile_corpus() / name
        limits = "\0".join(f"{var}={os.environ.get(var, '')}" for var, _ in sorted(Limits.ENV.values()))
        key = hashlib.sha256(path.read_bytes() + _matrix_key(lesson).encode() + limits.encode()).hexdigest()[:16]
        # wait=True: the corpus's test grades it four at a time (tests/unit/test_hostile.py `results`) while its
        # warm twin, on the other worker, asks for it one by one; a notebook being graded is waited for, not
        # graded twice (the slow tier is CPU-bound: a second grading would cost the other worker as much)
        return self._once(f"hostile-{path.stem}-{key}", lambda: grade_notebook(lesson, path), wait=True)

    def _once(self, name: str, compute, wait: bool = False):
        """compute()'s value, computed once in this session by whichever worker asks first (and kept in this
        process); None while another worker is computing it (wait=True: that worker's value, once stored)."""
        import fcntl
        import pickle

        if name in self.results:
            return self.results[name]
        self.shared.mkdir(parents=True, exist_ok=True)
        stored = self.shared / f"{name}.pickle"
        if not stored.exists():
            with open(self.shared / f"{name}.lock", "w") as lock:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
                except BlockingIOError:
                    return None
                if not stored.exists():  # (else: stored by the worker that held the lock just before)
                    tmp = stored.with_suffix(".tmp")
                    tmp.write_bytes(pickle.dumps(compute()))
                    tmp.replace(stored)  # whole or not at all
        self.results[name] = pickle.loads(stored.read_bytes())  # this session's own file (its base temp folder)
        return self.results[name]
