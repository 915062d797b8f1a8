"""Grading a notebook: extract its cells, run them and the probes in a child, judge here.

    notebook ─ read_notebook ─ graded_cells ─┐
                                             ├─ child (student) ──── obs-*.pt ─┐
    solutions/<lesson> ─ graded_cells ───────┴─ child (reference) ─ cache ─────┴─ judge ─ LessonResult

The reference child runs the solved notebook and the known mistakes once; its observations are cached,
keyed by the lesson's source, the grader, torch's version and the device. While the children work, this
process imports torch (it needs it to judge): on two cores the imports overlap.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shutil
from pathlib import Path

from graders.registry import Lesson, ROOT
from graders.results import CheckResult, ExerciseResult, LessonResult

from . import sandbox
from .notebook import NotebookError, defining_cell, graded_cells, read_notebook


CACHE_DIR = Path(os.environ.get("COURSE_CACHE_DIR", Path.home() / ".cache" / "attention-course"))

def _source_files(lesson: Lesson) -> list[Path]:
    """What the reference observations depend on: the lesson's solved notebook and those it imports
    (`import_lesson("lessonNN")`, transitively), its grader and the engine."""
    import re

    from graders.registry import find_lesson

    seen, todo = [], [lesson]
    while todo:
        cur = todo.pop()
        if cur in seen:
            continue
        seen.append(cur)
        text = cur.solution_path.read_text(encoding="utf-8")
        todo += [find_lesson(k) for k in re.findall(r"import_lesson\(\s*\\?['\"](\w+)", text)]
    g = ROOT / "graders"
    return ([l.solution_path for l in seen] + [g / f"{l.id}_{l.slug}.py" for l in seen]
            + [g / "engine.py", g / "compare.py", g / "parts.py", ROOT / "course_cli" / "child.py"])


def reference_key(lesson: Lesson, device: str) -> str:
    h = hashlib.sha256()
    h.update(lesson.id.encode())
    for p in _source_files(lesson):
        h.update(p.name.encode())
        h.update(p.read_bytes() if p.exists() else b"")
    h.update(importlib.metadata.version("torch").encode())
    h.update(device.encode())
    return h.hexdigest()[:24]


def cuda_available() -> bool:
    """Asked here, in the parent: the CPU child runs with CUDA hidden (CUDA_VISIBLE_DEVICES="")."""
    import torch

    return torch.cuda.is_available()


def _load(path: Path):
    import torch

    try:
        return torch.load(path, weights_only=True, map_location="cpu")
    except Exception:
        return None


_TRUSTED: dict[tuple[str, str], "Reference"] = {}  # fresh references, kept in this process's memory only


class Reference:
    """The solved notebook's and the mistakes' observations for one lesson and device.

    `course check` keeps them in a disk cache (a student can only fool themselves by editing it). Class
    grading (`course grade`, nbgrader's autograde) passes trusted=True: the reference is computed afresh by a
    child that runs only the solved notebook, and kept in this process's memory, out of reach of the
    submissions' children, which could write to the cache folder."""

    def __init__(self, exercises: dict, mistakes: dict):
        self.exercises, self.mistakes = exercises, mistakes

    @staticmethod
    def inject(lesson: Lesson, reference: "Reference", device: str = "cpu") -> None:
        """Make `reference`, computed trusted by another process (`course grade --scheduler`'s client),
        this process's in-memory trusted reference: trusted=True gradings here then use it as is."""
        _TRUSTED[(lesson.id, device)] = reference

    @staticmethod
    def start(lesson: Lesson, device: str = "cpu", trusted: bool = False):
        """Return (cache path or None, child or None): a child starts only when nothing is at hand."""
        if trusted:
            if (lesson.id, device) in _TRUSTED:
                return None, None
            path = None
        else:
            path = CACHE_DIR / f"{lesson.id}-{device}-{reference_key(lesson, device)}.pt"
            if path.exists():
                return path, None
        cells = graded_cells(read_notebook(lesson.solution_path))
        child = sandbox.start(lesson.module, cells, [e.name for e in lesson.exercises], device, mistakes=True)
        return path, child

    @staticmethod
    def finish(lesson: Lesson, path: Path | None, child, device: str = "cpu") -> "Reference":
        import copy

        import torch

        if child is None and path is None:
            return copy.deepcopy(_TRUSTED[(lesson.id, device)])
        if child is not None:
            child.wait()
            if child.death():
                raise RuntimeError(f"the reference solution of {lesson.id} failed to run: {child.death()}\n"
                                   f"{child.text('stderr.txt')}")
            data = {"exercises": {e.name: _load(child.out / f"obs-{e.name}.pt") for e in lesson.exercises},
                    "mistakes": {}}
            for f in child.out.glob("mistake-*.pt"):
                data["mistakes"][f.stem.removeprefix("mistake-")] = _load(f)
            shutil.rmtree(child.out, ignore_errors=True)
            if path is None:
                _TRUSTED[(lesson.id, device)] = Reference(data["exercises"], data["mistakes"])
                return copy.deepcopy(_TRUSTED[(lesson.id, device)])
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            torch.save(data, tmp)
            os.replace(tmp, path)
        data = _load(path)
        return Reference(data["exercises"], data["mistakes"])


def _error_result(lesson: Lesson, notebook: str, message: str, status: str = "error") -> LessonResult:
    result = LessonResult(lesson.id, notebook, notes=[message])
    for ex in lesson.exercises:
        result.exercises.append(ExerciseResult(ex.name, status, 0.0, float(ex.points),
                                               [CheckResult("notebook", status, message=message)]))
    return result


class Grading:
    """One grading in flight: `start` launches the children and returns at once; `finish` judges.
    (nbgrader's autograde starts one before its kernel runs the notebook, and finishes it after.)"""

    def __init__(self, lesson: Lesson, cells: list[dict], notebook: str = "", exercises: list[str] | None = None,
                 only_public: bool = False, cwd: str | None = None, trusted: bool = False):
        self.lesson, self.cells, self.notebook, self.only_public, self.cwd = lesson, cells, notebook, only_public, cwd
        self.trusted = trusted
        self.wanted = [e for e in lesson.exercises if exercises is None or e.name in exercises]
        self.names = [e.name for e in self.wanted]
        # the student's child first, then the reference's if the cache misses
        self.student = sandbox.start(lesson.module, cells, self.names, "cpu", only_public=only_public, cwd=cwd)
        self.ref_path, self.ref_child = Reference.start(lesson, "cpu", trusted)

    def finish(self) -> LessonResult:
        lesson, cells, names, student = self.lesson, self.cells, self.names, self.student
        module = __import__(lesson.module, fromlist=["CHECKS"])  # imports torch while the children work
        reference = Reference.finish(lesson, self.ref_path, self.ref_child, "cpu")
        student.wait()
        obs = {n: _load(student.out / f"obs-{n}.pt") if (student.out / f"obs-{n}.pt").exists() else None
               for n in names}
        gpu = cuda_available()
        if gpu and any(c.device == "cuda" for check in module.CHECKS for c in check.configs):
            self._add_gpu(obs, reference)
        try:
            return _judge(lesson, module, student, obs, gpu, reference, cells, self.notebook, self.wanted,
                          self.only_public)
        finally:
            shutil.rmtree(student.out, ignore_errors=True)

    def _add_gpu(self, obs: dict, reference: "Reference") -> None:
        """GPU probes run in a second child: without TRITON_INTERPRET, without the address-space limit."""
        lesson, names = self.lesson, self.names
        g_student = sandbox.start(lesson.module, self.cells, names, "cuda", only_public=self.only_public, cwd=self.cwd)
        g_path, g_child = Reference.start(lesson, "cuda", self.trusted)
        g_reference = Reference.finish(lesson, g_path, g_child, "cuda")
        g_student.wait()
        for n in names:
            g = _load(g_student.out / f"obs-{n}.pt") if (g_student.out / f"obs-{n}.pt").exists() else None
            if obs[n] is not None and g is not None and not obs[n].get("missing"):
                obs[n]["checks"].update(g["checks"])
                obs[n]["forbidden"] = sorted(set(obs[n]["forbidden"]) | set(g["forbidden"]))
            reference.exercises[n]["checks"].update(g_reference.exercises[n]["checks"])
        for m, m_obs in g_reference.mistakes.items():
            if m in reference.mistakes:
                reference.mistakes[m]["checks"].update(m_obs["checks"])
        shutil.rmtree(g_student.out, ignore_errors=True)


def grade_cells(lesson: Lesson, cells: list[dict], notebook: str = "", exercises: list[str] | None = None,
                only_public: bool = False, cwd: str | None = None, trusted: bool = False) -> LessonResult:
    """Grade code cells (as `graded_cells` returns them) against the lesson's reference."""
    return Grading(lesson, cells, notebook, exercises, only_public, cwd, trusted).finish()


def _judge(lesson, module, student, all_obs, gpu, reference, cells, notebook, wanted, only_public) -> LessonResult:
    from graders.engine import judge_exercise

    cell_reports = student.json("cells.json") or []
    failed_cells = {c["index"]: c for c in cell_reports if c.get("status") not in ("ok", "skipped")}
    death = student.death()
    result = LessonResult(lesson.id, notebook)
    result.notes += [c["error"] for c in failed_cells.values()]
    if death:
        result.notes.append(death)
    for ex in wanted:
        obs = all_obs[ex.name]
        missing_reason = None
        if obs is None or obs.get("missing"):
            cell = defining_cell(cells, ex.name)
            if obs is None and death:
                missing_reason = "!" + death
                if student.timed_out:
                    result.exercises.append(ExerciseResult(ex.name, "timeout", 0.0, float(ex.points),
                                                           [CheckResult("ran", "timeout", message=death)]))
                    continue
            elif cell and cell["index"] in failed_cells:
                missing_reason = f"!`{ex.name}` is not defined because its cell failed: {failed_cells[cell['index']]['error']}"
            elif cell:
                missing_reason = f"!`{ex.name}` is not defined after running cell {cell['index']}"
        if obs is not None and obs.get("timeout"):
            res = judge_exercise(module, ex, obs, reference.exercises[ex.name], {}, gpu, only_public=only_public)
            res.status, res.points = "timeout", 0.0
            if not any(c.status == "timeout" for c in res.checks):
                res.checks.append(CheckResult("time limit", "timeout", message=obs.get("message", "")))
            result.exercises.append(res)
            continue
        mistakes = {m.id: reference.mistakes[m.id] for m in getattr(module, "MISTAKES", ())
                    if m.exercise == ex.name and m.id in reference.mistakes}
        result.exercises.append(judge_exercise(module, ex, obs, reference.exercises[ex.name], mistakes, gpu,
                                               missing_reason, only_public))
    return result


def grade_notebook(lesson: Lesson, path: str | Path, exercises: list[str] | None = None,
                   only_public: bool = False, trusted: bool = False) -> LessonResult:
    """Grade one notebook file. A notebook that cannot be read gives every exercise `error` with why."""
    try:
        nb = read_notebook(path)
    except NotebookError as exc:
        return _error_result(lesson, str(path), str(exc))
    return grade_cells(lesson, graded_cells(nb), str(path), exercises, only_public, cwd=str(Path(path).parent),
                       trusted=trusted)


def run_benchmark(lesson: Lesson, path: str | Path) -> list[dict]:
    """Run the lesson's `benchmark(ns, device)` on a notebook's code, on the CPU and on CUDA if present."""
    module = __import__(lesson.module, fromlist=["CHECKS"])
    if not hasattr(module, "benchmark"):
        raise LookupError(f"{lesson.id} has no benchmark")
    try:
        cells = graded_cells(read_notebook(path))
    except NotebookError as exc:
        raise RuntimeError(str(exc)) from None
    reports = []
    for device in ("cpu", "cuda"):
        child = sandbox.start(lesson.module, cells, [], device, bench=True, cwd=str(Path(path).parent),
                              exercise_timeout=600).wait()
        try:
            if child.death():
                raise RuntimeError(f"the benchmark did not finish: {child.death()}")
            report = child.json("bench.json") or {}
            report.setdefault("title", f"{lesson.id} on {device}")
            reports.append(report)
            if not cuda_available():
                break
        finally:
            shutil.rmtree(child.out, ignore_errors=True)
    return reports
