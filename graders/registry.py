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
                    "exp(1e4) overflows to inf in float32, and inf/inf is NaN. Because softmax(x - c) = "
                    "softmax(x) for any c that is constant along `dim`, subtract the maximum along `dim` "
                    "before exponentiating.",
                    "Three steps along `dim`, keeping the axis each time: shift by the maximum, "
                    "exponentiate, divide by the sum. If a check still fails, look at which axis your max or"
                    " your sum reduces over when `dim` is not -1.",
                ),
            ),
            Exercise(
                "scaled_dot_product_attention",
                points=6,
                depends=("softmax",),
                hints=(
                    "Scores are q @ kᵀ with the last two axes of k swapped, shape (..., Tq, Tk), divided by "
                    "√dk. `k.T` reverses *every* axis of a batched tensor: use `k.transpose(-2, -1)`.",
                    "Each query's row of scores is normalised over the keys: softmax over the last axis "
                    "(Tk), not over the queries. The weights then multiply v: (..., Tq, Tk) @ (..., Tk, dv).",
                    "With a mask, True means 'may attend'. Decide which tensor to mask, the scores before "
                    "the softmax or the weights after it, by asking which choice leaves the masked weights "
                    "exactly 0 and each row still summing to 1.",
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
                    "Start from a (t_q, t_k) boolean tensor of ones, made on `device`, and keep a triangle. "
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
                    "Start from zeros of the mask's shape in `dtype` on `mask.device`, and put -inf where "
                    "the mask is False.",
                    "`float('-inf')`, not −1e9; and do not multiply by -inf (0 × −inf is NaN): select "
                    "between 0 and -inf by the mask instead.",
                ),
            ),
            Exercise(
                "padding_mask",
                points=2,
                hints=(
                    "Compare the key positions `torch.arange(t)` with each sequence's length: key j of "
                    "sequence b is real when j < lengths[b]. Broadcasting (B, 1) against (t,) gives (B, t).",
                    "True means 'may attend', so real keys are True and padding is False. Build it on "
                    "`lengths.device`, then add the two singleton axes of the (B, 1, 1, t) shape, so that it"
                    " broadcasts over the heads and the queries.",
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
                    "with an `any` over the keys' axis, kept as a column so that it broadcasts.",
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
                    "Each head gets Dh = D // num_heads features. Check `D % num_heads` first and raise "
                    "ValueError naming num_heads when it is not 0.",
                    "`view` never moves data: `x.view(B, H, T, Dh)` has the right shape but reads memory in "
                    "order. Cut the last axis first, `(B, T, H, Dh)`, so each position keeps its own "
                    "features.",
                    "Then bring the head axis in front of the time axis: one swap of two axes, no copy.",
                ),
            ),
            Exercise(
                "merge_heads",
                points=1,
                hints=(
                    "Undo split_heads in reverse order: first bring T back next to B, then join H and Dh.",
                    "After swapping the axes back the tensor is not contiguous, so `.view` refuses it; "
                    "`reshape` (or making it contiguous first) does not.",
                ),
            ),
            Exercise(
                "MultiHeadAttention",
                points=4,
                depends=("split_heads", "merge_heads"),
                hints=(
                    "In __init__ store num_heads and head_dim = d_model // num_heads, and create four "
                    "`nn.Linear(d_model, d_model, bias=bias)` named q_proj, k_proj, v_proj, out_proj.",
                    "When `key` (or `value`) is None this is self-attention: the query stands in for the "
                    "key, and the key for the value. Project each, then split heads: q is (B, H, Tq, Dh), k "
                    "and v are (B, H, Tk, Dh).",
                    "Scale the scores by the head's size, not by d_model; mask them, softmax over the keys; "
                    "dropout on the weights, and only in training (`self.training`).",
                    "The output goes through out_proj after the heads are merged. When need_weights, return "
                    "the weights of every head, (B, H, Tq, Tk), never their average.",
                ),
            ),
            Exercise(
                "CausalSelfAttention",
                points=2,
                depends=("split_heads", "merge_heads"),
                hints=(
                    "One `nn.Linear(d_model, 3 * d_model)` named qkv_proj: its output is [q | k | v], three "
                    "blocks of d_model features, in that order; plus out_proj.",
                    "The fused output is [q | k | v] along its last axis: cut it into three equal blocks "
                    "(one call does it), then split heads in each.",
                    "`F.scaled_dot_product_attention` scales by 1/√Dh itself and takes the causal flag and a"
                    " dropout probability, which must be 0 outside training. Then merge heads and out_proj.",
                ),
            ),
            Exercise(
                "repeat_kv",
                points=1,
                hints=(
                    "With n_rep = 2 and KV heads a, b, c the output heads are a, a, b, b, c, c: each head "
                    "repeated in place, not the whole list repeated.",
                    "Tiling the head axis (`repeat`) gives (a, b, c, a, b, c). You want each head repeated "
                    "in place: a variant of repeat that repeats elements, or a new axis after the head axis,"
                    " expanded and folded back.",
                ),
            ),
            Exercise(
                "GroupedQueryAttention",
                points=3,
                depends=("split_heads", "merge_heads", "repeat_kv"),
                hints=(
                    "q_proj maps d_model → d_model; k_proj and v_proj map to num_kv_heads heads of the "
                    "*query* head size (d_model // num_heads); out_proj maps d_model → d_model; all with "
                    "bias=bias.",
                    "Split q into num_heads heads and k, v into num_kv_heads heads; then each KV head must "
                    "serve num_heads // num_kv_heads consecutive query heads.",
                    "Bring k and v up to num_heads heads with your repeat_kv, then SDPA with the causal "
                    "flag, merge the heads and apply out_proj.",
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
                    "The result is (x − mean) / √(var + eps), then the affine part, only for what is given "
                    "(weight or bias may be None). Off by a tiny amount: check where eps sits. Off by a "
                    "factor near √(D/(D−1)): check the variance's divisor.",
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
                    "List those axes for an input of any rank: the batch axis and every axis from 2 on. Take"
                    " the mean and the population variance over them with keepdim=True, then normalise as in"
                    " layer_norm.",
                ),
            ),
            Exercise(
                "group_norm",
                points=2,
                hints=(
                    "Each sample's C channels are split into num_groups runs of C/num_groups neighbouring "
                    "channels; each run, with all its positions, gets one mean and one variance.",
                    "Check `C % num_groups` first and raise ValueError naming num_groups. Then reshape so "
                    "that one row holds one group of one sample (its channels and all their positions), "
                    "normalise the rows, and reshape back to x.shape.",
                ),
            ),
            Exercise(
                "layer_norm_manual",
                points=3,
                challenge=True,
                hints=(
                    "In forward, compute what backward will need (the normalised x and the reciprocal "
                    "standard deviation, with the weight, are enough), save the tensors with "
                    "`ctx.save_for_backward`, and return the affine output. backward returns one value per "
                    "input of forward: x, weight, bias, and None for eps.",
                    "grad_bias and grad_weight sum over every leading axis and have shape (D,). For x, first"
                    " form the gradient with respect to x_hat: grad_out scaled by the weight.",
                    "The gradient through the normalisation has three terms: the direct one, one through the"
                    " mean and one through the variance, each of the last two a mean over the last axis. "
                    "gradcheck in float64 tells you when all three are right.",
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
                    "so that it broadcasts back against x. There is no mean subtracted: that would be "
                    "LayerNorm.",
                    "eps goes inside the square root: x / sqrt(mean(x²) + eps). In float16, x² overflows to "
                    "inf once |x| ≥ 256, so do the arithmetic on `x.float()` and cast the result with "
                    "`.to(x.dtype)` at the end.",
                    "Three things decide the match: the mean of squares over the last axis only, eps under "
                    "the square root, and the arithmetic in float32 (the weight too) with the result cast "
                    "back to the input's dtype at the very end.",
                ),
            ),
            Exercise(
                "RMSNorm",
                points=2,
                depends=("rms_norm",),
                hints=(
                    "nn.RMSNorm's state dict has one entry, `weight`, of shape (dim,). Yours must have "
                    "exactly that: no bias.",
                    "In __init__, store eps and create the gain as an `nn.Parameter` of ones with shape "
                    "(dim,); forward calls your rms_norm with it.",
                ),
            ),
            Exercise(
                "rms_norm_triton",
                points=4,
                hints=(
                    "View x as (rows, D), allocate the output with torch.empty_like in x's dtype, and launch"
                    " `kernel[(rows,)](...)`: program `tl.program_id(0)` handles one row. Pass the row "
                    "stride and D to the kernel, and BLOCK = triton.next_power_of_2(D) as a keyword (a "
                    "tl.constexpr).",
                    "Inside the kernel, make one row's column offsets with tl.arange up to BLOCK and a mask "
                    "of those below D; load with that mask and `other=0.0`, so that the padding adds nothing"
                    " to the sum of squares, and store with the same mask. Convert to float32 before "
                    "squaring.",
                    "The body is a handful of lines: load x and w as float32, the mean of the squares over "
                    "the row (tl.sum, then divide by D), scale by its reciprocal square root with eps, "
                    "multiply by w, store. Compare with your rms_norm through the interpreter before timing "
                    "anything.",
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
                    "The table is one trainable (max_len, d_model) tensor: an nn.Parameter (or an "
                    "nn.Embedding's weight), drawn from N(0, 0.02) — not nn.Embedding's default N(0, 1).",
                    "forward reads T from x's second-to-last axis and adds rows offset..offset+T−1, which "
                    "broadcast over the batch. Past max_len there is no row: raise before slicing, since a "
                    "slice past the end silently comes back shorter.",
                    "Check `offset + T` against max_len before slicing and raise ValueError naming max_len; "
                    "then add the table's rows offset to offset + T − 1.",
                ),
            ),
            Exercise(
                "apply_rope",
                points=3,
                hints=(
                    "Angles are an outer product: positions[..., None] (as float32) times the D/2 "
                    "frequencies base^(−2i/D), giving (..., T, D/2): one angle per token and per pair. Never"
                    " assume the positions are 0..T−1.",
                    "Interleaved pairs: a is every even feature of the last axis, b every odd one (a strided "
                    "slice each). Rotating (a, b) by θ gives"
                    " (a cos θ − b sin θ, a sin θ + b cos θ).",
                    "Put the rotated pairs back in interleaved order (stack the two on a new last axis, then"
                    " flatten it away) and return x's dtype.",
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
                    "Start from the plain frequencies base^(−2i/dim) for i = 0..dim/2−1; \"linear\" then "
                    "divides every one of them by scale (positions p/scale), \"ntk\" instead changes the base "
                    "first.",
                    "For \"ntk\" the new base b' is chosen so that the lowest frequency, b'^(−(dim−2)/dim), is"
                    " the old one divided by scale, while i = 0 stays 1. Solve for the power of scale.",
                    "Solve b'^(−(dim−2)/dim) = base^(−(dim−2)/dim) / scale for b'. Check `method` against "
                    "the three names and `scale >= 1` first, and raise ValueError naming the argument.",
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
                    "Two nn.Linear layers named fc1 (d_model → expansion·d_model) and fc2 (back to d_model),"
                    " both built with bias=bias, and an nn.Dropout(dropout) module.",
                    "GPT-2's GELU is the tanh approximation: F.gelu(h, approximate=\"tanh\"). Plain F.gelu(h) "
                    "and nn.GELU() are the exact erf form, up to ~5e-4 away: enough to fail the check.",
                    "Dropout comes after fc2 only; as an nn.Dropout module it switches itself off after "
                    ".eval() (F.dropout would need to be told).",
                ),
            ),
            Exercise(
                "TransformerBlock",
                points=7,
                depends=("MLP",),
                hints=(
                    "Build ln1 = LayerNorm(d_model, bias=bias), attn = MultiHeadAttention(d_model, "
                    "num_heads, dropout=dropout, bias=bias), ln2 likewise, mlp = MLP(d_model, expansion, "
                    "dropout, bias), and an nn.Dropout(dropout) for the attention branch. The attention "
                    "returns a pair: keep [0].",
                    "Pre-LN (norm_first=True) never normalises the stream itself: each branch reads a "
                    "normalised copy and its output is added back. Post-LN puts the norm after each add, "
                    "on the stream. Section 3's two formulas say which is which; dropout goes on the "
                    "attention branch's output only.",
                    "For causal=True build a lower-triangular boolean mask (True = may attend) on x's device"
                    " and combine it with a given mask by a logical and; it broadcasts against a (B, 1, 1, "
                    "T) padding mask. Pass the result to attn.",
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
                    "Bottom-up. `CachedSelfAttention.forward`: project and split heads; with a cache, hand "
                    "it this step's k and v and attend to everything it gives back, (B, H, T_all, Dh). "
                    "`GPTBlock.forward` is lesson 07's pre-LN forward, passing the cache and the layer's "
                    "index on to its attention.",
                    "The mask is bottom-right aligned: the T_new queries are the last T_new of T_all "
                    "positions (lesson 02). Pass it to F.scaled_dot_product_attention, with dropout only in "
                    "training, then merge heads and out_proj. Without a cache T_all = T_new: the usual "
                    "causal mask.",
                    "`GPT.__init__`: the token and position tables, the ModuleList of blocks, a final "
                    "LayerNorm and a bias-free head. Tie by making the head's weight *the same Parameter* as"
                    " the token table's, not a copy of its values.",
                    "Initialise every Linear and Embedding weight from N(0, 0.02) and Linear biases at 0, "
                    "then redraw the two residual projections of each block with std 0.02/√(2·n_layer). In "
                    "forward the positions continue from the cache's length, read once, before the first "
                    "block updates the cache.",
                ),
            ),
            Exercise(
                "count_parameters",
                points=1,
                hints=(
                    "`model.parameters()` yields each Parameter object once, even when two modules hold it.",
                    "Count elements, not tensors, and each Parameter object once: a state dict and a walk "
                    "over the modules both meet a tied weight twice.",
                ),
            ),
            Exercise(
                "KVCache",
                points=2,
                hints=(
                    "Keep two lists, keys and values, one entry per layer: a layer's first update appends, "
                    "later ones concatenate onto what is there.",
                    "Concatenate along the time axis and return the layer's whole tensors; `len` is the "
                    "number of positions layer 0 holds (0 before any update).",
                ),
            ),
            Exercise(
                "generate",
                points=3,
                depends=("KVCache",),
                hints=(
                    "Loop `max_new_tokens` times: run the model, keep `logits[:, -1, :]`, pick a token and "
                    "`torch.cat` it onto the sequence. Without a cache feed `out[:, -block_size:]`; with "
                    "one, feed the prompt once and then only the newest token.",
                    "Greedy takes the most likely token. Otherwise divide the logits by the temperature "
                    "before the softmax (never the probabilities after it) and draw with torch.multinomial, "
                    "passing the generator.",
                    "For top-k, find each row's k-th largest logit and send every logit below it to -inf "
                    "before the softmax: exactly k candidates remain (the checks draw logits without a tie "
                    "there).",
                ),
            ),
            Exercise(
                "load_gpt2_state_dict",
                points=3,
                depends=("GPT",),
                hints=(
                    "Strip the `transformer.` prefix, skip keys ending in `attn.bias` / `attn.masked_bias`, "
                    "and map names: `h.{i}.ln_1` → `blocks.{i}.ln1`, `attn.c_proj` → `attn.out_proj`, "
                    "`mlp.c_fc` → `mlp.fc1`, `mlp.c_proj` → `mlp.fc2`.",
                    "Conv1D weights are (in, out): transpose every one, the square ones too. The fused "
                    "c_attn weight holds q, k and v side by side along its output axis: cut it in three, "
                    "then transpose each; cut its bias the same way.",
                    "Copy into the existing parameters under torch.no_grad(), checking each shape first "
                    "(ValueError when it differs). The tied head needs nothing of its own: it is wte.",
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
                    "Keep two tensors of shape x.shape[:-1]: a running max m (start at -inf) and a running "
                    "sum s (start at 0). Loop over the last dim, `block` columns at a time (the last slice "
                    "may be shorter).",
                    "For each block: m_new = max(m, the block's max). The terms already in s were taken "
                    "relative to the old max, so multiply s by exp(m - m_new) before adding the block's "
                    "exp(x - m_new).",
                    "After the loop, the running max and the running sum give the answer: log-sum-exp is the"
                    " max plus the log of the sum. If a row that is all -inf comes out NaN, look at the "
                    "rescaling factor when both maxima are -inf.",
                ),
            ),
            Exercise(
                "flash_attention",
                points=4,
                hints=(
                    "Two loops: over query tiles `q[:, :, qs:qe]` and, inside, over key tiles. Per query "
                    "tile keep m (running max, -inf), l (running sum, 0) and acc (running output, zeros of "
                    "(B, H, rows, D)). Each key tile's scores are (q_tile @ k_tileᵀ)·scale: only a tile.",
                    "When the running max moves to m_new, both l and acc shrink by alpha = exp(m - m_new): l"
                    " = alpha·l + rowsum(p) and acc = alpha·acc + p @ v_tile with p = exp(s - m_new). Divide"
                    " acc by l once, after the last key tile; lse = m + log(l), of the *scaled* scores.",
                    "Causal: a key tile that starts after the query tile's last row can be skipped, so the "
                    "key loop can stop early; only a tile that crosses the diagonal needs a mask inside it. "
                    "Slicing the last tile to the sequence's end handles the tails.",
                ),
            ),
            Exercise(
                "flash_attention_triton",
                points=4,
                hints=(
                    "Launch one program per (query tile, batch·head): a 2-D grid whose first axis counts the"
                    " query tiles (rounded up) and whose second is B·H. After `.contiguous()`, head pid_bh "
                    "starts at element pid_bh·T·D and row t of it at t·D, so a tile's pointers are a base "
                    "plus rows times D plus the feature offsets.",
                    "Load with a mask for the rows past T and other=0.0. Inside the key loop the scores are "
                    "a tl.dot of the q tile with the k tile transposed, times the scale; then the same m / l"
                    " / acc update as in flash_attention, with tl.max, tl.exp and tl.sum along axis 1 (pass "
                    "qk_scale = 1/√D from the launcher); cast p to v's dtype for the second tl.dot.",
                    "Keys past T load as zeros, and a zero score still gets weight: send those scores to "
                    "-inf with tl.where (and, when CAUSAL, the ones above the diagonal). Store acc divided "
                    "by l, cast to the output's element type.",
                    "Correct first, then fast (on a GPU, `course bench lesson09`): pass qk_scale = "
                    "log2(e)/√D and use tl.math.exp2; run the tiles that need no mask in a loop without "
                    "tl.where and only the diagonal or tail tile in a masked one; try BLOCK_M = BLOCK_N = "
                    "128 with num_warps=8 and num_stages=3 at D=128 (launch keywords).",
                ),
            ),
            Exercise(
                "attention_flops",
                points=1,
                hints=(
                    "Count the two matrix products per (batch, head): QKᵀ is Tq·Tk dot products of length d,"
                    " each d multiplies and d adds.",
                    "Each of the two products costs 2·t_q·t_k·d per (batch, head); causal halves the total. "
                    "Keep the result an exact int.",
                ),
            ),
            Exercise(
                "kv_cache_bytes",
                points=1,
                hints=(
                    "Every layer caches a key and a value vector of size d_head for every KV head, every "
                    "position and every sequence in the batch.",
                    "Multiply those counts (K and V, the layers, the KV heads, the head size, the positions,"
                    " the batch) by the bytes of one element of `dtype`, which an empty tensor of that dtype"
                    " can tell you.",
                ),
            ),
            Exercise(
                "FlashAttentionFunction",
                points=3,
                challenge=True,
                depends=("flash_attention",),
                hints=(
                    "forward runs your flash_attention and saves for backward exactly what the text lists "
                    "(the inputs, the output and lse: no Tq×Tk tensor), and keeps the causal flag on ctx. "
                    "backward returns one gradient per input of forward, None for causal.",
                    "In backward, compute delta once: for each query row, the dot product of dO with O "
                    "(one number per row, kept as a column). Loop over key tiles and, inside, query tiles; "
                    "recompute the tile's scores s (scaled, masked when "
                    "causal) and p = exp(s - lse[..., None]).",
                    "Per tile these are attention's gradients written for one tile: dV from the "
                    "probabilities and dO; dS from dP minus delta, times P; dQ and dK from dS, each with the"
                    " scale. Accumulate them in float32.",
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
                    "Only the gate goes through the nonlinearity, and the gate is the projection named for "
                    "it; the other up-projection stays linear. Their product comes back down through "
                    "down_proj.",
                ),
            ),
            Exercise(
                "swiglu_hidden_dim",
                points=1,
                hints=(
                    "Start from the width h that makes 3·D·h equal 8·D², truncated to an int; with a "
                    "multiplier, multiply and truncate again.",
                    "Round *up* to a multiple of multiple_of with integer arithmetic (11008 must come out "
                    "exactly); raise ValueError when d_model or multiple_of is below 1.",
                ),
            ),
            Exercise(
                "LlamaAttention",
                points=4,
                hints=(
                    "The mask: the t_q queries are the last t_q of the t_k keys (bottom-right, lesson 02), so "
                    "first work out each query's own index among the keys. A key is visible when it is not "
                    "after that index and, with a window, among the last `window` keys up to it (its own "
                    "included).",
                    "Projections without bias; k_proj and v_proj output num_kv_heads·head_dim. In __init__, "
                    "raise ValueError when num_heads does not divide d_model, when num_kv_heads does not "
                    "divide num_heads, and when the head size d_model // num_heads is odd (RoPE pairs). "
                    "`start`, when not given, is the cache's length before this step's update. Rotate q and "
                    "k only, at positions start to start + T − 1.",
                    "The order follows from the rules: rotate, then let the cache store this step's "
                    "(rotated) k and v and hand back everything, then repeat the KV heads for the queries, "
                    "then SDPA with your sliding_window_mask for T queries against all those keys; merge and"
                    " out_proj. Tiling with `repeat` puts the heads in the wrong order.",
                ),
            ),
            Exercise(
                "RollingKVCache",
                points=2,
                hints=(
                    "Like lesson 08's KVCache, one list of keys and one of values per layer, plus a counter "
                    "of the positions seen (layer 0's new positions, added at each of its updates).",
                    "In update, join the kept positions and the new ones along the time axis (only the new "
                    "ones on a layer's first call); keep the newest `window` of the join for next time, but "
                    "return the whole join. `__len__` returns the counter, not the kept length.",
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
                    "ln1 and ln2 are lesson 05's RMSNorm with the config's eps; attn is your LlamaAttention "
                    "and mlp your SwiGLU, each built from the config's fields.",
                    "Pre-norm: each sub-layer reads a normalised copy of the stream and its output is added "
                    "back to the stream; the norm never wraps the sum. Pass the cache arguments through to "
                    "attn.",
                ),
            ),
            Exercise(
                "Llama",
                points=3,
                hints=(
                    "embed, an nn.ModuleList of LlamaBlocks, a final RMSNorm and a bias-free head; when "
                    "`tie_embeddings`, the head's weight must be the very Parameter of the embedding, not a "
                    "copy.",
                    "Init: N(0, 0.02) for every Linear and Embedding weight, then std 0.02 / √(2·n_layer) "
                    "for each block's `attn.out_proj.weight` and `mlp.down_proj.weight`.",
                    "forward: read the cache's length once (0 without a cache) and give it to every block; "
                    "ValueError naming block_size when the sequence passes it (with a window, only a single "
                    "call longer than block_size); then the final norm, the head and the cross-entropy.",
                ),
            ),
            Exercise(
                "load_llama_state_dict",
                points=2,
                challenge=True,  # the lesson's optional part (sections 6-10)
                hints=(
                    "Build a dict from our names to the checkpoint's tensors: `model.embed_tokens.weight` → "
                    "`embed.weight`, `model.layers.{i}.self_attn.o_proj.weight` → "
                    "`blocks.{i}.attn.out_proj.weight`, `input_layernorm` → `ln1`, "
                    "`post_attention_layernorm` → `ln2`, `model.norm` → `norm`.",
                    "No transposes: both sides are nn.Linear. Copy each tensor into the model's existing "
                    "parameters under torch.no_grad(), raising ValueError for a missing key, a shape that "
                    "differs, or a layer past n_layer in the checkpoint.",
                ),
            ),
            Exercise(
                "filter_logits",
                points=3,
                challenge=True,  # the lesson's optional part (sections 6-10)
                hints=(
                    "Work on a copy, filter by filter in the spec's order, each from the softmax of what the"
                    " one before left; removed tokens become -inf and kept ones stay as they were. For "
                    "top-k, each row's k-th largest value is the threshold.",
                    "top-p needs the probabilities sorted: a token is dropped when the tokens ranked above "
                    "it already sum to p or more (so the token that crosses p stays). Decide in sorted "
                    "order, then scatter the decision back to vocabulary order.",
                    "min-p compares each probability with min_p times the row's largest probability, not "
                    "with their sum (which is always 1).",
                ),
            ),
            Exercise(
                "decoder_costs",
                points=2,
                challenge=True,  # the lesson's optional part (sections 6-10)
                hints=(
                    "Per layer the matrices hold 2·D² (q, out) + 2·D·kv_dim (k, v, kv_dim = "
                    "n_kv_head·D/n_head) + 3·D·hidden_dim (SwiGLU); params adds the embedding, an untied "
                    "head, 2·D of norms per layer and D for the final norm.",
                    "N_mm counts every weight used in a matrix product: the layers' matrices and the head "
                    "(tied or not), not the embedding lookup. train_flops: section 8's weight term and its "
                    "attention term are per token; the cell after the check compares yours with torch's count.",
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
