"""Every rule a check enforces is one the student was told (issue 29, item 2).

Each public check carries `rule`: words quoted from its exercise's text, the markdown of the exercise's section
(from the previous exercise's check cell to its own; for the first exercise, from the notebook's start) or what
the student sees of its solution cell (signature, docstring, comments). The quote must be there, in the student
notebook, once markdown emphasis and line breaks are set aside. Hidden twins and battery entries carry their
public check's rule (they test its property on other inputs). A domain check's rule is the exercise's signature
and docstring: the cell must define the exercise."""

from __future__ import annotations

import importlib
import json
import re

import pytest

from graders.engine.checks import CHECKS_OF
from graders.registry import LESSONS

MIN_WORDS = 4  # a rule is a sentence or a clause of one, not a word that happens to occur


def normalized(text: str) -> str:
    """Text as read: no markdown emphasis or code ticks, one space for any run of white space."""
    text = re.sub(r"[`*]", "", text)
    return re.sub(r"\s+", " ", text).strip()


def _grade_id(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def exercise_texts(lesson) -> dict[str, str]:
    """{exercise: its text as the student reads it}: the section's markdown and the solution cell shown."""
    cells = json.loads(lesson.student_path.read_text())["cells"]
    exercises = [e.name for e in lesson.exercises]
    texts, section, closed = {}, [], False
    for cell in cells:
        gid, source = _grade_id(cell), "".join(cell["source"])
        if gid and gid.startswith("test_") and gid[5:] in exercises:
            texts[gid[5:]] = normalized("\n".join(section))
            closed = True  # a shared step's second check cell follows: the same section
            continue
        if cell["cell_type"] == "markdown" or gid in exercises:
            if closed:
                section, closed = [], False
            section.append(source)
    return texts


@pytest.mark.parametrize("lesson", LESSONS, ids=[l.id for l in LESSONS])
def test_every_check_maps_to_a_sentence_of_its_exercise_text(lesson):
    checks = CHECKS_OF(importlib.import_module(lesson.module))
    texts = exercise_texts(lesson)
    assert set(texts) == {e.name for e in lesson.exercises}, "an exercise without a check cell"
    unstated = []
    for c in checks:
        if c.hidden:
            continue
        text = texts[c.exercise]
        if not c.rule and c.exercise in checks.domains and c.name.startswith("over its declared domain"):
            if not re.search(rf"\b(def|class) {re.escape(c.exercise)}\b", text):
                unstated.append(f"{c.exercise} / {c.name}: the exercise's signature is not in its text")
            continue
        rule = normalized(c.rule)
        if len(rule.split()) < MIN_WORDS:
            unstated.append(f"{c.exercise} / {c.name}: no rule quoted (Check.rule: {c.rule!r})")
        elif rule not in text:
            unstated.append(f"{c.exercise} / {c.name}: {c.rule!r} is not in the exercise's text")
    assert not unstated, f"{len(unstated)} checks of {lesson.id} enforce a rule not quoted from the text:\n" + \
        "\n".join(unstated)


def test_hidden_twins_and_battery_entries_carry_their_public_checks_rule():
    for lesson in LESSONS:
        checks = CHECKS_OF(importlib.import_module(lesson.module))
        public = {(c.exercise, c.name): c.rule for c in checks if not c.hidden}
        for c in checks:
            if c.hidden:
                assert c.rule == public[c.exercise, c.property], (lesson.id, c.exercise, c.name)


def test_a_rule_missing_from_the_text_is_found():
    """The mapping can fail: a quote the notebook does not hold, or none at all, is reported."""
    from graders.registry import find_lesson

    texts = exercise_texts(find_lesson("lesson01"))
    assert "softmax" in texts and "scaled_dot_product_attention" in texts
    assert normalized("subtract the max along **`dim`**\n   first") == "subtract the max along dim first"
    assert normalized("a rule the lesson never states, about ponies") not in texts["softmax"]
    # the solution cell's docstring is part of the text, its hidden solution is not
    assert "def softmax(" in texts["softmax"] and "BEGIN SOLUTION" not in texts["softmax"]
