"""Pitfalls of the attention primitive: softmax and masking, the sqrt(d_k) scale, the backward pass, heads."""

from __future__ import annotations

import json
from fractions import Fraction
from functools import cache

import numpy as np
import sympy as sp
import torch

import lib.attention as att
import lib.multihead as mh
from lib.book.fmt import agree, count, fixed, percent
from lib.constants import FLOPS_PER_MAC
from lib.softmax import masked_softmax, softmax, softmax_jacobian_norm

from . import FIXTURES, TOL, pitfall, sample_dot_products

ONE_HOT = 0.99  # a row whose largest weight exceeds this counts as one-hot
SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


# Softmax and masking


@pitfall("softmax")
def huge_logits() -> dict[str, str]:
    """Logits near 1000 taken as typical: under Var(q.k) = d_k they lie 62.5 to 125 standard deviations out."""
    sds = {d_k: 1000 / np.sqrt(d_k) for d_k in (64, 256)}
    assert sds == {64: 125, 256: 62.5}  # exact: sqrt(64) = 8, sqrt(256) = 16
    return {"logit": count(1000), "sd64": count(int(sds[64])), "sd256": fixed(sds[256], 1)}


def masked_rows(fill: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Scores of two rows of four keys (PyTorch), masked with ``fill``: the first row keeps two keys, the second
    none; returns the float16 scores and their float32 softmax."""
    scores = torch.randn(2, 4, dtype=torch.float16, generator=torch.Generator().manual_seed(0))
    mask = torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0]])
    return scores, torch.softmax(scores.float().masked_fill(mask == 0, fill), dim=-1)


@pitfall("softmax")
def mask_fp16_overflow() -> dict[str, str]:
    """Filling masked float16 scores with -1e9: PyTorch refuses, since float16 stops at 65,504; -inf is accepted
    and, for a row that keeps some keys, gives the weights -1e9 gives in float32."""
    fill = -(10**9)
    scores, w_big = masked_rows(fill)
    mask = torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0]])
    try:
        scores.masked_fill(mask == 0, fill)
        raised = False
    except RuntimeError as err:
        raised = "overflow" in str(err)
    fp16_max = torch.finfo(torch.float16).max
    assert raised and -fill > fp16_max
    assert torch.isinf(scores.masked_fill(mask == 0, float("-inf"))[0, 2])  # -inf fits float16
    assert torch.equal(w_big[0], masked_rows(float("-inf"))[1][0])
    return {"fill": "−10" + str(len(str(-fill)) - 1).translate(SUPERSCRIPT), "fp16_max": count(int(fp16_max))}


@pitfall("softmax")
def fully_masked_row() -> dict[str, str]:
    """A row whose keys are all masked: a large negative fill spreads its weight evenly (0.25 each of four keys),
    -inf makes it NaN in PyTorch; the book's masked softmax sets the row to zero."""
    _, w_big = masked_rows(-(10**9))
    _, w_inf = masked_rows(float("-inf"))
    scores = torch.randn(2, 4, dtype=torch.float16, generator=torch.Generator().manual_seed(0))
    mask = np.array([[1, 1, 0, 0], [0, 0, 0, 0]], dtype=bool)
    w_book = masked_softmax(scores.double().numpy(), mask)
    assert torch.allclose(w_big[1], torch.full((4,), 0.25)) and torch.isnan(w_inf[1]).all()
    assert np.all(w_book[1] == 0) and abs(w_book[0].sum() - 1) < TOL
    return {"keys": count(mask.shape[1]), "weight": fixed(float(w_big[1, 0]), 2)}


# Scaling by sqrt(d_k)


def head_logit_variance(w_q: np.ndarray, w_k: np.ndarray, d_k: int) -> float:
    """Mean over heads of Var(q.k / sqrt(d_k)) for inputs with independent unit-variance components.

    Through one head's columns W_Qh, W_Kh, Var(q.k) = ||W_Qh^T W_Kh||_F^2 = sum(W_Qh^T W_Qh * W_Kh^T W_Kh): it is
    read off the drawn weights, no inputs sampled."""
    heads = [(w_q[:, h:h + d_k], w_k[:, h:h + d_k]) for h in range(0, w_q.shape[1], d_k)]
    return float(np.mean([((wq.T @ wq) * (wk.T @ wk)).sum() / d_k for wq, wk in heads]))


@cache
def init_logit_variances(d_model: int = 768, d_k: int = 64) -> dict[str, float]:
    """Scaled-logit variance at initialisation: Xavier on a separate square W_Q and W_K, Xavier as
    ``torch.nn.MultiheadAttention`` applies it (to the fused 3 d x d ``in_proj_weight``), and GPT-2's
    N(0, 0.02^2), its ``initializer_range``, at GPT-2's d_model = 768; and ``torch.nn.Linear``'s default."""
    torch.manual_seed(11)
    square = [torch.nn.init.xavier_uniform_(torch.empty(d_model, d_model, dtype=torch.float64)).numpy()
              for _ in range(2)]
    fused = torch.nn.MultiheadAttention(d_model, d_model // d_k).in_proj_weight.detach().double().numpy().T
    gpt2_std = json.loads((FIXTURES / "gpt2.config.json").read_text())["initializer_range"]
    g = np.random.default_rng(11)
    gpt2 = g.normal(0.0, gpt2_std, (2, d_model, d_model))
    linear = [torch.nn.Linear(d_model, d_model, bias=False).weight.detach().double().numpy().T for _ in range(2)]
    return {"linear": head_logit_variance(*linear, d_k), "square": head_logit_variance(*square, d_k),
            "fused": head_logit_variance(fused[:, :d_model], fused[:, d_model:2 * d_model], d_k),
            "gpt2": head_logit_variance(*gpt2, d_k)}


@pitfall("scaling")
def unit_variance_at_init() -> dict[str, str]:
    """Scaled logits have variance 1 only if q and k have unit-variance components: it depends on the init.

    Xavier gives Var(w) = 2 / (fan_in + fan_out): 1/d on a separate square W_Q (component variance 1), but
    1/(2d) on nn.MultiheadAttention's fused (3d x d) weight (component variance 1/2, logit variance 1/4).
    torch.nn.Linear's default gives the scaling chapter's 1/9 (0.11); GPT-2 (768 * 0.02^2)^2 = 0.094."""
    var = init_logit_variances()
    linear = Fraction(1, 3) ** 2  # nn.Linear: U(-1/sqrt(d), 1/sqrt(d)), component variance d / (3 d)
    assert abs(var["square"] - 1) < 0.03 and abs(var["fused"] - 0.25) < 0.01 and abs(var["linear"] - linear) < 0.01
    assert abs(var["gpt2"] - (768 * 0.02**2) ** 2) < 0.01
    return {"square": fixed(var["square"], 2), "fused": fixed(var["fused"], 2), "gpt2": fixed(var["gpt2"], 2),
            "linear": fixed(float(linear), 2), "d_model": count(768)}


@pitfall("scaling")
def scale_not_unique() -> dict[str, str]:
    """sqrt(d_k) is the constant giving unit variance (sympy), not the only width-independent one, nor needed."""
    c, d_k = sp.symbols("c d_k", positive=True)
    assert sp.solve(sp.Eq(c**2 * d_k, 1), c) == [1 / sp.sqrt(d_k)]  # Var(c q.k) = c^2 d_k
    d = 64
    scores = sample_dot_products(np.random.default_rng(1), 200_000, d)[0] / np.sqrt(d)
    var_half = (scores / 2).var()  # dividing by 2 sqrt(d_k): 1/4 at every width
    assert abs(scores.var() - 1) < 0.02 and abs(var_half - 0.25) < 0.005
    rng = np.random.default_rng(7)
    x = rng.standard_normal((6, 32))
    w_q, w_k, w_v = (rng.standard_normal((32, d)) / np.sqrt(32) for _ in range(3))
    scaled, _ = att.attention(x @ w_q, x @ w_k, x @ w_v)
    folded, _ = att.attention(x @ (w_q / np.sqrt(d)), x @ w_k, x @ w_v, scale=1.0)  # no scale; W_Q divided instead
    agree(folded, scaled, TOL)
    return {"half": fixed(var_half, 2)}


@pitfall("scaling")
def divide_by_d_k() -> dict[str, str]:
    """Dividing the scores by d_k instead of sqrt(d_k) flattens the rows at init (the largest weight about
    1.22/n); only a W_Q grown by sqrt(d_k) undoes it, and then the head is the standard one exactly."""
    g = np.random.default_rng(12)
    d_k, n_keys = 256, 1024
    q, k = g.standard_normal((500, d_k)), g.standard_normal((n_keys, d_k))
    _, a_dk = att.attention(q, k, np.zeros((n_keys, 1)), scale=1 / d_k)
    w_q, x = g.standard_normal((d_k, d_k)) / np.sqrt(d_k), g.standard_normal((n_keys, d_k))
    _, a_std = att.attention(x @ w_q, k, np.zeros((n_keys, 1)))
    _, a_rescaled = att.attention(x @ (np.sqrt(d_k) * w_q), k, np.zeros((n_keys, 1)), scale=1 / d_k)
    agree(a_rescaled, a_std, TOL)
    top = a_dk.max(axis=1).mean() * n_keys
    assert top < 2
    return {"top": fixed(top, 2), "keys": count(n_keys), "d_k": count(d_k)}


# The scaling chapter's saturation experiment, as that chapter runs it (chapters/scaling.ipynb: the cell that
# fills ``stats``): the same seed, sizes and order of draws, so both pages print the same numbers.
SAT_KEYS, SAT_QUERIES, SAT_SEED = 1024, 256, 2
SAT_WIDTHS = (4, 8, 16, 32, 64, 128, 256, 512, 1024)


def jacobian_norm(a: np.ndarray) -> np.ndarray:
    """||diag(a) - a a^T||_F per row, by the scaling chapter's closed form (eq-scale-jacobian)."""
    sum_sq = (a**2).sum(axis=-1)
    return np.sqrt(np.maximum(sum_sq - 2 * (a**3).sum(axis=-1) + sum_sq**2, 0))


@cache
def saturation() -> dict[str, dict[int, tuple[float, float, float, float]]]:
    """Per scale ('raw', 'scaled') and d_k: the mean largest weight, the share of rows above ONE_HOT, the mean
    Jacobian norm and the largest weight of any row, over SAT_QUERIES queries and SAT_KEYS keys."""
    rng = np.random.default_rng(SAT_SEED)
    out: dict[str, dict[int, tuple[float, float, float, float]]] = {"raw": {}, "scaled": {}}
    for d_k in SAT_WIDTHS:
        q, k = rng.standard_normal((SAT_QUERIES, d_k)), rng.standard_normal((SAT_KEYS, d_k))
        for name, scale in (("raw", 1.0), ("scaled", 1 / np.sqrt(d_k))):
            a = softmax(scale * (q @ k.T))
            a_max = a.max(axis=-1)
            assert np.abs(a_max - ONE_HOT).min() > 1e-9  # the share above 0.99 holds on any machine
            out[name][d_k] = (float(a_max.mean()), float((a_max > ONE_HOT).mean()), float(jacobian_norm(a).mean()),
                              float(a_max.max()))
    return out


@pitfall("scaling")
def size_eight() -> dict[str, str]:
    """How one-hot unscaled rows are at d_k = 64 (standard deviation 8) depends on the number of keys too."""
    short = 16
    peaks = [softmax(8 * np.random.default_rng(seed).standard_normal((2000, short))).max(axis=1)
             for seed in range(6)]
    peak = float(np.concatenate(peaks).mean())  # 12,000 rows
    long = saturation()["raw"][64][0]
    assert min(p.mean() for p in peaks) > 0.8 > long
    assert fixed(peak - 1e-4, 3) == fixed(peak + 1e-4, 3)  # three digits that round-off cannot change
    return {"sd": count(int(np.sqrt(64))), "short": count(short), "peak_short": fixed(peak, 3),
            "peak_long": fixed(long, 3), "keys": count(SAT_KEYS)}


@pitfall("scaling")
def one_hot_minority() -> dict[str, str]:
    """Unscaled, the share of near one-hot rows grows with d_k but is a majority only at 1,024."""
    share = {d_k: v[1] for d_k, v in saturation()["raw"].items()}
    grows = [share[d] for d in (16, 32, 64, 128, 256, 512, 1024)]
    assert share[256] < 0.5 < share[1024] < 0.7 and all(a < b for a, b in zip(grows, grows[1:], strict=False))
    return {"threshold": fixed(ONE_HOT, 2), "keys": count(SAT_KEYS)} | {
        f"p{d_k}": percent(share[d_k], 1) for d_k in (64, 256, 1024)} | {"mid": count(256), "wide": count(1024)}


@pitfall("scaling")
def gradient_by_row_length() -> dict[str, str]:
    """Large unscaled variance shrinks the mean softmax gradient over 16 keys, not over 1,024 (twice the scaled)."""
    d_k, short = 1024, 16
    raw, scaled = [], []
    for seed in range(8):
        rng = np.random.default_rng(seed)
        s = rng.standard_normal((256, d_k)) @ rng.standard_normal((short, d_k)).T
        raw.append(softmax_jacobian_norm(softmax(s)).mean())
        scaled.append(softmax_jacobian_norm(softmax(s / np.sqrt(d_k))).mean())
    raw_short, scaled_short = float(np.mean(raw)), float(np.mean(scaled))
    assert max(raw) < 0.1 and 0.052 < raw_short < 0.06 and 0.3 < min(scaled) <= max(scaled) < 0.31
    sat = saturation()
    long_raw = sat["raw"][d_k][2]
    long_scaled = float(np.mean([v[2] for v in sat["scaled"].values()]))  # the chapter's width-averaged value
    assert 1.8 < long_raw / long_scaled < 2.2  # "about twice"
    return {"short": count(short), "raw_short": fixed(raw_short, 3), "scaled_short": fixed(scaled_short, 3),
            "raw_long": fixed(long_raw, 3), "scaled_long": fixed(long_scaled, 4), "keys": count(SAT_KEYS)}


# The backward pass

Q_EX = K_EX = np.eye(2)  # the 2-token worked example: Q = K = I, V = [[1, 2], [3, 4]], L = sum(O)
V_EX = np.array([[1.0, 2.0], [3.0, 4.0]])


@pitfall("attention-backward")
def dv_column_sums() -> dict[str, str]:
    """dL/dV = A^T 1 holds the column sums of A, 1 only when A is doubly stochastic: with Q = K = 0 and a causal
    mask on three tokens, 11/6, 5/6 and 1/3."""
    st = att.attention_backward_steps(np.zeros((3, 2)), np.zeros((3, 2)), np.arange(6.0).reshape(3, 2),
                                      np.ones((3, 2)), mask=att.causal_mask(3))
    exact = [sum((Fraction(1, i + 1) for i in range(j, 3)), Fraction(0)) for j in range(3)]  # row i: 1/(i+1) each
    agree(st.dv, np.repeat(np.array([float(f) for f in exact])[:, None], 2, axis=1), 1e-14)
    assert exact == [Fraction(11, 6), Fraction(5, 6), Fraction(1, 3)]
    return {"sums": ", ".join(f"{f.numerator}/{f.denominator}" for f in exact)}


@pitfall("attention-backward")
def mirror_reason() -> dict[str, str]:
    """Row 2 of A mirrors row 1 because swapping the tokens leaves S' unchanged, not because S' is symmetric."""
    st = att.attention_backward_steps(Q_EX, K_EX, V_EX, np.ones((2, 2)))
    swap = np.array([[0, 1], [1, 0]])
    assert (swap @ st.s_scaled @ swap == st.s_scaled).all() and (st.a[1] == st.a[0][::-1]).all()
    q = np.diag([1.0, 0.5])  # S' symmetric again, its diagonal not constant
    other = att.attention_backward_steps(q, q, V_EX, np.ones((2, 2)))
    assert (other.s_scaled == other.s_scaled.T).all() and np.abs(other.a[1] - other.a[0][::-1]).max() > 0.1
    return {"row2": f"[{fixed(other.a[1, 0], 2)}, {fixed(other.a[1, 1], 2)}]",
            "mirror": f"[{fixed(other.a[0, 1], 2)}, {fixed(other.a[0, 0], 2)}]"}


@pitfall("attention-backward")
def jacobian_not_projection() -> dict[str, str]:
    """J = diag(a) - a a^T maps into zero-sum vectors but is no projection: its nonzero eigenvalue is 2 a1 a2."""
    st = att.attention_backward_steps(Q_EX, K_EX, V_EX, np.ones((2, 2)))
    a = st.a[0]
    jac = np.diag(a) - np.outer(a, a)
    eigen = np.linalg.eigvalsh(jac)
    assert abs(eigen[0]) < TOL and abs(eigen[1] - 2 * a[0] * a[1]) < TOL and np.abs(jac @ jac - jac).max() > 0.1
    return {"eigen": fixed(eigen[1], 2)}


@pitfall("attention-backward")
def gradients_past_qkv() -> dict[str, str]:
    """Self-attention's backward pass continues past Q, K, V: dW_Q = X^T dQ, and dX adds three paths."""
    rng = np.random.default_rng(22)
    x = rng.standard_normal((5, 8))
    w_q, w_k, w_v = (rng.standard_normal((8, 4)) for _ in range(3))
    d_out = rng.standard_normal((5, 4))
    xt, wqt, wkt, wvt = (torch.tensor(m, requires_grad=True) for m in (x, w_q, w_k, w_v))
    (torch.softmax((xt @ wqt) @ (xt @ wkt).T / 2.0, dim=-1) @ (xt @ wvt)).backward(torch.from_numpy(d_out))
    d_q, d_k, d_v = att.attention_backward(x @ w_q, x @ w_k, x @ w_v, d_out)
    agree(x.T @ d_q, wqt.grad, TOL)
    agree(d_q @ w_q.T + d_k @ w_k.T + d_v @ w_v.T, xt.grad, TOL)
    return {"paths": count(3)}


# Multi-head attention


D_MODEL, H, D_K, D_V = 512, 8, 64, 24  # heads whose values are narrower than their queries and keys


@cache
def narrow_value_heads() -> tuple[np.ndarray, mh.MultiHeadParams, np.ndarray, list[np.ndarray]]:
    """Multi-head attention with d_v = 24 against d_k = 64: the input, the weights, lib's output, and the heads
    computed one at a time from their own column blocks of W^Q, W^K, W^V."""
    rng = np.random.default_rng(16)
    params = mh.init_params(D_MODEL, H, bias=False, rng=rng)
    x = rng.standard_normal((10, D_MODEL))
    narrow = params._replace(w_v=rng.standard_normal((D_MODEL, H * D_V)) / D_MODEL**0.5,
                             w_o=rng.standard_normal((H * D_V, D_MODEL)) / (H * D_V) ** 0.5)
    out, _ = mh.multi_head_attention(x, None, narrow, H)
    cols = [(slice(i * D_K, (i + 1) * D_K), slice(i * D_V, (i + 1) * D_V)) for i in range(H)]
    heads = [att.attention(x @ narrow.w_q[:, c], x @ narrow.w_k[:, c], x @ narrow.w_v[:, cv])[0] for c, cv in cols]
    return x, narrow, out, heads


@pitfall("multihead")
def value_width() -> dict[str, str]:
    """W_i^V is d_model x d_v, which need not equal d_k: each head's output is then d_v wide."""
    x, narrow, out, heads = narrow_value_heads()
    agree(np.concatenate(heads, axis=1) @ narrow.w_o, out, TOL)
    assert all(head.shape == (len(x), D_V) for head in heads)
    return {"d_v": count(D_V), "d_k": count(D_K)}


@pitfall("multihead")
def wo_square() -> dict[str, str]:
    """W^O is h d_v x d_model, square only when h d_v = d_model; the output keeps the width d_model."""
    x, narrow, out, _ = narrow_value_heads()
    assert narrow.w_o.shape == (H * D_V, D_MODEL) != (D_MODEL, D_MODEL) and out.shape == x.shape
    return {"w_o": "{} × {}".format(*narrow.w_o.shape)}


@pitfall("multihead")
def output_projection() -> dict[str, str]:
    """The concatenated heads pass through W^O before the residual sum; left out, a quarter of the parameters go."""
    d, h = 512, 8
    rng = np.random.default_rng(9)
    params = mh.init_params(d, h, rng=rng)
    x = rng.standard_normal((10, d))
    out, _ = mh.multi_head_attention(x, None, params, h)
    q, k, v = (mh.split_heads(x @ w + b, h) for w, b in ((params.w_q, params.b_q), (params.w_k, params.b_k),
                                                         (params.w_v, params.b_v)))
    gap = np.abs(out - mh.merge_heads(att.attention(q, k, v)[0])).max()
    total, w_o = mh.param_count(d, h), d * d + d
    assert gap > 0.5 and 4 * w_o == total
    return {"w_o": count(w_o), "total": count(total)}


@pitfall("multihead")
def score_cost_per_head() -> dict[str, str]:
    """One head's QK^T costs N^2 d_k multiply-adds; N^2 d_model is all heads together."""
    n, d, h = 2048, 4096, 32
    per_head = mh.multi_head_flops(n, n, d, h)["scores"] // h // FLOPS_PER_MAC
    assert per_head == n**2 * (d // h) and h * per_head == n**2 * d
    return {"per_head": count(per_head), "all": count(h * per_head)}
