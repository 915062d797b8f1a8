"""No import cycle anywhere in the project, and the layering of design.md: every import between the course's
modules, at module level and inside functions, read from the source (so an import that runs only on one path
still counts)."""

from __future__ import annotations

import ast
from pathlib import Path

from graders.registry import ROOT

PACKAGES = ("graders", "course_cli")


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The course modules `name` imports (the deepest known module of each dotted name)."""
    is_pkg = path.name == "__init__.py"
    package = name if is_pkg else name.rpartition(".")[0]
    found = set()

    def add(dotted: str) -> None:
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]
        if dotted and dotted != name:
            found.add(dotted)

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for alias in node.names:
                sub = f"{mod}.{alias.name}"
                add(sub if sub in known else mod)
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports_of(name, path, set(mods)) for name, path in mods.items()}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_the_walk_sees_imports_inside_functions():
    g = graph()
    # course_cli.sandboxed.grading imports the sandbox at module level; the engine's mistakes module imports the
    # registry inside a function: both must be seen, or the cycle test below could pass on a blind walk
    assert "course_cli.sandboxed.sandbox" in g["course_cli.sandboxed.grading"]
    assert "graders.registry" in g["graders.engine.mistakes"]


def test_no_import_cycle():
    assert cycles(graph()) == []


def test_a_cycle_is_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_graders_never_import_course_cli():
    bad = {m: sorted(d for d in deps if d.startswith("course_cli")) for m, deps in graph().items()
           if m.startswith("graders")}
    assert {m: d for m, d in bad.items() if d} == {}


def _defined(path: Path) -> set[str]:
    """The names a module defines at its top level (defs, classes, assignments, imports, PEP 562 __getattr__
    exports listed in __all__), read from its source."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node in tree.body:
            names.add(node.name)
    for node in tree.body:
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Name):
                    names.add(n.id)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        if isinstance(node, (ast.Try, ast.If)):  # try: from x import y / except: y = None
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    names |= {(a.asname or a.name).split(".")[0] for a in sub.names}
                elif isinstance(sub, (ast.FunctionDef, ast.ClassDef)):
                    names.add(sub.name)
                elif isinstance(sub, ast.Assign):
                    names |= {n.id for t in sub.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in ("__all__", "_API")
                                                for t in node.targets):
            for n in ast.walk(node.value):
                if isinstance(n, ast.Constant) and isinstance(n.value, str):
                    names.add(n.value)
    return names


def test_every_name_imported_from_a_course_module_is_defined_there():
    """`from course_cli.classes.batch import grade_submission` inside a function only fails when that path runs
    (Gradescope's build did, after grade_submission moved to dispatch): every `from <course module> import
    name`, at module level or inside a function, names something the module defines or a submodule."""
    mods = modules()
    bad = []
    for name, path in mods.items():
        is_pkg = path.name == "__init__.py"
        package = name if is_pkg else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            if target not in mods:
                continue
            defined = _defined(mods[target])
            for alias in node.names:
                if alias.name != "*" and alias.name not in defined and f"{target}.{alias.name}" not in mods:
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: {alias.name} is not in {target}")
    assert not bad, "\n".join(bad)


def test_every_dispatch_mode_of_the_graders_is_a_recording_mode():
    """A TorchDispatchMode subclass imports torch._dynamo on its first call (seconds in an exercise's limit):
    the graders' modes derive from graders.engine.probe.RecordingMode, which turns that off."""
    bad = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.name != "RecordingMode":
                for base in node.bases:
                    if (isinstance(base, ast.Name) and base.id == "TorchDispatchMode") or \
                            (isinstance(base, ast.Attribute) and base.attr == "TorchDispatchMode"):
                        bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.name}")
    assert not bad, "\n".join(bad)
