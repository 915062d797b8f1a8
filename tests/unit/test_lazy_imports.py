"""Imports inside functions only where a measured startup cost needs them (issue 46, item 2): in the modules listed
here, every import inside a function carries a `# lazy: <reason, measured>` comment, on its line or on a comment
line above it in the same block of imports. A module joins LISTED once its lazy imports are each justified."""

from __future__ import annotations

import ast

from graders.registry import ROOT

LISTED = ["course_cli/sandboxed/warm.py", "course_cli/sandboxed/grading.py", "course_cli/sandboxed/sandbox.py",
          "course_cli/sandboxed/zygote.py", "course_cli/settings.py"]


def inner_imports(tree: ast.Module) -> list[ast.stmt]:
    found = []

    def visit(node, inside: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if inside and isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append(child)
            visit(child, inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(tree, False)
    return found


def unexplained(source: str) -> list[int]:
    """The lines of imports inside functions without a `lazy:` reason."""
    lines = source.splitlines()
    bad = []
    for node in inner_imports(ast.parse(source)):
        k = node.lineno - 1
        if "lazy:" in lines[k]:
            continue
        k -= 1  # up through the imports and comments just above it
        while k >= 0 and lines[k].strip().startswith(("import ", "from ", "#")) and "lazy:" not in lines[k]:
            k -= 1
        if k < 0 or "lazy:" not in lines[k]:
            bad.append(node.lineno)
    return bad


def test_every_import_inside_a_function_says_why():
    assert {path: unexplained((ROOT / path).read_text(encoding="utf-8")) for path in LISTED} == \
        {path: [] for path in LISTED}


def test_the_check_catches_a_bare_one():
    source = ("import os\n\ndef f():\n    import json\n\n    return json\n\n"
              "def g():\n    # lazy: torch takes 4.6 s\n    import torch\n    import torch.nn\n\n"
              "    import re\n    return re\n\n"
              "def h():\n    import torch  # lazy: 4.6 s\n")
    assert unexplained(source) == [4, 13]
