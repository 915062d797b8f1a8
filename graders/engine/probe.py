"""The child's side: probing a namespace (the student's or the reference's) on seeded inputs, recording
forbidden calls and in-place edits, and turning what it returns into plain observations. Only the sandboxed
child (and the tests' in-process harness, for trusted code) runs this against a notebook's namespace."""

from __future__ import annotations

import contextlib
import functools
import importlib
import linecache
import os
import sys
import traceback
import zlib
from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from .checks import CHECKS_OF, ON_META, Check, Config, Variant


def defer_dynamo() -> int:
    """Let torch's `_disable_dynamo` wrappers skip importing torch._dynamo while nothing has imported it.

    torch wraps many of its Python refs (the meta-device kernels of `tril`, `where`, ...) and dispatch modes in
    `torch._compile._disable_dynamo`, whose first call imports torch._dynamo (1.3-2.5 s here) only to wrap the
    function in `torch._dynamo.disable`. That wrapper caches its result on the function as `__dynamo_disable`;
    this sets that cache, on every such function that exists now, to a stand-in that calls the function
    directly while torch._dynamo is not imported (then nothing can be compiling, and `disable` would only call
    it) and, once it is, builds torch's own wrapper, caches it in its place and calls that: the same results
    either way, minus the import. Idempotent; returns how many functions it took (run again after importing
    more of torch: the zygote does, after its WARM_IMPORTS). Any seat that probes runs it (this module's
    import), so no verdict depends on the seat."""
    import gc

    try:
        import torch._compile as compile_module

        code = compile_module._disable_dynamo(lambda: None).__code__
    except (ImportError, AttributeError, TypeError):
        return 0
    taken = 0
    for inner in gc.get_referrers(code):
        if not callable(inner) or getattr(inner, "__code__", None) is not code or not inner.__closure__:
            continue
        cells = dict(zip(code.co_freevars, (c.cell_contents for c in inner.__closure__)))
        fn, recursive = cells.get("fn"), cells.get("recursive", True)
        if fn is None or getattr(fn, "__dynamo_disable", None) is not None:
            continue
        try:
            fn.__dynamo_disable = _until_dynamo(fn, recursive)
        except (AttributeError, TypeError):  # a builtin or a slotted callable: left as torch made it
            continue
        taken += 1
    return taken


def _until_dynamo(fn: Callable, recursive: bool) -> Callable:
    def call(*args, **kwargs):
        if "torch._dynamo" not in sys.modules:
            return fn(*args, **kwargs)
        import torch._dynamo

        disabled = torch._dynamo.disable(fn, recursive, wrapping=False)
        fn.__dynamo_disable = disabled
        return disabled(*args, **kwargs)

    return call


defer_dynamo()


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


