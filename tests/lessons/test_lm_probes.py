"""graders/lm_probes.py, what lessons 08 and 10 share: the grader's KV cache, the causal and the cache judges
(each lesson's advice in its message), and the training-step benchmark of both lessons' solutions."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from graders import lm_probes
from graders.engine.compare import tolerance

pytestmark = [pytest.mark.lesson08, pytest.mark.lesson10]
CTX = SimpleNamespace(tol=tolerance("float32"), config=SimpleNamespace(dtype="float32"))


def test_the_cache_appends_per_layer_along_time_and_counts_layer_0():
    cache = lm_probes.Cache()
    assert len(cache) == 0
    k1, v1 = torch.randn(2, 3, 4, 5), torch.randn(2, 3, 4, 5)
    assert cache.update(0, k1, v1)[0] is k1
    k2, v2 = torch.randn(2, 3, 1, 5), torch.randn(2, 3, 1, 5)
    k_all, v_all = cache.update(0, k2, v2)
    assert torch.equal(k_all, torch.cat([k1, k2], -2)) and torch.equal(v_all, torch.cat([v1, v2], -2))
    cache.update(1, k1, v1)  # another layer has a history of its own
    assert len(cache) == 5 and cache.k[1].shape[-2] == 4


def test_the_causal_judge_names_the_leak_and_the_lessons_advice():
    logits = torch.randn(2, 13, 7)
    leaked = logits.clone()
    leaked[:, 3] += 0.5  # an earlier position moved when the future changed
    judge = lm_probes.causal_judge(". Are the blocks causal (causal=True)?")
    ref = {"logits": logits}
    msg = judge({"logits": logits, "logits with the future changed": leaked}, ref, CTX)
    assert "from position 7 on moved the logits of earlier positions by up to 0.5" in msg
    assert msg.endswith("the future leaks into the past. Are the blocks causal (causal=True)?")
    later = logits.clone()
    later[:, 7:] += 1.0  # only the changed positions moved: causal
    assert judge({"logits": logits, "logits with the future changed": later}, ref, CTX) is None


def test_the_cache_judge_gives_its_advice_only_when_the_first_chunk_agrees():
    full = torch.randn(2, 10, 7)
    judge = lm_probes.cache_judge("the cache (a prompt of 4, then singles)", 4, "do later chunks continue?")
    late = full.clone()
    late[:, 6] += 1.0
    msg = judge({"full forward": full, "through the cache": late}, {"through the cache": full}, CTX)
    assert "positions [6] differ: do later chunks continue?" in msg
    early = full.clone()
    early[:, 1] += 1.0
    msg = judge({"full forward": full, "through the cache": early}, {"through the cache": full}, CTX)
    assert "positions [1, " not in msg and "positions [1] differ" in msg and "continue?" not in msg
    counted = {"full forward": full, "through the cache": full.clone(), "cached positions": 9}
    assert "holds 9 positions, expected 10" in judge(counted, {"through the cache": full, "cached positions": 10}, CTX)
    assert judge({**counted, "cached positions": 10}, {"through the cache": full, "cached positions": 10}, CTX) is None


@pytest.mark.parametrize("lesson, fields", [
    ("lesson08", {"vocab_size": 17, "block_size": 8, "n_layer": 1, "n_head": 2, "n_embd": 16, "batch": 2}),
    ("lesson10", {"vocab_size": 17, "block_size": 8, "n_layer": 1, "n_head": 2, "n_kv_head": 1, "n_embd": 16,
                  "hidden_dim": 24, "batch": 2})])
def test_the_training_step_benchmark_times_the_solution_against_torch(lesson, fields):
    import importlib

    from graders.parts import import_lesson
    from graders.registry import find_lesson

    grader = importlib.import_module(find_lesson(lesson).module)
    report = grader.benchmark(vars(import_lesson(lesson)), "cpu", configs=(fields,), repeats=2)
    assert report["columns"] == lm_probes.TRAINING_COLUMNS and report["notes"] == [lm_probes.TRAINING_NOTE]
    (row,) = report["rows"]
    assert row[0].startswith("L=1 D=16 ") and row[0].endswith("T=8 B=2")
    assert "torch's" not in row[1]  # the solution has as many parameters as torch's model of the same size
    assert all(isinstance(v, (int, float)) and v > 0 for v in row[2:])
