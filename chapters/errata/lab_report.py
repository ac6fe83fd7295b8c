"""The Lab Report, checked claim by claim in the note's order.

Each function below recomputes one claim of the note (or a tight group of claims made on one line) with ``lib``,
PyTorch or sympy, asserts what it finds and records it. Four claims ``worked`` checks are not
repeated here: the variance of ``q.k`` with its scaling to unit variance, the matrix form of the backward pass,
"permutation-invariant" and the "scalar" LayerNorm weights.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np
import sympy as sp
import torch
import torch.nn.functional as F
from matplotlib.mathtext import MathTextParser

import lib.attention as att
import lib.multihead as mh
from lib.blocks import encoder_layer_param_count
from lib.book.fmt import agree, count, fixed
from lib.ffn import feed_forward, ffn_param_count
from lib.norms import layer_norm, layer_norm_steps
from lib.positional import sinusoidal_encoding
from lib.pt.blocks import PostLNDecoderBlock, PostLNEncoderBlock
from lib.pt.ffn import FeedForward
from lib.pt.multihead import MultiHeadAttention
from lib.softmax import softmax, softmax_jacobian_norm

from . import normal_expectation

NOTE = "lab-report"
FORWARD = "1A. Core forward formulations"
STABILITY = "1B. Why divide by √d_k?"
MULTIHEAD = "2. Multi-head attention"
LAYERNORM_STATS = "3A. Layer statistics"
LAYERNORM_AFFINE = "3B. Normalization and scale-shift"
FFN = "4. Feed-forward network"
POSITIONS = "5. Sine-cosine positional encodings"
GRAD_V = "6A. Gradient with respect to V"
GRAD_A = "6B. Gradient with respect to A"
GRAD_S = "6C. Gradient with respect to S"
GRAD_QK = "6D. Gradients with respect to Q and K"
BACKWARD = "6. Backward pass"
FAQ = "7. Common problems (FAQ)"
TOL = 1e-12  # float64 agreement between two ways of computing the same quantity


def tensors(*arrays: np.ndarray) -> list[torch.Tensor]:
    """float64 leaf tensors (with gradients) holding copies of NumPy arrays."""
    return [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]


def attention_inputs(seed: int, n: int = 5, d_k: int = 4, d_v: int = 3) -> tuple[np.ndarray, ...]:
    """Random Q (n, d_k), K (n, d_k), V (n, d_v) and an upstream gradient dL/dO (n, d_v)."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, d_k)), rng.standard_normal((n, d_k)), rng.standard_normal((n, d_v)),
            rng.standard_normal((n, d_v)))


# 1. Scaled dot-product attention


def attention_formula(review) -> None:
    """softmax(Q K^T / sqrt(d_k)) V, written as the note writes it, against PyTorch's fused attention."""
    q, k, v, _ = attention_inputs(1, n=6, d_k=8, d_v=8)
    note = softmax(q @ k.T / np.sqrt(8)) @ v
    fused = F.scaled_dot_product_attention(*(torch.from_numpy(m) for m in (q, k, v)))
    review.add(NOTE, 17, FORWARD,
               r"Attention is $\operatorname{softmax}(QK^\top/\sqrt{d_k})\,V$.",
               "correct",
               rf"the formula (6 tokens, $d_k = 8$, float64) against PyTorch's `scaled_dot_product_attention`: "
               rf"{agree(note, fused, TOL)}", "notation",
               brief="matches PyTorch's fused kernel: max |difference| < #{3}")


def attention_shapes(review) -> None:
    """The shapes of Q, K, V and O; d_v may differ from d_k."""
    q, k, v, _ = attention_inputs(2, n=5, d_k=8, d_v=3)
    o, a = att.attention(q, k, v)
    assert o.shape == (5, 3) and a.shape == (5, 5)
    o_cross, a_cross = att.attention(q[:2], k, v)  # two queries attending over five keys (cross-attention)
    assert o_cross.shape == (2, 3) and a_cross.shape == (2, 5)
    review.add(NOTE, 19, FORWARD,
               r"$Q, K$ are $n \times d_k$; $V$ and the output $n \times d_v$.",
               "correct",
               rf"with $n = 5$, $d_k = 8$, $d_v = 3$, `lib.attention.attention` returns $O$ of shape "
               rf"({count(o.shape[0])}, {count(o.shape[1])}) and weights of shape ({count(a.shape[0])}, "
               rf"{count(a.shape[1])}); $d_v \ne d_k$ is allowed. One $n$ for all three is the self-attention of "
               rf"the note's setting: with 2 queries over the same keys the weights are "
               rf"({count(a_cross.shape[0])}, {count(a_cross.shape[1])})", "notation",
               brief="output (#{3}, #{4}) for $d_v = 3$")


def logits_by_index(review) -> None:
    """S_ij = sum_m Q_im K_jm / sqrt(d_k), summed index by index, against the matrix product."""
    q, k, _, _ = attention_inputs(3, n=5, d_k=8)
    s = np.zeros((5, 5))
    for i in range(5):
        for j in range(5):
            s[i, j] = sum(q[i, m] * k[j, m] for m in range(8)) / np.sqrt(8)
    review.add(NOTE, 23, FORWARD,
               r"Entry $(i, j)$ of the scaled logits is $\sum_m Q_{im}K_{jm}/\sqrt{d_k}$.",
               "correct",
               rf"the sum over $m$, term by term, against $QK^\top/\sqrt{{d_k}}$ ($n = 5$, $d_k = 8$): "
               rf"{agree(s, q @ k.T / np.sqrt(8), TOL)}. The note's $S$ already contains the scale: it is the "
               rf"book's $S'$", "notation", brief="term-by-term sum equals the matrix form: max |difference| < #{2}")


