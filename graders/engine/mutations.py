"""Mutation operators: wrong answers the engine derives from a reference's own source, each with a sentence.

A catalogued mistake (checks.py `Mistake`) is typed by a lesson's author; a *mutant* is made here, by one
operator applied at one place of the solved cell that defines an exercise (`mutants(source, exercise)`).
Only the reference child runs them (trusted code: the course's own solution, changed by the engine), on the
same inputs as the student's checks; the parent names one exactly as it names a catalogued mistake
(diagnosis.py `mistake_fits`: the same checks fail, with the same observations), catalogued mistakes first.

Each operator yields (mutated tree, operator id, sentence). The sentence says the *concept* with the
names the code uses ("`scores` is divided by d_k instead of √d_k"), never the reference's line. The
operators, in the order they are tried (round-robin, so a cap keeps every family):

  scale        √d → d, the scale dropped, applied twice (math.sqrt / torch.sqrt / ** 0.5 / rsqrt)
  axis         a reduction's dim changed (-1 ↔ -2, k ↔ k±1; all of a function's equal dims at once), keepdim dropped
  diagonal     tril/triu's diagonal off by one; tril ↔ triu
  comparison   < ↔ <=, > ↔ >= (a boundary off by one); a comparison negated
  slice        a slice bound off by one
  sign         a unary minus dropped; a - b → b - a
  arguments    the first two positional arguments swapped (and a @ b → b @ a)
  cast         a float32 upcast dropped (.float(), .to(torch.float32), dtype=torch.float32)
  variance     biased ↔ unbiased (a mean of squared deviations ↔ .var(); unbiased=, correction=)
  eps          eps moved outside the root (sqrt(v + eps) → sqrt(v) + eps, rsqrt → 1/(sqrt + eps)), dropped
  residual     x + f(x) → f(x)
  repeat       repeat_interleave ↔ tiling (torch.cat([x] * n))
  mask         masked_fill / where with the mask inverted
  neginf       -inf → -1e9, -inf → 0; -inf → -1e9 with the fills by other masks (the all -inf row's special
               case) left out (op_finite_unguarded, tried after the module families)
  default      an optional argument ignored: its name replaced by its default (one use, or all of them)

Every family also runs inside the definitions of the same cell the exercise hands its work to (`helpers`:
an autograd Function it applies, a Triton kernel it launches, a function it calls): such a mutant redefines the helper, changed, right
before the exercise, and its sentence says where ("in `Fn` (or wherever your `f` does that work): ...").

A mutant that does not compile or whose source equals the original is dropped; the child drops the ones
whose observations pass every check (equivalent, for the checks) and keeps the first of those with equal
observations. Pure `ast`; no torch here.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass
from typing import Callable, Iterator

from .mutation_ast import (MODULES, Site, _call_name, _const, _dims, _int_value, _is_neginf, _is_sqrt,  # noqa: F401
                           _in_raise_guard, _names, _parents, _rename_call, _replace, _short, _target_of, _u,
                           _without_kw)
from . import mutations_module as _module, mutations_shape as _shape  # their families, appended below

CAP = 40  # candidates per exercise, at most

REDUCTIONS = {"sum", "mean", "amax", "amin", "max", "min", "var", "std", "softmax", "log_softmax", "cumsum",
              "logsumexp", "norm", "argmax", "argmin", "prod", "cat", "stack", "topk", "sort", "flip", "all", "any"}


@dataclass(frozen=True)
class Mutant:
    """One candidate: the cell's source with one change, the operator that made it, and what it means."""

    source: str
    operator: str  # "<family>-<variant>": the stable part of the diagnosis id, mutation:<operator>
    sentence: str  # the concept, with the code's own names; shown as the diagnosis when it reproduces
    # (source, operator, sentence) of a wider change the checks may not tell apart from this one (a test turned
    # the wrong way round, and the block under it gone): when both give the same observations, the wider
    # sentence, true of both, is the one named (probe_mutants), never a construct the student may not have
    alternative: tuple[str, str, str] | None = None

    @property
    def family(self) -> str:
        return self.operator.split("-", 1)[0]


# ----------------------------------------------------------------------------------------------
# Where an operator may change the code, and how a change is applied to a copy


