"""Every path of the repository that docs/, the README and the course's docstrings name exists (after a move,
stale mentions fail here). A path is a word like `graders/engine/probe.py` or `tests/e2e/`: one of the
repository's top folders, then a path; patterns (lessonNN, *, <...>, {...}) are not paths and are skipped."""

from __future__ import annotations

import ast
import re

from graders.registry import ROOT

TOPS = ("graders", "course_cli", "tests", "benchmarks", "docs", "solutions", "lessons", ".ci")
# Made by `course pack` in the student distribution, never present in the repository (course_cli/instructor/pack.py)
DISTRIBUTION_ONLY = {"graders/_distribution.py", "graders/data/reference", "graders/lessons"}
PATH = re.compile(r"(?<![\w./-])((?:" + "|".join(re.escape(t) for t in TOPS) + r")/[\w./-]*[\w/])")


def named_paths(text: str) -> set[str]:
    out = set()
    for p in PATH.findall(text):
        if re.search(r"NN|XX|\*|<|\{|\.\.\.", p) or p.endswith("/lesson"):
            continue
        out.add(p.rstrip("/."))
    return out


def sources() -> dict[str, str]:
    texts = {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8")
             for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]}
    for pkg in ("graders", "course_cli"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            docs = [ast.get_docstring(n) or "" for n in ast.walk(tree)
                    if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
            texts[path.relative_to(ROOT).as_posix()] = "\n".join(docs)
    return texts


def missing() -> dict[str, list[str]]:
    out = {}
    for where, text in sources().items():
        gone = sorted(p for p in named_paths(text) - DISTRIBUTION_ONLY if not (ROOT / p).exists())
        if gone:
            out[where] = gone
    return out


def test_every_path_the_docs_name_exists():
    assert missing() == {}


def test_a_stale_path_is_found():
    assert named_paths("see `graders/verdict.py` and tests/e2e/ and graders/lessonNN_x.py") == \
        {"graders/verdict.py", "tests/e2e"}
    assert not (ROOT / "graders/verdict.py").exists()
