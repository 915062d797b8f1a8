"""Mutation operators for modules and decoding (lessons 06-10): a forward pass's order, RoPE's layout, an online softmax.

The families mutations.py registers beside its own (`MODULE_OPERATORS`, `MODULE_HINTS`); each yields sites
exactly as mutations.py's operators do (indices into the exercise's scope, a builder, an operator id, a
sentence about the concept in the code's own names, never the reference's line):

  branch      an `if` on a flag never or always taken; a clause of an `and` test dropped; a conditional
              expression that always gives one of its two values
  keyword     a keyword argument dropped (the callee's default), all of a call's, or the same one from every
              call of that function
  call        an argument left out of a call (its default used); the one after it passed by name
  activation  the gate's activation moved to the other factor of a product; one activation for another
  norm        pre-norm ↔ post-norm (the norm of the sublayer's input moved around the residual sum), the
              stream itself normalised, a norm dropped or applied twice
  dropout     a dropout module replaced by functional dropout (on in eval mode too); dropout over the sum,
              the residual included
  term        a term of a sum left out; every residual connection dropped at once
  offset      an offset `a - b` left at 0 or left out; positions from 0 instead of from their start
  rope        sin ↔ cos; the interleaved ↔ half-split pairing; the frequency exponent counting i, not 2i;
              the positions argument ignored; the rotation applied to one more tensor
  ratio       a / b → b / a; a division by a factor made a multiplication
  online      an online softmax's running sum or accumulator not rescaled; the guard for an all -inf row
              dropped
  step        one statement of the exercise missing (a call, a loop, an `if` block, a self-update)
  window      the first n positions kept instead of the last n
  topk        one more value than k taken
  rounding    a rounding up ((a + b − 1) // b) made a rounding down
  reduction   one reduction for another (max ↔ sum ↔ mean); an exclusive cumulative sum made inclusive
  factor      an integer factor of a count halved or dropped
  order       a built result reversed along its first axis; a sort skipped
  gqa         the KV heads tiled instead of repeated in place
  copy        a parameter rebound with .data = instead of filled in place with copy_
  tie         a tied weight made a copy of the values (at the end of __init__)
  softmax     a division of the logits (a temperature) moved after the softmax
  size        a size read from the start of .shape instead of from its end

Every family also runs inside the definitions of the cell the exercise hands its work to (mutations.py
`helpers`). Pure `ast`; no torch here. mutations.py imports this module to build its OPERATORS; the helpers shared with
it live in mutation_ast.py (reached through `_m()`), so neither module imports the other both ways.
"""

from __future__ import annotations

import ast
import copy
import re
from typing import Iterator

from . import mutation_ast

ACTIVATIONS = ("silu", "gelu", "relu", "sigmoid", "tanh")
_NORM = re.compile(r"(^|_)(ln|norm)|norm$|layernorm", re.I)
_NO_DROP = {"range", "len", "min", "max", "isinstance", "getattr", "setattr", "hasattr", "zip", "enumerate",
            "print", "int", "float", "str", "tuple", "list", "dict", "super", "type", "round", "abs", "sum",
            # a shape's or an order's axis left out is an error at once (the sizes no longer multiply out), no answer
            "reshape", "view", "permute", "expand", "transpose"}


def _m():
    """The ast helpers shared with mutations.py (graders/engine/mutation_ast.py)."""
    return mutation_ast


def _u(node) -> str:
    return ast.unparse(node)


def _s(node, n: int = 30) -> str:
    return _m()._short(node, n)


def _what(nodes, parents, node) -> str:
    return _m()._target_of(nodes, parents, node)


def _in(nodes, parents, node) -> str:
    """" in `x`" for the statement that computes `x`; "" for a call that is a statement of its own."""
    if isinstance(parents.get(id(node), (None,))[0], ast.Expr):
        return ""
    return f" in {_what(nodes, parents, node)}"


def _fname(call: ast.Call) -> str:
    return _m()._call_name(call)


def _full(call: ast.Call) -> str:
    return _s(call.func, 40)


def _index(nodes, node) -> int | None:
    for i, n in enumerate(nodes):
        if n is node:
            return i
    return None


def _call(obj: ast.AST, attr: str, args=(), keywords=()) -> ast.Call:
    return ast.Call(ast.Attribute(obj, attr, ast.Load()), list(args), list(keywords))


def _torch(attr: str) -> ast.AST:
    return ast.Attribute(ast.Name("torch", ast.Load()), attr, ast.Load())


def _is_module_call(call: ast.Call) -> bool:
    f = call.func
    return isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in _m().MODULES


# ----------------------------------------------------------------------------------------------
# branch: a condition


def _flag(test: ast.AST) -> bool:
    return isinstance(test, (ast.Name, ast.Attribute)) or (
        isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and isinstance(test.operand, (ast.Name, ast.Attribute)))


def op_branch(nodes, parents, ctx) -> Iterator[Site]:
    M = _m()
    ifs = [(i, n) for i, n in enumerate(nodes) if isinstance(n, ast.If) and not any(isinstance(s, ast.Raise) for s in n.body)]
    for i, node in sorted(ifs, key=lambda p: not _flag(p[1].test)):
        t = _s(node.test, 40)
        if _flag(node.test):
            other = "what its `else` does" if node.orelse else "nothing in its place"
            yield (i,), (lambda n: _with_test(n, False)), "branch-never", \
                f"the block under `if {t}:` never runs ({other}), whatever {t} is"
            yield (i,), (lambda n: _with_test(n, True)), "branch-always", \
                f"the block under `if {t}:` runs even when {t} is false"
        if isinstance(node.test, ast.BoolOp) and isinstance(node.test.op, ast.And):
            for k, clause in enumerate(node.test.values):
                yield (i,), (lambda n, k=k: _drop_clause(n, k)), "branch-clause-dropped", \
                    f"the test `{t}` leaves out `{_s(clause, 30)}`: the block also runs where that is false"
    for i, node in enumerate(nodes):
        if isinstance(node, ast.IfExp) and not M._in_raise_guard(parents, node):
            what = _what(nodes, parents, node)
            t, a, b = _s(node.test, 30), _s(node.body, 24), _s(node.orelse, 24)
            yield (i,), (lambda n: n.orelse), "branch-ifexp-else", \
                f"{what} is always {b}: the case `{t}`, where it is {a}, is missed"
            yield (i,), (lambda n: n.body), "branch-ifexp-body", \
                f"{what} is always {a}, even where `{t}` is false and it should be {b}"


