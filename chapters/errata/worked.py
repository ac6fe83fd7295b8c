"""Claims that several notes share, or that the book corrects at length: each recomputed, asserted, recorded.

These are the findings the appendix once worked on its page. The computations now run here, out of the
reader's way; the page shows the claim, the verdict and one line of evidence.
"""

from __future__ import annotations

import numpy as np
import torch

import lib.attention as att
import lib.flops as fl
import lib.multihead as mh
import lib.positional as pos
import lib.sizing as sz
from lib.blocks import decoder_layer_param_count
from lib.book.fmt import agree, bound, count, fixed, percent
from lib.constants import BYTES_PER_DTYPE, FLOPS_PER_MAC, GB, GiB
from lib.ffn import feed_forward, ffn_param_count
from lib.norms import layer_norm
from lib.planner.config import load_config
from lib.planner.gpus import GPUS
from lib.pt.blocks import encoder_layer_param_count, layer_norm_param_count
from lib.softmax import masked_softmax, merge_normalizers, softmax, softmax_naive, softmax_vjp

from . import FIXTURES, Review, sample_dot_products

TOL = 1e-12  # float64 agreement between two ways of computing one quantity


def scaled_products(review: Review) -> None:
    """Var(q.k / sqrt(d_k)) = 1 under independent unit-variance components, and what breaks it."""
    d_k, pairs = 64, 200_000
    qk, qq = sample_dot_products(np.random.default_rng(1), pairs, d_k)
    scores = qk / np.sqrt(d_k)
    var_iid = scores.var()
    var_half = (scores / 2).var()  # dividing by 2 sqrt(d_k): Var = 1/4 for every d_k
    # components of variance 4 (2q and 2k): Var = 16. Doubling is exact in floating point, so their scores are
    # 4 * scores to the last bit
    var_sigma2 = (4 * scores).var()
    self_scores = qq / np.sqrt(d_k)  # q = k: mean sqrt(d_k), variance 2
    assert abs(var_iid - 1) < 0.02 and abs(var_sigma2 - 16) < 0.3 and abs(var_half - 0.25) < 0.005
    assert abs(self_scores.mean() - np.sqrt(d_k)) < 0.02 and abs(self_scores.var() - 2) < 0.05
    iid = f"Var = {fixed(var_iid, 2)} over {count(pairs)} pairs"

    review.add("intro-article", 86, "4.3 Scaling",
               r"With independent standard-normal entries, $q \cdot k/\sqrt{d_k}$ has variance 1.", "correct",
               f"measured Var = {fixed(var_iid, 3)} ($d_k = 64$). Outside the assumptions it fails: entries of "
               f"variance 4 give {fixed(var_sigma2, 2)}, and $q = k$ a mean of {fixed(self_scores.mean(), 2)}",
               "scaling", brief=f"{iid}")
    review.add("walkthrough", 15, "Deriving the √d_k scaling factor",
               r"No constant other than $\sqrt{d_k}$ keeps the score variance independent of $d_k$.",
               "imprecise",
               f"the variance result holds (measured {fixed(var_iid, 3)}), but dividing by $2\\sqrt{{d_k}}$ also "
               f"keeps it fixed, at {fixed(var_half, 3)}; unit variance is what singles out $\\sqrt{{d_k}}$. The "
               r"paper's footnote derives only $\operatorname{Var}(q \cdot k) = d_k$", "scaling",
               brief=f"$2\\sqrt{{d_k}}$ also does (at {fixed(var_half, 2)}); unit variance picks "
                     r"$\sqrt{d_k}$")
    review.add("lab-report", 37, "1B. Why divide by √d_k?",
               r"For independent zero-mean unit-variance entries, $\operatorname{Var}(q \cdot k) = d_k$, so "
               r"$\sqrt{d_k}$ restores unit variance.", "correct",
               f"measured Var of the scaled product = {fixed(var_iid, 3)}; the assumptions are stated", "scaling",
               brief=iid)
    review.add("theory-notes", 97, "2.3 Why scale by √d_k",
               r"Under independence and unit variance, $q^\top k$ has variance $d_k$.", "correct",
               f"measured Var of the unscaled product / $d_k$ = {fixed(var_iid, 3)}", "scaling", brief=iid)

    # "typical dot products of size ~8 at d_k = 64 drive the softmax to 0 or 1"
    g = np.random.default_rng(1)
    mean_abs = np.abs(np.sqrt(d_k) * g.standard_normal(pairs)).mean()
    peak = {}
    for n_keys in (16, 1024):
        s = np.sqrt(d_k) * np.random.default_rng(0).standard_normal((2000, n_keys))  # q.k ~ N(0, d_k)
        peak[n_keys] = softmax(s).max(axis=1)
    assert abs(mean_abs - 8 * np.sqrt(2 / np.pi)) < 0.05 and peak[16].mean() > peak[1024].mean()
    review.add("theory-notes", 99, "2.3 Why scale by √d_k",
               r"At $d_k = 64$ raw products of size 8 pin the softmax near 0 or 1.",
               "imprecise",
               f"8 is the standard deviation; the mean magnitude is {fixed(mean_abs, 2)}. The largest weight "
               f"averages {fixed(peak[16].mean(), 3)} over 16 keys but {fixed(peak[1024].mean(), 3)} over 1024, "
               f"where {percent((peak[1024] > 0.99).mean(), 2)} of rows exceed 0.99", "scaling",
               brief=f"8 is the spread; the top weight averages "
                     f"{fixed(peak[16].mean(), 2)} over 16 keys, {fixed(peak[1024].mean(), 2)} over 1024")

    # "unscaled, at d_k = 1024, large blocks stop receiving gradient"
    def jacobian_norms(scale: float, rows: int = 500, n_keys: int = 128) -> np.ndarray:
        a = softmax(scale * np.sqrt(1024) * np.random.default_rng(1).standard_normal((rows, n_keys)))
        cols = [softmax_vjp(a, np.broadcast_to(np.eye(n_keys)[j], a.shape)) for j in range(n_keys)]
        return np.sqrt(sum((c**2).sum(axis=1) for c in cols))

    dead_raw = (jacobian_norms(1.0) < 1e-6).mean()
    dead_scaled = (jacobian_norms(1 / np.sqrt(1024)) < 1e-6).mean()
    assert dead_raw > 0.2 and dead_scaled == 0
    review.add("walkthrough", 98, "Correcting a common misconception",
               r"Unscaled at $d_k = 1024$, blocks of scores get no gradient.", "correct",
               f"{percent(dead_raw, 2)} of rows (128 keys) have a softmax Jacobian of norm below $10^{{-6}}$, "
               f"against {percent(dead_scaled, 0)} with the scaling", "scaling",
               brief=f"{percent(dead_raw, 1)} of rows have a Jacobian norm under $10^{{-6}}$; scaled, "
                     f"{percent(dead_scaled, 0)}")


