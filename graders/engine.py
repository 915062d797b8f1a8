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
from .results import Absent, CheckResult, ExerciseResult, exercise_status

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
    variant: "Variant | None" = None  # an entry of the standard input battery (the probe's inputs, changed)

    def key(self, config: Config) -> str:
        return f"{self.name} @ {config.key}"


class Checks(list):
    """The ordered checks of one lesson; `@CHECKS.probe(...)` adds one."""

    def __init__(self, lesson: str):
        super().__init__()
        self.lesson = lesson
        self.battery_skipped: dict[tuple[str, str], str] = {}  # (exercise, entry) -> why add_battery left it out

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

    def add_battery(self, skip: dict[str, str | dict[str, str]] | None = None,
                    base: dict[str, str] | None = None) -> None:
        """Add the standard input battery (BATTERY) to every exercise: each entry re-runs the exercise's
        first check (or `base[exercise]`, a check name) on changed inputs, judged by that check's judge
        against the reference run on the same inputs. `skip` opts out with a reason: {exercise: reason}
        for the whole battery, or {exercise: {entry name: reason}} for some entries; the reasons are kept in
        `self.battery_skipped`. An entry whose probe draws no input it would change is dropped by the engine
        at probe time (the exercise takes none: tests/test_battery.py holds the reference to that)."""
        skip, base = skip or {}, base or {}
        exercises = list(dict.fromkeys(c.exercise for c in list(self)))
        for name in set(skip) | set(base):
            if name not in exercises:
                raise ValueError(f"{self.lesson}: the battery's skip/base names {name!r}, which has no checks")
        for exercise in exercises:
            why = skip.get(exercise)
            if isinstance(why, dict):
                unknown = set(why) - set(ENTRIES)
                if unknown:
                    raise ValueError(f"{self.lesson}: no battery entry {sorted(unknown)} (skip of {exercise})")
            checks = self.of(exercise)
            b = next((c for c in checks if c.name == base[exercise]), None) if exercise in base else checks[0]
            if b is None:
                raise ValueError(f"{self.lesson}: no check {base[exercise]!r} of {exercise} for the battery")
            for v in BATTERY:
                reason = why if isinstance(why, str) else (why or {}).get(v.name)
                if reason:
                    self.battery_skipped[exercise, v.name] = reason
                    continue
                self.append(Check(exercise, v.name, b.probe, _battery_judge(b.judge, v),
                                  (Config("cpu", v.dtype or "float32"),), hidden=True, variant=v))


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
    observed: bool = False  # known only by its shipped observations (the student distribution has no code)

    def __post_init__(self):
        if isinstance(self.edits, dict):
            object.__setattr__(self, "edits", tuple(self.edits.items()))
        if not self.observed and (self.impl is None) == (not self.edits):
            raise ValueError(f"mistake {self.id}: give either impl or edits")


# ----------------------------------------------------------------------------------------------
# The child's side: probing a namespace


class ExerciseTimeout(BaseException):
    """Raised (by an alarm) inside student code that ran past the exercise's time limit."""


class WrongResult(Exception):
    """Raised by a probe when the student's code returns something of the wrong kind; its message
    is shown as the check's failure."""


