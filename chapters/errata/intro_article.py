"""The Introductory Article (note key ``intro-article``): every checkable claim, in the note's order.

Each function checks one claim (or a tight group), asserts what it finds and records it with ``review.add``.
Three claims of this note are checked in ``worked`` and are not repeated here: the
scaling "keeps the variance at 1" (section 4.3), the ``masked_fill(mask == 0, -1e9)`` line of the PyTorch
sketch, and the cost of $QK^\\top$ (section 9).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import sympy as sp
import torch

import lib
import lib.attention as att
import lib.efficient as eff
import lib.multihead as mh
import lib.positional as pos
import lib.pt.attention as pt_att
import lib.recurrence as rec
from lib.blocks import encoder_layer_param_count
from lib.book.fmt import agree, bound, count, fixed, percent, sig
from lib.constants import BYTES_PER_DTYPE, GB
from lib.ffn import feed_forward, ffn_param_count, relu
from lib.flops import attention_score_flops
from lib.norms import layer_norm, layer_norm_backward, layer_norm_param_count
from lib.planner.config import load_config
from lib.planner.counts import parameter_count
from lib.planner.gpus import GPUS
from lib.pt.model import Seq2SeqTransformer
from lib.softmax import softmax, softmax_jacobian_norm
from lib.tiled import io_elements, tiled_attention

from . import Review, longest_stored_n, normal_expectation, sample_dot_products

NOTE = "intro-article"
FIXTURES = Path(lib.__file__).resolve().parents[1] / "tests" / "fixtures"


def shape(a) -> str:
    """An array's shape as text, e.g. ``(10, 64)``."""
    return "(" + ", ".join(count(n) for n in a.shape) + ")"


def diagonal_spread(s: np.ndarray) -> float:
    """Largest (max - min) along any diagonal of ``s``: 0 for a matrix that depends on ``j - i`` alone."""
    return max(float(np.ptp(np.diagonal(s, offset=o))) for o in range(-s.shape[0] + 1, s.shape[1]))


# 1. Limitations of conventional methods


def rnn_information_fades(review: Review) -> None:
    """Line 17: in a recurrent network the first words' information fades by the end (vanishing gradient)."""
    d, n = 32, 101  # state width, tokens: a path of 100 steps from the first token to the last
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, d))
    w_xh = rng.normal(size=(d, d)) * 0.5 / np.sqrt(d)
    chain = {}  # spectral radius of W_hh -> ||dh_101 / dh_1||_2
    for rho in (0.5, 1.0, 3.0):
        w_hh = rec.random_recurrent_weight(d, rho, np.random.default_rng(1))
        h = rec.rnn_forward(x, w_xh, w_hh)
        chain[rho] = rec.jacobian_chain_norms(rec.rnn_jacobians(h, w_hh))[-1]
    assert chain[3.0] > 1e8
    review.add(
        NOTE, 17, "1. Limitations of conventional methods",
        "RNN gradients to early words vanish over a long sentence.",
        "assumption",
        "true when the recurrence contracts. For a tanh RNN of width 32 over 100 steps (`lib.recurrence`), the "
        "factor $\\|\\partial h_{101}/\\partial h_1\\|$ that carries the first token's gradient vanishes when the "
        f"recurrent weight has spectral radius 0.5 ({bound(chain[0.5], 1e-30, 'norm')}) or 1 "
        f"({bound(chain[1.0], 1e-9, 'norm')}), but exceeds $10^8$ for radius 3: the same chain of Jacobians "
        "makes the gradient explode instead, which the note does not mention",
        "beyond", brief="only if it contracts: radius 3 explodes instead",
    )


def rnn_is_sequential(review: Review) -> None:
    """Line 18: a recurrent network must process the words one after another, which rules out parallelism."""
    n, d = 2048, 512
    rnn, scores = rec.rnn_layer_flops(n, d), attention_score_flops(n, d)
    assert rnn == 4 * n * d**2 and scores == 4 * n**2 * d and scores == 4 * rnn
    review.add(
        NOTE, 18, "1. Limitations of conventional methods",
        "Reading one word at a time, an RNN cannot parallelise.",
        "correct",
        f"$h_t$ needs $h_{{t-1}}$, so {count(n)} tokens are {count(n)} dependent steps, while attention's "
        "$QK^\\top$ and $AV$ are two matrix products with no dependency between positions. The gain is "
        f"parallelism, not arithmetic: at $n$ = {count(n)}, $d$ = {count(d)} the recurrence costs {count(rnn)} "
        f"FLOPs and attention's two products {count(scores)}, {count(scores // rnn)} times more",
        "beyond", brief="#{1} dependent steps; attention has none",
    )


def attention_keeps_information(review: Review) -> None:
    """Line 20: with attention no information is lost however long the sequence is."""
    n, d = 100, 16
    rng = np.random.default_rng(2)
    q, k, v = (rng.normal(size=(n, d)) for _ in range(3))
    k[0] = 3.0 * q[-1]  # the first key matches the last query
    _, a = att.attention(q, k, v, att.causal_mask(n))

    def last_output(v_t: torch.Tensor) -> torch.Tensor:
        return torch.softmax(torch.from_numpy(q[-1] @ k.T / np.sqrt(d)), -1) @ v_t

    jac = torch.autograd.functional.jacobian(last_output, torch.from_numpy(v)).numpy()  # (d, n, d)
    path = agree(jac[:, 0, :], a[-1, 0] * np.eye(d), 1e-12, "max |do_t/dv_1 - a_t1 I|")
    assert a[-1, 0] > 0.99
    n_long = 4096
    _, a_even = att.attention(np.zeros((1, d)), rng.normal(size=(n_long, d)), rng.normal(size=(n_long, d)))
    agree(a_even, np.full((1, n_long), 1 / n_long), 0, exact=True)
    review.add(
        NOTE, 20, "1. Limitations of conventional methods",
        "Attention loses nothing over long sequences and parallelises.",
        "assumption",
        "the path is short at any distance: $\\partial o_t/\\partial v_1 = a_{t1} I$, one step "
        f"({path}, autograd over 100 tokens), and a query that looks for token 1 gives it a weight above 0.99. "
        "But what arrives is the weight the query chooses: a query spread evenly over "
        f"{count(n_long)} tokens gives each {sig(a_even[0, 0], 2)} ($1/n$), so a token's contribution is diluted "
        "as the context grows unless the query concentrates on it",
        "beyond", brief="one-step paths, but an even spread gives each of #{8} tokens #{9}",
    )


# 3. Word vectorisation and positional encoding


def embedding_lookup(review: Review) -> None:
    """Lines 36-38: the embedding matrix turns each token into a d_model vector and a sentence into N x d_model."""
    vocab, d_model = 1000, 512
    rng = np.random.default_rng(3)
    w_e = rng.standard_normal((vocab, d_model))
    ids = [5, 17, 999, 5]
    one_hot = np.eye(vocab)[ids]  # (N, V)
    x = one_hot @ w_e
    review.add(
        NOTE, 36, "3.1 Input embedding",
        r"Embedding $N$ tokens gives an $N \times d_{model}$ matrix.",
        "correct",
        f"a one-hot row times $W_E$ ($V$ = {count(vocab)}, $d_{{model}}$ = {count(d_model)}) picks out row $w_i$ "
        f"({agree(x, w_e[ids], 0, 'max |one-hot W_E - W_E[w]|', exact=True)}); {count(len(ids))} tokens give $X$ "
        f"of shape {shape(x)}",
        "notation", brief="#{3} tokens give (#{4}, #{5}), rows picked exactly",
    )