def softmax_and_masks(review: Review) -> None:
    """The overflow example, the size of logits, and masking with -1e9."""
    x = np.array([1000.0, 1002.0], dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        naive = softmax_naive(x)
    stable = softmax(x)
    assert np.isnan(naive).all() and np.allclose(stable, [0.1192, 0.8808], atol=5e-5)
    pair = f"[{fixed(stable[0], 4)}, {fixed(stable[1], 4)}]"
    review.add("walkthrough", 19, "Numerical stability",
               r"Softmax of $[1000, 1002]$ overflows when computed directly; shifting by the maximum gives "
               r"$[0.1192, 0.8808]$.", "correct",
               f"naive float32 gives {naive.tolist()}, `lib.softmax.softmax` gives {pair}", "softmax",
               brief=f"direct float32: NaN; shifted: {pair}")
    sigmas = {dk: 1000 / np.sqrt(dk) for dk in (64, 128, 256)}
    assert min(sigmas.values()) > 60
    review.add("walkthrough", 19, "Numerical stability",
               "Logits near 1000 are plausible before scaling.", "wrong",
               f"under that variance result a logit of 1000 lies {fixed(sigmas[256], 1)} to {fixed(sigmas[64], 1)} "
               "standard deviations out for $d_k$ = 256 to 64; large logits come from trained, correlated "
               "queries and keys, which the variance result excludes", "softmax",
               brief=f"1000 is {fixed(sigmas[256], 1)} to {fixed(sigmas[64], 1)} standard "
                     "deviations out")

    scores16 = torch.randn(2, 4, dtype=torch.float16, generator=torch.Generator().manual_seed(0))
    mask = torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0]])  # second row: every key masked
    try:
        scores16.masked_fill(mask == 0, -1e9)
        fp16_error = None
    except RuntimeError as err:
        fp16_error = str(err).split("\n")[0]
    assert fp16_error is not None and "overflow" in fp16_error
    scores32 = scores16.float()
    w_big = torch.softmax(scores32.masked_fill(mask == 0, -1e9), dim=-1)
    w_inf = torch.softmax(scores32.masked_fill(mask == 0, float("-inf")), dim=-1)
    w_book = masked_softmax(scores32.numpy().astype(np.float64), mask.numpy().astype(bool))
    assert torch.equal(w_big[0], w_inf[0]) and torch.all(w_big[0, 2:] == 0)
    assert torch.allclose(w_big[1], torch.full((4,), 0.25)) and np.all(w_book[1] == 0)
    review.add("intro-article", 222, "10. Implementation concept",
               "Mask by filling hidden scores with $-10^9$.", "assumption",
               "exact in float32 for every row with a visible key (the masked weights underflow to 0, as with "
               f"$-\\infty$); in float16 (max 65504) it raises `RuntimeError: {fp16_error}`, and a fully masked row "
               f"gets {fixed(float(w_big[1, 0]), 2)} on each of 4 masked keys instead of none", "softmax",
               brief=f"raises in float16; a fully masked row gets {fixed(float(w_big[1, 0]), 2)} "
                     "per hidden key")