def _with_test(node: ast.If, value: bool) -> ast.If:
    node.test = ast.Constant(value)
    return node


def _drop_clause(node: ast.If, k: int) -> ast.If:
    rest = [v for j, v in enumerate(node.test.values) if j != k]
    node.test = rest[0] if len(rest) == 1 else ast.BoolOp(ast.And(), rest)
    return node


# ----------------------------------------------------------------------------------------------
# keyword, call: an argument the callee then takes by default

_KW_SKIP = {"dim", "axis", "keepdim"}  # mutations.py's axis family


def op_keyword(nodes, parents, ctx) -> Iterator[Site]:
    calls = [(i, n) for i, n in enumerate(nodes) if isinstance(n, ast.Call) and n.keywords]
    groups: dict[tuple[str, str, str], list[int]] = {}
    for i, node in calls:
        for kw in node.keywords:
            if kw.arg and kw.arg not in _KW_SKIP and not _zeroish(kw.value):
                groups.setdefault((_full(node), kw.arg, _u(kw.value)), []).append(i)
    for (f, arg, value), js in groups.items():
        if len(js) > 1:
            yield tuple(js), (lambda n, arg=arg: _m()._without_kw(n, arg)), "keyword-dropped-everywhere", \
                f"every `{f}` is called without {arg}={_short_text(value)}: each gets {arg}'s default"
    for i, node in calls:
        where = _in(nodes, parents, node)
        kws = [kw for kw in node.keywords if kw.arg and kw.arg not in _KW_SKIP]
        for kw in kws:
            if _zeroish(kw.value):
                continue
            yield (i,), (lambda n, arg=kw.arg: _m()._without_kw(n, arg)), "keyword-dropped", \
                f"`{_full(node)}`{where} is called without {kw.arg}={_s(kw.value, 24)}: it gets the default"
        if len(kws) > 1:
            names = ", ".join(kw.arg for kw in kws)
            yield (i,), (lambda n: _without_kws(n)), "keyword-all-dropped", \
                f"`{_full(node)}`{where} is called without {names}: it gets their defaults"


def _zeroish(value) -> bool:
    """None or a zero: most often the callee's own default, so leaving it out changes nothing."""
    return isinstance(value, ast.Constant) and (value.value is None or (type(value.value) in (int, float)
                                                                        and value.value == 0))


def _short_text(text: str, n: int = 24) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _without_kws(call: ast.Call) -> ast.Call:
    call.keywords = [k for k in call.keywords if k.arg is None or k.arg in _KW_SKIP]
    return call


def op_call(nodes, parents, ctx) -> Iterator[Site]:
    for i, node in enumerate(nodes):
        if not isinstance(node, ast.Call) or _is_module_call(node) or _fname(node) in _NO_DROP:
            continue
        args = node.args
        if len(args) < 2 or any(isinstance(a, ast.Starred) for a in args):
            continue
        what = _in(nodes, parents, node)
        last = args[-1]
        if isinstance(last, (ast.Name, ast.Attribute)):
            yield (i,), (lambda n: (n.args.pop(), n)[1]), "call-argument-dropped", \
                f"`{_full(node)}`{what} is called without `{_s(last, 24)}`: it falls back to its default"
        for k in range(1, len(args) - 1):
            after = args[k + 1:]
            if all(isinstance(a, ast.Name) for a in after) and isinstance(args[k], (ast.Name, ast.Attribute)):
                yield (i,), (lambda n, k=k: _drop_positional(n, k)), "call-argument-dropped", \
                    f"`{_full(node)}`{what} is called without `{_s(args[k], 24)}`: it gets the default"


def _drop_positional(call: ast.Call, k: int) -> ast.Call:
    after = call.args[k + 1:]
    call.args = call.args[:k]
    call.keywords = [ast.keyword(a.id, ast.Name(a.id, ast.Load())) for a in after] + call.keywords
    return call


# ----------------------------------------------------------------------------------------------
# activation


def _activation(node) -> str | None:
    if isinstance(node, ast.Call) and _fname(node) in ACTIVATIONS and len(node.args) == 1:
        return _fname(node)
    return None


def op_activation(nodes, parents, ctx) -> Iterator[Site]:
    for i, node in enumerate(nodes):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            for side, other in (("left", "right"), ("right", "left")):
                act = _activation(getattr(node, side))
                if act and not _activation(getattr(node, other)):
                    inner, b = getattr(node, side).args[0], getattr(node, other)
                    what = _what(nodes, parents, node)
                    yield (i,), (lambda n, side=side, other=other: _move_act(n, side, other)), "activation-moved", \
                        f"in {what}, {act} is applied to {_s(b, 24)} instead of {_s(inner, 24)}: the gate is the " \
                        f"other factor"
        act = _activation(node)
        if act:
            what = _what(nodes, parents, node)
            for new in {"gelu": ("relu", "silu"), "silu": ("relu", "gelu"), "relu": ("gelu",)}.get(act, ()):
                yield (i,), (lambda n, new=new: _swap_act(n, new)), "activation-swapped", \
                    f"{what} uses {new} where the text asks for {act}"
            yield (i,), (lambda n: n.args[0]), "activation-dropped", f"{what} leaves out the {act}: it is linear"


