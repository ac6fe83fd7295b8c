"""The First-Principles Walkthrough, checked claim by claim in the note's order.

Every function below checks one claim (or a tight group of claims made in one sentence) with ``lib``, asserts
what it finds and records it with :meth:`errata.Review.add`. The worked backward pass uses the note's own inputs
Q = K = I (2 x 2), V = [[1, 2], [3, 4]] and the loss L = sum(O); the procedure of the note's NumPy program is
re-implemented in ``backward_by_rows`` and checked against lib and torch.autograd. Monte Carlo estimates use
fixed seeds and sizes whose sampling error is
below the precision printed.

Claims ``worked`` records are not repeated here: the "unique normalizing constant", the
gradient at d_k = 1024, the softmax of [1000, 1002] and the plausibility of such logits, A, O, dL/dS' and dL/dS
of the worked example and the reason given for dL/dV, the block formula, the FLOP counts and the 16,384-token
crossover, the quadrupling of attention compute, the KV-cache sizes, the weights, the GPU count and the reason
for d_model in the cache formula.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import NamedTuple

import numpy as np
import sympy as sp
import torch

import lib.attention as att
import lib.flops as fl
import lib.multihead as mh
import lib.sizing as sz
from lib.book.fmt import agree, bound, count, fixed, percent
from lib.constants import GiB, KiB
from lib.planner.config import load_config
from lib.softmax import softmax, softmax_naive, softmax_vjp

from . import Review, sample_dot_products

NOTE = "walkthrough"
ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"

SCALING = "Deriving the √d_k scaling factor"
STABILITY = "Numerical stability"
BACKPROP = "Backpropagation through attention"
COMPUTE = "Compute cost"
KV = "KV-cache memory"
BLOCK = "Assembling the block"
MISCONCEPTION = "Correcting a common misconception"

# the worked example of the note
Q_EX = np.eye(2)
K_EX = np.eye(2)
V_EX = np.array([[1.0, 2.0], [3.0, 4.0]])
D_OUT_EX = np.ones((2, 2))  # dL/dO for L = sum(O)

N_KEYS = 1024  # keys per softmax row in the saturation measurements (the scaling chapter's context length)
ROWS = 5000  # softmax rows per head width in those measurements
ROUNDOFF = 1e-12  # bound for float64 agreement between two computations of the same quantity


def _add(review: Review, line: int, section: str, says: str, grade: str, evidence: str, chapter: str, *,
         brief: str) -> None:
    review.add(NOTE, line, section, says, grade, evidence, chapter, brief=brief)


# ---------------------------------------------------------------------------------------------------------------
# Shared computations
# ---------------------------------------------------------------------------------------------------------------

def example_steps() -> att.AttentionGradSteps:
    """Every intermediate of the note's worked example, forward and backward, from ``lib``."""
    return att.attention_backward_steps(Q_EX, K_EX, V_EX, D_OUT_EX)


def example_autograd() -> dict[str, torch.Tensor]:
    """The worked example through torch autograd in float64: values and gradients of every stage."""
    q, k, v = (torch.tensor(m, requires_grad=True) for m in (Q_EX, K_EX, V_EX))
    s_scaled = q @ k.T / np.sqrt(2)
    a = torch.softmax(s_scaled, dim=-1)
    o = a @ v
    for t in (s_scaled, a, o):
        t.retain_grad()
    o.sum().backward()
    return {"dq": q.grad, "dk": k.grad, "dv": v.grad, "ds_scaled": s_scaled.grad, "da": a.grad, "do": o.grad,
            "a": a.detach()}


def jacobian_norm(a: np.ndarray) -> np.ndarray:
    """Per row, the Frobenius norm of the softmax Jacobian J = diag(a) - a a^T.

    Column j of J is a_j (e_j - a), of squared norm a_j^2 ((1 - a_j)^2 + S - a_j^2) with S = sum_i a_i^2; for
    any weight but the largest a_t that is a_j^2 (1 + S - 2 a_j). With O_2 and O_3 the sums of the squares and
    cubes of the weights other than a_t and r = 1 - a_t, ||J||^2 = O_2 (1 + S) - 2 O_3 + a_t^2 (r^2 + O_2).
    r and O_2 are summed from the other weights, so a nearly one-hot row gets its tiny norm accurately instead
    of the round-off of 1 - 1.
    """
    top, rest = largest_and_rest(a)
    a_top = a[top]
    others = np.where(top, 0.0, a)  # every weight but the largest
    others_sq = others * others
    o2 = others_sq.sum(axis=-1)
    o3 = np.einsum("ij,ij->i", others_sq, others)
    s = a_top**2 + o2
    return np.sqrt(o2 * (1 + s) - 2 * o3 + a_top**2 * (rest**2 + o2))


