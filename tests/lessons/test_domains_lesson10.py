"""Lesson 10's declared domains (issue 28, item 1) beyond tests/lessons/test_domains.py: the coverage of the two
exercises that are not modules (RollingKVCache's update, LlamaConfig's fields), wrong code that every check
written before the domains passed and the domain rejects, with the simplest input in its message, and the
ValueErrors of LlamaAttention (issue 29): one input per rule, labelled with the rule it breaks."""

from __future__ import annotations

import dataclasses
import importlib
import inspect

import pytest

from graders.engine import Mistake, mistake_source
from graders.engine.probe import draw_examples
from graders.registry import find_lesson
from harness import check_one, explain, reference, with_code

pytestmark = pytest.mark.lesson10
L10 = find_lesson("lesson10")
MODULE = importlib.import_module(L10.module)
DOMAIN_CHECK = "over its declared domain (drawn examples, the simplest failure shown)"


def _named(domain) -> set[str]:
    return {part.split(".")[0] for name, _ in domain.choices()
            for part in name.removeprefix("dtype of ").removeprefix("layout of ").split(", ")}


def test_rolling_cache_domain_names_window_and_every_argument_of_update():
    ns, _ = reference(L10)
    cls = ns["RollingKVCache"]
    wanted = (set(inspect.signature(cls.__init__).parameters) | set(inspect.signature(cls.update).parameters)) - {"self"}
    (domain,) = MODULE.CHECKS.domains["RollingKVCache"]
    assert wanted - _named(domain) == set(), wanted - _named(domain)


def test_config_domain_names_every_field():
    ns, _ = reference(L10)
    wanted = {f.name for f in dataclasses.fields(ns["LlamaConfig"])}
    (domain,) = MODULE.CHECKS.domains["LlamaConfig"]
    assert wanted - _named(domain) == set(), wanted - _named(domain)


@pytest.mark.parametrize("exercise", ["SwiGLU", "swiglu_hidden_dim", "RollingKVCache", "LlamaConfig", "Llama",
                                      "load_llama_state_dict", "decoder_costs"])
def test_the_reference_takes_every_drawn_example(exercise):
    """An example the reference raises on is skipped as outside the domain: none of the declared ones may be."""
    _, obs = reference(L10)
    key = next(k for k in obs[exercise]["checks"] if k.startswith(DOMAIN_CHECK))
    o = obs[exercise]["checks"][key]
    (domain,) = MODULE.CHECKS.domains[exercise]
    assert o["examples"] == len(draw_examples(domain, 0)) or o["examples"] >= 1 + sum(
        len(v) - 1 for _, v in domain.choices())
    raised = [o[f"#{i} example"] for i in range(o["examples"]) if f"#{i} raised" in o]
    assert not raised, raised


# ----------------------------------------------------------------------------------------------
# Wrong code the old checks passed: only the domain check fails, and it names the simplest input

SWIGLU_3D_ONLY = {  # forward assumes x is (B, T, D): fine for every earlier check, wrong for (..., D)
    "return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))  # (..., hidden) -> (..., D)":
        "B, T, D = x.shape\n        h = x.reshape(B * T, D)\n"
        "        return self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h)).view(B, T, D)"}
CONFIG_WINDOW_WITHIN_BLOCK = {  # a window larger than block_size rejected: the spec allows it
    "if self.window is not None and self.window < 1:":
        "if self.window is not None and not 1 <= self.window <= self.block_size:"}
LLAMA_OFFSET_ONLY_WHEN_DECODING = {  # the blocks get the cache's length only for one-token steps: a chunk restarts at 0
    "x = block(x, cache, i, start)": "x = block(x, cache, i, start if T == 1 else 0)"}


def _mistake(id_: str):
    return next(m for m in MODULE.MISTAKES if m.id == id_)


CASES = [
    # (exercise, edits or a catalogued mistake's id, the simplest failing input the message must start with)
    ("SwiGLU", SWIGLU_3D_ONLY, "fails for shape of x=(D,)"),
    ("swiglu_hidden_dim", "multiplier_truncated_once", "fails for multiple_of, ffn_dim_multiplier=1, 1.3"),
    ("RollingKVCache", "trim_only_when_full", "fails for steps=one at a time, 9 times"),
    ("LlamaConfig", "rejects_mha", "fails for n_head, n_kv_head, n_embd=6, 6, 36"),
    ("LlamaConfig", CONFIG_WINDOW_WITHIN_BLOCK, "fails for window=4096"),
    ("Llama", "final_norm_eps_default", "fails for config.norm_eps=0.5"),
    ("Llama", LLAMA_OFFSET_ONLY_WHEN_DECODING, "fails for cache=7 cached, then all T"),
    ("load_llama_state_dict", "param_data_assigned", "fails for after loading=the checkpoint's tensors changed"),
    ("decoder_costs", "kv_bytes_from_a_table", "fails for dtype=float64"),
]


