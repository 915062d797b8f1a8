"""What a lesson module declares: the device/dtype matrix, checks (probe + judge), known mistakes as
edits of the solved cell, and the standard input battery. Nothing here runs a probe or judges one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from . import compare
from .draws import domain_probe



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

@dataclass
class JudgeContext:
    """What a judge gets besides the observations: the config, and its dtype-aware tolerance."""
    config: Config
    tol: compare.Tolerance = field(init=False)

    def __post_init__(self):
        self.tol = compare.tolerance(self.config.dtype, self.config.device)


Probe = Callable[..., dict]  # (ProbeContext) -> observations; ProbeContext lives in probe.py, the child's side
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
    # The property the check tests, by name: a check's own name unless it is a hidden twin (the same probe and
    # judge on fresh draws from the run's seed) or a battery entry (the base check's property on other inputs),
    # which carry their public check's name. Every hidden property is also a public one (`hidden_only`).
    property: str = ""
    # The rule the check enforces, quoted from its exercise's text (the markdown of its section or the
    # docstring the student sees): `tests/lessons/test_rules.py` finds it there. A check tests only what the
    # student was told. Empty for a domain check: its rule is the exercise's signature and docstring.
    rule: str = ""

    def __post_init__(self):
        if not self.property:
            self.property = self.name

    def key(self, config: Config) -> str:
        return f"{self.name} @ {config.key}"


# What a probe says of a result on the meta device (probe.clean refuses it: it holds no values); a mix of meta
# and CPU tensors can also hand back a CPU tensor never written, so diagnosis.py reads this first.
ON_META = "it returned a tensor on the meta device, which holds no values; return a tensor on the input's device"
HIDDEN_TWIN = " (fresh inputs)"  # the name of a hidden twin: its public check's name, then this


def hidden_only(checks: list[Check]) -> list[Check]:
    """The hidden checks whose property no public check of the same exercise tests (should be none: a hidden
    check is a public property on other inputs). A battery entry counts as its base check's property."""
    public = {(c.exercise, c.property) for c in checks if not c.hidden}
    return [c for c in checks if c.hidden and (c.exercise, c.property) not in public]


def hidden_properties(checks: list[Check]) -> dict[tuple[str, str], str]:
    """{(exercise, hidden check's name): its property, the name of the public check it shares}
    (for `results.for_students`)."""
    return {(c.exercise, c.name): c.property for c in checks if c.hidden}


