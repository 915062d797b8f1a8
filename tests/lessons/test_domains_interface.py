"""The domain gaps of issue 44 item 6: wrong code the earlier checks passed, now failed by the exercise's domain
check with the simplest input that shows it.

- arguments passed as the caller may pass them: `t_k=None` given explicitly, and every optional argument in
  the signature's order (graders/interface.py's PASSED);
- a module's state_dict names and shapes (lessons 03, 07, 10: the interface a checkpoint loads through);
- token ids in int32 (lesson 08: GPT takes them, generate keeps their dtype);
- precision and range: RoPE at positions in the thousands with bfloat16 x, SwiGLU at magnitudes where
  float32's exp overflows, RMSNorm's module with float16 inputs whose squares overflow, the Triton RMSNorm on
  rows of several thousand.

Each planted mistake is an exact edit of the solved cell (graders.engine.mistake_source), probed and judged in
this process (trusted code) against the reference's observations of the same exercise; the expected start of
the message is derived from the domain (`example_text`), never typed in. The reference takes every drawn
example (an example it raised on would be skipped as outside the domain)."""

from __future__ import annotations

import importlib

import pytest

from graders.engine import Mistake, judge_exercise, mistake_source, probe_exercise
from graders.engine.checks import CHECKS_OF, example_text
from graders.interface import PASSED, arguments, layout_message
from graders.registry import find_lesson
from harness import _configs, run_in_process

DOMAIN_CHECK = "over its declared domain (drawn examples, the simplest failure shown)"

_NS: dict[str, dict] = {}
_REF: dict[tuple[str, str], dict] = {}


def _probe(lesson_id: str, exercise: str, edits: dict | None = None) -> dict:
    lesson = find_lesson(lesson_id)
    module = importlib.import_module(lesson.module)
    if lesson_id not in _NS:
        _NS[lesson_id] = run_in_process(lesson, lesson.solution_path)[0]
    ns = dict(_NS[lesson_id])
    if edits:
        src = mistake_source(Mistake(exercise, "planted", "planted", edits=edits), lesson_id)
        exec(compile(src, "<planted>", "exec", dont_inherit=True), ns)
    return probe_exercise(module, ns, exercise, _configs(module))


def _reference(lesson_id: str, exercise: str) -> dict:
    if (lesson_id, exercise) not in _REF:
        _REF[lesson_id, exercise] = _probe(lesson_id, exercise)
    return _REF[lesson_id, exercise]


def _judged(lesson_id: str, exercise: str, edits: dict | None = None):
    lesson = find_lesson(lesson_id)
    module = importlib.import_module(lesson.module)
    ex = next(e for e in lesson.exercises if e.name == exercise)
    ref = _reference(lesson_id, exercise)
    obs = ref if edits is None else _probe(lesson_id, exercise, edits)
    return judge_exercise(module, ex, obs, ref, {}, gpu=False)


def _expected_start(lesson_id: str, exercise: str, **choices) -> str:
    module = importlib.import_module(find_lesson(lesson_id).module)
    (domain,) = CHECKS_OF(module).domains[exercise]
    defaults = {n: v[0] for n, v in domain.choices()}
    for name, value in choices.items():
        assert value in dict(domain.choices())[name], f"{name}={value!r} is not in {exercise}'s domain"
    return f"fails for {example_text({**defaults, **choices}, defaults)}"


def _domain_failure(lesson_id: str, exercise: str, edits: dict, only: bool = True, **simplest) -> str:
    res = _judged(lesson_id, exercise, edits)
    failed = {c.name.removesuffix(" (fresh inputs)"): c for c in res.checks if c.status == "failed"}
    assert DOMAIN_CHECK in failed, [(c.name, c.status, c.message) for c in res.checks if c.status != "passed"]
    if only:  # the older checks passed this code
        assert set(failed) == {DOMAIN_CHECK}, sorted(failed)
    msg = failed[DOMAIN_CHECK].message
    start = _expected_start(lesson_id, exercise, **simplest)
    assert msg.startswith(start), (start, msg)
    return msg


