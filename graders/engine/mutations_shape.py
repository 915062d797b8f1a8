"""Mutation operators for layouts, layers, statistics and arguments: the wrong answers of lessons 01-05.

More operator families for mutations.py (issue 44 item 2), registered by one line there that appends
`OPERATORS` to its own and `HINTS` to its FAMILY_HINTS. The same contract: each operator is a function of
(scope nodes, parents, context) yielding sites, each site a change and a sentence in the code's own names.
Each family fires only where its pattern is in the code, so an exercise without it keeps its candidates
under the cap. In the order they are tried:

  layout     a transpose before a reshape dropped; a view straight to the transposed shape; .transpose(-2, -1)
             → .T (every axis reversed); a new axis inserted on the other side (tiling, not repeating); a
             repeating helper replaced by tiling
  layer      a sub-layer of the module (`self.out_proj(y)`) skipped: its input passed on as it is
  scale      the size under a root multiplied by a count of the same class (√head_dim → √(num_heads·head_dim))
  returned   a returned tensor averaged over axis 1 (one map where there is one per head)
  default    an argument left None filled from the wrong argument; a flag passed on replaced by a constant
  axis       a reduction over `dim` (a variable) runs over the last axis; every reduction over axis c runs
             over axis 0, or over the whole tensor
  term       one term of a sum or difference left out (a - b - c → a - c), or all but the first
  parameter  nn.Parameter(t) → t (not registered); a gain made of ones ↔ zeros
  statistic  the root mean square replaced by the mean absolute value; the input centred before it is scaled
  cast       the cast back to the input's dtype done before the last product instead of after it
  device     device= dropped (made on the default device)
  fill       masked_fill with one mask dropped everywhere (what that mask selects is never set)
  diagonal   tril/triu's offset dropped (the triangle's edge on the main diagonal)

and the families appended below, each where its pattern is: guard, sizeof, sibling, inplace, activation, limit,
combine, view, count, and

  unrounded  a rounded value (int(), round, floor, ceil, a power of two) read before its rounding by the steps
             after it, up to the one that assigns it again
  ends       one read of a range's end replaced by its start, or its start by its end (`qs`/`qe`, `start`/`end`)
  once       a mask a module's forward makes on every call made once, at the first call, and kept

(Every family also runs inside the definitions of the cell the exercise hands its work to: mutations.py
`helpers`.)

Pure `ast`; no torch here.
"""

from __future__ import annotations

import ast
import copy
from typing import Iterator



