"""Pitfalls of the attention primitive: softmax and masking, the sqrt(d_k) scale, the backward pass, heads."""

from __future__ import annotations

import json
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

N_KEYS, ROWS = 1024, 5000  # keys per softmax row and rows per head width in the saturation measurements
ONE_HOT = 0.99  # a row whose largest weight exceeds this counts as one-hot


# Softmax and masking


@pitfall("softmax", ("walkthrough", 19, "wrong"))
def huge_logits() -> dict[str, str]:
    """Logits near 1000 taken as typical: under Var(q.k) = d_k they lie 62 to 125 standard deviations out."""
    sds = {d_k: 1000 / np.sqrt(d_k) for d_k in (64, 256)}
    assert min(sds.values()) > 60
    return {"logit": count(1000), "sd64": fixed(sds[64], 1), "sd256": fixed(sds[256], 1)}


@pitfall("softmax", ("walkthrough", 19, "imprecise"))
def float32_overflow() -> dict[str, str]:
    """float32's exp overflows above ln(max) = 88.72; e^88 is a finite 1.65e38, the largest float32 3.40e38."""
    f32_max = float(np.finfo(np.float32).max)
    with np.errstate(over="ignore"):
        e88, e89 = float(np.exp(np.float32(88))), float(np.exp(np.float32(89)))
    assert np.isfinite(e88) and np.isinf(e89) and 88 < np.log(f32_max) < 89 and f32_max > 2 * 1.6e38
    return {"threshold": fixed(np.log(f32_max), 2), "e88": f"{fixed(e88 / 1e38, 2)} × 10³⁸",
            "max": f"{fixed(f32_max / 1e38, 2)} × 10³⁸"}


@pitfall("softmax", ("intro-article", 222, "assumption"))
def mask_minus_1e9() -> dict[str, str]:
    """Filling masked scores with -1e9: exact in float32, an error in float16, and a fully masked row gets weight."""
    scores = torch.randn(2, 4, dtype=torch.float16, generator=torch.Generator().manual_seed(0))
    mask = torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0]])  # second row: every key masked
    try:
        scores.masked_fill(mask == 0, -1e9)
        raised = False
    except RuntimeError as err:
        raised = "overflow" in str(err)
    w_big = torch.softmax(scores.float().masked_fill(mask == 0, -1e9), dim=-1)
    w_inf = torch.softmax(scores.float().masked_fill(mask == 0, float("-inf")), dim=-1)
    w_book = masked_softmax(scores.double().numpy(), mask.numpy().astype(bool))
    assert raised and torch.equal(w_big[0], w_inf[0]) and np.all(w_book[1] == 0)
    assert torch.allclose(w_big[1], torch.full((4,), 0.25))
    return {"fp16_max": count(int(torch.finfo(torch.float16).max)), "weight": fixed(float(w_big[1, 0]), 2)}


# Scaling by sqrt(d_k)