CHANGED = [("lesson01", "softmax"), ("lesson04", "LayerNorm"), ("lesson04", "batch_norm"), ("lesson04", "group_norm"),
           ("lesson10", "swiglu_hidden_dim"), ("lesson02", "causal_mask"), ("lesson02", "to_additive"), ("lesson03", "MultiHeadAttention"),
           ("lesson03", "CausalSelfAttention"), ("lesson03", "GroupedQueryAttention"), ("lesson04", "layer_norm"),
           ("lesson05", "rms_norm"), ("lesson05", "RMSNorm"), ("lesson05", "rms_norm_triton"),
           ("lesson06", "apply_rope"), ("lesson06", "apply_rope_half"), ("lesson06", "rope_inv_freq"),
           ("lesson06", "LearnedPositionalEmbedding"), ("lesson07", "MLP"), ("lesson07", "TransformerBlock"),
           ("lesson08", "GPT"), ("lesson08", "generate"), ("lesson09", "flash_attention"),
           ("lesson09", "kv_cache_bytes"), ("lesson10", "SwiGLU"), ("lesson10", "LlamaAttention"),
           ("lesson10", "LlamaBlock"), ("lesson10", "Llama"), ("lesson10", "filter_logits"),
           ("lesson01", "scaled_dot_product_attention"), ("lesson08", "GPTConfig"), ("lesson08", "KVCache"),
           ("lesson09", "attention_flops"), ("lesson10", "RollingKVCache"), ("lesson10", "LlamaConfig"),
           ("lesson10", "decoder_costs"), ("lesson09", "flash_attention"),
           ("lesson10", "swiglu_hidden_dim")]


@pytest.mark.parametrize("lesson_id, exercise", CHANGED, ids=[f"{l}-{e}" for l, e in CHANGED])
def test_the_reference_passes_and_takes_every_drawn_example(lesson_id, exercise):
    res = _judged(lesson_id, exercise)
    assert res.status == "passed", [(c.name, c.message) for c in res.checks if c.status != "passed"]
    checks = _reference(lesson_id, exercise)["checks"]
    for key in [k for k in checks if k.startswith(DOMAIN_CHECK)]:
        o = checks[key]
        raised = [(o[f"#{i} example"], o[f"#{i} raised"]) for i in range(o["examples"]) if f"#{i} raised" in o]
        assert not raised, raised


def test_arguments_in_the_signature_order_pass_every_optional_parameter():
    assert arguments(("t_k", "device"), {"device": "cpu"}, {"t_k": None, "device": None}, PASSED.values[1]) \
        == ((None, "cpu"), {})
    assert arguments(("t_k", "device"), {"t_k": 3}, {"t_k": None, "device": None}, PASSED.values[1]) \
        == ((3, None), {})
    assert arguments(("t_k", "device"), {"device": "cpu"}, {}, PASSED.values[0]) == ((), {"device": "cpu"})
    with pytest.raises(ValueError):
        arguments(("eps",), {"weight": 1}, {}, PASSED.values[1])


def test_a_layout_message_names_what_is_missing_and_what_is_extra():
    assert layout_message(["w (2, 3)"], ["w (2, 3)"], "m") is None
    msg = layout_message(["w (3, 2)", "mask (4, 4)"], ["w (2, 3)"], "m")
    assert "lacks w (2, 3)" in msg and "has w (3, 2), mask (4, 4) besides" in msg


# ----------------------------------------------------------------------------------------------
# arguments: t_k=None given explicitly, and positional calls in the signature's order


@pytest.mark.lesson02
def test_causal_mask_with_a_sentinel_default_fails_for_an_explicit_none():
    edits = {"t_k: int | None = None,": "t_k: int = -1,", "t_k = t_q if t_k is None else t_k": "t_k = t_q if t_k == -1 else t_k"}
    # in the signature's order t_k is passed as None too: the simpler example of the two
    msg = _domain_failure("lesson02", "causal_mask", edits, passed=PASSED.values[1])
    assert "raised TypeError" in msg
    # and t_k=None given by keyword, alone, fails as well
    (domain,) = CHECKS_OF(importlib.import_module(find_lesson("lesson02").module)).domains["causal_mask"]
    alone = [values[0] for _, values in domain.choices()]
    alone[0] = "5, None"
    o = next(v for k, v in _probe("lesson02", "causal_mask", edits)["checks"].items() if k.startswith(DOMAIN_CHECK))
    (i,) = [i for i in range(o["examples"]) if list(o[f"#{i} example"]) == alone]
    assert "TypeError" in o[f"#{i} raised"]


