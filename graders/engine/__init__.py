"""The grading engine, and the lesson author's API (re-exported here, so a lesson module imports from
`graders.engine` only).

A *probe* is a function of a namespace (the student's or the reference's) that calls the exercise on
seeded inputs and returns observations: tensors, numbers, strings. Probes run in the sandboxed child.
A *judge* is a function of the student's and the reference's observations that returns None (pass)
or a message (fail). Judges run in the parent, which never runs student code.

A lesson module declares `CHECKS = Checks("lessonNN")`, decorates probes with `@CHECKS.probe(...)`,
lists its known `MISTAKES` and `FORBIDDEN` APIs. See graders/lesson01_sdpa.py.

The modules, by the process they run in:
    declared  checks.py (Config, Check, Checks, Mistake, the battery) · notebook.py (which cells are graded)
    child     probe.py (ProbeContext, the recorder, probe_exercise, observations as plain data)
    parent    judges.py (the shared judges) · verdict.py (every status rule) · diagnosis.py (catalogued, then
              structural) · scoring.py (partial credit) · mistakes.py (a mistake's source from its edits)
    both      compare.py (tolerances, messages) · results.py (the result dataclasses, JSON) · timing.py
"""

# The API, resolved on first use (PEP 562): importing a torch-free part (notebook, results, registry users such
# as `course list`) must not import torch through this package.
_API = {
    "BATTERY": "checks",
    "CPU": "checks",
    "CPU_AND_GPU": "checks",
    "ENTRIES": "checks",
    "GPU_ONLY": "checks",
    "HIDDEN_TWIN": "checks",
    "hidden_only": "checks",
    "hidden_properties": "checks",
    "OFFSET_SCORES": "checks",
    "Check": "checks",
    "Checks": "checks",
    "CHECKS_OF": "checks",
    "Config": "checks",
    "Judge": "checks",
    "JudgeContext": "checks",
    "Mistake": "checks",
    "Probe": "checks",
    "Variant": "checks",
    "Tolerance": "compare",
    "close": "compare",
    "describe": "compare",
    "first_failure": "compare",
    "agrees_with": "judges",
    "expect_value_error": "judges",
    "made_on_meta": "judges",
    "raises_value_error": "judges",
    "same": "judges",
    "same_observations": "judges",
    "mistake_source": "mistakes",
    "solved_cell": "mistakes",
    "CallRecorder": "probe",
    "ExerciseTimeout": "probe",
    "ProbeContext": "probe",
    "WrongResult": "probe",
    "clean": "probe",
    "error_obs": "probe",
    "on_meta": "probe",
    "probe_exercise": "probe",
    "register_source": "probe",
    "seed_for": "probe",
    "student_traceback": "probe",
    "median_ms": "timing",
    "judge_exercise": "verdict",
}
__all__ = list(_API)


def __getattr__(name: str):
    if name in _API:
        import importlib

        value = getattr(importlib.import_module(f"{__name__}.{_API[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