class CallRecorder(TorchFunctionMode):
    """Records which of the watched torch functions the code it wraps calls (torch function modes see
    calls through torch.*, torch.nn.functional.* and Tensor methods alike). One recorder serves both
    rules: FORBIDDEN ("must not call", through `ctx.call`) and `ctx.recording(...)` ("must call").

        with ctx.recording(F.scaled_dot_product_attention) as rec:
            out = ctx.call(module, x)
        {"calls SDPA": rec.called(F.scaled_dot_product_attention)}
    """

    def __init__(self, watched: dict[int, str], seen: set[str] | None = None):
        super().__init__()
        self.watched, self.seen = watched, (set() if seen is None else seen)

    def called(self, fn: Any) -> bool:
        return self.watched.get(id(fn)) in self.seen

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
    """What a probe gets: the namespace, the target exercise, seeded inputs on the config's device.

    Under an entry of the input battery (`variant`) the inputs it hands out are changed: their dtype, memory
    layout, shape (a batch of 1, sequences of length 1) or values (offset or scaled): see `Variant`."""

    def __init__(self, ns: dict, exercise: str, config: Config, seed: int,
                 watched: dict[int, str] | None = None, variant: "Variant | None" = None):
        self.ns, self.exercise, self.config = ns, exercise, config
        self.device = torch.device(config.device)
        self.dtype = getattr(torch, config.dtype)
        self.seed = seed
        self.gen = torch.Generator().manual_seed(seed)
        self.watched = watched or {}
        self.forbidden_seen: set[str] = set()
        self.mutated: list[str] = []
        self.not_implemented: BaseException | None = None  # a NotImplementedError raised by student code
        self.variant = variant
        self.layout = variant.layout if variant else None  # None, "transposed" or "strided" (floating inputs)
        self.drawn = 0  # floating-point inputs handed out
        self.changed = 0  # inputs the variant changed: none, and the battery entry is inapplicable
        self.took_floating = False  # did student code (through call) get a floating-point tensor argument?

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
    # `data`: is this input data the stress entries offset and scale (default: floating, 3 or more dims)?
    # data=True for rows of 1 or 2 dims that are the exercise's data, data=False for a 3-D parameter.
    def randn(self, *shape: int, scale: float = 1.0, dtype: torch.dtype | None = None,
              requires_grad: bool = False, data: bool | None = None) -> torch.Tensor:
        t = torch.randn(*self._shape(shape), generator=self.gen) * scale
        return self._place(t, dtype, requires_grad, data)

    def rand(self, *shape: int, dtype: torch.dtype | None = None, data: bool | None = None) -> torch.Tensor:
        return self._place(torch.rand(*self._shape(shape), generator=self.gen), dtype, data=data)

    def bernoulli(self, *shape: int, p: float = 0.5) -> torch.Tensor:
        return self._place(torch.rand(*self._shape(shape, mask=True), generator=self.gen) < p)

    def put(self, t: torch.Tensor, dtype: torch.dtype | None = None, requires_grad: bool = False,
            data: bool | None = None) -> torch.Tensor:
        """A tensor the probe made, as an input (changed by a battery entry as drawn ones are; a floating or
        boolean one of 3 or more dims is cut to a batch of 1 or a length of 1 under those entries)."""
        v = self.variant
        if v and v.shape and t.dim() >= 3 and (t.is_floating_point() or t.dtype == torch.bool):
            keep = [slice(None)] * t.dim()
            for axis in _shape_axes(t.dim(), v.shape, mask=t.dtype == torch.bool):
                keep[axis] = slice(0, 1)
            cut = t[tuple(keep)].contiguous()
            self.changed += cut.shape != t.shape
            t = cut
        return self._place(t, dtype, requires_grad, data)

    def _shape(self, shape: tuple[int, ...], mask: bool = False) -> tuple[int, ...]:
        """The shape to draw: under the "batch of 1" and "length 1" entries, a shape of 3 or more dims gets its
        batch axis (the first) or its sequence axis (-2; a mask's last two, queries and keys) set to 1."""
        v = self.variant
        if not (v and v.shape) or len(shape) < 3:
            return shape
        out = list(shape)
        for axis in _shape_axes(len(shape), v.shape, mask):
            out[axis] = 1
        self.changed += tuple(out) != tuple(shape)  # a size already 1 is no change
        return tuple(out)

    def _place(self, t: torch.Tensor, dtype: torch.dtype | None = None, requires_grad: bool = False,
               data: bool | None = None) -> torch.Tensor:
        v = self.variant
        if t.is_floating_point():
            self.drawn += 1
            if v and (v.dtype or v.layout):
                self.changed += 1
            if v and (v.scale != 1.0 or v.offset) and (t.dim() >= 3 if data is None else data):
                t = t * v.scale + v.offset
                self.changed += 1
            t = t.to(dtype or self.dtype)
        t = t.to(self.device)
        if t.is_floating_point() and t.dim() >= 2 and self.layout:
            t = _relaid(t, self.layout)
        return t.requires_grad_(True) if requires_grad else t

    def unpack(self, result: Any, n: int, what: str) -> tuple:
        """`result` as an n-tuple, or a clear failure saying what was expected."""
        if not isinstance(result, (tuple, list)) or len(result) != n:
            got = f"a {type(result).__name__}" + (f" of length {len(result)}" if isinstance(result, (tuple, list)) else "")
            raise WrongResult(f"`{self.exercise}` should return {what}, but it returned {got}")
        return tuple(result)

    def call(self, fn: Callable, *args, **kwargs) -> Any:
        """Call student code: record forbidden APIs, and notice inputs modified in place. A
        NotImplementedError is remembered even when the probe catches it: the check is then
        not_implemented, whatever the probe made of it (an untouched stub is never "failed")."""
        before = [(i, a, a.detach().clone()) for i, a in enumerate(list(args) + list(kwargs.values()))
                  if isinstance(a, torch.Tensor) and not a.is_meta]  # a meta tensor holds no values to compare
        self.took_floating = self.took_floating or any(a.is_floating_point() for _, a, _ in before)
        try:
            with CallRecorder(self.watched, self.forbidden_seen):
                out = fn(*args, **kwargs)
        except NotImplementedError as exc:
            self.not_implemented = self.not_implemented or exc
            raise
        for i, a, copy in before:
            if a.shape != copy.shape or not torch.equal(torch.nan_to_num(a.detach()), torch.nan_to_num(copy)):
                self.mutated.append(f"argument {i + 1}")
        return out

    def recording(self, *fns: Any) -> CallRecorder:
        """A context in which calls of `fns` are recorded ("must call" checks); see CallRecorder."""
        return CallRecorder({id(f): getattr(f, "__qualname__", repr(f)) for f in fns})

    def raised(self, fn: Callable, *args, **kwargs) -> dict:
        """Call student code that should raise, and observe what it raised:
        {"raised": "ValueError" | ... | "nothing", "message": ...}. NotImplementedError propagates
        (the stub is not_implemented); judge with `raises_value_error`."""
        try:
            self.call(fn, *args, **kwargs)
        except NotImplementedError:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever the student raised is the observation
            return {"raised": type(exc).__name__[:100], "message": _safe_str(exc)[:300]}
        return {"raised": "nothing", "message": ""}