def softmax_rows(review) -> None:
    """A_ij = exp(S_ij) / sum_p exp(S_ip): a probability distribution in every row."""
    q, k, _, _ = attention_inputs(4, n=6, d_k=8)
    s = q @ k.T / np.sqrt(8)
    a = np.exp(s) / np.exp(s).sum(axis=1, keepdims=True)  # the note's formula, as written
    assert ((a > 0) & (a < 1)).all()
    review.add(NOTE, 27, FORWARD,
               "A row-wise softmax gives the attention probabilities.",
               "correct",
               rf"the formula against the max-shifted `lib.softmax.softmax`: {agree(a, softmax(s), TOL)}; every "
               rf"row sums to 1 ({agree(a.sum(axis=1), np.ones(6), TOL, 'max |row sum - 1|')}) and every weight "
               rf"lies strictly between 0 and 1", "softmax",
               brief="equals the shifted softmax (< #{0})")


def weighted_sum_of_values(review) -> None:
    """O = A V, O_ij = sum_q A_iq V_qj: each output row is a weighted average of the value rows."""
    q, k, v, _ = attention_inputs(5, n=6, d_k=4, d_v=3)
    o, a = att.attention(q, k, v)
    o_sum = np.zeros((6, 3))
    for i in range(6):
        for j in range(3):
            o_sum[i, j] = sum(a[i, p] * v[p, j] for p in range(6))
    inside = (o >= v.min(axis=0)) & (o <= v.max(axis=0))
    assert inside.all()
    review.add(NOTE, 31, FORWARD,
               r"Each output row $O_i = \sum_q A_{iq}V_q$ is a weighted average of value rows.",
               "correct",
               rf"the index sum against `lib.attention.attention`: {agree(o_sum, o, TOL)}. The weights of a row "
               rf"are non-negative and sum to 1, so every output lies between the smallest and largest value of its "
               rf"column (all {count(inside.size)} entries checked)", "notation",
               brief="equals lib's attention (< #{0})")


def saturation_without_scaling(review) -> None:
    """Unscaled logits grow like sqrt(d_k): at extreme widths most softmax rows saturate and pass no gradient."""
    rng = np.random.default_rng(6)
    n_queries, n_keys = 256, 1024

    found = {}
    for d_k in (64, 4096):
        q, k = rng.standard_normal((n_queries, d_k)), rng.standard_normal((n_keys, d_k))
        _, raw = att.attention(q, k, np.zeros((n_keys, 1)), scale=1.0)
        _, scaled = att.attention(q, k, np.zeros((n_keys, 1)))
        jac, jac_scaled = softmax_jacobian_norm(raw), softmax_jacobian_norm(scaled)
        found[d_k] = dict(
            saturated=int((raw.max(axis=1) > 0.99).sum()), saturated_scaled=int((scaled.max(axis=1) > 0.99).sum()),
            dead=int((jac < 1e-6).sum()), dead_scaled=int((jac_scaled < 1e-6).sum()),
            jac=jac.mean(), jac_scaled=jac_scaled.mean())
    wide, usual = found[4096], found[64]
    assert wide["saturated"] > 0.6 * n_queries and wide["dead"] > 0.3 * n_queries
    assert wide["saturated_scaled"] == wide["dead_scaled"] == usual["dead"] == 0
    assert abs(usual["jac_scaled"] / np.sqrt(np.e / n_keys) - 1) < 0.03  # ||J|| ~ sqrt(e/n) for unit variance
    assert 0.2 < usual["jac"] < 0.3 and usual["jac"] > 3 * usual["jac_scaled"]  # larger unscaled, not smaller
    review.add(NOTE, 35, STABILITY,
               r"Without $\sqrt{d_k}$, wide heads push the softmax into saturation and kill its gradient.",
               "correct",
               rf"independent standard normal $q, k$, {n_queries} queries over {n_keys} keys. At $d_k = 4096$, "
               rf"{count(wide['saturated'])} of {n_queries} unscaled rows put more than 0.99 on one key and "
               rf"{count(wide['dead'])} have a softmax Jacobian of norm below $10^{{-6}}$; with the scaling no "
               rf"row does either. The claim needs the width to be extreme: at "
               rf"$d_k = 64$ {count(usual['saturated'])} rows saturate and the mean Jacobian norm is larger unscaled "
               rf"({fixed(usual['jac'], 2)}) than scaled ({fixed(usual['jac_scaled'], 3)})", "scaling",
               brief="at $d_k$ = #{2}, #{3} of #{4} rows saturate; at $d_k$ = #{9} only #{10}")