def _scope(tree: ast.Module, exercise: str) -> list[ast.AST]:
    """Every node of the exercise's own definition (function or class), in a fixed (breadth-first) order."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == exercise:
            return list(ast.walk(node))
    return []








def _apply(tree: ast.Module, exercise: str, site: Site) -> str | None:
    indices, build = site[0], site[1]
    twin = copy.deepcopy(tree)
    nodes = _scope(twin, exercise)
    parents = _parents(twin)
    try:
        for i in indices:
            _replace(parents, nodes[i], build(nodes[i]))
        ast.fix_missing_locations(twin)
        src = ast.unparse(twin)
        compile(src, "<mutant>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, TypeError, AttributeError, KeyError, IndexError, RecursionError):
        return None
    return src + "\n"


# ----------------------------------------------------------------------------------------------
# Naming what a site changes, in the code's own words


















def _epsish(node: ast.AST) -> bool:
    return any("eps" in n.lower() for n in _names(node)) or any(
        isinstance(n, ast.Attribute) and "eps" in n.attr.lower() for n in ast.walk(node))




# ----------------------------------------------------------------------------------------------
# The operators: each a function of (scope nodes, parents, context) yielding sites


def op_scale(nodes, parents, ctx) -> Iterator[Site]:
    for i, node in enumerate(nodes):
        arg = _is_sqrt(node)
        if arg is None or _epsish(arg) or not _dims(arg):
            continue
        what = _target_of(nodes, parents, node)
        a = _short(arg, 24)
        parent = parents.get(id(node), (None,))[0]
        how = {ast.Div: "divided by", ast.Mult: "multiplied by"}.get(type(getattr(parent, "op", None)), "scaled with")
        yield (i,), (lambda n: copy.deepcopy(_is_sqrt(n))), "scale-linear", \
            f"{what} is {how} {a} instead of √{a} (the square root is missing)"
        if isinstance(parent, ast.BinOp) and isinstance(parent.op, (ast.Div, ast.Mult)) and parent.right is node:
            j = nodes.index(parent) if parent in nodes else None
            if j is not None:
                yield (j,), (lambda p: p.left), "scale-dropped", f"{what} is never {how} √{a}: the scale is missing"
                yield (j,), (lambda p: ast.BinOp(p, p.op, copy.deepcopy(p.right))), "scale-twice", \
                    f"{what} is {how} √{a} twice: the scale is applied once too often"


def op_axis(nodes, parents, ctx) -> Iterator[Site]:
    by_value: dict[int, list[int]] = {}
    for i, node in enumerate(nodes):
        if not isinstance(node, ast.Call):
            continue
        name = _call_name(node)
        spots = [k for k in node.keywords if k.arg in ("dim", "axis")]
        what = _target_of(nodes, parents, node)
        for kw in spots:
            c = _int_value(kw.value)
            if c is None:
                continue
            j = nodes.index(kw)
            by_value.setdefault(c, []).append(j)
            for new in _other_axes(c):
                yield (j,), (lambda k, new=new: ast.keyword(k.arg, _const(new))), f"axis-changed", \
                    f"the {name} that gives {what} runs over axis {new}, not axis {c}"
        if not spots and name in REDUCTIONS and node.args and isinstance(node.func, ast.Attribute):
            pos = 0 if not (isinstance(node.func.value, ast.Name) and node.func.value.id in MODULES) else 1
            if len(node.args) > pos and name not in ("topk",):
                c = _int_value(node.args[pos])
                if c is not None:
                    j = nodes.index(node.args[pos])
                    by_value.setdefault(c, []).append(j)
                    for new in _other_axes(c):
                        yield (j,), (lambda n, new=new: _const(new)), "axis-changed", \
                            f"the {name} that gives {what} runs over axis {new}, not axis {c}"
        for kw in node.keywords:
            if kw.arg == "keepdim" and isinstance(kw.value, ast.Constant) and kw.value.value is True:
                j = nodes.index(node)
                yield (j,), (lambda n: _without_kw(n, "keepdim")), "axis-keepdim-dropped", \
                    (f"the {name} that gives {what} drops the reduced axis (no keepdim=True), so it broadcasts "
                     f"against the wrong axis")
    for c, js in sorted(by_value.items()):
        if len(js) > 1:
            for new in _other_axes(c):
                yield tuple(js), (lambda n, new=new: ast.keyword(n.arg, _const(new)) if isinstance(n, ast.keyword)
                                  else _const(new)), "axis-all-changed", \
                    f"every reduction over axis {c} runs over axis {new} instead"


def _other_axes(c: int) -> list[int]:
    if c == -1:
        return [-2]
    if c == -2:
        return [-1]
    return [c + 1] + ([c - 1] if c > 0 else [])




def op_diagonal(nodes, parents, ctx) -> Iterator[Site]:
    for i, node in enumerate(nodes):
        if not (isinstance(node, ast.Call) and _call_name(node) in ("tril", "triu")):
            continue
        name = _call_name(node)
        what = _target_of(nodes, parents, node)
        other = "triu" if name == "tril" else "tril"
        for delta, more in ((-1, "one diagonal fewer"), (1, "one diagonal more")):
            yield (i,), (lambda n, delta=delta: _shift_diagonal(n, delta)), \
                f"diagonal-{'minus' if delta < 0 else 'plus'}-one", \
                f"the {name} that gives {what} keeps {more} than it should: its diagonal is off by one"
        yield (i,), (lambda n, other=other: _rename_call(n, other)), "diagonal-triangle-swapped", \
            f"{what} keeps the {'upper' if name == 'tril' else 'lower'} triangle ({other}) instead of the " \
            f"{'lower' if name == 'tril' else 'upper'} one ({name})"


def _shift_diagonal(call: ast.Call, delta: int) -> ast.Call:
    for kw in call.keywords:
        if kw.arg == "diagonal":
            kw.value = ast.BinOp(kw.value, ast.Add() if delta > 0 else ast.Sub(), ast.Constant(abs(delta)))
            return call
    method = isinstance(call.func, ast.Attribute) and not (isinstance(call.func.value, ast.Name)
                                                           and call.func.value.id in MODULES)
    pos = 0 if method else 1
    if len(call.args) > pos:
        call.args[pos] = ast.BinOp(call.args[pos], ast.Add() if delta > 0 else ast.Sub(), ast.Constant(abs(delta)))
    else:
        call.keywords.append(ast.keyword("diagonal", _const(delta)))
    return call




_BOUNDARY = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}
_NEGATED = {ast.Lt: ast.GtE, ast.LtE: ast.Gt, ast.Gt: ast.LtE, ast.GtE: ast.Lt}
_SYMBOL = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


def op_comparison(nodes, parents, ctx) -> Iterator[Site]:
    for i, node in enumerate(nodes):
        if not (isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _BOUNDARY):
            continue
        op = type(node.ops[0])
        left, right = _short(node.left, 24), _short(node.comparators[0], 24)
        if _in_raise_guard(parents, node):
            continue  # a validation's bound: the domain's own checks say which values must raise
        new = _BOUNDARY[op]
        incl = new in (ast.LtE, ast.GtE)
        yield (i,), (lambda n, new=new: _with_op(n, new)), "comparison-boundary", \
            (f"the comparison of {left} with {right} {'includes' if incl else 'excludes'} the boundary "
             f"({_SYMBOL[new]}): an off-by-one at {right}")
        neg = _NEGATED[op]
        parent = parents.get(id(node), (None,))[0]
        alternative = ()
        if isinstance(parent, (ast.If, ast.While, ast.IfExp)) and parent.test is node:  # a branch, not a selection
            sentence = (f"the test of {left} against {right} is the wrong way round ({_SYMBOL[neg]}): what runs "
                        f"under it runs in the cases it should skip, and not in the cases it is for")
            if isinstance(parent, ast.If) and not parent.orelse:  # the checks may only see the block not run
                test = _short(node, 40)
                alternative = ((lambda n: ast.Constant(False), "branch-skipped",
                                f"the block under `if {test}:` does not run when its test holds (the block is "
                                f"missing, or the test is the wrong way round)"),)
        else:
            sentence = (f"the comparison of {left} with {right} is the wrong way round ({_SYMBOL[neg]}): it "
                        f"selects the positions it should leave out")
        yield ((i,), (lambda n, neg=neg: _with_op(n, neg)), "comparison-negated", sentence, *alternative)


def _with_op(node: ast.Compare, op) -> ast.Compare:
    node.ops = [op()]
    return node




def op_slice(nodes, parents, ctx) -> Iterator[Site]:
    for i, node in enumerate(nodes):
        if not isinstance(node, ast.Slice):
            continue
        what = _target_of(nodes, parents, node)
        for end in ("lower", "upper"):
            bound = getattr(node, end)
            if bound is None or not _dims(bound) and _int_value(bound) in (None, 0):
                continue
            for delta in (-1, 1):
                # what the observations show is the direction: a bound one further out gives what any further one
                # gives where one more entry already fails (a context one longer than the model takes), so the
                # sentence says "or further", never that it is one exactly
                b, more = _short(bound, 20), (end == "lower") == (delta < 0)
                keeps = {("lower", True): f"keeps entries before {b}", ("lower", False): f"drops the entry at {b}",
                         ("upper", True): f"keeps entries from {b} on", ("upper", False): f"drops the entry at {b} - 1"}
                yield (i,), (lambda n, end=end, delta=delta: _shift_bound(n, end, delta)), "slice-off-by-one", \
                    (f"a slice in {what} {'starts' if end == 'lower' else 'ends'} "
                     f"{'too early' if (end == 'lower') == more else 'too late'} ({b} {'-' if delta < 0 else '+'} 1, "
                     f"or further): it {keeps[end, more]}")


def _shift_bound(node: ast.Slice, end: str, delta: int) -> ast.Slice:
    b = getattr(node, end)
    setattr(node, end, ast.BinOp(b, ast.Add() if delta > 0 else ast.Sub(), ast.Constant(1)))
    return node


def op_sign(nodes, parents, ctx) -> Iterator[Site]:
    pairs = _shape._range_pairs(nodes)
    for i, node in enumerate(nodes):
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and not isinstance(node.operand, ast.Constant):
            if _is_neginf(node):
                continue
            what = _target_of(nodes, parents, node)
            yield (i,), (lambda n: n.operand), "sign-flipped", \
                f"the sign of {_short(node.operand, 30)} in {what} is flipped (a minus is missing)"
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and _dims(node.left) and _dims(node.right) \
                and not isinstance(node.right, ast.Constant):
            if isinstance(node.left, ast.Name) and pairs.get(node.left.id) == (_u(node.right), False):
                continue  # a range's length (end - start): reversed it is negative, an error at once, not an answer
            what = _target_of(nodes, parents, node)
            yield (i,), (lambda n: ast.BinOp(n.right, ast.Sub(), n.left)), "sign-subtraction-reversed", \
                f"{what} subtracts the other way round: {_short(node.right, 20)} - {_short(node.left, 20)}"


def op_arguments(nodes, parents, ctx) -> Iterator[Site]:
    for i, node in enumerate(nodes):
        if isinstance(node, ast.Call) and len(node.args) >= 2 and not any(isinstance(a, ast.Starred) for a in node.args[:2]):
            a, b = node.args[:2]
            if isinstance(a, ast.Constant) or isinstance(b, ast.Constant) or _u(a) == _u(b) or \
                    _int_value(a) is not None or _int_value(b) is not None:
                continue
            if _call_name(node) in ("range", "isinstance", "getattr", "setattr", "hasattr", "min", "max", "zip"):
                continue
            what = _target_of(nodes, parents, node)
            yield (i,), _swap_args, "arguments-swapped", \
                f"`{_call_name(node)}` in {what} gets {_short(a, 20)} and {_short(b, 20)} swapped (in the call, or where they are made)"
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            what = _target_of(nodes, parents, node)
            yield (i,), (lambda n: ast.BinOp(n.right, ast.MatMult(), n.left)), "arguments-matmul-swapped", \
                f"the matrix product in {what} is taken the other way round ({_short(node.right, 20)} @ …)"


def _swap_args(call: ast.Call) -> ast.Call:
    call.args[0], call.args[1] = call.args[1], call.args[0]
    return call


def _is_f32(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr in ("float32", "float") and \
        isinstance(node.value, ast.Name) and node.value.id in ("torch", "tl")  # (tl: inside a Triton kernel)


def op_cast(nodes, parents, ctx) -> Iterator[Site]:
    for i, node in enumerate(nodes):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        what = _target_of(nodes, parents, node)
        sentence = (f"{what} is computed in the input's own dtype: the float32 upcast is missing (in half "
                    f"precision it rounds, or overflows)")
        if node.func.attr == "float" and not node.args and not node.keywords:
            yield (i,), (lambda n: n.func.value), "cast-dropped", sentence
        elif node.func.attr == "to" and len(node.args) == 1 and not node.keywords and _is_f32(node.args[0]):
            yield (i,), (lambda n: n.func.value), "cast-dropped", sentence
        elif node.func.attr == "to" and len(node.args) == 2 and _is_f32(node.args[1]):
            yield (i,), (lambda n: (n.args.pop(1), n)[1]), "cast-dropped", sentence
        elif any(k.arg == "dtype" and _is_f32(k.value) for k in node.keywords) and node.func.attr != "to":
            yield (i,), (lambda n: _without_kw(n, "dtype")), "cast-dropped", \
                f"{what} is made without dtype=torch.float32 (in the default, or the input's, dtype)"


def op_variance(nodes, parents, ctx) -> Iterator[Site]:
    ex = ctx["exercise"]
    for i, node in enumerate(nodes):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        name = node.func.attr
        recv = node.func.value
        if name == "mean" and isinstance(recv, ast.BinOp) and isinstance(recv.op, ast.Pow) and \
                isinstance(recv.right, ast.Constant) and recv.right.value == 2 and isinstance(recv.left, ast.BinOp) \
                and isinstance(recv.left.op, ast.Sub):
            yield (i,), _to_var, "variance-unbiased", \
                (f"the variance is the unbiased (n−1) estimate, torch's .var() default; {ex} uses the population "
                 f"variance (divide by n)")
        if name in ("var", "std"):
            for kw in node.keywords:
                if kw.arg == "unbiased" and isinstance(kw.value, ast.Constant):
                    new = not kw.value.value
                    yield (i,), (lambda n, new=new: _set_kw(n, "unbiased", new)), \
                        f"variance-{'unbiased' if new else 'biased'}", _var_sentence(ex, new)
                if kw.arg == "correction" and isinstance(kw.value, ast.Constant) and kw.value.value in (0, 1):
                    new = 1 - kw.value.value
                    yield (i,), (lambda n, new=new: _set_kw(n, "correction", new)), \
                        f"variance-{'unbiased' if new else 'biased'}", _var_sentence(ex, bool(new))


def _var_sentence(ex: str, unbiased: bool) -> str:
    if unbiased:
        return f"the variance is the unbiased (n−1) estimate; {ex} uses the population variance (divide by n)"
    return f"the variance divides by n; {ex} uses the unbiased (n−1) estimate"


def _to_var(call: ast.Call) -> ast.Call:
    dev = call.func.value.left  # (x - mean) ** 2 → x
    return ast.Call(ast.Attribute(dev.left, "var", ast.Load()), call.args, call.keywords)


def _set_kw(call: ast.Call, name: str, value) -> ast.Call:
    for kw in call.keywords:
        if kw.arg == name:
            kw.value = ast.Constant(value)
    return call


def op_eps(nodes, parents, ctx) -> Iterator[Site]:
    for i, node in enumerate(nodes):
        if not isinstance(node, ast.Call):
            continue
        name = _call_name(node)
        if name not in ("sqrt", "rsqrt"):
            continue
        arg = node.args[0] if node.args else (node.func.value if isinstance(node.func, ast.Attribute) else None)
        if not (isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Add) and _epsish(arg.right)):
            continue
        v, e = _short(arg.left, 24), _short(arg.right, 10)
        yield (i,), (lambda n, name=name: _eps_out(n, name)), "eps-outside-root", \
            f"{e} is added after the square root (√({v}) + {e}), not inside it (√({v} + {e}))"
        yield (i,), (lambda n: _eps_drop(n)), "eps-dropped", \
            f"{e} is left out of the square root of {v} (a row with no spread divides by zero)"


def _root_arg(call: ast.Call) -> ast.AST:
    return call.args[0] if call.args else call.func.value


def _eps_out(call: ast.Call, name: str) -> ast.AST:
    arg = _root_arg(call)
    root = ast.Call(ast.Attribute(ast.Name("torch", ast.Load()), "sqrt", ast.Load()), [arg.left], [])
    total = ast.BinOp(root, ast.Add(), arg.right)
    return total if name == "sqrt" else ast.BinOp(ast.Constant(1), ast.Div(), total)


def _eps_drop(call: ast.Call) -> ast.AST:
    arg = _root_arg(call)
    if call.args:
        call.args[0] = arg.left
    else:
        call.func.value = arg.left
    return call


def op_residual(nodes, parents, ctx) -> Iterator[Site]:
    for i, node in enumerate(nodes):
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)):
            continue
        for keep, drop in (("right", "left"), ("left", "right")):
            x, f = getattr(node, drop), getattr(node, keep)
            if isinstance(x, ast.Name) and isinstance(f, ast.Call) and x.id in _names(f):
                what = _target_of(nodes, parents, node)
                yield (i,), (lambda n, keep=keep: getattr(n, keep)), "residual-dropped", \
                    f"the residual connection is missing: {what} is the sublayer's output, without {x.id} added back"


def op_repeat(nodes, parents, ctx) -> Iterator[Site]:
    for i, node in enumerate(nodes):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr == "repeat_interleave" and node.args:
            dim = next((k.value for k in node.keywords if k.arg == "dim"), node.args[1] if len(node.args) > 1 else None)
            if dim is None:
                continue
            what = _target_of(nodes, parents, node)
            yield (i,), (lambda n, dim=dim: _tile(n.func.value, n.args[0], dim)), "repeat-tiled", \
                f"{what} tiles the copies (a b a b) instead of repeating each one in place (a a b b)"
        elif node.func.attr == "repeat":
            counts = [a for a in node.args if _int_value(a) != 1]
            if len(counts) == 1 and len(node.args) > 1:
                d = node.args.index(counts[0])
                what = _target_of(nodes, parents, node)
                yield (i,), (lambda n, d=d, c=counts[0]: ast.Call(ast.Attribute(n.func.value, "repeat_interleave",
                                                                                ast.Load()), [c], [ast.keyword("dim", ast.Constant(d))])), \
                    "repeat-interleaved", \
                    f"{what} repeats each copy in place (a a b b) instead of tiling them (a b a b)"


def _tile(x, n, dim) -> ast.AST:
    lst = ast.BinOp(ast.List([x], ast.Load()), ast.Mult(), n)
    return ast.Call(ast.Attribute(ast.Name("torch", ast.Load()), "cat", ast.Load()), [lst], [ast.keyword("dim", dim)])


def op_mask(nodes, parents, ctx) -> Iterator[Site]:
    for i, node in enumerate(nodes):
        if isinstance(node, ast.Call) and _call_name(node) in ("masked_fill", "masked_fill_", "where") and node.args:
            what = _target_of(nodes, parents, node)
            yield (i,), _invert_first, "mask-inverted", \
                f"the mask's meaning is inverted in {what}: the positions it should keep are the ones changed"


_MASK_KWS = {"attn_mask", "mask", "src_mask", "attention_mask"}


def op_nomask(nodes, parents, ctx) -> Iterator[Site]:
    """An attention call handed no mask: its mask keyword left out (`attn_mask=causal` → the default, None), or
    `is_causal=True` left out; not a mask the caller gave, passed on (`mask=mask`: the keyword family's). Reaches
    the parts the exercise builds (op.into_parts: a block's attention), where the mask is most often passed."""
    passed_on = {a.arg for fn in nodes if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                 for a in fn.args.args + fn.args.kwonlyargs}
    for i, node in enumerate(nodes):
        if not isinstance(node, ast.Call):
            continue
        for kw in node.keywords:
            if isinstance(kw.value, ast.Name) and kw.value.id in passed_on:
                continue  # a mask the caller gave, passed on: the keyword family's (keyword-dropped)
            if kw.arg in _MASK_KWS and not (isinstance(kw.value, ast.Constant) and kw.value.value is None):
                yield (i,), (lambda n, arg=kw.arg: _without_kw(n, arg)), "nomask-dropped", \
                    (f"`{_short(node.func, 40)}` in {_target_of(nodes, parents, node)} gets no mask ({kw.arg}="
                     f"{_short(kw.value, 20)} is left out): nothing is masked, so every query sees every key, the "
                     f"ones it must not see included")
            elif kw.arg == "is_causal" and isinstance(kw.value, ast.Constant) and kw.value.value is True:
                yield (i,), (lambda n: _without_kw(n, "is_causal")), "nomask-not-causal", \
                    (f"`{_short(node.func, 40)}` in {_target_of(nodes, parents, node)} is called without "
                     f"is_causal=True: no causal mask, so every query sees the keys after it")


op_nomask.into_parts = True

_RANK = {"x": ("B", "T", "D")}  # the parameter, and the sizes a student who assumes its rank unpacks


def op_rank(nodes, parents, ctx) -> Iterator[Site]:
    """The input's rank assumed: x.shape unpacked into three sizes at the top of a module's forward whose `x` the
    checks also give with another number of axes. Such code raises there (too few or too many values to unpack);
    on 3-d inputs it is the reference. A forward that itself unpacks x.shape this way gives no candidate (it would
    be the same code); one that no check calls with another rank is dropped as equivalent when probed."""
    for fn in nodes:
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn.name != "forward":
            continue
        params = [a.arg for a in fn.args.args if a.arg not in ("self", "cls")]
        if not params or params[0] not in _RANK or not fn.body:
            continue
        x, sizes = params[0], _RANK[params[0]]
        if any(isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Tuple) and _u(n.value) == f"{x}.shape"
               for n in ast.walk(fn)):
            continue
        unpack = ast.parse(f"{', '.join('_rank_' + s for s in sizes)} = {x}.shape").body[0]
        yield (nodes.index(fn),), (lambda f, unpack=unpack: _prepend(f, unpack)), "rank-fixed", \
            (f"`{ctx['exercise']}.forward` assumes a {len(sizes)}-d {x}: it unpacks {x}.shape into exactly "
             f"{len(sizes)} sizes (as {', '.join(sizes)} = {x}.shape does), so an {x} with more or fewer axes, "
             f"which the reference accepts, raises")


_COUNTING = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv)


