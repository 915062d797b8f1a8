"""Wrong code the course was never told about: the library benchmarks/outside_measure.py grades (issue 44).

Each case is a textual edit of one solved cell (graders.engine.solved_cell) as a student would make it, with one
sentence of what the student did, and the words a diagnosis would use if it named that cause (`right`) or a cause
the student did not commit (`wrong`). The cases were written from the curriculum and the solved notebooks only
(not from the course's catalogues, mutation operators or fixtures); each is shown wrong outside the grader by
benchmarks/outside_oracles.py (torch's own functions, or a float64 computation written there).

A case is a dict: id, lesson, exercise, edits [(old, new), ...] (each `old` occurs once in the cell), what,
right [phrases], wrong [phrases]. Phrases are matched case-insensitively in the diagnosis shown; `right` phrases
are alternatives (any one is enough), as are `wrong` ones.
"""

from __future__ import annotations


def _case(id, lesson, exercise, edits, what, right=(), wrong=(), not_wrong=None):
    """not_wrong: why an edit written as a mistake turned out to keep the contract (the oracle agrees with it and
    the reasoning is given): it stays in the library as a correct alternative the grader must accept."""
    if isinstance(edits[0], str):
        edits = [edits]
    return {"id": id, "lesson": lesson, "exercise": exercise, "edits": [tuple(e) for e in edits], "what": what,
            "right": list(right), "wrong": list(wrong), "not_wrong": not_wrong}


# generic causes that are wrong wherever the student did not scale, mask, or cut at an index
SCALE = ["constant factor", "scale is applied twice", "times a constant"]
EMPTY_ROW = ["nothing to attend to", "every score −inf", "every score -inf"]
INDEX0 = ["right up to index"]

