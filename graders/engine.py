"""The grading engine: checks as probe + judge, known mistakes, and the device/dtype matrix.

A *probe* is a function of a namespace (the student's or the reference's) that calls the exercise on
seeded inputs and returns observations: tensors, numbers, strings. Probes run in the sandboxed child.
A *judge* is a function of the student's and the reference's observations that returns None (pass)
or a message (fail). Judges run in the parent, which never runs student code.

A lesson module declares `CHECKS = Checks("lessonNN")`, decorates probes with `@CHECKS.probe(...)`,
lists its known `MISTAKES` and `FORBIDDEN` APIs. See graders/lesson01_sdpa.py.
"""

from __future__ import annotations

import importlib
import linecache
import traceback
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode

from . import compare
from .results import CheckResult, ExerciseResult, exercise_status

# ----------------------------------------------------------------------------------------------
# The device/dtype matrix


@dataclass(frozen=True)
class Config:
    device: str  # "cpu" or "cuda"
    dtype: str  # "float32", "float16", "bfloat16", "float64"

    @property
    def key(self) -> str:
        return f"{self.device}/{self.dtype}"


CPU = (Config("cpu", "float32"),)
CPU_AND_GPU = (Config("cpu", "float32"), Config("cuda", "float16"), Config("cuda", "bfloat16"))
GPU_ONLY = (Config("cuda", "float16"), Config("cuda", "bfloat16"))


# ----------------------------------------------------------------------------------------------
# Checks and mistakes, as a lesson module declares them

Probe = Callable[["ProbeContext"], dict]
Judge = Callable[[dict, dict, "JudgeContext"], "str | None"]


@dataclass
class Check:
    exercise: str
    name: str
    probe: Probe
    judge: Judge
    configs: tuple[Config, ...] = CPU
    hidden: bool = False  # hidden from the student notebook's public test cell (nbgrader's hidden tests)

    def key(self, config: Config) -> str:
        return f"{self.name} @ {config.key}"


class Checks(list):
    """The ordered checks of one lesson; `@CHECKS.probe(...)` adds one."""

    def __init__(self, lesson: str):
        super().__init__()
        self.lesson = lesson

    def probe(self, exercise: str, name: str, judge: Judge, configs: tuple[Config, ...] = CPU,
              hidden: bool = False) -> Callable[[Probe], Probe]:
        def add(fn: Probe) -> Probe:
            if any(c.exercise == exercise and c.name == name for c in self):
                raise ValueError(f"duplicate check {exercise}/{name}")
            self.append(Check(exercise, name, fn, judge, configs, hidden))
            return fn
        return add

    def of(self, exercise: str) -> list[Check]:
        return [c for c in self if c.exercise == exercise]


@dataclass(frozen=True)
class Mistake:
    """A wrong answer students really write, kept beside the reference as runnable code.

    Either `edits`, exact edits of the solved notebook's cell that defines the exercise (`{old: new}`,
    each `old` occurring exactly once: the mistake is its one- to three-line change, and a rename in the
    solution flows through), or `impl`, a whole drop-in replacement, for mistakes that are different code."""

    exercise: str
    id: str
    message: str  # one sentence for the diagnosis: what the code does wrong and what to do instead
    impl: Callable | None = None  # a drop-in replacement for the exercise, with the mistake in it
    edits: tuple[tuple[str, str], ...] | dict = ()  # (old, new) pairs applied to the solved cell, in order

    def __post_init__(self):
        if isinstance(self.edits, dict):
            object.__setattr__(self, "edits", tuple(self.edits.items()))
        if (self.impl is None) == (not self.edits):
            raise ValueError(f"mistake {self.id}: give either impl or edits")


# ----------------------------------------------------------------------------------------------
# The child's side: probing a namespace


class ExerciseTimeout(BaseException):
    """Raised (by an alarm) inside student code that ran past the exercise's time limit."""


class WrongResult(Exception):
    """Raised by a probe when the student's code returns something of the wrong kind; its message
    is shown as the check's failure."""


class _ForbiddenRecorder(TorchFunctionMode):
    """Records which watched torch functions the student's code calls (torch function modes see
    calls through torch.*, torch.nn.functional.* and Tensor methods alike)."""

    def __init__(self, watched: dict[int, str], seen: set[str]):
        super().__init__()
        self.watched, self.seen = watched, seen

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = self.watched.get(id(func))
        if name is not None:
            self.seen.add(name)
        return func(*args, **(kwargs or {}))