def _counted(node: ast.AST) -> bool:
    """An integer count built of sizes: names, attributes (config.n_layer), integers and + - * // only."""
    if isinstance(node, ast.BinOp):
        return isinstance(node.op, _COUNTING) and _counted(node.left) and _counted(node.right)
    if isinstance(node, ast.Constant):
        return type(node.value) is int
    return isinstance(node, (ast.Name, ast.Attribute))


def op_quantity(nodes, parents, ctx) -> Iterator[Site]:
    """Two counts mixed up: a count computed from sizes (a product's, a sum's) replaced by another count computed
    before it in the same function, as code that counts every parameter where only the matrices' belong does. In
    a function without loops only: a cost's closed form."""
    for fn in (n for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        if any(isinstance(n, (ast.For, ast.While)) for n in ast.walk(fn)):
            continue  # (a tiled loop's sizes and offsets are the other families')
        counts = []  # the counts assigned so far, in order
        for stmt in ast.walk(fn):
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                    and isinstance(stmt.value, ast.BinOp) and _counted(stmt.value)):
                continue
            name = stmt.targets[0].id
            for other in counts:
                if other != name and other not in _names(stmt.value):
                    j = nodes.index(stmt.value)
                    yield (j,), (lambda n, other=other: ast.Name(other, ast.Load())), "quantity-swapped", \
                        (f"`{name}` takes the value of `{other}`, computed before it, in place of its own count, "
                         f"{_short(stmt.value, 30)}: the two quantities are mixed up")
            counts.append(name)