def _attr_call(node: ast.AST, *names: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in names


def _index(nodes, node) -> int | None:
    for i, n in enumerate(nodes):
        if n is node:
            return i
    return None


def _axes(call: ast.Call) -> list[int] | None:
    """The two axes of x.transpose(a, b) as ints, or None."""
    if len(call.args) != 2 or call.keywords:
        return None
    a, b = (_int_value(x) for x in call.args)
    return None if a is None or b is None else [a, b]


# ----------------------------------------------------------------------------------------------
# layout: view / reshape / transpose / expand orders


def op_layout(nodes, parents, ctx) -> Iterator[Site]:
    for i, node in enumerate(nodes):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        name, recv = node.func.attr, node.func.value
        what = _target_of(nodes, parents, node)
        # x.transpose(a, b).reshape(...) → x.reshape(...)
        if name in ("reshape", "view") and _attr_call(recv, "transpose", "permute") and node.args:
            yield (i,), _drop_inner, "layout-transpose-dropped", \
                (f"{what} is {'reshaped' if name == 'reshape' else 'viewed'} without the "
                 f"{recv.func.attr}({', '.join(_u(a) for a in recv.args)}) before it: {name} reads the memory in "
                 f"order, so entries of different axes end up side by side")
        # x.view(s0, s1, s2, s3).transpose(a, b) → x.view(s with a and b swapped)
        if name == "transpose" and _attr_call(recv, "view", "reshape") and (ab := _axes(node)) is not None:
            shape = recv.args
            n = len(shape)
            if n >= 2 and not any(isinstance(s, ast.Starred) for s in shape) and all(-n <= x < n for x in ab):
                a, b = sorted(x % n for x in ab)
                swapped = [_short(s, 16) for s in shape]
                swapped[a], swapped[b] = swapped[b], swapped[a]
                yield (i,), (lambda c, a=a, b=b: _view_swapped(c, a, b)), "layout-viewed-transposed", \
                    (f"{what} is {recv.func.attr}ed straight as ({', '.join(swapped)}) instead of "
                     f"({', '.join(_short(s, 16) for s in shape)}) with axes {a} and {b} then swapped: a view keeps the "
                     f"memory order, so it regroups the entries instead of swapping the axes")
        # x.transpose(-2, -1) → x.T
        if name == "transpose" and (ab := _axes(node)) is not None and sorted(ab) == [-2, -1]:
            yield (i,), (lambda c: ast.Attribute(c.func.value, "T", ast.Load())), "layout-reversed", \
                (f"`{_short(recv, 20)}` is transposed with .T, which reverses every axis of a batched tensor, "
                 f"instead of swapping the last two")
        # x[:, :, None].expand(B, H, n, ...) → x[:, None].expand(B, n, H, ...): copies tiled, not repeated
        if name == "expand" and isinstance(recv, ast.Subscript) and isinstance(recv.slice, ast.Tuple):
            elts = recv.slice.elts
            nones = [k for k, e in enumerate(elts) if isinstance(e, ast.Constant) and e.value is None]
            if len(nones) == 1 and nones[0] >= 1 and len(node.args) > nones[0] and \
                    all(isinstance(e, ast.Slice) for k, e in enumerate(elts) if k != nones[0]):
                p = nones[0]
                yield (i,), (lambda c, p=p: _none_left(c, p)), "repeat-expand-tiled", \
                    (f"{what} tiles the {_short(node.args[p], 12)} copies along axis {p - 1} (a b a b) instead of "
                     f"repeating each entry in place (a a b b)")
    # a, b, c = y.chunk(3, dim=-1); a, b, c = (f(t, h) for t in (a, b, c)) → a, b, c = f(y, h).chunk(3, dim=-1)
    for i, node in enumerate(nodes):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for first, second in zip(body, body[1:]):
            f = _split_after_chunk(first, second)
            if f is None:
                continue
            chunked = _short(first.value.func.value, 24)
            yield (_index(nodes, first.value), _index(nodes, second)), \
                (lambda n, f=f: ast.Pass() if isinstance(n, ast.stmt) else _split_first(n, f)), \
                "layout-split-before-chunk", \
                (f"`{_short(first.targets[0], 20).strip('()')}` are cut from the last axis after `{f.func.id}`, not "
                 f"before it: each takes a part of every group {f.func.id} makes instead of a whole block of "
                 f"{chunked}")
    # repeat_kv(t, n) → t.repeat(1, n, 1, 1): every call to a repeating helper of the notebook at once
    calls = [i for i, n in enumerate(nodes) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
             and "repeat" in n.func.id and len(n.args) == 2 and not n.keywords]
    if calls:
        helper = nodes[calls[0]].func.id
        yield tuple(calls), _tiled_call, "repeat-helper-tiled", \
            (f"the heads are tiled (a b a b), as .repeat does, where `{helper}` repeats each one in place "
             f"(a a b b)")


def _split_after_chunk(first: ast.stmt, second: ast.stmt) -> ast.Call | None:
    """The call f(t, ...) of `a, b = (f(t, ...) for t in (a, b))` right after `a, b = y.chunk(...)`, or None."""
    if not (isinstance(first, ast.Assign) and isinstance(second, ast.Assign) and _attr_call(first.value, "chunk")
            and isinstance(first.targets[0], ast.Tuple) and _u(first.targets[0]) == _u(second.targets[0])):
        return None
    gen = second.value
    if not (isinstance(gen, ast.GeneratorExp) and len(gen.generators) == 1 and isinstance(gen.elt, ast.Call)
            and isinstance(gen.elt.func, ast.Name) and gen.elt.args and isinstance(gen.elt.args[0], ast.Name)
            and isinstance(gen.generators[0].target, ast.Name) and gen.elt.args[0].id == gen.generators[0].target.id
            and _u(gen.generators[0].iter) == _u(first.targets[0])):
        return None
    return gen.elt


def _split_first(chunk: ast.Call, f: ast.Call) -> ast.Call:
    g = copy.deepcopy(f)
    g.args[0] = chunk.func.value
    chunk.func.value = g
    return chunk


def _drop_inner(call: ast.Call) -> ast.Call:
    call.func.value = call.func.value.func.value
    return call


def _view_swapped(call: ast.Call, a: int, b: int) -> ast.Call:
    inner = call.func.value
    inner.args[a], inner.args[b] = inner.args[b], inner.args[a]
    return inner


def _none_left(call: ast.Call, p: int) -> ast.Call:
    elts = call.func.value.slice.elts
    elts[p - 1], elts[p] = elts[p], elts[p - 1]
    call.args[p - 1], call.args[p] = call.args[p], call.args[p - 1]
    return call


def _tiled_call(call: ast.Call) -> ast.Call:
    x, n = call.args
    return ast.Call(ast.Attribute(x, "repeat", ast.Load()), [ast.Constant(1), n, ast.Constant(1), ast.Constant(1)], [])


# ----------------------------------------------------------------------------------------------
# layer: a sub-layer skipped


def _submodules(nodes) -> set[str]:
    """`self.<name>` assigned an nn.<Layer>(...) (or a module-building call) in the class."""
    out = set()
    for n in nodes:
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self" and \
                        isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Attribute) and \
                        isinstance(n.value.func.value, ast.Name) and n.value.func.value.id == "nn":
                    out.add(t.attr)
    return out


def op_layer(nodes, parents, ctx) -> Iterator[Site]:
    subs = _submodules(nodes)
    for i, node in enumerate(nodes):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in subs and \
                isinstance(node.func.value, ast.Name) and node.func.value.id == "self" and len(node.args) == 1 \
                and not node.keywords and isinstance(node.args[0], ast.Call):
            what = _target_of(nodes, parents, node)
            yield (i,), (lambda c: c.args[0]), "layer-skipped", \
                (f"`{node.func.attr}` is never applied: {what} is {_short(node.args[0], 30)} as it comes, without "
                 f"that layer")


# ----------------------------------------------------------------------------------------------
# scale: the size under the root times a count


def _counts(nodes) -> list[ast.AST]:
    """`self.num_*` / `num_*` / `n_*` sizes the code reads: the counts a size may be multiplied by."""
    seen, out = set(), []
    for n in nodes:
        name = n.attr if isinstance(n, ast.Attribute) else n.id if isinstance(n, ast.Name) else None
        if name and (name.startswith("num_") or name.startswith("n_")) and isinstance(n.ctx, ast.Load) and \
                _u(n) not in seen:
            seen.add(_u(n))
            out.append(n)
    return out


def op_scale_size(nodes, parents, ctx) -> Iterator[Site]:
    counts = _counts(nodes)
    for i, node in enumerate(nodes):
        arg = _is_sqrt(node)
        if arg is None or not isinstance(arg, (ast.Name, ast.Attribute)):
            continue
        what = _target_of(nodes, parents, node)
        parent = parents.get(id(node), (None,))[0]
        how = {ast.Div: "divided by", ast.Mult: "multiplied by"}.get(type(getattr(parent, "op", None)), "scaled with")
        for c in counts:
            if _u(c) == _u(arg) or type(c) is not type(arg):  # self.num_heads for self.head_dim, a name for a name
                continue
            a, k = _short(arg, 24), _short(c, 24)
            yield (i,), (lambda n, c=c: _scaled_root(n, c)), "scale-size", \
                f"{what} is {how} √({k} · {a}) instead of √{a}: the size under the root is {k} times too large"


def _scaled_root(node: ast.AST, count: ast.AST) -> ast.AST:
    arg = _is_sqrt(node)
    prod = ast.BinOp(copy.deepcopy(count), ast.Mult(), arg)
    if isinstance(node, ast.Call) and node.args:
        node.args[0] = prod
        return node
    if isinstance(node, ast.Call):
        node.func.value = prod
        return node
    node.left = prod
    return node


# ----------------------------------------------------------------------------------------------
# returned: a returned tensor averaged over axis 1


def op_returned(nodes, parents, ctx) -> Iterator[Site]:
    softmaxed = {t.id for n in nodes if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
                 and _call_name(n.value) in ("softmax", "dropout") for t in n.targets if isinstance(t, ast.Name)}
    for i, node in enumerate(nodes):
        if not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in softmaxed):
            continue
        cur, ok = node, False
        while id(cur) in parents:
            parent = parents[id(cur)][0]
            if isinstance(parent, ast.Return):
                ok = True
                break
            if not isinstance(parent, (ast.Tuple, ast.IfExp)) or (isinstance(parent, ast.IfExp) and cur is parent.test):
                break
            cur = parent
        if ok:
            yield (i,), (lambda n: ast.Call(ast.Attribute(n, "mean", ast.Load()), [], [ast.keyword("dim", ast.Constant(1))])), \
                "returned-averaged", \
                f"the `{node.id}` returned are averaged over axis 1: one map where there should be one per index of that axis"


# ----------------------------------------------------------------------------------------------
# default: a None argument filled from the wrong one; a flag passed on replaced by a constant