CASES = [
    # ---------------------------------------------------------------- lesson01
    _case("l01-softmax-global-max", "lesson01", "softmax",
          ("x - x.amax(dim=dim, keepdim=True)", "x - x.max()"),
          "subtracts the whole tensor's max instead of each row's (rows far below it underflow to 0/0)",
          ["max", "each row", "along dim"], SCALE + EMPTY_ROW),
    _case("l01-softmax-inplace", "lesson01", "softmax",
          ("shifted = x - x.amax(dim=dim, keepdim=True)",
           "x -= x.amax(dim=dim, keepdim=True)\n    shifted = x"),
          "subtracts the max in place, changing the caller's tensor",
          ["in place", "modif", "input"], SCALE + EMPTY_ROW),
    _case("l01-softmax-log", "lesson01", "softmax",
          ("return e / e.sum(dim=dim, keepdim=True)", "return shifted - e.sum(dim=dim, keepdim=True).log()"),
          "returns log-softmax (log of the weights) instead of the weights",
          ["log"], SCALE + EMPTY_ROW),
    _case("l01-softmax-nokeepdim", "lesson01", "softmax",
          ("return e / e.sum(dim=dim, keepdim=True)", "return e / e.sum(dim=dim)"),
          "drops keepdim on the sum: the division broadcasts along the wrong axis (or fails)",
          ["keepdim", "broadcast"], SCALE + EMPTY_ROW),
    _case("l01-sdpa-sqrt-dv", "lesson01", "scaled_dot_product_attention",
          ("d_k = q.shape[-1]", "d_k = v.shape[-1]"),
          "scales by √dv (v's width) instead of √dk",
          ["dv", "d_v", "value"], EMPTY_ROW + INDEX0),
    _case("l01-sdpa-scale-v", "lesson01", "scaled_dot_product_attention",
          [("scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)", "scores = q @ k.transpose(-2, -1)"),
           ("return weights @ v, weights", "return weights @ (v / math.sqrt(d_k)), weights")],
          "divides the values by √dk instead of the scores",
          ["value", "instead of the scores", "not scaled"], EMPTY_ROW + INDEX0),
    _case("l01-sdpa-dk-from-tk", "lesson01", "scaled_dot_product_attention",
          ("d_k = q.shape[-1]", "d_k = k.shape[-2]"),
          "takes dk from k's time axis (Tk) instead of its feature axis",
          ["tk", "key length", "number of keys", "sequence length"], EMPTY_ROW + INDEX0),
    _case("l01-sdpa-permute3d", "lesson01", "scaled_dot_product_attention",
          ("q @ k.transpose(-2, -1)", "q @ k.permute(0, 2, 1)"),
          "transposes k with permute(0, 2, 1): right for 3-D inputs, fails for any other number of dims",
          ["permute", "leading dim", "3-d", "number of dim"], SCALE + EMPTY_ROW),
    # ---------------------------------------------------------------- lesson02
    _case("l02-causal-sign", "lesson02", "causal_mask",
          ("ones.tril(diagonal=t_k - t_q)", "ones.tril(diagonal=t_q - t_k)"),
          "flips the sign of the diagonal offset (t_q − t_k): wrong whenever t_k ≠ t_q",
          ["sign", "t_q - t_k", "t_q − t_k", "offset"], SCALE + EMPTY_ROW),
    _case("l02-causal-default-tk", "lesson02", "causal_mask",
          ("t_k = t_q if t_k is None else t_k", "t_k = t_k or t_q"),
          "replaces t_k=0 by t_q (`or`): an explicit 0 is taken as 'not given'",
          ["t_k=0", "t_k = 0", "zero", "or"], SCALE + EMPTY_ROW),
    _case("l02-additive-nan", "lesson02", "to_additive",
          ("zeros = torch.zeros(mask.shape, dtype=dtype, device=mask.device)\n"
           "    return zeros.masked_fill(~mask, float(\"-inf\"))",
           "return (mask.to(dtype) - 1) * float(\"inf\")"),
          "computes (mask − 1)·∞: NaN (0·∞) where the mask is True",
          ["nan", "0·∞", "0 * inf"], SCALE + EMPTY_ROW),
    _case("l02-additive-dtype", "lesson02", "to_additive",
          ("zeros = torch.zeros(mask.shape, dtype=dtype, device=mask.device)",
           "zeros = torch.zeros(mask.shape, device=mask.device)"),
          "ignores the dtype argument: always float32",
          ["dtype"], SCALE + EMPTY_ROW),
    _case("l02-padding-le", "lesson02", "padding_mask",
          ("positions[None, :] < lengths[:, None]", "positions[None, :] <= lengths[:, None]"),
          "`<=` instead of `<`: the first pad position counts as real",
          ["off by one", "one more", "<=", "length"], SCALE + EMPTY_ROW),
    _case("l02-padding-layout", "lesson02", "padding_mask",
          ("return real.view(-1, 1, 1, t)", "return real[:, None, :, None]"),
          "returns (B, 1, t, 1): the keys on the query axis",
          ["shape", "(b, 1, 1, t)", "axis"], SCALE + EMPTY_ROW),
    _case("l02-window-symmetric", "lesson02", "sliding_window_mask",
          ("return (j <= i) & (j > i - window)", "return (i - j).abs() < window"),
          "a symmetric band |i − j| < window: queries see future keys",
          ["future", "causal", "j ≤ i", "j <= i"], SCALE + EMPTY_ROW),
    _case("l02-window-novalidate", "lesson02", "sliding_window_mask",
          ("    if window < 1:\n        raise ValueError(f\"window must be at least 1 (a query always sees its own key), got {window}\")\n", ""),
          "no ValueError for window < 1 (returns an all-False mask)",
          ["valueerror", "window"], SCALE + EMPTY_ROW),
    _case("l02-masked-empty-mean", "lesson02", "masked_attention",
          ("weights = torch.softmax(scores, dim=-1).masked_fill(~visible, 0.0)",
           "weights = torch.softmax(scores, dim=-1)"),
          "a query with no visible key outputs the mean of v (uniform weights) instead of zeros",
          ["zero", "no visible key", "nothing to attend to", "empty"], SCALE),
    _case("l02-masked-nan-to-num", "lesson02", "masked_attention",
          [("    scores = scores.masked_fill(~visible, 0.0)  # finite scores in empty rows: no NaN forward or backward\n", ""),
           ("weights = torch.softmax(scores, dim=-1).masked_fill(~visible, 0.0)",
            "weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)")],
          "cleans the NaN after the softmax instead of guarding the empty rows before it",
          ["gradient", "nan"], SCALE,
          not_wrong="masked_fill's backward zeroes the gradient where it filled, so the NaN of an empty row never reaches q or k: outputs and gradients are right"),
    _case("l02-masked-scale-tk", "lesson02", "masked_attention",
          ("math.sqrt(q.shape[-1])", "math.sqrt(k.shape[-2])"),
          "scales by √Tk (number of keys) instead of √d",
          ["tk", "number of keys", "key length", "scale"], EMPTY_ROW + INDEX0),
    # ---------------------------------------------------------------- lesson03
    _case("l03-split-strided", "lesson03", "split_heads",
          ("return x.view(B, T, num_heads, D // num_heads).transpose(1, 2)",
           "return x.view(B, T, D // num_heads, num_heads).permute(0, 3, 1, 2)"),
          "head h takes the strided features h, h+H, ... instead of a contiguous run",
          ["strided", "contiguous run", "interleav", "(t, dh, h)", "features h"], SCALE + EMPTY_ROW),
    _case("l03-split-novalidate", "lesson03", "split_heads",
          ("        raise ValueError(f\"num_heads={num_heads} must divide the feature size D={D}\")",
           "        pass"),
          "no ValueError when num_heads does not divide D (view fails with a RuntimeError)",
          ["valueerror", "divide"], SCALE + EMPTY_ROW),
    _case("l03-merge-view", "lesson03", "merge_heads",
          ("return x.transpose(1, 2).reshape(B, T, H * Dh)", "return x.transpose(1, 2).view(B, T, H * Dh)"),
          "view on the transposed (non-contiguous) tensor: RuntimeError",
          ["view", "contiguous", "reshape"], SCALE + EMPTY_ROW),
    _case("l03-merge-dh-major", "lesson03", "merge_heads",
          ("return x.transpose(1, 2).reshape(B, T, H * Dh)", "return x.permute(0, 2, 3, 1).reshape(B, T, H * Dh)"),
          "merges feature-major (Dh, H): the heads' features interleaved",
          ["interleav", "order", "permute", "(t, dh, h)"], SCALE + EMPTY_ROW),
    _case("l03-mha-kproj-q", "lesson03", "MultiHeadAttention",
          ("k = split_heads(self.k_proj(key), self.num_heads)", "k = split_heads(self.q_proj(key), self.num_heads)"),
          "projects the keys with q_proj (copy-paste)",
          ["q_proj", "k_proj"], SCALE + EMPTY_ROW + INDEX0),
    _case("l03-mha-dropout-eval", "lesson03", "MultiHeadAttention",
          ("F.dropout(weights, p=self.dropout, training=self.training)", "F.dropout(weights, p=self.dropout)"),
          "dropout on the weights in eval mode too (F.dropout's training defaults to True)",
          ["eval", "training"], SCALE + EMPTY_ROW + INDEX0),
    _case("l03-mha-weights-always", "lesson03", "MultiHeadAttention",
          ("return out, (weights if need_weights else None)", "return out, weights"),
          "returns the weights even when need_weights=False",
          ["need_weights", "none"], SCALE + EMPTY_ROW + INDEX0),
    _case("l03-csa-kqv", "lesson03", "CausalSelfAttention",
          ("q, k, v = self.qkv_proj(x).chunk(3, dim=-1)", "k, q, v = self.qkv_proj(x).chunk(3, dim=-1)"),
          "reads the fused rows as k, q, v (swaps q and k)",
          ["order", "swap", "q, k, v", "rows"], SCALE + EMPTY_ROW + INDEX0),
    _case("l03-csa-causal-fixed", "lesson03", "CausalSelfAttention",
          ("is_causal=is_causal)  # (B, H, T, Dh)", "is_causal=True)  # (B, H, T, Dh)"),
          "ignores is_causal=False: always causal",
          ["is_causal", "causal"], SCALE + EMPTY_ROW),
    _case("l03-csa-no-dropout-switch", "lesson03", "CausalSelfAttention",
          ("dropout_p=self.dropout if self.training else 0.0", "dropout_p=self.dropout"),
          "SDPA's dropout stays on in eval mode",
          ["eval", "training", "dropout"], SCALE + EMPTY_ROW + INDEX0),
    _case("l03-repeat-time-axis", "lesson03", "repeat_kv",
          ("return x[:, :, None].expand(B, Hkv, n_rep, T, Dh).reshape(B, Hkv * n_rep, T, Dh)",
           "return x.repeat_interleave(n_rep, dim=2).reshape(B, Hkv * n_rep, T, Dh)"),
          "repeat_interleave along the time axis (dim 2), then reshaped into heads",
          ["axis", "dim=2", "time"], SCALE + EMPTY_ROW),
    _case("l03-repeat-tiled-expand", "lesson03", "repeat_kv",
          ("return x[:, :, None].expand(B, Hkv, n_rep, T, Dh).reshape(B, Hkv * n_rep, T, Dh)",
           "return x[:, None].expand(B, n_rep, Hkv, T, Dh).reshape(B, Hkv * n_rep, T, Dh)"),
          "expands with the copies outside the heads: heads tiled (0, 1, 0, 1) instead of (0, 0, 1, 1)",
          ["tile", "repeat_interleave", "h // n_rep", "h % "], SCALE + EMPTY_ROW),
    _case("l03-gqa-tiling", "lesson03", "GroupedQueryAttention",
          [("k = repeat_kv(split_heads(self.k_proj(x), self.num_kv_heads), n_rep)",
            "k = split_heads(self.k_proj(x), self.num_kv_heads).repeat(1, n_rep, 1, 1)"),
           ("v = repeat_kv(split_heads(self.v_proj(x), self.num_kv_heads), n_rep)",
            "v = split_heads(self.v_proj(x), self.num_kv_heads).repeat(1, n_rep, 1, 1)")],
          "shares the KV heads by tiling (.repeat) instead of repeating each in place",
          ["tile", "repeat_interleave", "repeat", "h // n_rep"], SCALE + EMPTY_ROW + INDEX0),
    _case("l03-gqa-scale1", "lesson03", "GroupedQueryAttention",
          ("out = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)",
           "out = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=1.0)"),
          "passes scale=1.0 to SDPA: the scores are not divided by √Dh",
          ["scal", "√", "sqrt"], EMPTY_ROW + INDEX0),
    # ---------------------------------------------------------------- lesson04
    _case("l04-ln-ex2-minus", "lesson04", "layer_norm",
          ("var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)", "var = (x ** 2).mean(dim=-1, keepdim=True) - mean ** 2"),
          "variance as E[x²] − E[x]²: catastrophic cancellation for inputs far from 0",
          ["e[x²]", "cancel", "offset", "variance"], SCALE + EMPTY_ROW),
    _case("l04-ln-if-tensor", "lesson04", "layer_norm",
          ("    if weight is not None:\n        out = out * weight", "    if weight:\n        out = out * weight"),
          "`if weight:` on a tensor: RuntimeError (ambiguous truth value)",
          ["is not none", "truth value", "ambiguous"], SCALE + EMPTY_ROW),
    _case("l04-ln-bias-first", "lesson04", "layer_norm",
          ("    if weight is not None:\n        out = out * weight  # (D,) broadcasts over the leading dims\n"
           "    if bias is not None:\n        out = out + bias",
           "    if bias is not None:\n        out = out + bias\n"
           "    if weight is not None:\n        out = out * weight"),
          "adds the bias before multiplying by the weight",
          ["bias", "order", "before"], SCALE + EMPTY_ROW),
    _case("l04-LN-bias-always", "lesson04", "LayerNorm",
          ("self.bias = nn.Parameter(torch.zeros(normalized_shape)) if bias else None",
           "self.bias = nn.Parameter(torch.zeros(normalized_shape))"),
          "ignores bias=False: a bias parameter is always created",
          ["bias=false", "bias", "state_dict", "parameter"], SCALE + EMPTY_ROW),
    _case("l04-LN-randn-gain", "lesson04", "LayerNorm",
          ("self.weight = nn.Parameter(torch.ones(normalized_shape))",
           "self.weight = nn.Parameter(torch.randn(normalized_shape))"),
          "initialises the gain from N(0, 1) instead of ones",
          ["init", "ones", "weight"], SCALE + EMPTY_ROW),
    _case("l04-LN-eps-dropped", "lesson04", "LayerNorm",
          ("return layer_norm(x, self.weight, self.bias, self.eps)", "return layer_norm(x, self.weight, self.bias)"),
          "never passes its eps on: the default 1e-5 whatever eps the module was given",
          ["eps"], SCALE + EMPTY_ROW),
    _case("l04-bn-batch-only", "lesson04", "batch_norm",
          ("dims = (0, *range(2, x.dim()))", "dims = (0,)"),
          "statistics over the batch axis only, not the spatial positions",
          ["spatial", "position", "axes", "dims"], SCALE + EMPTY_ROW),
    _case("l04-bn-unbiased", "lesson04", "batch_norm",
          ("var = ((x - mean) ** 2).mean(dim=dims, keepdim=True)", "var = x.var(dim=dims, keepdim=True)"),
          "unbiased variance (divides by n − 1)",
          ["unbiased", "n − 1", "n - 1", "bessel", "correction"], EMPTY_ROW),
    _case("l04-gn-view", "lesson04", "group_norm",
          ("xg = x.reshape(N, num_groups, -1)", "xg = x.view(N, num_groups, -1)"),
          "view instead of reshape: fails on non-contiguous inputs",
          ["view", "contiguous", "reshape"], SCALE + EMPTY_ROW),
    _case("l04-gn-novalidate", "lesson04", "group_norm",
          ("        raise ValueError(f\"num_groups={num_groups} must divide the number of channels C={C}\")",
           "        pass"),
          "no ValueError when num_groups does not divide C: groups straddle channels silently",
          ["valueerror", "divide"], SCALE + EMPTY_ROW),
    _case("l04-manual-gw-2d", "lesson04", "layer_norm_manual",
          ("grad_weight = (grad_out * x_hat).reshape(-1, D).sum(dim=0)", "grad_weight = (grad_out * x_hat).sum(dim=0)"),
          "sums the weight's gradient over the first axis only: autograd reduces a (T, D) gradient to (D,) itself, "
          "but for a 1-D input the sum is a scalar and backward fails",
          ["grad", "weight", "leading", "1-d", "scalar"], SCALE + EMPTY_ROW),
    _case("l04-manual-gx-short", "lesson04", "layer_norm_manual",
          ("grad_x = rstd * (g - g.mean(dim=-1, keepdim=True) - x_hat * (g * x_hat).mean(dim=-1, keepdim=True))",
           "grad_x = rstd * (g - g.mean(dim=-1, keepdim=True))"),
          "drops the variance term of the input's gradient",
          ["gradient", "grad", "backward"], SCALE + EMPTY_ROW),
    # ---------------------------------------------------------------- lesson05
    _case("l05-rms-float32-out", "lesson05", "rms_norm",
          ("    return y.to(x.dtype)\n    ### END SOLUTION\n\n\nclass", "    return y\n    ### END SOLUTION\n\n\nclass"),
          "returns the float32 result for half-precision inputs",
          ["dtype", "float32", "float16"], SCALE + EMPTY_ROW),
    _case("l05-rms-sum", "lesson05", "rms_norm",
          ("xf.pow(2).mean(dim=-1, keepdim=True)", "xf.pow(2).sum(dim=-1, keepdim=True)"),
          "sum of squares instead of their mean (the output √D times smaller)",
          ["sum", "mean", "√d", "sqrt(d)", "constant factor", "times"], EMPTY_ROW),
    _case("l05-rms-weight-add", "lesson05", "rms_norm",
          ("y = y * weight.float()", "y = y + weight.float()"),
          "adds the gain instead of multiplying by it",
          ["weight", "gain", "add"], SCALE + EMPTY_ROW),
    _case("l05-RMS-eps-dropped", "lesson05", "RMSNorm",
          ("return rms_norm(x, self.weight, self.eps)", "return rms_norm(x, self.weight)"),
          "never passes its eps on: the default 1e-6",
          ["eps"], SCALE + EMPTY_ROW),
    _case("l05-RMS-not-param", "lesson05", "RMSNorm",
          ("self.weight = nn.Parameter(torch.ones(dim))  # (D,)", "self.weight = torch.ones(dim)  # (D,)"),
          "the gain is a plain tensor, not a Parameter: not trained, not in the state dict",
          ["parameter", "state_dict", "state dict"], SCALE + EMPTY_ROW),
    _case("l05-rms-wrong-dim", "lesson05", "rms_norm",
          ("xf.pow(2).mean(dim=-1, keepdim=True)", "xf.pow(2).mean(dim=1, keepdim=True)"),
          "mean of squares over axis 1 instead of the last",
          ["axis", "dim", "last"], SCALE + EMPTY_ROW),
    # ---------------------------------------------------------------- lesson06
    _case("l06-sin-concat", "lesson06", "sinusoidal_table",
          ("    pe[:, 0::2] = angles.sin()\n    pe[:, 1::2] = angles.cos()",
           "    pe[:, : d_model // 2] = angles.sin()\n    pe[:, d_model // 2 :] = angles.cos()"),
          "sines in the first half, cosines in the second, instead of interleaved",
          ["interleav", "half", "layout", "2i"], SCALE + EMPTY_ROW),
    _case("l06-sin-from-1", "lesson06", "sinusoidal_table",
          ("pos = torch.arange(max_len, dtype=torch.float32)", "pos = torch.arange(1, max_len + 1, dtype=torch.float32)"),
          "positions counted from 1",
          ["position", "from 1", "off by one", "shift"], SCALE + EMPTY_ROW),
    _case("l06-lpe-ge", "lesson06", "LearnedPositionalEmbedding",
          ("if offset < 0 or offset + T > self.max_len:", "if offset < 0 or offset + T >= self.max_len:"),
          "rejects a sequence that ends exactly at max_len (off by one)",
          ["max_len", "off by one", "last position"], SCALE + EMPTY_ROW),
    _case("l06-lpe-offset-ignored", "lesson06", "LearnedPositionalEmbedding",
          ("self.weight[offset:offset + T]", "self.weight[:T]"),
          "ignores offset: always rows 0..T−1",
          ["offset"], SCALE + EMPTY_ROW + INDEX0),
    _case("l06-lpe-std1", "lesson06", "LearnedPositionalEmbedding",
          ("nn.init.normal_(self.weight, mean=0.0, std=0.02)", "nn.init.normal_(self.weight)"),
          "initialises the table from N(0, 1) instead of N(0, 0.02)",
          ["0.02", "init", "std"], SCALE + EMPTY_ROW),
    _case("l06-rope-lowprec-angles", "lesson06", "apply_rope",
          ("angles = positions.to(x.device, torch.float32)[..., None] * inv_freq",
           "angles = positions.to(x.device, x.dtype)[..., None] * inv_freq.to(x.dtype)"),
          "computes the angles in x's dtype: bfloat16 positions in the thousands lose their units",
          ["float32", "precision", "bfloat16", "angle"], SCALE + EMPTY_ROW),
    _case("l06-rope-reverse", "lesson06", "apply_rope",
          ("torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1)",
           "torch.stack((a * cos + b * sin, b * cos - a * sin), dim=-1)"),
          "rotates by −θ (the sine's sign flipped)",
          ["sign", "−θ", "-θ", "direction", "negative"], SCALE + EMPTY_ROW + INDEX0),
    _case("l06-ropehalf-D-from-T", "lesson06", "apply_rope_half",
          ("    D = x.shape[-1]\n    inv_freq = base ** (-torch.arange(0, D, 2, device=x.device, dtype=torch.float32) / D)",
           "    D = x.shape[-1]\n    inv_freq = base ** (-torch.arange(0, D, 2, device=x.device, dtype=torch.float32) / x.shape[-2])"),
          "divides the exponent by T (the time axis) instead of D",
          ["frequenc", "exponent", "t instead"], SCALE + EMPTY_ROW),
    _case("l06-ropehalf-positions-int", "lesson06", "apply_rope_half",
          ("angles = positions.to(x.device, torch.float32)[..., None] * inv_freq",
           "angles = positions[..., None] * inv_freq"),
          "multiplies the positions as given (no .to(device, float32))",
          ["float32", "precision", "position"], SCALE + EMPTY_ROW,
          not_wrong="type promotion makes positions · float32 frequencies float32 already; half-precision positions are rounded before the call, for the reference too"),
    _case("l06-ntk-no-exponent", "lesson06", "rope_inv_freq",
          ("base = base * scale ** (dim / (dim - 2))", "base = base * scale"),
          "NTK: the base times scale, without the dim/(dim−2) exponent",
          ["ntk", "exponent", "dim/(dim"], SCALE + EMPTY_ROW),
    _case("l06-invfreq-scale1", "lesson06", "rope_inv_freq",
          ("if scale < 1:", "if scale <= 1:"),
          "rejects scale=1 (the default) with a ValueError",
          ["scale", "valueerror"], SCALE + EMPTY_ROW),
    _case("l06-invfreq-float64", "lesson06", "rope_inv_freq",
          ("return inv_freq.float()", "return inv_freq"),
          "returns float64 frequencies",
          ["dtype", "float64", "float32"], SCALE + EMPTY_ROW,
          not_wrong="the contract states no dtype for the frequencies (no floating input to keep the dtype of)"),
    _case("l06-alibi-odd-half", "lesson06", "alibi_slopes",
          ("power_of_two(2 * n)[0::2]", "power_of_two(2 * n)[1::2]"),
          "non-power-of-two H: takes the odd entries of the 2n slopes instead of the even ones",
          ["power of two", "power of 2", "interleav", "extra"], SCALE + EMPTY_ROW),
    _case("l06-alibi-from-h0", "lesson06", "alibi_slopes",
          ("2.0 ** (-8.0 * (h + 1) / n)", "2.0 ** (-8.0 * h / n)"),
          "exponent −8h/n instead of −8(h+1)/n: the first slope is 1",
          ["h + 1", "h+1", "exponent", "off by one"], SCALE + EMPTY_ROW),
    _case("l06-alibi-topleft", "lesson06", "alibi_bias",
          ("i = torch.arange(t_q)[:, None] + (t_k - t_q)", "i = torch.arange(t_q)[:, None]"),
          "queries top-left aligned (positions 0..t_q−1) when t_q ≠ t_k",
          ["align", "bottom-right", "top-left"], SCALE + EMPTY_ROW),
    _case("l06-alibi-noabs", "lesson06", "alibi_bias",
          ("distance = (i - j).abs().to(torch.float32)", "distance = (i - j).to(torch.float32)"),
          "signed distance: future keys get a positive bias",
          ["abs", "|i − j|", "|i - j|", "sign", "positive"], SCALE + EMPTY_ROW),
    # ---------------------------------------------------------------- lesson07
    _case("l07-mlp-relu", "lesson07", "MLP",
          ("h = F.gelu(self.fc1(x), approximate=\"tanh\")", "h = F.relu(self.fc1(x))"),
          "ReLU instead of GELU",
          ["relu", "gelu", "activation"], SCALE + EMPTY_ROW),
    _case("l07-mlp-dropout-hidden", "lesson07", "MLP",
          ("return self.dropout(self.fc2(h))", "return self.fc2(self.dropout(h))"),
          "dropout on the hidden layer (before fc2) instead of after fc2",
          ["dropout", "fc2", "hidden"], SCALE + EMPTY_ROW),
    _case("l07-mlp-expansion-fixed", "lesson07", "MLP",
          ("hidden = expansion * d_model", "hidden = 4 * d_model"),
          "ignores expansion: always 4·D",
          ["expansion"], SCALE + EMPTY_ROW),
    _case("l07-block-mask-dropped", "lesson07", "TransformerBlock",
          ("mask = causal if mask is None else mask & causal", "mask = causal"),
          "a causal block drops the mask it is given",
          ["mask"], SCALE + EMPTY_ROW),
    _case("l07-block-ln1-twice", "lesson07", "TransformerBlock",
          ("x = x + self.mlp(self.ln2(x))  # (B, T, D)", "x = x + self.mlp(self.ln1(x))  # (B, T, D)"),
          "the pre-LN MLP branch normalises with ln1 (copy-paste) instead of ln2",
          ["ln1", "ln2"], SCALE + EMPTY_ROW + INDEX0),
    _case("l07-block-ln-bias", "lesson07", "TransformerBlock",
          ("self.ln1 = LayerNorm(d_model, bias=bias)", "self.ln1 = LayerNorm(d_model)"),
          "ln1 ignores bias=False (keeps a bias)",
          ["bias", "state_dict", "parameter"], SCALE + EMPTY_ROW),
    # ---------------------------------------------------------------- lesson08
    _case("l08-cfg-dropout-1", "lesson08", "GPTConfig",
          ("if not 0.0 <= self.dropout < 1.0:", "if not 0.0 <= self.dropout <= 1.0:"),
          "accepts dropout=1.0",
          ["dropout", "valueerror"], SCALE + EMPTY_ROW),
    _case("l08-cfg-no-divide", "lesson08", "GPTConfig",
          ("        if self.n_embd % self.n_head:\n            raise ValueError(f\"n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head})\")\n", ""),
          "no ValueError when n_head does not divide n_embd",
          ["n_head", "n_embd", "divisib", "valueerror"], SCALE + EMPTY_ROW),
    _case("l08-gpt-ge-block", "lesson08", "GPT",
          ("if start + T > self.config.block_size:", "if start + T >= self.config.block_size:"),
          "rejects a sequence of exactly block_size tokens (off by one)",
          ["block_size", "off by one"], SCALE + EMPTY_ROW),
    _case("l08-gpt-double-shift", "lesson08", "GPT",
          ("loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())",
           "loss = F.cross_entropy(logits[:, :-1].flatten(0, 1), targets[:, 1:].flatten())"),
          "shifts the targets again (they are already the next tokens)",
          ["shift", "target"], SCALE + EMPTY_ROW),
    _case("l08-gpt-no-lnf", "lesson08", "GPT",
          ("logits = self.lm_head(self.ln_f(x))", "logits = self.lm_head(x)"),
          "forgets the final LayerNorm before the head",
          ["ln_f", "final", "layernorm"], SCALE + EMPTY_ROW),
    _case("l08-count-state-dict", "lesson08", "count_parameters",
          ("return sum(p.numel() for p in model.parameters())", "return sum(p.numel() for p in model.state_dict().values())"),
          "counts the state dict's tensors: a tied weight twice (and any buffers)",
          ["tied", "twice", "shared", "state_dict"], SCALE + EMPTY_ROW),
    _case("l08-cache-len-layers", "lesson08", "KVCache",
          ("return self.keys[0].shape[-2] if self.keys else 0", "return len(self.keys)"),
          "len(cache) counts layers instead of positions",
          ["len", "positions", "layers"], SCALE + EMPTY_ROW),
    _case("l08-cache-returns-new", "lesson08", "KVCache",
          ("return self.keys[layer_idx], self.values[layer_idx]", "return k, v"),
          "update returns only this step's keys and values",
          ["return", "all", "so far", "cached"], SCALE + EMPTY_ROW),
    _case("l08-gen-no-generator", "lesson08", "generate",
          ("next_token = torch.multinomial(probs, 1, generator=generator)", "next_token = torch.multinomial(probs, 1)"),
          "ignores the generator argument (sampling not reproducible)",
          ["generator"], SCALE + EMPTY_ROW),
    _case("l08-gen-no-crop", "lesson08", "generate",
          ("logits, _ = model(out[:, -block_size:])", "logits, _ = model(out)"),
          "without a cache, never crops the context to block_size",
          ["crop", "block_size"], SCALE + EMPTY_ROW),
    _case("l08-gen-topk-max", "lesson08", "generate",
          ("values[:, -1:]  # (B, 1)", "values[:, :1]  # (B, 1)"),
          "takes the largest of the top-k values as the threshold: top-k becomes top-1",
          ["top_k", "top-k", "k-th", "threshold"], SCALE + EMPTY_ROW),
    _case("l08-load-no-t-qkv", "lesson08", "load_gpt2_state_dict",
          ("= w.t(), bias  # Conv1D", "= w, bias  # Conv1D"),
          "the split c_attn weights are not transposed (square, so the shapes still fit)",
          ["transpose", "conv1d", "(in, out)"], SCALE + EMPTY_ROW),
    # ---------------------------------------------------------------- lesson09
    _case("l09-lse-m0", "lesson09", "online_logsumexp",
          ("m = torch.full(x.shape[:-1], float(\"-inf\"), dtype=x.dtype, device=x.device)",
           "m = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)"),
          "starts the running max at 0 instead of −inf: very negative rows underflow to log 0",
          ["-inf", "−inf", "running max", "start"], SCALE + EMPTY_ROW),
    _case("l09-lse-no-tail", "lesson09", "online_logsumexp",
          ("for start in range(0, x.shape[-1], block):", "for start in range(0, x.shape[-1] - block + 1, block):"),
          "drops the last partial block",
          ["tail", "last block", "partial", "multiple of"], SCALE + EMPTY_ROW),
    _case("l09-flash-div-l", "lesson09", "flash_attention",
          ("out[:, qs:qe] = acc / l.clamp_min(1.0)", "out[:, qs:qe] = acc / l"),
          "divides by l unguarded: a causal query with no visible key (Tq > Tk) gives NaN",
          ["no visible key", "nan", "zeros", "nothing to attend to"], SCALE),
    _case("l09-flash-topleft-stop", "lesson09", "flash_attention",
          ("k_stop = max(0, min(Tk, qe + shift)) if causal else Tk", "k_stop = min(Tk, qe) if causal else Tk"),
          "causal tile skipping ignores the bottom-right shift: keys past qe never read when Tk > Tq",
          ["align", "bottom-right", "shift", "skip"], SCALE + EMPTY_ROW),
    _case("l09-flash-lse-no-m", "lesson09", "flash_attention",
          ("lse[:, qs:qe] = (m + torch.log(l)).squeeze(-1)", "lse[:, qs:qe] = torch.log(l).squeeze(-1)"),
          "lse without the running max (log of the shifted sum only)",
          ["lse", "max", "log-sum-exp"], SCALE + EMPTY_ROW),
    _case("l09-flops-half", "lesson09", "attention_flops",
          ("return per_pair * (t_k * t_k - unqueried * unqueried) // 2", "return per_pair * t_q * t_k // 2"),
          "causal: half the plain count even when t_q ≠ t_k",
          ["bottom-right", "t_q ≠ t_k", "half"], SCALE + EMPTY_ROW),
    _case("l09-flops-2", "lesson09", "attention_flops",
          ("per_pair = 4 * b * h * d", "per_pair = 2 * b * h * d"),
          "counts 2·d FLOPs per pair (only one of QKᵀ and PV)",
          ["2·", "pv", "half", "factor"], EMPTY_ROW),
    _case("l09-kv-no-2", "lesson09", "kv_cache_bytes",
          ("return 2 * n_layer * n_kv_heads", "return n_layer * n_kv_heads"),
          "counts K only (no factor 2 for V)",
          ["k and v", "factor 2", "twice", "v"], EMPTY_ROW),
    _case("l09-kv-fixed-2bytes", "lesson09", "kv_cache_bytes",
          ("element = torch.empty((), dtype=dtype).element_size()", "element = 2"),
          "assumes 2 bytes per element whatever dtype",
          ["dtype", "bytes per element", "element"], EMPTY_ROW),
    _case("l09-faf-dq-scale", "lesson09", "FlashAttentionFunction",
          ("dq[:, :, qs:qe] += (ds @ k_tile) * scale", "dq[:, :, qs:qe] += ds @ k_tile"),
          "the query gradient misses the 1/√D factor",
          ["dq", "gradient of q", "scale", "1/√d"], EMPTY_ROW),
    _case("l09-faf-no-delta", "lesson09", "FlashAttentionFunction",
          ("ds = p * (do_tile @ v_tile.transpose(-2, -1) - delta[:, :, qs:qe])",
           "ds = p * (do_tile @ v_tile.transpose(-2, -1))"),
          "drops Δ = rowsum(dO∘O) from dS",
          ["delta", "Δ", "rowsum"], SCALE + EMPTY_ROW),
    # ---------------------------------------------------------------- lesson10
    _case("l10-swiglu-gelu", "lesson10", "SwiGLU",
          ("F.silu(self.gate_proj(x)) * self.up_proj(x)", "F.gelu(self.gate_proj(x)) * self.up_proj(x)"),
          "GELU on the gate instead of SiLU",
          ["silu", "gelu", "activation"], SCALE + EMPTY_ROW),
    _case("l10-swiglu-silu-product", "lesson10", "SwiGLU",
          ("F.silu(self.gate_proj(x)) * self.up_proj(x)", "F.silu(self.gate_proj(x) * self.up_proj(x))"),
          "SiLU of the product instead of the gate times up",
          ["silu", "product", "gate"], SCALE + EMPTY_ROW),
    _case("l10-hidden-round-down", "lesson10", "swiglu_hidden_dim",
          ("return multiple_of * ((hidden + multiple_of - 1) // multiple_of)", "return multiple_of * (hidden // multiple_of)"),
          "rounds down instead of up",
          ["round"], SCALE + EMPTY_ROW),
    _case("l10-hidden-mult-after", "lesson10", "swiglu_hidden_dim",
          [("    if ffn_dim_multiplier is not None:\n        hidden = int(ffn_dim_multiplier * hidden)\n", ""),
           ("    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)  # round up",
            "    hidden = multiple_of * ((hidden + multiple_of - 1) // multiple_of)\n"
            "    return int(hidden * ffn_dim_multiplier) if ffn_dim_multiplier is not None else hidden")],
          "applies ffn_dim_multiplier after rounding (the result need not be a multiple)",
          ["multiplier", "round", "order"], SCALE + EMPTY_ROW),
    _case("l10-attn-is-causal", "lesson10", "LlamaAttention",
          ("out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)",
           "out = F.scaled_dot_product_attention(q, k, v, is_causal=True)"),
          "is_causal=True instead of the mask: no window, and top-left with a cache",
          ["window", "align", "bottom-right", "top-left", "is_causal"], SCALE + EMPTY_ROW),
    _case("l10-attn-base-dropped", "lesson10", "LlamaAttention",
          ("L06.apply_rope_half(t, positions, self.rope_base)", "L06.apply_rope_half(t, positions)"),
          "ignores rope_base: always 10000",
          ["base", "rope_base"], SCALE + EMPTY_ROW),
    _case("l10-attn-rope-after-cache", "lesson10", "LlamaAttention",
          [("        q, k = (L06.apply_rope_half(t, positions, self.rope_base) for t in (q, k))  # v is not rotated\n", ""),
           ("        n_rep = self.num_heads // self.num_kv_heads\n",
            "        q = L06.apply_rope_half(q, positions, self.rope_base)\n"
            "        k = L06.apply_rope_half(k, torch.arange(k.shape[-2], device=x.device), self.rope_base)\n"
            "        n_rep = self.num_heads // self.num_kv_heads\n")],
          "caches unrotated keys and rotates all of them after the update (right without a cache; with a "
          "rolling cache the kept keys get positions from 0)",
          ["cache", "position", "rope", "offset"], SCALE + EMPTY_ROW),
    _case("l10-rolling-seen-all-layers", "lesson10", "RollingKVCache",
          ("        if layer_idx == 0:\n            self.seen += k.shape[-2]", "        self.seen += k.shape[-2]"),
          "counts the positions of every layer's update (len grows n_layer times too fast)",
          ["len", "layer", "count", "position"], SCALE + EMPTY_ROW),
    _case("l10-rolling-returns-kept", "lesson10", "RollingKVCache",
          ("        return k_all, v_all\n", "        return self.keys[layer_idx], self.values[layer_idx]\n"),
          "returns only the kept window: a chunk longer than the window loses keys it may attend to",
          ["kept", "window", "chunk", "return"], SCALE + EMPTY_ROW),
    _case("l10-cfg-eps-zero", "lesson10", "LlamaConfig",
          ("if not self.norm_eps > 0:", "if self.norm_eps < 0:"),
          "accepts norm_eps=0",
          ["norm_eps", "valueerror"], SCALE + EMPTY_ROW),
    _case("l10-block-residual-normed", "lesson10", "LlamaBlock",
          ("x = x + self.attn(self.ln1(x), cache, layer_idx, start)", "x = self.ln1(x)\n        x = x + self.attn(x, cache, layer_idx, start)"),
          "the residual stream itself is normalised (the add starts from ln1(x))",
          ["residual", "stream", "ln1", "norm"], SCALE + EMPTY_ROW),
    _case("l10-llama-start-not-passed", "lesson10", "Llama",
          ("x = block(x, cache, i, start)", "x = block(x, cache, i)"),
          "does not pass start down: layers after the first read len(cache) after layer 0 has updated it",
          ["start", "offset", "position", "layer"], SCALE + EMPTY_ROW),
    _case("l10-llama-no-norm", "lesson10", "Llama",
          ("logits = self.lm_head(self.norm(x))", "logits = self.lm_head(x)"),
          "forgets the final RMSNorm",
          ["norm", "final"], SCALE + EMPTY_ROW),
    _case("l10-load-ln-swapped", "lesson10", "load_llama_state_dict",
          ("\"input_layernorm\": \"ln1\", \"post_attention_layernorm\": \"ln2\"",
           "\"input_layernorm\": \"ln2\", \"post_attention_layernorm\": \"ln1\""),
          "maps input_layernorm to ln2 and post_attention_layernorm to ln1",
          ["input_layernorm", "ln1", "ln2", "swap"], SCALE + EMPTY_ROW),
    _case("l10-load-head-required", "lesson10", "load_llama_state_dict",
          ("state_dict.get(\"lm_head.weight\", state_dict[\"model.embed_tokens.weight\"])", "state_dict[\"lm_head.weight\"]"),
          "requires lm_head.weight: a tied checkpoint that leaves it out raises KeyError",
          ["lm_head", "tied"], SCALE + EMPTY_ROW),
    _case("l10-filter-unscattered", "lesson10", "filter_logits",
          ("drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)", "drop = drop_sorted"),
          "top-p: applies the sorted order's drop mask to the vocabulary order",
          ["sort", "order", "scatter", "vocabulary"], SCALE + EMPTY_ROW),
    _case("l10-filter-topk-le", "lesson10", "filter_logits",
          ("out = out.masked_fill(out < kth, float(\"-inf\"))", "out = out.masked_fill(out <= kth, float(\"-inf\"))"),
          "top-k removes the k-th value itself (keeps k − 1)",
          ["k-th", "k − 1", "k - 1", "top-k", "top_k"], SCALE + EMPTY_ROW),
    _case("l10-filter-minp-raw", "lesson10", "filter_logits",
          ("        probs = out.float().softmax(dim=-1)\n        out = out.masked_fill(probs < min_p",
           "        probs = logits.float().softmax(dim=-1)\n        out = out.masked_fill(probs < min_p"),
          "min-p on the softmax of the unfiltered logits (ignores what top-k/top-p removed)",
          ["min-p", "min_p", "order", "previous", "filter"], SCALE + EMPTY_ROW,
          not_wrong="min-p compares each probability with the largest: renormalising after a filter scales both alike, and the removed tokens are already -inf"),
    _case("l10-costs-head-always", "lesson10", "decoder_costs",
          ("head = 0 if config.tie_embeddings else V * D", "head = V * D"),
          "counts a tied head's parameters twice",
          ["tied", "twice", "head"], EMPTY_ROW),
    _case("l10-costs-kv-nhead", "lesson10", "decoder_costs",
          ("\"kv_bytes_per_token\": 2 * L * kv_dim * bytes_per_value",
           "\"kv_bytes_per_token\": 2 * L * D * bytes_per_value"),
          "KV bytes with every query head (D) instead of the KV heads",
          ["kv head", "n_kv_head", "gqa"], EMPTY_ROW),
]