def _move_act(node: ast.BinOp, side: str, other: str) -> ast.BinOp:
    act = getattr(node, side)
    inner = act.args[0]
    act.args[0] = getattr(node, other)
    setattr(node, side, inner)
    setattr(node, other, act)
    return node


def _swap_act(call: ast.Call, new: str) -> ast.Call:
    call.keywords = []  # gelu's approximate= has no meaning for the others
    return _m()._rename_call(call, new)


# ----------------------------------------------------------------------------------------------
# norm: where the normalisation sits in a residual block


def _norm_call(node, x: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and bool(_NORM.search(node.func.attr)) \
        and len(node.args) == 1 and isinstance(node.args[0], ast.Name) and node.args[0].id == x and not node.keywords


def _residual_sites(nodes):
    """(index, the Add node, x, the norm call inside the branch) for every `x + f(…norm(x)…)`."""
    for i, node in enumerate(nodes):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and isinstance(node.left, ast.Name):
            x = node.left.id
            inner = [n for n in ast.walk(node.right) if _norm_call(n, x)]
            if len(inner) == 1:
                yield i, node, x, inner[0]


def _strip_norm(tree: ast.AST, x: str) -> ast.AST:
    """`tree` with its one norm(x) replaced by x."""
    class T(ast.NodeTransformer):
        def visit_Call(self, n):
            self.generic_visit(n)
            return ast.Name(x, ast.Load()) if _norm_call(n, x) else n
    return T().visit(tree)


def _post(node: ast.BinOp) -> ast.AST:
    x = node.left.id
    norm = next(n for n in ast.walk(node.right) if _norm_call(n, x))
    func = copy.deepcopy(norm.func)
    return ast.Call(func, [ast.BinOp(node.left, ast.Add(), _strip_norm(node.right, x))], [])


def _stream(node: ast.BinOp) -> ast.BinOp:
    x = node.left.id
    norm = next(n for n in ast.walk(node.right) if _norm_call(n, x))
    node.left = copy.deepcopy(norm)
    return node


def op_norm(nodes, parents, ctx) -> Iterator[Site]:
    sites = list(_residual_sites(nodes))
    if len(sites) > 1:
        js = tuple(i for i, *_ in sites)
        yield js, _post, "norm-post-all", \
            "each norm is applied after the residual add (post-norm), to the sum, not to the sublayer's input " \
            "(pre-norm)"
        yield js, _stream, "norm-stream-all", \
            "the residual stream itself is normalised before each sublayer: the sublayer's output is added to " \
            "the normalised stream, not to the stream"
    for i, node, x, norm in sites:
        what = _what(nodes, parents, node)
        n = _u(norm.func)
        yield (i,), _post, "norm-post", \
            f"{n} normalises the sum {x} + … in {what} (post-norm), not the sublayer's input (pre-norm)"
        yield (i,), _stream, "norm-stream", \
            f"in {what} the stream {x} itself is normalised by {n}: the sublayer's output is added to {n}({x}), " \
            f"not to {x}"
    for i, node in enumerate(nodes):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _NORM.search(node.func.attr) \
                and len(node.args) == 1 and not node.keywords and isinstance(node.func.value, ast.Name) \
                and node.func.value.id == "self":
            what = _what(nodes, parents, node)
            yield (i,), (lambda n: n.args[0]), "norm-dropped", \
                f"{what} leaves out {_u(node.func)}: {_s(node.args[0], 24)} is never normalised"
            yield (i,), (lambda n: ast.Call(copy.deepcopy(n.func), [n], [])), "norm-twice", \
                f"{_u(node.func)} is applied twice in {what}"


# ----------------------------------------------------------------------------------------------
# dropout


def _dropout_call(node) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and "drop" in node.func.attr.lower() \
        and isinstance(node.func.value, ast.Name) and node.func.value.id == "self" and len(node.args) == 1 \
        and not node.keywords


def _functional(call: ast.Call) -> ast.Call:
    fn = ast.Attribute(ast.Attribute(ast.Attribute(ast.Name("torch", ast.Load()), "nn", ast.Load()), "functional",
                                     ast.Load()), "dropout", ast.Load())
    return ast.Call(fn, [call.args[0], ast.Attribute(copy.deepcopy(call.func), "p", ast.Load())], [])


def op_dropout(nodes, parents, ctx) -> Iterator[Site]:
    """Every dropout the function F.dropout (on in eval mode), a dropout on the residual stream, then each dropout
    alone in eval mode: the stream's before the single sites, which a block with two dropouts would otherwise
    push past the exercise's cap."""
    drops = [(i, n) for i, n in enumerate(nodes) if _dropout_call(n)]
    if len(drops) > 1:
        yield tuple(i for i, _ in drops), _functional, "dropout-in-eval-all", \
            "every dropout is the function F.dropout, whose training=True is its default: it drops values in " \
            "eval mode too (a module's dropout turns itself off in eval)"
    for i, node in enumerate(nodes):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and isinstance(node.left, ast.Name) \
                and _dropout_call(node.right):
            what = _what(nodes, parents, node)
            yield (i,), (lambda n: ast.Call(n.right.func, [ast.BinOp(n.left, ast.Add(), n.right.args[0])], [])), \
                "dropout-on-stream", \
                f"the dropout in {what} is applied to the sum, {node.left.id} included, not to the sublayer's " \
                f"output alone"
    for i, node in drops:
        what = _what(nodes, parents, node)
        yield (i,), _functional, "dropout-in-eval", \
            f"the dropout in {what} is F.dropout with its default training=True: it drops values in eval mode too"


# ----------------------------------------------------------------------------------------------
# term: a sum missing a part


def op_term(nodes, parents, ctx) -> Iterator[Site]:
    residual = []
    for i, node in enumerate(nodes):
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)):
            continue
        if isinstance(node.left, ast.Name) and isinstance(node.right, ast.Call) and node.left.id in _m()._names(node.right):
            residual.append(i)
        if isinstance(node.left, ast.Call) and isinstance(node.right, ast.Call):
            what = _what(nodes, parents, node)
            for keep, drop in (("left", "right"), ("right", "left")):
                yield (i,), (lambda n, keep=keep: getattr(n, keep)), "term-dropped", \
                    f"{what} leaves out {_s(getattr(node, drop), 24)}: only {_s(getattr(node, keep), 24)} is there"
    if len(residual) > 1:
        yield tuple(residual), (lambda n: n.right), "term-residuals-dropped", \
            "there is no residual connection: each sublayer's output replaces the stream instead of being added to it"