def mean_of_one_term(review) -> None:
    """E[q_i k_i] = E[q_i] E[k_i] = 0 for independent zero-mean components."""
    mu_q, mu_k = sp.symbols("mu_q mu_k", real=True)
    q, k = sp.symbols("q k", real=True)
    mean = sp.simplify(normal_expectation(q * k, {q: (mu_q, 1), k: (mu_k, 1)}))
    assert sp.simplify(mean - mu_q * mu_k) == 0 and mean.subs({mu_q: 0, mu_k: 0}) == 0
    review.add(NOTE, 43, STABILITY,
               "Independence gives $E[q_i k_i] = E[q_i]E[k_i] = 0$.",
               "correct",
               rf"sympy, for independent $q_i, k_i$ with means $\mu_q, \mu_k$: $E[q_i k_i] = {sp.latex(mean)}$, "
               rf"which is 0 for the note's zero means", "scaling",
               brief=r"sympy: $E[q_i k_i] = \mu_q\mu_k$, zero for zero means")


def variance_of_one_term(review) -> None:
    """Var(q_i k_i) = E[q_i^2] E[k_i^2] - E[q_i k_i]^2, which is 1 for zero means and unit variances."""
    mu_q, mu_k = sp.symbols("mu_q mu_k", real=True)
    sigma_q, sigma_k = sp.symbols("sigma_q sigma_k", positive=True)
    q, k = sp.symbols("q k", real=True)
    normals = {q: (mu_q, sigma_q), k: (mu_k, sigma_k)}
    var = sp.expand(normal_expectation((q * k) ** 2, normals) - normal_expectation(q * k, normals) ** 2)
    note_chain = (sigma_q**2 + mu_q**2) * (sigma_k**2 + mu_k**2) - (mu_q * mu_k) ** 2  # E[q^2] E[k^2] - E[qk]^2
    assert sp.simplify(var - note_chain) == 0
    at_unit = var.subs({mu_q: 0, mu_k: 0, sigma_q: 1, sigma_k: 1})
    assert at_unit == 1
    review.add(NOTE, 45, STABILITY,
               "Each product $q_i k_i$ has variance 1 under zero means and unit variances.",
               "correct",
               rf"sympy, for independent $q_i, k_i$ of any means and variances: $\operatorname{{Var}}(q_i k_i) = "
               rf"{sp.latex(var)}$, which is $E[q_i^2]E[k_i^2] - E[q_i k_i]^2$; with means 0 and variances 1 it is "
               rf"{count(int(at_unit))}", "scaling", brief="sympy: the general variance formula reduces to #{11}")


def terms_are_independent(review) -> None:
    """The d_k terms q_i k_i are independent (so uncorrelated), which is what lets their variances add."""
    q1, k1, q2, k2 = sp.symbols("q_1 k_1 q_2 k_2", real=True)
    normals = {x: (0, 1) for x in (q1, k1, q2, k2)}

    def e(expr):
        return normal_expectation(expr, normals)

    cov = sp.simplify(e(q1 * k1 * q2 * k2) - e(q1 * k1) * e(q2 * k2))
    two_terms = sp.simplify(e((q1 * k1 + q2 * k2) ** 2) - e(q1 * k1 + q2 * k2) ** 2)
    assert cov == 0 and two_terms == 2
    review.add(NOTE, 47, STABILITY,
               "The products $q_i k_i$ are independent, so their variances add.",
               "correct",
               rf"sympy: $\operatorname{{Cov}}(q_1 k_1, q_2 k_2) = {sp.latex(cov)}$ and "
               rf"$\operatorname{{Var}}(q_1 k_1 + q_2 k_2) = {sp.latex(two_terms)}$, the sum of the two "
               rf"variances (uncorrelated terms would suffice)", "scaling",
               brief="sympy: covariance #{4}, variance of a two-term sum #{7}")


def mean_of_the_sum(review) -> None:
    """E[q . k] = sum_i E[q_i k_i] = 0."""
    q, k = sp.symbols("q_0:3", real=True), sp.symbols("k_0:3", real=True)
    mean = sp.simplify(normal_expectation(sum(qi * ki for qi, ki in zip(q, k, strict=True)),
                                          {x: (0, 1) for x in q + k}))
    assert mean == 0
    review.add(NOTE, 49, STABILITY,
               r"The dot product $q \cdot k$ has mean 0.",
               "correct",
               rf"by linearity of expectation; sympy for $d_k = 3$: $E[q \cdot k] = {sp.latex(mean)}$", "scaling",
               brief="linearity of expectation; sympy confirms for $d_k$ = #{0}")


def scale_is_necessary(review) -> None:
    """'Mathematically necessary': 1/sqrt(d_k) is the one constant giving unit variance, but not a necessity."""
    c, d_k = sp.symbols("c d_k", positive=True)
    unit_variance = sp.solve(sp.Eq(c**2 * d_k, 1), c)  # Var(c q.k) = c^2 d_k under the note's assumptions
    assert unit_variance == [1 / sp.sqrt(d_k)]
    rng = np.random.default_rng(7)
    x = rng.standard_normal((6, 32))
    w_q, w_k, w_v = (rng.standard_normal((32, 64)) / np.sqrt(32) for _ in range(3))
    scaled, _ = att.attention(x @ w_q, x @ w_k, x @ w_v)  # the note's 1/sqrt(64)
    folded, _ = att.attention(x @ (w_q / np.sqrt(64)), x @ w_k, x @ w_v, scale=1.0)  # no scale; W_Q made smaller
    review.add(NOTE, 57, STABILITY,
               r"The variance argument makes $\sqrt{d_k}$ mathematically required.",
               "wrong",
               rf"it proves that under the stated assumptions $\operatorname{{Var}}(c\, q \cdot k) = c^2 d_k$ is 1 "
               rf"only for $c = {sp.latex(unit_variance[0])}$ (sympy): the scale that gives unit variance, not a "
               rf"necessity. Attention with no scale and $W_Q$ divided by $\sqrt{{d_k}}$ computes the same outputs "
               rf"($d_k = 64$: {agree(folded, scaled, TOL)}); T5 {{cite:p}}`raffel2020exploring` leaves the "
               rf"factor out and initialises its query weights smaller instead", "scaling",
               brief="folding it into $W_Q$ gives the same outputs")