def _shape_axes(ndim: int, kind: str, mask: bool = False) -> tuple[int, ...]:
    """The axes a "batch" or "length" battery entry sets to 1 in a tensor of `ndim` (≥ 3) dims."""
    if kind == "batch":
        return (0,)
    return (ndim - 2, ndim - 1) if mask else (ndim - 2,)


def _relaid(t: torch.Tensor, layout: str) -> torch.Tensor:
    """The same values in another memory layout: "transposed" (the last two axes' strides swapped) or
    "strided" (each row a view into a wider row, so the row stride is larger than the row)."""
    if layout == "transposed":
        return t.mT.contiguous().mT
    wide = torch.zeros(*t.shape[:-1], t.shape[-1] + 3, dtype=t.dtype, device=t.device)
    wide[..., : t.shape[-1]] = t
    return wide[..., : t.shape[-1]]


# ----------------------------------------------------------------------------------------------
# The standard input battery: inputs a careful grader tries, each a check of its own


@dataclass(frozen=True)
class Variant:
    """One entry of the battery: what the ProbeContext changes in the inputs it hands out.

    dtype and layout change every floating-point input; `shape` every drawn input of 3 or more dims (floating,
    or a boolean mask); `scale`/`offset` the data: floating inputs of 3 or more dims (activations, queries,
    logits), not weight matrices and vectors, which probes draw with 1 or 2 dims."""
    name: str  # the check's name, as the student reads it
    message: str  # said before the judge's message when the check fails: what changed, and what to do
    dtype: str | None = None  # inputs in this dtype, on the CPU
    layout: str | None = None  # inputs in this memory layout
    judged_as: str | None = None  # judge as if at this dtype (its tolerance), when not the inputs'
    shape: str | None = None  # "batch": the leading axis is 1; "length": the sequence axis (-2; a mask's last two) is 1
    scale: float = 1.0  # data inputs become data * scale + offset
    offset: float = 0.0
    tol_factor: float = 1.0  # the judge's tolerance times this (the inputs themselves cost precision)