def blockwise_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, block: int) -> np.ndarray:
    """Exact softmax(q k^T / sqrt(d_k)) v, visiting ``block`` keys at a time (never all n x n scores)."""
    m = np.full((q.shape[0], 1), -np.inf)
    norm = np.zeros((q.shape[0], 1))
    acc = np.zeros((q.shape[0], v.shape[1]))
    for j in range(0, k.shape[0], block):
        s = q @ k[j:j + block].T / np.sqrt(q.shape[1])  # (n, block): the only score buffer
        m_b = s.max(axis=1, keepdims=True)
        p = np.exp(s - m_b)
        m_new, norm = merge_normalizers(m, norm, m_b, p.sum(axis=1, keepdims=True))
        acc = acc * np.exp(m - m_new) + (p * np.exp(m_b - m_new)) @ v[j:j + block]
        m = m_new
    return acc / norm


def quadratic_memory(review: Review) -> None:
    """Attention's memory is quadratic only when the n x n weights are stored."""
    g = np.random.default_rng(7)
    q, k, v = (g.standard_normal((1024, 64)) for _ in range(3))
    o_block = blockwise_attention(q, k, v, block=128)
    full_bytes = 10_000**2 * BYTES_PER_DTYPE["fp32"]
    block_bytes = 10_000 * 128 * BYTES_PER_DTYPE["fp32"]
    match = agree(o_block, att.attention(q, k, v)[0], TOL)
    assert full_bytes == 4 * 10**8
    review.add("theory-notes", 48, "1.2 The attention alternative",
               "Self-attention needs memory and time quadratic in the sequence length.", "assumption",
               f"time yes; memory only if the $n \\times n$ weights are stored ({fixed(full_bytes / GB, 1)} GB per "
               f"head at $n = 10^4$ in fp32). Computed 128 keys at a time, exact attention agrees ({match}) and "
               f"holds {fixed(block_bytes / GB, 3)} GB of scores", "tiled-attention",
               brief=f"memory only if stored: 128 keys at a time, exact, with "
                     f"{fixed(block_bytes / GB, 3)} GB instead of {fixed(full_bytes / GB, 1)} GB")