# ----------------------------------------------------------------------------------------------
# offset


def _difference(node) -> bool:
    d = _m()._dims
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and d(node.left) and d(node.right)


def op_offset(nodes, parents, ctx) -> Iterator[Site]:
    for i, node in enumerate(nodes):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and _difference(node.value):
            j = _index(nodes, node.value)
            yield (j,), (lambda n: ast.Constant(0)), "offset-zero", \
                f"the offset `{node.targets[0].id}` is 0, not {_s(node.value, 24)}: the two ranges are aligned at " \
                f"their first positions, not at their last"
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            for keep, drop in (("left", "right"), ("right", "left")):
                if _difference(getattr(node, drop)) and not (drop == "left" and isinstance(node.op, ast.Sub)):
                    what = _what(nodes, parents, node)
                    yield (i,), (lambda n, keep=keep: getattr(n, keep)), "offset-dropped", \
                        f"{what} leaves out the offset {_s(getattr(node, drop), 24)}: the two ranges are aligned " \
                        f"at their first positions, not at their last"
        if isinstance(node, ast.Slice) and node.lower is not None and isinstance(node.upper, ast.BinOp) and \
                isinstance(node.upper.op, ast.Add) and _u(node.upper.left) == _u(node.lower):
            what = _what(nodes, parents, node)
            yield (i,), (lambda n: ast.Slice(None, n.upper.right, n.step)), "offset-from-zero", \
                f"the rows taken in {what} start at 0, not at {_s(node.lower, 20)}"
        if isinstance(node, ast.Call) and _fname(node) == "arange" and len(node.args) == 2:
            a, b = node.args
            if isinstance(b, ast.BinOp) and isinstance(b.op, ast.Add) and _u(b.left) == _u(a):
                what = _what(nodes, parents, node)
                yield (i,), (lambda n: (n.args.__setitem__(slice(None), [n.args[1].right]), n)[1]), \
                    "offset-from-zero", f"the positions in {what} start at 0, not at {_s(a, 20)}"


# ----------------------------------------------------------------------------------------------
# rope


def _strided(node, start: int) -> bool:
    """x[..., start::2]"""
    if not isinstance(node, ast.Subscript):
        return False
    sl = node.slice.elts[-1] if isinstance(node.slice, ast.Tuple) else node.slice
    return isinstance(sl, ast.Slice) and _m()._int_value(sl.lower) == start and sl.upper is None and \
        _m()._int_value(sl.step) == 2


def _half(node, first: bool) -> bool:
    """x[..., :D // 2] (first) or x[..., D // 2:]"""
    if not isinstance(node, ast.Subscript):
        return False
    sl = node.slice.elts[-1] if isinstance(node.slice, ast.Tuple) else node.slice
    if not isinstance(sl, ast.Slice) or sl.step is not None:
        return False
    bound = sl.upper if first else sl.lower
    other = sl.lower if first else sl.upper
    return other is None and isinstance(bound, ast.BinOp) and isinstance(bound.op, ast.FloorDiv) and \
        _m()._int_value(bound.right) == 2


def _set_last(sub: ast.Subscript, sl: ast.AST) -> ast.Subscript:
    if isinstance(sub.slice, ast.Tuple):
        sub.slice.elts[-1] = sl
    else:
        sub.slice = sl
    return sub


def _last_dim(sub: ast.Subscript) -> ast.AST:
    return ast.BinOp(ast.Subscript(ast.Attribute(copy.deepcopy(sub.value), "shape", ast.Load()), _m()._const(-1),
                                   ast.Load()), ast.FloorDiv(), ast.Constant(2))


def _to_half(node):
    if _strided(node, 0):
        return _set_last(node, ast.Slice(None, _last_dim(node), None))
    if _strided(node, 1):
        return _set_last(node, ast.Slice(_last_dim(node), None, None))
    if isinstance(node, ast.Call) and _fname(node) == "stack":
        return _m()._rename_call(node, "cat")
    if isinstance(node, ast.Call) and _fname(node) == "flatten":
        return node.func.value
    raise ValueError("not a layout node")


def _to_interleaved(node):
    if _half(node, True):
        return _set_last(node, ast.Slice(ast.Constant(0), None, ast.Constant(2)))
    if _half(node, False):
        return _set_last(node, ast.Slice(ast.Constant(1), None, ast.Constant(2)))
    if isinstance(node, ast.Call) and _fname(node) == "cat":
        return _call(_m()._rename_call(node, "stack"), "flatten", [_m()._const(-2)])
    raise ValueError("not a layout node")


_ROPE_CALLS = {"apply_rope_half": "apply_rope", "apply_rope": "apply_rope_half"}
_INTERLEAVED = "the interleaved pairing (x[2i], x[2i+1])"
_HALVES = "the half-split pairing (x[i], x[i + D/2])"