def resolve(dotted: str) -> Any:
    """`torch.nn.functional.softmax` -> the object; None when this torch lacks it."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
            return obj
        except AttributeError:
            return None
    return None


class ProbeContext:
    """What a probe gets: the namespace, the target exercise, seeded inputs on the config's device."""

    def __init__(self, ns: dict, exercise: str, config: Config, seed: int,
                 watched: dict[int, str] | None = None):
        self.ns, self.exercise, self.config = ns, exercise, config
        self.device = torch.device(config.device)
        self.dtype = getattr(torch, config.dtype)
        self.seed = seed
        self.gen = torch.Generator().manual_seed(seed)
        self.watched = watched or {}
        self.forbidden_seen: set[str] = set()
        self.mutated: list[str] = []

    @property
    def target(self) -> Any:
        return self.ns[self.exercise]

    def get(self, name: str) -> Any:
        """Another name from the namespace (a helper or an earlier exercise)."""
        return self.ns[name]

    def manual_seed(self) -> None:
        """Seed torch's global generator (for modules that initialise their own parameters)."""
        torch.manual_seed(self.seed)

    # seeded inputs: drawn on the CPU in float32, so every device and dtype sees the same numbers
    def randn(self, *shape: int, scale: float = 1.0, dtype: torch.dtype | None = None,
              requires_grad: bool = False) -> torch.Tensor:
        t = torch.randn(*shape, generator=self.gen) * scale
        return self.put(t, dtype, requires_grad)

    def rand(self, *shape: int, dtype: torch.dtype | None = None) -> torch.Tensor:
        return self.put(torch.rand(*shape, generator=self.gen), dtype)

    def bernoulli(self, *shape: int, p: float = 0.5) -> torch.Tensor:
        return (torch.rand(*shape, generator=self.gen) < p).to(self.device)

    def put(self, t: torch.Tensor, dtype: torch.dtype | None = None, requires_grad: bool = False) -> torch.Tensor:
        if t.is_floating_point():
            t = t.to(dtype or self.dtype)
        t = t.to(self.device)
        return t.requires_grad_(True) if requires_grad else t

    def unpack(self, result: Any, n: int, what: str) -> tuple:
        """`result` as an n-tuple, or a clear failure saying what was expected."""
        if not isinstance(result, (tuple, list)) or len(result) != n:
            got = f"a {type(result).__name__}" + (f" of length {len(result)}" if isinstance(result, (tuple, list)) else "")
            raise WrongResult(f"`{self.exercise}` should return {what}, but it returned {got}")
        return tuple(result)

    def call(self, fn: Callable, *args, **kwargs) -> Any:
        """Call student code: record forbidden APIs, and notice inputs modified in place."""
        before = [(i, a, a.detach().clone()) for i, a in enumerate(list(args) + list(kwargs.values()))
                  if isinstance(a, torch.Tensor)]
        with _ForbiddenRecorder(self.watched, self.forbidden_seen):
            out = fn(*args, **kwargs)
        for i, a, copy in before:
            if a.shape != copy.shape or not torch.equal(torch.nan_to_num(a.detach()), torch.nan_to_num(copy)):
                self.mutated.append(f"argument {i + 1}")
        return out


def clean(obs: Any, depth: int = 0) -> Any:
    """Observations as plain data that `torch.load(weights_only=True)` reads back: tensors are
    detached, moved to the CPU and stripped of subclasses (without calling the subclass's own methods
    or its `__torch_function__`); numbers and strings lose subclasses; anything else becomes a type tag."""
    if depth > 6:
        return {"__type__": "deeply nested object"}
    if isinstance(obs, torch.Tensor):
        with torch._C.DisableTorchFunctionSubclass():
            t = torch.Tensor.detach(obs)
            if t.is_meta:
                raise WrongResult("it returned a tensor on the meta device, which holds no values; "
                                  "return a tensor on the input's device")
            if type(t) is not torch.Tensor:
                t = t.as_subclass(torch.Tensor)
            if t.layout != torch.strided:
                t = t.to_dense()
            return torch.Tensor.contiguous(torch.Tensor.clone(torch.Tensor.to(t, "cpu")))
    if obs is None or type(obs) in (bool, int, float, str):
        return obs
    if isinstance(obs, bool):
        return bool(obs)
    if isinstance(obs, int):
        return int.__index__(obs)
    if isinstance(obs, float):
        return float.__float__(obs)
    if isinstance(obs, str):
        return str.__str__(obs)
    if isinstance(obs, (list, tuple)):
        return [clean(o, depth + 1) for o in list.__iter__(obs)] if isinstance(obs, list) else \
            [clean(o, depth + 1) for o in tuple.__iter__(obs)]
    if isinstance(obs, dict):
        return {str(k): clean(v, depth + 1) for k, v in dict.items(obs)}
    return {"__type__": type(obs).__name__[:100]}


