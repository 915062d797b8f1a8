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
# The student distribution of a graded class (`course pack`) has no solutions/ and keeps the release
# notebooks inside the package; the public checks' reference observations ship as data.
STUDENT_DISTRIBUTION = (Path(__file__).resolve().parent / "_distribution.py").exists()
if STUDENT_DISTRIBUTION:
    LESSONS_DIR = Path(__file__).resolve().parent / "lessons"


@dataclass(frozen=True)
class Exercise:
    """One named function or class the student writes."""

    name: str  # the id in results, the function's name in the notebook
    points: float = 1.0
    hints: tuple[str, ...] = ()  # revealed one at a time, the last one near the answer
    challenge: bool = False  # optional; still graded and scored
    # partial credit (`course grade --partial`): a check's weight by name; every other check weighs 1
    weights: tuple[tuple[str, float], ...] = ()
    depends: tuple[str, ...] = ()  # exercises of the same lesson this one calls: fix those first when both fail


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
        names = [e.name for e in self.exercises]
        near = did_you_mean(name, names)
        raise LookupError(f"{self.id} has no exercise {name!r}" + (f"; did you mean {near!r}?" if near else ".")
                          + f" Its exercises are: {', '.join(names)}")


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
                depends=("softmax",),
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
    Lesson(
        "lesson02",
        "masks",
        "Masks",
        exercises=(
            Exercise(
                "causal_mask",
                points=2,
                hints=(
                    "Start from `torch.ones(t_q, t_k, dtype=torch.bool, device=device)` and keep a triangle. "
                    "Which one? Query i may see key j when j is not after it: the lower one, diagonal included.",
                    "With t_k > t_q (a KV cache), the queries are the *last* t_q positions: query i sits at "
                    "position i + (t_k − t_q). Its last visible key moves right by t_k − t_q.",
                    "`tril` takes a `diagonal=` offset: a positive offset keeps that many more diagonals above "
                    "the main one. Which offset makes row i end at column i + (t_k − t_q)?",
                ),
            ),
            Exercise(
                "to_additive",
                points=1,
                hints=(
                    "Start from zeros of the mask's shape in `dtype` on `mask.device`, and put -inf where the "
                    "mask is False.",
                    "`float('-inf')`, not −1e9; and do not multiply by -inf (0 × −inf is NaN). "
                    "`zeros.masked_fill(~mask, float('-inf'))` or `torch.where` select instead.",
                ),
            ),
            Exercise(
                "padding_mask",
                points=2,
                hints=(
                    "Compare the key positions `torch.arange(t)` with each sequence's length: key j of "
                    "sequence b is real when j < lengths[b]. Broadcasting (B, 1) against (t,) gives (B, t).",
                    "True means 'may attend', so real keys are True and padding is False. Make the positions "
                    "on `lengths.device`, then reshape (B, t) to (B, 1, 1, t) with `.view(-1, 1, 1, t)`.",
                ),
            ),
            Exercise(
                "sliding_window_mask",
                points=2,
                hints=(
                    "Two conditions, combined with `&`: causal (j ≤ i) and not too far back. Build query "
                    "positions as a column `arange(t)[:, None]` and key positions as a row `arange(t)[None, :]`.",
                    "The window counts the query's own key: with window=1 a query sees only itself, with "
                    "window=3 itself and the 2 before. Count the True entries in a row to check.",
                    "The lower bound is strict: j > i − window (equivalently i − j < window), not ≥.",
                ),
            ),
            Exercise(
                "masked_attention",
                points=3,
                hints=(
                    "Start from lesson 01: scores = q @ kᵀ / √d, fill -inf where the mask is False, softmax over "
                    "the keys, multiply by v. Then test it with a mask that has an all-False row.",
                    "A row of all -inf scores makes the softmax compute −inf − (−inf) = NaN. Find such rows "
                    "with `mask.any(dim=-1, keepdim=True)`.",
                    "Patching NaN after the softmax (nan_to_num) leaves NaN in the backward pass. Instead give "
                    "the empty rows finite scores (e.g. 0) before the softmax, and set their weights to 0 after it.",
                ),
            ),
        ),
        aliases=("masks", "masking"),
    ),
    Lesson(
        "lesson03",
        "heads",
        "Heads: split, merge, multi-head, grouped-query",
        exercises=(
            Exercise(
                "split_heads",
                points=1,
                hints=(
                    "Unpack `B, T, D = x.shape`; each head gets Dh = D // num_heads features. Check "
                    "`D % num_heads` first and raise ValueError naming num_heads when it is not 0.",
                    "`view` never moves data: `x.view(B, H, T, Dh)` has the right shape but reads memory in order. "
                    "Cut the last axis first, `(B, T, H, Dh)`, so each position keeps its own features.",
                    "Then swap the T and H axes with `.transpose(1, 2)` to get (B, H, T, Dh).",
                ),
            ),
            Exercise(
                "merge_heads",
                points=1,
                hints=(
                    "Undo split_heads in reverse order: first bring T back next to B, then join H and Dh.",
                    "`x.transpose(1, 2)` gives (B, T, H, Dh), which is not contiguous, so `.view` refuses: use "
                    "`.reshape(B, T, H * Dh)` (or `.contiguous().view(...)`).",
                ),
            ),
            Exercise(
                "MultiHeadAttention",
                points=4,
                depends=("split_heads", "merge_heads"),
                hints=(
                    "In __init__ store num_heads and head_dim = d_model // num_heads, and create four "
                    "`nn.Linear(d_model, d_model, bias=bias)` named q_proj, k_proj, v_proj, out_proj.",
                    "In forward: `key = query if key is None else key`, `value = key if value is None else value`; "
                    "project each, then split_heads: q is (B, H, Tq, Dh), k and v are (B, H, Tk, Dh).",
                    "Scores `q @ k.transpose(-2, -1) / math.sqrt(head_dim)` (the head's size, not d_model); "
                    "masked_fill(~mask, -inf); softmax over the last axis; "
                    "`F.dropout(weights, self.dropout, self.training)`.",
                    "Output: `out_proj(merge_heads(weights @ v))`; return it with the (B, H, Tq, Tk) weights when "
                    "need_weights, else with None. Do not average the weights over heads.",
                ),
            ),
            Exercise(
                "CausalSelfAttention",
                points=2,
                depends=("split_heads", "merge_heads"),
                hints=(
                    "One `nn.Linear(d_model, 3 * d_model)` named qkv_proj: its output is [q | k | v], three "
                    "blocks of d_model features, in that order; plus out_proj.",
                    "`q, k, v = self.qkv_proj(x).chunk(3, dim=-1)`, then split_heads each to (B, H, T, Dh).",
                    "`F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0, "
                    "is_causal=is_causal)` scales by 1/√Dh itself; then merge_heads and out_proj.",
                ),
            ),
            Exercise(
                "repeat_kv",
                points=1,
                hints=(
                    "With n_rep = 2 and KV heads a, b, c the output heads are a, a, b, b, c, c: each head "
                    "repeated in place, not the whole list repeated.",
                    "`x.repeat(1, n_rep, 1, 1)` tiles (a, b, c, a, b, c). Look for the variant of repeat that "
                    "repeats each element along a dim, or add an axis after the head axis, expand it to n_rep "
                    "and reshape.",
                ),
            ),
            Exercise(
                "GroupedQueryAttention",
                points=3,
                depends=("split_heads", "merge_heads", "repeat_kv"),
                hints=(
                    "head_dim = d_model // num_heads. q_proj maps d_model → d_model; k_proj and v_proj map "
                    "d_model → num_kv_heads * head_dim; out_proj d_model → d_model; all with bias=bias.",
                    "Split q into num_heads heads and k, v into num_kv_heads heads; then each KV head must serve "
                    "num_heads // num_kv_heads consecutive query heads.",
                    "`repeat_kv(k, n_rep)` and `repeat_kv(v, n_rep)` make them (B, H, T, Dh); then "
                    "`F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)`, merge_heads, out_proj.",
                ),
            ),
        ),
        aliases=("heads", "multihead"),
    ),
    Lesson(
        "lesson04",
        "layernorm",
        "LayerNorm, and what it is not",
        exercises=(
            Exercise(
                "layer_norm",
                points=3,
                hints=(
                    "Everything happens along the last axis: the mean and the variance of each row, with "
                    "`dim=-1, keepdim=True` so that they broadcast back against x.",
                    "Two details decide whether you match PyTorch: the variance divides by D, not D - 1 "
                    "(`x.var()` divides by D - 1 unless you pass `unbiased=False`), and eps is added to the "
                    "variance, under the square root.",
                    "Roughly: `mean = x.mean(-1, keepdim=True)`, `var = ((x - mean) ** 2).mean(-1, keepdim=True)`, "
                    "`out = (x - mean) / torch.sqrt(var + eps)`; then multiply by weight and add bias only when "
                    "each is not None.",
                ),
            ),
            Exercise(
                "LayerNorm",
                points=2,
                depends=("layer_norm",),
                hints=(
                    "The parameters must be `nn.Parameter`s named `weight` and `bias`, of shape "
                    "`(normalized_shape,)`, so that nn.LayerNorm's state dict loads into your module.",
                    "weight starts at ones and bias at zeros. With elementwise_affine=False both are None, and "
                    "with bias=False only bias is None; forward can simply call your layer_norm.",
                ),
            ),
            Exercise(
                "batch_norm",
                points=2,
                hints=(
                    "BatchNorm keeps one mean and one variance per channel, and the channels are axis 1. "
                    "Average over every other axis: the batch and all the positions.",
                    "`dims = (0, *range(2, x.dim()))` lists those axes for a 2-D, 3-D or 4-D input; take the "
                    "mean and the population variance over `dims` with keepdim=True, then normalise as in "
                    "layer_norm.",
                ),
            ),
            Exercise(
                "group_norm",
                points=2,
                hints=(
                    "Each sample's C channels are split into num_groups runs of C/num_groups neighbouring "
                    "channels; each run, with all its positions, gets one mean and one variance.",
                    "Check `C % num_groups` first and raise ValueError naming num_groups. Then "
                    "`x.reshape(N, num_groups, -1)` puts each group of one sample in one row: normalise the rows "
                    "and reshape back to x.shape.",
                ),
            ),
            Exercise(
                "layer_norm_manual",
                points=3,
                challenge=True,
                hints=(
                    "In forward, compute x_hat and rstd = 1/sqrt(var + eps) as in layer_norm, keep them with "
                    "`ctx.save_for_backward(x_hat, weight, rstd)`, and return x_hat * weight + bias. backward "
                    "returns four values: gradients for x, weight and bias, and None for eps.",
                    "grad_bias sums grad_out over every leading axis and grad_weight sums grad_out * x_hat the "
                    "same way, both giving shape (D,). For x, work with g = grad_out * weight, the gradient "
                    "with respect to x_hat.",
                    "grad_x = rstd * (g - mean(g) - x_hat * mean(g * x_hat)), both means over the last axis "
                    "with keepdim=True: the second term comes from the mean, the third from the variance.",
                ),
            ),
        ),
        aliases=("layer_norm",),
    ),
    Lesson(
        "lesson05",
        "rmsnorm",
        "RMSNorm",
        exercises=(
            Exercise(
                "rms_norm",
                points=3,
                hints=(
                    "Everything happens along the last axis: the mean of x² over dim=-1 with keepdim=True, "
                    "so that it broadcasts back against x. There is no mean subtracted: that would be LayerNorm.",
                    "eps goes inside the square root: x / sqrt(mean(x²) + eps). In float16, x² overflows to "
                    "inf once |x| ≥ 256, so do the arithmetic on `x.float()` and cast the result with "
                    "`.to(x.dtype)` at the end.",
                    "Roughly: `xf = x.float()`, then `y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)`, "
                    "multiply by `weight.float()` when a weight is given, and return `y.to(x.dtype)`.",
                ),
            ),
            Exercise(
                "RMSNorm",
                points=2,
                depends=("rms_norm",),
                hints=(
                    "nn.RMSNorm's state dict has one entry, `weight`, of shape (dim,). Yours must have exactly "
                    "that: no bias.",
                    "In __init__, store eps and create `self.weight = nn.Parameter(torch.ones(dim))`; forward "
                    "calls your rms_norm with the module's weight and eps.",
                ),
            ),
            Exercise(
                "rms_norm_triton",
                points=4,
                hints=(
                    "View x as (rows, D), allocate the output with torch.empty_like in x's dtype, and launch "
                    "`kernel[(rows,)](...)`: program `tl.program_id(0)` handles one row. Pass the row stride and "
                    "D to the kernel, and BLOCK = triton.next_power_of_2(D) as a keyword (a tl.constexpr).",
                    "Inside the kernel, `cols = tl.arange(0, BLOCK)` and `mask = cols < D`; load with "
                    "`mask=mask, other=0.0` so the padding adds nothing to the sum of squares, and store with the "
                    "same mask. Convert the loaded block with `.to(tl.float32)` before squaring.",
                    "The body is about six lines: load x and w (as float32), `ms = tl.sum(x * x, axis=0) / D`, "
                    "`y = x * tl.rsqrt(ms + eps) * w`, then tl.store y at the row's pointers with the mask.",
                ),
            ),
        ),
        triton=True,
        aliases=("rms_norm",),
    ),
    Lesson(
        "lesson06",
        "positions",
        "Positions",
        exercises=(
            Exercise(
                "sinusoidal_table",
                points=2,
                hints=(
                    "Build the angles as an outer product: positions p = 0..max_len−1 as a column (max_len, 1) "
                    "times one frequency per pair of columns, a row (d_model/2,).",
                    "The frequency of pair i (columns 2i and 2i+1) is base^(−2i/d_model): the exponent runs "
                    "over the even column numbers 0, 2, 4, ..., not over 0, 1, 2, ... Use the `base` argument.",
                    "With `angles` of shape (max_len, d_model/2), write sin(angles) into the even columns "
                    "`pe[:, 0::2]` and cos(angles) into the odd ones `pe[:, 1::2]`; check d_model % 2 first.",
                ),
            ),
            Exercise(
                "LearnedPositionalEmbedding",
                points=1,
                hints=(
                    "The table is one trainable (max_len, d_model) tensor: an nn.Parameter (or an nn.Embedding's "
                    "weight), drawn from N(0, 0.02) — not nn.Embedding's default N(0, 1).",
                    "forward reads T from x's second-to-last axis and adds rows offset..offset+T−1, which "
                    "broadcast over the batch. Past max_len there is no row: raise before slicing, since a "
                    "slice past the end silently comes back shorter.",
                    "Roughly: `if offset + T > self.max_len: raise ValueError(... max_len ...)`, then "
                    "`return x + self.weight[offset:offset + T]`.",
                ),
            ),
            Exercise(
                "apply_rope",
                points=3,
                hints=(
                    "Angles are an outer product: positions[..., None] (as float32) times the D/2 frequencies "
                    "base^(−2i/D), giving (..., T, D/2): one angle per token and per pair. Never assume the "
                    "positions are 0..T−1.",
                    "Interleaved pairs are a = x[..., 0::2] and b = x[..., 1::2]. Rotating (a, b) by θ gives "
                    "(a cos θ − b sin θ, a sin θ + b cos θ).",
                    "Put the rotated halves back in interleaved order with torch.stack([a_rot, b_rot], dim=-1)"
                    ".flatten(-2), and return it in x's dtype.",
                ),
            ),
            Exercise(
                "apply_rope_half",
                points=2,
                hints=(
                    "Same angles and frequencies as apply_rope; only which features are paired changes: "
                    "feature i is paired with feature i + D/2.",
                    "With a = x[..., :D//2] and b = x[..., D//2:], the rotation is again "
                    "(a cos θ − b sin θ, a sin θ + b cos θ).",
                    "Join the two rotated halves with torch.cat(..., dim=-1) — no interleaving. (Hugging Face "
                    "writes it as x·cos + rotate_half(x)·sin with rotate_half(x) = cat(−b, a).)",
                ),
            ),
            Exercise(
                "rope_inv_freq",
                points=2,
                hints=(
                    "Start from the plain frequencies base^(−2i/dim) for i = 0..dim/2−1; \"linear\" then divides "
                    "every one of them by scale (positions p/scale), \"ntk\" instead changes the base first.",
                    "For \"ntk\" the new base b' is chosen so that the lowest frequency, b'^(−(dim−2)/dim), is "
                    "the old one divided by scale, while i = 0 stays 1. Solve for the power of scale.",
                    "b' = base·scale^(dim/(dim−2)). Check `method` against the three names and `scale >= 1` "
                    "first, and raise ValueError naming the argument.",
                ),
            ),
            Exercise(
                "alibi_slopes",
                points=1,
                hints=(
                    "For H a power of two the slopes are geometric: 2^(−8/H), 2^(−16/H), ..., 2^(−8), the "
                    "steepest first.",
                    "Otherwise let n be the largest power of two below H: take the n slopes for n heads, then "
                    "the slopes for 2n heads, keep every other one of those (indices 0, 2, 4, ...), and append "
                    "the first H − n of them.",
                ),
            ),
            Exercise(
                "alibi_bias",
                points=1,
                depends=("alibi_slopes",),
                hints=(
                    "The bias is −m_h·|i − j|: zero on the diagonal, more negative with distance, one slope per "
                    "head, broadcast as slopes[:, None, None] * distances[None].",
                    "When t_q < t_k the queries are the last t_q positions of the t_k keys, so query i sits at "
                    "position i + (t_k − t_q): compute the distance from there.",
                ),
            ),
        ),
        aliases=("rope", "alibi"),
    ),
    Lesson(
        "lesson07",
        "block",
        "The transformer block",
        exercises=(
            Exercise(
                "MLP",
                points=3,
                hints=(
                    "Two nn.Linear layers named fc1 (d_model → expansion·d_model) and fc2 (back to d_model), "
                    "both built with bias=bias, and an nn.Dropout(dropout) module.",
                    "GPT-2's GELU is the tanh approximation: F.gelu(h, approximate=\"tanh\"). Plain F.gelu(h) "
                    "and nn.GELU() are the exact erf form, up to ~5e-4 away: enough to fail the check.",
                    "forward is dropout(fc2(gelu(fc1(x)))): dropout after fc2 only, and as an nn.Dropout module "
                    "it switches itself off after .eval() (F.dropout would need training=self.training).",
                ),
            ),
            Exercise(
                "TransformerBlock",
                points=7,
                depends=("MLP",),
                hints=(
                    "Build ln1 = LayerNorm(d_model, bias=bias), attn = MultiHeadAttention(d_model, num_heads, "
                    "dropout=dropout, bias=bias), ln2 likewise, mlp = MLP(d_model, expansion, dropout, bias), and "
                    "an nn.Dropout(dropout) for the attention branch. The attention returns a pair: keep [0].",
                    "Pre-LN (norm_first=True) leaves the stream un-normalised: x = x + drop(attn(ln1(x))), then "
                    "x = x + mlp(ln2(x)). Post-LN normalises after each add: x = ln1(x + drop(attn(x))), then "
                    "x = ln2(x + mlp(x)).",
                    "For causal=True make torch.ones(T, T, dtype=torch.bool, device=x.device).tril() (True = may "
                    "attend) and combine it with a given mask by `mask & causal`; it broadcasts against a "
                    "(B, 1, 1, T) padding mask. Pass the result as attn(..., mask=mask).",
                ),
            ),
        ),
        aliases=("transformer_block",),
    ),
    Lesson(
        "lesson08",
        "gpt",
        "Assembling GPT",
        exercises=(
            Exercise(
                "GPTConfig",
                points=1,
                hints=(
                    "A dataclass calls `__post_init__` right after its generated `__init__`, with every field "
                    "set: read them as `self.n_embd` and so on, and `raise ValueError(...)` with the field's name "
                    "in the message.",
                    "Check each size field for `< 1` (a loop over the names with `getattr(self, name)` keeps it "
                    "short), then `self.n_embd % self.n_head != 0`, then that `0 <= self.dropout < 1`.",
                ),
            ),
            Exercise(
                "GPT",
                points=5,
                depends=("GPTConfig",),
                hints=(
                    "Bottom-up. `CachedSelfAttention.forward`: project x with q_proj, k_proj, v_proj and "
                    "`L03.split_heads` each into (B, H, T_new, Dh); with a cache, `cache.update(layer_idx, k, v)` "
                    "returns this layer's keys and values so far, (B, H, T_all, Dh). `GPTBlock.forward` is lesson "
                    "07's pre-LN forward with `cache=cache, layer_idx=layer_idx` passed to `self.attn`.",
                    "The mask is bottom-right: `torch.ones(T_new, T_all, dtype=torch.bool).tril(T_all - T_new)`, "
                    "passed to `F.scaled_dot_product_attention` as attn_mask, with `dropout_p` only in training; "
                    "then `out_proj(L03.merge_heads(y))`. Without a cache T_all = T_new: the usual causal mask.",
                    "`GPT.__init__`: `nn.Embedding`s for `wte` (vocab_size × n_embd) and `wpe` (block_size × "
                    "n_embd), an `nn.ModuleList` of GPTBlocks, `L04.LayerNorm(n_embd, bias=config.bias)`, a "
                    "bias-free `nn.Linear(n_embd, vocab_size)`; tie by assigning the Parameter itself, "
                    "`self.lm_head.weight = self.wte.weight`.",
                    "Initialise by looping over `self.modules()`: `nn.init.normal_(m.weight, 0.0, 0.02)` for Linear "
                    "and Embedding, zeros for Linear biases; then draw every `block.attn.out_proj.weight` and "
                    "`block.mlp.fc2.weight` again with std `0.02 / math.sqrt(2 * n_layer)`. In `forward`, "
                    "`start = len(cache)` (0 without one), positions `torch.arange(start, start + T)`, and "
                    "`x = block(x, cache=cache, layer_idx=i)` for each block.",
                ),
            ),
            Exercise(
                "count_parameters",
                points=1,
                hints=(
                    "`model.parameters()` yields each Parameter object once, even when two modules hold it.",
                    "Sum `p.numel()` over `model.parameters()`: not over `model.state_dict()`, and not module by "
                    "module, which both see a tied weight twice.",
                ),
            ),
            Exercise(
                "KVCache",
                points=2,
                hints=(
                    "Keep two lists, keys and values, one entry per layer: a layer's first update appends, later "
                    "ones concatenate onto what is there.",
                    "Concatenate along the time axis, `torch.cat([old, new], dim=-2)`, and return the layer's whole "
                    "tensors; `len` is the time length (`shape[-2]`) of layer 0's keys, or 0 before any update.",
                ),
            ),
            Exercise(
                "generate",
                points=3,
                depends=("KVCache",),
                hints=(
                    "Loop `max_new_tokens` times: run the model, keep `logits[:, -1, :]`, pick a token and "
                    "`torch.cat` it onto the sequence. Without a cache feed `out[:, -block_size:]`; with one, feed "
                    "the prompt once and then only the newest token.",
                    "Greedy is `logits.argmax(-1, keepdim=True)`. Otherwise divide the logits by the temperature "
                    "*before* `torch.softmax`, then draw with `torch.multinomial(probs, 1, generator=generator)`.",
                    "For top-k, `torch.topk(logits, k).values[:, -1:]` is each row's k-th largest logit; fill every "
                    "logit below it with -inf before the softmax, which leaves exactly k candidates.",
                ),
            ),
            Exercise(
                "load_gpt2_state_dict",
                points=3,
                depends=("GPT",),
                hints=(
                    "Strip the `transformer.` prefix, skip keys ending in `attn.bias` / `attn.masked_bias`, and map "
                    "names: `h.{i}.ln_1` → `blocks.{i}.ln1`, `attn.c_proj` → `attn.out_proj`, `mlp.c_fc` → "
                    "`mlp.fc1`, `mlp.c_proj` → `mlp.fc2`.",
                    "Conv1D weights are (in, out): transpose every one with `.t()`, the square ones too. "
                    "`c_attn.weight` is (D, 3D): `.split(D, dim=1)` gives q, k, v, each then transposed; its bias "
                    "splits with `.split(D)`.",
                    "Copy into the existing parameters: for each `name, param in model.named_parameters()`, check "
                    "the shape (ValueError if it differs), then `param.copy_(new)` under `torch.no_grad()`. The tied "
                    "head is filled through `wte`.",
                ),
            ),
        ),
    ),
    Lesson(
        "lesson09",
        "flash",
        "Flash attention",
        exercises=(
            Exercise(
                "online_logsumexp",
                points=2,
                hints=(
                    "Keep two tensors of shape x.shape[:-1]: a running max m (start at -inf) and a running sum "
                    "s (start at 0). Loop over the last dim in slices `x[..., start:start + block]`.",
                    "For each block: m_new = max(m, the block's max). The terms already in s were taken "
                    "relative to the old max, so multiply s by exp(m - m_new) before adding the block's "
                    "exp(x - m_new).",
                    "Roughly: `s = s * torch.exp(m - m_new) + torch.exp(xb - m_new[..., None]).sum(-1)`, then "
                    "`m = m_new`; after the loop return `m + torch.log(s)`.",
                ),
            ),
            Exercise(
                "flash_attention",
                points=4,
                hints=(
                    "Two loops: over query tiles `q[:, :, qs:qe]` and, inside, over key tiles. Per query tile "
                    "keep m (running max, -inf), l (running sum, 0) and acc (running output, zeros of "
                    "(B, H, rows, D)). Each key tile's scores are (q_tile @ k_tileᵀ)·scale: only a tile.",
                    "When the running max moves to m_new, both l and acc shrink by alpha = exp(m - m_new): "
                    "l = alpha·l + rowsum(p) and acc = alpha·acc + p @ v_tile with p = exp(s - m_new). "
                    "Divide acc by l once, after the last key tile; lse = m + log(l), of the *scaled* scores.",
                    "Causal: a key tile starting after the query tile's last row (ks > qe - 1) is skipped, so "
                    "stop the key loop at min(Tk, qe); a tile that crosses the diagonal (ke - 1 > qs) needs "
                    "`s.masked_fill(rows[:, None] < cols[None, :], -inf)`. Slicing with ke = min(ks + "
                    "block_k, Tk) handles the tails.",
                ),
            ),
            Exercise(
                "flash_attention_triton",
                points=4,
                hints=(
                    "Launch one program per (query tile, batch·head): grid = (triton.cdiv(T, BLOCK_M), B * H). "
                    "After `.contiguous()`, head `pid_bh` starts at element pid_bh·T·D and row t of it at "
                    "t·D, so a tile's pointers are `Q + base + rows[:, None] * D + dims[None, :]`.",
                    "Load with `mask=rows[:, None] < T, other=0.0`. Inside the key loop: s = tl.dot(q, "
                    "tl.trans(k)) * qk_scale, then the same m / l / acc update as in flash_attention with "
                    "tl.max, tl.exp and tl.sum along axis 1 (pass qk_scale = 1/√D from the launcher); cast p "
                    "to v's dtype for the second tl.dot.",
                    "Keys past T load as zeros, and a zero score still gets weight: set "
                    "`s = tl.where(cols[None, :] < T, s, float('-inf'))` (and `& (cols[None, :] <= "
                    "rows[:, None])` when CAUSAL). Store `acc / l[:, None]` cast to O.dtype.element_ty.",
                    "Correct first, then fast (on a GPU, `course bench lesson09`): pass qk_scale = log2(e)/√D "
                    "and use tl.math.exp2; run the tiles that need no mask in a loop without tl.where and only "
                    "the diagonal or tail tile in a masked one; try BLOCK_M = BLOCK_N = 128 with num_warps=8 "
                    "and num_stages=3 at D=128 (launch keywords).",
                ),
            ),
            Exercise(
                "attention_flops",
                points=1,
                hints=(
                    "Count the two matrix products per (batch, head): QKᵀ is Tq·Tk dot products of length d, "
                    "each d multiplies and d adds.",
                    "QKᵀ and PV cost 2·t_q·t_k·d each, so the total is 4·b·h·t_q·t_k·d; causal is half of it. "
                    "Use `// 2` so the result stays an exact int.",
                ),
            ),
            Exercise(
                "kv_cache_bytes",
                points=1,
                hints=(
                    "Every layer caches a key and a value vector of size d_head for every KV head, every "
                    "position and every sequence in the batch.",
                    "Multiply 2 (K and V) · n_layer · n_kv_heads · d_head · seq_len · batch by the element size, "
                    "`torch.empty((), dtype=dtype).element_size()`.",
                ),
            ),
            Exercise(
                "FlashAttentionFunction",
                points=3,
                challenge=True,
                depends=("flash_attention",),
                hints=(
                    "forward: `out, lse = flash_attention(q, k, v, causal=causal)`, then "
                    "`ctx.save_for_backward(q, k, v, out, lse)` and keep `ctx.causal = causal`. backward "
                    "returns four things: dq, dk, dv and None (for causal).",
                    "In backward, compute delta = (grad_out * out).sum(-1, keepdim=True) once. Loop over key "
                    "tiles and, inside, query tiles; recompute the tile's scores s (scaled, masked when "
                    "causal) and p = exp(s - lse[..., None]).",
                    "Per tile: dv_tile += pᵀ @ dO_tile; ds = p * (dO_tile @ v_tileᵀ - delta_tile); "
                    "dq_tile += ds @ k_tile * scale; dk_tile += dsᵀ @ q_tile * scale, accumulating into "
                    "float32 zeros of q's, k's and v's shapes.",
                ),
            ),
        ),
        triton=True,
    ),
    Lesson(
        "lesson10",
        "llama",
        "A modern decoder: from GPT-2 to Llama",
        exercises=(
            Exercise(
                "SwiGLU",
                points=1,
                hints=(
                    "Three `nn.Linear(..., bias=bias)` layers: `gate_proj` and `up_proj` go from d_model to "
                    "hidden_dim, `down_proj` comes back.",
                    "Only the gate goes through the nonlinearity: "
                    "`self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))`.",
                ),
            ),
            Exercise(
                "swiglu_hidden_dim",
                points=1,
                hints=(
                    "Start from `int(2 * 4 * d_model / 3)`; with a multiplier, `int(ffn_dim_multiplier * hidden)`.",
                    "Round *up* to a multiple: `multiple_of * ((hidden + multiple_of - 1) // multiple_of)`; "
                    "raise ValueError when d_model or multiple_of is below 1.",
                ),
            ),
            Exercise(
                "LlamaAttention",
                points=4,
                hints=(
                    "The mask: query i sits at key index `i + (t_k - t_q)`; it may see key j when "
                    "`j <= i + (t_k - t_q)` and, with a window, `j > i + (t_k - t_q) - window` (window keys in "
                    "all, its own included).",
                    "Projections without bias; `k_proj`/`v_proj` output `num_kv_heads * head_dim`. In forward, "
                    "`start = len(cache)` (before the update) when start is None; positions "
                    "`torch.arange(start, start + T)`; `L06.apply_rope_half` on q and k only, not v.",
                    "Then `k, v = cache.update(layer_idx, k, v)`, `L03.repeat_kv(k, n_rep)` (not `k.repeat`, "
                    "which tiles the heads in the wrong order), `F.scaled_dot_product_attention(q, k, v, "
                    "attn_mask=sliding_window_mask(T, k.shape[-2], self.window, x.device))`, merge, out_proj.",
                ),
            ),
            Exercise(
                "RollingKVCache",
                points=2,
                hints=(
                    "Like lesson 08's KVCache, one list of keys and one of values per layer, plus a counter of "
                    "the positions seen (layer 0's new positions, added at each of its updates).",
                    "In update: `k_all = torch.cat([kept, k], dim=-2)` (or just k on a layer's first call); "
                    "store `k_all[..., -self.window:, :]` (the newest, not the oldest) and return `k_all`, "
                    "untrimmed. `__len__` returns the counter, not the kept length.",
                ),
            ),
            Exercise(
                "LlamaConfig",
                points=1,
                hints=(
                    "In `__post_init__`, loop over the size fields with `getattr(self, name)` and raise "
                    "ValueError(f\"{name} must be ...\") for values below 1.",
                    "Then `n_embd % n_head`, `(n_embd // n_head) % 2` (RoPE pairs), `n_head % n_kv_head`, a "
                    "window below 1 and a `norm_eps <= 0`, each with the field's name in the message.",
                ),
            ),
            Exercise(
                "LlamaBlock",
                points=1,
                hints=(
                    "`ln1 = L05.RMSNorm(config.n_embd, eps=config.norm_eps)`, the same for ln2; `attn = "
                    "LlamaAttention(D, n_head, n_kv_head, rope_base, window)`, `mlp = SwiGLU(D, hidden_dim)`.",
                    "Pre-norm: `x = x + self.attn(self.ln1(x), cache, layer_idx, start)` then "
                    "`return x + self.mlp(self.ln2(x))`; the norm never wraps the sum.",
                ),
            ),
            Exercise(
                "Llama",
                points=3,
                hints=(
                    "`embed`, an `nn.ModuleList` of `LlamaBlock(config)`, `norm = L05.RMSNorm(...)`, `lm_head = "
                    "nn.Linear(D, V, bias=False)`, tied with `self.lm_head.weight = self.embed.weight` only when "
                    "`config.tie_embeddings`.",
                    "Init: N(0, 0.02) for every Linear and Embedding weight, then std 0.02 / √(2·n_layer) for "
                    "each block's `attn.out_proj.weight` and `mlp.down_proj.weight`.",
                    "forward: `start = len(cache)` once (0 without a cache), ValueError naming block_size when "
                    "`start + T` passes it (only `T` when config.window is set), then `x = block(x, cache, i, "
                    "start)` for each block, `lm_head(norm(x))` and the cross-entropy.",
                ),
            ),
            Exercise(
                "load_llama_state_dict",
                points=2,
                hints=(
                    "Build a dict from our names to the checkpoint's tensors: `model.embed_tokens.weight` → "
                    "`embed.weight`, `model.layers.{i}.self_attn.o_proj.weight` → `blocks.{i}.attn.out_proj.weight`, "
                    "`input_layernorm` → `ln1`, `post_attention_layernorm` → `ln2`, `model.norm` → `norm`.",
                    "No transposes (both sides are nn.Linear). Copy under `torch.no_grad()` with `param.copy_(t)` "
                    "for each `name, param in model.named_parameters()`, raising ValueError for a missing key, a "
                    "shape that differs, or a layer past n_layer in the checkpoint.",
                ),
            ),
            Exercise(
                "filter_logits",
                points=3,
                hints=(
                    "Work on a copy with `masked_fill(..., float('-inf'))`, filter by filter: top-k first "
                    "(`torch.topk(out, k).values[..., -1:]` is the k-th largest), then top-p, then min-p, each "
                    "from `out.softmax(-1)` of what is left.",
                    "top-p: `sorted_probs, order = probs.sort(-1, descending=True)`; a token is dropped when the "
                    "tokens above it already sum to p: `before = sorted_probs.cumsum(-1) - sorted_probs; drop = "
                    "before >= p`; put it back in vocabulary order with `zeros_like(drop).scatter(-1, order, drop)`.",
                    "min-p: drop `probs < min_p * probs.amax(-1, keepdim=True)` (the largest probability, not "
                    "the sum, which is 1).",
                ),
            ),
            Exercise(
                "decoder_costs",
                points=2,
                hints=(
                    "Per layer the matrices hold 2·D² (q, out) + 2·D·kv_dim (k, v, kv_dim = n_kv_head·D/n_head) + "
                    "3·D·hidden_dim (SwiGLU); params adds the embedding, an untied head, 2·D of norms per layer "
                    "and D for the final norm.",
                    "N_mm = n_layer · (per-layer matrices) + V·D (the head, tied or not); train_flops = (6·N_mm + "
                    "12·n_layer·n_embd·block_size) · tokens; kv_bytes_per_token = 2·n_layer·kv_dim·element size; "
                    "adamw_bytes = 16·params.",
                ),
            ),
        ),
        aliases=("llama", "modern", "decoder"),
    ),
)