def op_kernel(nodes, parents, ctx) -> Iterator[Site]:
    """A Triton exercise that launches no kernel: `rms_norm_triton(x, w, eps)` returning `rms_norm(x, w, eps)`, the
    lesson's torch version of the same function (its name without `_triton`), before anything else runs."""
    fn = nodes[0] if nodes and isinstance(nodes[0], (ast.FunctionDef, ast.AsyncFunctionDef)) else None
    if fn is None or not fn.name.endswith("_triton") or not any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript) for n in nodes):
        return
    torch_version = fn.name.removesuffix("_triton")
    params = [a.arg for a in fn.args.args]
    call = ast.parse(f"return {torch_version}({', '.join(params)})").body[0]
    yield (0,), (lambda f, call=call: _prepend(f, call)), "kernel-bypassed", \
        (f"`{fn.name}` launches no Triton kernel: it returns {torch_version}({', '.join(params)}), computed by "
         f"torch, before any kernel runs")


def _prepend(fn: ast.FunctionDef, stmt: ast.stmt) -> ast.FunctionDef:
    doc = 1 if fn.body and isinstance(fn.body[0], ast.Expr) and isinstance(getattr(fn.body[0], "value", None),
                                                                           ast.Constant) else 0
    fn.body.insert(doc, copy.deepcopy(stmt))
    return fn


