"""Hints nudge; they never hand out a line of the answer.

A hint tier may name the key idea, the right axis, the trap to avoid, but no hint of an exercise may contain a
non-trivial line of that exercise's reference solution (its solved cell, between the solution markers), compared
as `tests/test_teaching.py` compares the teaching text: whitespace removed, trailing comments cut, lines under
MIN_CHARS and boilerplate ignored.
"""

from __future__ import annotations

import re

import pytest

from graders.registry import LESSONS
from test_teaching import _cells, _code, _squash, reference_lines, solution_lines


def _solution_cell(lesson, name: str) -> str:
    from graders.engine.notebook import defining_cell, graded_cells

    cell = defining_cell(graded_cells(_cells(lesson.solution_path)), name)
    assert cell is not None, (lesson.id, name)
    return cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])


def hint_leaks(lesson) -> list[str]:
    found = []
    for ex in lesson.exercises:
        lines = reference_lines(_solution_cell(lesson, ex.name))
        for tier, hint in enumerate(ex.hints, start=1):
            text = _squash(hint)
            found += [f"{ex.name} hint {tier}: {line}" for line in lines if line in text]
    return found


@pytest.mark.parametrize("lesson", LESSONS, ids=[l.id for l in LESSONS])
def test_no_hint_contains_a_line_of_its_solution(lesson):
    found = hint_leaks(lesson)
    assert not found, "hints that print the answer (end on the key idea instead):\n" + "\n".join(found)


def test_the_hint_comparison_catches_a_leak():
    src = "def f(x):\n    ### BEGIN SOLUTION\n    z = x - x.amax(dim=-1, keepdim=True)\n    return z\n    ### END SOLUTION\n"
    (line,) = reference_lines(src)
    assert line in _squash("Roughly: `z = x - x.amax(dim=-1, keepdim=True)`, then exponentiate.")
    assert line not in _squash("Subtract the row maximum (kept as a column) before exponentiating.")


def test_every_exercise_has_tiers_and_lines_to_compare():
    for lesson in LESSONS:
        for ex in lesson.exercises:
            assert len(ex.hints) >= 2, (lesson.id, ex.name)
            assert reference_lines(_solution_cell(lesson, ex.name)), (lesson.id, ex.name)


# ----------------------------------------------------------------------------------------------
# Token runs (issue 47 item 4): a hint or a stub's docstring that writes a solution line in its own words
# (`x + mlp(ln2(x))` for `return x + self.mlp(self.ln2(x))`) slips past the exact comparison above. Here
# both sides are cut into code tokens, `self.` dropped, and a line's right-hand side (its `return` or its
# assignment target cut) leaks when the text holds all of it, or RUN tokens of it in a row.

MIN_TOKENS = 7  # a right-hand side shorter than this (`len(cache)`, `tl.program_id(0)`) says nothing alone
RUN = 12  # so many tokens of one line in a row are that line (a shape such as `(B, H*n, T, Dh)` is 10)
_TOKEN = re.compile(r"[A-Za-z_]\w*|\d+(?:\.\d+)?|\*\*|//|<=|>=|==|!=|->|[-+*/@%()\[\],=<>:.~&|]")


def code_tokens(text: str) -> list[str]:
    return _TOKEN.findall(re.sub(r"\bself\.", "", text))


def _rhs(line: str) -> list[str]:
    """A solution line's tokens without `return` or a plain assignment's target."""
    code = _code(line)
    code = re.sub(r"^return\b", "", code)
    code = re.sub(r"^[\w.,\s\[\]]+?=(?!=)", "", code)  # `x = ...`, `self.keys[i] = ...`, `a, b = ...`
    return code_tokens(code)


def _run(needle: list[str], hay: list[str]) -> int:
    """The longest run of `needle`'s tokens that occurs, in order and contiguous, in `hay`."""
    best, prev = 0, [0] * (len(hay) + 1)
    for a in needle:
        cur = [0] * (len(hay) + 1)
        for j, b in enumerate(hay, start=1):
            if a == b:
                cur[j] = prev[j - 1] + 1
                best = max(best, cur[j])
        prev = cur
    return best


def token_leaks(source: str, text: str) -> list[str]:
    """The solution lines of `source` (a solved cell) that `text` writes out, by token runs."""
    hay = code_tokens(text)
    found = []
    for line in solution_lines(source):
        needle = _rhs(line)
        if needle[:1] and needle[0][:1].isupper() or needle[:3] in (["nn", ".", n] for n in needle[2:3]):
            continue  # building a named part (`nn.Linear(d_model, d_model, bias=bias)`): the spec's contract
        if len(needle) >= MIN_TOKENS and _run(needle, hay) >= min(len(needle), RUN):
            found.append(_code(line))
    return found


