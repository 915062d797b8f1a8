"""The course's real-text corpus: Python's own documentation, as every Python installation ships it.

`pydoc_data.topics` holds the text `help("assert")`, `help("for")` ... print: about 465,000 characters
of English prose and code written by Python's documenters (PSF licence), shipped with CPython itself,
so the course needs no download and ships no copy. Lessons 08 and 10 both train on it: one source.

    from graders.corpus import load_text, split
    text = load_text()                 # the topics in a fixed order, joined by blank lines
    train, val = split(text, 0.9)      # the first 90 % for training, the rest for validation
"""

from __future__ import annotations

import hashlib


def load_text() -> str:
    """Every pydoc topic, sorted by name, separated by blank lines (the same text on every machine with
    the same Python minor version; `fingerprint()` says which)."""
    from pydoc_data.topics import topics

    return "\n\n".join(topics[name].strip() for name in sorted(topics)) + "\n"


def split(text: str, train_fraction: float = 0.9) -> tuple[str, str]:
    """(train, validation): a contiguous split, so validation text is never seen in training."""
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"train_fraction must be strictly between 0 and 1, got {train_fraction}")
    cut = int(len(text) * train_fraction)
    return text[:cut], text[cut:]


def fingerprint(text: str | None = None) -> str:
    """A short hash of the corpus, to state which text a measured figure comes from."""
    return hashlib.sha256((text if text is not None else load_text()).encode()).hexdigest()[:12]