def _params(nodes) -> list[ast.arguments]:
    return [n.args for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def op_fallback(nodes, parents, ctx) -> Iterator[Site]:
    kinds = {a.arg: "Tensor" in _u(a.annotation) for args in _params(nodes) for a in args.args + args.kwonlyargs
             if a.annotation is not None and a.arg not in ("self", "ctx")}
    names = list(kinds)
    for i, node in enumerate(nodes):
        if not (isinstance(node, ast.IfExp) and isinstance(node.test, ast.Compare) and len(node.test.ops) == 1 and
                isinstance(node.test.ops[0], ast.Is) and isinstance(node.test.left, ast.Name) and
                isinstance(node.body, ast.Name) and node.body.id in names):
            continue
        p, fill = node.test.left.id, node.body.id
        for other in names:
            if other in (p, fill) or kinds[other] != kinds[fill]:
                continue
            yield (i,), (lambda n, other=other: _set_body(n, other)), "default-fallback", \
                f"when `{p}` is None it is taken from `{other}`, not from `{fill}`"


def _set_body(node: ast.IfExp, name: str) -> ast.IfExp:
    node.body = ast.Name(name, ast.Load())
    return node


def op_flag(nodes, parents, ctx) -> Iterator[Site]:
    flags = {}
    for args in _params(nodes):
        pos = args.args[len(args.args) - len(args.defaults):]
        for a, d in list(zip(pos, args.defaults)) + list(zip(args.kwonlyargs, args.kw_defaults)):
            if isinstance(d, ast.Constant) and isinstance(d.value, bool):
                flags[a.arg] = d.value
    passed: dict[str, list[int]] = {}
    for i, node in enumerate(nodes):
        if isinstance(node, ast.keyword) and isinstance(node.value, ast.Name) and node.value.id in flags and \
                isinstance(parents.get(id(node), (None,))[0], ast.Call):
            passed.setdefault(node.value.id, []).append(i)
    for flag, idx in passed.items():  # every call it is passed to at once
        new = not flags[flag]
        calls = sorted({_call_name(parents[id(nodes[i])][0]) for i in idx})
        kw = nodes[idx[0]].arg
        yield tuple(idx), (lambda k, new=new: ast.keyword(k.arg, ast.Constant(new))), "default-flag-constant", \
            (f"`{flag}` is not passed on: {', '.join(f'`{c}`' for c in calls)} always "
             f"get{'s' if len(calls) == 1 else ''} {kw}={new}, whatever it was given")


# ----------------------------------------------------------------------------------------------
# axis: a variable dim fixed to the last axis; every reduction over c → axis 0, or the whole tensor


STATISTICS = {"sum", "mean", "amax", "amin", "max", "min", "var", "std", "norm", "logsumexp", "prod"}  # not any/all: a
# mask over the whole tensor reads as "no row handled", a different mistake with the same outputs


def _reduction_dims(nodes):
    """(index of the dim node, the call, the dim expression) for each statistic with dim= (or axis=)."""
    for node in nodes:
        if isinstance(node, ast.Call) and _call_name(node) in STATISTICS:
            for kw in node.keywords:
                if kw.arg in ("dim", "axis"):
                    yield _index(nodes, kw), node, kw.value


def op_axis_more(nodes, parents, ctx) -> Iterator[Site]:
    by_value: dict[int, list[int]] = {}
    calls: dict[int, list[int]] = {}
    for j, call, value in _reduction_dims(nodes):
        c = _int_value(value)
        if c is None and isinstance(value, ast.Name):
            what = _target_of(nodes, parents, call)
            yield (j,), (lambda k: ast.keyword(k.arg, _const(-1))), "axis-last", \
                f"the {_call_name(call)} that gives {what} runs over the last axis, not over `{value.id}`"
            yield (_index(nodes, call),), _whole, "axis-whole", \
                f"the {_call_name(call)} that gives {what} runs over the whole tensor, not along `{value.id}`: one " \
                f"value for every row, not one per row"
        elif c is not None:
            by_value.setdefault(c, []).append(j)
            calls.setdefault(c, []).append(_index(nodes, call))
    for c, js in sorted(by_value.items()):
        if c != 0:
            yield tuple(js), (lambda k: ast.keyword(k.arg, ast.Constant(0))), "axis-zero", \
                f"every reduction over axis {c} runs over axis 0 instead"
        yield tuple(calls[c]), _whole, "axis-whole", \
            f"every reduction over axis {c} runs over the whole tensor: one statistic in all, not one per row"


def op_axes_kept(nodes, parents, ctx) -> Iterator[Site]:
    """(a, *range(a + 2, n)), every axis but a + 1 → tuple(range(a + 1, n)), every axis but a."""
    for i, node in enumerate(nodes):
        if not (isinstance(node, ast.Tuple) and len(node.elts) == 2 and _int_value(node.elts[0]) is not None
                and isinstance(node.elts[1], ast.Starred) and isinstance(node.elts[1].value, ast.Call)
                and _call_name(node.elts[1].value) == "range" and len(node.elts[1].value.args) == 2
                and _int_value(node.elts[1].value.args[0]) == _int_value(node.elts[0]) + 2):
            continue
        a = _int_value(node.elts[0])
        what = _target_of(nodes, parents, node)
        yield (i,), (lambda n, a=a: ast.Call(ast.Name("tuple", ast.Load()), [ast.Call(ast.Name("range", ast.Load()),
                     [ast.Constant(a + 1), n.elts[1].value.args[1]], [])], [])), "axis-kept-other", \
            (f"{what} leaves out axis {a} instead of axis {a + 1}: the statistics are taken separately for each "
             f"index of axis {a}, and pooled over axis {a + 1}")


def _whole(call: ast.Call) -> ast.Call:
    call.keywords = [k for k in call.keywords if k.arg not in ("dim", "axis", "keepdim")]
    return call


# ----------------------------------------------------------------------------------------------
# term: one term of a sum or difference left out


def _chain(node: ast.AST) -> list[tuple[ast.AST, type]]:
    """a - b + c → [(a, Add), (b, Sub), (c, Add)]: the terms of a left-leaning chain of + and -."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        return _chain(node.left) + [(node.right, type(node.op))]
    return [(node, ast.Add)]


def _rebuild(terms) -> ast.AST:
    out = terms[0][0]
    for t, op in terms[1:]:
        out = ast.BinOp(out, op(), t)
    return out


def op_term(nodes, parents, ctx) -> Iterator[Site]:
    for i, node in enumerate(nodes):
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub))):
            continue
        parent = parents.get(id(node), (None,))[0]
        if isinstance(parent, ast.BinOp) and parent.left is node and isinstance(parent.op, (ast.Add, ast.Sub)):
            continue  # the top of the chain speaks for it
        terms = _chain(node)
        if not any(isinstance(t, ast.Call) or isinstance(t, ast.BinOp) for t, _ in terms[1:]):
            continue  # plain offsets (t - 1, i - window) are the slice and comparison families'
        what = _target_of(nodes, parents, node)
        for k in range(1, len(terms)):
            t = terms[k][0]
            if isinstance(t, ast.Constant) or not _names(t) - MODULES:
                continue
            yield (i,), (lambda n, k=k: _rebuild([x for j, x in enumerate(_chain(n)) if j != k])), "term-dropped", \
                f"the term {_short(t, 36)} is missing from {what}"
        if len(terms) > 2:
            yield (i,), (lambda n: _chain(n)[0][0]), "term-only-first", \
                f"{what} keeps only {_short(terms[0][0], 24)}: every term after it is missing"


# ----------------------------------------------------------------------------------------------
# parameter: not registered; ones ↔ zeros


def _is_parameter(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and _call_name(node) == "Parameter" and len(node.args) == 1


def op_parameter(nodes, parents, ctx) -> Iterator[Site]:
    params = [i for i, n in enumerate(nodes) if _is_parameter(n)]
    if params:
        yield tuple(params), (lambda c: c.args[0]), "parameter-plain", \
            ("the weights are plain tensors, not nn.Parameter: they are not trained, not in the state dict and not "
             "moved by .to()")
    for i in params:
        init = nodes[i].args[0]
        name = _call_name(init) if isinstance(init, ast.Call) else ""
        other = {"ones": "zeros", "zeros": "ones", "ones_like": "zeros_like", "zeros_like": "ones_like"}.get(name)
        if other:
            what = _target_of(nodes, parents, nodes[i])
            j = _index(nodes, init)
            yield (j,), (lambda c, other=other: _rename_call(c, other)), "parameter-init", \
                f"{what} starts at {other.split('_')[0]} instead of {name.split('_')[0]}"


    yield from _extra_bias(nodes)


def _extra_bias(nodes) -> Iterator[Site]:
    """A module with a gain of ones as its `weight` parameter and no bias given a bias as well (what LayerNorm has, RMSNorm has not):
    `self.bias`, zeros like the weight, beside it in the state dict, added to what forward returns (in its dtype)."""
    cls = nodes[0] if nodes and isinstance(nodes[0], ast.ClassDef) else None
    if cls is None or any(isinstance(n, ast.Attribute) and n.attr == "bias" for n in ast.walk(cls)):
        return
    weights = [n for n in ast.walk(cls) if isinstance(n, ast.Assign) and len(n.targets) == 1
               and _u(n.targets[0]) == "self.weight" and _is_parameter(n.value) and _gain(n.value.args[0])]
    forward = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
    returns = [n for n in ast.walk(forward) if isinstance(n, ast.Return) and n.value is not None] if forward else []
    if len(weights) != 1 or len(returns) != 1:
        return
    yield (0,), _with_bias, "parameter-extra-bias", \
        (f"`{cls.name}` has a `bias` parameter beside `weight`, which the text does not give it: its state dict has "
         f"a `bias` key that the module's checkpoints lack, and its output adds that bias")


def _gain(init: ast.AST) -> bool:
    """torch.ones(dim): a gain vector of ones, one per feature."""
    return isinstance(init, ast.Call) and _call_name(init) == "ones" and len(init.args) == 1


def _with_bias(cls: ast.ClassDef) -> ast.ClassDef:
    for holder in ast.walk(cls):
        for field in ("body", "orelse"):
            body = getattr(holder, field, None)
            if not isinstance(body, list):
                continue
            for k, stmt in enumerate(list(body)):
                if isinstance(stmt, ast.Assign) and _u(stmt.targets[0]) == "self.weight":
                    body.insert(k + 1, ast.parse("self.bias = nn.Parameter(torch.zeros_like(self.weight))").body[0])
                    break
                if isinstance(stmt, ast.Return) and stmt.value is not None:
                    body[k:k + 1] = [ast.Assign([ast.Name("_out", ast.Store())], stmt.value, lineno=0),
                                     ast.parse("return _out + self.bias.to(_out.dtype)").body[0]]
                    break
    return cls


# ----------------------------------------------------------------------------------------------
# statistic: mean |x| for the root mean square; the input centred


def _mean_square(node: ast.AST) -> tuple[ast.AST, ast.Call] | None:
    """x.pow(2).mean(...) or (x ** 2).mean(...) → (x, the mean call)."""
    if _attr_call(node, "mean"):
        r = node.func.value
        if _attr_call(r, "pow") and len(r.args) == 1 and _int_value(r.args[0]) == 2:
            return r.func.value, node
        if isinstance(r, ast.BinOp) and isinstance(r.op, ast.Pow) and _int_value(r.right) == 2:
            return r.left, node
    return None


def op_statistic(nodes, parents, ctx) -> Iterator[Site]:
    for i, node in enumerate(nodes):
        if not (isinstance(node, ast.Call) and _call_name(node) == "rsqrt" and len(node.args) == 1):
            continue
        arg = node.args[0]
        ms = _mean_square(arg.left if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Add) else arg)
        if ms is None:
            continue
        x = _short(ms[0], 16)
        yield (i,), _mean_abs, "statistic-mean-abs", \
            f"`{x}` is divided by the mean of |{x}|, not by the root of the mean of its squares"
    for i, node in enumerate(nodes):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        v = node.targets[0].id
        dims = [c.keywords for n in nodes if (ms := _mean_square(n)) and isinstance(ms[0], ast.Name) and ms[0].id == v
                for c in [ms[1]]]
        if dims and isinstance(node.value, ast.Call):
            d = next((k.value for k in dims[0] if k.arg in ("dim", "axis")), _const(-1))
            j = _index(nodes, node.value)
            yield (j,), (lambda e, d=d: ast.BinOp(e, ast.Sub(), ast.Call(ast.Attribute(copy.deepcopy(e), "mean",
                ast.Load()), [], [ast.keyword("dim", copy.deepcopy(d)), ast.keyword("keepdim", ast.Constant(True))]))), \
                "statistic-centred", f"`{v}` is centred (its mean subtracted) before it is scaled: that re-centring " \
                f"is not part of this normalisation"


def op_cast_order(nodes, parents, ctx) -> Iterator[Site]:
    """A product with a weight done in float32 before a returned cast back to the input's dtype, moved after
    that cast (the weight applied in the low precision). No line of any solution is quoted here: this module
    is in the child build a student's code can read (tests/e2e/test_child_build.py)."""
    back = {}
    for n in nodes:
        if isinstance(n, ast.Return) and _attr_call(n.value, "to") and isinstance(n.value.func.value, ast.Name):
            back.setdefault(n.value.func.value.id, n.value)
    for i, node in enumerate(nodes):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.BinOp) and isinstance(node.value.op, ast.Mult)
                and isinstance(node.value.left, ast.Name) and node.value.left.id == node.targets[0].id):
            continue
        v, cast = node.targets[0].id, back.get(node.targets[0].id)
        if cast is None:
            continue
        w = node.value.right
        w = w.func.value if _attr_call(w, "float") and not w.args else w
        yield (i,), (lambda n, cast=cast, w=w: ast.Return(ast.BinOp(copy.deepcopy(cast), ast.Mult(), copy.deepcopy(w)))), \
            "cast-after-product", \
            (f"`{v}` is cast back ({_short(cast, 20)}) before it is multiplied by {_short(w, 16)}, not after: the "
             f"product's dtype follows type promotion, not the input's dtype")