def word_order_is_lost(review: Review) -> None:
    """Line 42: processed in parallel, "a dog bites a man" and "a man bites a dog" look the same."""
    d_model, h = 16, 4
    rng = np.random.default_rng(4)
    embed = dict(zip(["a", "dog", "bites", "man"], rng.standard_normal((4, d_model)), strict=True))
    params = mh.init_params(d_model, h, rng=rng)
    first, second = "a dog bites a man".split(), "a man bites a dog".split()
    x1, x2 = (np.stack([embed[w] for w in s]) for s in (first, second))
    out1, _ = mh.multi_head_attention(x1, None, params, h)
    out2, _ = mh.multi_head_attention(x2, None, params, h)
    same_dog = agree(out1[1], out2[4], 1e-12, "max |difference|")
    same_mean = agree(out1.mean(axis=0), out2.mean(axis=0), 1e-12, "max |difference|")
    pe = pos.sinusoidal_encoding(5, d_model)
    with_pe1, _ = mh.multi_head_attention(x1 + pe, None, params, h)
    with_pe2, _ = mh.multi_head_attention(x2 + pe, None, params, h)
    gap = float(np.abs(with_pe1[1] - with_pe2[4]).max())
    assert gap > 0.01
    review.add(
        NOTE, 42, "3.2 Positional encoding",
        "Without positions, reordered sentences look alike.",
        "correct",
        f"without positions, multi-head self-attention gives \"dog\" the same output in both sentences ({same_dog}), "
        f"and the two sentences the same mean output ({same_mean}). With the sinusoidal table added, the two "
        f"\"dog\" vectors differ by up to {fixed(gap, 2)}",
        "positional", brief="same outputs (< #{0}); with positions they differ",
    )