def worked_backward(review: Review) -> None:
    """The 2-token backward pass with Q = K = I, and the reason given for dL/dV."""
    eye, v2 = np.eye(2), np.array([[1.0, 2.0], [3.0, 4.0]])
    st = att.attention_backward_steps(eye, eye, v2, np.ones((2, 2)))
    assert np.allclose(st.a.round(4), [[0.6698, 0.3302], [0.3302, 0.6698]])
    assert np.allclose(st.o.round(4), [[1.6605, 2.6605], [2.3395, 3.3395]])
    assert np.allclose(st.ds_scaled.round(4), [[-0.8847, 0.8847], [-0.8847, 0.8847]])
    assert np.allclose(st.ds.round(4), [[-0.6256, 0.6256], [-0.6256, 0.6256]])
    assert np.allclose(st.dq, st.ds) and np.allclose(st.dk, st.ds.T)
    review.add("walkthrough", 34, "Backpropagation: a worked example",
               r"The hand-worked 2-token backward pass: "
               r"$A$, $O$ and both score gradients.", "correct",
               "all reproduced by `lib.attention.attention_backward_steps`", "attention-backward",
               brief=f"$A_{{11}}$ = {fixed(st.a[0, 0], 4)}, $O_{{11}}$ = {fixed(st.o[0, 0], 4)}: every entry "
                     "reproduced")

    g3 = np.random.default_rng(3)
    q3, k3, v3 = (g3.standard_normal((3, 2)) for _ in range(3))
    st3 = att.attention_backward_steps(q3, k3, v3, np.ones((3, 2)), mask=att.causal_mask(3))
    colsum = st3.a.sum(axis=0)
    assert not np.allclose(colsum, 1)
    sums = ", ".join(fixed(c, 4) for c in colsum)
    review.add("walkthrough", 38, "Backpropagation: a worked example",
               r"In that example $\partial\mathcal{L}/\partial V$ is all ones as rows of $A$ sum to 1.",
               "imprecise",
               f"row $j$ of $A^\\top \\mathbf 1$ is the column sum $\\sum_i A_{{ij}}$ "
               f"({agree(st3.dv, np.repeat(colsum[:, None], 2, axis=1), 1e-14)}); with a causal mask on 3 tokens "
               f"these are {sums}. The ones come from the symmetric $A$, not from the row sums",
               "attention-backward",
               brief=f"it is the column sums; causal, 3 tokens: {sums}")

    gl = np.random.default_rng(11)
    q, k, v = (gl.standard_normal((5, 4)) for _ in range(3))
    d_out = gl.standard_normal((5, 4))
    a = softmax(q @ k.T / np.sqrt(4))
    d_v = a.T @ d_out
    d_a = d_out @ v.T
    d_s = a * (d_a - (d_a * a).sum(axis=1, keepdims=True))
    d_q, d_k = d_s @ k / np.sqrt(4), d_s.T @ q / np.sqrt(4)
    qt, kt, vt = (torch.tensor(m, requires_grad=True) for m in (q, k, v))
    (torch.softmax(qt @ kt.T / 2.0, dim=-1) @ vt).backward(torch.from_numpy(d_out))
    worst = max(float(np.abs(mine - t.grad.numpy()).max()) for mine, t in ((d_q, qt), (d_k, kt), (d_v, vt)))
    review.add("lab-report", 113, "6. Backward pass",
               r"The matrix-form gradients of one head with respect to $V$, $A$, $S$, $Q$ and $K$.", "correct",
               f"each formula against `torch.autograd` in float64: {bound(worst, TOL)}", "attention-backward",
               brief=f"each against autograd: {bound(worst, TOL)}")


def sinusoid_distance(review: Review) -> None:
    """Nearby positions close, distant ones far: true roughly, not monotonically."""
    table = pos.sinusoidal_encoding(1001, 512)
    dist = np.linalg.norm(table - table[0], axis=1)
    steps = np.diff(dist)
    assert np.abs(steps).min() > 1e-8  # no step within round-off of zero: the counts hold on any machine
    first_dip = int(np.argmax(steps < 0)) + 1
    n_dips = int((steps < 0).sum())
    near_max, far_min = dist[:11].max(), dist[20:].min()
    assert first_dip == 44 and n_dips > 300 and dist[912] < dist[901] and near_max < far_min
    review.add("theory-notes", 161, "4.2 Sinusoidal encoding",
               "Sinusoidal codes grow apart with distance.", "imprecise",
               f"roughly, for $d_\\text{{model}} = 512$: offsets up to 10 lie within {fixed(near_max, 1)} of "
               f"position 0, every offset from 20 to 1000 at least {fixed(far_min, 1)} away. Not monotone: the "
               f"distance grows only up to offset {first_dip - 1}; {n_dips} of the first 1000 unit steps decrease "
               f"it, and offset 912 is closer ({fixed(dist[912], 2)}) than 901 ({fixed(dist[901], 2)})",
               "positional",
               brief=f"not monotone: {count(n_dips)} of 1000 steps bring codes closer")