# Errors that mean a sandbox limit was hit, said in words (errno 27: EFBIG; 11: EAGAIN from fork)
_LIMIT_HINTS = {
    27: "output limit exceeded: a file (or printed output) grew past the grader's file size limit",
    11: "process limit exceeded: the notebook started too many processes or threads",
}


def _limit_message(exc: BaseException) -> str | None:
    if isinstance(exc, OSError) and exc.errno in _LIMIT_HINTS:
        return _LIMIT_HINTS[exc.errno]
    if isinstance(exc, RuntimeError) and "can't start new thread" in _safe_str(exc):
        return _LIMIT_HINTS[11]
    return None


def _safe_str(exc: BaseException) -> str:
    """str(exc), even when the student's exception class makes __str__ raise or return a non-string."""
    for show in (str, BaseException.__str__):
        try:
            text = show(exc)
            if type(text) is str:
                return text
        except BaseException:
            pass
    return "<an exception whose message cannot be shown>"


def student_traceback(exc: BaseException, limit_chars: int = 1500) -> str:
    """The exception with only the student's own frames (files named `<cell N>`)."""
    try:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith("<cell")]
    except BaseException:
        frames = []
    lines = [f"{f.filename.strip('<>')}, line {f.lineno}" + (f": {f.line.strip()}" if f.line else "")
             for f in frames[-4:]]
    name = type(exc).__name__ if isinstance(type(exc).__name__, str) else "Exception"
    head = f"{name}: {_safe_str(exc)}".strip()
    hint = _limit_message(exc)
    if hint:
        head = f"{hint} ({head})"
    text = head + ("".join(f"\n  at {l}" for l in lines) if lines else "")
    return text[:limit_chars]


def error_obs(exc: BaseException) -> dict:
    msg = _safe_str(exc)
    kind = "error"
    if isinstance(exc, WrongResult):
        return {"__error__": {"kind": "wrong", "type": "WrongResult", "message": msg[:1500]}}
    if isinstance(exc, NotImplementedError):
        kind = "not_implemented"
    elif isinstance(exc, ExerciseTimeout):
        kind = "timeout"
    elif isinstance(exc, MemoryError) or "can't allocate memory" in msg or "out of memory" in msg.lower():
        kind = "memory"
    return {"__error__": {"kind": kind, "type": type(exc).__name__[:100], "message": student_traceback(exc)}}


def seed_for(lesson: str, check: Check, config: Config) -> int:
    return zlib.crc32(f"{lesson}/{check.exercise}/{check.name}/{config.key}".encode())


def watched_functions(names: tuple[str, ...]) -> dict[int, str]:
    watched = {}
    for name in names:
        obj = resolve(name)
        if obj is not None:
            watched[id(obj)] = name
    return watched


def probe_exercise(module, ns: dict, exercise: str, configs: tuple[Config, ...],
                   only_public: bool = False) -> dict:
    """Run every check of one exercise on `ns` for the configs given; returns the observations."""
    checks = CHECKS_OF(module).of(exercise)
    if only_public:
        checks = [c for c in checks if not c.hidden]
    out: dict[str, Any] = {"checks": {}, "forbidden": [], "mutated": []}
    if exercise not in ns:
        out["missing"] = True
        return out
    watched = watched_functions(getattr(module, "FORBIDDEN", {}).get(exercise, ()))
    forbidden, mutated = set(), []
    for check in checks:
        for config in check.configs:
            if config not in configs:
                continue
            ctx = ProbeContext(ns, exercise, config, seed_for(CHECKS_OF(module).lesson, check, config), watched)
            try:
                obs = clean(check.probe(ctx))
            except BaseException as exc:  # student code may raise anything, SystemExit included
                obs = error_obs(exc)
                if obs["__error__"]["kind"] == "timeout":
                    out["checks"][check.key(config)] = obs
                    out["timeout"] = True
                    return out
            out["checks"][check.key(config)] = obs
            forbidden |= ctx.forbidden_seen
            mutated += [f"{check.name}: {m}" for m in ctx.mutated]
    out["forbidden"] = sorted(forbidden)
    out["mutated"] = mutated[:5]
    return out


