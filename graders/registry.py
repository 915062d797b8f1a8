"""The course as one ordered table: lessons, their notebooks, exercises, points and hints.

Every consumer reads this table: the CLI (`course list`, `course check`, `course hint`), the pytest
markers, the notebook builder and the nbgrader course. Adding a lesson is a solved notebook in
`solutions/`, a grader module in `graders/` and one `Lesson(...)` row below.

This module must stay cheap to import: no torch here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS_DIR = ROOT / "solutions"
LESSONS_DIR = ROOT / "lessons"


@dataclass(frozen=True)
class Exercise:
    """One named function or class the student writes."""

    name: str  # the id in results, the function's name in the notebook
    points: float = 1.0
    hints: tuple[str, ...] = ()  # revealed one at a time, the last one near the answer
    challenge: bool = False  # optional; still graded and scored


@dataclass(frozen=True)
class Lesson:
    """One notebook, one topic."""

    id: str  # "lesson01"
    slug: str  # "sdpa": the notebook is lessonNN_<slug>.ipynb
    title: str
    exercises: tuple[Exercise, ...]
    triton: bool = False  # needs Triton (run through the interpreter on CPU)
    aliases: tuple[str, ...] = field(default=())

    @property
    def notebook(self) -> str:
        return f"{self.id}_{self.slug}.ipynb"

    @property
    def module(self) -> str:
        return f"graders.{self.id}_{self.slug}"

    @property
    def number(self) -> int:
        return int(self.id.removeprefix("lesson"))

    @property
    def solution_path(self) -> Path:
        return SOLUTIONS_DIR / self.notebook

    @property
    def student_path(self) -> Path:
        return LESSONS_DIR / self.notebook

    @property
    def max_score(self) -> float:
        return sum(e.points for e in self.exercises)

    def exercise(self, name: str) -> Exercise:
        for ex in self.exercises:
            if ex.name == name:
                return ex
        names = ", ".join(e.name for e in self.exercises)
        raise LookupError(f"{self.id} has no exercise {name!r}; its exercises are: {names}")


LESSONS: tuple[Lesson, ...] = (
    Lesson(
        "lesson01",
        "sdpa",
        "Scaled dot-product attention",
        exercises=(
            Exercise(
                "softmax",
                points=4,
                hints=(
                    "Softmax is exp(x) divided by the sum of exp(x) along `dim`. Both the sum and the "
                    "normalisation happen along `dim`, so keep that axis with `keepdim=True`.",
                    "exp(1e4) overflows to inf in float32, and inf/inf is NaN. Because "
                    "softmax(x - c) = softmax(x) for any c that is constant along `dim`, subtract the "
                    "maximum along `dim` before exponentiating.",
                    "Roughly: `z = x - x.amax(dim=dim, keepdim=True)`, then `e = z.exp()` and divide "
                    "by `e.sum(...)` along the same dim. An all -inf row needs no special case here.",
                ),
            ),
            Exercise(
                "scaled_dot_product_attention",
                points=6,
                hints=(
                    "Scores are q @ kᵀ with the last two axes of k swapped, shape (..., Tq, Tk), divided "
                    "by √dk. `k.T` reverses *every* axis of a batched tensor: use `k.transpose(-2, -1)`.",
                    "Each query's row of scores is normalised over the keys: softmax over the last axis "
                    "(Tk), not over the queries. The weights then multiply v: (..., Tq, Tk) @ (..., Tk, dv).",
                    "With a mask, True means 'may attend': fill the *scores* where the mask is False with "
                    "-inf before the softmax (`scores.masked_fill(~mask, float('-inf'))`), not the weights after it.",
                ),
            ),
        ),
        aliases=("attention",),
    ),
    # lesson02 row
    # lesson03 row
    # lesson04 row
    # lesson05 row
    # lesson06 row
    # lesson07 row
    # lesson08 row
    # lesson09 row
)


class UnknownLesson(LookupError):
    pass


def find_lesson(key: str) -> Lesson:
    """A lesson by id (`lesson01`), number (`1`, `01`) or slug (`sdpa`)."""
    k = str(key).strip().lower()
    for lesson in LESSONS:
        if k in (lesson.id, lesson.slug, *lesson.aliases, f"{lesson.id}_{lesson.slug}"):
            return lesson
        if k.isdigit() and int(k) == lesson.number:
            return lesson
        if k.removesuffix(".ipynb") == lesson.notebook.removesuffix(".ipynb"):
            return lesson
    known = ", ".join(f"{l.id} ({l.slug})" for l in LESSONS)
    raise UnknownLesson(f"no lesson {key!r}; the lessons are: {known}")