# (lesson, exercise, the student's signature edit, words of the message): each passes every keyword call
OUT_OF_ORDER = [
    ("lesson02", "causal_mask",  # device keyword-only
     {"device: torch.device | str | None = None)": "*, device: torch.device | str | None = None)"}, "positional"),
    ("lesson03", "MultiHeadAttention",  # dropout and bias swapped in __init__
     {"dropout: float = 0.0, bias: bool = True):\n        super().__init__()\n        ### BEGIN SOLUTION\n"
      "        if d_model % num_heads":
      "bias: bool = True, dropout: float = 0.0):\n        super().__init__()\n        ### BEGIN SOLUTION\n"
      "        if d_model % num_heads"}, ""),
    ("lesson04", "layer_norm",  # weight and bias swapped
     {"weight: torch.Tensor | None = None,\n               bias: torch.Tensor | None = None,":
      "bias: torch.Tensor | None = None,\n               weight: torch.Tensor | None = None,"}, ""),
    ("lesson05", "rms_norm",  # eps keyword-only
     {"weight: torch.Tensor | None = None,\n             eps": "weight: torch.Tensor | None = None, *,\n             eps"},
     "positional"),
    ("lesson07", "TransformerBlock",  # dropout third, as in lesson 03's attention, expansion fourth
     {"expansion: int = 4, dropout: float = 0.0,": "dropout: float = 0.0, expansion: int = 4,"}, ""),
    ("lesson10", "filter_logits",  # top_p and min_p swapped
     {"top_p: float | None = None,\n                  min_p: float | None = None)":
      "min_p: float | None = None,\n                  top_p: float | None = None)"}, "filter_logits(logits, 5, 0.9, 0.05)"),
]


@pytest.mark.parametrize("lesson_id, exercise, edits, named", OUT_OF_ORDER, ids=[f"{l}-{e}" for l, e, _, _ in OUT_OF_ORDER])
def test_a_signature_out_of_order_fails_when_called_in_the_signature_order(lesson_id, exercise, edits, named):
    msg = _domain_failure(lesson_id, exercise, edits, passed=PASSED.values[1])
    assert named in msg, msg


# ----------------------------------------------------------------------------------------------
# state_dict names and shapes


def _appended(line: str, added: str) -> dict:
    """An edit that adds `added` (a statement of __init__) after the solved cell's `line`."""
    return {line: f"{line}\n        {added}"}


# (lesson, exercise, what the student added to __init__ after a line of the solution, what the message names)
EXTRA_STATE = [
    ("lesson03", "CausalSelfAttention",  # GPT-2's habit: the causal mask as a persistent buffer
     _appended("self.qkv_proj = nn.Linear(d_model, 3 * d_model, bias=bias)  # rows: W_q, W_k, W_v",
               "self.register_buffer('mask', torch.ones(256, 256, dtype=torch.bool).tril())"),
     "has mask (256, 256) besides"),
    ("lesson07", "MLP",  # a second path to the same layers: their weights saved twice, under other names
     _appended("self.fc2 = nn.Linear(hidden, d_model, bias=bias)",
               "self.net = nn.Sequential(self.fc1, nn.GELU(approximate='tanh'), self.fc2)"),
     "has net.0.weight (96, 24)"),
    ("lesson07", "TransformerBlock",
     _appended("self.mlp = MLP(d_model, expansion, dropout, bias)",
               "self.register_buffer('causal_mask', torch.ones(64, 64, dtype=torch.bool).tril())"),
     "has causal_mask (64, 64) besides"),
]


@pytest.mark.parametrize("lesson_id, exercise, edits, named", EXTRA_STATE, ids=[f"{l}-{e}" for l, e, _, _ in EXTRA_STATE])
def test_an_entry_the_checkpoint_lacks_fails_on_the_state_dict(lesson_id, exercise, edits, named):
    msg = _domain_failure(lesson_id, exercise, edits)
    assert f"{exercise}'s state_dict differs" in msg and named in msg, msg


# ----------------------------------------------------------------------------------------------
# int32 token ids (lesson 08)