class RecordingMode(TorchDispatchMode):
    """A dispatch mode that only watches (its __torch_dispatch__ compiles nothing). torch wraps a mode's
    __torch_dispatch__ in `_disable_dynamo` unless told otherwise, and the first call through that wrapper
    imports torch._dynamo: seconds inside the first exercise's time limit (the cause of "softmax: timeout" on a
    busy machine). Subclass this instead of TorchDispatchMode."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:  # (read by torch ≥ 2.12's __init_subclass__; harmless before)
        return False


class AtenRecorder(RecordingMode):
    """The forbidden calls seen from below, at the dispatcher: the aten ops the watched functions end in
    (torch.softmax is aten._softmax, SDPA on the CPU aten._scaled_dot_product_flash_attention_for_cpu, ...).
    `torch._C.DisableTorchFunction()` switches CallRecorder off, and `torch.ops.aten._softmax(...)` never
    passes through it; both still dispatch their aten op here."""

    def __init__(self, watched: dict[int, str], seen: set[str]):
        super().__init__()
        self.bases = {name: aten_bases(name) for name in watched.values()}
        self.seen = seen
        self.cache: dict[str, str | None] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        op = func.overloadpacket.__name__
        if op not in self.cache:
            self.cache[op] = next((f"{name} (aten.{op})" for name, (exact, prefixes) in self.bases.items()
                                   if op in exact or op.startswith(prefixes)), None)
        if self.cache[op]:
            self.seen.add(self.cache[op])
        return func(*args, **(kwargs or {}))


def aten_bases(dotted: str) -> tuple[set[str], tuple[str, ...]]:
    """The aten ops a forbidden torch function ends in, by name: (exact names, name prefixes)."""
    base = dotted.rsplit(".", 1)[-1].lstrip("_")
    exact = {base, "_" + base, "native_" + base, "_native_" + base}
    prefixes = ("_" + base + "_", "_native_" + base + "_")
    if base == "scaled_dot_product_attention":
        prefixes += ("_scaled_dot_product_",)  # the backends: flash, efficient, math, cudnn
    return exact, prefixes


# The functions that switch the recorders off, replaced while student code runs by ones that say so (and
# still work): they are then reported as forbidden. The parent also reads the student's cells for these names
# (checks.SWITCH_OFFS), which also catches a reference taken before the call.
# torch uses some of them itself (printing a tensor runs _disable_current_modes): only a call from outside
# torch's own files counts.
_SWITCHES = (("torch._C", "DisableTorchFunction"), ("torch.utils._python_dispatch", "_disable_current_modes"),
             ("torch.utils._python_dispatch", "_pop_mode_temporarily"))
_TORCH_DIR = os.path.dirname(torch.__file__)


class _Tripwires:
    def __init__(self, seen: set[str]):
        self.seen, self.saved = seen, []

    def __enter__(self):
        for mod_name, attr in _SWITCHES:
            mod = importlib.import_module(mod_name)
            original = getattr(mod, attr, None)
            if original is None:
                continue

            def tripped(*args, _original=original, _name=f"{mod_name}.{attr}", **kwargs):
                if not sys._getframe(1).f_code.co_filename.startswith(_TORCH_DIR):
                    self.seen.add(f"{_name} (switches off the grader's recording)")
                return _original(*args, **kwargs)
            self.saved.append((mod, attr, original))
            setattr(mod, attr, tripped)
        return self

    def __exit__(self, *exc):
        for mod, attr, original in reversed(self.saved):
            setattr(mod, attr, original)
        self.saved = []
        return False


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


def seed_global(seed: int) -> None:
    """`torch.manual_seed(seed)`, the same numbers, without its cost where this torch has no accelerator built in:
    there it queues a seeding per backend (CUDA, XPU, MTIA), each with its caller's stack formatted, for a device
    that cannot exist: about 1 ms a call, 0.2 s of lesson 08's probes. A torch built with one gets
    torch.manual_seed itself (its lazy seeding of a device not yet started is kept as is)."""
    if _accelerator_built():
        torch.manual_seed(seed)
    else:
        torch.default_generator.manual_seed(seed)


@functools.cache
def _accelerator_built() -> bool:
    """Was this torch built with a backend torch.manual_seed seeds? Asked without starting any device (CUDA's
    is_available would initialise its driver); whatever cannot be asked counts as built."""
    def built(module: str, check: str) -> bool:
        fn = getattr(getattr(torch, module, None), check, None)
        return True if fn is None else bool(fn())

    mps = getattr(torch.backends, "mps", None)
    return (built("cuda", "_is_compiled") or built("xpu", "_is_compiled") or built("mtia", "_is_compiled")
            or (mps is None or mps.is_built())
            or hasattr(torch, torch._C._get_privateuse1_backend_name()))  # a custom device's module


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
        seed_global(self.seed)

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
            if self.watched:  # seen from above (torch functions) and from below (aten ops), switches wired
                with _Tripwires(self.forbidden_seen), AtenRecorder(self.watched, self.forbidden_seen), \
                        CallRecorder(self.watched, self.forbidden_seen):
                    out = fn(*args, **kwargs)
            else:  # nothing to record: no torch function mode (one costs ~10 µs per torch call)
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
                raise WrongResult(ON_META)
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
# seeds, so their reference observations can ship to students as data. The child passes its job's seed.
def seed_for(lesson: str, check: Check, config: Config, hidden_seed: int | None = None) -> int:
    salt = f"/run {hidden_seed}" if check.hidden and hidden_seed is not None else ""
    return zlib.crc32(f"{lesson}/{check.exercise}/{check.name}/{config.key}{salt}".encode())


def watched_functions(names: tuple[str, ...]) -> dict[int, str]:
    """{id(function): dotted name} for the names this torch has (FORBIDDEN's form)."""
    watched = {}
    for name in names:
        obj = resolve(name)
        if obj is not None:
            watched[id(obj)] = name
    return watched


# Checks in a row that ran out of memory before the exercise's other checks are not run: filling the memory
# cap takes a second or more each time, and twenty such checks would reach the time limit and read "timeout".
# One memory error alone (a big input that an O(n^2) layout cannot hold) lets the other checks run.
MEMORY_STOP = 2


def probe_exercise(module, ns: dict, exercise: str, configs: tuple[Config, ...],
                   only_public: bool = False, hidden_seed: int | None = None, keys=None) -> dict:
    """Run every check of one exercise on `ns` for the configs given; returns the observations. The hidden
    checks draw their inputs from `hidden_seed` (class grading's per-run seed; None: the fixed seeds). `keys`:
    only the checks with these keys (a follow-up's screen; each check's inputs are its own, run alone or not)."""
    checks = CHECKS_OF(module).of(exercise)
    if only_public:
        checks = [c for c in checks if not c.hidden]
    out: dict[str, Any] = {"checks": {}, "forbidden": [], "mutated": []}
    if exercise not in ns:
        out["missing"] = True
        return out
    watched = watched_functions(getattr(module, "FORBIDDEN", {}).get(exercise, ()))
    forbidden, mutated = set(), []
    short_of_memory = 0  # memory errors in a row: code that exhausts memory on every input is stopped at two
    for check in checks:
        for config in check.configs:
            if config not in configs or (keys is not None and check.key(config) not in keys):
                continue
            ctx = ProbeContext(ns, exercise, config, seed_for(CHECKS_OF(module).lesson, check, config, hidden_seed), watched,
                               check.variant)
            try:
                with filled_memory(ctx.device):
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
            short_of_memory = short_of_memory + 1 if obs.get("__error__", {}).get("kind") == "memory" else 0
            out["checks"][check.key(config)] = obs
            if short_of_memory == MEMORY_STOP:
                out["out_of_memory"] = True  # the checks not run are errors, not timeouts (verdict.py)
                break
            forbidden |= ctx.forbidden_seen
            mutated += [f"{check.name}: {m}" for m in ctx.mutated]
        if out.get("out_of_memory"):
            break
    # seen from above and from below: once, by the name the student wrote
    out["forbidden"] = sorted(f for f in forbidden if not (" (aten." in f and f.split(" (aten.")[0] in forbidden))
    out["mutated"] = mutated[:5]
    return out



from .draws import domain_probe, draw_examples  # noqa: E402,F401 (the child's side of a declared domain)


@contextlib.contextmanager
def filled_memory(device: torch.device):
    """On the CPU, memory torch hands out uninitialised (`torch.empty`, and outputs such as a meta-by-CPU
    matmul's, which torch 2.13 returns on the CPU unwritten) reads as NaN (integers: their largest value)
    while a probe runs: code that reads memory it never wrote then gets the same observation, and the same
    verdict, in every run and every seat, instead of whatever the allocator held. torch fills only in its
    deterministic mode; warn_only, so an op without a deterministic kernel warns and runs as before. Set through
    torch._C: torch.use_deterministic_algorithms also sets inductor's flag, importing torch._inductor (900
    modules, and torch._dynamo). CUDA probes are left as they are (cuBLAS and SDPA's kernels are chosen
    differently in that mode)."""
    set_mode = getattr(torch._C, "_set_deterministic_algorithms", None)
    if device.type != "cpu" or set_mode is None:
        yield
        return
    import torch.utils.deterministic as deterministic

    before = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
              deterministic.fill_uninitialized_memory)
    set_mode(True, warn_only=True)
    deterministic.fill_uninitialized_memory = True
    try:
        yield
    finally:
        set_mode(before[0], warn_only=before[1])
        deterministic.fill_uninitialized_memory = before[2]


def relaid(t: torch.Tensor, layout: str) -> torch.Tensor:
    """`t` with the same values in `layout`: "contiguous", "transposed" or "strided" (see _relaid)."""
    return t.contiguous() if layout == "contiguous" or t.dim() < 2 else _relaid(t, layout)


def register_source(filename: str, source: str) -> None:
    """Let tracebacks show the student's lines for code compiled under `filename`."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)



def on_meta(result: Any) -> dict:
    """An observation of a result made with device="meta" (a meta tensor holds no values): its device,
    shape and dtype. Judge with `made_on_meta`."""
    if not isinstance(result, torch.Tensor):
        return {"device": None, "got": type(result).__name__[:100]}
    return {"device": result.device.type, "shape": list(result.shape), "dtype": str(result.dtype).removeprefix("torch.")}


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