class Checks(list):
    """The ordered checks of one lesson; `@CHECKS.probe(...)` adds one."""

    def __init__(self, lesson: str):
        super().__init__()
        self.lesson = lesson
        self.battery_skipped: dict[tuple[str, str], str] = {}  # (exercise, entry) -> why add_battery left it out
        self.domains: dict[str, list[Domain]] = {}  # exercise -> its declared domains (CHECKS.domain)

    def probe(self, exercise: str, name: str, judge: Judge, configs: tuple[Config, ...] = CPU,
              hidden: bool = False, rule: str = "") -> Callable[[Probe], Probe]:
        """Add the check `name`. With `hidden=True` it is added twice: public, on its fixed seed (the student
        sees the property tested), and as its hidden twin (`name` + HIDDEN_TWIN), the same probe and judge on
        fresh draws from the run's seed (class grading's; the instructor's run draws more inputs). Hidden
        checks add inputs, never properties. `rule`: the words of the exercise's text that state what the
        check enforces (see Check.rule)."""
        def add(fn: Probe) -> Probe:
            names = (name, name + HIDDEN_TWIN) if hidden else (name,)
            for n in names:
                if any(c.exercise == exercise and c.name == n for c in self):
                    raise ValueError(f"duplicate check {exercise}/{n}")
            self.append(Check(exercise, name, fn, judge, configs, rule=rule))
            if hidden:
                self.append(Check(exercise, name + HIDDEN_TWIN, fn, judge, configs, hidden=True, property=name,
                                  rule=rule))
            return fn
        return add

    def domain(self, exercise: str, domain: Domain, judge: Judge, name: str | None = None,
               configs: tuple[Config, ...] = CPU, hidden: bool = False, rule: str = "") -> Callable[[Callable], Callable]:
        """`@CHECKS.domain(exercise, Domain(...), judge)` on `run(ctx, example) -> observations`: a check over
        the exercise's declared domain. The examples are drawn in the child from the check's seed (the same
        in the student's and the reference's child), `judge` compares each example's observations, and the
        message names the simplest failing example. The domain is kept in `self.domains`."""
        def add(run: Callable) -> Callable:
            self.domains.setdefault(exercise, []).append(domain)
            self.probe(exercise, name or "over its declared domain (drawn examples, the simplest failure shown)",
                       _domain_judge(domain, judge), configs, hidden, rule)(domain_probe(domain, run))
            return run
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
        at probe time (the exercise takes none: tests/lessons/test_battery.py holds the reference to that)."""
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
                                  (Config("cpu", v.dtype or "float32"),), hidden=True, variant=v,
                                  property=b.property, rule=b.rule))


# ----------------------------------------------------------------------------------------------
# Declared domains: the valid inputs the spec allows, as data beside the exercise


@dataclass(frozen=True)
class Arg:
    """One argument, config field or input size of an exercise, with the values the spec allows that the
    draws use: the first is the default (or the simplest), the others non-default values and the range's
    edges. Hypothesis shrinks towards the first."""
    name: str
    values: tuple

    def __post_init__(self):
        if len(self.values) < 2:
            raise ValueError(f"Arg {self.name}: give the default and at least one other value")


@dataclass(frozen=True)
class Domain:
    """The valid inputs of one exercise: its arguments and config fields (`args`), and per tensor argument
    its dtypes and layouts ("contiguous", "transposed", "strided"), each varied on that argument alone as
    well as together. `examples` random combinations are drawn besides the one-at-a-time ones."""
    args: tuple[Arg, ...]
    dtypes: tuple[tuple[str, tuple[str, ...]], ...] = ()  # ((argument, (dtype, ...)), ...): the first is the usual
    layouts: tuple[tuple[str, tuple[str, ...]], ...] = ()
    examples: int = 6
    # False for an exercise that takes no tensor (sizes and counts in, numbers out): no dtype or layout to vary
    tensors: bool = True

    def choices(self) -> list[tuple[str, tuple]]:
        """Every choice a drawn example makes, as (name, values): args, then `dtype of X`, `layout of X`."""
        return ([(a.name, tuple(a.values)) for a in self.args] + [(f"dtype of {n}", tuple(v)) for n, v in self.dtypes]
                + [(f"layout of {n}", tuple(v)) for n, v in self.layouts])


def example_text(example: dict, defaults: dict) -> str:
    """"B=1, T=1, rope_base=500000.0": the choices of an example that are not the default."""
    parts = [f"{k}={v}" for k, v in example.items() if v != defaults.get(k)]
    return ", ".join(parts) if parts else "the default arguments"


def _domain_judge(domain: Domain, judge: Judge) -> Judge:
    """A drawn-examples check's judge: every example judged by `judge` on its own observations; the
    simplest failing one (fewest non-default choices, then the smallest) is the message."""
    names = [n for n, _ in domain.choices()]
    defaults = {n: v[0] for n, v in domain.choices()}

    def judge_all(s: dict, r: dict, ctx: "JudgeContext") -> str | None:
        n = int(r.get("examples", 0))
        failing = []
        for i in range(n):
            pre = f"#{i} "
            sub_r = {k[len(pre):]: v for k, v in r.items() if k.startswith(pre)}
            sub_s = {k[len(pre):]: v for k, v in s.items() if k.startswith(pre)}
            if "raised" in sub_r or "choice" not in sub_r:
                continue  # the reference cannot take it: outside the domain (tests/test_domains.py)
            if "raised" in sub_s:
                msg = f"raised {sub_s['raised']}"
            elif sub_s.get("choice") != sub_r["choice"]:
                msg = "ran on other examples than the ones drawn (the grader's draws were changed)"
            else:
                try:
                    msg = judge(sub_s, sub_r, ctx)
                except (KeyError, TypeError, ValueError, IndexError, RuntimeError) as exc:
                    msg = f"gave observations that could not be compared ({type(exc).__name__})"
            if msg:
                choice = [int(c) for c in sub_r["choice"]]
                failing.append(((sum(c > 0 for c in choice), sum(choice), i), dict(zip(names, sub_r["example"])), msg))
        if not failing:
            return None
        _, example, msg = min(failing, key=lambda f: f[0])
        more = f" ({len(failing)} of {n} drawn examples fail)" if len(failing) > 1 else ""
        return f"fails for {example_text(example, defaults)}{more}: {msg}"
    return judge_all


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
    # Where `course hint` starts when this mistake was the last check's likely mistake: what to look at, never
    # the fix's code (tests/lessons/test_hints.py). Empty: the exercise's own hints, nothing made up.
    hint: str = ""

    def __post_init__(self):
        if isinstance(self.edits, dict):
            object.__setattr__(self, "edits", tuple(self.edits.items()))
        if not self.observed and (self.impl is None) == (not self.edits):
            raise ValueError(f"mistake {self.id}: give either impl or edits")



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
    Variant("a batch of 1", "with a batch of one (the inputs' leading axis has size 1)", shape="batch"),
    Variant("sequences of length 1", "with sequences of length 1 (the inputs' time axis has size 1, as in one "
            "decoding step)", shape="length"),
    # The three stress entries are float32. Offsets of 1e3 cost the inputs' own precision (float32 keeps ~7
    # digits, 1e3 + x keeps x to ~6e-5), so they are judged with 10x the tolerance: a lost max subtraction or
    # an E[x²] - E[x]² variance is off by far more (inf, NaN, or percents).
    # What each says is the input only: the result must match the reference's there, and the message says how
    # it does not. A cause (an unshifted exp, an E[x²] - E[x]² variance, eps outside the root) is said only when
    # a catalogued mistake or a mutant reproduces it (graders/engine/diagnosis.py): the same failure here has
    # other causes (a LayerNorm with a wrong statistic, a module whose state dict does not load).
    Variant("inputs offset by +1000", "with 1000 added to the inputs (the same spread, large values)",
            offset=1e3, tol_factor=50.0),
    Variant("very negative inputs (about -400)", "with 400 subtracted from the inputs (values near -400, where "
            "exp underflows to 0 in float32)", offset=-400.0, tol_factor=50.0),
    Variant("tiny inputs (scaled by 1e-4)", "with the inputs scaled by 1e-4 (a variance or mean square near 1e-8, "
            "below a usual eps)", scale=1e-4, tol_factor=50.0),
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


# ----------------------------------------------------------------------------------------------
# The switches that turn the grader's recorders off, read in the student's source (by the parent, which the
# student's code cannot reach). An exercise with forbidden APIs whose code names one of them fails "uses no
# forbidden API": it hides what it runs. (The child also wires the switches while student code runs: probe.py.)

SWITCH_OFFS = ("DisableTorchFunction", "_disable_torch_function", "_disable_current_modes", "_pop_mode",
               "_pop_torch_function_stack", "_pop_torch_dispatch_stack", "_set_torch_function_mode",
               "_set_dispatch_mode", "ops.aten", "_python_dispatch")


def switch_offs(source: str) -> list[str]:
    """The recorder switches `source` names (comments aside), in SWITCH_OFFS order."""
    code = "\n".join(line.split("#", 1)[0] for line in source.splitlines())
    return [name for name in SWITCH_OFFS if name in code]


def CHECKS_OF(module) -> Checks:
    return module.CHECKS