@pytest.mark.lesson08
def test_gpt_embedding_through_one_hot_fails_for_int32_ids():
    edits = {"self.wte(idx)": "F.one_hot(idx, self.config.vocab_size).to(self.wte.weight.dtype) @ self.wte.weight"}
    msg = _domain_failure("lesson08", "GPT", edits, **{"dtype of idx": "int32"})
    assert "one_hot" in msg


@pytest.mark.lesson08
def test_generate_appending_int64_tokens_to_an_int32_prompt_fails_on_the_dtype():
    msg = _domain_failure("lesson08", "generate", {"next_token.to(out.dtype)": "next_token"},
                          **{"dtype of idx": "int32"})
    assert "dtype of the result: expected 'int32', got 'int64'" in msg


# ----------------------------------------------------------------------------------------------
# precision and range


@pytest.mark.lesson06
@pytest.mark.parametrize("exercise", ["apply_rope", "apply_rope_half"])
def test_rope_with_angles_in_x_dtype_fails_for_bfloat16_at_positions_in_the_thousands(exercise):
    # the battery's bfloat16 entry (positions in the hundreds) fails it too: not the domain's alone
    msg = _domain_failure("lesson06", exercise, {"positions.to(x.device, torch.float32)": "positions.to(x.device, x.dtype)"},
                          only=False, positions="from 5000 (a long cache)")
    assert "output, x in bfloat16 differs" in msg


@pytest.mark.lesson06
def test_rope_from_a_table_of_4096_positions_fails_past_it():
    edits = {"angles = positions.to(x.device, torch.float32)[..., None] * inv_freq":
             "angles = (torch.arange(4096, device=x.device, dtype=torch.float32)[:, None] * inv_freq)"
             "[positions.long()]"}
    msg = _domain_failure("lesson06", "apply_rope", edits, positions="from 5000 (a long cache)")
    assert "IndexError" in msg


@pytest.mark.lesson10
def test_swiglu_with_silu_through_exp_fails_where_exp_overflows():
    edits = {"F.silu(self.gate_proj(x))": "(lambda g: g * torch.exp(g) / (1 + torch.exp(g)))(self.gate_proj(x))"}
    msg = _domain_failure("lesson10", "SwiGLU", edits, **{"scale of x": 100.0})
    assert "NaN" in msg


@pytest.mark.lesson05
def test_rmsnorm_module_without_the_float32_upcast_fails_its_domain_in_float16():
    # the module's own float16 probe fails it too; the domain now holds the same rule with a float32 weight
    edits = {"return rms_norm(x, self.weight, self.eps)":
             "y = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)\n"
             "        return (y * self.weight).to(x.dtype)"}
    msg = _domain_failure("lesson05", "RMSNorm", edits, only=False, **{"scale of x": 300.0})
    assert "output, x in float16" in msg


@pytest.mark.lesson05
def test_triton_rms_norm_with_a_block_capped_at_1024_fails_on_rows_of_3000():
    edits = {"BLOCK=triton.next_power_of_2(n_cols))": "BLOCK=min(triton.next_power_of_2(n_cols), 1024))"}
    _domain_failure("lesson05", "rms_norm_triton", edits, D=3000)


# ----------------------------------------------------------------------------------------------
# the leftovers of positional calls (issue 44 item 6): attention's mask, the configs built positionally, the
# caches' constructor and update by position or by name, decoder_costs' dtype, attention_flops' causal. Each
# signature edit below passes every keyword call the checks made before.

_CONFIG_SWAP = {"    n_head: int = 12\n    n_embd: int = 768\n": "    n_embd: int = 768\n    n_head: int = 12\n"}
_LLAMA_SWAP = {"    n_kv_head: int\n    n_embd: int\n": "    n_embd: int\n    n_kv_head: int\n"}
_UPDATE_NAMES = {"k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor,":
                 "key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor,",
                 "        ### BEGIN SOLUTION\n        if layer_idx == len(self.keys):":
                 "        ### BEGIN SOLUTION\n        k, v = key, value\n        if layer_idx == len(self.keys):"}