# case id -> [the diagnosis a human read, the verdict on it ("right", "wrong" or "facts"), why], one entry per
# wording read (an earlier wording's verdict is kept: the wrong causes this measure found and had fixed). Filled
# from runs of benchmarks/outside_measure.py; a diagnosis not listed here is judged by the case's phrases.
def _j(diagnosis, verdict, reason):
    return {"diagnosis": diagnosis, "verdict": verdict, "reason": reason}


_MASK_FACT = ("`weights (causal mask)` matches the reference at every masked position (mask False) and differs at "
              "{} of the 100 positions the mask allows, first at (0, 0, 0, 0): the masking is right, the values it "
              "keeps are not")
JUDGED: dict[str, list[dict]] = {
    "l01-softmax-global-max": [_j(
        "`output` has 24 NaN values where the reference has numbers, starting at index (0, 0); they fill 3 complete "
        "rows along the last axis", "facts",
        "true: rows whose own max is far below the tensor's max underflow to 0/0 whole; no cause is claimed")],
    "l01-softmax-log": [_j(
        "`output`: your rows (the last axis) sum to between -36.59 and -13.69, not 1, where the reference's do",
        "facts", "true of log-softmax rows; no cause claimed")],
    "l01-softmax-nokeepdim": [_j(
        "the sum that gives the result drops the reduced axis (no keepdim=True), so it broadcasts against the wrong "
        "axis", "right", "exactly the edit: e.sum(dim=dim) without keepdim")],
    "l01-sdpa-sqrt-dv": [_j(_MASK_FACT.format(100), "facts",
                            "true: the mask is respected, the kept weights are scaled wrongly; no cause claimed")],
    "l01-sdpa-scale-v": [_j(_MASK_FACT.format(100), "facts",
                            "true: the scores are unscaled so the kept weights differ; no cause claimed")],
    "l01-sdpa-dk-from-tk": [_j(_MASK_FACT.format(99), "facts",
                               "true: the kept weights differ (scale from Tk); no cause claimed")],
    "l02-causal-sign": [_j("the result subtracts the other way round: t_q - t_k", "right",
                           "the student wrote diagonal=t_q - t_k")],
    "l02-additive-nan": [_j(
        "multiplying the inverted mask by −inf gives 0 × −inf = NaN where the mask is True: select the two values "
        "instead (torch.where or masked_fill).", "right",
        "(mask − 1)·inf is (inverted mask)·(−inf) term by term: NaN where True from 0·inf, as said")],
    "l02-additive-dtype": [_j("`to_additive` ignores the argument `dtype`: it always uses the default, torch.float32",
                              "right", "the student dropped dtype= from torch.zeros")],
    "l02-padding-le": [_j(
        "the comparison of positions[None, :] with lengths[:, None] includes the boundary (<=): an off-by-one at "
        "lengths[:, None]", "right", "the student's line is that comparison with <=")],
    "l02-padding-layout": [_j(
        "`padding_mask([3, 7, 1, 5], 7)` equals the reference with its last two axes swapped (transposed)", "facts",
        "true: (B, 1, t, 1) is (B, 1, 1, t) with the last two axes swapped")],
    "l02-window-symmetric": [_j(
        "`sliding_window_mask(9, 3)` allows 15 positions the reference masks (and none fewer), first at (0, 1): too "
        "permissive", "facts", "true: the symmetric band adds the future positions, first (0, 1)")],
    "l02-masked-empty-mean": [_j(
        "`output` differs from the reference only at 120 of the 120 positions where the reference is exactly 0, "
        "first at (0, 0, 0, 0), where yours gives -0.7145", "facts",
        "true: only the empty rows (reference 0) differ, they hold the mean of v")],
    "l03-csa-kqv": [_j(
        "the first two arguments of `scaled_dot_product_attention` in `out` are in the wrong order", "wrong",
        "the student's SDPA call is the reference's (q, k, v); the swap is in the unpacking k, q, v = chunk(...): "
        "the mutant reproduces the numbers but the sentence sends the student to a line that is right "
        "(fixed: the sentence now says q and k arrive swapped, in the call or where they are made)"),
        _j("`scaled_dot_product_attention` in `out` gets q and k swapped (in the call, or where they are made)",
           "right", "q and k do reach the call swapped, and the sentence allows that the swap is where they are made")],
    "l03-csa-causal-fixed": [_j(
        "`CausalSelfAttention` ignores the argument `is_causal`: it always uses the default, True", "right",
        "the student hard-coded is_causal=True")],
    "l03-repeat-tiled-expand": [_j(
        "`repeat` tiles the heads (0, 1, 2, 0, 1, 2), giving query head h the KV head h % Hkv; heads must be grouped "
        "(0, 0, 1, 1, 2, 2): use repeat_interleave(n_rep, dim=1).", "right",
        "the heads are tiled h % Hkv, as said; the student tiles with expand, not `repeat`, which the sentence "
        "names as the usual way to tile (the concept is the student's)")],
    "l03-gqa-tiling": [_j(
        "the KV heads are tiled with `repeat` (h % Hkv) instead of grouped: query head h must use KV head h // n_rep, "
        "as repeat_kv or enable_gqa=True do.", "right", "the student tiles with .repeat(1, n_rep, 1, 1)")],
    "l04-LN-bias-always": [_j("`LayerNorm` ignores the argument `bias`: it always uses the default, True", "right",
                              "the student always creates the bias")],
    "l04-LN-eps-dropped": [_j("`LayerNorm` ignores the argument `eps`: it always uses the default, 1e-05", "right",
                              "the student never passes self.eps on")],
    "l04-bn-batch-only": [_j("`sample 0 alone` is all zeros, where the reference is not", "facts",
                             "true: statistics over the batch axis of a one-sample batch make every value its mean")],
    "l04-bn-unbiased": [_j(
        "the variance divides by n − 1; BatchNorm normalises with the population variance (divide by n = N·H·W…): "
        "`unbiased=False` or `correction=0`.", "right", "the student used x.var(), unbiased")],
    "l04-manual-gx-short": [_j(
        "the backward subtracts mean(ĝ) for the mean but forgets the variance's term −x̂·mean(ĝ·x̂), with ĝ = "
        "grad_out·weight.", "right", "exactly the term the student dropped")],
    "l06-lpe-offset-ignored": [_j(
        "`offset` is ignored: rows 0..T−1 are added whatever the offset; add rows offset..offset+T−1 (a decoder with "
        "a cache is at position offset, not 0).", "right", "the student slices weight[:T]")],
    "l06-lpe-std1": [_j(
        "nn.Embedding initialises N(0, 1); positions here are initialised N(0, 0.02): call nn.init.normal_(weight, "
        "std=0.02).", "right",
        "the table is N(0, 1) as said; the student called nn.init.normal_ without std (the nn.Embedding clause is "
        "context, the fix it gives is the student's)")],
    "l06-alibi-odd-half": [_j(
        "`slopes for H=12` matches the reference up to index 7 along axis -1 (size 12) and differs from index 8 on",
        "facts", "true: the 8 power-of-two slopes are right, the 4 extra ones wrong")],
    "l06-alibi-topleft": [_j(
        "with t_q < t_k the queries are the last t_q positions: query i sits at position i + (t_k − t_q) "
        "(bottom-right aligned), not at i.", "right", "the student dropped the + (t_k − t_q)")],
    "l07-mlp-relu": [_j(
        "the activation is ReLU; this MLP uses GELU with the tanh approximation, F.gelu(x, approximate=\"tanh\").",
        "right", "the student used F.relu")],
    "l07-mlp-expansion-fixed": [_j(
        "the hidden width is fixed at 4 · d_model; it must be expansion · d_model for the `expansion` passed in.",
        "right", "the student wrote hidden = 4 * d_model")],
    "l05-rms-float32-out": [_j(
        "`output` has the right values but dtype float32 instead of float16: compute in the input's dtype, or cast "
        "back with `.to(x.dtype)`", "facts", "true: the student returns the float32 result")],
    "l05-RMS-eps-dropped": [_j("`RMSNorm` ignores the argument `eps`: it always uses the default, 1e-06", "right",
                               "the student never passes self.eps on")],
    "l08-gpt-double-shift": [_j(
        "`gradient of wpe.weight` differs from the reference at indices 0…8 along axis -2 (size 16) and matches after "
        "them", "facts", "true: the 9 positions used get a wrong gradient, the unused ones 0 in both")],
    "l08-gpt-no-lnf": [_j(
        "`gradient of wpe.weight` differs from the reference at indices 0…8 along axis -2 (size 16) and matches after "
        "them", "facts", "true: the 9 positions used get a wrong gradient, the unused ones 0 in both")],
    "l09-lse-m0": [_j(
        "the removed entries of `m` are set to 0, not -inf: 0 is an ordinary score, so they still get weight", "wrong",
        "the edit is the student's (the -inf that starts the running max made 0), but nothing is removed or weighted "
        "there: the sentence describes a mask fill (fixed: a -inf given to torch.full is now said as a start, one "
        "tested for as a test)")],
    "l09-lse-no-tail": [_j(
        "`logsumexp with block=64` has 15 Inf values where the reference has numbers, starting at index (0, 0); they "
        "fill 3 complete rows along the last axis", "facts",
        "true: with fewer entries than one block nothing is read and every row gives -inf")],
    "l10-hidden-round-down": [_j(
        "the width is rounded down to a multiple of multiple_of; Llama rounds up: `multiple_of * ((hidden + "
        "multiple_of - 1) // multiple_of)`.", "right", "the student rounds down")],
    "l10-attn-base-dropped": [_j(
        "rope_base is not passed to the rotation, so every model rotates with base 10000: Llama 3 uses "
        "rope_base=500000, and a checkpoint trained with it attends to the wrong positions. Pass self.rope_base to "
        "apply_rope_half.", "right", "the student dropped self.rope_base from the call")],
    "l10-attn-is-causal": [_j(
        "`through the cache` matches the reference up to index 3 along axis -2 (size 10) and differs from index 4 on",
        "facts", "true: the first chunk is square (top-left = bottom-right), the cached chunks after it differ")],
    "l10-attn-rope-after-cache": [_j(
        "`through a rolling cache (window=3)` matches the reference up to index 3 along axis -2 (size 9) and differs "
        "from index 4 on", "facts", "true: until the window drops a key the cached keys sit at 0, 1, ... as they "
        "should; the positions go wrong once it does")],
    "l10-rolling-seen-all-layers": [_j(
        "`through your cache` matches the reference up to index 4 along axis -2 (size 14) and differs from index 5 "
        "on", "facts", "true: the first chunk starts at 0 either way; len grows twice per step after it")],
    "l10-rolling-returns-kept": [_j(
        "`through your cache` differs from the reference at indices 0…6 along axis -2 (size 14) and matches after "
        "them", "facts", "true: only a chunk longer than the window loses keys, and that is the first one")],
    "l07-block-ln-bias": [_j("`self.ln1` uses the default bias=True instead of the `bias` it was given", "right",
                             "the student dropped bias=bias from ln1")],
}