@pytest.mark.parametrize("exercise, edits, simplest", CASES,
                         ids=[f"{e}-{x if isinstance(x, str) else i}" for i, (e, x, _) in enumerate(CASES)])
def test_the_domain_catches_what_the_old_checks_missed(exercise, edits, simplest, tmp_path):
    mistake = _mistake(edits) if isinstance(edits, str) else Mistake(exercise, "wrong", "-", edits=edits)
    ex = check_one(L10, with_code(L10, exercise, mistake_source(mistake, "lesson10"), tmp_path), exercise)
    assert ex.status == "failed", explain(ex)
    hidden = {c.name for c in MODULE.CHECKS.of(exercise) if c.hidden}
    failed = [c for c in ex.checks if c.status == "failed"]
    public = [c for c in failed if c.name not in hidden]
    assert [c.name for c in public] == [DOMAIN_CHECK], explain(ex)  # no public check caught it before
    assert public[0].message.startswith(simplest), public[0].message
    if exercise != "RollingKVCache":  # there the hidden battery's one-position steps caught it (after submitting)
        assert [c.name for c in failed] == [DOMAIN_CHECK], explain(ex)
    if isinstance(edits, str):  # a catalogued mistake: named with its own message
        assert ex.diagnosis == mistake.message, explain(ex)


# ----------------------------------------------------------------------------------------------
# Issue 29: LlamaAttention's ValueErrors, each input labelled with the rule it breaks

def test_each_bad_input_breaks_the_rule_its_label_names():
    from graders.lesson10_llama import _ATTN_BAD

    ns, _ = reference(L10)
    rules = {"num_heads": lambda d, h, kv: d % h != 0, "num_kv_heads": lambda d, h, kv: h % kv != 0,
             None: lambda d, h, kv: d % h == 0 and (d // h) % 2 == 1}
    for label, (d, h, kv), name in _ATTN_BAD:
        broken = [n for n, rule in rules.items() if rule(d, h, kv)]
        assert broken == [name], (label, broken)  # exactly the rule the label names
        shown = {"num_heads": [f"num_heads={h}", f"d_model={d}"], "num_kv_heads": [f"num_kv_heads={kv}",
                 f"num_heads={h}"], None: [f"{d} / {h} = {d // h}"]}[name]
        assert all(part in label for part in shown), label  # the label shows the input's own numbers
        with pytest.raises(ValueError) as info:
            ns["LlamaAttention"](d, h, kv)
        assert name is None or name in str(info.value)
        assert "even" in str(info.value) or name is not None


def test_attention_without_the_odd_head_rule_fails_the_check_that_names_it(tmp_path):
    src = mistake_source(Mistake("LlamaAttention", "no_odd", "-", edits={
        "        if (d_model // num_heads) % 2:\n": "        if False:\n"}), "lesson10")
    ex = check_one(L10, with_code(L10, "LlamaAttention", src, tmp_path), "LlamaAttention")
    failed = [c for c in ex.checks if c.status == "failed"]
    assert [c.name.split(" (")[0] for c in failed] == [
        "ValueError when num_heads does not divide d_model, num_kv_heads does not divide num_heads, or the head "
        "size is odd"], explain(ex)
    assert "LlamaAttention(30, 6, 2) (head size 30 / 6 = 5 is odd" in failed[0].message, failed[0].message


def test_the_rules_are_stated_in_the_text_and_a_hint():
    import nbformat

    text = "\n".join(c.source for c in nbformat.read(L10.solution_path, as_version=4).cells if c.cell_type == "markdown")
    assert "`num_heads` does not divide `d_model`" in text and "`num_kv_heads` does not divide `num_heads`" in text
    assert "is odd (RoPE rotates pairs" in text
    hints = " ".join(next(e for e in L10.exercises if e.name == "LlamaAttention").hints)
    assert "num_heads does not divide d_model" in hints and "odd" in hints