BATTERY = (
    # float64 is judged with float32's tolerance: a reference may compute in float32 inside (RMSNorm, RoPE),
    # and a student computing in float64 is not wrong. It catches a float32 result and float32 constants.
    Variant("float64 inputs", "with float64 inputs the result must be float64 (values within float32's "
            "tolerance)", dtype="float64", judged_as="float32"),
    Variant("bfloat16 inputs on the CPU", "with bfloat16 inputs (on the CPU) the result must be bfloat16 and close "
            "to the reference's", dtype="bfloat16"),
    Variant("float16 inputs on the CPU", "with float16 inputs (on the CPU) the result must be float16 and close "
            "to the reference's", dtype="float16"),
    Variant("transposed (non-contiguous) inputs", "with inputs laid out transposed in memory (same values, "
            "not contiguous: .view() fails on them, .reshape() does not)", layout="transposed"),
    Variant("row-strided inputs (views of wider rows)", "with inputs that are views of wider rows (same "
            "values, the row stride larger than the row)", layout="strided"),
    Variant("a batch of 1", "with a batch of one (the inputs' leading axis has size 1) the result must keep that "
            "axis: squeeze only the axis you mean (.squeeze(-1), never a bare .squeeze()) and take every size "
            "from the input's own shape", shape="batch"),
    Variant("sequences of length 1", "with sequences of length 1 (the inputs' time axis has size 1, as in one "
            "decoding step) the result must keep that axis: squeeze only the axis you mean and take T from the "
            "input's own shape", shape="length"),
    # The three stress entries are float32. Offsets of 1e3 cost the inputs' own precision (float32 keeps ~7
    # digits, 1e3 + x keeps x to ~6e-5), so they are judged with 10x the tolerance: a lost max subtraction or
    # an E[x²] - E[x]² variance is off by far more (inf, NaN, or percents).
    Variant("inputs offset by +1000", "with 1000 added to the inputs (same spread, large values) the result "
            "must stay finite and close to the reference's: subtract the max before exp (exp(1000) overflows), "
            "and take a variance as the mean of (x - mean)², not E[x²] - E[x]² (which cancels catastrophically)",
            offset=1e3, tol_factor=50.0),
    Variant("very negative inputs (about -400)", "with 400 subtracted from the inputs (scores near -400: exp "
            "underflows to 0 in float32, so an unshifted softmax divides 0 by 0) the result must stay finite and "
            "close to the reference's: subtract the max before exponentiating", offset=-400.0, tol_factor=50.0),
    Variant("tiny inputs (scaled by 1e-4)", "with the inputs scaled by 1e-4 (their variance, ~1e-8, is smaller "
            "than eps, so where eps goes decides the result) the result must be close to the reference's: add "
            "eps to the variance (or mean square) inside the square root, sqrt(var + eps), not sqrt(var) + eps",
            scale=1e-4, tol_factor=50.0),
)
ENTRIES = {v.name: v for v in BATTERY}

# Offsets on the inputs of attention (q, k or the x they are projected from) make scores of 1e5-1e6: the softmax is
# one-hot and which key wins is decided by rounding, so honest implementations disagree (scaling q before the
# product or after: 5-12% of seeds for lesson 01). Attention exercises skip the two offset entries with this reason
# (`skip={name: OFFSET_SCORES}`); overflow in the softmax is the softmax exercises' entry.
_SCORES_WHY = ("offset q and k give scores of 1e5-1e6, whose one-hot softmax is decided by rounding: honest "
               "implementations disagree (the softmax exercises take these entries)")
OFFSET_SCORES = {"inputs offset by +1000": _SCORES_WHY, "very negative inputs (about -400)": _SCORES_WHY}


def _battery_judge(judge: Judge, v: Variant) -> Judge:
    def battery(s: dict, r: dict, ctx: "JudgeContext") -> str | None:
        if v.judged_as or v.tol_factor != 1.0:
            ctx = JudgeContext(Config(ctx.config.device, v.judged_as or ctx.config.dtype))
        if v.tol_factor != 1.0:
            t = ctx.tol
            ctx.tol = compare.Tolerance(t.atol * v.tol_factor, t.rtol * v.tol_factor,
                                        f"{t.why}; x{v.tol_factor:g} for {v.name}")
        msg = judge(s, r, ctx)
        return f"{v.message}: {msg}" if msg else None
    return battery


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


# Class grading draws the hidden checks' inputs from a seed chosen per run (kept in the results, so a run can be
# repeated): a notebook that memorised the answers to the fixed inputs fails them. Public checks keep fixed
# seeds, so their reference observations can ship to students as data. Set by the child from its job.
HIDDEN_SEED: int | None = None


def seed_for(lesson: str, check: Check, config: Config) -> int:
    salt = f"/run {HIDDEN_SEED}" if check.hidden and HIDDEN_SEED is not None else ""
    return zlib.crc32(f"{lesson}/{check.exercise}/{check.name}/{config.key}{salt}".encode())