# Judgements read on the run of 2026-12-06 (every lesson, the engine with mutations_shape's and mutations_module's
# operators): appended to a case's list (a wording read before keeps its verdict).
_READ: dict[str, list[dict]] = {
    'l09-lse-m0': [_j('`m` starts at 0, not -inf: a start of 0 is an ordinary value, which values below 0 never replace',
        'right', 'the student starts m with torch.zeros: the running max starts at 0, as said')],
    'l09-flash-div-l': [_j('`output (Tq=70, Tk=40)` has 960 NaN values where the reference has numbers, starting at index (0, 0, 0, 0); they fill 60 complete rows along the last axis',
        'facts', 'true: the queries with no visible key (Tq > Tk) are whole NaN rows; no cause claimed')],
    'l09-flash-lse-no-m': [_j('`lse (Tq=70, Tk=40)` matches the reference up to index 29 along axis -1 (size 70) and differs from index 30 on',
        'facts', 'true: the first Tq − Tk = 30 queries see no key (-inf in both), every later lse misses its max')],
    'l09-flops-half': [_j('causal is counted as half whatever Tq and Tk: half holds for Tq = Tk only. The causal mask is bottom-right, so one decoding query (Tq = 1) sees every key: count 2·B·H·D·(Tk² − max(Tk − Tq, 0)²).',
        'right', 'the student halves the plain count whatever Tq and Tk')],
    'l09-flops-2': [_j('only Q·Kᵀ is counted: P·V costs the same 2·Tq·Tk·D per head, so a forward pass is 4·B·H·Tq·Tk·D.',
        'right', 'the student counts 2·d per pair: one of the two products, as said')],
    'l09-kv-no-2': [_j('only the keys are counted: the cache holds a K and a V per layer, head and position, so multiply by 2.',
        'right', 'the student dropped the factor 2 for V')],
    'l09-kv-fixed-2bytes': [_j('`kv_cache_bytes` ignores the argument `dtype`: it always uses the default, torch.float16',
        'right', "the student hard-codes 2 bytes, float16's size, whatever dtype")],
    'l10-swiglu-gelu': [_j('the result uses gelu where the text asks for silu', 'right', 'the student wrote F.gelu on the gate')],
    'l10-block-residual-normed': [_j('in `x` the stream x itself is normalised by self.ln1: the sublayer\'s output is added to self.ln1(x), not to x',
        'right', 'the student rebinds x = self.ln1(x) before the add: the stream itself is normalised, as said')],
    'l08-cfg-dropout-1': [_j('`dropout` exactly at the limit 1.0 is accepted, where the text rejects it with a ValueError: the '
        'validation lets that value through', 'right', 'the student wrote 0.0 <= dropout <= 1.0: 1.0 passes, as said')],
    'l08-cfg-no-divide': [_j('the validation of `n_embd`, `n_head` is missing: a value the text rejects is accepted, with no '
        'ValueError naming the argument', 'right', 'the student deleted the divisibility check')],
    'l08-gpt-ge-block': [_j('`block_size`, `start`, `T` exactly at the limit self.config.block_size is rejected, where the text '
        'accepts it: the validation\'s bound is too strict there', 'right',
        'the student wrote start + T >= block_size: a sequence that ends exactly at block_size is rejected (the wording '
        'was made clearer after: the compared value, then its limit)')],
    'l08-gpt-no-lnf': [_j('`logits` leaves out self.ln_f: x is never normalised', 'right', 'the student dropped self.ln_f')],
    'l08-gen-no-crop': [_j('a slice in `logits, _` is off by one at its start (-block_size - 1)', 'wrong',
        'the student feeds the whole context (no slice at all); one entry further out fails the same way at the first '
        'step past block_size, so the amount "one" was never shown (fixed: the slice family says the direction, "or '
        'further"; tests/unit/test_outside_diagnosis.py plants it)'),
        _j('a slice in `logits, _` starts too early (-block_size - 1, or further): it keeps entries before -block_size',
           'right', 'the context keeps entries before its last block_size: the crop is missing, which "or further" covers')],
    'l01-softmax-global-max': [_j('the amax that gives `shifted` runs over the whole tensor, not along `dim`: one value for '
        'every row, not one per row', 'right', 'the student subtracts x.max(), the whole tensor\'s')],
    'l01-softmax-inplace': [_j('`shifted` is made by changing the argument `x` in place (x -= …): the caller\'s tensor is '
        'modified, and a second call sees it changed', 'right', 'the student wrote x -= x.amax(...)')],
    'l01-sdpa-sqrt-dv': [_j('the size q.shape[-1] in `d_k` is taken from v\'s last axis, not from q\'s last axis: two sizes '
        'that agree only when those axes are equal', 'right', 'the student wrote d_k = v.shape[-1]')],
    'l01-sdpa-dk-from-tk': [_j('the size q.shape[-1] in `d_k` is taken from k\'s axis -2, not from q\'s last axis: two sizes '
        'that agree only when those axes are equal', 'right', 'the student wrote d_k = k.shape[-2]')],
    'l02-window-novalidate': [_j('the validation of `window` is missing: a value the text rejects is accepted, with no '
        'ValueError naming the argument', 'right', 'the student deleted the window check')],
    'l02-masked-empty-mean': [_j('`weights` keeps torch.softmax(score… where ~visible: the entries that should become 0 '
        'there stay as they are', 'right', 'the student dropped .masked_fill(~visible, 0.0) after the softmax')],
    'l02-masked-scale-tk': [_j('the size q.shape[-1] in `scores` is taken from k\'s axis -2, not from q\'s last axis: two '
        'sizes that agree only when those axes are equal', 'right', 'the student scales by √k.shape[-2], √Tk')],
    'l05-rms-sum': [_j('`inv_rms` takes the sum of xf.pow(2) where the mean belongs', 'right', 'the student wrote .sum')],
    'l05-rms-weight-add': [_j('in `y`, weight.float() is added instead of multiplied: a gain scales each feature', 'right',
        'the student wrote y + weight.float()')],
    'l05-RMS-not-param': [_j('the weights are plain tensors, not nn.Parameter: they are not trained, not in the state dict '
        'and not moved by .to()', 'right', 'the student assigns torch.ones(dim) without nn.Parameter')],
    'l06-sin-from-1': [_j('`pos` counts from 1 to max_len, not from 0 to max_len − 1: every position is one too far',
        'right', 'the student wrote arange(1, max_len + 1)')],
    'l06-lpe-ge': [_j('`offset + T` exactly at its limit `self.max_len` is rejected, where the text accepts it: the '
        'validation\'s bound is too strict there', 'right', 'the student wrote offset + T >= self.max_len')],
    'l06-ropehalf-D-from-T': [_j('one use of `D` in `inv_freq` is taken from x\'s axis -2, not from x\'s last axis: two '
        'sizes that agree only when those axes are equal', 'right', 'the student divides the exponent by x.shape[-2]')],
    'l06-invfreq-scale1': [_j('`scale` exactly at its limit `1` is rejected, where the text accepts it: the validation\'s '
        'bound is too strict there', 'right', 'the student wrote scale <= 1')],
    'l06-alibi-noabs': [_j('in `distance`, i - j is used without .abs(): negative values keep their sign', 'right',
        'the student dropped .abs()')],
    'l10-swiglu-silu-product': [_j('in the result, silu is applied to the product of the two branches, not to '
        'self.gate_proj(x) alone before the product', 'right', 'the student wrote F.silu(gate_proj(x) * up_proj(x))')],
    'l10-cfg-eps-zero': [_j('`self.norm_eps` exactly at its limit `0` is accepted, where the text rejects it with a '
        'ValueError: the validation lets that value through', 'right', 'the student wrote norm_eps < 0: 0 passes, as said')],
    'l10-llama-start-not-passed': [_j('each layer reads len(cache) itself, after the layers before it have updated the '
        'cache, so layers past the first rotate at the wrong positions: read start = len(cache) once and pass it to every '
        'block.', 'right', 'the student calls block(x, cache, i) without start')],
    'l10-llama-no-norm': [_j('`logits` leaves out self.norm: x is never normalised',
        'right', 'the student dropped self.norm before the head')],
    'l10-costs-head-always': [_j('a tied head is counted as a second V×D matrix: with tie_embeddings the head is the embedding, counted once in params (it is still a matrix product in N_mm).',
        'right', 'the student counts V·D for the head whatever tie_embeddings')],
    'l04-gn-view': [_j('`xg` reshapes x with .view: a view needs memory laid out in that order, so it fails on a transposed or sliced tensor, where .reshape copies',
        'right', 'the student wrote x.view(N, num_groups, -1)')],
    'l04-gn-novalidate': [_j('the validation of `C`, `num_groups` is missing: a value the text rejects is accepted, with no ValueError naming the argument',
        'right', 'the student replaced the raise with pass')],
    'l03-split-novalidate': [_j('the validation of `D`, `num_heads` is missing: a value the text rejects is accepted, with no ValueError naming the argument',
        'right', 'the student replaced the raise with pass')],
    'l03-merge-view': [_j('the result reshapes x.transpose(1, 2) with .view: a view needs memory laid out in that order, so it fails on a transposed or sliced tensor, where .reshape copies',
        'right', 'the student wrote x.transpose(1, 2).view(...)')],
    'l03-mha-kproj-q': [_j("`k` goes through `self.q_proj` where `self.k_proj` belongs: two layers built the same way, one used in the other's place",
        'right', 'the student wrote self.q_proj(key) for k')],
    'l03-csa-no-dropout-switch': [_j('`out` is always self.dropout, even where `self.training` is false and it should be 0.0',
        'right', 'the student passes dropout_p=self.dropout in eval mode too')],
    'l09-flash-div-l': [_j('in `out[:, qs:qe]`, l is used without .clamp_min(): values below the floor pass through '
        'unchanged', 'right', 'the student divides by l without clamp_min(1.0): an empty row\'s l = 0 gives 0/0')],
}
for _id, _entries in _READ.items():
    JUDGED.setdefault(_id, []).extend(_entries)