class UnknownLesson(LookupError):
    pass


def did_you_mean(word: str, choices) -> str | None:
    """The closest of `choices` to a misspelt `word` (case aside), or None."""
    import difflib

    lower = {c.lower(): c for c in choices}
    near = difflib.get_close_matches(str(word).lower(), list(lower), n=1, cutoff=0.6)
    return lower[near[0]] if near else None


def find_lesson(key: str) -> Lesson:
    """A lesson by id (`lesson01`, `lesson1`), number (`1`, `01`) or slug (`sdpa`)."""
    k = str(key).strip().lower()
    if k.startswith("lesson") and k[6:].isdigit():  # lesson1, lesson01, lesson001
        k = k[6:]
    for lesson in LESSONS:
        if k in (lesson.id, lesson.slug, *lesson.aliases, f"{lesson.id}_{lesson.slug}"):
            return lesson
        if k.isdigit() and int(k) == lesson.number:
            return lesson
        if k.removesuffix(".ipynb") == lesson.notebook.removesuffix(".ipynb"):
            return lesson
    known = ", ".join(f"{l.id} ({l.slug})" for l in LESSONS)
    near = did_you_mean(k, [l.slug for l in LESSONS] + [l.id for l in LESSONS]
                        + [a for l in LESSONS for a in l.aliases])
    raise UnknownLesson(f"no lesson {key!r}" + (f"; did you mean {near!r}?" if near else ".")
                        + f" The lessons are: {known}")
