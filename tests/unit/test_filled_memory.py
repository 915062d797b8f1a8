"""engine.probe.filled_memory: while a CPU probe runs, memory torch hands out unwritten reads as NaN, so code
that reads memory it never wrote gets one verdict in every run and every seat (the hostile corpus's
wrong_device.ipynb once read differently warm and cold); and the diagnosis of a result on the meta device."""

from __future__ import annotations

import torch

from graders.engine.probe import filled_memory
from graders.registry import find_lesson
from harness import check_one, with_code

L01 = find_lesson("lesson01")


def test_unwritten_memory_reads_as_nan_on_the_cpu_and_the_flags_come_back():
    before = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    with filled_memory(torch.device("cpu")):
        assert torch.empty(64).isnan().all()
        assert (torch.empty(8, dtype=torch.int64) == torch.iinfo(torch.int64).max).all()
        # the case it is for: torch 2.13 multiplies a meta tensor by a CPU one into a CPU tensor never written
        out = torch.randn(2, 3, 4).to("meta") @ torch.randn(2, 4, 5)
        assert out.device.type == "meta" or out.isnan().all()
    assert (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()) == before


def test_an_error_inside_restores_the_flags_and_cuda_probes_are_left_alone():
    try:
        with filled_memory(torch.device("cpu")):
            raise ValueError("student code")
    except ValueError:
        pass
    assert not torch.are_deterministic_algorithms_enabled()
    with filled_memory(torch.device("cuda")):  # no CUDA tensor is made: only the flags are read
        assert not torch.are_deterministic_algorithms_enabled()


SOFTMAX_TO_META = '''
def softmax(x, dim=-1):
    e = (x - x.amax(dim=dim, keepdim=True)).exp()
    return (e / e.sum(dim=dim, keepdim=True)).to("meta")
'''


def test_a_meta_softmax_gives_attention_one_verdict_and_says_meta(tmp_path):
    path = with_code(L01, "softmax", SOFTMAX_TO_META, tmp_path)
    runs = [check_one(L01, path, "scaled_dot_product_attention") for _ in range(2)]
    seen = [[(c.name, c.device, c.dtype, c.status, c.message) for c in ex.checks] + [ex.diagnosis] for ex in runs]
    assert seen[0] == seen[1]
    ex = runs[0]
    assert ex.status != "passed" and ex.diagnosis_id == "structural:device", ex.diagnosis
    assert "meta" in ex.diagnosis and "device=x.device" in ex.diagnosis
    # the output `weights @ v` comes back on the CPU, never written: it now reads as NaN, the same every run
    (agrees,) = [c for c in ex.checks if c.name == "agrees with F.scaled_dot_product_attention" and c.device == "cpu"]
    assert agrees.status == "failed" and "NaN" in agrees.message, agrees.message
