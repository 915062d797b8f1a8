"""A diagnosis's stable id: what a class report counts, where the sentence itself carries sizes and indices.

A catalogued mistake is known by its id in the lesson's MISTAKES (`head_dim_is_d_model`); a structural
diagnosis (diagnosis.py) by the kind of wrongness its rule found: `structural:<kind>` for a cause or a shape
of error whose premise the rule checked, `fact:<kind>` for a fact about the numbers said where no cause was
shown (issue 44: "yours is 0.5× the reference's on every failing input"); anything else is `other`. Two
students with the same mistake get the same id whatever the numbers in their messages, and two different
sentences of one rule (NaN in 3 rows, NaN in 5 rows) add up instead of scattering. The sentences of earlier
versions keep their ids (a results file written before a rule was reworded is still counted).

`HINTS_BY_KIND`: the hint `course hint` starts from after a failed check whose diagnosis names a cause
(`is_cause`: a reproduced mutant's operator family, mutations.py FAMILY_HINTS, or a structural cause whose
premise was checked; a catalogued mistake's own `hint` comes from graders/engine/checks.py `Mistake.hint`),
keyed by id or id prefix. A fact's entry is said after the exercise's own hints, never before them: a fact
is not a cause.

No torch here: the CLI computes ids for results files written before the id was stored.
"""

from __future__ import annotations

import re


OTHER = "other"

# (id, pattern) in the order diagnosis.py tries its rules; each pattern matches the fixed words of one rule's
# sentence, the current one and the earlier wordings (tests/unit/test_report_instructor.py makes every rule
# speak and checks its id).
STRUCTURAL: tuple[tuple[str, re.Pattern], ...] = tuple((k, re.compile(p)) for k, p in (
    ("structural:device", r"comes back on \S+, not on the inputs' device"),
    ("structural:output-order", r"holds what `[^`]*` should be: the outputs are returned in the wrong order"),
    ("fact:square-only", r"^passes every check where Tq = Tk and fails every one where Tq ≠ Tk"),
    ("fact:square-axes-only", r"^passes every check where the last two axes of its results have the same size"),
    ("structural:queries-keys-swapped", r"^right only when Tq = Tk"),
    ("structural:axes-reversed", r"(?:is|equals) the reference with every axis reversed"),
    ("structural:transposed", r"is the reference transposed|equals the reference with its last two axes swapped"),
    ("structural:axes-permuted", r"(?:is|equals) the reference with its axes permuted"),
    ("structural:wrong-shape", r"has the right values in the wrong shape"),
    ("structural:mask-dtype", r"has the right True/False pattern as"),
    ("structural:wrong-dtype", r"has the right values but dtype"),
    ("structural:nan-rows", r"NaN values where the reference has numbers.*(?:nothing to attend to|whole rows of the "
                            r"last axis: a row)"),
    ("structural:inf-rows", r"Inf values where the reference has numbers.*whole rows of the last axis: a row"),
    ("structural:nan", r"NaN values where the reference has numbers"),
    ("structural:inf", r"Inf values where the reference has numbers"),
    ("structural:all-zeros", r"is all zeros"),
    ("structural:reversed", r"is the reference reversed along axis"),
    ("fact:scale", r"× (?:\(= [^)]*\) )?the reference's on every failing input"),
    ("fact:shift", r"the reference's [+-]\S+ on every failing input"),
    ("structural:scale", r"is the reference times a constant factor"),
    ("structural:shift", r"is the reference plus a constant"),
    ("structural:masked-positions-wrong", r"is right where the mask is True and wrong at"),
    ("fact:unmasked-differ", r"matches the reference at every masked position \(mask False\) and differs"),
    ("structural:mask-meaning-inverted", r"is right at the masked positions and wrong at"),
    ("fact:row-sums", r"your rows \(the last axis\) sum to"),
    ("fact:zeros-differ", r"differs from the reference only at \d+ of the \d+ positions where the reference is "
                          r"exactly 0"),
    ("structural:masked-out-leaks", r"positions where the reference is exactly 0 \(masked out\?\)"),
    ("fact:prefix-right", r"matches the reference up to index \d+ along axis"),
    ("fact:prefix-wrong", r"differs from the reference at indices 0…\d+ along axis"),
    ("structural:first-tile-only", r"is right up to index \d+ along axis"),
    ("structural:first-tile-wrong", r"is wrong for indices 0…\d+ along axis"),
    ("structural:mask-inverted", r"is the reference inverted \(True and False swapped\)"),
    ("structural:mask-shifted", r"is the reference shifted by one position along axis"),
    ("structural:mask-too-permissive", r"positions the reference masks \(and none fewer\)(?:, first at [^:]*)?: too "
                                       r"permissive"),
    ("structural:mask-too-strict", r"positions the reference allows \(and none more\)(?:, first at [^:]*)?: too strict"),
))

# The kinds whose sentence names a cause (a construct or a reason in the student's code), each said only with
# its premise checked on the failing checks' inputs; every other kind is a fact about the numbers.
CAUSES = frozenset({"structural:device", "structural:output-order", "structural:nan-rows",
                    "structural:masked-positions-wrong"})