@cache
def projected_variances(d_model: int = 768, d_k: int = 64) -> dict[str, tuple[float, float]]:
    """Component variance of q = x W_Q and the variance of a head's scaled logits, for three initialisations.

    For inputs with independent unit-variance components, Var(q_i) = sum_j W_Q[j, i]^2, and through one head's
    columns W_Qh, W_Kh, Var(q.k) = ||W_Qh^T W_Kh||_F^2 = sum(W_Qh^T W_Qh * W_Kh^T W_Kh): both are read off the drawn
    weights. Xavier-uniform is ``torch.nn.Transformer``'s init; ``mh.init_params`` draws as ``torch.nn.Linear``;
    GPT-2 draws N(0, 0.02^2), its ``initializer_range``.
    """
    g = np.random.default_rng(11)
    gpt2_std = json.loads((FIXTURES / "gpt2.config.json").read_text())["initializer_range"]
    xavier = np.sqrt(6 / (2 * d_model))
    draws = {"xavier": lambda: g.uniform(-xavier, xavier, (d_model, d_model)),
             "linear": lambda: mh.init_params(d_model, d_model // d_k, bias=False, rng=g).w_q,
             "gpt2": lambda: g.normal(0.0, gpt2_std, (d_model, d_model))}
    out = {}
    for name, draw in draws.items():
        w_q, w_k = draw(), draw()
        heads = [(w_q[:, h:h + d_k], w_k[:, h:h + d_k]) for h in range(0, d_model, d_k)]
        logit = np.mean([((wq.T @ wq) * (wk.T @ wk)).sum() / d_k for wq, wk in heads])
        out[name] = (float((w_q**2).sum(axis=0).mean()), float(logit))
    return out


@pitfall("scaling", ("walkthrough", 11, "assumption"), ("walkthrough", 98, "assumption"))
def unit_variance_at_init() -> dict[str, str]:
    """Scaled logits have variance 1 only if q and k have unit-variance components: it depends on the init."""
    var = projected_variances()
    assert abs(var["xavier"][1] - 1) < 0.05 and abs(var["linear"][1] - 1 / 9) < 0.01
    assert abs(var["gpt2"][1] - (768 * 0.02**2) ** 2) < 0.01
    return {"xavier": fixed(var["xavier"][1], 2), "linear": fixed(var["linear"][1], 2),
            "gpt2": fixed(var["gpt2"][1], 2)}


@pitfall("scaling", ("lab-report", 57, "wrong"), ("walkthrough", 15, "imprecise"))
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


@pitfall("scaling", ("walkthrough", 113, "imprecise"))
def divide_by_d_k() -> dict[str, str]:
    """Dividing by d_k flattens the rows at init, but sqrt(d_k) W_Q under 1/d_k is the standard head exactly."""
    g = np.random.default_rng(12)
    d_k = 256
    q, k = g.standard_normal((500, d_k)), g.standard_normal((N_KEYS, d_k))
    _, a_dk = att.attention(q, k, np.zeros((N_KEYS, 1)), scale=1 / d_k)
    w_q, x = g.standard_normal((d_k, d_k)) / np.sqrt(d_k), g.standard_normal((N_KEYS, d_k))
    _, a_std = att.attention(x @ w_q, k, np.zeros((N_KEYS, 1)))
    _, a_rescaled = att.attention(x @ (np.sqrt(d_k) * w_q), k, np.zeros((N_KEYS, 1)), scale=1 / d_k)
    agree(a_rescaled, a_std, TOL)
    top = a_dk.max(axis=1).mean() * N_KEYS
    assert top < 2
    return {"top": fixed(top, 2), "keys": count(N_KEYS)}


@pitfall("scaling", ("theory-notes", 99, "imprecise"))
def size_eight() -> dict[str, str]:
    """At d_k = 64 the raw products have standard deviation 8 (mean size 6.4), and how one-hot rows are depends
    on the number of keys."""
    sd = np.sqrt(64)  # the standard deviation of q.k at d_k = 64
    mean_abs = np.abs(sd * np.random.default_rng(1).standard_normal(200_000)).mean()
    peak = {n: softmax(sd * np.random.default_rng(0).standard_normal((2000, n))).max(axis=1).mean()
            for n in (16, 1024)}
    assert abs(mean_abs - sd * np.sqrt(2 / np.pi)) < 0.05 and peak[16] > peak[1024]
    return {"mean_abs": fixed(mean_abs, 1), "peak16": fixed(peak[16], 2), "peak1024": fixed(peak[1024], 2),
            "short": count(16)}


def logit_rows(d_k: int) -> tuple[np.ndarray, np.ndarray]:
    """ROWS rows of unscaled q.k over N_KEYS keys, q and k with independent standard normal components.

    For one query the logits of independent keys are independent N(0, |q|^2), and |q|^2 is chi-squared with d_k
    degrees of freedom: each row is drawn exactly so, at a cost that does not grow with d_k. Returns the logits
    and each row's |q|.
    """
    g = np.random.default_rng(d_k)
    norm_q = np.sqrt(g.chisquare(d_k, (ROWS, 1)))
    return norm_q * g.standard_normal((ROWS, N_KEYS)), norm_q[:, 0]


@cache
def unscaled_rows(d_k: int) -> dict[str, float]:
    """Mean span of the rows in logit units and in standard deviations, the logit variance, and the share of
    rows whose largest weight exceeds 0.99 (no weight within 1e-9 of 0.99, so the share holds on any machine)."""
    s, norm_q = logit_rows(d_k)
    a_max = np.concatenate([softmax(s[i:i + 500]).max(axis=1) for i in range(0, ROWS, 500)])
    assert np.abs(a_max - ONE_HOT).min() > 1e-9
    span = np.ptp(s, axis=1)
    return {"units": float(span.mean()), "sds": float((span / norm_q).mean()), "var": float(s.var()),
            "one_hot": float((a_max > ONE_HOT).mean())}


@pitfall("scaling", ("walkthrough", 15, "imprecise"), ("walkthrough", 98, "imprecise"))
def spread_in_deviations() -> dict[str, str]:
    """Unscaled rows span tens of logit units, but the same 6.5 standard deviations at every width."""
    rows = {d_k: unscaled_rows(d_k) for d_k in (64, 256, 1024)}
    for d_k, r in rows.items():
        assert 6.3 < r["sds"] < 6.7 and abs(r["units"] / np.sqrt(d_k) - r["sds"]) < 0.1
    assert abs(rows[1024]["var"] / 1024 - 1) < 0.02 and len({fixed(r["sds"], 1) for r in rows.values()}) == 1
    return {"u64": fixed(rows[64]["units"], 0), "u1024": fixed(rows[1024]["units"], 0),
            "sds": fixed(rows[64]["sds"], 1), "keys": count(N_KEYS)}


@pitfall("scaling", ("walkthrough", 15, "wrong"), ("walkthrough", 98, "imprecise"))
def one_hot_minority() -> dict[str, str]:
    """Unscaled, the share of near one-hot rows grows with d_k but stays a minority up to 256."""
    share = {d_k: unscaled_rows(d_k)["one_hot"] for d_k in (64, 128, 256, 1024)}
    grows = list(share.values())
    assert share[256] < 0.5 < share[1024] < 0.7 and all(a < b for a, b in zip(grows, grows[1:], strict=False))
    shares = {f"p{d_k}": percent(v, 0) for d_k, v in share.items()}
    return {"threshold": fixed(ONE_HOT, 2), "widths": "{}, {} and {}".format(*list(share)[:3])} | shares


@pitfall("scaling", ("walkthrough", 98, "imprecise"))
def width_limit() -> dict[str, str]:
    """With the scale, the largest weight stays small even at d_k = 1024: saturation does not limit head width."""
    top = {}
    for d_k in (64, 1024):
        s = logit_rows(d_k)[0] / np.sqrt(d_k)
        top[d_k] = float(max(softmax(s[i:i + 500]).max() for i in range(0, ROWS, 500)))
    assert max(top.values()) < 0.9
    return {"top64": fixed(top[64], 2), "top1024": fixed(top[1024], 2), "rows": count(ROWS)}


@pitfall("scaling", ("intro-article", 88, "assumption"))
def gradient_by_row_length() -> dict[str, str]:
    """Large unscaled variance shrinks the mean softmax gradient over 16 keys, not over 1,024."""
    d_k, rng = 1024, np.random.default_rng(11)
    q = rng.standard_normal((256, d_k))
    norms = {}
    for n_keys in (16, 1024):
        s = q @ rng.standard_normal((n_keys, d_k)).T
        norms[n_keys] = [softmax_jacobian_norm(softmax(x)).mean() for x in (s, s / np.sqrt(d_k))]
    assert norms[16][0] < norms[16][1] / 3 and norms[1024][0] > 1.5 * norms[1024][1]
    return {"raw16": fixed(norms[16][0], 3), "scaled16": fixed(norms[16][1], 3), "raw1024": fixed(norms[1024][0], 3),
            "scaled1024": fixed(norms[1024][1], 3), "short": count(16)}


# The backward pass

Q_EX = K_EX = np.eye(2)  # the 2-token worked example: Q = K = I, V = [[1, 2], [3, 4]], L = sum(O)
V_EX = np.array([[1.0, 2.0], [3.0, 4.0]])


@pitfall("attention-backward", ("walkthrough", 38, "imprecise"))
def dv_column_sums() -> dict[str, str]:
    """dL/dV = A^T 1 holds the column sums of A, which are 1 only for the symmetric example."""
    g = np.random.default_rng(3)
    q, k, v = (g.standard_normal((3, 2)) for _ in range(3))
    st = att.attention_backward_steps(q, k, v, np.ones((3, 2)), mask=att.causal_mask(3))
    cols = st.a.sum(axis=0)
    agree(st.dv, np.repeat(cols[:, None], 2, axis=1), 1e-14)
    assert np.abs(cols - 1).max() > 0.5
    return {"sums": ", ".join(fixed(c, 2) for c in cols)}


@pitfall("attention-backward", ("walkthrough", 34, "imprecise"))
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


@pitfall("attention-backward", ("walkthrough", 40, "imprecise"))
def jacobian_not_projection() -> dict[str, str]:
    """J = diag(a) - a a^T maps into zero-sum vectors but is no projection: its nonzero eigenvalue is 2 a1 a2."""
    st = att.attention_backward_steps(Q_EX, K_EX, V_EX, np.ones((2, 2)))
    a = st.a[0]
    jac = np.diag(a) - np.outer(a, a)
    eigen = np.linalg.eigvalsh(jac)
    assert abs(eigen[0]) < TOL and abs(eigen[1] - 2 * a[0] * a[1]) < TOL and np.abs(jac @ jac - jac).max() > 0.1
    return {"eigen": fixed(eigen[1], 2)}


@pitfall("attention-backward", ("lab-report", 163, "imprecise"))
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


@pitfall("multihead", ("intro-article", 106, "imprecise"))
def value_width() -> dict[str, str]:
    """W_i^V is d_model x d_v, which need not equal d_k: each head's output is then d_v wide."""
    x, narrow, out, heads = narrow_value_heads()
    agree(np.concatenate(heads, axis=1) @ narrow.w_o, out, TOL)
    assert all(head.shape == (len(x), D_V) for head in heads)
    return {"d_v": count(D_V), "d_k": count(D_K)}


@pitfall("multihead", ("intro-article", 112, "assumption"))
def wo_square() -> dict[str, str]:
    """W^O is h d_v x d_model, square only when h d_v = d_model; the output keeps the width d_model."""
    x, narrow, out, _ = narrow_value_heads()
    assert narrow.w_o.shape == (H * D_V, D_MODEL) != (D_MODEL, D_MODEL) and out.shape == x.shape
    return {"w_o": "({}, {})".format(*map(count, narrow.w_o.shape))}


@pitfall("multihead", ("walkthrough", 94, "wrong"))
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


@pitfall("multihead", ("intro-article", 166, "imprecise"))
def score_cost_per_head() -> dict[str, str]:
    """One head's QK^T costs N^2 d_k multiply-adds; N^2 d_model is all heads together."""
    n, d, h = 2048, 4096, 32
    per_head = mh.multi_head_flops(n, n, d, h)["scores"] // h // FLOPS_PER_MAC
    assert per_head == n**2 * (d // h) and h * per_head == n**2 * d
    return {"per_head": count(per_head), "all": count(h * per_head)}
