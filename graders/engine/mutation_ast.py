"""The ast helpers every mutation operator module shares (mutations.py, mutations_shape.py, mutations_module.py):
a tree's parents, a node's replacement, its short text, a call's name, constants. Pure `ast`, no torch."""

from __future__ import annotations

import ast
from typing import Callable, Iterator

MODULES = {"math", "torch", "np", "numpy", "F", "nn", "tl", "triton"}


# A site: (indices of nodes in _scope order, builder(node) -> replacement, operator id, sentence), and optionally a
# fifth: (builder, operator id, sentence) of a wider change at the same nodes that the checks may not tell apart
# from it (mutations.py Mutant.alternative: when they give the same observations, that wider sentence is named).
Site = tuple


def _parents(root: ast.AST) -> dict[int, tuple[ast.AST, str, int | None]]:
    out = {}
    for node in ast.walk(root):
        for field, value in ast.iter_fields(node):
            if isinstance(value, list):
                for i, v in enumerate(value):
                    if isinstance(v, ast.AST):
                        out[id(v)] = (node, field, i)
            elif isinstance(value, ast.AST):
                out[id(value)] = (node, field, None)
    return out


def _replace(parents, old: ast.AST, new: ast.AST) -> None:
    parent, field, i = parents[id(old)]
    if i is None:
        setattr(parent, field, new)
    else:
        getattr(parent, field)[i] = new


def _u(node: ast.AST) -> str:
    return ast.unparse(node)


def _short(node: ast.AST, n: int = 40) -> str:
    text = _u(node)
    return text if len(text) <= n else text[: n - 1] + "…"


def _target_of(nodes: list[ast.AST], parents, node: ast.AST) -> str:
    """What the statement holding `node` computes: `scores` for `scores = ...`, 'the result' for a return."""
    cur = node
    while id(cur) in parents:
        parent = parents[id(cur)][0]
        if isinstance(parent, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            return f"`{_short(targets[0], 30).strip('()')}`"
        if isinstance(parent, ast.Return):
            return "the result"
        if isinstance(parent, (ast.If, ast.While)) and cur is parent.test:
            return f"the test `{_short(parent.test, 40)}`"
        if isinstance(parent, (ast.FunctionDef, ast.ClassDef)):
            break
        cur = parent
    return "the result"


def _call_name(call: ast.Call) -> str:
    f = call.func
    if isinstance(f, ast.Subscript):  # a Triton kernel launched on its grid: `kernel[grid](...)`
        f = f.value
    if isinstance(f, ast.Attribute):
        return f.attr
    if isinstance(f, ast.Name):
        return f.id
    return ""


def _int_value(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
            and type(node.operand.value) is int:
        return -node.operand.value
    return None


def _const(v) -> ast.AST:
    if isinstance(v, (int, float)) and v < 0:
        return ast.UnaryOp(ast.USub(), ast.Constant(-v))
    return ast.Constant(v)


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _is_sqrt(node: ast.AST) -> ast.AST | None:
    """The argument of a square root (math.sqrt(x), torch.sqrt(x), x.sqrt(), x ** 0.5), or None."""
    if isinstance(node, ast.Call) and _call_name(node) == "sqrt":
        if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) and \
                node.func.value.id in MODULES and len(node.args) == 1:
            return node.args[0]
        if isinstance(node.func, ast.Attribute) and not node.args:
            return node.func.value
        if isinstance(node.func, ast.Name) and len(node.args) == 1:
            return node.args[0]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and isinstance(node.right, ast.Constant) \
            and node.right.value == 0.5:
        return node.left
    return None


def _dims(node: ast.AST) -> bool:
    """Does this expression involve a variable (a size), not only constants and modules?"""
    return bool(_names(node) - MODULES)


def _without_kw(call: ast.Call, name: str) -> ast.Call:
    call.keywords = [k for k in call.keywords if k.arg != name]
    return call


def _rename_call(call: ast.Call, name: str) -> ast.Call:
    if isinstance(call.func, ast.Attribute):
        call.func.attr = name
    elif isinstance(call.func, ast.Name):
        call.func.id = name
    return call


def _is_neginf(node: ast.AST) -> bool:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "float" and \
            len(node.args) == 1 and isinstance(node.args[0], ast.Constant) and \
            str(node.args[0].value).strip().lower() in ("-inf", "-infinity"):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        o = node.operand
        return (isinstance(o, ast.Attribute) and o.attr == "inf") or (
            isinstance(o, ast.Call) and isinstance(o.func, ast.Name) and o.func.id == "float" and len(o.args) == 1
            and isinstance(o.args[0], ast.Constant) and str(o.args[0].value).lower() in ("inf", "infinity"))
    return False


def _in_raise_guard(parents, node) -> bool:
    """Is `node` the test of an `if` whose body raises (an argument's validation)?"""
    cur = node
    while id(cur) in parents:
        parent = parents[id(cur)][0]
        if isinstance(parent, ast.If) and parents[id(cur)][1] == "test":
            return any(isinstance(s, ast.Raise) for s in parent.body)
        if isinstance(parent, ast.stmt):
            return False
        cur = parent
    return False