def _invert_first(call: ast.Call) -> ast.Call:
    method = isinstance(call.func, ast.Attribute) and not (isinstance(call.func.value, ast.Name)
                                                           and call.func.value.id in MODULES)
    pos = 0 if method or _call_name(call) == "where" else 1
    if len(call.args) <= pos:
        raise ValueError("no mask argument")
    m = call.args[pos]
    call.args[pos] = m.operand if isinstance(m, ast.UnaryOp) and isinstance(m.op, ast.Invert) else \
        ast.UnaryOp(ast.Invert(), m)
    return call




def op_neginf(nodes, parents, ctx) -> Iterator[Site]:
    for i, node in enumerate(nodes):
        if not _is_neginf(node):
            continue
        what = _target_of(nodes, parents, node)
        parent = parents.get(id(node), (None,))[0]
        if isinstance(parent, ast.Call) and _call_name(parent) in ("full", "full_like", "new_full", "fill_"):
            # a starting value (a running max before any score is seen), not entries removed by a mask
            yield (i,), (lambda n: _const(-1e9)), "neginf-finite", \
                f"{what} starts at -1e9, not -inf: a finite start, which values below it never replace"
            yield (i,), (lambda n: ast.Constant(0.0)), "neginf-zero", \
                f"{what} starts at 0, not -inf: a start of 0 is an ordinary value, which values below 0 never replace"
            continue
        if isinstance(parent, ast.Compare):  # a test for -inf (a row that has seen nothing yet), not a fill
            yield (i,), (lambda n: _const(-1e9)), "neginf-finite", f"{what} tests for -1e9 where it should test for -inf"
            yield (i,), (lambda n: ast.Constant(0.0)), "neginf-zero", f"{what} tests for 0 where it should test for -inf"
            continue
        yield (i,), (lambda n: _const(-1e9)), "neginf-finite", \
            (f"the removed entries of {what} are set to -1e9, not -inf: a finite value, which still counts "
             f"where a whole row is removed or the other entries are as large")
        yield (i,), (lambda n: ast.Constant(0.0)), "neginf-zero", \
            f"the removed entries of {what} are set to 0, not -inf: 0 is an ordinary score, so they still get weight"