def _stub_text(lesson, name: str) -> str:
    """What the student sees of the exercise's cell: signature, docstrings, comments, given code."""
    from graders.engine.notebook import defining_cell, graded_cells

    cell = defining_cell(graded_cells(_cells(lesson.student_path)), name)
    assert cell is not None, (lesson.id, name)
    return cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])


def token_hint_leaks(lesson) -> list[str]:
    found = []
    for ex in lesson.exercises:
        source = _solution_cell(lesson, ex.name)
        texts = [(f"hint {tier}", hint) for tier, hint in enumerate(ex.hints, start=1)]
        texts.append(("the stub cell", _stub_text(lesson, ex.name)))
        for where, text in texts:
            found += [f"{ex.name}, {where}: {line}" for line in token_leaks(source, text)]
    return found


@pytest.mark.parametrize("lesson", LESSONS, ids=[l.id for l in LESSONS])
def test_no_hint_or_stub_writes_out_a_solution_line(lesson):
    found = token_hint_leaks(lesson)
    assert not found, ("hints or stub docstrings that write out a line of the answer (say what it must do "
                       "instead):\n" + "\n".join(found))


def test_the_token_comparison_catches_a_reworded_line():
    src = ("def forward(self, x):\n    ### BEGIN SOLUTION\n"
           "    x = x + self.dropout(self.attn(self.ln1(x), mask=mask)[0])\n"
           "    return x + self.mlp(self.ln2(x))  # the stream\n    ### END SOLUTION\n")
    assert token_leaks(src, '"""Pre-LN: x + attn(ln1(x)), then x + mlp(ln2(x))."""') == [
        "return x + self.mlp(self.ln2(x))"]
    assert token_leaks(src, "then x = x + mlp(ln2(x))") == ["return x + self.mlp(self.ln2(x))"]
    assert token_leaks(src, "Each branch reads a normalised copy of the stream; its output is added back.") == []
    assert _run(list("abcde"), list("xbcdy")) == 3


# Hints a reviewer found handing out a line in other words (issue 47), kept out for good.
KNOWN_HINT_ANSWERS = [
    ("lesson07", "TransformerBlock", "x = x + drop(attn(ln1(x)))"),
    ("lesson09", "FlashAttentionFunction", "delta = (grad_out * out).sum(-1, keepdim=True)"),
    ("lesson10", "LlamaAttention", "j <= i + (t_k - t_q)"),
    ("lesson10", "LlamaAttention", "j > i + (t_k - t_q) - window"),
]


@pytest.mark.parametrize("lesson_id, name, fragment", KNOWN_HINT_ANSWERS)
def test_known_hint_answer_stays_out(lesson_id, name, fragment):
    exercise = next(l for l in LESSONS if l.id == lesson_id).exercise(name)
    assert not any(_squash(fragment) in _squash(hint) for hint in exercise.hints), fragment


# ----------------------------------------------------------------------------------------------
# The hints `course hint` starts from after a failed check (issue 44 item 3): a catalogued mistake's own, and
# the ones keyed by diagnosis id (a reproduced mutant's operator family, a structural kind), which may be
# shown for any exercise of the lesson. None may hand out a line of the solution either.


def cause_hints(lesson) -> list[tuple[str, str, str]]:
    """(exercise, where, text) for every hint a diagnosis can lead `course hint` to in `lesson`."""
    import importlib

    from graders.engine.kinds import HINTS_BY_KIND

    out = [(m.exercise, f"mistake {m.id}'s hint", m.hint)
           for m in getattr(importlib.import_module(lesson.module), "MISTAKES", ()) if m.hint]
    out += [(ex.name, f"the hint of {ident}", text) for ex in lesson.exercises for ident, text in HINTS_BY_KIND.items()]
    return out


@pytest.mark.parametrize("lesson", LESSONS, ids=[l.id for l in LESSONS])
def test_no_hint_of_a_cause_hands_out_a_solution_line(lesson):
    found = []
    for name, where, text in cause_hints(lesson):
        source = _solution_cell(lesson, name)
        found += [f"{name}, {where}: {line}" for line in reference_lines(source) if line in _squash(text)]
        found += [f"{name}, {where}: {line}" for line in token_leaks(source, text)]
    assert not found, "cause hints that write out a line of the answer:\n" + "\n".join(found)