# Where `course hint` starts after a failed check whose diagnosis has this id (or this prefix, "family:"):
# what to look at, never the fix. The longest matching key wins.
_HINTS: dict[str, str] = {
    "structural:device": "Every tensor you create inside the function needs `device=` (and usually `dtype=`) "
                         "taken from an input: `torch.zeros(n, device=x.device)`, or `torch.zeros_like(x)`.",
    "structural:output-order": "Read your `return` line against the docstring: which value comes first?",
    "structural:nan-rows": "A row whose mask is all False has only -inf scores; softmax of that row is 0/0. Find "
                           "those rows with `mask.any(-1)` and decide what they should output.",
    "structural:masked-positions-wrong": "Look at the masked positions only: what must their weight be, and "
                                         "which fill value makes `exp` give exactly that?",
    "fact:scale": "Every failing result is the right one times the same number. Print that number next to the "
                  "sizes of the inputs (dk, D, T): which expression of them does it equal?",
    "fact:shift": "Every failing result is the right one plus the same constant: look for a term added once "
                  "too often, or one missing.",
    "fact:row-sums": "Rows that should sum to 1 do not: check that the sum you divide by runs over the same "
                     "axis as the values you divide, and includes all of them.",
    "fact:square-only": "Your code passes only when Tq = Tk: use a check with Tq ≠ Tk (say 3 queries, 5 keys) "
                        "and print the shape of every intermediate.",
    "fact:square-axes-only": "Your code passes only when the last two sizes are equal: try one where they "
                             "differ and print the shape of every intermediate (which size is used for which?).",
    "fact:prefix-right": "The first positions match and the rest do not: run the failing input and compare "
                         "your result with the reference's at the first index that differs.",
    "fact:prefix-wrong": "Only the first positions differ: what does your code do differently at the start "
                         "of that axis (an offset, a boundary, an initial value)?",
    "fact:unmasked-differ": "Your masking is right; the values the mask keeps are not. Check the scores and "
                            "the softmax without the mask first.",
    "fact:zeros-differ": "The only wrong positions are where the reference gives exactly 0: what should make "
                         "those positions zero in your code?",
    "structural:axes": "Print the shape of each intermediate tensor and name its axes (batch, heads, queries, "
                       "keys, features): which two are in the wrong place?",
    "structural:transposed": "Swap only the last two axes: `.transpose(-2, -1)` (or `.mT`), never `.T` on a "
                             "batched tensor.",
    "structural:mask-": "Draw the mask for t = 4 by hand (rows are queries, columns keys) and print yours next "
                        "to it.",
    "structural:wrong-dtype": "Print `.dtype` of every intermediate: where does it change?",
    "structural:wrong-shape": "Print `.shape` of every intermediate: which step loses or merges an axis?",
    "structural:nan": "Find the first operation that produces a NaN (`torch.isnan(t).any()` after each step).",
    "structural:inf": "Find the first operation that produces an Inf (`torch.isinf(t).any()` after each step).",
}


def _hints_by_kind() -> dict[str, str]:
    """_HINTS with every mutation family's hint (`mutation:<family>`). The operator modules are imported here, at
    the first hint asked for, not with this module: `course check`'s rendering imports this module for
    `is_fact` alone (the three operator modules cost a warm check 50-85 ms of imports)."""
    global _ALL_HINTS
    if _ALL_HINTS is None:
        from .mutations import FAMILY_HINTS

        _ALL_HINTS = {**_HINTS, **{f"mutation:{family}": text for family, text in FAMILY_HINTS.items()}}
    return _ALL_HINTS


_ALL_HINTS: "dict[str, str] | None" = None


def __getattr__(name: str):
    if name == "HINTS_BY_KIND":  # the whole table, as it always read (the operator modules imported on first use)
        return _hints_by_kind()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def hint_for(ident: str | None) -> str | None:
    """The hint of a diagnosis id: HINTS_BY_KIND's entry for the id or its longest matching prefix."""
    if not ident:
        return None
    table = _hints_by_kind()
    keys = [k for k in table if ident == k or (ident.startswith(k) and k.endswith((":", "-")))
            or ident.startswith(k + "-")]
    return table[max(keys, key=len)] if keys else None


def structural_kind(text: str) -> str | None:
    """The id of a structural diagnosis's sentence (`structural:<kind>` or `fact:<kind>`), or None when no rule
    of diagnosis.py says it."""
    for ident, pattern in STRUCTURAL:
        if pattern.search(text):
            return ident
    return None


def diagnosis_id(text: str | None, mistakes=(), exercise: str | None = None) -> str | None:
    """The id of diagnosis `text` of `exercise`: the catalogued mistake whose message it is (`mistakes`: the
    lesson's MISTAKES), else `structural:<kind>` or `fact:<kind>`, else `other`; None for no diagnosis."""
    if not text:
        return None
    if getattr(text, "ident", ""):  # a reproduced mutant's sentence (diagnosis.py `Named`): mutation:<operator>
        return text.ident
    for m in mistakes:
        if m.message == text and (exercise is None or m.exercise == exercise):
            return m.id
    return structural_kind(text) or OTHER


def is_fact(ident: str | None) -> bool:
    """Whether diagnosis `ident` states facts about the numbers rather than a cause."""
    return bool(ident) and (ident.startswith("fact:") or ident.startswith("structural:") and ident not in CAUSES)


def is_cause(ident: str | None) -> bool:
    """Whether diagnosis `ident` names a cause shown only when reproduced or checked: a catalogued mistake, a
    reproduced mutant (`mutation:<operator>`) or a structural cause whose premise was checked (CAUSES)."""
    return bool(ident) and ident != OTHER and not is_fact(ident)


def is_catalogued(ident: str | None) -> bool:
    return bool(ident) and ident != OTHER and not ident.startswith(("structural:", "fact:", "mutation:"))