def op_rope(nodes, parents, ctx) -> Iterator[Site]:
    M = _m()
    # the pairing of features the rotation uses
    strided = [i for i, n in enumerate(nodes) if _strided(n, 0) or _strided(n, 1)]
    halves = [i for i, n in enumerate(nodes) if _half(n, True) or _half(n, False)]
    stacks = [i for i, n in enumerate(nodes) if isinstance(n, ast.Call) and _fname(n) == "stack"]
    flats = [i for i, n in enumerate(nodes) if isinstance(n, ast.Call) and _fname(n) == "flatten"]
    cats = [i for i, n in enumerate(nodes) if isinstance(n, ast.Call) and _fname(n) == "cat"
            and any(k.arg == "dim" and M._int_value(k.value) == -1 for k in n.keywords)]
    if len(strided) == 2 and len(stacks) == 1 and len(flats) == 1:
        yield tuple(strided + stacks + flats), _to_half, "rope-layout-half", \
            f"the rotation pairs features by {_HALVES}, not by {_INTERLEAVED}"
    if len(halves) == 2 and len(cats) == 1:
        yield tuple(halves + cats), _to_interleaved, "rope-layout-interleaved", \
            f"the rotation pairs features by {_INTERLEAVED}, not by {_HALVES}"
    for i, node in enumerate(nodes):
        if isinstance(node, ast.Call) and _fname(node) in _ROPE_CALLS:
            new = _ROPE_CALLS[_fname(node)]
            used, meant = (_INTERLEAVED, _HALVES) if new == "apply_rope" else (_HALVES, _INTERLEAVED)
            yield (i,), (lambda n, new=new: M._rename_call(n, new)), "rope-layout-call", \
                f"the rotation pairs features by {used} ({new}), not by {meant}"
    # sin and cos
    trig = [i for i, n in enumerate(nodes) if isinstance(n, ast.Call) and _fname(n) in ("sin", "cos")]
    names = [i for i, n in enumerate(nodes) if isinstance(n, ast.Name) and n.id in ("sin", "cos")
             and isinstance(n.ctx, ast.Load)]
    if {_fname(nodes[i]) for i in trig} == {"sin", "cos"}:
        yield tuple(trig), _swap_trig, "rope-sin-cos-swapped", "sin and cos trade places: sin is used where cos " \
                                                               "belongs, and cos where sin belongs"
    if {nodes[i].id for i in names} == {"sin", "cos"}:
        yield tuple(names), _swap_trig, "rope-sin-cos-swapped", "the rotation uses sin where cos belongs and cos " \
                                                                "where sin belongs"
    # the frequencies' exponent: 2i / D
    for i, node in enumerate(nodes):
        if isinstance(node, ast.Call) and _fname(node) == "arange" and len(node.args) == 3 and \
                M._int_value(node.args[0]) == 0 and M._int_value(node.args[2]) == 2:
            yield (i,), _halve_arange, "rope-exponent-i", \
                "the frequency exponent counts i = 0, 1, 2, … where it should count 2i = 0, 2, 4, …"
    # the positions argument
    fn = next((n for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if fn is not None and fn.args.args:
        params = [a.arg for a in fn.args.args]
        x = params[1] if params[0] == "self" and len(params) > 1 else params[0]
        uses = [i for i, n in enumerate(nodes) if isinstance(n, ast.Name) and n.id in ("positions", "position_ids")
                and n.id in params and isinstance(n.ctx, ast.Load)]
        if uses:
            name = nodes[uses[0]].id
            yield tuple(uses), (lambda n, x=x: _arange_of(x)), "rope-positions-ignored", \
                f"the positions are 0, 1, …, T−1 along `{x}`'s sequence axis: the `{name}` given are ignored"
    # the rotation applied to one more tensor than it should be
    for i, node in enumerate(nodes):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple) and \
                isinstance(node.value, ast.GeneratorExp) and isinstance(node.value.generators[0].iter, ast.Tuple):
            got = [e.id for e in node.targets[0].elts if isinstance(e, ast.Name)]
            siblings = _siblings(nodes, got)
            for extra in siblings:
                yield (i,), (lambda n, extra=extra: _add_target(n, extra)), "rope-applied-to-more", \
                    f"`{_fname(node.value.elt) if isinstance(node.value.elt, ast.Call) else 'the rotation'}` is " \
                    f"applied to {extra} as well as to {', '.join(got)}"


def _swap_trig(node):
    other = {"sin": "cos", "cos": "sin"}
    if isinstance(node, ast.Name):
        node.id = other[node.id]
        return node
    return _m()._rename_call(node, other[_fname(node)])


def _halve_arange(call: ast.Call) -> ast.Call:
    n = call.args[1]
    call.args = [ast.BinOp(n, ast.FloorDiv(), ast.Constant(2))]
    return call


def _arange_of(x: str) -> ast.AST:
    X = ast.Name(x, ast.Load())
    size = ast.Subscript(ast.Attribute(X, "shape", ast.Load()), _m()._const(-2), ast.Load())
    return ast.Call(_torch("arange"), [size], [ast.keyword("device", ast.Attribute(ast.Name(x, ast.Load()), "device",
                                                                                     ast.Load()))])


def _siblings(nodes, got: list[str]) -> list[str]:
    """Names assigned by the same call as the names in `got` (v beside q and k: all from split_heads)."""
    maker = {}
    for n in nodes:
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) and \
                isinstance(n.value, ast.Call):
            maker.setdefault(n.targets[0].id, _u(n.value.func))
    funcs = {maker.get(g) for g in got} - {None}
    return [name for name, f in maker.items() if f in funcs and name not in got]


def _add_target(node: ast.Assign, extra: str) -> ast.Assign:
    node.targets[0].elts.append(ast.Name(extra, ast.Store()))
    node.value.generators[0].iter.elts.append(ast.Name(extra, ast.Load()))
    return node


