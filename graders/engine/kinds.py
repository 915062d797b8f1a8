"""A diagnosis's stable id: what a class report counts, where the sentence itself carries sizes and indices.

A catalogued mistake is known by its id in the lesson's MISTAKES (`head_dim_is_d_model`); a structural
diagnosis (diagnosis.py) by the kind of wrongness its rule found, `structural:<kind>`; anything else is
`other`. Two students with the same mistake get the same id whatever the numbers in their messages, and
two different sentences of one rule (NaN in 3 rows, NaN in 5 rows) add up instead of scattering.

No torch here: the CLI computes ids for results files written before the id was stored.
"""

from __future__ import annotations

import re

OTHER = "other"

# (kind, pattern) in the order diagnosis.py tries its rules; each pattern matches the fixed words of one
# rule's sentence (tests/test_diagnosis_ids.py makes every rule speak and checks its kind).
STRUCTURAL: tuple[tuple[str, re.Pattern], ...] = tuple((k, re.compile(p)) for k, p in (
    ("device", r"comes back on \S+, not on the inputs' device"),
    ("output-order", r"holds what `[^`]*` should be: the outputs are returned in the wrong order"),
    ("queries-keys-swapped", r"^right only when Tq = Tk"),
    ("axes-reversed", r"is the reference with every axis reversed"),
    ("transposed", r"is the reference transposed"),
    ("axes-permuted", r"is the reference with its axes permuted"),
    ("wrong-shape", r"has the right values in the wrong shape"),
    ("mask-dtype", r"has the right True/False pattern as"),
    ("wrong-dtype", r"has the right values but dtype"),
    ("nan-rows", r"NaN values where the reference has numbers.*whole rows of the last axis"),
    ("inf-rows", r"Inf values where the reference has numbers.*whole rows of the last axis"),
    ("nan", r"NaN values where the reference has numbers"),
    ("inf", r"Inf values where the reference has numbers"),
    ("all-zeros", r"is all zeros"),
    ("reversed", r"is the reference reversed along axis"),
    ("scale", r"is the reference times a constant factor"),
    ("shift", r"is the reference plus a constant"),
    ("masked-positions-wrong", r"is right where the mask is True and wrong at"),
    ("mask-meaning-inverted", r"is right at the masked positions and wrong at"),
    ("masked-out-leaks", r"positions where the reference is exactly 0 \(masked out\?\)"),
    ("first-tile-only", r"is right up to index \d+ along axis"),
    ("first-tile-wrong", r"is wrong for indices 0…\d+ along axis"),
    ("mask-inverted", r"is the reference inverted \(True and False swapped\)"),
    ("mask-shifted", r"is the reference shifted by one position along axis"),
    ("mask-too-permissive", r"positions the reference masks \(and none fewer\): too permissive"),
    ("mask-too-strict", r"positions the reference allows \(and none more\): too strict"),
))


def structural_kind(text: str) -> str | None:
    """The kind of a structural diagnosis's sentence, or None when no rule of diagnosis.py says it."""
    for kind, pattern in STRUCTURAL:
        if pattern.search(text):
            return kind
    return None


def diagnosis_id(text: str | None, mistakes=(), exercise: str | None = None) -> str | None:
    """The id of diagnosis `text` of `exercise`: the catalogued mistake whose message it is (`mistakes`: the
    lesson's MISTAKES), else `structural:<kind>`, else `other`; None for no diagnosis."""
    if not text:
        return None
    if getattr(text, "ident", ""):  # a reproduced mutant's sentence (diagnosis.py `Named`): mutation:<operator>
        return text.ident
    for m in mistakes:
        if m.message == text and (exercise is None or m.exercise == exercise):
            return m.id
    kind = structural_kind(text)
    return f"structural:{kind}" if kind else OTHER


def is_catalogued(ident: str | None) -> bool:
    return bool(ident) and ident != OTHER and not ident.startswith(("structural:", "mutation:"))