def _mean_abs(call: ast.Call) -> ast.AST:
    arg = call.args[0]
    add = isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Add)
    x, mean = _mean_square(arg.left if add else arg)
    stat = ast.Call(ast.Attribute(ast.Call(ast.Attribute(x, "abs", ast.Load()), [], []), "mean", ast.Load()),
                    mean.args, mean.keywords)
    return ast.BinOp(ast.Constant(1), ast.Div(), ast.BinOp(stat, ast.Add(), arg.right) if add else stat)


# ----------------------------------------------------------------------------------------------
# device, fill, diagonal


def op_device(nodes, parents, ctx) -> Iterator[Site]:
    for i, node in enumerate(nodes):
        if isinstance(node, ast.Call) and _call_name(node) not in ("to",) and \
                any(k.arg == "device" and not (isinstance(k.value, ast.Constant)) for k in node.keywords):
            what = _target_of(nodes, parents, node)
            yield (i,), (lambda c: _without_kw(c, "device")), "device-dropped", \
                f"{what} is made on the default device, not on the input's (device= is missing)"


def op_fill(nodes, parents, ctx) -> Iterator[Site]:
    by_mask: dict[str, list[int]] = {}
    softmaxes = [i for i, n in enumerate(nodes) if isinstance(n, ast.Call) and _call_name(n) == "softmax"
                 and isinstance(parents.get(id(n), (None,))[0], ast.Assign)]
    for i, node in enumerate(nodes):
        if _attr_call(node, "masked_fill") and len(node.args) == 2:
            by_mask.setdefault(_u(node.args[0]), []).append(i)
            if not _is_neginf(node.args[1]):
                continue
            what, m, s = _target_of(nodes, parents, node), _short(node.args[0], 16), _short(node.func.value, 16)
            yield (i,), _fill_multiplied, "fill-multiplied", \
                (f"{what} is set by multiplying {m} by -inf instead of selecting with it: where {m} is False that "
                 f"is 0 × -inf, which is NaN")
            yield (i,), _fill_float_bias, "fill-float-bias", \
                (f"{what} adds a float32 bias ({m} × -1e9) to {s} instead of filling it with -inf: the sum is "
                 f"at least float32, whatever the dtype of {s}")
            later = sorted((nodes[j].lineno, j) for j in softmaxes if nodes[j].lineno > node.lineno)
            guard = _guard(parents, node)
            if later:
                yield (i, later[0][1]), (lambda n, m=node.args[0], g=guard: _fill_after(n, m, g)), "fill-after-softmax", \
                    (f"the weights are set to 0 where {m} is True after the softmax, instead of {s} being filled "
                     f"before it: the weights left no longer sum to 1")
    if len(by_mask) < 2:
        return  # one mask: dropping it is `default`'s "the mask is ignored"
    for m, idx in by_mask.items():
        value = _short(nodes[idx[0]].args[1], 16)
        yield tuple(idx), (lambda c: c.func.value), "fill-dropped", \
            f"the entries {m} selects are never set to {value}: that masked_fill is missing"


def _fill_multiplied(call: ast.Call) -> ast.AST:
    recv, m = call.func.value, call.args[0]
    bias = ast.BinOp(ast.Call(ast.Attribute(m, "to", ast.Load()), [ast.Attribute(copy.deepcopy(recv), "dtype",
                     ast.Load())], []), ast.Mult(), call.args[1])
    return ast.BinOp(recv, ast.Add(), bias)