# ----------------------------------------------------------------------------------------------
# ratio


def op_ratio(nodes, parents, ctx) -> Iterator[Site]:
    M = _m()
    for i, node in enumerate(nodes):
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)):
            continue
        if M._is_sqrt(node.right) is not None or M._is_sqrt(node.left) is not None:
            continue  # the scale family's
        what = _what(nodes, parents, node)
        a, b = (f"({_s(x, 20)})" if isinstance(x, ast.BinOp) else _s(x, 20) for x in (node.left, node.right))
        if M._dims(node.left) and M._dims(node.right) and isinstance(node.right, ast.BinOp):
            yield (i,), (lambda n: ast.BinOp(n.right, ast.Div(), n.left)), "ratio-inverted", \
                f"the ratio in {what} is upside down: {b} / {a}, not {a} / {b}"
        if isinstance(node.right, (ast.Name, ast.Attribute)):
            yield (i,), (lambda n: ast.BinOp(n.left, ast.Mult(), n.right)), "ratio-multiplied", \
                f"{what} multiplies {a} by {b} where it should divide by it"


# ----------------------------------------------------------------------------------------------
# online: the running max, sum and accumulator of an online softmax


def _rescale_factor(node) -> bool:
    """exp(m - m_new): a running max's change."""
    return isinstance(node, ast.Call) and _fname(node) in ("exp", "exp2") and node.args and _difference(node.args[0])


def op_online(nodes, parents, ctx) -> Iterator[Site]:
    for i, node in enumerate(nodes):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            for keep, drop in (("left", "right"), ("right", "left")):
                if _rescale_factor(getattr(node, drop)):
                    yield (i,), (lambda n, keep=keep: getattr(n, keep)), "online-not-rescaled", \
                        f"{_s(getattr(node, keep), 20)} is never multiplied by {_s(getattr(node, drop), 30)}: what " \
                        f"was summed under the old maximum keeps its old scale"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Call) \
                and _fname(node.func.value) in ("mul_", "mul") and isinstance(node.func.value.func, ast.Attribute) \
                and len(node.func.value.args) == 1:
            inner = node.func.value
            running, by = _s(inner.func.value, 20), _s(inner.args[0], 20)
            yield (i,), (lambda n: (setattr(n.func, "value", n.func.value.func.value), n)[1]), "online-not-rescaled", \
                f"{running} is never multiplied by {by} before the new block is added: what was summed under the " \
                f"old maximum keeps its old scale"
        if isinstance(node, ast.Call) and _fname(node) == "masked_fill" and isinstance(node.func, ast.Attribute) \
                and len(node.args) == 2 and isinstance(node.args[1], ast.Constant) and node.args[1].value == 0.0:
            what = _what(nodes, parents, node)
            yield (i,), (lambda n: n.func.value), "online-guard-dropped", \
                f"{what} keeps {_s(node.func.value, 20)} where {_s(node.args[0], 30)}: the entries that should " \
                f"become 0 there stay as they are"


# ----------------------------------------------------------------------------------------------
# step: one statement missing


def _self_update(stmt) -> bool:
    return isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) and \
        isinstance(stmt.value, ast.BinOp) and isinstance(stmt.value.left, ast.Name) and \
        stmt.value.left.id == stmt.targets[0].id


def op_step(nodes, parents, ctx) -> Iterator[Site]:
    found = []  # the larger steps first (a loop, a top-level call), so a cap keeps them
    for i, node in enumerate(nodes):
        top = isinstance(parents.get(id(node), (None,))[0], (ast.FunctionDef, ast.AsyncFunctionDef))
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            f = node.value.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Call) and _fname(f.value) == "super":
                continue
            found.append((1 if top else 4, i, f"the step `{_s(node.value, 40)}` never runs"))
        elif isinstance(node, ast.For):  # a loop of calls (an initialisation) first; a main loop last
            calls_only = all(isinstance(b, ast.Expr) for b in node.body)
            found.append((0 if calls_only else 5, i,
                          f"the loop `for {_s(node.target, 16)} in {_s(node.iter, 24)}:` never runs"))
        elif isinstance(node, ast.If) and not node.orelse and not any(isinstance(s, ast.Raise) for s in node.body) \
                and not any(isinstance(s, ast.Return) for s in node.body):
            found.append((2, i, f"the block under `if {_s(node.test, 30)}:` is missing"))
        elif _self_update(node):
            found.append((3, i, f"the step `{_s(node, 40)}` is missing: `{node.targets[0].id}` keeps its value"))
    for _, i, sentence in sorted(found):
        yield (i,), (lambda n: ast.Pass()), "step-missing", sentence


# ----------------------------------------------------------------------------------------------
# window, rounding


def _last_n(sl) -> bool:
    """a slice `-n:` (the last n)"""
    return isinstance(sl, ast.Slice) and sl.upper is None and sl.step is None and \
        isinstance(sl.lower, ast.UnaryOp) and isinstance(sl.lower.op, ast.USub) and _m()._dims(sl.lower)


def op_window(nodes, parents, ctx) -> Iterator[Site]:
    groups: dict[str, list[int]] = {}
    for i, node in enumerate(nodes):
        if _last_n(node):
            groups.setdefault(_u(node.lower.operand), []).append(i)
    for n, js in groups.items():
        yield tuple(js), (lambda s: ast.Slice(None, s.lower.operand, None)), "window-oldest", \
            f"the first {n} positions are kept, not the last {n}: the oldest, where the newest belong"


def op_topk(nodes, parents, ctx) -> Iterator[Site]:
    for i, node in enumerate(nodes):
        if isinstance(node, ast.Call) and _fname(node) == "topk" and len(node.args) >= 2:
            what = _what(nodes, parents, node)
            k = _s(node.args[1], 24)
            yield (i,), _one_more, "topk-one-more", \
                f"the topk that gives {what} takes one more than {k}: the k-th largest value it reads is the (k+1)-th"