CALLS = [
    ("lesson01", "scaled_dot_product_attention",  # mask keyword-only
     {"v: torch.Tensor,\n                                 mask: torch.Tensor | None = None)":
      "v: torch.Tensor, *,\n                                 mask: torch.Tensor | None = None)"},
     {"passed": PASSED.values[1]}, "positional"),
    ("lesson08", "GPTConfig", _CONFIG_SWAP, {"passed": PASSED.values[1]}, "is a valid config, but it raised"),
    ("lesson10", "LlamaConfig", _LLAMA_SWAP, {"passed": PASSED.values[1]}, "LlamaConfig(67, 24, 2, 6, 2, 36, 52"),
    ("lesson08", "KVCache", _UPDATE_NAMES, {"update called": "by keyword (layer_idx=, k=, v=)"}, "layer_idx"),
    ("lesson10", "RollingKVCache", _UPDATE_NAMES, {"update called": "by keyword (layer_idx=, k=, v=)"}, "layer_idx"),
    ("lesson10", "RollingKVCache", {"def __init__(self, window: int):": "def __init__(self, size: int):\n        window = size"},
     {"window given": "by keyword (window=)"}, "window"),
    ("lesson09", "attention_flops", {"d: int, causal: bool = False) -> int:": "d: int, *, causal: bool = False) -> int:"},
     {"passed": PASSED.values[1]}, "positional"),
    ("lesson10", "decoder_costs", {"dtype: torch.dtype = torch.bfloat16) -> dict:": "*, dtype: torch.dtype = torch.bfloat16) -> dict:"},
     {"passed": PASSED.values[1]}, "positional"),
    ("lesson10", "decoder_costs",  # a default other than the stated bfloat16: every call gave dtype before
     {"dtype: torch.dtype = torch.bfloat16) -> dict:": "dtype: torch.dtype = torch.float32) -> dict:"},
     {"dtype": "omitted"}, "kv_bytes_per_token"),
]


@pytest.mark.parametrize("lesson_id, exercise, edits, simplest, named", CALLS,
                         ids=[f"{l}-{e}-{next(iter(s))}" for l, e, _, s, _ in CALLS])
def test_a_call_the_keyword_checks_never_made_fails_on_the_domain(lesson_id, exercise, edits, simplest, named):
    msg = _domain_failure(lesson_id, exercise, edits, **simplest)
    assert named in msg, msg


# ----------------------------------------------------------------------------------------------
# a config field's stated validation, just past each rule (lesson 10's LlamaConfig; lesson 08's drew it already)

_LLAMA_RULES = [
    # only the head size's parity: n_embd=40, n_head=6 (not divisible, floor quotient 6) is accepted
    ({"        if self.n_embd % self.n_head:\n": "        if False:\n"},
     {"n_head, n_kv_head, n_embd": "6, 2, 40"}, "naming `n_embd`, but it raised nothing"),
    # norm_eps == 0 read as "not positive": a negative norm_eps is accepted
    ({"if not self.norm_eps > 0:": "if self.norm_eps == 0:"}, {"norm_eps": -1e-5}, "`norm_eps`"),
    # a window of 0 rejected, a negative one accepted
    ({"if self.window is not None and self.window < 1:": "if self.window == 0:"}, {"window": -2}, "`window`"),
    # n_head left out of the sizes' loop: n_head=0 reaches n_embd % n_head, a ZeroDivisionError, not ValueError
    ({"(\"vocab_size\", \"block_size\", \"n_layer\", \"n_head\", \"n_kv_head\", \"n_embd\", \"hidden_dim\")":
      "(\"vocab_size\", \"block_size\", \"n_layer\", \"n_kv_head\", \"n_embd\", \"hidden_dim\")"},
     {"n_head, n_kv_head, n_embd": "0, 1, 36"}, "ZeroDivisionError"),
]


@pytest.mark.lesson10
@pytest.mark.parametrize("edits, simplest, named", _LLAMA_RULES, ids=["divisible", "norm_eps<0", "window<0", "n_head=0"])
def test_llama_config_missing_a_stated_validation_fails_on_the_domain(edits, simplest, named):
    msg = _domain_failure("lesson10", "LlamaConfig", edits, **simplest)
    assert named in msg, msg


@pytest.mark.lesson10
def test_rolling_cache_rejecting_only_window_0_fails_for_a_negative_window():
    res = _judged("lesson10", "RollingKVCache", {"if window < 1:": "if window == 0:"})
    failed = {c.name.removesuffix(" (fresh inputs)"): c.message for c in res.checks if c.status == "failed"}
    assert set(failed) == {"ValueError for a window below 1"}, failed
    assert "RollingKVCache(-3)" in failed["ValueError for a window below 1"], failed


