"""The verdict rules: from what a grading left behind to a LessonResult, in one place.

`judge_lesson` takes the student's observations (one dict per exercise, None where the child never
wrote them), the cells' reports, how the child ended and the reference's observations, and decides
each exercise's status: missing (not_implemented), timeout, error or failed, each with a typed reason
(`Absent`), then hands exercises with observations to `judge_exercise` (below). course_cli/sandboxed/grading.py
only starts the children, reads their files and calls this; the in-process test harness calls it too.
"""

from __future__ import annotations

import re
from typing import Callable
from dataclasses import dataclass, field

from . import compare
from .checks import CHECKS_OF, Check, Config, switch_offs
from .judges import JudgeContext, wrong_devices
from .notebook import defines, defining_cell
from .diagnosis import diagnose
from .kinds import diagnosis_id
from .mutations import entries as mutation_entries
from .results import Absent, CheckResult, ExerciseResult, LessonResult, exercise_status


@dataclass
class StudentRun:
    """What the student's child left behind."""

    observations: dict[str, dict | None]  # exercise -> observations; None: never written
    cell_reports: list[dict] = field(default_factory=list)  # cells.json: {"index", "status", "error"?}
    death: str | None = None  # why the child ended early, in words (None: it finished)
    timed_out: bool = False  # the child as a whole ran past its time limit


def absent(name: str, obs: dict | None, run: StudentRun, cells: list[dict]) -> Absent | None:
    """Why exercise `name` has no observations, or None when it has them (or when the engine's own
    defaults apply: never reached -> timeout, defined nowhere -> not_implemented)."""
    if obs is not None and not obs.get("missing"):
        return None
    failed = {c["index"]: c for c in run.cell_reports if c.get("status") not in ("ok", "skipped")}
    cell = defining_cell(cells, name)
    if obs is None and run.death:
        if run.timed_out:
            return Absent("timeout", run.death, check="ran")
        return Absent("error", run.death)
    if cell and cell["index"] in failed:
        own = failed[cell["index"]]["error"]
        cause = _earlier_cause(failed, cell["index"]) if own.startswith("NameError") else None
        if cause:
            return Absent("error", f"{cause}; so `{name}` is not defined: its cell then failed with {own}")
        return Absent("error", f"`{name}` is not defined because its cell failed: {own}")
    if cell:
        return Absent("error", f"`{name}` is not defined after running cell {cell['index']}")
    return None


_NO_MODULE = re.compile(r"(?:ModuleNotFoundError|ImportError): No module named '([\w.]+)'")


def _earlier_cause(failed: dict[int, dict], index: int) -> str | None:
    """What an earlier failed cell explains of a later NameError: a missing module, said as itself."""
    for i in sorted(k for k in failed if k < index):
        error = str(failed[i].get("error", ""))
        m = _NO_MODULE.match(error)
        if m:
            where = error.split("\n  at ", 1)[1].split(":")[0] if "\n  at " in error else f"cell {i}"
            return (f"the notebook imports `{m.group(1).split('.')[0]}` ({where}), which is not installed where it "
                    f"is graded: use only what the lesson imports (torch, and the course's own modules)")
    return None


def judge_lesson(lesson, module, run: StudentRun, reference: dict[str, dict],
                 reference_mistakes: "dict[str, dict] | Callable[[str], dict]",
                 cells: list[dict], notebook: str = "", exercises: list | None = None, gpu: bool = False,
                 only_public: bool = False) -> LessonResult:
    """The lesson's result: `exercises` (registry Exercise entries; default all of the lesson's) judged
    from the student's run against the reference's observations and the known mistakes'."""

    result = LessonResult(lesson.id, notebook, public_only=only_public)
    result.notes += [c["error"] for c in run.cell_reports if c.get("status") not in ("ok", "skipped")]
    if run.death:
        result.notes.append(run.death)
    for ex in exercises if exercises is not None else lesson.exercises:
        obs = run.observations.get(ex.name)
        why = absent(ex.name, obs, run, cells)
        if why is not None and why.check == "ran":
            result.exercises.append(ExerciseResult(ex.name, why.status, 0.0, float(ex.points),
                                                   [CheckResult(why.check, why.status, message=why.message, kind="absent")]))
            continue
        if obs is not None and obs.get("timeout"):
            res = judge_exercise(module, ex, obs, reference[ex.name], {}, gpu, only_public=only_public)
            res.status, res.points, res.diagnosis, res.diagnosis_id = "timeout", 0.0, None, None
            res.public_diagnosis = (None, None)
            if not any(c.status == "timeout" for c in res.checks):
                res.checks.append(CheckResult("time limit", "timeout", message=obs.get("message", ""), kind="absent"))
            result.exercises.append(res)
            continue
        res = judge_exercise(module, ex, obs, reference[ex.name], _mistakes_of(module, ex.name, reference_mistakes),
                             gpu, why, only_public)
        result.exercises.append(_switched_off(res, module, cells) or res)
    _blocked_by_stubs(lesson, result, cells)
    return result