def _fill_float_bias(call: ast.Call) -> ast.AST:
    bias = ast.BinOp(ast.Call(ast.Attribute(call.args[0], "float", ast.Load()), [], []), ast.Mult(), _const(-1e9))
    return ast.BinOp(call.func.value, ast.Add(), bias)


def _guard(parents, node) -> ast.AST | None:
    """The test of the `if` the statement holding `node` sits in (`mask is not None`), or None."""
    cur = node
    while id(cur) in parents:
        parent = parents[id(cur)][0]
        if isinstance(parent, ast.If) and cur in parent.body:
            return parent.test
        if isinstance(parent, (ast.FunctionDef, ast.ClassDef)):
            return None
        cur = parent
    return None


def _fill_after(node: ast.AST, mask: ast.AST, guard: ast.AST | None) -> ast.AST:
    if _attr_call(node, "masked_fill"):
        return node.func.value  # the scores are left as they are
    filled = ast.Call(ast.Attribute(copy.deepcopy(node), "masked_fill", ast.Load()), [copy.deepcopy(mask),
                                                                                       ast.Constant(0.0)], [])
    return filled if guard is None else ast.IfExp(copy.deepcopy(guard), filled, node)


def op_diagonal_offset(nodes, parents, ctx) -> Iterator[Site]:
    for i, node in enumerate(nodes):
        if isinstance(node, ast.Call) and _call_name(node) in ("tril", "triu"):
            for kw in node.keywords:
                if kw.arg == "diagonal" and _names(kw.value) - MODULES:
                    what = _target_of(nodes, parents, node)
                    yield (i,), (lambda c: _without_kw(c, "diagonal")), "diagonal-offset-dropped", \
                        (f"the {_call_name(node)} that gives {what} is aligned at the top left: its edge is the main "
                         f"diagonal, without the offset {_short(kw.value, 20)}")


OPERATORS = (op_layout, op_layer, op_scale_size, op_returned, op_fallback, op_flag, op_axis_more, op_axes_kept, op_term,
             op_parameter, op_statistic, op_cast_order, op_device, op_fill, op_diagonal_offset)

# The families each operator's ids belong to (`<family>-<variant>`), where the function's name is not the family
# (tests/unit/test_hints_follow_cause.py: every family has a hint).
for _op, _families in ((op_layout, ("layout", "repeat")), (op_scale_size, ("scale",)), (op_fallback, ("default",)),
                       (op_flag, ("default",)), (op_axis_more, ("axis",)), (op_axes_kept, ("axis",)),
                       (op_cast_order, ("cast",)), (op_diagonal_offset, ("diagonal",))):
    _op.families = _families

HINTS = {
    "layout": "Fill a small input with each entry's own index (torch.arange(...).view(...)) and print it after "
              "each view, reshape and transpose: does every axis still mean what its name says?",
    "layer": "Follow the data from the input to the return line and tick off each layer the text lists: is "
             "every one of them applied?",
    "returned": "Print the shape of each tensor you return and compare it with the shape the docstring states.",
    "term": "Write the formula out term by term and match each term to a piece of your code: which one has "
            "no counterpart?",
    "parameter": "List your module's parameters and its state dict right after construction: is each weight "
                 "there, and does it start at the value the text gives?",
    "statistic": "Which statistic does the text divide by, and is anything subtracted from the input first? "
                 "Compute it by hand for a row of three numbers.",
    "device": "Build your input on the meta device and print the device of each tensor your code makes.",
    "fill": "List every mask your code computes and where it is applied: is each one used everywhere the "
            "text asks?",
}

from .mutation_ast import MODULES, Site, _call_name, _const, _int_value, _is_sqrt, _is_neginf, _names, \
    _rename_call, _short, _target_of, _u, _without_kw  # noqa: E402  (the shared ast helpers)


# ----------------------------------------------------------------------------------------------
# Appended families (issue 44, the outside measure's biggest unnamed groups): an argument's validation, and a
# size read from the wrong tensor or axis. Each fires only where its pattern is in the code.

_ERRORS = {"ValueError", "TypeError"}
_FLIP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}
_SYM = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


def _raises(node: ast.If) -> str | None:
    """The error an `if` raises straight in its body (an argument's validation), or None."""
    for s in node.body:
        if isinstance(s, ast.Raise) and s.exc is not None:
            f = s.exc.func if isinstance(s.exc, ast.Call) else s.exc
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if name in _ERRORS:
                return name
    return None


def _validated(node: ast.AST) -> str:
    """The names a validation's test checks, as the student knows them: `window`, and `self.config.block_size`
    as `block_size` (the last name of a chain of attributes)."""
    out, inner = [], set()
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute):
            inner.add(id(n.value))
    for n in ast.walk(node):
        if id(n) in inner:
            continue
        name = n.attr if isinstance(n, ast.Attribute) else n.id if isinstance(n, ast.Name) else None
        if isinstance(n, ast.Name) and (n.id in MODULES or n.id in ("self", "len", "isinstance", "int", "float")):
            name = None
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in MODULES:
            name = None
        if name and name not in out:
            out.append(name)
    return ", ".join(f"`{x}`" for x in out[:3]) or "its arguments"


def _polarity(parents, node: ast.AST, test: ast.AST) -> bool:
    """True when `node` being true makes `test` true (an even number of `not`s between them)."""
    flips, cur = 0, node
    while cur is not test and id(cur) in parents:
        parent = parents[id(cur)][0]
        flips += isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not)
        cur = parent
    return flips % 2 == 0


def _flip_op(node: ast.Compare, k: int) -> ast.Compare:
    node.ops = [(_FLIP[type(o)]() if j == k else o) for j, o in enumerate(node.ops)]
    return node


def op_guard(nodes, parents, ctx) -> Iterator[Site]:
    """An argument's validation (`if <test>: raise ValueError`) off by one at its limit, or missing. The bound
    comes first: where the checks pass only the limit itself, a missing validation and a bound that lets the
    limit through give the same observations, and the first is the one kept (mutations.py merges the rest), so
    its sentence, which accepts the limit, says both. A divisibility test (`a % b`) may also reject b equal to a
    (a student who asks for fewer KV heads than query heads), last of the family."""
    stricter = []
    for i, node in enumerate(nodes):
        if not isinstance(node, ast.If):
            continue
        error = _raises(node)
        if error is None:
            continue
        what = _validated(node.test)
        for j, cmp in enumerate(nodes):
            if not (isinstance(cmp, ast.Compare) and _inside(parents, cmp, node.test)):
                continue
            for k, op in enumerate(cmp.ops):
                if type(op) not in _FLIP:
                    continue
                operands = [cmp.left] + cmp.comparators
                left, right = operands[k], operands[k + 1]
                on_right = bool(_names(left) - MODULES) or not _names(right) - MODULES
                limit, value = (_short(right, 24), _short(left, 24)) if on_right else (_short(left, 24), _short(right, 24))
                # the flipped bound now holds at equality (<=, >=) or no longer does; through the `not`s
                raises = _polarity(parents, cmp, node.test) == (_FLIP[type(op)] in (ast.LtE, ast.GtE))
                said = (f"`{value}` exactly at its limit `{limit}` is rejected, where the text accepts it: the "
                        f"validation's bound is too strict there" if raises else
                        f"`{value}` exactly at its limit `{limit}` is accepted, where the text rejects it with a "
                        f"{error}: the validation lets that value through")
                yield (j,), (lambda n, k=k: _flip_op(n, k)), "guard-boundary", said
        yield (i,), (lambda n: (setattr(n, "test", ast.Constant(False)), n)[1]), "guard-missing", \
            (f"the validation of {what} is missing: a value the text rejects is accepted, with no {error} "
             f"naming the argument")
        for mod in (n for n in ast.walk(node.test) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod)):
            a, b = mod.left, mod.right
            if not (_names(a) - MODULES and _names(b) - MODULES) or _u(a) == _u(b):
                continue
            stricter.append(((i,), (lambda n, a=a, b=b: _or_equal(n, a, b)), "guard-equal-rejected",
                             f"`{_bare(b)}` equal to `{_bare(a)}` is rejected, where the text accepts it: {_bare(a)} % "
                             f"{_bare(b)} is 0 there; the validation asks for more than that"))
    yield from _loosened(nodes, parents)
    yield from stricter  # (last: a divisibility test that also rejects the two sizes equal)  # (after every other site of the family: a cap keeps those first)