def op_default(nodes, parents, ctx) -> Iterator[Site]:
    defs = [n for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for fn in defs:
        args = fn.args.args + fn.args.kwonlyargs
        defaults = [None] * (len(fn.args.args) - len(fn.args.defaults)) + list(fn.args.defaults) + list(fn.args.kw_defaults)
        body_nodes = {id(n) for stmt in fn.body for n in ast.walk(stmt)}
        for arg, default in zip(args, defaults):
            if default is None or not isinstance(default, (ast.Constant, ast.UnaryOp, ast.Attribute)):
                continue
            uses = [i for i, n in enumerate(nodes) if id(n) in body_nodes and isinstance(n, ast.Name)
                    and n.id == arg.arg and isinstance(n.ctx, ast.Load)]
            if not uses:
                continue
            d = _short(default, 20)
            value = lambda n, default=default: copy.deepcopy(default)  # noqa: E731
            where = f"`{fn.name}`" if fn.name not in ("__init__", "forward") else f"`{ctx['exercise']}`"
            yield tuple(uses), value, "default-ignored", \
                f"{where} ignores the argument `{arg.arg}`: it always uses the default, {d}"
            if len(uses) > 1 and not (isinstance(default, ast.Constant) and default.value is None):
                for j in uses:
                    if _is_none_test(parents, nodes[j]):
                        continue
                    what = _target_of(nodes, parents, nodes[j])
                    yield (j,), value, "default-ignored-once", \
                        f"{what} uses the default {arg.arg}={d} instead of the `{arg.arg}` it was given"


def _is_none_test(parents, node) -> bool:
    parent = parents.get(id(node), (None,))[0]
    return isinstance(parent, ast.Compare) and any(isinstance(o, (ast.Is, ast.IsNot)) for o in parent.ops)


def op_finite_unguarded(nodes, parents, ctx) -> Iterator[Site]:
    """-inf → -1e9 where a mask removes scores that a softmax reads later, with every fill by another mask
    of the same code left out: a finite fill never meets a row of -inf only, so the code written with one has
    no special case for a row with nothing left (what a student who fills with -1e9 writes)."""
    fills = [i for i, n in enumerate(nodes) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr == "masked_fill" and len(n.args) == 2]
    softmaxes = [n.lineno for n in nodes if isinstance(n, ast.Call) and _call_name(n) in ("softmax", "log_softmax")]
    for i in fills:
        node = nodes[i]
        if not _is_neginf(node.args[1]) or not any(line > node.lineno for line in softmaxes):
            continue
        mask = _u(node.args[0])
        others = [j for j in fills if _u(nodes[j].args[0]) != mask]
        if not others:
            continue
        what = _target_of(nodes, parents, node)
        names = ", ".join(dict.fromkeys(_short(nodes[j].args[0], 16) for j in others))
        yield (i, *others), (lambda c, mask=mask: _finite_fill(c) if _u(c.args[0]) == mask else c.func.value), \
            "neginf-finite-unguarded", \
            (f"the entries of {what} that {_short(node.args[0], 16)} removes are set to -1e9, not -inf, and the "
             f"masked_fill by {names} is left out everywhere: a row with every entry removed then gets equal weights "
             f"(the average of all values), not what that fill gave it")


def _finite_fill(call: ast.Call) -> ast.Call:
    call.args[1] = _const(-1e9)
    return call


OPERATORS: tuple[Callable, ...] = (op_scale, op_axis, op_diagonal, op_comparison, op_slice, op_sign, op_arguments,
                                   op_cast, op_variance, op_eps, op_residual, op_repeat, op_mask, op_neginf,
                                   op_default, op_nomask, op_rank, op_kernel, op_quantity)
OPERATORS += _module.MODULE_OPERATORS  # lessons 06-10's families (mutations_module.py)

# Per operator family: where `course hint` sends a student whose code a mutant of that family reproduced
# (kinds.py `hint_for`, as `mutation:<family>`). What to look at, never the fix: a hint names no line of any
# solution (tests/lessons/test_hints.py).
FAMILY_HINTS: dict[str, str] = {
    "scale": "Find every place a scale enters your computation. Write down the factor you apply and the one the "
             "text asks for: which size goes under the root, and is it applied exactly once?",
    "axis": "For each sum, mean, max or softmax, name the axis it runs over (batch, heads, queries, keys, "
            "features) and check it against the axis the text names. Does the result keep that axis?",
    "diagonal": "Draw the mask for a 4×4 case by hand and print yours beside it: is the diagonal itself kept or "
                "dropped, and is the kept triangle the lower or the upper one?",
    "comparison": "Try the boundary case: a position exactly at the limit. Should it be kept or dropped, and "
                  "which comparison does that need?",
    "slice": "Print the indices your slice keeps for a small case: is the first or the last one off by one?",
    "sign": "Check the sign of each term: is something subtracted the wrong way round, or a minus lost?",
    "arguments": "Read the order of the arguments in each call against its signature: which one comes first?",
    "cast": "Print `.dtype` after each step on float16 inputs: where should the computation be in float32, "
            "and where does it go back to the input's dtype?",
    "variance": "Which variance does the text ask for: divided by n, or by n − 1?",
    "eps": "Where does eps go: inside the square root, or added after it? Try an input near zero.",
    "residual": "Follow the input through the layer: is it added back to what the sub-layer returns?",
    "repeat": "Print which head each output head copies for a small case: should copies sit side by side "
              "(0, 0, 1, 1) or cycle (0, 1, 0, 1)?",
    "mask": "Which value of the mask means 'may attend'? Check that the positions you fill are the ones that "
            "must get no weight.",
    "neginf": "What must a masked score become so that its weight after the softmax is exactly 0?",
    "quantity": "List each count your code computes and say in words what it counts: is each used where the text "
                "needs that count, and not another one?",
    "kernel": "Does a Triton kernel run when your function is called? Follow each call from your function's "
              "first line: which one launches `kernel[grid](...)`, and is the output what that kernel wrote?",
    "rank": "Call your code on an input with another number of leading axes, (N, D) or (B, H, T, D): does "
            "any line assume exactly three?",
    "nomask": "Follow your mask from where it is built to every attention call: does each call receive it? "
              "Change the last token of an input and check whether the outputs at earlier positions move.",
    "default": "Call your code with a non-default value of each optional argument: is it used, or silently "
               "replaced?",
}
FAMILY_HINTS.update(_module.MODULE_HINTS)


OPERATORS += (op_finite_unguarded,)  # (after the module families: a second turn of the neginf family)
op_finite_unguarded.families = ("neginf",)
OPERATORS += _shape.OPERATORS  # layouts, layers (01-05)
for _family, _text in _shape.HINTS.items():
    FAMILY_HINTS.setdefault(_family, _text)

# ----------------------------------------------------------------------------------------------
# The candidates of one exercise


def helpers(nodes, parents, exercise: str) -> list[ast.AST]:
    """The definitions of the exercise's own cell that it hands work to, in the order it first names them: an
    autograd Function it `.apply`s, a kernel it launches (`kernel[grid](...)`), a class it returns an instance
    of, a function of the cell it calls."""
    module = parents.get(id(nodes[0]), (None,))[0] if nodes else None
    if not isinstance(module, ast.Module):
        return []
    defs = {n.name: n for n in module.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n is not nodes[0]
            and n.name != exercise}
    out = []
    for n in nodes:
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        if isinstance(f, ast.Attribute) and f.attr == "apply" and isinstance(f.value, ast.Name):
            name = f.value.id
        elif isinstance(f, ast.Subscript) and isinstance(f.value, ast.Name):  # a Triton kernel launched on a grid
            name = f.value.id
        elif isinstance(f, ast.Name) and (isinstance(defs.get(f.id), ast.FunctionDef)
                                          or isinstance(parents.get(id(n), (None,))[0], ast.Return)):
            name = f.id
        else:
            continue
        if name in defs and defs[name] not in out:
            out.append(defs[name])
    return out


def parts(nodes, parents, exercise: str) -> list[ast.AST]:
    """The classes of the exercise's own cell that it builds, and those they build, in turn (a model's block, the
    block's attention): where an operator with `into_parts` also looks. In the order first named."""
    module = parents.get(id(nodes[0]), (None,))[0] if nodes else None
    if not isinstance(module, ast.Module):
        return []
    defs = {n.name: n for n in module.body if isinstance(n, ast.ClassDef) and n is not nodes[0] and n.name != exercise}
    out, todo = [], [nodes]
    while todo:
        for n in todo.pop(0):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in defs \
                    and defs[n.func.id] not in out:
                out.append(defs[n.func.id])
                todo.append(list(ast.walk(defs[n.func.id])))
    return out


def _helper_sites(op, helper: ast.AST, parents, exercise: str) -> list[Site]:
    """`op`'s sites inside `helper`, each as a change of the exercise's own definition: the mutant redefines the
    helper, changed, right before the exercise (so the exercise calls the changed copy); each variant at every
    place before the next variant."""
    h_nodes = list(ast.walk(helper))
    sites = [s for s in op(h_nodes, parents, {"exercise": helper.name}) if 0 not in s[0]]
    order = list(dict.fromkeys(s[2] for s in sites))
    return [((0,), (lambda d, indices=indices, build=build: _redefined(helper, indices, build, d)), operator,
             f"in `{helper.name}` (or wherever your `{exercise}` does that work): {sentence}")
            for indices, build, operator, sentence in sorted(sites, key=lambda s: order.index(s[2]))]


def _redefined(helper: ast.AST, indices, build, exercise_def: ast.AST) -> ast.If:
    twin = copy.deepcopy(helper)
    nodes = list(ast.walk(twin))
    parents = _parents(twin)
    for i in indices:
        _replace(parents, nodes[i], build(nodes[i]))
    return ast.If(ast.Constant(True), [twin, exercise_def], [])


# The families that run inside a Triton kernel the exercise launches: those that change values only (an upcast, eps,
# a scale, a statistic, a running max's rescaling, a fill value, an activation). A change of a mask, an offset or a
# pointer's arithmetic reads or writes out of bounds under the interpreter, and can corrupt the child's memory.
KERNEL_FAMILIES = {"cast", "eps", "scale", "variance", "statistic", "online", "neginf", "activation"}


# The families whose changes may run in an exercise that launches a Triton kernel itself (`kernel[grid](...)`): the
# values-only ones, an optional argument's default, the kernel bypassed and an input's rank assumed (both before any
# launch). A size, an argument's order or a buffer changed there hands the kernel memory it reads or writes out of
# bounds (under the interpreter, the child's own heap).
AT_LAUNCH_FAMILIES = KERNEL_FAMILIES | {"default", "kernel", "rank"}


def _kernel(helper: ast.AST) -> bool:
    """Is this definition a Triton kernel (decorated with `triton.jit` or `jit`)?"""
    return any(_u(d).split("(")[0] in ("triton.jit", "jit") for d in getattr(helper, "decorator_list", []))


def _queues(tree: ast.Module, exercise: str, operators) -> list[list[Site]]:
    """Per operator, its sites: in the exercise's own definition first, then in each helper it hands work to."""
    nodes = _scope(tree, exercise)
    parents = _parents(tree)
    ctx = {"exercise": exercise}
    around = helpers(nodes, parents, exercise)
    built = [p for p in parts(nodes, parents, exercise) if p not in around]
    launches = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript) for n in nodes)
    queues = []
    for op in operators:
        q: list[Site] = []
        families = set(getattr(op, "families", (op.__name__.removeprefix("op_"),)))
        values_only = families <= KERNEL_FAMILIES
        reach = around + (built if getattr(op, "into_parts", False) else [])
        own = [] if launches and not families <= AT_LAUNCH_FAMILIES else [lambda: op(nodes, parents, ctx)]
        for sites in (*own, *(lambda h=h: _helper_sites(op, h, parents, exercise)
                              for h in reach if values_only or not _kernel(h))):
            try:
                q += list(sites())
            except (ValueError, TypeError, AttributeError, IndexError):
                pass
        queues.append(q)
    return queues


