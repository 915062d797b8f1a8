"""Every environment variable the course reads is in docs/architecture.md's table: the reads are found in the
source (os.environ[...], .get, .pop, .setdefault, `in os.environ`, os.getenv with a constant name), so a new
read without a row fails here."""

from __future__ import annotations

import ast
import re

from graders.registry import ROOT

DOC = ROOT / "docs" / "architecture.md"


def _is_environ(node) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name)
            and node.value.id == "os")


def _is_env_mapping(node) -> bool:
    """`env.get("X")`: the environment passed as a mapping (course_cli/settings.py reads it so, to be testable)."""
    return isinstance(node, ast.Name) and node.id == "env"


def reads(tree) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Subscript) and _is_environ(node.value):
            key = node.slice
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            f = node.func
            if f.attr in ("get", "pop", "setdefault") and _is_environ(f.value) or f.attr == "get" and _is_env_mapping(f.value):
                key = node.args[0]
            elif f.attr == "getenv" and isinstance(f.value, ast.Name) and f.value.id == "os":
                key = node.args[0]
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)) \
                and _is_environ(node.comparators[0]):
            key = node.left
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            names.add(key.value)
    return names


def code_reads() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for pkg in ("graders", "course_cli"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            for name in reads(ast.parse(path.read_text(encoding="utf-8"))):
                out.setdefault(name, set()).add(path.relative_to(ROOT).as_posix())
    from course_cli.settings import Limits  # the limits' variables: read by Limits.from_env from its ENV table

    for name, _ in Limits.ENV.values():
        out.setdefault(name, set()).add("course_cli/settings.py")
    return out


def table() -> set[str]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Settings and environment variables", 1)[1].split("\n## ", 1)[0]
    return {name for line in section.splitlines() if line.startswith("| `")
            for name in re.findall(r"`([A-Z][A-Z0-9_]*)`", line.split("|")[1])}


def test_every_variable_read_is_in_the_table():
    missing = {name: sorted(where) for name, where in code_reads().items() if name not in table()}
    assert missing == {}


def test_the_table_lists_only_variables_the_code_reads():
    assert sorted(table() - set(code_reads())) == []


def test_the_scan_finds_each_form_of_read():
    tree = ast.parse('import os\nos.environ["A"]\nos.environ.get("B")\nos.getenv("C")\n"D" in os.environ\n'
                     'os.environ.pop("E", None)\nos.environ.setdefault("F", "1")\nos.environ.get(name)\n')
    assert reads(tree) == {"A", "B", "C", "D", "E", "F"}
    assert reads(ast.parse('env.get("G")\nother.get("H")\nenv.setdefault("I", "1")\n')) == {"G"}