def shapes_and_counts(review: Review) -> None:
    """Permutations, LayerNorm's parameters, the FFN's shapes, block parameter counts."""
    g = np.random.default_rng(0)
    d_model, h, n = 16, 4, 6
    params = mh.init_params(d_model, h, rng=g)
    xs = g.standard_normal((n, d_model))
    perm = g.permutation(n)
    out, _ = mh.multi_head_attention(xs, None, params, h)
    out_p, _ = mh.multi_head_attention(xs[perm], None, params, h)
    equi = agree(out_p, out[perm], TOL, "max |f(Px) - P f(x)|")
    inv_gap = np.abs(out_p - out).max()
    assert inv_gap > 0.1
    review.add("lab-report", 105, "5. Sine-cosine positional encodings",
               "Positions are needed because attention is order-invariant.", "imprecise",
               f"self-attention is permutation-*equivariant*: permuting the tokens permutes the output rows "
               f"({equi}), while the output itself changes by up to {fixed(inv_gap, 2)}", "positional",
               brief="equivariant, not invariant: outputs move with the tokens")

    x_ln = g.standard_normal((3, 512))
    gamma = g.standard_normal(512)
    per_feature = layer_norm(x_ln, gamma=gamma)
    plain = layer_norm(x_ln)
    best_scalar = (per_feature * plain).sum() / (plain**2).sum()  # least-squares scalar gain
    resid = np.abs(per_feature - best_scalar * plain).max()
    assert layer_norm_param_count(512) == 1024 and resid > 1
    review.add("lab-report", 87, "3B. Normalization and scale-shift",
               r"LayerNorm's $\gamma$ and $\beta$ are two learned scalars.", "wrong",
               f"they are vectors, one entry per feature: {count(layer_norm_param_count(512))} parameters for "
               f"$d = 512$; no scalar gain reproduces a per-feature one (residual {fixed(resid, 2)})",
               "layernorm-ffn",
               brief=f"vectors: {count(layer_norm_param_count(512))} parameters at $d = 512$")

    d, d_ff = 512, 2048
    w1, b1 = 0.02 * g.standard_normal((d, d_ff)), np.zeros(d_ff)
    w2, b2 = 0.02 * g.standard_normal((d_ff, d)), np.zeros(d)
    x_col = g.standard_normal(d)
    try:
        w1 @ x_col  # the column-vector product with these shapes
        shape_error = None
    except ValueError as err:
        shape_error = str(err)
    y_row = feed_forward(x_col[None, :], w1, b1, w2, b2)
    assert shape_error is not None and y_row.shape == (1, d)
    review.add("theory-notes", 211, "5.2 Feed-forward network",
               r"The FFN is $W_2\,\mathrm{ReLU}(W_1 x + b_1) + b_2$ with $W_1$ of shape $d \times d_{ff}$.",
               "imprecise", "the layer is right, the shapes are transposed: $W_1 x$ with $W_1$ of shape "
               "(512, 2048) and $x$ of length 512 is undefined; they belong to the row form $x W_1$",
               "layernorm-ffn", brief="shapes fit $x W_1$, not $W_1 x$ (a shape error)")

    p_mha, p_mha_nobias = mh.param_count(512, 8), mh.param_count(512, 8, bias=False)
    p_ffn = ffn_param_count(512, 2048)
    p_enc = encoder_layer_param_count(512, 8, 2048)
    assert p_mha_nobias == 4 * 512**2 and p_mha == 4 * 512**2 + 4 * 512
    assert p_enc == p_mha + p_ffn + 2 * layer_norm_param_count(512)
    review.add("theory-notes", 136, "3.3 Parameter count",
               r"Multi-head attention has $4d^2$ parameters.", "correct",
               f"exact without biases: {count(p_mha_nobias)} for $d = 512$; `torch.nn.MultiheadAttention` adds "
               f"$4d$ biases, {count(p_mha)} in all", "multihead",
               brief=f"{count(p_mha_nobias)} at $d = 512$ without biases ({count(p_mha)} with)")
    review.add("theory-notes", 293, "8. Failure cases",
               r"One encoder block at $d = 512$ has about 2.4M parameters, a stack of six about 14M.", "wrong",
               f"{count(p_enc)} per block ($d_{{ff}} = 2048$) and {count(6 * p_enc)} for six: the FFN alone has "
               f"{count(p_ffn)}", "blocks",
               brief=f"{count(p_enc)} per block, {count(6 * p_enc)} for six")

    p_dec = decoder_layer_param_count(512, 8, 2048)
    assert p_dec - p_enc == mh.param_count(512, 8) + layer_norm_param_count(512)
    review.add("walkthrough", 94, "Assembling the block",
               "Encoder and decoder blocks alike are attention then FFN, each with a residual and LayerNorm.",
               "wrong", f"that is the encoder layer; a decoder layer adds cross-attention over the encoder's "
               f"output and masks its self-attention: {count(p_dec)} parameters against {count(p_enc)} at "
               "$d = 512$", "blocks",
               brief=f"the decoder adds cross-attention: {count(p_dec)} parameters, not {count(p_enc)}")