# 2. Multi-head attention


def multihead_formula(review) -> None:
    """Concat(head_1..head_h) W^O with head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V), against PyTorch."""
    d_model, h = 16, 4
    d_k = d_model // h
    rng = np.random.default_rng(8)
    params = mh.init_params(d_model, h, bias=False, rng=rng)
    x = rng.standard_normal((5, d_model))
    heads = []
    for i in range(h):
        cols = slice(i * d_k, (i + 1) * d_k)  # W_i is the i-th block of d_k columns
        head, _ = att.attention(x @ params.w_q[:, cols], x @ params.w_k[:, cols], x @ params.w_v[:, cols])
        heads.append(head)
    note = np.concatenate(heads, axis=1) @ params.w_o
    ref = torch.nn.MultiheadAttention(d_model, h, bias=False, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.from_numpy(np.concatenate([params.w_q, params.w_k, params.w_v], axis=1).T))
        ref.out_proj.weight.copy_(torch.from_numpy(params.w_o.T))
        xt = torch.from_numpy(x)[None]
        out_torch, _ = ref(xt, xt, xt, need_weights=False)
    review.add(NOTE, 63, MULTIHEAD,
               "Multi-head attention concatenates $h$ heads, each attention "
               "on its own projections, then applies $W^O$.",
               "correct",
               rf"the formula head by head ($d_{{model}} = 16$, $h = 4$) against `torch.nn.MultiheadAttention` with "
               rf"the same weights: {agree(note, out_torch[0], TOL)}", "multihead",
               brief="matches `torch.nn.MultiheadAttention`: max |difference| < #{2}")


def multihead_shapes(review) -> None:
    """W_i^Q, W_i^K: d_model x d_k; W_i^V: d_model x d_v; W^O: h d_v x d_model."""
    d_model, h, d_k, d_v, n = 12, 3, 5, 2, 4  # d_k and d_v chosen unequal, and neither d_model / h
    rng = np.random.default_rng(9)
    x = rng.standard_normal((n, d_model))
    w_q, w_k = rng.standard_normal((h, d_model, d_k)), rng.standard_normal((h, d_model, d_k))
    w_v, w_o = rng.standard_normal((h, d_model, d_v)), rng.standard_normal((h * d_v, d_model))
    heads = [att.attention(x @ w_q[i], x @ w_k[i], x @ w_v[i])[0] for i in range(h)]
    concat = np.concatenate(heads, axis=1)
    out = concat @ w_o
    assert concat.shape == (n, h * d_v) and out.shape == (n, d_model)
    review.add(NOTE, 70, MULTIHEAD,
               r"$W_i^V$ is $d_{model} \times d_v$ and $W^O$ is $h d_v \times d_{model}$.",
               "correct",
               rf"the products chain for $d_{{model}} = 12$, $h = 3$, $d_k = 5$, $d_v = 2$: each head is "
               rf"({count(heads[0].shape[0])}, {count(heads[0].shape[1])}), their concatenation "
               rf"({count(concat.shape[0])}, {count(concat.shape[1])}) and the output ({count(out.shape[0])}, "
               rf"{count(out.shape[1])}) for {n} tokens", "multihead",
               brief=r"with $d_k \ne d_v$: heads (#{4}, #{5}), output (#{8}, #{9})")


# 3. Residuals and LayerNorm


def layernorm_per_token(review) -> None:
    """LayerNorm normalises each token over its features, independently of the other tokens."""
    rng = np.random.default_rng(10)
    x = 3 + 2 * rng.standard_normal((4, 8))
    y = layer_norm(x)
    x_changed = x.copy()
    x_changed[0] *= 100  # change one token only
    y_changed = layer_norm(x_changed)
    review.add(NOTE, 77, LAYERNORM_STATS,
               "LayerNorm normalises each token over its features, independently of other tokens.",
               "correct",
               rf"`lib.norms.layer_norm` on 4 tokens of width 8: each output row has mean 0 "
               rf"({agree(y.mean(axis=1), np.zeros(4), TOL, 'max |mean|')}); scaling one token by 100 leaves the "
               rf"other three outputs unchanged ({agree(y_changed[1:], y[1:], TOL)})", "layernorm-ffn",
               brief="rescaling one token leaves the others unchanged")