def mutants(source: str, exercise: str, cap: int = CAP, operators=OPERATORS) -> list[Mutant]:
    """The candidate mutants of `exercise` in `source` (its solved defining cell): each a compilable source that
    differs from the original and from every earlier candidate, in a fixed order (round-robin over the
    operators, so a cap keeps every family; each operator's sites in the exercise itself before those in
    its helpers), at most `cap`."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    original = ast.unparse(tree)
    if not _scope(tree, exercise):
        return []
    queues = _queues(tree, exercise, operators)
    out, seen = [], {original}
    while any(queues) and len(out) < cap:
        for q in queues:
            while q:
                site = q.pop(0)
                src = _apply(tree, exercise, site)
                if src is None or src.strip() in seen:
                    continue
                seen.add(src.strip())
                alternative = None
                if len(site) > 4:
                    alt_build, alt_operator, alt_sentence = site[4]
                    alt_src = _apply(tree, exercise, (site[0], alt_build))
                    alternative = (alt_src, alt_operator, alt_sentence) if alt_src is not None else None
                out.append(Mutant(src, site[2], site[3], alternative))
                break
            if len(out) >= cap:
                break
    return out


def fired(source: str, exercise: str, operators=OPERATORS) -> dict[str, int]:
    """How many sites each operator finds in `exercise` and the helpers it hands work to (for
    benchmarks/mutation_coverage.py)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    counts = {}
    for op, q in zip(operators, _queues(tree, exercise, operators)):
        if q:
            counts[op.__name__.removeprefix("op_")] = len(q)
    return counts


# ----------------------------------------------------------------------------------------------
# Running the candidates (the reference child only, and the in-process tests: trusted code)

BUDGET_S = 2.0  # seconds of probing per exercise; the candidates left when it runs out are skipped, and counted
PREFIX = "mutant:"


def key(exercise: str, n: int) -> str:
    """The mutant's key beside the catalogued mistakes' ids in a reference's observations."""
    return f"{PREFIX}{exercise}:{n:03d}"


def exercise_of(k: str) -> str | None:
    """The exercise of a mutant's key (`key`'s inverse), None for any other key."""
    if not (isinstance(k, str) and k.startswith(PREFIX)):
        return None
    exercise, _, n = k.removeprefix(PREFIX).rpartition(":")
    return exercise if exercise and n.isdigit() else None


def entries(observations: dict, exercise: str) -> dict:
    """The mutants of `exercise` among a reference's mistake observations, in their candidates' order."""
    head = f"{PREFIX}{exercise}:"
    return {k: observations[k] for k in sorted(observations) if isinstance(k, str) and k.startswith(head)}