def compute_costs(review: Review) -> None:
    """Attention against the FFN in multiply-adds and FLOPs, and the crossover length."""
    d = 4096
    lf = {n: fl.layer_flops(n, d, 32, 4 * d) for n in (2048, 4096)}
    n_scores = fl.crossover_length(d)
    n_sublayer = fl.crossover_length(d, include_projections=True)
    ratio_scores = lf[4096].scores / lf[2048].scores
    ratio_attn = lf[4096].attention / lf[2048].attention
    ratio_ffn = lf[4096].ffn / lf[2048].ffn
    assert lf[2048].scores // FLOPS_PER_MAC == 2 * 2048**2 * d and lf[2048].ffn // FLOPS_PER_MAC == 8 * 2048 * d**2
    assert n_scores == 4 * d and n_sublayer == 2 * d
    assert ratio_scores == 4 and ratio_ffn == 2 and 2 < ratio_attn < 4
    review.add("walkthrough", 82, "Compute cost",
               r"Attention's scores cost $2n^2 d_{model}$ FLOPs and the FFN $8 n d_{model}^2$.", "imprecise",
               f"those are multiply-adds; in FLOPs they are $4n^2 d$ and $16 n d^2$ ({count(lf[2048].scores)} "
               f"and {count(lf[2048].ffn)} at $n = 2048$, $d = 4096$). The crossover $n = 4d$ survives", "flops",
               brief="multiply-adds, not FLOPs: both double; the crossover stands")
    review.add("walkthrough", 84, "Compute cost",
               "Under 16,384 tokens the FFN, not attention, dominates the FLOPs.", "assumption",
               f"true for the $QK^\\top$ and $AV$ products alone; with its four projections the attention "
               f"sub-layer overtakes the FFN at $n = 2d$ = {count(n_sublayer)}", "flops",
               brief=f"scores alone; with its projections attention overtakes at {count(n_sublayer)}")
    review.add("walkthrough", 117, "Worked answers",
               "Going from 2048 to 4096 tokens multiplies attention compute per layer by four.", "assumption",
               f"the score products quadruple (x{count(ratio_scores)}); with its projections the attention "
               f"sub-layer grows x{fixed(ratio_attn, 2)} at $d = 4096$ (the FFN x{count(ratio_ffn)})", "flops",
               brief=f"scores x{count(ratio_scores)}; the whole sub-layer x{fixed(ratio_attn, 2)}")

    per_head = mh.multi_head_flops(2048, 2048, d, 32)["scores"] // 32
    per_head_macs, all_macs = per_head // FLOPS_PER_MAC, 32 * per_head // FLOPS_PER_MAC
    assert per_head_macs == 2048**2 * (d // 32) and all_macs == 2048**2 * d
    review.add("intro-article", 166, "9. Computational complexity",
               r"Forming $QK^T$ from $N \times d_k$ and $d_k \times N$ costs $O(N^2 d_{model})$.", "imprecise",
               f"one head's $QK^T$ costs $N^2 d_k$ multiply-adds ({count(per_head_macs)} for $N = 2048$, "
               f"$d_k = 128$); $N^2 d_{{model}}$ ({count(all_macs)}) is all $h$ heads together", "multihead",
               brief="$N^2 d_k$ per head, $N^2 d_{model}$ for all")


def cache_and_gpus(review: Review) -> None:
    """The KV cache of 200 conversations of a 7B model and the number of GPUs it needs."""
    per_tok = int(sz.mha_kv_cache_bytes_per_token(32, 4096, 32, "fp16"))
    per_conv = sz.kv_cache_bytes(per_tok, 2048)
    cache = sz.kv_cache_bytes(per_tok, 2048, sequences=200)
    weights_round = sz.weight_bytes(7 * 10**9, "fp16")
    assert per_tok == 512 * 2**10 and per_conv == GiB and abs(weights_round / GiB - 13.04) < 0.005
    review.add("walkthrough", 90, "KV-cache memory",
               "The cache: 512 KiB per token, 200 GiB for 200 conversations of 2048.",
               "correct", "all exact (GiB = $2^{30}$ B)", "kv-cache",
               brief=f"{count(per_tok)} B per token, {fixed(cache / GiB, 0)} GiB in all: exact")

    llama = load_config(FIXTURES / "Llama-2-7b-hf.config.json")
    n_params = sz.parameter_count(llama).total
    total = cache + sz.weight_bytes(n_params, "fp16")
    assert n_params == 6_738_415_616 and 212 < total / GiB < 213
    review.add("walkthrough", 90, "KV-cache memory",
               r"The fp16 weights add $7 \times 10^9 \times 2$ bytes, about 13.04 GiB.", "rounding",
               f"right for $7 \\times 10^9$ parameters; Llama 2 7B has {count(n_params)}, whose fp16 weights are "
               f"{fixed(sz.weight_bytes(n_params, 'fp16') / GiB, 2)} GiB; weights + cache "
               f"{fixed(total / GiB, 2)} GiB, not {fixed((cache + weights_round) / GiB, 2)}", "kv-cache",
               brief=f"Llama 2 7B has {count(n_params)} parameters: "
                     f"{fixed(sz.weight_bytes(n_params, 'fp16') / GiB, 2)} GiB")

    gpu_bytes = GPUS["H100-80GB"].memory_bytes
    eng = sz.ServingAssumptions()
    base = dict(users=200, context=2048, gpu_memory_bytes=gpu_bytes, dtype="fp16")
    plan_tp = sz.serving_plan(llama, **base, assumptions=eng)
    plan_all = sz.plan_gpus(llama, **base, memory_fraction=1.0, max_pp=8)
    assert sz.naive_gpu_count(total, gpu_bytes) == 3 and 2 * gpu_bytes < total <= 3 * gpu_bytes
    assert plan_all.gpus == 3 and plan_tp.gpus > plan_all.gpus and 3 not in sz.valid_tp_degrees(32, 32)
    review.add("walkthrough", 90, "KV-cache memory",
               "213 GiB exceeds two 80 GB GPUs, so three are needed.", "imprecise",
               f"it sets GiB against GB: an \"80 GB\" H100 reports {fixed(gpu_bytes / GiB, 2)} GiB, two "
               f"{fixed(2 * gpu_bytes / GiB, 2)} GiB against {fixed(total / GiB, 2)} GiB. Three is the floor with "
               f"every byte usable; a serving engine that keeps {percent(eng.gpu_memory_utilization, 0)} of each "
               f"card needs {plan_tp.gpus}, as 3 does not divide 32 heads", "kv-cache",
               brief=f"three only if every byte is usable; at {percent(eng.gpu_memory_utilization, 0)} "
                     f"utilisation, {plan_tp.gpus}")

    gqa_tok = int(sz.kv_cache_bytes_per_token(32, 8, 128, "fp16"))
    assert per_tok == 4 * gqa_tok
    review.add("walkthrough", 90, "KV-cache memory",
               r"The per-token cache scales with $d_{model}$ whatever the heads.", "assumption",
               "only when every query head has its own K and V. With grouped-query attention (Mistral 7B: 8 KV "
               f"heads of 128) the cache is {gqa_tok // 2**10} KiB per token, {per_tok // gqa_tok}x less",
               "capacity-planner",
               brief=f"not with shared KV heads: "
                     f"{per_tok // gqa_tok}x less")


def check(review: Review) -> None:
    """Run every check of this module into ``review``."""
    scaled_products(review)
    softmax_and_masks(review)
    quadratic_memory(review)
    worked_backward(review)
    sinusoid_distance(review)
    shapes_and_counts(review)
    compute_costs(review)
    cache_and_gpus(review)