def _mistakes_of(module, exercise: str, reference_mistakes) -> "Callable[[], dict]":
    """The known mistakes' and the mutants' observations for `exercise`, read when it fails (a passing exercise
    never needs them). `reference_mistakes`: every exercise's, or a function of the exercise's name that returns
    a mapping holding at least that exercise's (a reference cache reads them per exercise, on demand)."""
    def read() -> dict:
        every = reference_mistakes(exercise) if callable(reference_mistakes) else reference_mistakes
        mine = {m.id: every[m.id] for m in getattr(module, "MISTAKES", ()) if m.exercise == exercise and m.id in every}
        mine.update(mutation_entries(every, exercise))  # the engine's mutants (mutations.py)
        return mine

    return read


def _blocked_by_stubs(lesson, result: LessonResult, cells: list[dict]) -> None:
    """An exercise whose own code is written but that stops on the NotImplementedError of one it calls
    (registry `depends`) is not "not implemented": it fails with "fix X first"."""
    status = {e.id: e.status for e in result.exercises}
    for i, res in enumerate(result.exercises):
        if res.status != "not_implemented":
            continue
        try:
            deps = [d for d in lesson.exercise(res.id).depends if status.get(d, "passed") != "passed"]
        except (LookupError, AttributeError):
            continue
        own = defining_cell(cells, res.id)
        if not deps or own is None or "NotImplementedError" in _body_of(own["source"], res.id):
            continue
        names = " and ".join(f"`{d}`" for d in deps)
        msg = (f"your `{res.id}` calls {names}, which {'is' if len(deps) == 1 else 'are'} not written yet "
               f"(it raises NotImplementedError): fix {names} first")
        result.exercises[i] = ExerciseResult(res.id, "failed", 0.0, res.max_points,
                                             [CheckResult("what it calls is written", "failed", message=msg)])


def _body_of(source: str, name: str) -> str:
    """The text of `name`'s definition in a cell: from its def/class line to the next top-level statement."""
    lines = source.splitlines()
    start = next((i for i, l in enumerate(lines) if defines(l, name)), None)
    if start is None:
        return source
    body = [lines[start]]
    for line in lines[start + 1:]:
        if line and not line[0].isspace() and not line.startswith(("#", ")")):
            break
        body.append(line)
    return "\n".join(body)


def _switched_off(res: ExerciseResult, module, cells: list[dict]) -> ExerciseResult | None:
    """`res` failed when the code of an exercise with forbidden APIs names a switch of the grader's
    recorders (checks.SWITCH_OFFS) in its own cell or in a cell that defines no exercise (a helper)."""
    if not getattr(module, "FORBIDDEN", {}).get(res.id) or res.status == "not_implemented":
        return None
    exercises = [c.exercise for c in CHECKS_OF(module)]
    own = defining_cell(cells, res.id)
    names = sorted({n for c in cells if c is own or not any(defines(c["source"], e) for e in exercises)
                    for n in switch_offs(c["source"])})
    if not names:
        return None
    msg = (f"names {', '.join(names)}, which switches off the grader's recording of the torch calls your code "
           f"makes: write the computation in plain torch, without hiding it")
    checks = [c for c in res.checks if c.name != "uses no forbidden API"]
    checks.append(CheckResult("uses no forbidden API", "failed", message=msg))
    status = exercise_status(checks)
    keep = res.status in ("failed", "error")
    public = (res.public_diagnosis or (None, None))[0] if keep else None
    return ExerciseResult(res.id, status, 0.0, res.max_points, checks, res.diagnosis if keep else None,
                          public_diagnosis=(public, None))


# ----------------------------------------------------------------------------------------------
# One check, one exercise: the status rules