def layernorm_statistics(review) -> None:
    """mu = mean of x, sigma^2 = (1/d) sum (x_j - mu)^2: the biased variance, as torch.nn.LayerNorm uses."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((3, 8))
    steps = layer_norm_steps(x)
    mu = x.sum(axis=1, keepdims=True) / 8
    var = ((x - mu) ** 2).sum(axis=1, keepdims=True) / 8  # the note's 1/d
    torch_y = F.layer_norm(torch.from_numpy(x), (8,), eps=1e-5)
    unbiased_hat = (x - mu) / np.sqrt(x.var(axis=1, ddof=1, keepdims=True) + 1e-5)
    shrink = np.median(unbiased_hat / steps.x_hat)
    assert abs(shrink - np.sqrt(7 / 8)) < 1e-4
    review.add(NOTE, 83, LAYERNORM_STATS,
               "LayerNorm's mean and variance average over the $d$ features with $1/d$.",
               "correct",
               rf"they are `lib.norms`' statistics "
               rf"({agree(np.hstack([mu, var]), np.hstack([steps.mu, steps.var]), TOL)}) and give PyTorch's "
               rf"`layer_norm` ({agree(steps.y, torch_y, TOL)}): the biased $1/d$. An unbiased $1/(d-1)$ would "
               rf"shrink every $\hat x$ by $\sqrt{{(d-1)/d}}$ = {fixed(np.sqrt(7 / 8), 4)} for $d = 8$",
               "layernorm-ffn", brief="matches PyTorch (< #{1}); $1/(d-1)$ would scale outputs by #{6}")


def layernorm_affine(review) -> None:
    """x_hat = (x - mu) / sqrt(sigma^2 + eps), y_j = gamma_j x_hat_j + beta_j, against PyTorch."""
    rng = np.random.default_rng(12)
    x, gamma, beta = rng.standard_normal((3, 8)), rng.standard_normal(8), rng.standard_normal(8)
    mu, var = x.mean(axis=1, keepdims=True), x.var(axis=1, keepdims=True)
    note = gamma * (x - mu) / np.sqrt(var + 1e-5) + beta
    ref = F.layer_norm(torch.from_numpy(x), (8,), torch.from_numpy(gamma), torch.from_numpy(beta), eps=1e-5)
    review.add(NOTE, 89, LAYERNORM_AFFINE,
               r"Normalise with $\sqrt{\sigma^2 + \epsilon}$, then scale and shift per feature.",
               "correct",
               rf"the formulas with $\epsilon = 10^{{-5}}$ inside the square root against `torch.nn.functional."
               rf"layer_norm` with per-feature weight and bias ($d = 8$): {agree(note, ref, TOL)}", "layernorm-ffn",
               brief="matches PyTorch's `layer_norm`: max |difference| < #{3}")


def layernorm_epsilon(review) -> None:
    """eps keeps a constant token (sigma^2 = 0) finite: without it, 0 / 0."""
    x = np.full((1, 4), 3.0)  # a constant token
    with_eps = layer_norm(x)
    mu, var = x.mean(), x.var()
    with np.errstate(invalid="ignore"):
        without_eps = (x - mu) / np.sqrt(var)
    assert var == 0 and np.isnan(without_eps).all()
    review.add(NOTE, 93, LAYERNORM_AFFINE,
               r"The $\epsilon$ in LayerNorm guards against dividing by zero.",
               "correct",
               rf"a constant token has $\sigma^2 = 0$: with $\epsilon = 10^{{-5}}$ `lib.norms.layer_norm` returns "
               rf"$\hat x = 0$ ({agree(with_eps, np.zeros((1, 4)), 0, exact=True)}), without it every entry is "
               rf"$0/0$ = NaN", "layernorm-ffn", brief=r"a constant token gives 0 with $\epsilon$, NaN without")


# 4. Feed-forward network


def ffn_inputs(seed: int) -> tuple[np.ndarray, ...]:
    """Random FFN weights (d_model = 8, d_ff = 32) and 6 tokens: W1, b1, W2, b2, x."""
    rng = np.random.default_rng(seed)
    w1, b1 = rng.standard_normal((8, 32)), rng.standard_normal(32)
    w2, b2 = rng.standard_normal((32, 8)), rng.standard_normal(8)
    return w1, b1, w2, b2, rng.standard_normal((6, 8))


def ffn_position_wise(review) -> None:
    """The FFN acts on every token separately: two linear maps with a ReLU between them."""
    w1, b1, w2, b2, x = ffn_inputs(13)
    together = feed_forward(x, w1, b1, w2, b2)
    one_by_one = np.stack([feed_forward(token, w1, b1, w2, b2) for token in x])
    review.add(NOTE, 97, FFN,
               "The feed-forward block acts on each token separately.",
               "correct",
               rf"`lib.ffn.feed_forward` on 6 tokens at once against token by token: "
               rf"{agree(together, one_by_one, TOL)}", "layernorm-ffn",
               brief="all tokens at once equals one at a time: < #{1}")


def ffn_after_every_attention(review) -> None:
    """'Each attention layer is followed by' an FFN: true of encoder layers, not of the original decoder."""

    def count_modules(block: torch.nn.Module, kind: type) -> int:
        return sum(isinstance(m, kind) for m in block.modules())

    encoder, decoder = PostLNEncoderBlock(16, 4, 32), PostLNDecoderBlock(16, 4, 32)
    per_layer = {name: (count_modules(b, MultiHeadAttention), count_modules(b, FeedForward))
                 for name, b in (("encoder", encoder), ("decoder", decoder))}
    assert per_layer == {"encoder": (1, 1), "decoder": (2, 1)}
    review.add(NOTE, 97, FFN,
               "Each attention layer is followed by a feed-forward block.",
               "assumption",
               rf"true of an encoder layer and of decoder-only models ({count(per_layer['encoder'][0])} attention "
               rf"sub-layer per FFN). The original decoder layer has {count(per_layer['decoder'][0])} attention "
               rf"sub-layers and {count(per_layer['decoder'][1])} FFN: masked self-attention is followed by "
               rf"cross-attention (module count of `lib.pt.blocks.PostLNDecoderBlock`)", "blocks",
               brief="the original decoder has #{1} attention sub-layers per FFN")


def ffn_formula(review) -> None:
    """FFN(x) = max(0, x W1 + b1) W2 + b2, against PyTorch's linear layers."""
    w1, b1, w2, b2, x = ffn_inputs(14)
    note = np.maximum(0, x @ w1 + b1) @ w2 + b2
    t = [torch.from_numpy(m) for m in (x, w1, b1, w2, b2)]
    ref = F.linear(F.relu(F.linear(t[0], t[1].T, t[2])), t[3].T, t[4])  # torch stores W as (out, in)
    review.add(NOTE, 99, FFN,
               r"$\operatorname{FFN}(x) = \max(0, xW_1 + b_1)W_2 + b_2$.",
               "correct",
               rf"the formula against PyTorch's `linear` and `relu` ($d_{{model}} = 8$, $d_{{ff}} = 32$): "
               rf"{agree(note, ref, TOL)}", "layernorm-ffn", brief="matches PyTorch's `linear` and `relu`: < #{2}")