def watched_functions(names: tuple[str, ...]) -> dict[int, str]:
    """{id(function): dotted name} for the names this torch has (FORBIDDEN's form)."""
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
            ctx = ProbeContext(ns, exercise, config, seed_for(CHECKS_OF(module).lesson, check, config), watched,
                               check.variant)
            try:
                raw = check.probe(ctx)
                obs = clean(raw)
                moved = _off_device(raw, ctx.device)
                if moved and isinstance(obs, dict):  # clean() brings every tensor to the CPU: say where it was
                    obs["__devices__"] = moved
                if ctx.not_implemented is not None:  # raised by student code, caught by the probe
                    obs = error_obs(ctx.not_implemented)
                elif check.variant and not ctx.changed:
                    obs = {"__inapplicable__": "the exercise takes no input this entry changes"}
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


def _off_device(raw, device: torch.device) -> dict:
    """The observed tensors (top-level) that are not on the probe's device, with where they are."""
    if not isinstance(raw, dict):
        return {}
    out = {}
    for k, v in dict.items(raw):
        if isinstance(v, torch.Tensor):
            with torch._C.DisableTorchFunctionSubclass():
                where = torch.Tensor.detach(v).device.type
            if where != device.type and where != "meta":  # a meta tensor is refused by clean() already
                out[str(k)[:100]] = where
    return out


def wrong_devices(s_obs: dict, r_obs: dict, device: str) -> dict:
    """The student's observations that came back on another device than the reference's did."""
    s_moved, r_moved = s_obs.get("__devices__"), r_obs.get("__devices__")
    s_moved = s_moved if isinstance(s_moved, dict) else {}
    r_moved = r_moved if isinstance(r_moved, dict) else {}
    return {k: d for k, d in s_moved.items() if r_moved.get(k, device) != d}


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


def agrees_with(*keys: str | tuple[str, str], scale: float = 1.0, half_scale: float = 1.0, label: str = "",
                prefix: str = "torch ", note: str = "") -> Judge:
    """A judge: the student's observation `key` agrees with torch's answer, which the probe records as
    `prefix + key` (only the reference child's copy is ever read). A key may be a pair (mine, theirs) to
    compare with another reference observation. Without keys: every key whose `prefix + key` the
    reference observed. `half_scale` widens the tolerance for float16/bfloat16 further (torch
    accumulates in float32); `label` names torch's function in the message; `note` is appended to it."""
    def judge(s: dict, r: dict, ctx: "JudgeContext") -> str | None:
        pairs = [k if isinstance(k, tuple) else (k, prefix + k) for k in keys] or \
            [(k, prefix + k) for k in r if not k.startswith(prefix) and prefix + k in r]
        half = ctx.config.dtype in ("float16", "bfloat16")
        tol = ctx.tol.scaled(scale * (half_scale if half else 1.0))
        for mine, theirs in pairs:
            msg = compare.close(s.get(mine), r[theirs], f"{mine} (against {label or theirs})", tol=tol)
            if msg:
                return msg + note
        return None
    return judge


def expect_value_error(obs: dict, what: str, name: str | None = None, why: str = "") -> str | None:
    """None when the observation (from `ctx.raised`) is a ValueError whose message names `name`."""
    if obs.get("raised") != "ValueError":
        got = "it raised nothing" if obs.get("raised") in ("nothing", None) else \
            f"it raised {obs.get('raised')}: {obs.get('message')}"
        return f"{what} should raise ValueError{f' ({why})' if why else ''}, but {got}"
    if name and name not in obs.get("message", ""):
        return f"{what} raised ValueError, but its message does not name `{name}`: {obs.get('message')!r}"
    return None


def raises_value_error(*cases: tuple, why: str = "") -> Judge:
    """A judge of `ctx.raised` observations: each case (key, what[, name]) raised a ValueError, whose
    message names `name` when given."""
    def judge(s: dict, r: dict, ctx: "JudgeContext") -> str | None:
        for key, what, *name in cases:
            msg = expect_value_error(s.get(key, {}), what, name[0] if name else None, why)
            if msg:
                return msg
        return None
    return judge


def on_meta(result: Any) -> dict:
    """An observation of a result made with device="meta" (a meta tensor holds no values): its device,
    shape and dtype. Judge with `made_on_meta`."""
    if not isinstance(result, torch.Tensor):
        return {"device": None, "got": type(result).__name__[:100]}
    return {"device": result.device.type, "shape": list(result.shape), "dtype": str(result.dtype).removeprefix("torch.")}