def _one_more(call: ast.Call) -> ast.Call:
    k = call.args[1]
    if isinstance(k, ast.Call) and _fname(k) == "min" and k.args:  # min(k, n): one more, still at most n
        k.args[0] = ast.BinOp(k.args[0], ast.Add(), ast.Constant(1))
    else:
        call.args[1] = ast.BinOp(k, ast.Add(), ast.Constant(1))
    return call


def op_rounding(nodes, parents, ctx) -> Iterator[Site]:
    for i, node in enumerate(nodes):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv) and isinstance(node.left, ast.BinOp) \
                and isinstance(node.left.op, ast.Sub) and _m()._int_value(node.left.right) == 1 \
                and isinstance(node.left.left, ast.BinOp) and isinstance(node.left.left.op, ast.Add) \
                and _u(node.left.left.right) == _u(node.right):
            a, b = _s(node.left.left.left, 20), _s(node.right, 20)
            yield (i,), (lambda n: ast.BinOp(n.left.left.left, ast.FloorDiv(), n.right)), "rounding-down", \
                f"{a} is divided by {b} rounding down, where it should round up"


# ----------------------------------------------------------------------------------------------
# reduction, factor


_OTHER_REDUCTION = {"amax": ("sum", "mean"), "max": ("sum",), "sum": ("mean", "amax"), "mean": ("sum",)}


def op_reduction(nodes, parents, ctx) -> Iterator[Site]:
    for i, node in enumerate(nodes):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _OTHER_REDUCTION \
                and not _is_module_call(node) and (node.args or any(k.arg == "dim" for k in node.keywords)):
            what = _what(nodes, parents, node)
            old = node.func.attr
            for new in _OTHER_REDUCTION[old]:
                yield (i,), (lambda n, new=new: _m()._rename_call(n, new)), "reduction-swapped", \
                    f"{what} takes the {new} of {_s(node.func.value, 20)} where the {old} belongs"
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and isinstance(node.left, ast.Call) \
                and _fname(node.left) == "cumsum" and isinstance(node.left.func, ast.Attribute) \
                and _u(node.left.func.value) == _u(node.right):
            what = _what(nodes, parents, node)
            yield (i,), (lambda n: n.left), "reduction-cumsum-inclusive", \
                f"{what} counts each entry's own value in the running sum: what comes before it and itself, not " \
                f"only what comes before it"