def encoding_index_ranges(review: Review) -> None:
    """Line 46: positions run over 0..N-1 and the dimension index i over 0..d_model/2 - 1."""
    n, d = 50, 512
    table = pos.sinusoidal_encoding(n, d)
    p, i = np.arange(n)[:, None], np.arange(d // 2)[None, :]
    angle = p / 10000 ** (2 * i / d)
    assert pos.sinusoid_frequencies(d).size == d // 2 and table.shape == (n, d)
    review.add(
        NOTE, 46, "3.2 Positional encoding",
        "Each sinusoidal index $i < d_{model}/2$ gives a sine and a cosine.",
        "correct",
        f"for $d_{{model}}$ = {count(d)}: {count(i.size)} values of $i$, whose sines (columns $2i$) and cosines "
        f"(columns $2i+1$) fill the {count(table.shape[1])} columns once each; `lib.positional` matches "
        f"$\\sin(pos/10000^{{2i/d}})$ and $\\cos(pos/10000^{{2i/d}})$ "
        f"({agree(table[:, 0::2], np.sin(angle), 1e-12)}, {agree(table[:, 1::2], np.cos(angle), 1e-12)})",
        "positional", brief="#{1} values fill #{5} columns",
    )


def shift_is_linear(review: Review) -> None:
    """Line 54: a fixed matrix M_k, the same for every pos, maps PE(pos) to PE(pos + k)."""
    d, n = 512, 1000
    table = pos.sinusoidal_encoding(n + 100, d)
    err = 0.0
    for k in (1, 10, 100):
        m_k = pos.sinusoid_shift_matrix(k, d)  # depends on k only
        err = max(err, float(np.abs(table[:n] @ m_k - table[k : n + k]).max()))
    m_7 = pos.sinusoid_shift_matrix(7, d)
    review.add(
        NOTE, 54, "3.2 Positional encoding",
        "The code of position $pos + k$ is a fixed linear map of that of $pos$.",
        "correct",
        f"$M_k$ is block diagonal, one 2×2 rotation by $k\\omega_i$ per frequency, and does not depend on $pos$: "
        f"for all {count(n)} positions of a {count(d)}-wide table and $k$ = 1, 10, 100, "
        f"{bound(err, 1e-11, 'max |PE_pos M_k - PE_(pos+k)|')}; $M_k$ is orthogonal "
        f"({agree(m_7.T @ m_7, np.eye(d), 1e-12, 'max |M^T M - I|')})",
        "positional", brief="block rotations: < #{7}",
    )


def relative_distance_by_dot_product(review: Review) -> None:
    """Line 56: attention can read how far apart two words are from dot products of the encodings."""
    n, d, d_k = 600, 512, 64
    table = pos.sinusoidal_encoding(n, d)
    raw = table @ table.T  # PE_p . PE_q
    offsets = np.arange(n)
    by_formula = np.cos(offsets[:, None] * pos.sinusoid_frequencies(d)).sum(axis=1)  # sum_i cos(k w_i)
    formula_check = agree(raw[0], by_formula, 1e-10, "max |PE_0 . PE_k - sum_i cos(k w_i)|")
    rng = np.random.default_rng(5)
    w_q, w_k = rng.standard_normal((2, d, d_k)) / np.sqrt(d)
    projected = (table @ w_q) @ (table @ w_k).T  # what attention scores
    spread = diagonal_spread(projected)
    assert spread > 1
    review.add(
        NOTE, 56, "3.2 Positional encoding",
        "Shift linearity lets attention read word distance from dot products.",
        "assumption",
        f"for the encodings themselves, $PE_p \\cdot PE_{{p+k}} = \\sum_i \\cos k\\omega_i$ ({formula_check}) "
        "depends on the offset alone (every diagonal of the 600×600 table of dot products is constant: "
        f"{bound(diagonal_spread(raw), 1e-10, 'spread')}). Attention scores projected vectors, "
        "$(PE_p W_Q)\\cdot(PE_{p+k} W_K)$: with random 512×64 projections the same offset gives scores that vary "
        f"by up to {fixed(spread, 2)} with the position. The offset stays readable only for projections that "
        "commute with the rotations $M_k$ (rotary embeddings build that in)",
        "positional", brief="not after projections: scores vary by #{7}",
    )


def every_position_distinct(review: Review) -> None:
    """Line 56: combining waves of many wavelengths gives every position its own vector, however long the text."""
    n, d = 10**5, 512
    offsets = np.arange(1, n)
    freqs = pos.sinusoid_frequencies(d)
    dist_sq = np.zeros(offsets.size)
    for j in range(0, freqs.size, 16):  # eq. pe-distance, 16 frequencies at a time
        dist_sq += 2 * (1 - np.cos(np.outer(offsets, freqs[j : j + 16]))).sum(axis=1)
    dist = np.sqrt(dist_sq)  # distance between positions p and p + k depends on k alone
    first_pair = np.sqrt(2 * (1 - np.cos(offsets * freqs[0])))  # the fastest wave on its own
    k_close = int(offsets[np.argmin(first_pair)])
    assert int(offsets[np.argmin(dist)]) == 1 and dist.min() > 3
    assert k_close == 710 and first_pair.min() < 1e-4
    review.add(
        NOTE, 56, "3.2 Positional encoding",
        "Mixing wavelengths gives every position its own vector, for any length.",
        "correct",
        f"among {count(n)} positions ($d_{{model}}$ = {count(d)}) the closest two encodings are neighbours, "
        f"{fixed(dist.min(), 2)} apart; none repeats. The combination is what keeps them apart: the fastest pair "
        f"alone (wavelength $2\\pi$) puts positions 0 and {count(k_close)} within {sig(first_pair.min(), 2)} of "
        "each other",
        "positional", brief="#{0} positions: closest pair #{2} apart; one wave alone repeats",
    )


def input_is_embedding_plus_encoding(review: Review) -> None:
    """Line 58: the model's input is the sum of the token embeddings and the positional encoding."""
    d_model, n = 512, 64
    torch.manual_seed(0)
    model = Seq2SeqTransformer(1000, d_model, 8, 2048, 1, max_len=n)
    tokens = torch.arange(1, n + 1)[None]
    with torch.no_grad():
        e, pe = model.embed(tokens)[0], model.pe[:n]
        scaled = math.sqrt(d_model) * e
        formula = agree(model.embed_tokens(tokens)[0], scaled + pe, 1e-6, "max |embed_tokens - (sqrt(d) E + PE)|")
    rms = {name: float(t.pow(2).mean().sqrt()) for name, t in (("e", e), ("scaled", scaled), ("pe", pe))}
    assert abs(rms["e"] * math.sqrt(d_model) - 1) < 0.02 and abs(rms["pe"] - math.sqrt(0.5)) < 1e-6
    review.add(
        NOTE, 58, "3.2 Positional encoding",
        "The model's input is word embeddings plus positional codes.",
        "imprecise",
        "the original Transformer multiplies the embeddings by $\\sqrt{d_{model}}$ "
        f"(= {fixed(math.sqrt(d_model), 2)} for 512) before adding the table, and `lib.pt.model` does the same "
        f"({formula}). The factor sets the balance: embeddings initialised with standard deviation "
        f"$d_{{model}}^{{-1/2}}$ have RMS {fixed(rms['e'], 3)} against the encoding's {fixed(rms['pe'], 3)}, so "
        f"an unscaled sum is mostly position; scaled, the token part has RMS {fixed(rms['scaled'], 2)}",
        "positional",
        brief=r"the embeddings are first scaled by $\sqrt{d_{model}}$ = #{0}; unscaled, position dominates",
    )


# 4. Self-attention


def qkv_shapes(review: Review) -> None:
    """Lines 72-74: W^Q, W^K, W^V are d_model x d_k with d_k = d_v = d_model / h, so Q, K, V are N x d_k."""
    d_model, h, n = 512, 8, 10
    d_k = d_model // h
    rng = np.random.default_rng(6)
    params = mh.init_params(d_model, h, bias=False, rng=rng)
    x = rng.standard_normal((n, d_model))
    w_q0 = params.w_q[:, :d_k]  # head 0's W^Q: the first d_k columns of the layer's W_Q
    q0 = x @ w_q0
    heads = mh.split_heads(x @ params.w_q, h)  # (h, n, d_k)
    review.add(
        NOTE, 72, "4.1 Generation of Q, K, V",
        r"$Q = XW^Q$ etc. with $d_{model} \times d_k$ weights, usually $d_k = d_v = d_{model}/h$.",
        "correct",
        f"$d_k$ = 512/8 = {count(d_k)}; head 0's $W^Q$ is a {shape(w_q0)} block of `lib.multihead`'s $W_Q$, and "
        f"$XW^Q$ for {count(n)} tokens has shape {shape(q0)}, head 0 of the library's projection "
        f"({agree(q0, heads[0], 1e-12)})",
        "multihead", brief="$d_k$ = #{2}; each head's block (#{4}, #{5}) matches lib (< #{10})",
    )


def score_matrix(review: Review) -> None:
    """Line 80: Scores = Q K^T is N x N, and entry (i, j) is the dot product of query i and key j."""
    n, d_k = 10, 64
    rng = np.random.default_rng(7)
    q, k = rng.standard_normal((2, n, d_k))
    scores = q @ k.T
    by_pairs = np.array([[np.dot(q[i], k[j]) for j in range(n)] for i in range(n)])
    review.add(
        NOTE, 80, "4.2 Attention scores",
        r"Scores $QK^\top$ are $N \times N$, entry $(i, j)$ the query-key dot product.",
        "correct",
        f"shape {shape(scores)} for {count(n)} tokens; every entry equals $q_i \\cdot k_j$ "
        f"({agree(scores, by_pairs, 1e-12)})",
        "notation", brief="shape (#{0}, #{1}); every entry matches (< #{3})",
    )


def dot_products_grow(review: Review) -> None:
    """Line 84: the dot product grows in magnitude as d_k grows."""
    rng = np.random.default_rng(8)
    pairs = 20_000
    stds = {}
    for d_k in (16, 64, 256):
        stds[d_k] = float(sample_dot_products(rng, pairs, d_k)[0].std())
        assert abs(stds[d_k] / math.sqrt(d_k) - 1) < 0.03
    review.add(
        NOTE, 84, "4.3 Scaling",
        "Wider $d_k$ means larger dot products in both directions.",
        "correct",
        f"measured standard deviation of $q \\cdot k$ over {count(pairs)} pairs of standard normal vectors: "
        + ", ".join(f"{fixed(s, 1)} for $d_k$ = {count(d)}" for d, s in stds.items())
        + ", i.e. $\\sqrt{d_k}$",
        "scaling", brief=r"spread #{1}, #{3}, #{5} at $d_k$ = 16, 64, 256: $\sqrt{d_k}$",
    )


def dot_product_mean(review: Review) -> None:
    """Line 86: E[q_i k_i] = E[q_i] E[k_i] = 0, so the dot product has mean 0."""
    q, k = sp.symbols("q k", real=True)
    mean_term = normal_expectation(q * k, {q: (0, 1), k: (0, 1)})
    assert mean_term == 0
    rng = np.random.default_rng(9)
    pairs, d_k = 20_000, 64
    a, b = rng.standard_normal((2, pairs, d_k))
    measured = float(np.einsum("ij,ij->i", a, b).mean())  # a . b per pair
    assert abs(measured) < 4 * math.sqrt(d_k / pairs)  # four standard errors
    review.add(
        NOTE, 86, "4.3 Scaling",
        r"For independent standard normal entries $q \cdot k$ has mean 0.",
        "correct",
        f"sympy: $E[q_i k_i]$ = {mean_term}; measured mean of $q \\cdot k$ for $d_k$ = 64 over {count(pairs)} "
        f"pairs: {fixed(measured, 2)} (standard error {fixed(math.sqrt(d_k / pairs), 2)})",
        "scaling", brief="sympy: 0; sample mean -#{3} (standard error #{4})",
    )


def dot_product_variance(review: Review) -> None:
    """Line 86: Var(q_i k_i) = E[q_i^2] E[k_i^2] - 0 = 1, so Var(q . k) = d_k."""
    q, k = sp.symbols("q k", real=True)
    normals = {q: (0, 1), k: (0, 1)}
    second_moment = normal_expectation((q * k) ** 2, normals)
    var_term = sp.simplify(second_moment - normal_expectation(q * k, normals) ** 2)
    assert second_moment == 1 and var_term == 1
    rng = np.random.default_rng(10)
    pairs, d_k = 20_000, 64
    a, b = rng.standard_normal((2, pairs, d_k))
    ratio = float(np.einsum("ij,ij->i", a, b).var() / d_k)
    assert abs(ratio - 1) < 0.05
    review.add(
        NOTE, 86, "4.3 Scaling",
        r"For unit-variance independent entries, each product has variance 1, so $q \cdot k$ has variance $d_k$.",
        "correct",
        f"sympy: $E[(q_i k_i)^2]$ = {second_moment}, $\\operatorname{{Var}}(q_i k_i)$ = {var_term}; the $d_k$ terms "
        "are independent, so their variances add. Measured for $d_k$ = 64 over "
        f"{count(pairs)} pairs: $\\operatorname{{Var}}(q\\cdot k)/d_k$ = {fixed(ratio, 2)}",
        "scaling", brief=r"sympy; measured $\operatorname{Var}(s)/d_k$ = #{5}",
    )


def large_variance_kills_gradient(review: Review) -> None:
    """Line 88: with a large variance the softmax passes almost no gradient and learning stalls."""

    d_k, rows = 1024, 256
    rng = np.random.default_rng(11)
    q = rng.standard_normal((rows, d_k))
    found = {}  # keys -> (unscaled ||J||, scaled ||J||, unscaled derivative of the largest weight)
    for n_keys in (16, 1024):
        s = q @ rng.standard_normal((n_keys, d_k)).T
        raw, scaled = softmax(s), softmax(s / math.sqrt(d_k))
        top = raw.max(axis=-1)
        found[n_keys] = (softmax_jacobian_norm(raw).mean(), softmax_jacobian_norm(scaled).mean(),
                         (top * (1 - top)).mean())
    few, many = found[16], found[1024]
    assert few[0] < few[1] / 3 and many[0] > 1.5 * many[1]
    review.add(
        NOTE, 88, "4.3 Scaling",
        "High score variance shrinks all softmax gradients but the top one.",
        "assumption",
        f"it depends on how many keys share the row. With $d_k$ = {count(d_k)} unscaled, over 16 keys the mean "
        f"softmax-Jacobian norm falls to {fixed(few[0], 3)} against {fixed(few[1], 3)} scaled (and the largest "
        f"weight's own derivative $a(1-a)$ to {fixed(few[2], 3)}: not only the others' gradients shrink). Over "
        f"{count(1024)} keys the same unscaled scores give {fixed(many[0], 3)}, more than the {fixed(many[1], 3)} "
        "of the scaled softmax: saturated rows pass no gradient, but on average the gradient has not vanished",
        "scaling", brief="over 1,024 keys the unscaled gradient (#{7}) beats the scaled",
    )


def rows_sum_to_one(review: Review) -> None:
    """Line 92: the softmax, applied row by row, turns each row of scores into weights that sum to 1."""
    rng = np.random.default_rng(12)
    q, k, v = rng.standard_normal((3, 10, 64))
    _, a = att.attention(q, k, v)
    _, a_sharp = att.attention(30 * q, k, v)  # logits 30x larger: nearly one-hot rows
    review.add(
        NOTE, 92, "4.4 Softmax",
        "The row-wise softmax makes each row a distribution summing to 1.",
        "correct",
        f"every row of the weights sums to 1 ({agree(a.sum(axis=-1), np.ones(10), 1e-12)}), also when the "
        f"logits are 30 times larger and the rows nearly one-hot ({agree(a_sharp.sum(axis=-1), np.ones(10), 1e-12)})",
        "softmax", brief="row sums within #{1} of 1, even near one-hot",
    )


def weights_between_zero_and_one(review: Review) -> None:
    """Line 94: the attention weight matrix A is N x N and its entries lie between 0 and 1."""
    rng = np.random.default_rng(13)
    q, k, v = rng.standard_normal((3, 10, 64))
    _, a = att.attention(q, k, v)
    _, a_sharp = att.attention(30 * q, k, v)
    assert a.shape == (10, 10) and all(((w >= 0) & (w <= 1)).all() for w in (a, a_sharp))
    review.add(
        NOTE, 94, "4.4 Softmax",
        r"The weights form an $N \times N$ matrix of entries between 0 and 1.",
        "correct",
        f"$A$ has shape {shape(a)}; all its entries lie in [0, 1], with largest {fixed(a.max(), 3)}; with 30 times "
        f"larger logits the rows are nearly one-hot (largest {fixed(a_sharp.max(), 3)}) and still in range",
        "softmax", brief="shape (#{0}, #{1}); all in [0, 1]",
    )


def weighted_sum_of_values(review: Review) -> None:
    """Line 100: Z = A V is N x d_v, and this is the paper's scaled dot-product attention."""
    n, d_k, d_v = 10, 64, 32
    rng = np.random.default_rng(14)
    q, k = rng.standard_normal((2, n, d_k))
    v = rng.standard_normal((n, d_v))
    z = softmax(q @ k.T / math.sqrt(d_k)) @ v
    o, _ = att.attention(q, k, v)
    review.add(
        NOTE, 100, "4.5 Weighted sum of values",
        r"Multiplying the weights by $V$ ($N \times d_v$) completes scaled dot-product attention.",
        "correct",
        f"$\\operatorname{{softmax}}(QK^\\top/\\sqrt{{d_k}})\\,V$ with $d_k$ = {count(d_k)}, $d_v$ = {count(d_v)} "
        f"has shape {shape(z)} and equals `lib.attention.attention` ({agree(z, o, 1e-12)})",
        "notation", brief="shape (#{2}, #{3}); matches lib (< #{4})",
    )


# 5. Multi-head attention


def multi_head_by_hand(seed: int) -> tuple[np.ndarray, list[np.ndarray], np.ndarray, mh.MultiHeadParams, np.ndarray]:
    """Multi-head attention the note's way: h heads, each with its own W_i, one after another, then W^O."""
    d_model, h, n = 512, 8, 10
    d_k = d_model // h
    rng = np.random.default_rng(seed)
    params = mh.init_params(d_model, h, bias=False, rng=rng)
    x = rng.standard_normal((n, d_model))
    heads = []
    for i in range(h):
        cols = slice(i * d_k, (i + 1) * d_k)  # head i's W_i^Q, W_i^K, W_i^V: (d_model, d_k) each
        o_i, _ = att.attention(x @ params.w_q[:, cols], x @ params.w_k[:, cols], x @ params.w_v[:, cols])
        heads.append(o_i)
    concat = np.concatenate(heads, axis=1)  # (n, h d_v)
    return x, heads, concat, params, concat @ params.w_o


def heads_in_parallel(review: Review) -> None:
    """Lines 106-108: h = 8 heads computed independently, each W_i^V said to be d_model x d_k."""
    x, heads, _, params, out = multi_head_by_hand(15)
    library, _ = mh.multi_head_attention(x, None, params, 8)
    assert np.abs(out - library).max() < 1e-12
    # the value width is its own parameter: d_v = 24 against d_k = 64 (lib accepts any d_v)
    d_model, h, d_k, d_v = 512, 8, 64, 24
    rng = np.random.default_rng(16)
    w_v, w_o = rng.standard_normal((d_model, h * d_v)) / d_model**0.5, rng.standard_normal((h * d_v, d_model))
    narrow = params._replace(w_v=w_v, w_o=w_o / (h * d_v) ** 0.5)
    out_v, _ = mh.multi_head_attention(x, None, narrow, h)
    heads_v = [att.attention(x @ narrow.w_q[:, i * d_k:(i + 1) * d_k], x @ narrow.w_k[:, i * d_k:(i + 1) * d_k],
                             x @ w_v[:, i * d_v:(i + 1) * d_v])[0] for i in range(h)]
    by_hand = np.concatenate(heads_v, axis=1) @ narrow.w_o
    assert heads_v[0].shape == (x.shape[0], d_v) and narrow.w_o.shape == (h * d_v, d_model)
    review.add(
        NOTE, 106, "5. Multi-head attention",
        "Each head's $W_i^Q, W_i^K, W_i^V$ are $d_{model} \\times d_k$.",
        "imprecise",
        f"the heads are independent: {count(len(heads))} heads computed one at a time give `lib.multihead`'s output "
        f"({agree(out, library, 1e-12)}). But $W_i^V$ is $d_{{model}} \\times d_v$: with $d_v$ = {count(d_v)} and "
        f"$d_k$ = {count(d_k)} each head is {shape(heads_v[0])}, built from a {shape(w_v[:, :d_v])} block of "
        f"$W^V$ ({agree(by_hand, out_v, 1e-12)}); a $d_{{model}} \\times d_k$ block would make it {count(d_k)} wide",
        "multihead",
        brief=f"$W_i^V$ is $d_{{model}} \\times d_v$: with $d_v$ = {count(d_v)}, $d_k$ = {count(d_k)}, heads are "
              f"{shape(heads_v[0])}",
    )


def concatenate_and_project(review: Review) -> None:
    """Lines 110-112: the heads are concatenated to h d_v columns, then multiplied by W^O."""
    x, heads, concat, params, out = multi_head_by_hand(15)
    assert concat.shape[1] == 8 * heads[0].shape[1] == x.shape[1]
    d_model, h, d_v = 512, 8, 24
    rng = np.random.default_rng(17)
    narrow = params._replace(w_v=rng.standard_normal((d_model, h * d_v)) / d_model**0.5,
                             w_o=rng.standard_normal((h * d_v, d_model)) / (h * d_v) ** 0.5)
    out_v, _ = mh.multi_head_attention(x, None, narrow, h)
    assert out_v.shape == x.shape and narrow.w_o.shape == (h * d_v, d_model) != (d_model, d_model)
    review.add(
        NOTE, 112, "5. Multi-head attention",
        "$W^O$ is $d_{model} \\times d_{model}$.",
        "assumption",
        f"true when $h d_v = d_{{model}}$: {count(len(heads))} heads of shape {shape(heads[0])} concatenate to "
        f"{shape(concat)}, $W^O$ {shape(params.w_o)}. In general $W^O$ is $h d_v \\times d_{{model}}$: with "
        f"$d_v$ = {count(d_v)} the concatenation is {count(h * d_v)} wide and $W^O$ {shape(narrow.w_o)}, "
        f"still giving output {shape(out_v)}",
        "multihead",
        brief=f"in general $h d_v \\times d_{{model}}$: {shape(narrow.w_o)} for "
              f"$d_v$ = {count(d_v)}",
    )


# 6. Feed-forward network


def ffn_per_position(review: Review) -> None:
    """Line 116: the FFN is a two-layer network applied to each position independently."""
    d_model, d_ff, n = 512, 2048, 6
    rng = np.random.default_rng(16)
    w1 = rng.standard_normal((d_model, d_ff)) / np.sqrt(d_model)
    w2 = rng.standard_normal((d_ff, d_model)) / np.sqrt(d_ff)
    b1, b2 = np.zeros(d_ff), np.zeros(d_model)
    x = rng.standard_normal((n, d_model))
    whole = feed_forward(x, w1, b1, w2, b2)
    one_by_one = np.stack([feed_forward(x[i : i + 1], w1, b1, w2, b2)[0] for i in range(n)])
    changed = x.copy()
    changed[3] += 1.0  # change token 3 only
    after = feed_forward(changed, w1, b1, w2, b2)
    others = [0, 1, 2, 4, 5]
    assert np.abs(after[3] - whole[3]).max() > 0.1
    review.add(
        NOTE, 116, "6. Feed-forward network",
        "The position-wise FFN is a small network applied to each token alone.",
        "correct",
        f"`lib.ffn.feed_forward` on {count(n)} tokens equals the same network applied to each token alone "
        f"({agree(whole, one_by_one, 1e-12)}); changing token 3 changes its output row and leaves the others "
        f"untouched ({agree(after[others], whole[others], 0, exact=True)})",
        "layernorm-ffn", brief="equals per-token application (< #{1})",
    )


def relu_formula(review: Review) -> None:
    """Line 120: max(0, z) is the ReLU activation."""
    z = np.linspace(-3, 3, 601)
    review.add(
        NOTE, 120, "6. Feed-forward network",
        r"The activation $\max(0, z)$ is ReLU; newer models use GELU or SwiGLU.",
        "correct",
        f"`lib.ffn.relu` is $\\max(0, z)$ on [-3, 3] ({agree(relu(z), np.maximum(0, z), 0, exact=True)})",
        "layernorm-ffn", brief=r"lib's ReLU is exactly $\max(0, z)$",
    )


def ffn_expansion(review: Review) -> None:
    """Line 122: the first layer widens 512 to 2048, four times, and the second brings it back."""
    d_model, d_ff = 512, 2048
    n_ffn, n_layer = ffn_param_count(d_model, d_ff), encoder_layer_param_count(d_model, 8, d_ff)
    assert d_ff == 4 * d_model
    review.add(
        NOTE, 122, "6. Feed-forward network",
        "The FFN widens each vector about fourfold, then narrows it back.",
        "correct",
        f"2048/512 = {count(d_ff // d_model)}; $W_1$ is 512×2048 and $W_2$ 2048×512, {count(n_ffn)} parameters "
        f"with biases, {percent(n_ffn / n_layer, 1)} of an encoder layer",
        "layernorm-ffn", brief="#{0}/#{1} = #{2}; #{9} parameters, #{10} of an encoder layer",
    )


# 7. Residual connection and layer normalisation


def residual_keeps_gradient(review: Review) -> None:
    """Lines 126-132: deep stacks lose their gradient; the shortcut x + F(x) passes it straight to early layers."""
    d, d_ff, depth = 64, 256, 48
    products = {}
    for kind in ("plain", "residual", "post-LN"):
        rng = np.random.default_rng(17)  # the same weights and input for the three stacks
        x = rng.standard_normal(d)
        product = np.eye(d)  # d x_L / d x_0, row-vector convention: dx_L = dx_0 @ product
        for _ in range(depth):
            w1 = rng.uniform(-1, 1, (d, d_ff)) / np.sqrt(d)  # torch.nn.Linear's initialisation
            b1 = rng.uniform(-1, 1, d_ff) / np.sqrt(d)
            w2 = rng.uniform(-1, 1, (d_ff, d)) / np.sqrt(d_ff)
            b2 = rng.uniform(-1, 1, d) / np.sqrt(d_ff)
            hidden = x @ w1 + b1
            f = relu(hidden) @ w2 + b2
            jac_f = (w1 * (hidden > 0)) @ w2  # Jacobian of the sub-layer F
            if kind == "plain":
                x, jac = f, jac_f
            elif kind == "residual":
                x, jac = x + f, np.eye(d) + jac_f
            else:  # LayerNorm(x + F(x)), the original arrangement; its Jacobian via lib.norms' backward pass
                z = x + f
                jac_ln = layer_norm_backward(np.broadcast_to(z, (d, d)).copy(), np.eye(d))[0].T
                x, jac = layer_norm(z), (np.eye(d) + jac_f) @ jac_ln
            product = product @ jac
        products[kind] = float(np.linalg.norm(product, 2))
    assert 1 < products["residual"] < 100 and 1 < products["post-LN"] < 100
    review.add(
        NOTE, 132, "7.1 Residual connection",
        "Residual connections let gradients reach early layers and keep deep training stable.",
        "correct",
        f"through {count(depth)} position-wise sub-layers ($d$ = 64, `torch.nn.Linear` initialisation) the norm "
        f"of $\\partial x_L/\\partial x_0$ vanishes without shortcuts ({bound(products['plain'], 1e-20, 'norm')}); "
        f"it is {fixed(products['residual'], 1)} with $x + F(x)$ (each Jacobian is $I + J_F$), and "
        f"{fixed(products['post-LN'], 2)} with LayerNorm after each sum as in the original model, where the "
        "identity path also crosses every LayerNorm's Jacobian",
        "layernorm-ffn", brief="48 sub-layers: < #{3} without shortcuts, #{4} with, #{5} Post-LN",
    )


def layer_norm_per_token(review: Review) -> None:
    """Line 136: LayerNorm normalises each word vector over its d_model features, for any B and N."""
    batch, n, d = 2, 5, 512
    rng = np.random.default_rng(18)
    x = 3 + 2 * rng.standard_normal((batch, n, d))
    y = layer_norm(x)
    by_hand = np.empty_like(x)
    for b in range(batch):
        for t in range(n):
            v = x[b, t]
            by_hand[b, t] = (v - v.mean()) / np.sqrt(v.var() + 1e-5)
    review.add(
        NOTE, 136, "7.2 Layer normalization",
        "LayerNorm averages over features, so each token vector is normalised alone.",
        "correct",
        f"`lib.norms.layer_norm` on a {shape(x)} input equals normalising each of the {count(batch * n)} vectors "
        f"separately ({agree(y, by_hand, 1e-12)}); every output vector has mean 0 "
        f"({bound(np.abs(y.mean(axis=-1)).max(), 1e-12, 'max |mean|')})",
        "layernorm-ffn", brief="equals per-vector normalisation (< #{4})",
    )


def epsilon_and_affine(review: Review) -> None:
    """Line 142: epsilon prevents division by zero; gamma and beta are a learnable scale and shift."""
    d = 512
    constant = np.full((1, d), 3.0)  # a token whose features are all equal: variance 0
    y = layer_norm(constant)
    centred = constant - constant.mean()
    with np.errstate(invalid="ignore"):
        no_eps = centred / np.sqrt(centred.var())  # 0 / 0
    assert np.isnan(no_eps).all() and np.all(y == 0)
    review.add(
        NOTE, 142, "7.2 Layer normalization",
        r"$\epsilon$ avoids division by zero; $\gamma$, $\beta$ scale and shift.",
        "correct",
        f"a token whose {count(d)} features are equal has variance 0: without $\\epsilon$ its normalised "
        "features are $0/0$ = NaN, with $\\epsilon = 10^{-5}$ they are 0 (then $y = \\beta$). $\\gamma$ and "
        f"$\\beta$ have one entry per feature: {count(layer_norm_param_count(d))} parameters for $d$ = {count(d)}",
        "layernorm-ffn", brief=r"a constant token is NaN without $\epsilon$",
    )


def batch_norm(x: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    """BatchNorm as in a Transformer batch: each feature normalised over every position of every sequence."""
    flat = x.reshape(-1, x.shape[-1])
    return (x - flat.mean(axis=0)) / np.sqrt(flat.var(axis=0) + eps)


def batch_statistics_unstable(review: Review) -> None:
    """Line 144: with variable-length sequences, batch statistics are unstable; LayerNorm's are not."""
    d = 64
    rng = np.random.default_rng(19)
    sentence = 1 + rng.standard_normal((5, d))  # the sentence we follow: 5 tokens
    other = 1 + rng.standard_normal((64, d))

    def batch_with(length: int) -> np.ndarray:  # our sentence and another of `length` tokens, zero-padded
        x = np.zeros((2, max(5, length), d))
        x[0, :5], x[1, :length] = sentence, other[:length]
        return x

    short, long = batch_with(8), batch_with(64)
    bn_gap = float(np.abs(batch_norm(short)[0, :5] - batch_norm(long)[0, :5]).max())
    ln_same = agree(layer_norm(short)[0, :5], layer_norm(long)[0, :5], 1e-12, "max |difference|")
    assert bn_gap > 0.1
    review.add(
        NOTE, 144, "7.2 Layer normalization",
        "LayerNorm beats BatchNorm for sequences of varying length.",
        "correct",
        "a 5-token sentence batched with a sentence of 8 tokens, then of 64 (zero-padded): BatchNorm's output for "
        f"the same 5 tokens changes by up to {fixed(bn_gap, 2)}, as its statistics now count other words and "
        f"padding; LayerNorm's does not ({ln_same})",
        "layernorm-ffn", brief="padding moves BatchNorm outputs by #{4}; LayerNorm's by < #{5}",
    )


def layer_norm_batch_independent(review: Review) -> None:
    """Line 144: LayerNorm makes training independent of the batch size."""
    d = 64
    rng = np.random.default_rng(20)
    pool = 1 + rng.standard_normal((64, 5, d))  # 64 sentences of 5 tokens
    ours = pool[0]
    alone = layer_norm(ours[None])[0]
    in_32 = layer_norm(pool[:32])[0]
    bn = {}
    for size in (2, 32):  # our sentence in two batches of `size` drawn from the other sentences
        outs = [batch_norm(np.concatenate([ours[None], pool[rng.choice(np.arange(1, 64), size - 1, replace=False)]]))[0]
                for _ in range(2)]
        bn[size] = float(np.abs(outs[0] - outs[1]).max())
    assert bn[2] > bn[32] > 0.01
    review.add(
        NOTE, 144, "7.2 Layer normalization",
        "LayerNorm makes training stable at any batch size.",
        "imprecise",
        "it makes each output independent of the batch, which is not the same as stable training: "
        f"a sentence's LayerNorm output is the same alone and in a batch of 32 ({agree(alone, in_32, 1e-12)}). "
        "BatchNorm's depends on the companions: for the same sentence in two random batches it differs by up to "
        f"{fixed(bn[2], 2)} with batch size 2 and {fixed(bn[32], 2)} with 32",
        "layernorm-ffn", brief="batch-independent, not stable by itself; BatchNorm differs by #{2} at batch 2",
    )


# 8. Decoder: masked attention and cross-attention


def mask_is_upper_triangle(review: Review) -> None:
    """Line 154: the causal mask puts -infinity on the upper triangle of the scores (the future)."""
    n = 8
    keep = att.causal_mask(n)
    future = np.triu(np.ones((n, n), dtype=bool), k=1)  # j > i
    assert np.array_equal(~keep, future) and keep.diagonal().all()
    review.add(
        NOTE, 154, "8.1 Masked multi-head attention",
        r"A causal mask puts $-\infty$ on the upper triangle of $QK^\top$.",
        "correct",
        f"`lib.attention.causal_mask` hides exactly the strict upper triangle $j > i$: {count(int(future.sum()))} "
        f"of {count(n * n)} entries for $N$ = {count(n)} ($N(N-1)/2$); the diagonal stays visible, since each "
        "token attends to itself",
        "blocks", brief="#{0} of #{1} entries hidden at $N$ = #{2}; the diagonal stays",
    )


def mask_gives_exact_zeros(review: Review) -> None:
    """Line 156: exp(-inf) = 0, so future words get weight exactly 0 and causality holds."""
    n, d = 8, 16
    rng = np.random.default_rng(21)
    q, k, v = rng.standard_normal((3, n, d))
    keep = att.causal_mask(n)
    o, a = att.attention(q, k, v, keep)
    finite = torch.softmax(torch.from_numpy(q @ k.T / 4.0).float().masked_fill(torch.from_numpy(~keep), -1e9), -1)
    assert np.all(a[~keep] == 0) and torch.all(finite[torch.from_numpy(~keep)] == 0)
    k2, v2 = k.copy(), v.copy()
    k2[5:], v2[5:] = rng.standard_normal((2, n - 5, d))  # change tokens 5, 6, 7
    o2, _ = att.attention(q, k2, v2, keep)
    o_open, _ = att.attention(q, k, v)
    o_open2, _ = att.attention(q, k2, v2)
    peek = float(np.abs(o_open[:5] - o_open2[:5]).max())
    assert peek > 0.01
    review.add(
        NOTE, 156, "8.1 Masked multi-head attention",
        r"Since $e^{-\infty} = 0$, future words get zero weight and generation stays causal.",
        "correct",
        f"all {count(int((~keep).sum()))} future weights are exactly 0, with $-\\infty$ and also with a finite "
        "$-10^9$ in float32 (the exponential underflows). Changing tokens 5 to 7 leaves the outputs of tokens "
        f"0 to 4 unchanged ({agree(o2[:5], o[:5], 0, exact=True)}); without the mask they move by up to "
        f"{fixed(peek, 2)}",
        "blocks", brief="all #{0} future weights exactly 0; unmasked outputs move #{10}",
    )


def cross_attention(review: Review) -> None:
    """Line 160: in cross-attention Q comes from the decoder, K and V from the encoder's output."""
    d_model, h, n_dec, n_enc = 64, 4, 6, 9
    rng = np.random.default_rng(22)
    params = mh.init_params(d_model, h, bias=False, rng=rng)
    x_dec, x_enc = rng.standard_normal((n_dec, d_model)), rng.standard_normal((n_enc, d_model))
    out, weights = mh.multi_head_attention(x_dec, x_enc, params, h)
    cols = slice(0, d_model // h)  # head 0 by hand
    q0, k0 = x_dec @ params.w_q[:, cols], x_enc @ params.w_k[:, cols]
    a0 = softmax(q0 @ k0.T / math.sqrt(d_model // h))
    review.add(
        NOTE, 160, "8.2 Cross-attention",
        "Cross-attention: $Q$ from the decoder, $K$ and $V$ from the last encoder layer.",
        "correct",
        f"{count(n_dec)} decoder tokens attending to {count(n_enc)} encoder tokens give weights of shape "
        f"{shape(weights)} (heads × decoder × encoder) and an output of shape {shape(out)}; head 0 equals "
        f"$\\operatorname{{softmax}}(X_{{dec}} W_Q (X_{{enc}} W_K)^\\top/\\sqrt{{d_k}})$ "
        f"({agree(weights[0], a0, 1e-12)})",
        "blocks", brief="weights (#{2}, #{3}, #{4}); head 0 matches (< #{8})",
    )


# 9. Computational complexity


def quadratic_cost_and_memory(review: Review) -> None:
    """Line 168: compute and memory both grow quadratically with the sequence length N."""
    d_model = 512
    growth = attention_score_flops(4096, d_model) / attention_score_flops(2048, d_model)
    rng = np.random.default_rng(23)
    q, k, v = rng.standard_normal((3, 1024, 64))
    full, _ = att.attention(q, k, v)
    tiled, _ = tiled_attention(q, k, v, block_size=128)
    weights_gb = 10**5 * 10**5 * BYTES_PER_DTYPE["fp16"] / GB
    tile_bytes = 128 * 128 * BYTES_PER_DTYPE["fp16"]
    assert growth == 4
    review.add(
        NOTE, 168, "9. Computational complexity",
        "Attention's time and memory both grow quadratically with $N$.",
        "assumption",
        f"compute yes: doubling $N$ multiplies the score FLOPs by {count(growth)}. Memory only if the $N \\times N$ "
        f"weights are stored ({fixed(weights_gb, 0)} GB per head at $N = 10^5$ in fp16): computed 128 keys at a "
        f"time, exact attention needs one {count(tile_bytes)}-byte tile of scores and matches "
        f"({agree(tiled, full, 1e-12)}, $N$ = 1,024)",
        "tiled-attention", brief="time yes; memory only if stored: a #{6}-byte tile suffices",
    )


def long_context_exhausts_memory(review: Review) -> None:
    """Line 168: at tens to hundreds of thousands of tokens, standard attention runs out of GPU memory."""
    gpu = GPUS["H100-80GB"]
    per_weight = BYTES_PER_DTYPE["fp16"]
    weights = parameter_count(load_config(FIXTURES / "Llama-2-7b-hf.config.json")).total * per_weight
    full_at = {h: longest_stored_n(h, per_weight, gpu.memory_bytes, weights) for h in (32, 1)}
    bare = longest_stored_n(32, per_weight, gpu.memory_bytes, 0)
    assert 10**4 < full_at[32] < bare < 10**5 < full_at[1] < 10**6
    review.add(
        NOTE, 168, "9. Computational complexity",
        "At tens of thousands of tokens standard attention runs out of GPU memory.",
        "assumption",
        f"it depends on how many $N \\times N$ matrices are held at once. Beside Llama 2 7B's fp16 weights, the "
        f"fp16 attention weights of its 32 heads fill an H100's {count(gpu.memory_mib)} MiB beyond $N$ = "
        f"{count(full_at[32])} ({count(bare)} if the weights took no room); one head's matrix alone fits up to "
        f"$N$ = {count(full_at[1])}; a tiled kernel (FlashAttention) holds none of them",
        "tiled-attention",
        brief=f"beside a 7B model's weights, one H100 holds 32 heads' scores to "
              f"$N$ = {count(full_at[32])}",
    )


def flash_attention_is_exact(review: Review) -> None:
    """Line 170: FlashAttention tiles the computation, moves less data and gives exactly standard attention."""
    n, d, block = 4096, 64, 128
    rng = np.random.default_rng(24)
    q, k, v = rng.standard_normal((3, 1024, d))
    full, _ = att.attention(q, k, v, att.causal_mask(1024))
    tiled, _ = tiled_attention(q, k, v, block_size=block, causal=True)
    io = io_elements(n, n, d, d, block)
    review.add(
        NOTE, 170, "9. Computational complexity",
        "FlashAttention tiles the computation to cut memory traffic and stays exact.",
        "correct",
        f"`lib.tiled.tiled_attention` (tiles of {count(block)}) reproduces standard causal attention "
        f"({agree(tiled, full, 1e-12)}): exact up to round-off. For $N$ = {count(n)}, $d$ = {count(d)} it moves "
        f"{count(io['tiled'])} elements between slow and fast memory against {count(io['naive'])}, "
        f"{fixed(io['naive'] / io['tiled'], 1)} times fewer. (Its speed-up is a GPU measurement, not made here.)",
        "tiled-attention", brief="exact (< #{1}); #{6} times fewer elements moved",
    )


def sparse_and_linear_attention(review: Review) -> None:
    """Line 172: sparse and linear attention bring the cost down to O(N log N) or O(N)."""
    d, window = 64, 512
    n1, n2 = 4096, 32768
    exact = attention_score_flops(n2, d, causal=True) / attention_score_flops(n1, d, causal=True)
    windowed = eff.sliding_window_flops(n2, d, d, window) / eff.sliding_window_flops(n1, d, d, window)
    linear = eff.linear_attention_flops(n2, d, d) / eff.linear_attention_flops(n1, d, d)
    assert linear == 8 and 8 < windowed < 8.5 and 63 < exact < 64.1
    review.add(
        NOTE, 172, "9. Computational complexity",
        r"Sparse and linear attention bring the cost to $O(N \log N)$ or $O(N)$.",
        "correct",
        f"from $N$ = {count(n1)} to {count(n2)} (8×), causal attention's score FLOPs grow {fixed(exact, 1)}×, a "
        f"{count(window)}-token sliding window's {fixed(windowed, 2)}× and linear attention's {count(linear)}× "
        "(`lib.efficient`): linear in $N$. These change attention rather than approximate it; the "
        "$O(N \\log N)$ schemes (hashing, as in Reformer) are not in the library and not checked",
        "beyond", brief="8x longer: full x#{3}, window x#{5}, linear x#{6}",
    )


# 10. Implementation (PyTorch)


def fill_mask_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                        keep: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The procedure the article's PyTorch sketch follows, written here in the book's own code.

    Scores ``q k^T / sqrt(d_k)`` over the last two axes; where ``keep`` is 0 (or False) the score is replaced by
    the finite constant -1e9 (not -inf); a softmax over the keys; the weighted sum of the values. Returns
    ``(output, weights)``. Differs from ``lib.pt.attention.attention`` in the masking only: a row with no visible
    key gets uniform weights here, zeros there, and in float16 the fill constant does not fit.
    """
    width = q.shape[-1]
    logits = q @ k.mT / width**0.5  # (..., n_q, n_k)
    if keep is not None:
        logits = logits.masked_fill(keep == 0, -1e9)
    weights = torch.softmax(logits, dim=-1)
    return weights @ v, weights


def note_code_matches_library(review: Review) -> None:
    """Lines 209-230: the note's PyTorch function, run against lib.attention and lib.pt.attention."""
    rng = np.random.default_rng(25)
    q, k, v = rng.standard_normal((3, 2, 4, 16, 32))  # (batch, heads, seq_length, d_k), as its comment says
    keep = att.causal_mask(16)
    bounds = {}  # dtype -> the bound every comparison in that dtype is asserted against
    for dtype, tol in ((np.float64, 1e-12), (np.float32, 1e-5)):
        for mask in (None, keep):
            qt, kt, vt = (torch.from_numpy(t.astype(dtype)) for t in (q, k, v))
            torch_mask = None if mask is None else torch.from_numpy(mask)
            o, a = fill_mask_attention(qt, kt, vt, torch_mask)
            o_np, a_np = att.attention(q.astype(dtype), k.astype(dtype), v.astype(dtype), mask)
            o_pt, a_pt = pt_att.attention(qt, kt, vt, torch_mask)
            for mine, ref in ((o, o_np), (a, a_np), (o, o_pt), (a, a_pt)):
                bounds[dtype] = agree(mine, ref, tol)
    o16, _ = fill_mask_attention(*(torch.from_numpy(t.astype(np.float16)) for t in (q, k, v)))
    half = agree(o16, att.attention(q, k, v)[0], 1e-2, "max |float16 - float64|")
    dead = keep.copy()
    dead[3] = False  # query 3 may attend to nothing
    o_dead, a_dead = fill_mask_attention(*(torch.from_numpy(t) for t in (q, k, v)), torch.from_numpy(dead))
    try:  # the mask line in float16, whose largest finite value is 65504
        fill_mask_attention(*(torch.from_numpy(t.astype(np.float16)) for t in (q, k, v)), torch.from_numpy(keep))
        half_masked = "runs"
    except RuntimeError:
        half_masked = "raises `RuntimeError`"
    assert half_masked != "runs"
    uniform = agree(a_dead[..., 3, :], np.full((2, 4, 16), 1 / 16), 1e-15, "max |weight - 1/16|")
    assert np.all(att.attention(q, k, v, dead)[1][..., 3, :] == 0)
    review.add(
        NOTE, 209, "10. Implementation (PyTorch)",
        "A short PyTorch function computes attention on [batch, heads, length, $d_k$] tensors.",
        "correct",
        "its procedure, re-implemented (`fill_mask_attention`), on (2, 4, 16, 32) inputs, with and without a causal "
        "mask: output and weights match "
        f"`lib.attention` and `lib.pt.attention` in float64 ({bounds[np.float64]}) and float32 "
        f"({bounds[np.float32]}); without a mask it also "
        f"runs in float16 ({half}). With a mask it {half_masked} in float16, and it gives a query with no visible "
        "key uniform "
        f"weights ({uniform}) where the book gives zeros: that line is graded on its own",
        "notation", brief="a re-implementation matches lib (< #{5}); its $-10^9$ mask is graded under softmax",
    )


def note_code_scores(review: Review) -> None:
    """Line 232: QK^T / sqrt(d_k) is torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d_k)."""
    rng = np.random.default_rng(26)
    q, k = (torch.from_numpy(t) for t in rng.standard_normal((2, 2, 4, 16, 32)))
    kt = k.transpose(-2, -1)
    scores = torch.matmul(q, kt) / math.sqrt(q.size(-1))
    by_pairs = torch.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(32)
    review.add(
        NOTE, 232, "10. Implementation (PyTorch)",
        r"$QK^\top/\sqrt{d_k}$ in PyTorch: `matmul(q, k.transpose(-2, -1)) / sqrt(d_k)`.",
        "correct",
        f"`k.transpose(-2, -1)` swaps only the last two axes ({shape(k)} to {shape(kt)}), so the product is one "
        f"$QK^\\top$ per batch and head, entry $(i, j)$ = $q_i \\cdot k_j/\\sqrt{{d_k}}$ "
        f"({agree(scores, by_pairs, 1e-12)})",
        "notation", brief="transposes the last two axes only; matches (< #{10})",
    )


# Conclusion


def triangular_waves(review: Review) -> None:
    """Line 238: positional encoding composes position information from triangular waves."""
    x = np.linspace(0, 2 * np.pi, 200_001)
    triangle = 2 / np.pi * np.arcsin(np.sin(x))  # the triangle wave of the same period and amplitude
    gap = float(np.abs(np.sin(x) - triangle).max())
    assert abs(gap - 0.2105) < 1e-3
    column = pos.sinusoidal_encoding(100, 512)[:, 0]
    review.add(
        NOTE, 238, "Conclusion",
        "Positional encoding composes triangle waves.",
        "imprecise",
        "the waves are sinusoids, not triangle waves: column 0 of the table is $\\sin(pos)$ "
        f"({agree(column, np.sin(np.arange(100)), 1e-12)}), and a triangle wave of the same period and amplitude "
        f"differs from it by up to {fixed(gap, 2)}. It is the sine's addition theorem that gives the linear shift "
        "$M_k$ of section 3.2, which a triangle wave does not have",
        "positional", brief="they are sinusoids; a triangle wave differs by #{2} and has no shift rotation",
    )


def parameter_counts(review: Review) -> None:
    """Line 240: large language models have billions to hundreds of billions of parameters."""
    counts = {name: parameter_count(load_config(FIXTURES / f"{name}.config.json")).total
              for name in ("Llama-2-7b-hf", "DeepSeek-V3")}
    assert 10**9 < counts["Llama-2-7b-hf"] < 10**10 and 10**11 < counts["DeepSeek-V3"] < 10**12
    review.add(
        NOTE, 240, "Conclusion",
        "Large language models have billions to hundreds of billions of parameters.",
        "correct",
        f"counted from their configurations (`lib.planner.counts`): Llama 2 7B has {count(counts['Llama-2-7b-hf'])}, "
        f"DeepSeek-V3 {count(counts['DeepSeek-V3'])}",
        "capacity-planner", brief="Llama 2 7B #{2}; DeepSeek-V3 #{4}",
    )


def purely_attention(review: Review) -> None:
    """Line 242: the architecture drops recurrence and convolution and relies purely on attention."""
    d_model, d_ff, n = 512, 2048, 6
    rng = np.random.default_rng(27)
    w1, b1 = rng.standard_normal((d_model, d_ff)) / np.sqrt(d_model), rng.standard_normal(d_ff) / np.sqrt(d_model)
    w2, b2 = rng.standard_normal((d_ff, d_model)) / np.sqrt(d_ff), rng.standard_normal(d_model) / np.sqrt(d_ff)
    x = rng.standard_normal((n, d_model))
    conv = torch.nn.functional.conv1d  # the FFN as two convolutions of kernel size 1 over positions
    hidden = torch.relu(conv(torch.from_numpy(x.T[None]), torch.from_numpy(w1.T[:, :, None]), torch.from_numpy(b1)))
    as_conv = conv(hidden, torch.from_numpy(w2.T[:, :, None]), torch.from_numpy(b2))[0].T
    attention_params = mh.param_count(d_model, 8)
    layer = encoder_layer_param_count(d_model, 8, d_ff)
    review.add(
        NOTE, 242, "Conclusion",
        "The Transformer drops recurrence and convolution and uses attention only.",
        "imprecise",
        "it has no recurrence, and its only convolution is the FFN, two convolutions of kernel size 1 that mix no "
        f"positions ({agree(as_conv, feed_forward(x, w1, b1, w2, b2), 1e-12, 'max |conv1d - FFN|')}). But not "
        f"\"purely\" attention: of an encoder layer's {count(layer)} parameters ($d_{{model}}$ = 512), attention "
        f"holds {count(attention_params)} ({percent(attention_params / layer, 1)}), the FFN "
        f"{percent(ffn_param_count(d_model, d_ff) / layer, 1)}",
        "blocks", brief="the FFN holds #{7} of an encoder layer's parameters",
    )


def check(review: Review) -> None:
    """Every checkable claim of the Introductory Article, in the note's order."""
    rnn_information_fades(review)
    rnn_is_sequential(review)
    attention_keeps_information(review)
    embedding_lookup(review)
    word_order_is_lost(review)
    encoding_index_ranges(review)
    shift_is_linear(review)
    relative_distance_by_dot_product(review)
    every_position_distinct(review)
    input_is_embedding_plus_encoding(review)
    qkv_shapes(review)
    score_matrix(review)
    dot_products_grow(review)
    dot_product_mean(review)
    dot_product_variance(review)
    large_variance_kills_gradient(review)
    rows_sum_to_one(review)
    weights_between_zero_and_one(review)
    weighted_sum_of_values(review)
    heads_in_parallel(review)
    concatenate_and_project(review)
    ffn_per_position(review)
    relu_formula(review)
    ffn_expansion(review)
    residual_keeps_gradient(review)
    layer_norm_per_token(review)
    epsilon_and_affine(review)
    batch_statistics_unstable(review)
    layer_norm_batch_independent(review)
    mask_is_upper_triangle(review)
    mask_gives_exact_zeros(review)
    cross_attention(review)
    quadratic_cost_and_memory(review)
    long_context_exhausts_memory(review)
    flash_attention_is_exact(review)
    sparse_and_linear_attention(review)
    note_code_matches_library(review)
    note_code_scores(review)
    triangular_waves(review)
    parameter_counts(review)
    purely_attention(review)