def _bare(node: ast.AST) -> str:
    return _short(node, 24).removeprefix("self.")


def _or_equal(node: ast.If, a: ast.AST, b: ast.AST) -> ast.If:
    """`if test: raise` → `if test or b == a: raise` (the two sizes equal, rejected too)."""
    node.test = ast.BoolOp(ast.Or(), [node.test, ast.Compare(copy.deepcopy(b), [ast.Eq()], [copy.deepcopy(a)])])
    return node


_LOOSE = {ast.Lt: -1, ast.Gt: 1}  # a strict integer limit moved one step outwards (<= and >= are flipped above)


def _loosened(nodes, parents) -> Iterator[Site]:
    """A validation's strict integer limit one step too far (`value < 1` → `value < 0`: 0 let through). Inside a loop
    over field names (`for f in ("a", "b"):`, each field's value tested against one limit) one field at a time, the
    others validated as before: the limit of one field written apart, one too far."""
    for i, node in enumerate(nodes):
        test = node.test if isinstance(node, ast.If) and _raises(node) else None
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _LOOSE):
            continue
        c, step = _int_value(test.comparators[0]), _LOOSE[type(test.ops[0])]
        if c is None or not _names(test.left) - MODULES:
            continue
        j = next(k for k, n in enumerate(nodes) if n is test)
        let = lambda n, c=c, step=step: ast.Compare(n.left, n.ops, [_const(c + step)])  # noqa: E731
        loop = parents.get(id(node), (None,))[0]
        fields = [e.value for e in getattr(getattr(loop, "iter", None), "elts", [])
                  if isinstance(e, ast.Constant) and isinstance(e.value, str)] if isinstance(loop, ast.For) and \
            isinstance(loop.target, ast.Name) else []
        if not fields:
            yield (j,), let, "guard-loose", \
                (f"`{_short(test.left, 24)}` = {c + step} is accepted, where the text rejects it with a "
                 f"{_raises(node)}: the validation's limit is one step too far")
            continue
        for field in fields:
            yield (j,), (lambda n, field=field, let=let, var=loop.target.id: ast.IfExp(ast.Compare(
                ast.Name(var, ast.Load()), [ast.Eq()], [ast.Constant(field)]), let(copy.deepcopy(n)), n)), \
                "guard-loose", (f"`{field}` = {c + step} is accepted, where the text rejects it with a {_raises(node)} "
                                f"(the other fields are validated as before): its limit is one step too far")


def _inside(parents, node: ast.AST, root: ast.AST) -> bool:
    cur = node
    while cur is not root:
        if id(cur) not in parents:
            return False
        cur = parents[id(cur)][0]
    return True


def _shape_read(node: ast.AST) -> tuple[ast.AST, int] | None:
    """(tensor, axis) of `t.shape[k]` or `t.size(k)` with a constant k, else None."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
        k = _int_value(node.slice)
        return (node.value.value, k) if k is not None else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size" and \
            len(node.args) == 1 and not node.keywords:
        k = _int_value(node.args[0])
        return (node.func.value, k) if k is not None else None
    return None


def _size_of(t: str, k: int) -> ast.AST:
    return ast.Subscript(ast.Attribute(ast.Name(t, ast.Load()), "shape", ast.Load()), _const(k), ast.Load())


def _axis_text(k: int) -> str:
    return {-1: "last axis", -2: "axis -2", -3: "axis -3"}.get(k, f"axis {k}")


def op_size_source(nodes, parents, ctx) -> Iterator[Site]:
    """A size read from another tensor argument, or from another of the same tensor's last two axes: at a
    `t.shape[k]` of its own, or at one use of a name that holds one (`D = x.shape[-1]` then `... / D`)."""
    tensors = [a.arg for args in _params(nodes) for a in args.args + args.kwonlyargs
               if a.annotation is not None and "Tensor" in _u(a.annotation)]
    held = {}  # a name assigned once from a shape read -> (tensor, axis)
    assigned: dict[str, int] = {}
    for n in nodes:
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            assigned[n.targets[0].id] = assigned.get(n.targets[0].id, 0) + 1
            read = _shape_read(n.value)
            if read and isinstance(read[0], ast.Name):
                held[n.targets[0].id] = (read[0].id, read[1])
    held = {k: v for k, v in held.items() if assigned[k] == 1}
    uses = {name: sum(1 for n in nodes if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load))
            for name in held}
    for i, node in enumerate(nodes):
        read = _shape_read(node)
        if read and isinstance(read[0], ast.Name):
            t, k, said = read[0].id, read[1], f"the size {_short(node, 20)}"
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in held and uses[node.id] > 1:
            (t, k), said = held[node.id], f"one use of `{node.id}`"
        else:
            continue
        if t not in tensors or k not in (-1, -2):
            continue
        what = _target_of(nodes, parents, node)
        for other in tensors:
            for axis in (-1, -2):
                if (other, axis) == (t, k):
                    continue
                yield (i,), (lambda n, o=other, a=axis: _size_of(o, a)), "sizeof-other", \
                    (f"{said} in {what} is taken from {other}'s {_axis_text(axis)}, not from {t}'s "
                     f"{_axis_text(k)}: two sizes that agree only when those axes are equal")


OPERATORS += (op_guard, op_size_source)
op_size_source.families = ("sizeof",)
HINTS["sizeof"] = ("For each size your code reads from a tensor's shape, say what it counts (batch, heads, queries, "
                  "keys, features) and check it against the size the text uses at that place.")
HINTS["guard"] = ("Call your code with each value the text says must raise, and with the values just inside "
                  "each limit: which ones raise, and which should?")


def _siblings(nodes) -> dict[str, list[str]]:
    """`self.<name>` assigned a call, grouped by the call that builds it (`nn.Linear(d, d, bias=bias)`): layers of
    one kind and one shape, so that one can stand in for the other."""
    kinds: dict[str, list[str]] = {}
    for n in nodes:
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.value, ast.Call):
            t = n.targets[0]
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                kinds.setdefault(_u(n.value), []).append(t.attr)
    return {k: v for k, v in kinds.items() if len(v) > 1}


def op_sibling(nodes, parents, ctx) -> Iterator[Site]:
    """One call of a layer made with another layer of the same kind (`self.q_proj(key)` for `self.k_proj(key)`,
    `self.ln1(x)` for `self.ln2(x)`): a copy of a neighbouring line left unchanged. The layer built just before
    comes first (a line copied from the one above), then the others."""
    kind_of = {name: names for names in _siblings(nodes).values() for name in names}
    first, rest = [], []
    for i, node in enumerate(nodes):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and
                isinstance(node.func.value, ast.Name) and node.func.value.id == "self" and node.func.attr in kind_of):
            continue
        own, names = node.func.attr, kind_of[node.func.attr]
        what = _target_of(nodes, parents, node)
        for other in names:
            if other == own:
                continue
            site = ((i,), (lambda c, o=other: (setattr(c.func, "attr", o), c)[1]), "sibling-layer",
                    f"{what} goes through `self.{other}` where `self.{own}` belongs: two layers built the same way, "
                    f"one used in the other's place")
            (first if names.index(other) == names.index(own) - 1 else rest).append(site)
    yield from first + rest


OPERATORS += (op_sibling,)
HINTS["sibling"] = ("List your layers that are built the same way (the projections, the norms) and, for each call, "
                    "say which one the text applies there: is any of them used twice and another never?")


_INPLACE = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}


def op_inplace(nodes, parents, ctx) -> Iterator[Site]:
    """`y = x - c` with x a tensor argument written as `x -= c; y = x`: the caller's tensor modified in place."""
    tensors = {a.arg for args in _params(nodes) for a in args.args + args.kwonlyargs
               if a.annotation is not None and "Tensor" in _u(a.annotation)}
    for i, node in enumerate(nodes):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.BinOp) and type(node.value.op) in _INPLACE
                and isinstance(node.value.left, ast.Name) and node.value.left.id in tensors):
            continue
        x, y = node.value.left.id, node.targets[0].id
        rebound = [n.lineno for n in nodes if isinstance(n, ast.Name) and n.id == x and isinstance(n.ctx, ast.Store)]
        if y == x or any(line <= node.lineno for line in rebound):
            continue  # `x` no longer the caller's tensor there (or the statement rebinds it)
        yield (i,), (lambda n, x=x: ast.If(ast.Constant(True), [
            ast.AugAssign(ast.Name(x, ast.Store()), n.value.op, n.value.right),
            ast.Assign([ast.Name(n.targets[0].id, ast.Store())], ast.Name(x, ast.Load()))], [])), "inplace-input", \
            (f"`{y}` is made by changing the argument `{x}` in place ({x} {_INPLACE[type(node.value.op)]}= …): the "
             f"caller's tensor is modified, and a second call sees it changed")