def CHECKS_OF(module) -> Checks:
    return module.CHECKS


def register_source(filename: str, source: str) -> None:
    """Let tracebacks show the student's lines for code compiled under `filename`."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)


# ----------------------------------------------------------------------------------------------
# The parent's side: judging observations


def same(*keys: str, scale: float = 1.0, check_dtype: bool = True) -> Judge:
    """A judge: the student's observations under `keys` (default: every tensor the reference
    observed) match the reference's within the config's tolerance times `scale`."""
    def judge(s: dict, r: dict, ctx: "JudgeContext") -> str | None:
        for k in keys or [k for k, v in r.items() if isinstance(v, torch.Tensor)]:
            msg = compare.close(s.get(k), r[k], what=k, tol=ctx.tol.scaled(scale), check_dtype=check_dtype)
            if msg:
                return msg
        return None
    return judge


@dataclass
class JudgeContext:
    config: Config
    tol: compare.Tolerance = field(init=False)

    def __post_init__(self):
        self.tol = compare.tolerance(self.config.dtype, self.config.device)


def _verdict(check: Check, config: Config, s_obs: dict | None, r_obs: dict | None) -> CheckResult:
    res = CheckResult(check.name, "passed", config.device, config.dtype)
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
            res.status, res.message = "not_implemented", (f"not implemented yet: it raises NotImplementedError"
                                                          + (f" ({where})" if where else ""))
        elif kind == "timeout":
            res.status, res.message = "timeout", err["message"]
        elif kind == "wrong":
            res.status, res.message = "failed", err["message"]
        elif kind == "memory":
            res.status, res.message = "error", f"ran out of memory: {err['message']}"
        else:
            res.status, res.message = "error", err["message"]
        return res
    try:
        msg = check.judge(s_obs, r_obs, JudgeContext(config))
    except Exception as exc:  # a judge must not crash on odd observations: say what was odd
        msg = f"could not judge the observations ({type(exc).__name__}: {exc})"
    if msg:
        res.status, res.message = "failed", msg
    return res


def _matches(check: Check, config: Config, s_obs: dict | None, m_obs: dict | None, r_obs: dict) -> bool:
    """Does the student's observation look like the mistake's (and is the mistake visible here)?"""
    if s_obs is None or m_obs is None:
        return False
    s_err, m_err = s_obs.get("__error__"), m_obs.get("__error__")
    if s_err or m_err:
        return bool(s_err and m_err and s_err["type"] == m_err["type"] and s_err["kind"] == "error")
    try:
        if check.judge(m_obs, r_obs, JudgeContext(config)) is None:
            return False  # the mistake does not show on this check
    except Exception:
        return False
    return same_observations(s_obs, m_obs, JudgeContext(config).tol)


def same_observations(a: dict, b: dict, tol: compare.Tolerance) -> bool:
    """Every observation in `b` is in `a` and equal within `tol` (NaN equal to NaN, inf to inf)."""
    for key, vb in b.items():
        va = a.get(key)
        if isinstance(vb, torch.Tensor):
            if not isinstance(va, torch.Tensor) or va.shape != vb.shape:
                return False
            if vb.dtype == torch.bool or va.dtype == torch.bool:
                if not torch.equal(va, vb):
                    return False
            elif not torch.allclose(va.double(), vb.double(), atol=tol.atol, rtol=tol.rtol, equal_nan=True):
                return False
        elif isinstance(vb, dict) and isinstance(va, dict):
            if not same_observations(va, vb, tol):
                return False
        elif va != vb:
            return False
    return True


def judge_exercise(module, exercise, student: dict | None, reference: dict,
                   mistakes: dict[str, dict], gpu: bool, missing_reason: str | None = None,
                   only_public: bool = False) -> ExerciseResult:
    """Turn one exercise's observations into its result, checks in order, with a diagnosis."""
    name, points = exercise.name, float(exercise.points)
    checks = [c for c in CHECKS_OF(module).of(name) if not (only_public and c.hidden)]
    results: list[CheckResult] = []
    if student is None or student.get("missing"):
        status = "not_implemented"
        msg = missing_reason or f"no cell defines `{name}` (deleted or renamed?)"
        if missing_reason and missing_reason.startswith("!"):
            status, msg = "error", missing_reason[1:]
        if student is None and not missing_reason:
            status, msg = "timeout", "the notebook's code did not reach this exercise before the time limit"
        return ExerciseResult(name, status, 0.0, points, [CheckResult("defined", status, message=msg)])
    s_checks, r_checks = student["checks"], reference["checks"]
    for check in checks:
        for config in check.configs:
            if config.device == "cuda" and not gpu:
                results.append(CheckResult(check.name, "skipped", config.device, config.dtype,
                                           "no CUDA device here: GPU check skipped (not passed)"))
                continue
            results.append(_verdict(check, config, s_checks.get(check.key(config)),
                                    r_checks.get(check.key(config))))
    forbidden = getattr(module, "FORBIDDEN", {}).get(name)
    if forbidden:
        used = student.get("forbidden", [])
        results.append(CheckResult(
            "uses no forbidden API", "failed" if used else "passed",
            message=(f"calls {', '.join(used)}, which this exercise asks you to write yourself" if used else "")))
    mutated = student.get("mutated", [])
    results.append(CheckResult("leaves its inputs unchanged", "failed" if mutated else "passed",
                               message=("modifies its input in place (" + "; ".join(mutated) + "): work on a copy "
                                        "or use out-of-place operations" if mutated else "")))
    status = exercise_status(results)
    diagnosis = diagnose(module, name, checks, s_checks, r_checks, mistakes, results) if status in ("failed", "error") else None
    return ExerciseResult(name, status, points if status == "passed" else 0.0, points, results, diagnosis)