# 2026-12-07: diagnoses that also say the changes the checks cannot tell apart (graders/engine/mutations.py
# add_alias; diagnosis._Reproduced), read here: the first sentence is the student's edit, each alias the same size
_ALIASED = {
    'l01-sdpa-dk-from-tk': [_j("the size q.shape[-1] in `d_k` is taken from k's axis -2, not from q's last axis: two sizes that agree only when those axes are equal (or, with the same outputs on every input checked: the size q.shape[-1] in `d_k` is taken from v's axis -2, not from q's last axis: two sizes that agree only when those axes are equal)",
        'right', "the student took d_k from k.shape[-2] (Tk), as the first sentence says; the alias, v's axis -2, is Tk too (k and v share Tk), so both sentences are the student's edit")],
    'l02-masked-scale-tk': [_j("the size q.shape[-1] in `scores` is taken from k's axis -2, not from q's last axis: two sizes that agree only when those axes are equal (or, with the same outputs on every input checked: the size q.shape[-1] in `scores` is taken from v's axis -2, not from q's last axis: two sizes that agree only when those axes are equal; or the size q.shape[-1] in `scores` is taken from mask's last axis, not from q's last axis: two sizes that agree only when those axes are equal)",
        'right', "the student scaled by sqrt(Tk): k's axis -2, as the first sentence says; v's axis -2 and the mask's last axis are Tk too, so each alias is the same size")],
    'l06-ropehalf-D-from-T': [_j("one use of `D` in `inv_freq` is taken from x's axis -2, not from x's last axis: two sizes that agree only when those axes are equal (or, with the same outputs on every input checked: one use of `D` in `inv_freq` is taken from positions's last axis, not from x's last axis: two sizes that agree only when those axes are equal)",
        'right', "the student divided the exponent by T, x's axis -2, as the first sentence says; positions's last axis is T too, so the alias is the same size")],
}
for _id, _entries in _ALIASED.items():
    JUDGED.setdefault(_id, []).extend(_entries)
