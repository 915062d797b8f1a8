"""The GPU half of every grader, on a machine with CUDA (skipped elsewhere, so CI on CPU skips it).

What the CPU suite cannot show: each lesson's solved notebook passes its float16/bfloat16 checks on the
GPU (SDPA's fused kernels, compiled Triton), the student stubs stay not_implemented there, and every
known mistake is still rejected and named with the GPU checks in play. Run on a GPU machine with

    python -m pytest -q tests/test_gpu.py -n 8
"""

from __future__ import annotations

import pytest

from conftest import marks
from course_cli.sandboxed.grading import cuda_available, grade_notebook
from graders.registry import LESSONS
from harness import explain, grade_one, mistakes_of, with_mistake

pytestmark = pytest.mark.skipif(not cuda_available(), reason="needs a CUDA GPU")


def _cuda_checks(ex):
    return [c for c in ex.checks if c.device == "cuda"]


@pytest.mark.parametrize("lesson", [pytest.param(l, marks=marks(l), id=l.id) for l in LESSONS])
def test_solution_passes_its_gpu_checks(lesson):
    result = grade_notebook(lesson, lesson.solution_path)
    cuda = [c for ex in result.exercises for c in _cuda_checks(ex)]
    assert cuda, f"{lesson.id} ran no GPU checks"
    for ex in result.exercises:
        assert ex.status == "passed", explain(ex)
        for c in _cuda_checks(ex):
            assert c.status == "passed", explain(ex)  # not skipped: a GPU is here
    assert result.score == lesson.max_score


@pytest.mark.parametrize("lesson", [pytest.param(l, marks=marks(l), id=l.id) for l in LESSONS])
def test_student_stub_is_not_implemented_on_gpu(lesson):
    result = grade_notebook(lesson, lesson.student_path)
    for ex in result.exercises:
        assert ex.status == "not_implemented", explain(ex)
        assert ex.points == 0


@pytest.mark.parametrize("lesson, mistake", [pytest.param(l, m, marks=marks(l, m.exercise), id=f"{l.id}-{m.id}")
                                             for l in LESSONS for m in mistakes_of(l)])
def test_known_mistake_is_rejected_with_gpu_checks(lesson, mistake, tmp_path):
    ex = grade_one(lesson, with_mistake(lesson, mistake, tmp_path), mistake.exercise)
    assert ex.status in ("failed", "error"), explain(ex)
    assert ex.points == 0
    assert ex.diagnosis == mistake.message, explain(ex)