def diagnose(module, name, checks, s_checks, r_checks, mistakes, results) -> str | None:
    failed = {(r.name, r.device, r.dtype) for r in results if r.status in ("failed", "error")}
    best, best_count = None, 0
    for mistake in getattr(module, "MISTAKES", ()):
        if mistake.exercise != name or mistake.id not in mistakes:
            continue
        m_checks = mistakes[mistake.id]["checks"]
        count = 0
        for check in checks:
            for config in check.configs:
                if (check.name, config.device, config.dtype) not in failed:
                    continue
                k = check.key(config)
                if _matches(check, config, s_checks.get(k), m_checks.get(k), r_checks.get(k, {})):
                    count += 1
        if count > best_count:
            best, best_count = mistake, count
    from .diagnosis import settle  # a catalogued mistake that really matches, else a structural diagnosis
    return settle(best, module, name, checks, s_checks, r_checks, mistakes, results)


# ----------------------------------------------------------------------------------------------
# Mistakes as code: the same source drives the diagnosis and the test fixtures


def mistake_source(mistake: Mistake, lesson: str | None = None) -> str:
    """The mistake's code as a student would write it: the exercise's own name, no prefix. For a mistake
    given as edits, the solved notebook's defining cell with the edits applied (each must match once)."""
    import inspect
    import re
    import textwrap

    if mistake.edits:
        src = solved_cell(lesson or _lesson_of(mistake), mistake.exercise)
        for old, new in mistake.edits:
            n = src.count(old)
            if n != 1:
                raise ValueError(f"mistake {mistake.id}: the edit {old!r} matches {n} times in the solved cell "
                                 f"of `{mistake.exercise}` (it must match exactly once)")
            src = src.replace(old, new)
        return src
    src = textwrap.dedent(inspect.getsource(mistake.impl))
    return re.sub(rf"\b(def|class)\s+{re.escape(mistake.impl.__name__)}\b", rf"\1 {mistake.exercise}", src, count=1)


def solved_cell(lesson: str, name: str) -> str:
    """The source of the solved notebook's code cell that defines `name` (the last one, as when run)."""
    import json
    import re

    from .registry import find_lesson

    nb = json.loads(find_lesson(lesson).solution_path.read_text(encoding="utf-8"))
    pattern = re.compile(rf"^\s*(def|class)\s+{re.escape(name)}\b", re.M)
    found = None
    for cell in nb.get("cells", []):
        src = cell.get("source", "")
        src = "".join(src) if isinstance(src, list) else src
        if cell.get("cell_type") == "code" and pattern.search(src):
            found = src
    if found is None:
        raise LookupError(f"{lesson}: no solved cell defines `{name}`")
    return found


def _lesson_of(mistake: Mistake) -> str:
    from .registry import LESSONS

    for lesson in LESSONS:
        module = importlib.import_module(lesson.module)
        if any(m is mistake for m in getattr(module, "MISTAKES", ())):
            return lesson.id
    raise LookupError(f"mistake {mistake.id} is in no lesson's MISTAKES")