def ffn_shapes(review) -> None:
    """W1: d_model x d_ff and W2: d_ff x d_model, for tokens as row vectors."""
    rng = np.random.default_rng(15)
    w1, w2 = rng.standard_normal((8, 32)), rng.standard_normal((32, 8))
    x = rng.standard_normal((6, 8))
    out = feed_forward(x, w1, np.zeros(32), w2, np.zeros(8))
    try:
        feed_forward(x, w1.T, np.zeros(32), w2.T, np.zeros(8))
        refused = False
    except ValueError:
        refused = True
    assert out.shape == (6, 8) and refused
    n_params = ffn_param_count(512, 2048)
    assert n_params == 2 * 512 * 2048 + 2048 + 512
    review.add(NOTE, 101, FFN,
               r"$W_1$ is $d_{model} \times d_{ff}$ and $W_2$ is $d_{ff} \times d_{model}$.",
               "correct",
               rf"the shapes `lib.ffn.feed_forward` needs for row-vector tokens (it refuses the transposes); the "
               rf"output keeps the width, ({count(out.shape[0])}, {count(out.shape[1])}) for 6 tokens of width 8. "
               rf"For $d_{{model}} = 512$, $d_{{ff}} = 2048$ the block has {count(n_params)} parameters with biases",
               "layernorm-ffn", brief="the row-vector shapes; #{6} parameters at $d_{model}$ = #{4}")


# 5. Positional encodings