def made_on_meta(what: str) -> Judge:
    """A judge of `on_meta` observations: the result is on the meta device, with the reference's shape
    and dtype (code that builds on the CPU and moves, or computes values, would not be)."""
    def judge(s: dict, r: dict, ctx: "JudgeContext") -> str | None:
        if s.get("device") != "meta":
            got = f"a tensor on {s['device']!r}" if s.get("device") else f"a {s.get('got')}"
            return (f"{what} with device=\"meta\" gave {got}, not a tensor on the meta device: make every "
                    f"tensor on `device` (torch.ones(..., device=device), torch.arange(..., device=device))")
        for k in ("shape", "dtype"):
            if s.get(k) != r.get(k):
                return f"{what} with device=\"meta\" gave {k} {s.get(k)}, expected {r.get(k)}"
        return None
    return judge


def median_ms(fn: Callable, *args, min_run_time: float = 0.2) -> float:
    """The median time of fn(*args) in milliseconds, by torch.utils.benchmark.Timer (which warms up,
    synchronises CUDA and picks the number of runs): the one timer of every `course bench`."""
    from torch.utils.benchmark import Timer

    timer = Timer(stmt="fn(*args)", globals={"fn": fn, "args": args})
    return timer.blocked_autorange(min_run_time=min_run_time).median * 1e3


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
        elif check.variant:  # code that runs on the usual inputs but raises on these: a wrong answer
            res.status, res.message = "failed", f"{check.variant.message}: it raised {err['message']}"
        else:
            res.status, res.message = "error", err["message"]
        return res
    moved = wrong_devices(s_obs, r_obs, config.device)
    if moved:
        key, dev = next(iter(moved.items()))
        res.status, res.message = "failed", (
            f"`{key}` is on {dev}, but the inputs were on {config.device}: make new tensors on the input's device "
            f"(device=x.device, or torch.zeros_like(x)), and never move results with .cpu() or .cuda()")
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
    if s_err or m_err:  # the same error, said the same way: an exception type alone is not an observation
        return bool(s_err and m_err and s_err["kind"] == m_err["kind"] == "error" and s_err["type"] == m_err["type"]
                    and _error_head(s_err) == _error_head(m_err))
    try:
        if check.judge(m_obs, r_obs, JudgeContext(config)) is None:
            return False  # the mistake does not show on this check
    except Exception:
        return False
    return same_observations(s_obs, m_obs, JudgeContext(config).tol)


def _error_head(err: dict) -> str:
    """An error observation's first line, "Type: message", without where it was raised (the student's
    cell numbers and the mistake's differ)."""
    import re

    text = err.get("message", "").split("\n  at ")[0].strip()
    text = re.sub(r"0x[0-9a-fA-F]+", "0x…", text)  # object addresses
    return re.sub(r"(/[\w.+-]+)+/|<cell \d+>", "…/", text)  # where the code happened to live


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
                   mistakes: dict[str, dict], gpu: bool, absent: Absent | None = None,
                   only_public: bool = False) -> ExerciseResult:
    """Turn one exercise's observations into its result, checks in order, with a diagnosis. Without
    observations the result is `absent`'s (graders/verdict.py says why), else: never reached ->
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
                              [CheckResult(absent.check, absent.status, message=absent.message)])
    s_checks, r_checks = student["checks"], reference["checks"]
    for check in checks:
        for config in check.configs:
            if config.device == "cuda" and not gpu:
                results.append(CheckResult(check.name, "skipped", config.device, config.dtype,
                                           "no CUDA device here: GPU check skipped (not passed)"))
                continue
            r_obs = r_checks.get(check.key(config))
            if check.variant and isinstance(r_obs, dict) and "__inapplicable__" in r_obs:
                continue  # a battery entry for an exercise that takes no tensor input
            results.append(_verdict(check, config, s_checks.get(check.key(config)), r_obs))
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

    from .notebook import defining_cell, graded_cells
    from .registry import find_lesson

    nb = json.loads(find_lesson(lesson).solution_path.read_text(encoding="utf-8"))
    found = defining_cell(graded_cells(nb.get("cells", [])), name)
    if found is None:
        raise LookupError(f"{lesson}: no solved cell defines `{name}`")
    return found["source"]


def _lesson_of(mistake: Mistake) -> str:
    from .registry import LESSONS

    for lesson in LESSONS:
        module = importlib.import_module(lesson.module)
        if any(m is mistake for m in getattr(module, "MISTAKES", ())):
            return lesson.id
    raise LookupError(f"mistake {mistake.id} is in no lesson's MISTAKES")