def observed_size(obs) -> int:
    """How many values `obs` holds: a tensor's elements, a container's items' sizes summed, 1 for a scalar."""
    if hasattr(obs, "numel") and callable(obs.numel):
        return int(obs.numel())
    if isinstance(obs, dict):
        return sum(observed_size(v) for k, v in obs.items() if not str(k).startswith("__"))
    if isinstance(obs, (list, tuple)):
        return sum(observed_size(v) for v in obs)
    return 1


def _verdict(check: Check, config: Config, s_obs: dict | None, r_obs: dict | None) -> CheckResult:
    res = CheckResult(check.name, "passed", config.device, config.dtype)
    if r_obs is not None and "__error__" not in r_obs:
        res.size = observed_size(r_obs)
    if r_obs is None:
        res.status, res.message = "error", "the reference has no observations for this check (grader bug)"
        return res
    if "__error__" in r_obs:
        res.status, res.message = "error", f"the reference failed this check (grader bug): {r_obs['__error__']['message']}"
        return res
    if s_obs is None:
        res.status, res.message = "timeout", "not run: the exercise ran out of time before this check"
        return res
    if "__error__" in s_obs:
        err = s_obs["__error__"]
        kind = err["kind"]
        if kind == "not_implemented":
            where = err["message"].split("\n  at ")[-1].split(":")[0] if "\n  at " in err["message"] else ""
            res.status, res.message = "not_implemented", ("not implemented yet: it raises NotImplementedError"
                                                          + (f" ({where})" if where else ""))
        elif kind == "timeout":
            res.status, res.message = "timeout", err["message"]
        elif kind == "wrong":  # the probe found a result of the wrong kind (not a tensor, a tuple too short)
            res.status, res.message, res.failure = "failed", err["message"], "shape"
        elif kind == "memory":
            res.status, res.message = "error", f"ran out of memory: {err['message']}"
        elif check.variant:  # code that runs on the usual inputs but raises on these: a wrong answer
            res.status, res.message = "failed", f"{check.variant.message}: it raised {err['message']}"
            res.failure = "exception"
        else:
            res.status, res.message, res.failure = "error", err["message"], "exception"
        return res
    moved = wrong_devices(s_obs, r_obs, config.device)
    if moved:
        key, dev = next(iter(moved.items()))
        res.failure = "device"
        res.status, res.message = "failed", (
            f"`{key}` is on {dev}, but the inputs were on {config.device}: make new tensors on the input's device "
            f"(device=x.device, or torch.zeros_like(x)), and never move results with .cpu() or .cuda()")
        return res
    with compare.collecting() as found:
        try:
            msg = check.judge(s_obs, r_obs, JudgeContext(config))
        except Exception as exc:  # a judge must not crash on odd observations: say what was odd
            msg = f"could not judge the observations ({type(exc).__name__}: {exc})"
    if msg:
        res.status, res.message = "failed", msg
        # the kind of the comparison whose message the judge passed on (it may have added words around it)
        kinds = [what for text, what in found if text in msg]
        # a broken rule's message holds its inner comparison's: the rule is the kind, unless a shape or dtype
        # differs (those are fixed first)
        res.failure = "property" if "property" in kinds and not {"shape", "dtype"} & set(kinds) else \
            next((k for k in kinds if k != "property"), "")
    return res