OPERATORS += (op_inplace,)
HINTS["inplace"] = ("Call your function twice on the same tensor and compare the tensor before and after: does any "
                    "line write into an argument (`x -= ...`, `x[...] = ...`, a method ending in `_`)?")


_ACTS = ("silu", "gelu", "relu", "sigmoid", "tanh")  # the nonlinearities a gated branch uses


def op_activation_outer(nodes, parents, ctx) -> Iterator[Site]:
    """act(a) * b → act(a * b): the nonlinearity applied to the product of the two branches, not to one of them."""
    def _activation(n):
        return _call_name(n) if isinstance(n, ast.Call) and _call_name(n) in _ACTS and len(n.args) == 1 else None

    for i, node in enumerate(nodes):
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult)):
            continue
        for side, other in (("left", "right"), ("right", "left")):
            act = _activation(getattr(node, side))
            if act and not _activation(getattr(node, other)):
                what = _target_of(nodes, parents, node)
                yield (i,), (lambda n, side=side, other=other: _act_outside(n, side, other)), "activation-outside", \
                    (f"in {what}, {act} is applied to the product of the two branches, not to "
                     f"{_short(getattr(node, side).args[0], 24)} alone before the product")


def _act_outside(node: ast.BinOp, side: str, other: str) -> ast.Call:
    act = getattr(node, side)
    setattr(node, side, act.args[0])
    act.args = [node]
    return act


op_activation_outer.families = ("activation",)
OPERATORS += (op_activation_outer,)


_LIMITS = {"abs": "negative values keep their sign", "clamp": "values outside the bounds pass through unchanged",
           "clamp_min": "values below the floor pass through unchanged",
           "clamp_max": "values above the ceiling pass through unchanged",
           "nan_to_num": "NaN and infinite values pass through unchanged"}


def op_limit(nodes, parents, ctx) -> Iterator[Site]:
    """A method that bounds values (abs, clamp, clamp_min, clamp_max, nan_to_num) left out: `t.abs()` → `t`."""
    for i, node in enumerate(nodes):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _LIMITS and \
                not (isinstance(node.func.value, ast.Name) and node.func.value.id in MODULES):
            meth, base = node.func.attr, node.func.value
            what = _target_of(nodes, parents, node)
            yield (i,), (lambda c: c.func.value), "limit-dropped", \
                (f"in {what}, {_short(base, 24)} is used without .{meth}(): {_LIMITS[meth]}")


OPERATORS += (op_limit,)
HINTS["limit"] = ("Which values must be bounded or made positive before they are used (a distance, a divisor, a "
                  "count)? Try an input that reaches the edge: a negative difference, a zero, an empty row.")


def _param_name(node: ast.AST) -> str | None:
    """`weight`, `gain` or `bias` when the expression is one (self.weight, a cast of the weight, w.to(x.dtype))."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        node = node.func.value
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return next((k for k in ("weight", "gain", "bias") if k in name.lower()), None)


def op_combine(nodes, parents, ctx) -> Iterator[Site]:
    """A gain added instead of multiplied (`y * weight` → `y + weight`), a bias multiplied instead of added."""
    for i, node in enumerate(nodes):
        if not (isinstance(node, ast.BinOp) and type(node.op) in (ast.Mult, ast.Add)):
            continue
        kind = _param_name(node.right) or _param_name(node.left)
        if kind is None or (kind == "bias") != isinstance(node.op, ast.Add):
            continue
        p = node.right if _param_name(node.right) else node.left
        what = _target_of(nodes, parents, node)
        if kind == "bias":
            yield (i,), (lambda n: (setattr(n, "op", ast.Mult()), n)[1]), "combine-bias-multiplied", \
                f"in {what}, {_short(p, 24)} multiplies instead of being added: a bias shifts each feature"
        else:
            yield (i,), (lambda n: (setattr(n, "op", ast.Add()), n)[1]), "combine-gain-added", \
                f"in {what}, {_short(p, 24)} is added instead of multiplied: a gain scales each feature"


OPERATORS += (op_combine,)
HINTS["combine"] = ("For each learned vector, say what it does to a feature: does it scale it (a gain, multiplied) "
                    "or shift it (a bias, added)? Check the operation your code uses for each.")


def op_view(nodes, parents, ctx) -> Iterator[Site]:
    """`.reshape(...)` → `.view(...)`: a view of a tensor that may not be contiguous (transposed, sliced)."""
    for i, node in enumerate(nodes):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "reshape" and \
                not (isinstance(node.func.value, ast.Name) and node.func.value.id in MODULES):
            what = _target_of(nodes, parents, node)
            yield (i,), (lambda c: (setattr(c.func, "attr", "view"), c)[1]), "view-not-contiguous", \
                (f"{what} reshapes {_short(node.func.value, 24)} with .view: a view needs memory laid out in that "
                 f"order, so it fails on a transposed or sliced tensor, where .reshape copies")


OPERATORS += (op_view,)
HINTS["view"] = ("Give your function a non-contiguous input (`x.transpose(0, 1).contiguous().transpose(0, 1)`, or a "
                 "slice) and see which line fails: which of your reshapes may meet such a tensor?")


def op_count_from_one(nodes, parents, ctx) -> Iterator[Site]:
    """`torch.arange(n)` → `torch.arange(1, n + 1)`: positions (or indices) counted from 1, not from 0."""
    for i, node in enumerate(nodes):
        if isinstance(node, ast.Call) and _call_name(node) == "arange" and len(node.args) == 1 and \
                not any(k.arg in ("start", "end") for k in node.keywords):
            n = node.args[0]
            what = _target_of(nodes, parents, node)
            yield (i,), (lambda c: (setattr(c, "args", [ast.Constant(1), ast.BinOp(c.args[0], ast.Add(),
                                                                                    ast.Constant(1))]), c)[1]), \
                "count-from-one", (f"{what} counts from 1 to {_short(n, 20)}, not from 0 to {_short(n, 20)} − 1: "
                                   f"every position is one too far")


op_count_from_one.families = ("count",)
OPERATORS += (op_count_from_one,)
HINTS["count"] = ("Print the first few positions (or indices) your code makes: does the first one start at 0?")


_ROUNDED = {"int": "int() truncates it", "round": "round() rounds it", "floor": "it is rounded down",
            "ceil": "it is rounded up"}


def _unrounded(value: ast.AST) -> tuple[ast.AST, str] | None:
    """(the value before its rounding, what the rounding does) for `int(e)`, `round(e)`, `math.floor(e)`,
    `math.ceil(e)`, and `2 ** math.floor(math.log2(x))` (x's largest power of two at most x: x itself); else None."""
    if isinstance(value, ast.Call) and len(value.args) == 1 and not value.keywords:
        name = _call_name(value)
        module = isinstance(value.func, ast.Attribute) and isinstance(value.func.value, ast.Name) and \
            value.func.value.id in MODULES
        if (name in ("int", "round") and isinstance(value.func, ast.Name)) or (name in ("floor", "ceil") and module):
            return value.args[0], _ROUNDED[name]
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Pow) and _int_value(value.left) == 2:
        e = value.right
        if isinstance(e, ast.Call) and _call_name(e) in ("floor", "ceil") and len(e.args) == 1 and \
                isinstance(e.args[0], ast.Call) and _call_name(e.args[0]) == "log2" and len(e.args[0].args) == 1:
            return e.args[0].args[0], f"it is rounded {'down' if _call_name(e) == 'floor' else 'up'} to a power of two"
    return None