def probe_mutants(module, ns: dict, exercise: str, configs, reference: dict, only_public: bool = False,
                  hidden_seed: int | None = None, budget: float = BUDGET_S, cap: int = CAP, alarm=None,
                  source: str | None = None, start: int = 0, on_candidate=None, on_kept=None, only=None,
                  screen=None, on_screened=None) -> tuple[dict, dict]:
    """Probe `exercise`'s mutants in copies of the solved namespace `ns` on the checks' own inputs (the
    same seeds as the student's). Returns ({key: observations with a "mutant" record}, counts): a mutant
    that fails no check the reference passes is dropped (equivalent, for these checks), and of mutants with
    identical observations the first is kept. `alarm(seconds)`: a context manager raising ExerciseTimeout
    (the child's), bounding each candidate by what is left of `budget`. `start`: the first candidate probed (a
    follow-up goes on where the reference child's budget ran out; counts["next"] is where the next would);
    `on_candidate(key, counts)` before each and `on_kept(key, observations)` after each kept one (the child
    records them as it goes: a candidate that kills the process, a Triton kernel writing out of bounds under the
    interpreter, costs only the candidates after it).

    A follow-up on a student's failing check passes `only` (the candidates to probe, in order) and `screen`
    ((check key, the student's observation there), or None): each candidate first runs that one check, and
    `on_screened(key, {check key: its observation})` records it; one that check rules out
    (diagnosis.rules_out: it cannot be the student's mistake, whatever its other checks give) is counted
    "screened" and goes no further. The rest run the whole battery as above. counts["probed"]: the candidates
    that ran the whole battery (or broke)."""
    import contextlib
    import time

    from . import probe as _probe
    from .checks import CHECKS_OF
    from .mistakes import solved_cell

    started = time.perf_counter()
    counts = {"candidates": 0, "tried": 0, "kept": 0, "equivalent": 0, "merged": 0, "broken": 0, "skipped": 0,
              "start": start, "screened": 0, "probed": []}
    try:
        source = source if source is not None else solved_cell(CHECKS_OF(module).lesson, exercise)
    except (LookupError, OSError):
        return {}, counts
    cands = mutants(source, exercise, cap)
    counts["candidates"] = len(cands)
    checks = [(c, cfg) for c in CHECKS_OF(module).of(exercise) for cfg in c.configs if cfg in configs
              and not (only_public and c.hidden)]
    kept: dict = {}
    screening = _screening(checks, screen, reference)
    order = [n for n in (only if only is not None else range(start, len(cands))) if 0 <= n < len(cands)]
    for i, n in enumerate(order):
        m = cands[n]
        left = budget - (time.perf_counter() - started)
        if left <= 0:
            counts["skipped"] = len(order) - i
            break
        if on_candidate is not None:
            on_candidate(key(exercise, n), counts)
        name = f"<mutant {exercise} {n}>"
        _probe.register_source(name, m.source)  # triton reads a kernel's source
        try:
            with (alarm(left) if alarm else contextlib.nullcontext()):
                if screening is not None:
                    s_key, ruled_out = screening
                    m_ns = dict(ns)
                    exec(compile(m.source, name, "exec", dont_inherit=True), m_ns)
                    seen = _probe.probe_exercise(module, m_ns, exercise, configs, only_public, hidden_seed,
                                                 keys={s_key})["checks"]
                    if on_screened is not None and s_key in seen:
                        on_screened(key(exercise, n), {s_key: seen[s_key]})
                    if ruled_out(seen.get(s_key)):
                        counts["screened"] += 1
                        continue
                m_ns = dict(ns)  # (afresh: the screen's run may have left state in the namespace)
                exec(compile(m.source, name, "exec", dont_inherit=True), m_ns)
                obs = _probe.probe_exercise(module, m_ns, exercise, configs, only_public, hidden_seed)
        except _probe.ExerciseTimeout:
            if budget == float("inf"):  # by count (a follow-up): a candidate past the exercise limit is broken
                counts["broken"] += 1
                counts["probed"].append(n)
                continue
            counts["skipped"] = len(order) - i
            break
        except Exception:  # noqa: BLE001 - a mutant whose cell does not run is no candidate
            counts["broken"] += 1
            counts["probed"].append(n)
            continue
        counts["probed"].append(n)
        counts["tried"] += 1
        if not _shows(checks, obs, reference):
            counts["equivalent"] += 1
            continue
        twin = next((k for k, other in kept.items() if _identical(obs["checks"], other["checks"])), None)
        if twin is not None:  # the same observations as a kept one: its sentence must not be the only one said
            counts["merged"] += 1
            if add_alias(kept[twin]["mutant"], m.operator, m.sentence, n) and on_kept is not None:
                on_kept(twin, kept[twin])  # (recorded again, with the alias)
            continue
        obs["mutant"] = {"exercise": exercise, "operator": m.operator, "sentence": m.sentence, "n": n}
        if m.alternative is not None:
            left = budget - (time.perf_counter() - started)
            try:
                with (alarm(max(left, 0.001)) if alarm else contextlib.nullcontext()):
                    same = _same_as(module, ns, exercise, configs, only_public, hidden_seed, obs, m.alternative[0],
                                    f"{name} (wider)")
            except _probe.ExerciseTimeout:
                same = False  # (the candidate's own sentence stands)
            if same:
                obs["mutant"].update(operator=m.alternative[1], sentence=m.alternative[2])
        kept[key(exercise, n)] = obs
        counts["kept"] = len(kept)
        if on_kept is not None:
            on_kept(key(exercise, n), obs)
    counts["kept"] = len(kept)
    if only is None:
        counts["next"] = len(cands) - counts["skipped"]
    else:  # (the candidates before it were all considered only when `only` lists them: the caller's to say)
        counts["next"] = order[len(order) - counts["skipped"]] if counts["skipped"] else max(order, default=-1) + 1
    counts["seconds"] = round(time.perf_counter() - started, 3)
    return kept, counts


def add_alias(mutant: dict, operator: str, sentence: str, n: int | None = None) -> bool:
    """Record on a kept mutant's record (`"also"`) another candidate's change (candidate `n`) that gave the same
    observations on every check: the checks cannot tell the two apart, so a diagnosis that names the one names
    the other too (diagnosis.py `_Reproduced`, in the candidates' order, whichever was found first: a follow-up
    may find the earlier one after the later). False when it adds nothing (the same sentence said already)."""
    also = mutant.setdefault("also", [])
    if sentence == mutant.get("sentence") or any(a.get("sentence") == sentence for a in also):
        return False
    also.append({"operator": operator, "sentence": sentence, "n": n})
    return True


def _same_as(module, ns: dict, exercise: str, configs, only_public, hidden_seed, obs: dict, source: str,
             name: str) -> bool:
    """Does `source` (a candidate's wider alternative) give the same observations as the candidate's `obs`?"""
    from . import probe as _probe

    _probe.register_source(name, source)
    a_ns = dict(ns)
    try:
        exec(compile(source, name, "exec", dont_inherit=True), a_ns)
        other = _probe.probe_exercise(module, a_ns, exercise, configs, only_public, hidden_seed)
    except Exception:  # noqa: BLE001 - an alternative that does not run tells nothing: the candidate's sentence
        return False
    return _identical(obs["checks"], other["checks"])


def _screening(checks, screen, reference: dict):
    """(check key, rule) for probe_mutants's `screen`: rule(observation) is True when a candidate's observation
    on that check rules it out (diagnosis.rules_out against the student's); None without a screen, or when the
    check is not among those probed here."""
    from .diagnosis import rules_out

    if not screen:
        return None
    s_key, s_obs = screen
    found = [(c, cfg) for c, cfg in checks if c.key(cfg) == s_key]
    if not found:
        return None
    (check, config), r_obs = found[0], reference.get("checks", {}).get(s_key, {})
    return s_key, lambda m_obs: rules_out(check, config, s_obs, m_obs, r_obs)


def _shows(checks, obs: dict, reference: dict) -> bool:
    """Does the mutant fail a check here (its judge's verdict, or an error), or change its inputs?"""
    from .diagnosis import _mistake_fails

    if obs.get("missing") or sorted(obs.get("mutated", [])) != sorted(reference.get("mutated", [])):
        return True
    r_checks = reference.get("checks", {})
    for check, config in checks:
        m_obs = obs["checks"].get(check.key(config))
        if not isinstance(m_obs, dict) or "__inapplicable__" in m_obs:
            continue
        if _mistake_fails(check, config, m_obs, r_checks.get(check.key(config), {})):
            return True
    return False


def _identical(a, b) -> bool:
    import torch

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and \
            a.dtype == b.dtype and bool(torch.equal(a, b) or (a.is_floating_point() and torch.equal(a.nan_to_num(7.25), b.nan_to_num(7.25))))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_identical(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_identical(x, y) for x, y in zip(a, b))
    return a == b