def judge_exercise(module, exercise, student: dict | None, reference: dict,
                   mistakes: "dict[str, dict] | Callable[[], dict]", gpu: bool, absent: Absent | None = None,
                   only_public: bool = False) -> ExerciseResult:
    """Turn one exercise's observations into its result, checks in order, with a diagnosis. Without
    observations the result is `absent`'s (graders/engine/verdict.py says why), else: never reached ->
    timeout, defined by no cell -> not_implemented."""
    name, points = exercise.name, float(exercise.points)
    checks = [c for c in CHECKS_OF(module).of(name) if not (only_public and c.hidden)]
    results: list[CheckResult] = []
    if student is None or student.get("missing"):
        if absent is None and student is None:
            absent = Absent("timeout", "the notebook's code did not reach this exercise before the time limit")
        elif absent is None:
            absent = Absent("not_implemented", f"no cell defines `{name}` (deleted or renamed?)")
        return ExerciseResult(name, absent.status, 0.0, points,
                              [CheckResult(absent.check, absent.status, message=absent.message, kind="absent")])
    s_checks, r_checks = student["checks"], reference["checks"]
    for check in checks:
        first = len(results)
        for config in check.configs:
            if config.device == "cuda" and not gpu:
                results.append(CheckResult(check.name, "skipped", config.device, config.dtype,
                                           "no CUDA device here: GPU check skipped (not passed)"))
                continue
            r_obs = r_checks.get(check.key(config))
            if check.variant and isinstance(r_obs, dict) and "__inapplicable__" in r_obs:
                continue  # a battery entry for an exercise that takes no tensor input
            s_obs = s_checks.get(check.key(config))
            if s_obs is None and student.get("out_of_memory"):
                results.append(CheckResult(check.name, "error", config.device, config.dtype,
                                           "not run: the checks before it ran out of memory"))
                continue
            results.append(_verdict(check, config, s_obs, r_obs))
        if check.hidden:  # what students see of it: its name and status (results.for_students)
            for r in results[first:]:
                r.hidden = check.property
    forbidden = getattr(module, "FORBIDDEN", {}).get(name)
    if forbidden:
        used = student.get("forbidden", [])
        switches = [u for u in used if "switches off" in u]
        calls = [u for u in used if u not in switches]
        message = (f"calls {', '.join(calls)}, which this exercise asks you to write yourself" if calls else
                   f"calls {', '.join(u.split(' (')[0] for u in switches)}, which switches off the grader's "
                   f"recording of the torch calls your code makes: write it in plain torch" if switches else "")
        results.append(CheckResult("uses no forbidden API", "failed" if used else "passed", message=message,
                                   kind="forbidden"))
    mutated = student.get("mutated", [])
    results.append(CheckResult("leaves its inputs unchanged", "failed" if mutated else "passed",
                               message=("modifies its input in place (" + "; ".join(mutated) + "): work on a copy "
                                        "or use out-of-place operations" if mutated else ""), kind="mutation"))
    status = exercise_status(results)
    if callable(mistakes):
        mistakes = mistakes() if status in ("failed", "error") else {}
    diagnosis = diagnose(module, name, checks, s_checks, r_checks, mistakes, results) if status in ("failed", "error") else None
    ident = diagnosis_id(diagnosis, getattr(module, "MISTAKES", ()), name)
    return ExerciseResult(name, status, points if status == "passed" else 0.0, points, results, diagnosis, ident,
                          public_diagnosis=_public_diagnosis(module, name, checks, student, reference, mistakes,
                                                             results, (diagnosis, ident)))


def _public_diagnosis(module, name, checks, student, reference, mistakes, results, full) -> tuple:
    """The diagnosis as the public checks alone give it, (text, id): what students see (results.for_students).
    The catalogued mistakes, the mutants and the structural rules are read on the public checks' observations
    only, and a figure is left on a public check, so nothing a student reads is derived from a hidden input; None
    when no public check failed. `full`: the diagnosis over every check, the same when no hidden check ran."""
    public = [c for c in checks if not c.hidden]
    if len(public) == len(checks):
        return full
    shown = [r for r in results if not r.hidden]
    if exercise_status(shown) not in ("failed", "error"):
        return (None, None)
    text = diagnose(module, name, public, student["checks"], reference["checks"], mistakes, shown)
    return (text, diagnosis_id(text, getattr(module, "MISTAKES", ()), name))


# One rule for a submission that was not run at all (every seat: class grading, nbgrader, Gradescope, the
# warm server): each calls it here.
def error_result(lesson, notebook: str, message: str, status: str = "error",
                 not_graded: bool = False) -> LessonResult:
    """Every exercise `status` with `message`; with not_graded=True the submission is NOT GRADED (no score,
    left out of a class's means: a notebook that is not JSON or cannot be read, nothing submitted)."""
    return _every_exercise(lesson, notebook, message, status, message if not_graded else "", "notebook", "grader")


def missing_result(lesson, reason: str) -> LessonResult:
    """The row of a student who handed in nothing gradable: NOT GRADED (no score, left out of the means), the
    reason, never dropped. Its first check (`submission`, kind `absent`) is how a report tells it apart."""
    return _every_exercise(lesson, "", reason, "error", reason, "submission", "absent")


def _every_exercise(lesson, notebook: str, message: str, status: str, not_graded: str, check: str,
                    kind: str) -> LessonResult:
    result = LessonResult(lesson.id, notebook, notes=[message], not_graded=not_graded)
    for ex in lesson.exercises:
        result.exercises.append(ExerciseResult(ex.name, status, 0.0, float(ex.points),
                                               [CheckResult(check, status, message=message, kind=kind)]))
    return result