def sinusoidal_formula(review) -> None:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...), entry by entry, against lib."""
    n, d_model = 50, 16
    pe = np.zeros((n, d_model))
    for pos in range(n):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            pe[pos, 2 * i], pe[pos, 2 * i + 1] = np.sin(angle), np.cos(angle)
    review.add(NOTE, 107, POSITIONS,
               "Sinusoidal encoding: sine in even columns, cosine in odd, at frequency $10000^{-2i/d_{model}}$.",
               "correct",
               rf"the two formulas, entry by entry for {n} positions and $d_{{model}} = {d_model}$, against "
               rf"`lib.positional.sinusoidal_encoding`: {agree(pe, sinusoidal_encoding(n, d_model), TOL)}",
               "positional", brief="entry by entry against lib: max |difference| < #{2}")


# 6. Backward pass, index by index (the matrix forms are checked in ``worked``)


def grad_v_by_index(review) -> None:
    """dL/dV_kj = sum_i dL/dO_ij A_ik, summed index by index, against autograd."""
    q, k, v, d_out = attention_inputs(16)
    qt, kt, vt = tensors(q, k, v)
    a = torch.softmax(qt @ kt.T / 2.0, dim=-1)  # sqrt(d_k) = 2
    (a @ vt).backward(torch.from_numpy(d_out))
    a = a.detach().numpy()
    d_v = np.zeros_like(v)
    for kk in range(5):
        for j in range(3):
            d_v[kk, j] = sum(d_out[i, j] * a[i, kk] for i in range(5))
    review.add(NOTE, 119, GRAD_V,
               r"$\partial\mathcal{L}/\partial V_{kj} = \sum_i (\partial\mathcal{L}/\partial O_{ij}) A_{ik}$.",
               "correct",
               rf"the index sum against `torch.autograd` in float64 ($n = 5$, $d_k = 4$, $d_v = 3$): "
               rf"{agree(d_v, vt.grad, TOL)}", "attention-backward", brief="against autograd: max |difference| < #{4}")


def grad_a_by_index(review) -> None:
    """dL/dA_ik = sum_j dL/dO_ij V_kj, summed index by index, against autograd."""
    q, k, v, d_out = attention_inputs(17)
    qt, kt, vt = tensors(q, k, v)
    a = torch.softmax(qt @ kt.T / 2.0, dim=-1)
    a.retain_grad()
    (a @ vt).backward(torch.from_numpy(d_out))
    d_a = np.zeros((5, 5))
    for i in range(5):
        for kk in range(5):
            d_a[i, kk] = sum(d_out[i, j] * v[kk, j] for j in range(3))
    review.add(NOTE, 129, GRAD_A,
               r"$\partial\mathcal{L}/\partial A_{ik} = \sum_j (\partial\mathcal{L}/\partial O_{ij}) V_{kj}$.",
               "correct",
               rf"the index sum against `torch.autograd` in float64: {agree(d_a, a.grad, TOL)}", "attention-backward",
               brief="against autograd: max |difference| < #{1}")


def softmax_jacobian(review) -> None:
    """dA_ij/dS_ik = A_ij (delta_jk - A_ik) within a row; rows do not depend on each other."""
    q, k, _, _ = attention_inputs(18)
    s = torch.from_numpy(q @ k.T / 2.0)
    jac = torch.autograd.functional.jacobian(lambda logits: torch.softmax(logits, dim=-1), s)  # [i, j, l, k]
    a = softmax(s.numpy())
    same_row = np.zeros((5, 5, 5))
    for i in range(5):
        for j in range(5):
            for kk in range(5):
                same_row[i, j, kk] = a[i, j] * ((j == kk) - a[i, kk])
    within = jac[torch.arange(5), :, torch.arange(5), :]  # l = i: (i, j, k)
    off_row = ~torch.eye(5, dtype=torch.bool)  # l != i
    across = jac.permute(0, 2, 1, 3)[off_row]  # (pairs i != l, j, k)
    review.add(NOTE, 139, GRAD_S,
               r"The softmax Jacobian of a row is $A_{ij}(\delta_{jk} - A_{ik})$.",
               "correct",
               rf"against the full Jacobian from `torch.autograd` ($5 \times 5$ logits): within a row "
               rf"{agree(same_row, within, TOL)}; across rows every entry is 0 "
               rf"({agree(across, torch.zeros_like(across), 0, 'max |entry|', exact=True)})", "attention-backward",
               brief="against autograd's Jacobian: < #{2}; zero across rows")


def grad_s_by_index(review) -> None:
    """dL/dS_ik = dL/dA_ik A_ik - A_ik sum_j dL/dA_ij A_ij, against autograd."""
    q, k, v, d_out = attention_inputs(19)
    s = torch.tensor(q @ k.T / 2.0, requires_grad=True)
    a = torch.softmax(s, dim=-1)
    a.retain_grad()
    (a @ torch.from_numpy(v)).backward(torch.from_numpy(d_out))
    a_np, d_a = a.detach().numpy(), a.grad.numpy()
    d_s = np.zeros((5, 5))
    for i in range(5):
        row_term = sum(d_a[i, j] * a_np[i, j] for j in range(5))
        for kk in range(5):
            d_s[i, kk] = d_a[i, kk] * a_np[i, kk] - a_np[i, kk] * row_term
    review.add(NOTE, 143, GRAD_S,
               r"The chain rule through the softmax gives $A \odot "
               r"(\partial\mathcal{L}/\partial A - \text{row sums})$.",
               "correct",
               rf"the index form against `torch.autograd` in float64: {agree(d_s, s.grad, TOL)}", "attention-backward",
               brief="against autograd: max |difference| < #{1}")


def logits_differential(review) -> None:
    """dS = (dQ K^T + Q dK^T) / sqrt(d_k): the directional derivative of S, from torch.func.jvp."""
    q, k, _, _ = attention_inputs(20)
    dq, dk, _, _ = attention_inputs(21)
    t = [torch.from_numpy(m) for m in (q, k, dq, dk)]
    _, jvp = torch.func.jvp(lambda q_, k_: q_ @ k_.T / 2.0, (t[0], t[1]), (t[2], t[3]))
    note = (dq @ k.T + q @ dk.T) / 2.0
    review.add(NOTE, 155, GRAD_QK,
               r"$dS = ((dQ)K^\top + Q(dK)^\top)/\sqrt{d_k}$.",
               "correct",
               rf"against the directional derivative from `torch.func.jvp` ($d_k = 4$): {agree(note, jvp, TOL)}",
               "attention-backward", brief="against a forward-mode derivative: < #{1}")


def all_equations_derived(review) -> None:
    """'All' forward and backward equations of self-attention: the gradients stop at Q, K and V."""
    rng = np.random.default_rng(22)
    x = rng.standard_normal((5, 8))
    w_q, w_k, w_v = (rng.standard_normal((8, 4)) for _ in range(3))
    d_out = rng.standard_normal((5, 4))
    xt, wqt, wkt, wvt = tensors(x, w_q, w_k, w_v)
    out = torch.softmax((xt @ wqt) @ (xt @ wkt).T / 2.0, dim=-1) @ (xt @ wvt)
    out.backward(torch.from_numpy(d_out))
    d_q, d_k, d_v = att.attention_backward(x @ w_q, x @ w_k, x @ w_v, d_out)  # the note's section 6
    d_x = d_q @ w_q.T + d_k @ w_k.T + d_v @ w_v.T  # one X feeds three projections: three paths add
    d_wq = x.T @ d_q
    p_block = encoder_layer_param_count(512, 8, 2048)
    p_attention = mh.param_count(512, 8)
    review.add(NOTE, 163, BACKWARD,
               "Gradients for $Q$, $K$, $V$ complete self-attention's backward pass.",
               "imprecise",
               rf"complete for the scaled dot-product module it set out to differentiate, but the gradients stop "
               rf"at $Q, K, V$. Self-attention needs two more steps: $\partial\mathcal{{L}}/\partial W_Q = "
               rf"X^\top\,\partial\mathcal{{L}}/\partial Q$ ({agree(d_wq, wqt.grad, TOL)} against autograd) "
               rf"and, as one $X$ feeds all three projections, $\partial\mathcal{{L}}/\partial X$ is the sum of "
               rf"three paths, $\frac{{\partial\mathcal{{L}}}}{{\partial Q}}W_Q^\top + "
               rf"\frac{{\partial\mathcal{{L}}}}{{\partial K}}W_K^\top + "
               rf"\frac{{\partial\mathcal{{L}}}}{{\partial V}}W_V^\top$ ({agree(d_x, xt.grad, TOL)}). None of an "
               rf"encoder layer's {count(p_block)} parameters ($d = 512$, $d_{{ff}} = 2048$; {count(p_attention)} "
               rf"of them in the attention projections) gets its gradient in the note", "attention-backward",
               brief="missing: $W_Q, W_K, W_V$ and the paths into $X$")


# 7. FAQ on typesetting, checked with matplotlib's mathtext (a subset of TeX, no TeX installation needed)


def typeset(tex: str) -> list[tuple[str, bool, float]]:
    """(character, italic?, font size) of each glyph that matplotlib's mathtext sets for ``$tex$``."""
    style = {"mathtext.fontset": "dejavusans", "mathtext.default": "it", "font.size": 10}  # whatever a chapter set
    with matplotlib.rc_context(style):
        parsed = MathTextParser("path").parse(f"${tex}$")
    return [(chr(code), "Oblique" in Path(font.fname).name, size) for font, size, code, *_ in parsed.glyphs]