# ----------------------------------------------------------------------------------------------
# every ValueError the text states, with a value just past each side of the range (lesson 10)

_BAD_VALUES = [
    ("filter_logits", {"if min_p is not None and not 0.0 <= min_p <= 1.0:": "if min_p is not None and min_p < 0.0:"},
     "ValueError for top_k < 1, top_p outside (0, 1], min_p outside [0, 1]", "min_p=1.5"),
    ("swiglu_hidden_dim", {"if d_model < 1:": "if d_model == 0:"}, "ValueError for d_model or multiple_of below 1",
     "swiglu_hidden_dim(-8)"),
]


@pytest.mark.lesson10
@pytest.mark.parametrize("exercise, edits, check, named", _BAD_VALUES, ids=[e for e, *_ in _BAD_VALUES])
def test_a_range_checked_on_one_side_only_fails_past_the_other(exercise, edits, check, named):
    res = _judged("lesson10", exercise, edits)
    failed = {c.name.removesuffix(" (fresh inputs)"): c.message for c in res.checks if c.status == "failed"}
    assert set(failed) == {check}, failed
    assert named in failed[check], failed


# ----------------------------------------------------------------------------------------------
# internal precision with half inputs: flash_attention's lse is float32 whatever q's dtype (lesson 09)

@pytest.mark.lesson09
def test_flash_attention_with_lse_in_the_inputs_dtype_fails_for_half_inputs():
    """Before: every check judged lse's values with its dtype left out, and only the battery gave half inputs."""
    edits = {"lse = torch.empty(BH, Tq, device=q.device)  # float32":
             "lse = torch.empty(BH, Tq, device=q.device, dtype=q.dtype)"}
    msg = _domain_failure("lesson09", "flash_attention", edits, **{"dtype of q, k, v": "float16"})
    assert "lse" in msg and "float32" in msg, msg


# ----------------------------------------------------------------------------------------------
# forward's optional arguments positionally, None given explicitly (lessons 08, 10): the course's own block and
# model pass `start` and `cache` so

_START_SENTINEL = {"start: int | None = None) -> torch.Tensor:": "start: int = -1) -> torch.Tensor:",
                   "if start is None:": "if start == -1:"}
_FORWARD = [
    ("lesson10", "LlamaAttention", _START_SENTINEL, "TypeError"),
    ("lesson10", "LlamaBlock",  # a sentinel of its own, turned into "none" before handing it to the attention
     {"start: int | None = None) -> torch.Tensor:": "start: int = -1) -> torch.Tensor:",
      "self.attn(self.ln1(x), cache, layer_idx, start)": "self.attn(self.ln1(x), cache, layer_idx, start if start >= 0 else None)"},
     "TypeError"),
    ("lesson08", "GPT", {"idx: torch.Tensor, targets: torch.Tensor | None = None,\n                cache=None)":
                         "idx: torch.Tensor, cache=None,\n                targets: torch.Tensor | None = None)"}, ""),
    ("lesson10", "Llama", {"idx: torch.Tensor, targets: torch.Tensor | None = None,\n                cache=None)":
                           "idx: torch.Tensor, cache=None,\n                targets: torch.Tensor | None = None)"}, ""),
]


@pytest.mark.parametrize("lesson_id, exercise, edits, named", _FORWARD, ids=[f"{l}-{e}" for l, e, _, _ in _FORWARD])
def test_a_forward_that_only_takes_keywords_fails_in_the_signature_order(lesson_id, exercise, edits, named):
    msg = _domain_failure(lesson_id, exercise, edits, passed=PASSED.values[1])
    assert named in msg, msg


@pytest.mark.lesson10
def test_llama_attention_with_positions_in_x_dtype_fails_in_bfloat16_at_position_5000():
    """Before: the attention's checks gave x in float32 only, where positions in x's dtype are exact."""
    edits = {"positions = torch.arange(start, start + T, device=x.device)  # (T,)":
             "positions = torch.arange(start, start + T, device=x.device, dtype=x.dtype)  # (T,)"}
    msg = _domain_failure("lesson10", "LlamaAttention", edits, start="given: 5000")
    assert "output, module and x in bfloat16" in msg, msg