def op_factor(nodes, parents, ctx) -> Iterator[Site]:
    for i, node in enumerate(nodes):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            c = _m()._int_value(node.left)
            if c is None or c < 2 or not _m()._dims(node.right):
                continue
            what = _what(nodes, parents, node)
            if c % 2 == 0 and c > 2:
                yield (i,), (lambda n, c=c: (setattr(n, "left", ast.Constant(c // 2)), n)[1]), "factor-halved", \
                    f"{what} counts {c // 2} × … where it should count {c} × …"
            yield (i,), (lambda n: n.right), "factor-dropped", f"{what} leaves out the factor {c}"


# ----------------------------------------------------------------------------------------------
# gqa, copy, size


def op_order(nodes, parents, ctx) -> Iterator[Site]:
    for i, node in enumerate(nodes):
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Call) and \
                _fname(node.value) in ("tensor", "stack", "cat", "as_tensor"):
            j = _index(nodes, node.value)
            yield (j,), (lambda n: _call(n, "flip", [ast.Constant(0)])), "order-reversed", \
                "the result is in reverse order along its first axis: its first entry is the one that belongs last"
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple) and len(node.targets[0].elts) == 2 \
                and isinstance(node.value, ast.Call) and _fname(node.value) == "sort" and \
                isinstance(node.value.func, ast.Attribute):
            x = _s(node.value.func.value, 20)
            yield (i,), _unsorted, "order-unsorted", \
                f"{x} is never sorted: the running quantities over it go in its original order, not from the " \
                f"largest down"


def _unsorted(node: ast.Assign) -> ast.Assign:
    x = node.value.func.value
    last = ast.Subscript(ast.Attribute(copy.deepcopy(x), "shape", ast.Load()), _m()._const(-1), ast.Load())
    ar = ast.Call(_torch("arange"), [last], [ast.keyword("device", ast.Attribute(copy.deepcopy(x), "device",
                                                                                   ast.Load()))])
    node.value = ast.Tuple([x, _call(ar, "expand_as", [copy.deepcopy(x)])], ast.Load())
    return node


def op_gqa(nodes, parents, ctx) -> Iterator[Site]:
    calls = [i for i, n in enumerate(nodes) if isinstance(n, ast.Call) and _fname(n) == "repeat_kv" and len(n.args) == 2]
    if calls:
        yield tuple(calls), _tile_heads, "gqa-tiled", \
            "the KV heads are tiled (0, 1, 0, 1, …), so a query head reads KV head h mod n_kv, not h // n_rep: " \
            "each KV head's copies should sit side by side (0, 0, 1, 1, …)"


def _tile_heads(call: ast.Call) -> ast.Call:
    x, n = call.args
    return _call(x, "repeat", [ast.Constant(1), n, ast.Constant(1), ast.Constant(1)])


def op_copy(nodes, parents, ctx) -> Iterator[Site]:
    for i, node in enumerate(nodes):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and _fname(node.value) == "copy_" \
                and isinstance(node.value.func, ast.Attribute) and len(node.value.args) == 1:
            p, src = node.value.func.value, node.value.args[0]
            yield (i,), (lambda n: ast.Assign([ast.Attribute(n.value.func.value, "data", ast.Store())],
                                              n.value.args[0])), "copy-rebound", \
                f"{_s(p, 20)}.data is rebound to {_s(src, 24)} instead of being filled in place with copy_: the " \
                f"parameter then shares that tensor's storage, dtype and device"


def op_size(nodes, parents, ctx) -> Iterator[Site]:
    for i, node in enumerate(nodes):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
            k = _m()._int_value(node.slice)
            if k in (-1, -2):
                j = 3 + k
                yield (i,), (lambda n, j=j: (setattr(n, "slice", ast.Constant(j)), n)[1]), "size-from-start", \
                    f"the size is read at index {j} of {_s(node.value.value, 20)}.shape, counted from the start, not " \
                    f"at {k}, from the end: the two agree only for 3-d inputs"


def op_tie(nodes, parents, ctx) -> Iterator[Site]:
    for i, fn in enumerate(nodes):
        if not isinstance(fn, ast.FunctionDef):
            continue
        for k, stmt in enumerate(fn.body):
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Attribute) \
                    and isinstance(stmt.value, ast.Attribute) and stmt.targets[0].attr == stmt.value.attr == "weight":
                a, b = _u(stmt.targets[0]), _u(stmt.value)
                yield (i,), (lambda f, k=k: _untie(f, k)), "tie-copied", \
                    f"{a} is a copy of {b}'s values, not the same Parameter: the two start equal, then train apart, " \
                    f"and the model has one more V×D matrix"


def _untie(fn: ast.FunctionDef, k: int) -> ast.FunctionDef:
    stmt = fn.body.pop(k)
    clone = _call(_call(stmt.value, "detach"), "clone")
    param = ast.Call(ast.Attribute(ast.Name("nn", ast.Load()), "Parameter", ast.Load()), [clone], [])
    fn.body.append(ast.Assign([stmt.targets[0]], param))  # at the end: the values the initialisation left
    return fn


def op_softmax(nodes, parents, ctx) -> Iterator[Site]:
    """A division of the logits (a temperature) moved from before the softmax to after it."""
    for i, node in enumerate(nodes):
        if not (_self_update(node) and isinstance(node.value.op, ast.Div)):
            continue
        name, t = node.targets[0].id, node.value.right
        later = [j for j, n in enumerate(nodes) if isinstance(n, ast.Call) and _fname(n) in ("softmax", "log_softmax")
                 and n.args and isinstance(n.args[0], ast.Name) and n.args[0].id == name and n.lineno > node.lineno]
        if later:
            yield (i, later[0]), (lambda n, t=t: ast.Pass() if isinstance(n, ast.Assign) else
                                  ast.BinOp(n, ast.Div(), copy.deepcopy(t))), "softmax-divided-after", \
                f"the probabilities are divided by {_s(t, 20)} after the softmax, not `{name}` before it: the " \
                f"division must reshape the distribution, not scale its sum"


Site = tuple  # (indices, builder, operator id, sentence), as mutations.py's

MODULE_OPERATORS = (op_branch, op_keyword, op_call, op_activation, op_norm, op_dropout, op_term, op_offset, op_rope,
                    op_ratio, op_online, op_step, op_window, op_topk, op_rounding, op_reduction, op_factor, op_order, op_gqa,
                    op_copy, op_size, op_tie, op_softmax)

# Per family: where `course hint` sends a student whose code a mutant of that family reproduced. What to look
# at, never the fix (tests/lessons/test_hints.py).
MODULE_HINTS = {
    "tie": "Is the head's weight the embedding's own Parameter (the same object), or a tensor with the same "
           "values? Compare them with `is`.",
    "softmax": "Which operations act on the logits before the softmax, and which on the probabilities after it?",
    "branch": "Which cases does each `if` and each `a if c else b` in your code cover? Try an input for each "
              "case the text names and print which way it went.",
    "keyword": "Check each call's keyword arguments against the text: which settings does it ask for, and which "
               "does a bare call leave at the library's default?",
    "call": "Read each call against the signature of what it calls: is every argument the text asks for passed, "
            "or does one silently take its default?",
    "activation": "Which branch goes through the nonlinearity, and which nonlinearity does the text name? Print "
                  "both branches for a small input.",
    "norm": "Write the block as a formula: what does each norm see, the stream or the sum, and what is added "
            "back to the stream?",
    "dropout": "Put the module in eval mode and call it twice on the same input: is the output the same? Where "
               "does the dropout sit relative to the residual add?",
    "term": "List every term the text adds up and compare it with the terms your sum has.",
    "offset": "When there are fewer queries than keys, which key does the last query line up with? Print the "
              "positions both sides use for a case with a cache or an offset.",
    "rope": "Write down which two features rotate together and by which angle, for a head size of 4 at "
            "positions 0 and 1, and print your output beside it.",
    "ratio": "Check each division: which quantity goes on top, and should it be a division at all?",
    "online": "Follow one row across two blocks where the maximum grows: is everything accumulated so far "
              "brought to the new maximum, and what happens to a row whose scores are all -inf?",
    "step": "Go through the text's steps one by one and point at the line of your code that does each.",
    "window": "With more positions than the window holds, which ones should stay: the first or the last?",
    "topk": "With k = 1, how many values should survive? Print how many of yours do.",
    "rounding": "Try a size that is not a multiple: should the result round up or down?",
    "reduction": "Which statistic does the text compare against: the largest value, the sum or the mean?",
    "factor": "Count the terms by hand for a tiny case and compare each constant factor with yours.",
    "order": "Print your result beside the text's for a small case, entry by entry: is the order reversed?",
    "gqa": "For 4 query heads sharing 2 KV heads, which KV head should query head 1 read? Print what yours "
           "reads.",
    "copy": "After loading, is each parameter still the model's own tensor, with its dtype and device, or is it "
            "now the checkpoint's?",
    "size": "Which axis is the sequence axis when the input has more or fewer leading dimensions? Count it "
            "from the end.",
}
