"""Every `COURSE_*` environment variable is read through course_cli/settings.py, and when it is asked for, never
when a module is imported: a read of one anywhere else in the tree (test_env_table's scan: os.environ[...],
.get, .pop, .setdefault, `in os.environ`, os.getenv) fails here, and so does a call of a settings function or
a read of the environment in a module's import-time code."""

from __future__ import annotations

import ast

from graders.registry import ROOT
from test_env_table import reads

SETTINGS = "course_cli/settings.py"
ELSEWHERE = {  # (file, variable): why it is read there and not through course_cli/settings.py
    ("graders/parts.py", "COURSE_WORKSPACE"):
        "import_lesson(mine=True) finds the student's notebook from the graders, which never import course_cli",
}


def sources() -> dict[str, ast.Module]:
    return {p.relative_to(ROOT).as_posix(): ast.parse(p.read_text(encoding="utf-8"))
            for pkg in ("graders", "course_cli") for p in sorted((ROOT / pkg).rglob("*.py"))}


def reads_outside(trees: dict[str, ast.Module]) -> list[str]:
    return sorted(f"{path} reads {name}" for path, tree in trees.items() if path != SETTINGS
                  for name in reads(tree) if name.startswith("COURSE_") and (path, name) not in ELSEWHERE)


def settings_functions() -> set[str]:
    tree = ast.parse((ROOT / SETTINGS).read_text(encoding="utf-8"))
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")}


def import_time(tree: ast.Module) -> list[ast.AST]:
    """The nodes a module runs when it is imported: everything but the bodies of its functions (a class body
    runs; a function's decorators and defaults run too)."""
    out, todo = [], list(tree.body)
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            todo += [n for n in (*node.decorator_list, *node.args.defaults, *node.args.kw_defaults) if n]
        elif isinstance(node, ast.Lambda):
            todo += node.args.defaults
        else:
            todo += [c for c in ast.iter_child_nodes(node) if c is not None]
    return out


def read_at_import(trees: dict[str, ast.Module], functions: set[str]) -> list[str]:
    """A settings function called, or the environment read, while a module is imported (`if __name__ ==
    "__main__":` blocks aside: they run as a command)."""
    found = []
    for path, tree in trees.items():
        if path == SETTINGS:
            continue
        tree = ast.Module([n for n in tree.body if not _is_main_block(n)], [])
        for node in import_time(tree):
            called = node.func if isinstance(node, ast.Call) else None
            name = (called.attr if isinstance(called, ast.Attribute) and isinstance(called.value, ast.Name)
                    and called.value.id == "settings" else called.id if isinstance(called, ast.Name) else None)
            if name in functions:
                found.append(f"{path}:{node.lineno} calls settings.{name} at import")
            elif isinstance(node, (ast.Call, ast.Subscript, ast.Compare)) \
                    and any(n.startswith("COURSE_") for n in reads(node)):
                found.append(f"{path}:{node.lineno} reads a COURSE_ variable at import")
    return sorted(set(found))


def _is_main_block(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)


def test_course_variables_are_read_only_in_settings():
    assert reads_outside(sources()) == []


def test_each_exception_is_still_there():
    trees = sources()
    assert [k for k in ELSEWHERE if k[1] not in reads(trees[k[0]])] == []  # fixed: take it off ELSEWHERE


def test_nothing_reads_a_setting_at_import():
    assert read_at_import(sources(), settings_functions()) == []


def test_the_checks_catch_what_they_forbid():
    fns = settings_functions()
    assert {"cache_dir", "warm_idle", "current", "workspace"} <= fns
    bad = {"course_cli/x.py": ast.parse('import os\ndef f():\n    return os.environ.get("COURSE_WARM")\n'),
           "course_cli/y.py": ast.parse('import os\nIDLE = float(os.getenv("COURSE_WARM_IDLE", "900"))\n'),
           "course_cli/z.py": ast.parse('from course_cli import settings\nCACHE = settings.cache_dir()\n'
                                        'def ok():\n    return settings.cache_dir()\n'
                                        'class C:\n    seed = current()\n'),
           SETTINGS: ast.parse('import os\nX = os.environ.get("COURSE_X")\n')}
    assert reads_outside(bad) == ["course_cli/x.py reads COURSE_WARM", "course_cli/y.py reads COURSE_WARM_IDLE"]
    assert read_at_import(bad, fns) == ["course_cli/y.py:2 reads a COURSE_ variable at import",
                                        "course_cli/z.py:2 calls settings.cache_dir at import",
                                        "course_cli/z.py:6 calls settings.current at import"]


def test_a_switch_is_read_when_asked(monkeypatch, tmp_path):
    from course_cli import settings

    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("COURSE_WARM_IDLE", "6")
    assert settings.cache_dir() == tmp_path and settings.warm_idle() == 6.0
    monkeypatch.setenv("COURSE_WARM_IDLE", "soon")
    try:
        settings.warm_idle()
    except ValueError as exc:
        assert str(exc) == "COURSE_WARM_IDLE='soon' is not a number"
    else:
        raise AssertionError("a COURSE_WARM_IDLE that is not a number was taken")
    monkeypatch.delenv("COURSE_WARM_IDLE")
    assert settings.warm_idle() == 900.0