def op_unrounded(nodes, parents, ctx) -> Iterator[Site]:
    """A name assigned a rounded value (`n = int(e)`) read unrounded (`e` itself) by the statements after it, up to
    and including the one that assigns the name again: a rounding skipped at one step (a value truncated once, at
    the end, where each step truncates it; a count used as it is where its power of two belongs)."""
    stores: dict[str, list[int]] = {}
    for n in nodes:
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            stores.setdefault(n.id, []).append(n.lineno)
    for node in nodes:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        got = _unrounded(node.value)
        if got is None or not _names(got[0]) - MODULES:
            continue
        inner, how = got
        name = node.targets[0].id
        until = min((line for line in stores.get(name, []) if line > node.end_lineno), default=float("inf"))
        uses = [j for j, n in enumerate(nodes) if isinstance(n, ast.Name) and n.id == name and
                isinstance(n.ctx, ast.Load) and node.end_lineno < n.lineno <= until]
        if not uses:
            continue
        what = _target_of(nodes, parents, nodes[uses[0]])
        what = f"the next `{name}`" if what == f"`{name}`" else what  # (`n = int(c * n)`: the step after)
        itself = f": it gets {_short(inner, 20)} itself" if isinstance(inner, (ast.Name, ast.Attribute)) else ""
        yield tuple(uses), (lambda n, inner=inner: copy.deepcopy(inner)), "unrounded-value", \
            f"{what} reads `{name}` before {how}{itself}: a rounding that belongs at that step is skipped"


OPERATORS += (op_unrounded,)
HINTS["unrounded"] = ("For each value your code rounds (int(), floor, a power of two), say at which step the text "
                      "rounds it, and check that every later step reads the rounded value, not the one before it.")


def _range_pairs(nodes) -> dict[str, tuple[str, bool]]:
    """{name: (its partner, whether the name is the range's start)} for the names the scope assigns in pairs that
    bound one range: `qs`/`qe`, `start`/`end` or `stop`, `x_start`/`x_end`, `lo`/`hi`, `begin`/`end`."""
    assigned = {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    out = {}
    for a in assigned:
        ends = [a[:-1] + "e"] if len(a) == 2 and a.endswith("s") else []
        for start, stop in (("start", "end"), ("start", "stop"), ("lo", "hi"), ("begin", "end")):
            if a.endswith(start):
                ends.append(a[: len(a) - len(start)] + stop)
        for b in ends:
            if b in assigned and b != a:
                out[a], out[b] = (b, True), (a, False)
    return out


def op_ends(nodes, parents, ctx) -> Iterator[Site]:
    """One read of a range's end replaced by its start, or of its start by its end (`qe + shift` → `qs + shift`),
    where the statement does not use both (a slice `qs:qe` or a size `qe - qs` made empty is no one's mistake)."""
    pairs = _range_pairs(nodes)
    for i, node in enumerate(nodes):
        if not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in pairs):
            continue
        other, is_start = pairs[node.id]
        root, stmt = node, None
        while id(root) in parents and not isinstance(parents[id(root)][0], ast.stmt):
            root = parents[id(root)][0]
        stmt = parents.get(id(root), (None,))[0]
        targets = [n.id for t in getattr(stmt, "targets", []) + [getattr(stmt, "target", None)] if t is not None
                   for n in ast.walk(t) if isinstance(n, ast.Name)]
        if other in _names(root) or other in targets or isinstance(stmt, ast.For) and root is stmt.iter:
            continue
        what = _target_of(nodes, parents, node)
        own, new = ("start", "end") if is_start else ("end", "start")
        yield (i,), (lambda n, o=other: ast.Name(o, ast.Load())), "ends-swapped", \
            (f"{what} reads `{other}`, where its range {'ends' if is_start else 'starts'}, in place of `{node.id}`, "
             f"where it {'starts' if is_start else 'ends'}: the range's {new} used for its {own}")


OPERATORS += (op_ends,)
HINTS["ends"] = ("For each range your code walks (a tile, a block, a window), write which position each bound "
                 "names: the first one, or one past the last? Check every place that reads a bound against it.")


def _a_mask(value: ast.AST) -> bool:
    """Does the expression make a mask (a triangle, `tril`/`triu`, or a tensor of dtype bool)?"""
    return any(isinstance(c, ast.Call) and (_call_name(c) in ("tril", "triu") or any(
        k.arg == "dtype" and _u(k.value) == "torch.bool" for k in c.keywords)) for c in ast.walk(value))


def op_once(nodes, parents, ctx) -> Iterator[Site]:
    """A mask a module's forward makes afresh on every call (`mask = torch.ones(T, T, ...).tril()`) made once, at
    the first call, and kept on the module: every later call reuses it, whatever its length or device."""
    for fn in nodes:
        if not (isinstance(fn, ast.FunctionDef) and fn.name not in ("__init__", "__post_init__") and fn.args.args
                and fn.args.args[0].arg == "self" and isinstance(parents.get(id(fn), (None,))[0], ast.ClassDef)):
            continue
        for stmt in ast.walk(fn):
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                    and _a_mask(stmt.value)):
                continue
            i = next((k for k, n in enumerate(nodes) if n is stmt), None)
            if i is None:
                continue
            name = stmt.targets[0].id
            yield (i,), (lambda s, name=name: _made_once(s, name)), "once-kept", \
                (f"the mask `{name}` is made once, at the first call, and kept on the module: every later call "
                 f"reuses it, though its length (or device) may differ")


def _made_once(stmt: ast.Assign, name: str) -> ast.If:
    kept = ast.Attribute(ast.Name("self", ast.Load()), f"_first_{name}", ast.Load())
    first = ast.If(ast.UnaryOp(ast.Not(), ast.Call(ast.Name("hasattr", ast.Load()), [
        ast.Name("self", ast.Load()), ast.Constant(f"_first_{name}")], [])),
        [ast.Assign([ast.Attribute(ast.Name("self", ast.Load()), f"_first_{name}", ast.Store())], stmt.value)], [])
    return ast.If(ast.Constant(True), [first, ast.Assign([ast.Name(name, ast.Store())], kept)], [])


OPERATORS += (op_once,)
HINTS["once"] = ("Call your module twice, with two different sequence lengths: is anything your forward made on the "
                 "first call reused on the second?")