def faq_italics(review) -> None:
    """Letters in math mode are set as italic variables; \\mathrm and \\text set words upright."""
    plain, roman, text = (sum(is_italic for _, is_italic, _ in typeset(tex))
                          for tex in ("softmax", r"\mathrm{softmax}", r"\text{Attention}"))
    assert (plain, roman, text) == (7, 0, 0)
    review.add(NOTE, 170, FAQ,
               r"TeX sets a run of letters as an italic product; words need `\mathrm`.",
               "correct",
               rf"in matplotlib's mathtext, {count(plain)} of the 7 letters of `softmax` are italic, "
               rf"{count(roman)} of `\mathrm{{softmax}}` and "
               rf"{count(text)} of the 9 of `\text{{Attention}}`", "notation",
               brief=r"mathtext: #{0} of #{1} letters of `softmax` italic, #{2} with `\mathrm`")


def faq_subscripts(review) -> None:
    """_ and ^ take one token; braces group several. The note's own section 2 shows the rule at work."""

    def lowered(tex: str) -> int:
        """How many letters after the first glyph are set smaller than it (as a subscript)."""
        glyphs = typeset(tex)
        return sum(size < glyphs[0][2] for _, _, size in glyphs[1:])

    one, braced, command = lowered("W_attention"), lowered("W_{attention}"), lowered(r"d_\text{model}")
    assert (one, braced, command) == (1, 9, 5)
    as_typed = typeset(r"\mathbf{W}i^Q \in \mathbb{R}^{d{\text{model}} \times d_k}")  # section 2 as the note types it
    w_size, i_size = as_typed[0][2], as_typed[1][2]
    d_size, model_size = as_typed[5][2], as_typed[6][2]
    assert as_typed[1][0] == "i" and as_typed[5][0] == "d" and as_typed[6][0] == "m"
    assert i_size == w_size and model_size == d_size
    review.add(NOTE, 171, FAQ,
               "A sub- or superscript takes one token; braces make it take a whole word.",
               "correct",
               rf"mathtext lowers {count(one)} of the 9 letters of `W_attention` and {count(braced)} of "
               rf"`W_{{attention}}`. The unit is one token, so a command with its argument counts as one: "
               rf"`d_\text{{model}}` lowers all {count(command)}. The note's own section 2, as its text has it "
               rf"(`\mathbf{{W}}i^Q`, `d{{\text{{model}}}}`), sets $i$ at size {fixed(i_size, 1)} like $W$ and "
               rf"'model' at {fixed(model_size, 1)} like $d$: both subscripts are lost", "notation",
               brief="`W_attention` lowers #{0} of #{1} letters")


def check(review) -> None:
    """Every checkable claim of the Lab Report, in the note's order."""
    attention_formula(review)
    attention_shapes(review)
    logits_by_index(review)
    softmax_rows(review)
    weighted_sum_of_values(review)
    saturation_without_scaling(review)
    mean_of_one_term(review)
    variance_of_one_term(review)
    terms_are_independent(review)
    mean_of_the_sum(review)
    scale_is_necessary(review)
    multihead_formula(review)
    multihead_shapes(review)
    layernorm_per_token(review)
    layernorm_statistics(review)
    layernorm_affine(review)
    layernorm_epsilon(review)
    ffn_position_wise(review)
    ffn_after_every_attention(review)
    ffn_formula(review)
    ffn_shapes(review)
    sinusoidal_formula(review)
    grad_v_by_index(review)
    grad_a_by_index(review)
    softmax_jacobian(review)
    grad_s_by_index(review)
    logits_differential(review)
    all_equations_derived(review)
    faq_italics(review)
    faq_subscripts(review)