def largest_and_rest(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A mask of each row's largest weight, and 1 minus that weight summed from the others (no cancellation)."""
    top = np.zeros(a.shape, dtype=bool)
    np.put_along_axis(top, a.argmax(axis=-1)[:, None], True, axis=-1)
    return top, np.where(top, 0.0, a).sum(axis=-1)


class RowStats(NamedTuple):
    """Per-row statistics of softmax rows over N_KEYS keys (see :func:`row_stats`)."""

    a_max: np.ndarray  #: the largest weight of each row
    rest: np.ndarray  #: 1 - a_max, summed from the other weights (accurate for a nearly one-hot row)
    jac: np.ndarray  #: the Frobenius norm of the row's softmax Jacobian
    span: np.ndarray  #: max - min of the row's logits
    span_sd: np.ndarray  #: the same in units of the row's standard deviation |q|
    logit_var: float  #: the variance of all logits
    least_saturated: np.ndarray  #: the weights of the row with the smallest largest weight


def logit_rows(d_k: int, scale: float = 1.0, *, rows: int = ROWS, n_keys: int = N_KEYS,
               seed: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``rows`` rows of ``scale`` * q.k over ``n_keys`` keys, for q and k with independent standard normal
    components (drawn from the seed ``d_k`` unless ``seed`` is given).

    For one query q, the logits q.k_j of independent standard normal keys are independent N(0, |q|^2), and
    |q|^2 is chi-squared with d_k degrees of freedom: each row is drawn exactly so, at a cost that does not grow
    with d_k, and every row has its own query and keys. Returns the logits and each row's |q|.
    """
    g = np.random.default_rng(d_k if seed is None else seed)
    norm_q = np.sqrt(g.chisquare(d_k, (rows, 1)))
    return scale * norm_q * g.standard_normal((rows, n_keys)), norm_q[:, 0]


def largest_scaled_weight(d_k: int) -> float:
    """The largest softmax weight in ROWS rows of logits scaled by 1/sqrt(d_k)."""
    s, _ = logit_rows(d_k, scale=1 / np.sqrt(d_k))
    return float(max(softmax(s[start:start + 500]).max() for start in range(0, ROWS, 500)))  # 500 rows at a time


def unscaled_weights(s: np.ndarray) -> np.ndarray:
    """softmax over the last axis, with weights below 1e-60 set to 0: that moves no statistic below by 1e-60
    and avoids slow subnormal arithmetic."""
    a = softmax(s)
    return np.where(a < 1e-60, 0.0, a)


@cache
def row_stats(d_k: int) -> RowStats:
    """Statistics of ROWS unscaled softmax rows over N_KEYS keys (see :func:`logit_rows`)."""
    s, norm_q = logit_rows(d_k)
    a_max, rest, jac = np.empty(ROWS), np.empty(ROWS), np.empty(ROWS)
    for start in range(0, ROWS, 500):  # 500 rows at a time: less memory to touch
        block = slice(start, start + 500)
        a = unscaled_weights(s[block])
        a_max[block], rest[block], jac[block] = a.max(axis=1), largest_and_rest(a)[1], jacobian_norm(a)
    span, least = np.ptp(s, axis=1), np.argmin(a_max)
    return RowStats(a_max=a_max, rest=rest, jac=jac, span=span, span_sd=span / norm_q, logit_var=float(s.var()),
                    least_saturated=unscaled_weights(s[least:least + 1])[0])


def far_from(values: np.ndarray, threshold: float, margin: float = 1e-9) -> None:
    """Assert that no value lies within ``margin`` of ``threshold``, so a count against it holds on any machine."""
    assert np.abs(np.asarray(values) - threshold).min() > margin


def saturation(d_k: int) -> tuple[float, float]:
    """Fractions of unscaled rows whose largest weight exceeds 0.99 and whose Jacobian norm is below 1e-3."""
    st = row_stats(d_k)
    far_from(st.a_max, 0.99)
    far_from(st.jac, 1e-3, margin=1e-10)
    return float((st.a_max > 0.99).mean()), float((st.jac < 1e-3).mean())


@cache
def logit_variances(d_k: int, pairs: int = 20_000) -> tuple[float, float]:
    """Sample variances of q.k and q.k / sqrt(d_k) for independent standard normal q, k."""
    s = sample_dot_products(np.random.default_rng(100 + d_k), pairs, d_k)[0]
    return float(s.var()), float((s / np.sqrt(d_k)).var())


@cache
def projected_variances(d_model: int = 768, d_k: int = 64) -> dict[str, tuple[float, float]]:
    """Component variance of q = x W_Q and variance of a head's scaled logits, for three initialisations.

    For inputs with independent unit-variance components (as after a LayerNorm), q = x W_Q has
    Var(q_i) = sum_j W_Q[j, i]^2, and the query of one token and the key of another, through one head's columns
    W_Qh and W_Kh, give Var(q.k) = ||W_Qh W_Kh^T||_F^2 = sum(W_Qh^T W_Qh * W_Kh^T W_Kh). Both are read off the
    drawn weights (averaged over the columns and the heads): no tokens need sampling. Xavier-uniform is the
    init of ``torch.nn.Transformer``; ``lib.multihead.init_params`` draws as ``torch.nn.Linear`` does; GPT-2
    draws N(0, 0.02^2), its ``initializer_range``.
    """
    g = np.random.default_rng(11)
    gpt2_std = json.loads((FIXTURES / "gpt2.config.json").read_text())["initializer_range"]
    xavier = np.sqrt(6 / (2 * d_model))
    draws = {
        "Xavier": lambda: g.uniform(-xavier, xavier, (d_model, d_model)),
        "nn.Linear": lambda: mh.init_params(d_model, d_model // d_k, bias=False, rng=g).w_q,
        "GPT-2": lambda: g.normal(0.0, gpt2_std, (d_model, d_model)),
    }
    def gram(w: np.ndarray) -> np.ndarray:
        return w.T @ w

    out = {}
    for name, draw in draws.items():
        w_q, w_k = draw(), draw()
        component = (w_q**2).sum(axis=0).mean()
        heads = range(0, d_model, d_k)
        logit = np.mean([(gram(w_q[:, h:h + d_k]) * gram(w_k[:, h:h + d_k])).sum() / d_k for h in heads])
        out[name] = (float(component), float(logit))
    return out


# ---------------------------------------------------------------------------------------------------------------
# Scope
# ---------------------------------------------------------------------------------------------------------------

def attention_formula(review: Review) -> None:
    """The attention the note builds on, softmax(Q K^T / sqrt(d_k)) V, is the standard one."""
    g = np.random.default_rng(1)
    q, k, v = (g.standard_normal((6, 8)) for _ in range(3))
    o_lib, _ = att.attention(q, k, v)
    o_formula = softmax(q @ k.T / np.sqrt(8)) @ v
    o_torch = torch.nn.functional.scaled_dot_product_attention(*(torch.from_numpy(m) for m in (q, k, v)))
    _add(review, 7, "Scope", r"Attention computes $\operatorname{softmax}(QK^\top/\sqrt{d_k})\,V$.", "correct",
         f"`lib.attention.attention` and the formula written out: {agree(o_lib, o_formula, ROUNDOFF)}; against "
         f"PyTorch's `scaled_dot_product_attention`: {agree(o_lib, o_torch, ROUNDOFF)} (6 tokens, "
         "$d_k = 8$, float64)", "notation", brief="formula, lib and PyTorch agree: < #{0}")


# ---------------------------------------------------------------------------------------------------------------
# Deriving the sqrt(d_k) scaling factor
# ---------------------------------------------------------------------------------------------------------------

def unit_variance_after_projection(review: Review) -> None:
    """Unit-variance q and k components are a reasonable approximation right after the initialised projections."""
    var = projected_variances()
    assert abs(var["Xavier"][0] - 1) < 0.02 and abs(var["Xavier"][1] - 1) < 0.05
    assert abs(var["nn.Linear"][0] - 1 / 3) < 0.01 and abs(var["nn.Linear"][1] - 1 / 9) < 0.01
    assert abs(var["GPT-2"][0] - 768 * 0.02**2) < 0.01 and abs(var["GPT-2"][1] - (768 * 0.02**2) ** 2) < 0.01
    _add(review, 11, SCALING,
         "After projection, unit-variance zero-mean $q$ and $k$ entries are a fair assumption.", "assumption",
         "only for an initialisation that preserves variance. With unit-variance inputs and $d_\\text{model} = 768$, "
         f"$\\operatorname{{Var}}(q_i)$ is {fixed(var['Xavier'][0], 2)} for Xavier-uniform weights, but "
         f"{fixed(var['nn.Linear'][0], 2)} for `torch.nn.Linear`'s default and {fixed(var['GPT-2'][0], 2)} for "
         "GPT-2's $\\mathcal N(0, 0.02^2)$; the scaled logits of a 64-wide head then have variance "
         f"{fixed(var['Xavier'][1], 2)}, {fixed(var['nn.Linear'][1], 2)} and {fixed(var['GPT-2'][1], 2)}",
         "scaling", brief="only for variance-preserving init: PyTorch's default gives #{2}")


def mean_and_term_variance(review: Review) -> None:
    """E[q.k] = 0 and Var(q_i k_i) = E[q_i^2] E[k_i^2] = 1 under the stated assumptions."""
    x, y = sp.symbols("x y", real=True)
    r3 = sp.sqrt(3)
    families = {  # independent q_i and k_i: the joint density is the product of the two densities
        "standard normal": (sp.exp(-(x**2 + y**2) / 2) / (2 * sp.pi), (-sp.oo, sp.oo)),
        "uniform on $[-\\sqrt 3, \\sqrt 3]$": (1 / (2 * r3) ** 2, (-r3, r3)),
    }
    for density, (lo, hi) in families.values():
        mean = sp.integrate(x * y * density, (x, lo, hi), (y, lo, hi))
        second = sp.integrate(x**2 * y**2 * density, (x, lo, hi), (y, lo, hi))
        assert mean == 0 and second - mean**2 == 1
    _add(review, 13, SCALING,
         "A score has mean 0 and each product term variance 1.", "correct",
         "sympy, integrating over the joint density exactly: $E[q_i k_i] = 0$ and "
         "$E[q_i^2 k_i^2] - E[q_i k_i]^2 = 1$ for " + " and for ".join(families)
         + " components (mean 0, variance 1 both; no Gaussianity needed)", "scaling",
         brief="sympy, exactly, for normal and uniform entries")


def variance_grows_with_d_k(review: Review) -> None:
    """Var(q.k) = d_k, so the standard deviation of a raw score grows as sqrt(d_k)."""
    ratios = {d_k: logit_variances(d_k)[0] / d_k for d_k in (16, 64, 256)}
    assert all(abs(r - 1) < 0.04 for r in ratios.values())  # 4 standard errors of a variance of 20,000 draws
    _add(review, 13, SCALING,
         r"Summing $d_k$ terms gives $\operatorname{Var}(s) = d_k$: spread grows as $\sqrt{d_k}$.", "correct",
         "20,000 pairs of standard normal vectors: $\\operatorname{Var}(q \\cdot k)/d_k$ = "
         + ", ".join(f"{fixed(r, 2)} at $d_k = {d_k}$" for d_k, r in ratios.items()), "scaling",
         brief=r"$\operatorname{Var}/d_k$ = #{1}, #{3}, #{5} at $d_k$ = 16, 64, 256")


def ratio_is_exp_delta(review: Review) -> None:
    """For two logits that differ by Delta, the softmax weights have the ratio e^Delta."""
    s = np.random.default_rng(2).normal(0.0, 3.0, (4, 9))
    a = softmax(s)
    ratio = a[:, :, None] / a[:, None, :]
    predicted = np.exp(s[:, :, None] - s[:, None, :])
    rel = np.abs(ratio / predicted - 1).max()
    _add(review, 15, SCALING,
         r"Two logits $\Delta$ apart get weights in the ratio $e^{\Delta}$.", "correct",
         f"every pair of weights in 4 random rows of 9 against $e^{{s_i - s_j}}$: "
         f"{bound(rel, ROUNDOFF, 'max relative difference')}", "scaling",
         brief="every pair matches: relative difference < #{2}")


def real_head_widths(review: Review) -> None:
    """Real models use per-head widths like 64, 128 and 256."""
    names = ["gpt2", "Falcon-7B", "Phi-3-mini-4k-instruct", "Llama-2-7b-hf", "Mistral-7B-v0.1", "Qwen3-8B",
             "gemma-7b", "gemma-2-9b"]
    widths = {name: load_config(FIXTURES / f"{name}.config.json").head_dim for name in names}
    assert {64, 128, 256} <= set(widths.values())
    listed = ", ".join(f"{name} {d}" for name, d in widths.items())
    _add(review, 15, SCALING, "Real heads have $d_k$ of 64, 128 or 256.",
         "correct", f"`head_dim` read from the published configurations by `lib.planner.config`: {listed}",
         "capacity-planner", brief="published configurations: 64, 96, 128 and 256")


def spread_in_standard_deviations(review: Review) -> None:
    """Unscaled logits, said to span tens of standard deviations: in logit units, yes; in standard deviations, no."""
    spread = {d_k: (row_stats(d_k).span.mean(), row_stats(d_k).span_sd.mean()) for d_k in (64, 256)}
    for d_k, (units, sds) in spread.items():
        assert 6.3 < sds < 6.7 and abs(units / np.sqrt(d_k) - sds) < 0.1  # tens of units, a few deviations
    assert fixed(spread[64][1], 1) == fixed(spread[256][1], 1)
    _add(review, 15, SCALING,
         "For $d_k$ from 64 to 256 unscaled logits span tens of standard deviations.",
         "imprecise",
         f"tens of logit units, not of standard deviations: over rows of {count(N_KEYS)} keys the logits span "
         f"{fixed(spread[64][0], 0)} units at $d_k = 64$ and {fixed(spread[256][0], 0)} at $d_k = 256$, but "
         f"{fixed(spread[64][1], 1)} of their standard deviations $\\sqrt{{d_k}}$ at both widths: measured in "
         "standard deviations, the spread does not grow with $d_k$", "scaling",
         brief="tens of logit units, but #{5} standard deviations")


def short_row_saturation(d_k: int, n_keys: int = 16, rows: int = 2000) -> float:
    """Fraction of unscaled rows over ``n_keys`` keys whose largest weight exceeds 0.99 (fewer keys: sharper)."""
    s, _ = logit_rows(d_k, rows=rows, n_keys=n_keys, seed=200 + d_k)
    a_max = softmax(s).max(axis=1)
    far_from(a_max, 0.99)
    return float((a_max > 0.99).mean())


def saturation_at_common_widths(review: Review) -> None:
    """Unscaled, at d_k = 64 to 256 the softmax is near one-hot and its gradient vanishes almost everywhere."""
    sat = {d_k: saturation(d_k) for d_k in (64, 128, 256)}
    short = {d_k: short_row_saturation(d_k) for d_k in (64, 128, 256)}
    assert sat[64][0] < 0.15 and sat[256][0] < 0.5 and sat[256][1] < 0.3
    assert max(short.values()) < 0.75 and all(short[d] > sat[d][0] for d in short)
    _add(review, 15, SCALING,
         "Unscaled, at $d_k$ 64 to 256, the softmax goes one-hot nearly everywhere.", "wrong",
         f"over {count(N_KEYS)} keys, the largest weight exceeds 0.99 in "
         + ", ".join(f"{percent(s, 0)}" for s, _ in sat.values())
         + " of rows at $d_k$ = 64, 128, 256, and the softmax Jacobian has norm below $10^{-3}$ in "
         + ", ".join(f"{percent(j, 0)}" for _, j in sat.values())
         + ": a minority of rows, not almost all. Short rows saturate more often, yet over 16 keys still only "
         + ", ".join(f"{percent(v, 0)}" for v in short.values()) + " of rows", "scaling",
         brief="one-hot in #{2} to #{4} of rows: a minority")


def scaled_variance_is_one(review: Review) -> None:
    """Dividing by sqrt(d_k) gives Var(s / sqrt(d_k)) = 1 whatever d_k."""
    scaled = {d_k: logit_variances(d_k)[1] for d_k in (16, 64, 256)}
    assert all(abs(v - 1) < 0.04 for v in scaled.values())
    _add(review, 15, SCALING,
         r"For unit-variance independent entries, dividing by $\sqrt{d_k}$ restores variance 1 for every "
         r"$d_k$.", "correct",
         "under the stated assumptions (independent components of mean 0 and variance 1): "
         "$\\operatorname{Var}(q \\cdot k/\\sqrt{d_k})$ = "
         + ", ".join(f"{fixed(v, 2)} at $d_k = {d_k}$" for d_k, v in scaled.items())
         + " (20,000 pairs each)", "scaling", brief="#{2}, #{4}, #{6} at $d_k$ = 16, 64, 256")


# ---------------------------------------------------------------------------------------------------------------
# Numerical stability
# ---------------------------------------------------------------------------------------------------------------

def float32_overflow(review: Review) -> None:
    """float32 overflows above roughly exp(88), about 1.6 x 10^38."""
    f32_max = float(np.finfo(np.float32).max)
    threshold = np.log(f32_max)
    with np.errstate(over="ignore"):
        e88, e89 = np.exp(np.float32(88)), np.exp(np.float32(89))
    assert np.isfinite(e88) and np.isinf(e89) and 88 < threshold < 89
    assert 1.65e38 < float(e88) < 1.66e38 and f32_max > 2 * 1.6e38
    _add(review, 19, STABILITY, r"float32 overflows past about $e^{88} \approx 1.6 \times 10^{38}$.",
         "imprecise",
         f"$e^x$ overflows float32 for $x$ above $\\ln(\\text{{max}})$ = {fixed(threshold, 2)}, so \"roughly "
         f"88\" holds; but the largest float32 is {fixed(f32_max / 1e38, 2)}$\\times 10^{{38}}$, "
         f"{fixed(f32_max / 1.6e38, 1)} times the figure quoted, and $e^{{88}}$ itself is a finite "
         f"{fixed(float(e88) / 1e38, 2)}$\\times 10^{{38}}$, which rounds to {fixed(float(e88) / 1e38, 1)}, not "
         "1.6", "softmax", brief=r"threshold #{1}; $e^{88}$ = #{9}$\times 10^{38}$, max #{4}$\times 10^{38}$")


def nan_reaches_every_gradient(review: Review) -> None:
    """exp(1000) overflows to inf, the division gives nan, and the nan silently reaches every gradient."""
    x = torch.tensor([[10.0, 0.0]])
    w = torch.tensor([[100.0, 100.2], [0.0, 0.0]], requires_grad=True)  # logits x W = [1000, 1002]
    logits = x @ w
    weights = torch.exp(logits) / torch.exp(logits).sum()  # the naive softmax, in float32
    (weights * torch.tensor([1.0, 2.0])).sum().backward()  # raises nothing
    w_stable = w.detach().clone().requires_grad_(True)
    (torch.softmax(x @ w_stable, dim=-1) * torch.tensor([1.0, 2.0])).sum().backward()
    assert torch.isnan(weights).all() and torch.isnan(w.grad).all() and torch.isfinite(w_stable.grad).all()
    _add(review, 19, STABILITY,
         "Logits 1000 and 1002 overflow, give NaN, and silently corrupt every gradient.", "correct",
         "in torch float32, logits $xW$ = [1000, 1002] through the naive $e^{s_j}/\\sum_k e^{s_k}$ give weights "
         f"[nan, nan]; `backward()` raises nothing and all {count(w.grad.numel())} entries of "
         "$\\partial\\mathcal{L}/\\partial W$ are nan (even those multiplied by a zero input). `torch.softmax` "
         "gives finite ones", "softmax", brief="weights NaN; all #{3} weight gradients NaN, no error raised")


def shift_invariance(review: Review) -> None:
    """Softmax is invariant to subtracting any constant m from every logit of a row."""
    s1, s2, s3, m = sp.symbols("s1 s2 s3 m", real=True)
    logits = (s1, s2, s3)
    shifted = sp.exp(s1 - m) / sum(sp.exp(s - m) for s in logits)
    plain = sp.exp(s1) / sum(sp.exp(s) for s in logits)
    assert sp.simplify(shifted - plain) == 0
    s = np.random.default_rng(3).standard_normal((5, 16))
    worst = max(np.abs(np.exp(s - shift) / np.exp(s - shift).sum(axis=1, keepdims=True) - softmax(s)).max()
                for shift in (-100.0, 7.5, 100.0))
    _add(review, 19, STABILITY,
         "Softmax ignores a common shift of its inputs.",
         "correct",
         "sympy simplifies $e^{s_1 - m}/\\sum_k e^{s_k - m} - e^{s_1}/\\sum_k e^{s_k}$ to 0 (three logits); "
         f"numerically, shifts $m$ = -100, 7.5 and 100 agree with `lib.softmax.softmax` to "
         f"{bound(worst, ROUNDOFF)}", "softmax", brief="sympy: difference 0; numeric shifts < #{6}")


def max_shift_cannot_overflow(review: Review) -> None:
    """With m = max, the largest shifted logit is exactly 0, its exponential exactly 1, and nothing overflows."""
    g = np.random.default_rng(4)
    rows = {"float16": (g.uniform(-3e4, 3e4, (200, 32))).astype(np.float16),
            "float32": (g.uniform(-1e38, 1e38, (200, 32))).astype(np.float32)}
    sum_error = {}
    for name, x in rows.items():
        shifted = x - x.max(axis=1, keepdims=True)
        e = np.exp(shifted)
        assert (shifted.max(axis=1) == 0).all() and (e.max(axis=1) == 1).all() and (e <= 1).all()
        a = softmax(x)
        assert np.isfinite(a).all() and np.isnan(softmax_naive(x)).any(axis=1).all()
        sum_error[name] = np.abs(a.astype(np.float64).sum(axis=1) - 1).max()
    _add(review, 19, STABILITY,
         "Shifting by the row maximum makes overflow impossible.", "correct",
         "200 rows of 32 logits drawn up to $\\pm 3 \\times 10^4$ in float16 and up to $\\pm 10^{38}$ in float32: "
         "in every row the shifted maximum is exactly 0, its exponential exactly 1 and every term at most 1. "
         "`lib.softmax.softmax` returns finite rows that sum to 1 "
         f"({bound(sum_error['float16'], 1e-2, 'float16: max |sum - 1|')}, "
         f"{bound(sum_error['float32'], 1e-6, 'float32: max |sum - 1|')}), where the naive formula gives `nan` "
         "in every row", "softmax", brief="#{0} extreme rows: all finite, sums within #{18} of 1")


# ---------------------------------------------------------------------------------------------------------------
# Backpropagation through attention: the worked example
# ---------------------------------------------------------------------------------------------------------------

def scaled_scores_and_exponentials(review: Review) -> None:
    """S = I, S' = S / sqrt(2) = diag(0.7071), exp(0.7071) = 2.0281 and the row sum 3.0281."""
    st = example_steps()
    s_ij, e = st.s_scaled[0, 0], np.exp(st.s_scaled[0, 0])
    assert (st.s == np.eye(2)).all() and st.s_scaled[0, 1] == 0 and st.s_scaled[1, 1] == s_ij
    assert fixed(s_ij, 4) == "0.7071" and fixed(e, 4) == "2.0281" and fixed(e + 1, 4) == "3.0281"
    _add(review, 34, BACKPROP,
         r"In the 2-token example $S' = I/\sqrt 2$ and row 1 exponentials are $2.0281$ and 1.", "correct",
         f"`lib.attention.attention_backward_steps`: $S = I$, $S'_{{11}} = S'_{{22}}$ = {fixed(s_ij, 4)}, "
         f"$e^{{S'_{{11}}}}$ = {fixed(e, 4)}, sum {fixed(e + 1, 4)}", "attention-backward",
         brief="lib: #{2}, #{4}, sum #{5}")


def mirror_image_reason(review: Review) -> None:
    """Row 2 of A is the mirror image of row 1 "by the symmetry of S'"."""
    st = example_steps()
    swap = np.array([[0, 1], [1, 0]])
    assert (swap @ st.s_scaled @ swap == st.s_scaled).all() and (st.a[1] == st.a[0][::-1]).all()
    q_sym = np.diag([1.0, 0.5])  # Q = K = diag(1, 0.5): S' is symmetric too, but its diagonal is not constant
    other = att.attention_backward_steps(q_sym, q_sym, V_EX, D_OUT_EX)
    assert (other.s_scaled == other.s_scaled.T).all()
    gap = np.abs(other.a[1] - other.a[0][::-1]).max()
    assert gap > 0.1
    _add(review, 34, BACKPROP,
         "Row 2 of $A$ mirrors row 1 because $S'$ is symmetric.", "imprecise",
         "the mirror image is right, the reason is not: it holds because swapping the two tokens leaves $S'$ "
         "unchanged ($\\Pi S' \\Pi = S'$ for the swap $\\Pi$: equal diagonal entries), not because $S'$ is "
         "symmetric. With $Q = K = \\operatorname{diag}(1, 0.5)$, $S'$ is symmetric and row 2 of $A$ is "
         f"[{fixed(other.a[1, 0], 4)}, {fixed(other.a[1, 1], 4)}], not the mirrored row 1 "
         f"[{fixed(other.a[0, 1], 4)}, {fixed(other.a[0, 0], 4)}]", "attention-backward",
         brief="swap symmetry does it: symmetric $S'$ can give [#{3}, #{4}]")


def upstream_gradient_is_ones(review: Review) -> None:
    """For L = sum(O), dL/dO is a matrix of ones."""
    grads = example_autograd()
    _add(review, 36, BACKPROP, r"For $\mathcal{L} = \sum O$ the upstream gradient is all ones.", "correct",
         f"`torch.autograd`: {agree(grads['do'], D_OUT_EX, 0, 'max |dL/dO - 1|', exact=True)}",
         "attention-backward", brief="autograd: max |dL/dO - 1| = #{1}")


def gradient_through_av(review: Review) -> None:
    """dL/dA = dL/dO V^T, dL/dV = A^T dL/dO, and every row of dL/dA is [3, 7], the column sums of V^T."""
    st, grads = example_steps(), example_autograd()
    assert (st.da == np.array([[3.0, 7.0], [3.0, 7.0]])).all() and (V_EX.T.sum(axis=0) == [3.0, 7.0]).all()
    _add(review, 38, BACKPROP,
         r"$\partial\mathcal{L}/\partial A = (\partial\mathcal{L}/\partial O)V^\top$, "
         r"$\partial\mathcal{L}/\partial V = A^\top \partial\mathcal{L}/\partial O$.", "correct",
         f"against `torch.autograd`: $\\partial\\mathcal{{L}}/\\partial A$ {agree(st.da, grads['da'], ROUNDOFF)}, "
         f"$\\partial\\mathcal{{L}}/\\partial V$ {agree(st.dv, grads['dv'], ROUNDOFF)}; the rows of "
         "$\\partial\\mathcal{L}/\\partial A$ are exactly [3, 7], the column sums of $V^\\top$",
         "attention-backward", brief="against autograd: < #{0}; rows [#{2}, #{3}]")


def jacobian_not_diagonal(review: Review) -> None:
    """The softmax Jacobian is not diagonal: moving one logit moves every weight of the row."""
    row = torch.tensor(example_steps().s_scaled[0])
    jac = torch.autograd.functional.jacobian(lambda s: torch.softmax(s, dim=0), row).numpy()
    a = example_steps().a[0]
    off = jac[0, 1]
    assert abs(off + a[0] * a[1]) < ROUNDOFF and abs(off) > 0.2
    _add(review, 40, BACKPROP,
         "The softmax Jacobian has off-diagonal terms: one logit moves every weight.",
         "correct",
         f"the Jacobian of row 1 by `torch.autograd` has off-diagonal entries {fixed(off, 4)} $= -a_1 a_2$; against "
         f"$\\operatorname{{diag}}(a) - aa^\\top$, {agree(jac, np.diag(a) - np.outer(a, a), ROUNDOFF)}",
         "attention-backward", brief="off-diagonal -#{1}; matches autograd (< #{4})")


def softmax_gradient_formula(review: Review) -> None:
    """dL/ds_j = a_j (da_j - sum_k a_k da_k)."""
    g = np.random.default_rng(5)
    s, da = g.standard_normal((5, 7)), g.standard_normal((5, 7))
    st = torch.tensor(s, requires_grad=True)
    torch.softmax(st, dim=-1).backward(torch.from_numpy(da))
    mine = softmax_vjp(softmax(s), da)
    _add(review, 40, BACKPROP,
         r"Softmax backward: $\partial\mathcal{L}/\partial s_j = a_j(da_j - \sum_k a_k da_k)$.", "correct",
         f"`lib.softmax.softmax_vjp` against `torch.autograd` on 5 random rows of 7: {agree(mine, st.grad, ROUNDOFF)}",
         "attention-backward", brief="lib against autograd: < #{2}")


def row_dot_value(review: Review) -> None:
    """For row 1, sum_k a_k da_k = 0.6698 x 3 + 0.3302 x 7 = 4.3210."""
    st = example_steps()
    row_dot = st.row_dot[0, 0]
    from_rounded = 0.6698 * 3 + 0.3302 * 7  # the note's four-decimal weights
    assert fixed(row_dot, 4) == "4.3210" and fixed(from_rounded, 4) == "4.3208"
    _add(review, 40, BACKPROP, r"In the example $\sum_k a_k da_k = 4.3210$.",
         "correct",
         f"{fixed(row_dot, 4)} from the unrounded weights (`lib`'s `row_dot`), as the note states; the "
         f"four-decimal factors it writes would give {fixed(from_rounded, 4)}", "attention-backward",
         brief="#{0} from the unrounded weights")


def rows_sum_to_zero(review: Review) -> None:
    """The two entries of each row of dL/dS' sum to exactly zero, whatever Q, K and V."""
    g = np.random.default_rng(6)
    worst = 0.0
    for n, d in ((2, 2), (5, 4), (16, 8)):
        q, k, v, d_out = (g.standard_normal((n, d)) for _ in range(4))
        st = att.attention_backward_steps(q, k, v, d_out)
        worst = max(worst, np.abs(st.ds_scaled.sum(axis=1)).max())
    _add(review, 40, BACKPROP,
         "Each row of the score gradient sums to zero, for any inputs.", "correct",
         "for random $Q, K, V$ and upstream gradients (2, 5 and 16 tokens), "
         f"{bound(worst, ROUNDOFF, 'max |row sum|')}, zero up to round-off (exactly zero in exact "
         "arithmetic: see worked answer 2 below)", "attention-backward", brief="random inputs: row sums < #{3}")


def jacobian_is_not_a_projection(review: Review) -> None:
    """The softmax Jacobian "projects" the incoming gradient onto the zero-sum subspace."""
    st = example_steps()
    a, da = st.a[0], st.da[0]
    jac = np.diag(a) - np.outer(a, a)
    projection = np.eye(2) - np.full((2, 2), 0.5)  # the orthogonal projection onto zero-sum vectors
    eigen = np.linalg.eigvalsh(jac)
    assert abs(eigen[0]) < ROUNDOFF and abs(eigen[1] - 2 * a[0] * a[1]) < ROUNDOFF
    assert np.abs(jac @ jac - jac).max() > 0.1
    assert np.abs(jac @ da - 2 * a[0] * a[1] * (projection @ da)).max() < ROUNDOFF
    _add(review, 40, BACKPROP,
         "The softmax Jacobian projects gradients onto zero-sum vectors.",
         "imprecise",
         "it maps into that subspace ($\\mathbf 1^\\top J = 0$), but it is not a projection ($J^2 \\neq J$). For "
         f"row 1 its nonzero eigenvalue is $2a_1a_2$ = {fixed(2 * a[0] * a[1], 4)}, not 1: the projection of "
         f"$da$ = [3, 7] is [{fixed((projection @ da)[0], 0)}, {fixed((projection @ da)[1], 0)}], while the "
         f"gradient is [{fixed(st.ds_scaled[0, 0], 4)}, {fixed(st.ds_scaled[0, 1], 4)}], "
         f"{fixed(2 * a[0] * a[1], 4)} times it. That shrinking factor is what vanishes when $a$ saturates",
         "attention-backward", brief="it maps into them but is no projection: eigenvalue #{7}, not 1")


def gradients_of_q_and_k(review: Review) -> None:
    """dL/dQ = dL/dS K and dL/dK = (dL/dS)^T Q, which for Q = K = I are dL/dS and its transpose."""
    st, grads = example_steps(), example_autograd()
    note_dk = np.array([[-0.6256, -0.6256], [0.6256, 0.6256]])
    assert (st.dq == st.ds).all() and (st.dk == st.ds.T).all()
    assert (np.round(st.dk, 4) == note_dk).all() and (np.round(st.dq, 4) == note_dk.T).all()
    _add(review, 44, BACKPROP,
         r"$\partial\mathcal{L}/\partial Q = (\partial\mathcal{L}/\partial S)K$ and "
         r"$\partial\mathcal{L}/\partial K = (\partial\mathcal{L}/\partial S)^\top Q$.", "correct",
         f"`lib` reproduces both to 4 decimals; against `torch.autograd`: $\\partial\\mathcal{{L}}/\\partial Q$ "
         f"{agree(st.dq, grads['dq'], ROUNDOFF)}, $\\partial\\mathcal{{L}}/\\partial K$ "
         f"{agree(st.dk, grads['dk'], ROUNDOFF)}", "attention-backward",
         brief="values reproduced; against autograd < #{1}")


def backward_by_rows(q: np.ndarray, k: np.ndarray, v: np.ndarray, d_out: np.ndarray) -> dict[str, np.ndarray]:
    """One head forward and backward in plain NumPy, the softmax's gradient taken one row at a time: the
    procedure of the note's short program, written here in the book's own code."""
    scale = 1 / np.sqrt(q.shape[1])
    logits = (q @ k.T) * scale  # S'
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    a = e / e.sum(axis=1, keepdims=True)
    g_a = d_out @ v.T
    g_logits = np.empty_like(a)
    for r, (row, g_row) in enumerate(zip(a, g_a, strict=True)):
        g_logits[r] = row * (g_row - row @ g_row)
    g_s = g_logits * scale  # through S' = S / sqrt(d_k)
    return {"A": a, "O": a @ v, "dA": g_a, "dV": a.T @ d_out, "dS_scaled": g_logits, "dS": g_s,
            "dQ": g_s @ k, "dK": g_s.T @ q}


# what the program prints for the example, to 4 decimals (its four arrays)
PRINTED = {"A": [[0.6698, 0.3302], [0.3302, 0.6698]], "O": [[1.6605, 2.6605], [2.3395, 3.3395]],
           "dS_scaled": [[-0.8847, 0.8847], [-0.8847, 0.8847]], "dS": [[-0.6256, 0.6256], [-0.6256, 0.6256]]}


def short_program(review: Review) -> None:
    """The program's procedure, re-implemented: its printed values, against lib and torch.autograd."""
    mine = backward_by_rows(Q_EX, K_EX, V_EX, D_OUT_EX)
    printed = sum(np.size(v) for v in PRINTED.values())
    assert printed == 16 and all(np.array_equal(mine[name].round(4), v) for name, v in PRINTED.items())
    st, grads = example_steps(), example_autograd()
    pairs = [("A", st.a), ("O", st.o), ("dA", st.da), ("dV", st.dv), ("dS_scaled", st.ds_scaled), ("dS", st.ds),
             ("dQ", st.dq), ("dK", st.dk)]
    vs_lib = max(np.abs(mine[name] - ref).max() for name, ref in pairs)
    vs_torch = max(np.abs(mine[name] - grads[key].numpy()).max()
                   for name, key in (("dQ", "dq"), ("dK", "dk"), ("dV", "dv"), ("dS_scaled", "ds_scaled")))
    rng = np.random.default_rng(46)  # beyond the example: random inputs, autograd as the oracle
    q, k, v, d_out = (rng.standard_normal(shape) for shape in ((5, 4), (7, 4), (7, 3), (5, 3)))
    mine_r = backward_by_rows(q, k, v, d_out)
    qt, kt, vt = (torch.tensor(m, requires_grad=True) for m in (q, k, v))
    (torch.softmax(qt @ kt.T / 2.0, dim=-1) @ vt).backward(torch.from_numpy(d_out))
    vs_random = max(np.abs(mine_r[name] - t.grad.numpy()).max() for name, t in (("dQ", qt), ("dK", kt), ("dV", vt)))
    assert max(vs_lib, vs_torch, vs_random) < ROUNDOFF
    _add(review, 46, BACKPROP,
         "A short NumPy program reproduces the hand derivation.", "correct",
         f"its procedure, re-implemented (`backward_by_rows`), gives all {count(printed)} printed numbers; every "
         f"array ($A$, $O$, $dA$, $dV$, $dS'$, $dS$, $dQ$, $dK$) matches `lib.attention.attention_backward_steps` "
         f"({bound(vs_lib, ROUNDOFF)}), and $dQ$, $dK$, $dV$ match `torch.autograd` on the example and on random "
         f"inputs ({bound(max(vs_torch, vs_random), ROUNDOFF)})", "attention-backward",
         brief=f"all {count(printed)} numbers; autograd "
               f"{bound(max(vs_torch, vs_random), ROUNDOFF)}")


# ---------------------------------------------------------------------------------------------------------------
# Compute cost
# ---------------------------------------------------------------------------------------------------------------

def crossover_algebra(review: Review) -> None:
    """2 n^2 d = 8 n d^2 gives n = 4 d: 16,384 tokens for d_model = 4096."""
    n, d = sp.symbols("n d", positive=True)
    roots = sp.solve(sp.Eq(2 * n**2 * d, 8 * n * d**2), n)
    assert roots == [4 * d] and fl.crossover_length(4096) == 16_384
    _add(review, 84, COMPUTE,
         "Equating $2n^2 d$ and $8nd^2$ gives the crossover $n = 4d$.", "correct",
         f"sympy solves it to $n = {sp.latex(roots[0])}$ (for $n > 0$); `lib.flops.crossover_length(4096)` = "
         f"{count(fl.crossover_length(4096))}, the same in FLOPs as in multiply-adds", "flops",
         brief="sympy: $n = 4d$; #{3} at $d$ = #{2}")


def quadratic_term_overtakes(review: Review) -> None:
    """Past about 16k tokens the quadratic score term costs more than the FFN."""
    ratio = {n: fl.layer_flops(n, 4096, 32, 4 * 4096).scores / fl.layer_flops(n, 4096, 32, 4 * 4096).ffn
             for n in (8192, 16_384, 32_768)}
    assert ratio == {8192: 0.5, 16_384: 1.0, 32_768: 2.0}
    _add(review, 84, COMPUTE,
         "Beyond about 16k tokens attention's quadratic term outweighs the FFN.",
         "correct",
         "for the $n^2$ term ($QK^\\top$ and $AV$) as stated, with `lib.flops.layer_flops` at "
         "$d_\\text{model} = 4096$: scores / FFN = "
         + ", ".join(f"{fixed(r, 1)} at $n$ = {count(n)}" for n, r in ratio.items()), "flops",
         brief="scores/FFN = #{2}, #{4}, #{6} at #{3}, #{5}, #{7} tokens")


# ---------------------------------------------------------------------------------------------------------------
# KV-cache memory
# ---------------------------------------------------------------------------------------------------------------

def recomputation_is_quadratic(review: Review) -> None:
    """Without a cache, recomputing K and V for every previous token at every step is an O(n^2) waste."""
    d, n = 4096, 2048
    no_cache = sum(2 * fl.matmul_flops(t, d, d) for t in range(1, n + 1))  # step t projects all t tokens
    with_cache = n * 2 * fl.matmul_flops(1, d, d)
    assert no_cache == with_cache * (n + 1) // 2
    _add(review, 88, KV,
         "Without a cache, recomputing past keys and values is quadratic waste.", "correct",
         f"the $K, V$ projections of $n$ steps cost $\\sum_{{t=1}}^n t = n(n+1)/2$ token-projections instead of "
         f"$n$: for $n$ = 2048, $d_\\text{{model}} = 4096$, {count(no_cache)} FLOPs per layer against "
         f"{count(with_cache)}, {fixed(no_cache / with_cache, 1)} times more", "beyond",
         brief="#{7} times more projection FLOPs at $n$ = #{3}")


def cache_is_exact(review: Review) -> None:
    """Caching K and V and appending the new token's reproduces the recomputed attention."""
    g = np.random.default_rng(7)
    n, d = 12, 16
    x = g.standard_normal((n, d))
    w_q, w_k, w_v = (g.standard_normal((d, d)) / np.sqrt(d) for _ in range(3))
    full, _ = att.attention(x @ w_q, x @ w_k, x @ w_v, att.causal_mask(n))
    k_cache, v_cache, steps = np.zeros((0, d)), np.zeros((0, d)), []
    for t in range(n):
        k_cache = np.vstack([k_cache, x[t:t + 1] @ w_k])  # append only the new token's key and value
        v_cache = np.vstack([v_cache, x[t:t + 1] @ w_v])
        steps.append(att.attention(x[t:t + 1] @ w_q, k_cache, v_cache)[0])
    _add(review, 88, KV,
         "Inference caches $K$ and $V$ per layer and appends the new token's.",
         "correct",
         f"decoding 12 tokens with an appended cache gives the causal attention computed in one pass: "
         f"{agree(np.vstack(steps), full, ROUNDOFF)}", "beyond", brief="cached decoding equals one causal pass: < #{1}")


def seven_b_shape(review: Review) -> None:
    """The 7B-class model has L = 32 layers and d_model = 4096."""
    llama = load_config(FIXTURES / "Llama-2-7b-hf.config.json")
    n_params = sz.parameter_count(llama).total
    assert (llama.n_layers, llama.d_model, llama.n_heads) == (32, 4096, 32)
    _add(review, 90, KV, r"A 7B-class model has 32 layers and $d_\text{model} = 4096$.", "correct",
         f"Llama 2 7B's configuration: {llama.n_layers} layers, $d_\\text{{model}}$ = {llama.d_model}, "
         f"{llama.n_heads} heads, {count(n_params)} parameters", "kv-cache", brief="Llama 2 7B: #{2} layers, #{3} wide")


# ---------------------------------------------------------------------------------------------------------------
# Assembling the block
# ---------------------------------------------------------------------------------------------------------------

def heads_split_and_concatenate(review: Review) -> None:
    """MultiHead splits d_model into h heads of d_model / h and concatenates them back to width d_model."""
    x = np.random.default_rng(8).standard_normal((10, 512))
    heads = mh.split_heads(x, 8)
    assert heads.shape == (8, 10, 64) and mh.merge_heads(heads).shape == (10, 512)
    _add(review, 94, BLOCK,
         r"Heads split $d_\text{model}$ into $h$ parts of $d_\text{model}/h$ and rejoin them.", "correct",
         f"`lib.multihead.split_heads` turns (10, 512) into {heads.shape} for $h = 8$; `merge_heads` restores "
         f"(10, 512), {agree(mh.merge_heads(heads), x, 0, exact=True)}", "multihead",
         brief="(#{0}, #{1}) to (#{2}, #{3}, #{4}) and back exactly")


def output_projection_missing(review: Review) -> None:
    """The concatenated head outputs are added to x through the residual connection."""
    g = np.random.default_rng(9)
    d, h = 512, 8
    params = mh.init_params(d, h, rng=g)
    x = g.standard_normal((10, d))
    out, _ = mh.multi_head_attention(x, None, params, h)
    q, k, v = (mh.split_heads(x @ w + b, h) for w, b in ((params.w_q, params.b_q), (params.w_k, params.b_k),
                                                         (params.w_v, params.b_v)))
    concatenated = mh.merge_heads(att.attention(q, k, v)[0])  # what the note adds to x
    gap = np.abs(out - concatenated).max()
    total, without_o = mh.param_count(d, h), mh.param_count(d, h) - (d * d + d)
    assert gap > 0.5 and total - without_o == total // 4
    _add(review, 94, BLOCK,
         "Concatenated heads go straight into the residual sum.", "wrong",
         "the concatenation is multiplied by the output projection $W^O$ before the residual addition. "
         f"Left out, the sub-layer's output differs by up to {fixed(gap, 2)} ($d_\\text{{model}} = 512$, $h = 8$), "
         f"and the layer loses {count(total - without_o)} of its {count(total)} parameters "
         f"({percent((total - without_o) / total, 0)})", "multihead",
         brief="$W^O$ comes first: without it #{3} of #{4} parameters vanish")


def residual_costs_nothing(review: Review) -> None:
    """The residual path costs nothing in FLOPs."""
    n, d = 2048, 4096
    residual = 2 * n * d  # two residual additions per layer, one FLOP per element each
    layer = fl.layer_flops(n, d, 32, 4 * d).total
    assert residual / layer < 1e-4
    _add(review, 94, BLOCK, "The residual connection costs no FLOPs.", "imprecise",
         f"it costs one addition per element, $n\\,d_\\text{{model}}$ per sub-layer: {count(residual)} FLOPs per "
         f"layer at $n = 2048$, $d_\\text{{model}} = 4096$, negligible ({fixed(100 * residual / layer, 4)}% of the "
         "layer's matrix products) but not zero", "flops", brief="one add per element: #{0} FLOPs per layer, #{3}")


def layernorm_negligible(review: Review) -> None:
    """LayerNorm is O(n d_model) per layer, negligible; the matrix products dominate a block's compute."""
    n, d, h = 2048, 4096, 32
    layer = fl.layer_flops(n, d, h, 4 * d)
    layer_norms = 2 * 7 * n * d  # two LayerNorms; mean, centre, square, mean, scale, gamma, beta per element
    softmax_work = 4 * h * n * n  # scale, subtract the max, exponentiate, divide per logit
    elementwise = layer_norms + 2 * n * d + softmax_work
    assert layer_norms / layer.total < 1e-3 and elementwise / layer.total < 0.01
    _add(review, 94, BLOCK,
         "LayerNorm's cost is negligible next to the matrix products.", "correct",
         "counting one FLOP per elementwise operation at $n = 2048$, $d_\\text{model} = 4096$, $h = 32$: the two "
         f"LayerNorms are {fixed(100 * layer_norms / layer.total, 3)}% of the layer's matrix-product FLOPs, and "
         f"all elementwise work with the residuals and the softmax {fixed(100 * elementwise / layer.total, 2)}%",
         "flops", brief="#{3} of the layer's matrix FLOPs")


# ---------------------------------------------------------------------------------------------------------------
# Correcting a common misconception
# ---------------------------------------------------------------------------------------------------------------

def exactly_one_regardless(review: Review) -> None:
    """The scale fixes the logit variance across widths; it is 1 only for unit-variance inputs."""
    var = projected_variances()
    assert abs(var["nn.Linear"][1] - 1 / 9) < 0.01 and var["GPT-2"][1] < 0.1
    _add(review, 98, MISCONCEPTION,
         r"$\sqrt{d_k}$ keeps logit variance at exactly 1 whatever the head width.", "assumption",
         "it keeps the variance independent of $d_k$, but at 1 only for unit-variance query and key components, "
         "which this section does not restate: with `torch.nn.Linear`'s default initialisation the scaled logits "
         f"start at variance {fixed(var['nn.Linear'][1], 2)}, with GPT-2's at {fixed(var['GPT-2'][1], 2)} "
         "($d_\\text{model} = 768$, $d_k = 64$)", "scaling",
         brief="1 only for unit-variance inputs: #{1} at init")


def spread_at_1024(review: Review) -> None:
    """Unscaled at d_k = 1024, Var(s) = 1024: a logit spread of roughly 32 standard deviations."""
    st = row_stats(1024)
    var, units, sds = st.logit_var, st.span.mean(), st.span_sd.mean()
    assert abs(var / 1024 - 1) < 0.02 and 6.3 < sds < 6.7 and abs(units / 32 - sds) < 0.1
    _add(review, 98, MISCONCEPTION,
         "Unscaled at $d_k = 1024$, logits spread about 32 standard deviations.", "imprecise",
         f"the variance is right (measured {fixed(var / 1024, 2)}$\\times 1024$), but 32 is one standard deviation "
         f"in logit units; rows of {count(N_KEYS)} keys span {fixed(units, 0)} units, "
         f"{fixed(sds, 1)} standard deviations", "scaling", brief="32 is one standard deviation; rows span #{5}")


def saturation_at_1024(review: Review) -> None:
    """Unscaled at d_k = 1024: the share of rows that come out nearly one-hot."""
    one_hot, _ = saturation(1024)
    mean_max = row_stats(1024).a_max.mean()
    assert 0.5 < one_hot < 0.7 and 0.9 < mean_max < 0.95
    _add(review, 98, MISCONCEPTION,
         "Unscaled at $d_k = 1024$ the softmax is one-hot nearly everywhere.", "imprecise",
         f"it saturates in most rows, not almost all: over {count(N_KEYS)} keys the largest weight exceeds 0.99 in "
         f"{percent(one_hot, 0)} of rows (mean largest weight {fixed(mean_max, 2)})", "scaling",
         brief="top weight above 0.99 in #{2} of rows")


def one_hot_kills_gradient(review: Review) -> None:
    """Near a one-hot row the softmax backward a * (da - a.da) goes to zero, linearly in 1 - max a."""
    st = row_stats(1024)
    eps, jn = st.rest, st.jac
    row = st.least_saturated  # jacobian_norm against the explicit matrix, on one row
    assert abs(jacobian_norm(row[None])[0] - np.linalg.norm(np.diag(row) - np.outer(row, row))) < ROUNDOFF
    assert (jn <= 4 * eps * (1 + 1e-9)).all() and (jn >= st.a_max * eps * (1 - 1e-9)).all()
    _add(review, 98, MISCONCEPTION,
         "The softmax gradient shrinks to zero as a row nears one-hot.", "correct",
         "with $\\varepsilon = 1 - \\max_j a_j$, the Jacobian norm lies between $(1 - \\varepsilon)\\varepsilon$ "
         f"and $4\\varepsilon$, as it does in every one of {count(len(jn))} unscaled rows at $d_k = 1024$: it "
         "vanishes linearly as the row becomes one-hot", "scaling",
         brief=r"norm between $(1-\varepsilon)\varepsilon$ and $4\varepsilon$ in all #{3} rows")


def failure_grows_with_width(review: Review) -> None:
    """The failure mode scales directly with head dimension."""
    widths = (64, 128, 256, 1024)  # the widths the note names
    one_hot = [saturation(d_k)[0] for d_k in widths]
    assert all(b > a for a, b in zip(one_hot, one_hot[1:], strict=False))
    _add(review, 98, MISCONCEPTION, "Without scaling, saturation worsens as heads widen.", "correct",
         "rows whose largest weight exceeds 0.99 (unscaled, " + f"{count(N_KEYS)} keys): "
         + ", ".join(f"{percent(f, 0)} at $d_k = {d_k}$" for d_k, f in zip(widths, one_hot, strict=True)),
         "scaling", brief="rows above 0.99: #{2}, #{4}, #{6}, #{8} from $d_k$ = 64 to 1024")


def production_head_widths(review: Review) -> None:
    """Production models pin d_k near 64-128 and add heads instead, "exactly" because of this saturation."""
    names = ["gpt2", "Falcon-7B", "Phi-3-mini-4k-instruct", "Llama-2-7b-hf", "Qwen3-8B", "starcoder2-7b",
             "gemma-7b", "gemma-2-9b"]
    cfgs = [load_config(FIXTURES / f"{name}.config.json") for name in names]
    head_dims, widths = sorted({c.head_dim for c in cfgs}), sorted(c.d_model for c in cfgs)
    scaled_max = {d_k: largest_scaled_weight(d_k) for d_k in (64, 1024)}
    assert head_dims == [64, 96, 128, 256] and widths[0] == 768 and widths[-1] > 4000
    assert all(m < 0.9 for m in scaled_max.values())
    _add(review, 98, MISCONCEPTION,
         "Saturation is why production models keep $d_k$ near 64-128 and add heads.", "imprecise",
         f"the pattern holds ($d_k$ in {{{', '.join(map(str, head_dims))}}} while $d_\\text{{model}}$ runs from "
         f"{widths[0]} to {widths[-1]} in eight published configurations, Gemma's 256 above the range given), "
         "but not the reason: every such model divides by $\\sqrt{d_k}$, and then the largest weight in "
         f"{count(ROWS)} rows of {count(N_KEYS)} keys is {fixed(scaled_max[64], 2)} at $d_k = 64$ and "
         f"{fixed(scaled_max[1024], 2)} at $d_k = 1024$: saturation sets no limit on a scaled head's width",
         "scaling", brief="scaled heads do not saturate")


# ---------------------------------------------------------------------------------------------------------------
# Worked answers
# ---------------------------------------------------------------------------------------------------------------

def dividing_by_d_k(review: Review) -> None:
    """Dividing by d_k gives variance 1/d_k, over-flattening the softmax and destroying the ability to distinguish."""
    g = np.random.default_rng(12)
    d_k = 256
    var_times_dk = logit_variances(d_k)[0] / d_k  # Var(s / d_k) * d_k = Var(s) / d_k
    q, k = g.standard_normal((500, d_k)), g.standard_normal((N_KEYS, d_k))
    _, a_dk = att.attention(q, k, np.zeros((N_KEYS, 1)), scale=1 / d_k)
    w_q = g.standard_normal((d_k, d_k)) / np.sqrt(d_k)  # any query projection
    x = g.standard_normal((N_KEYS, d_k))
    _, a_std = att.attention(x @ w_q, k, np.zeros((N_KEYS, 1)))
    _, a_rescaled = att.attention(x @ (np.sqrt(d_k) * w_q), k, np.zeros((N_KEYS, 1)), scale=1 / d_k)
    assert abs(var_times_dk - 1) < 0.04 and a_dk.max(axis=1).mean() < 2 / N_KEYS
    _add(review, 113, "Worked answers, 1",
         "Dividing by $d_k$ instead would flatten the softmax and stop the model telling tokens apart.",
         "imprecise",
         f"$1/d_k$ is right (measured $\\operatorname{{Var}}(s/d_k) \\cdot d_k$ = {fixed(var_times_dk, 2)} at "
         f"$d_k = 256$), and at initialisation the rows are near uniform (largest weight "
         f"{fixed(a_dk.max(axis=1).mean() * N_KEYS, 2)}$/n$ over $n$ = {count(N_KEYS)} keys). Nothing is "
         "destroyed: the factor is absorbed by $W_Q$, and $\\sqrt{d_k}\\,W_Q$ under $1/d_k$ is the standard head "
         f"({agree(a_rescaled, a_std, ROUNDOFF)}); the width dependence of the variance is the reason to prefer "
         "$\\sqrt{d_k}$", "scaling", brief="$W_Q$ absorbs the factor: same outputs (< #{6})")


def sum_zero_algebra(review: Review) -> None:
    """Summing a_j (da_j - sum_k a_k da_k) over j gives zero because sum_j a_j = 1."""
    a = sp.symbols("a1:4", positive=True)
    da = sp.symbols("da1:4", real=True)
    row_dot = sum(ai * dai for ai, dai in zip(a, da, strict=True))
    total = sum(ai * (dai - row_dot) for ai, dai in zip(a, da, strict=True))
    factored = sp.factor(total)
    assert sp.simplify(total - row_dot * (1 - sum(a))) == 0 and sp.simplify(factored + row_dot * (sum(a) - 1)) == 0
    assert sp.simplify(total.subs(a[2], 1 - a[0] - a[1])) == 0
    _add(review, 115, "Worked answers, 2",
         r"The zero row sum follows algebraically from $\sum_j a_j = 1$.", "correct",
         f"sympy, three logits: the sum factors as ${sp.latex(-row_dot)}$ times ${sp.latex(sum(a) - 1)}$, "
         "which is 0 once $a_3 = 1 - a_1 - a_2$",
         "attention-backward", brief=r"sympy factors the sum with $\sum_j a_j - 1$")


def cache_doubles(review: Review) -> None:
    """At 4096 tokens: 2 GiB per sequence, 400 GiB for 200, exactly double."""
    per_tok = sz.mha_kv_cache_bytes_per_token(32, 4096, 32, "fp16")
    per_seq = sz.kv_cache_bytes(per_tok, 4096)
    total = sz.kv_cache_bytes(per_tok, 4096, sequences=200)
    assert per_seq == 2 * GiB and total == 400 * GiB and total == 2 * sz.kv_cache_bytes(per_tok, 2048, 200)
    _add(review, 117, "Worked answers, 3(a)",
         "At 4096 tokens the cache doubles to 2 GiB per sequence, 400 GiB for 200.", "correct",
         f"`lib.sizing`: {count(per_tok / KiB)} KiB per token, {count(per_seq / GiB)} GiB per sequence, "
         f"{count(total / GiB)} GiB for 200, exactly twice the figure at 2048 tokens", "kv-cache",
         brief="#{1} GiB and #{2} GiB: linear in context")


def ffn_doubles(review: Review) -> None:
    """Feed-forward compute per layer is proportional to n, so it only doubles."""
    before, after = (fl.layer_flops(n, 4096, 32, 4 * 4096).ffn for n in (2048, 4096))
    assert after == 2 * before
    _add(review, 117, "Worked answers, 3(c)",
         "FFN compute per layer grows linearly with context.",
         "correct",
         f"`lib.flops.layer_flops`: {count(before)} FLOPs at 2048 tokens, {count(after)} at 4096, a ratio of "
         f"{count(after // before)}", "flops", brief="#{0} to #{2} FLOPs: x#{4}")


def weights_do_not_change(review: Review) -> None:
    """Model weight memory does not depend on the context length."""
    weights = sz.weight_bytes(7 * 10**9, "fp16")
    llama = sz.parameter_count(load_config(FIXTURES / "Llama-2-7b-hf.config.json")).total
    assert fixed(weights / GiB, 2) == "13.04"
    _add(review, 117, "Worked answers, 3(d)",
         "Weight memory does not depend on context length.", "correct",
         f"the weights are parameters × bytes: {fixed(weights / GiB, 2)} GiB for $7 \\times 10^9$ in fp16 at any "
         f"context ({fixed(sz.weight_bytes(llama, 'fp16') / GiB, 2)} GiB for Llama 2 7B's own count: see the "
         "weights entry above)", "kv-cache", brief="#{0} GiB at any context (#{5} for Llama 2 7B)")


def crossover_worked_answer(review: Review) -> None:
    """Dividing 2 n^2 d = 8 n d^2 by 2 n d gives n = 4 d = 16,384."""
    n, d = sp.symbols("n d", positive=True)
    lhs, rhs = sp.simplify(2 * n**2 * d / (2 * n * d)), sp.simplify(8 * n * d**2 / (2 * n * d))
    assert lhs == n and rhs == 4 * d and rhs.subs(d, 4096) == 16_384
    _add(review, 119, "Worked answers, 4",
         "Dividing both sides by $2nd$ gives $n = 4d$ = 16,384 at $d = 4096$.", "correct",
         f"sympy: the two sides become ${sp.latex(lhs)}$ and ${sp.latex(rhs)}$, and $4 \\times 4096$ = "
         f"{count(int(rhs.subs(d, 4096)))} (in multiply-adds, as the note counts; the crossover is the same in "
         "FLOPs)", "flops", brief="sympy; #{3}")


def overflow_worked_answer(review: Review) -> None:
    """exp(1000) overflows float32 to inf, inf/inf is nan; the shifted computation gives [0.1192, 0.8808]."""
    x = np.array([1000.0, 1002.0], dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        e_naive = np.exp(x)
        naive = softmax_naive(x)
    shifted = x - x.max()
    e = np.exp(shifted.astype(np.float64))
    stable = softmax(x)
    assert np.isinf(e_naive).all() and np.isnan(naive).all() and (shifted == [-2, 0]).all()
    assert [fixed(v, 4) for v in (e[0], e.sum(), stable[0], stable[1])] == ["0.1353", "1.1353", "0.1192", "0.8808"]
    _add(review, 121, "Worked answers, 5",
         "$e^{1000}$ overflows to inf and the ratio to NaN; shifted, the softmax is [0.1192, 0.8808].",
         "correct",
         f"in float32, $e^{{1000}}$ = {e_naive[0]} and the naive softmax gives {naive.tolist()}; shifted: "
         f"[{fixed(shifted[0], 0)}, {fixed(shifted[1], 0)}], exponentials [{fixed(e[0], 4)}, {fixed(e[1], 0)}], "
         f"sum {fixed(e.sum(), 4)}, softmax [{fixed(stable[0], 4)}, {fixed(stable[1], 4)}]", "softmax",
         brief="float32: [nan, nan]; shifted: [#{7}, #{8}]")


def int8_and_longer_context(review: Review) -> None:
    """int8 cache at 4096 tokens: 256 KiB per token, 1 GiB per sequence, 200 GiB for 200, as before."""
    per_tok = sz.mha_kv_cache_bytes_per_token(32, 4096, 32, "int8")
    per_seq = sz.kv_cache_bytes(per_tok, 4096)
    total = sz.kv_cache_bytes(per_tok, 4096, sequences=200)
    fp16_2048 = sz.kv_cache_bytes(sz.mha_kv_cache_bytes_per_token(32, 4096, 32, "fp16"), 2048, sequences=200)
    scales = 200 * 4096 * 2 * 32 * 32 * 2  # one fp16 scale per head, token, layer, for K and for V
    assert per_tok == 256 * KiB and per_seq == GiB and total == fp16_2048 == 200 * GiB
    _add(review, 123, "Worked answers, 6",
         "int8 at 4096 tokens equals fp16 at 2048.", "assumption",
         f"`lib.sizing`: {count(per_tok / KiB)} KiB per token, {count(per_seq / GiB)} GiB per sequence, "
         f"{count(total / GiB)} GiB in all, equal to the fp16 cache at 2048 tokens. A quantised cache that also "
         f"stores one fp16 scale per head and token would add {percent(scales / total, 2)}", "kv-cache",
         brief="#{2} GiB for 200 only if no scales are stored; they add #{6}")


def check(review: Review) -> None:
    """Check every checkable claim of the First-Principles Walkthrough, in the note's order."""
    attention_formula(review)
    unit_variance_after_projection(review)
    mean_and_term_variance(review)
    variance_grows_with_d_k(review)
    ratio_is_exp_delta(review)
    real_head_widths(review)
    spread_in_standard_deviations(review)
    saturation_at_common_widths(review)
    scaled_variance_is_one(review)
    float32_overflow(review)
    nan_reaches_every_gradient(review)
    shift_invariance(review)
    max_shift_cannot_overflow(review)
    scaled_scores_and_exponentials(review)
    mirror_image_reason(review)
    upstream_gradient_is_ones(review)
    gradient_through_av(review)
    jacobian_not_diagonal(review)
    softmax_gradient_formula(review)
    row_dot_value(review)
    rows_sum_to_zero(review)
    jacobian_is_not_a_projection(review)
    gradients_of_q_and_k(review)
    short_program(review)
    crossover_algebra(review)
    quadratic_term_overtakes(review)
    recomputation_is_quadratic(review)
    cache_is_exact(review)
    seven_b_shape(review)
    heads_split_and_concatenate(review)
    output_projection_missing(review)
    residual_costs_nothing(review)
    layernorm_negligible(review)
    exactly_one_regardless(review)
    spread_at_1024(review)
    saturation_at_1024(review)
    one_hot_kills_gradient(review)
    failure_grows_with_width(review)
    production_head_widths(review)
    dividing_by_d_k(review)
    sum_zero_algebra(review)
    cache_doubles(review)
    ffn_doubles(review)
    weights_do_not_change(review)
    crossover_worked_answer(review)
    overflow_worked_answer(review)
    int8_and_longer_context(review)
