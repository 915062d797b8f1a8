"""`course hint` text: wrapped by Rich at the terminal's width between words, code spans shown in bold without
their backticks, never cut inside a word."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from course_cli.render import render_hints
from graders.registry import LESSONS

HINTS = [(l.id, e.name, e.hints) for l in LESSONS for e in l.exercises]


def _render(hints, width: int) -> str:
    buf = io.StringIO()
    render_hints(Console(file=buf, width=width, no_color=True, highlight=False), hints, len(hints))
    return buf.getvalue()


@pytest.mark.parametrize("width", [40, 72, 120])
def test_hints_wrap_at_the_width_between_words(width):
    for lesson, name, hints in HINTS:
        out = _render(hints, width)
        lines = out.splitlines()
        assert all(len(line.rstrip()) <= width for line in lines), (lesson, name)
        assert "`" not in out, (lesson, name)
        words = {w for line in lines for w in line.split()}
        for hint in hints:  # every word of the hint arrives whole, unless it alone is wider than the line
            for word in hint.replace("`", "").split():
                assert word in words or len(word) > width - 12, (lesson, name, word)
        assert out.rstrip().endswith("That was the last hint.")


def test_a_code_span_is_bold_not_backticked():
    buf = io.StringIO()
    console = Console(file=buf, width=80, force_terminal=True, color_system="standard", highlight=False)
    render_hints(console, ("Use `torch.where` here.", "Then think."), 1)
    out = buf.getvalue()
    assert "torch.where" in out and "`" not in out and "\x1b[1m" in out
    assert "last hint" not in out
