"""The map of the code in docs/architecture.md cannot drift: every module of graders/ and course_cli/ has a row
in its table, every row names a module that exists, and each row says what the module's docstring says first."""

from __future__ import annotations

import ast
import re

from graders.registry import ROOT

DOC = ROOT / "docs" / "architecture.md"
ROW = re.compile(r"^\| `((?:graders|course_cli)/[\w/]+\.py)` \| (.+?) \|$")


def first_sentence(text: str) -> str:
    para = " ".join(text.strip().split("\n\n")[0].split())
    m = re.search(r"(?<=[.!?])\s", para)
    return para[: m.start()] if m else para


def docstrings() -> dict[str, str]:
    out = {}
    for pkg in ("graders", "course_cli"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
            out[path.relative_to(ROOT).as_posix()] = first_sentence(doc)
    return out


def rows() -> dict[str, str]:
    return {m.group(1): m.group(2).strip() for line in DOC.read_text(encoding="utf-8").splitlines()
            if (m := ROW.match(line))}


def test_every_module_has_a_docstring():
    assert [path for path, doc in docstrings().items() if not doc] == []


def test_the_map_lists_every_module_and_no_other():
    have, want = set(rows()), set(docstrings())
    assert sorted(want - have) == [], "modules missing from docs/architecture.md's map"
    assert sorted(have - want) == [], "rows of docs/architecture.md's map for modules that do not exist"


def test_each_row_says_what_its_docstring_says():
    docs = docstrings()
    wrong = {path: (text, docs[path]) for path, text in rows().items() if path in docs and text != docs[path]}
    assert wrong == {}


def test_the_row_pattern_reads_a_row():
    assert ROW.match("| `graders/registry.py` | The course as one ordered table. |")
    assert first_sentence("One. Two.\n\nThree.") == "One."


def test_each_module_has_one_row():
    """A row twice (course_cli/student/checking.py's was) reads as one in rows(): counted here."""
    paths = [m.group(1) for line in DOC.read_text(encoding="utf-8").splitlines() if (m := ROW.match(line))]
    assert sorted({p for p in paths if paths.count(p) > 1}) == []
