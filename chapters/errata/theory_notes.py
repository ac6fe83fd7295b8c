"""The Theory Notes, checked claim by claim in the note's order.

Each function below recomputes one claim of the note (or a tight group of claims made on one line) with ``lib``,
PyTorch or NumPy, asserts what it finds and records it. Seven claims ``worked`` checks are not
repeated here: $\\operatorname{Var}(q \\cdot k) = d_k$, the "magnitude ~8" of the dot products for $d_k = 64$, the
$O(n^2)$ memory of self-attention, "distant positions differ more", the shapes of $W_1$ in the FFN, the total of
$4d^2$ and the parameter count of an encoder block.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

import lib
import lib.attention as att
import lib.multihead as mh
import lib.positional as pos
import lib.recurrence as rec
from lib.blocks import decoder_layer_param_count, encoder_layer_param_count
from lib.book.fmt import agree, bound, count, fixed, percent
from lib.constants import BYTES_PER_DTYPE, GB, GiB
from lib.ffn import feed_forward
from lib.flops import attention_score_flops, matmul_flops
from lib.norms import layer_norm, layer_norm_param_count
from lib.planner.config import load_config
from lib.planner.counts import parameter_count
from lib.planner.gpus import GPUS
from lib.position_bias import t5_relative_bucket
from lib.pt.blocks import PostLNEncoderBlock
from lib.pt.model import Seq2SeqTransformer
from lib.pt.train import BOS, VOCAB_SIZE, evaluate_by_length, reversal_batch, set_determinism, train
from lib.softmax import log_softmax, masked_softmax, softmax, softmax_jacobian_norm
from lib.tiled import io_elements, tiled_attention

from . import longest_stored_n, sample_dot_products

NOTE = "theory-notes"
NOTATION = "0. Notation"
RECURRENCE = "1.1 The problem with recurrence"
ALTERNATIVE = "1.2 The attention alternative"
INTUITION = "2.1 Key / Query / Value intuition"
FORMULA = "2.2 The attention formula"
SCALING = r"2.3 Why scale by $\sqrt{d_k}$"
MOTIVATION = "3.1 Motivation"
FORMULATION = "3.2 Formulation"
PARAMS = "3.3 Parameter count"
ORDER = "4.1 The problem"
SINUSOIDS = "4.2 Sinusoidal encoding"
USAGE = "4.3 Usage"
ALTERNATIVES = "4.4 Alternatives"
ARCHITECTURE = "5.1 Architecture"
FFN = "5.2 Feed-forward network (FFN)"
LAYERNORM = "5.3 Layer normalisation"
RESIDUALS = "5.4 Residual connections"
MASKED = "6.1 Masked self-attention"
CROSS = "6.2 Cross-attention"
DECODER = "6.3 Full decoder block"
FULL = "7. The Full Transformer"
FAILURES = "8. Failure Cases"
CONNECTIONS = "9. Connections"
TOL = 1e-12  # float64 agreement between two ways of computing the same quantity
FIXTURES = Path(lib.__file__).resolve().parents[1] / "tests" / "fixtures"


def dims(a) -> str:
    """The shape of an array as $a \\times b$, each size printed by ``count``."""
    return "$" + r" \times ".join(count(s) for s in a.shape) + "$"


def softmax_gradient_by_width(scaled: bool) -> dict[tuple[int, int], float]:
    """Mean softmax-Jacobian norm of rows of q.k scores (iid N(0, 1) components), by (keys, d_k)."""
    rng = np.random.default_rng(20)
    means = {}
    for n_keys in (16, 1024):
        for d_k in (16, 64, 256, 1024):
            q, k = rng.standard_normal((400, d_k)), rng.standard_normal((n_keys, d_k))
            _, a = att.attention(q, k, np.zeros((n_keys, 1)), scale=None if scaled else 1.0)
            means[n_keys, d_k] = softmax_jacobian_norm(a).mean()
    return means


def torch_mha_params(mha: torch.nn.MultiheadAttention) -> mh.MultiHeadParams:
    """The weights of a ``torch.nn.MultiheadAttention`` in the book's row-vector convention ``x @ W + b``."""
    d = mha.embed_dim
    w, b = mha.in_proj_weight.detach().numpy(), mha.in_proj_bias.detach().numpy()
    return mh.MultiHeadParams(w[:d].T, w[d:2 * d].T, w[2 * d:].T, mha.out_proj.weight.detach().numpy().T,
                              b[:d], b[d:2 * d], b[2 * d:], mha.out_proj.bias.detach().numpy())


def torch_ffn(layer) -> tuple[np.ndarray, ...]:
    """(W1, b1, W2, b2) of a torch Transformer layer's feed-forward block, row-vector convention."""
    return (layer.linear1.weight.detach().numpy().T, layer.linear1.bias.detach().numpy(),
            layer.linear2.weight.detach().numpy().T, layer.linear2.bias.detach().numpy())


def torch_norm(norm: torch.nn.LayerNorm) -> tuple[np.ndarray, np.ndarray]:
    """(gamma, beta) of a torch LayerNorm."""
    return norm.weight.detach().numpy(), norm.bias.detach().numpy()


def encoder_layer(seed: int, d: int = 32, h: int = 4, d_ff: int = 64) -> torch.nn.TransformerEncoderLayer:
    """A float64 Post-LN ``torch.nn.TransformerEncoderLayer`` without dropout, with random weights."""
    torch.manual_seed(seed)
    layer = torch.nn.TransformerEncoderLayer(d, h, d_ff, dropout=0.0, batch_first=True, dtype=torch.float64)
    with torch.no_grad():  # LayerNorm weights away from their initial 1 and 0, so that they are tested too
        for norm in (layer.norm1, layer.norm2):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.5, 0.5)
    return layer.eval()


def note_encoder(x: np.ndarray, layer: torch.nn.TransformerEncoderLayer) -> np.ndarray:
    """The note's eqs. (5.1)-(5.2) with lib's pieces: Z1 = LN(X + MultiHead(X)), Z2 = LN(Z1 + FFN(Z1))."""
    h = layer.self_attn.num_heads
    z1 = layer_norm(x + mh.multi_head_attention(x, None, torch_mha_params(layer.self_attn), h)[0],
                    *torch_norm(layer.norm1))
    return layer_norm(z1 + feed_forward(z1, *torch_ffn(layer)), *torch_norm(layer.norm2))


# 0. Notation


def notation_shapes(review) -> None:
    """The shapes of the notation table chain: X W^Q, Q K^T, Concat(heads) W^O and PE."""
    n, d, h = 10, 512, 8
    d_k = d_v = d // h
    rng = np.random.default_rng(1)
    x = rng.standard_normal((n, d))
    w_q, w_k, w_v = rng.standard_normal((d, d_k)), rng.standard_normal((d, d_k)), rng.standard_normal((d, d_v))
    w_o = rng.standard_normal((h * d_v, d))
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    a = softmax(q @ k.T / np.sqrt(d_k))
    out = np.concatenate([a @ v] * h, axis=1) @ w_o  # h heads of width d_v (one repeated: only shapes matter), W^O
    pe = pos.sinusoidal_encoding(n, d)
    assert q.shape == k.shape == (n, d_k) and v.shape == (n, d_v) and a.shape == (n, n)
    assert out.shape == pe.shape == x.shape
    review.add(NOTE, 11, NOTATION,
               r"The notation table's shapes for $X$, the projections, $A$, $M$ and PE.",
               "correct",
               rf"with $n = 10$, $d = 512$, $h = 8$, $d_k = d_v = 64$ every product is defined: $XW^Q$ is "
               rf"{dims(q)}, $A$ is {dims(a)}, $h$ concatenated heads times $W^O$ give {dims(out)}, and "
               rf"`lib.positional.sinusoidal_encoding` returns PE of shape {dims(pe)}, that of $X$", "notation",
               brief=r"every product defined; output $#{8} \times #{9}$")


def weights_row_stochastic(review) -> None:
    """A = softmax(S') has non-negative rows that sum to 1, with or without a causal mask."""
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((50, 64)) for _ in range(3))
    _, a = att.attention(q, k, v)
    _, a_causal = att.attention(q, k, v, att.causal_mask(50))
    assert (a >= 0).all() and (a_causal >= 0).all()
    review.add(NOTE, 19, NOTATION,
               "Every row of the attention weights is a probability distribution.",
               "correct",
               rf"for 50 tokens with $d_k = 64$ every weight of `lib.attention.attention` is $\ge 0$ and "
               rf"{agree(a.sum(axis=1), np.ones(50), TOL, 'max |row sum - 1|')}; with a causal mask too "
               rf"({agree(a_causal.sum(axis=1), np.ones(50), TOL, 'max |row sum - 1|')})", "notation",
               brief=r"row sums within #{4} of 1")


def additive_mask(review) -> None:
    """Adding M (0 allowed, -inf blocked) before the softmax = the book's boolean mask (True = may attend)."""
    rng = np.random.default_rng(3)
    s = rng.standard_normal((6, 6))
    keep = att.causal_mask(6)
    m = np.where(keep, 0.0, -np.inf)  # the note's M
    a_note = softmax(s + m)
    a_book = masked_softmax(s, keep)
    review.add(NOTE, 20, NOTATION,
               r"An additive mask holds 0 for allowed pairs and $-\infty$ for blocked ones.",
               "correct",
               rf"$\operatorname{{softmax}}(S + M)$ equals the book's boolean mask (`lib.softmax.masked_softmax`, "
               rf"True = may attend): {agree(a_note, a_book, TOL)}; the blocked weights are exactly 0 "
               rf"({agree(a_note[~keep], np.zeros((~keep).sum()), 0, 'max |blocked weight|', exact=True)})",
               "notation", brief="equals the boolean mask (< #{0}); blocked weights exactly #{1}")


def head_widths(review) -> None:
    """d_k = d_v = d / h, so h concatenated heads have width h d_v = d."""
    d_k, h, _ = mh.check_head_config(512, 8)
    x = np.random.default_rng(4).standard_normal((10, 512))
    heads = mh.split_heads(x, h)
    merged = mh.merge_heads(heads)
    assert d_k == 64 and merged.shape == (10, h * d_k) == x.shape
    review.add(NOTE, 24, NOTATION,
               "Usually $d_k = d_v = d/h$, so $h$ heads concatenate back to width $d$.",
               "correct",
               rf"`lib.multihead.check_head_config(512, 8)` gives $d_k$ = {count(d_k)}; splitting a $10 \times 512$ "
               rf"input into {count(h)} heads of shape {dims(heads[0])} and concatenating them gives back "
               rf"{dims(merged)} ({agree(merged, x, 0, exact=True)}). It needs $h$ to divide $d$", "notation",
               brief=r"heads of #{2} rejoin exactly; needs $h \mid d$")


# 1. Why: replacing recurrence with attention


def recurrence_is_sequential(review) -> None:
    """h_t = f(h_{t-1}, x_t): computing all steps at once from h_0 gets only the first state right."""
    rng = np.random.default_rng(5)
    n, d = 64, 32
    x = rng.standard_normal((n, d))
    w_xh = rng.standard_normal((d, d)) / np.sqrt(d)
    w_hh = rec.random_recurrent_weight(d, 0.9, rng)
    h = rec.rnn_forward(x, w_xh, w_hh)  # the sequential loop
    all_at_once = np.tanh(x @ w_xh)  # every step from h_0 = 0: the only state known before any step
    wrong = np.abs(all_at_once - h).max(axis=1)
    assert wrong[0] < TOL and wrong[1:].min() > 1e-3
    review.add(NOTE, 38, RECURRENCE,
               "An RNN needs step $t-1$ before step $t$: no parallel training over time.",
               "correct",
               rf"`lib.recurrence.rnn_forward` over {n} tokens: computing every step at once from $h_0$, the only "
               rf"state known in advance, reproduces $h_1$ ({bound(wrong[0], TOL, 'max |difference|')}) and none "
               rf"of the other {n - 1} states (each off by more than $10^{{-3}}$): step $t$ needs the result of "
               rf"step $t - 1$", "beyond", brief="computing all steps at once gets only $h_1$ right")


def recurrence_bandwidth(review) -> None:
    """One recurrent step is a small matrix product: bandwidth-bound, so it is compute that sits idle."""
    batch, d = 64, 1024
    step_flops = matmul_flops(batch, d, d)  # h_{t-1} W_hh for a batch of sequences
    step_bytes = (d * d + 2 * batch * d) * BYTES_PER_DTYPE["bf16"]  # read W_hh and h_{t-1}, write h_t
    intensity = step_flops / step_bytes
    ridge = 989e12 / 3.35e12  # H100 SXM data sheet: 989 TFLOP/s dense bf16, 3.35 TB/s of HBM3
    assert intensity < ridge / 4
    review.add(NOTE, 38, RECURRENCE,
               "Sequential RNN training leaves a GPU's memory bandwidth unused.",
               "imprecise",
               rf"the resource is compute, not bandwidth. One step $h_{{t-1}}W_{{hh}}$ for a batch of {batch} "
               rf"($d = {d}$, bf16) does {count(step_flops)} FLOPs on {count(step_bytes)} bytes, "
               rf"{fixed(intensity, 0)} FLOPs per byte; an H100 (989 TFLOP/s, 3.35 TB/s on its data sheet) needs "
               rf"{fixed(ridge, 0)} to be compute-bound. A recurrent step is limited by bandwidth and leaves the "
               rf"arithmetic units idle", "beyond",
               brief="compute sits idle, not bandwidth: #{6} FLOPs per byte against #{10} needed")


def gradient_path_length(review) -> None:
    """The gradient from h_n back to h_1 is a product of n - 1 step Jacobians."""
    rng = np.random.default_rng(6)
    n, d = 21, 8
    x = rng.standard_normal((n, d))
    w_xh, w_hh = rng.standard_normal((d, d)) / np.sqrt(d), rec.random_recurrent_weight(d, 1.2, rng)
    h = rec.rnn_forward(x, w_xh, w_hh)
    jac = rec.rnn_jacobians(h, w_hh)  # (n - 1, d, d)
    chain = np.eye(d)
    for j in jac:
        chain = j @ chain

    def from_first_state(h1: torch.Tensor) -> torch.Tensor:
        state = h1
        for t in range(1, n):
            state = torch.tanh(state @ torch.from_numpy(w_hh) + torch.from_numpy(x[t] @ w_xh))
        return state

    auto = torch.autograd.functional.jacobian(from_first_state, torch.from_numpy(h[0]))
    assert jac.shape[0] == n - 1
    review.add(NOTE, 39, RECURRENCE,
               "The gradient from token $t$ to token 1 crosses $t - 1$ multiplied Jacobians.",
               "correct",
               rf"for $t$ = {n}, autograd's $\partial h_{{{n}}}/\partial h_1$ is the product of the "
               rf"{count(jac.shape[0])} step Jacobians of `lib.recurrence.rnn_jacobians` "
               rf"({agree(chain, auto, TOL)})", "beyond",
               brief=r"autograd: the product of #{3} Jacobians")


def lstm_gating(review) -> None:
    """How fast an LSTM forgets is set by its forget gates: the claim holds for gates well below 1."""
    d, steps = 16, 300
    x = torch.randn(steps, 1, d, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
    norms, gates = {}, {}
    for forget_bias in (0.0, 5.0):  # PyTorch's initialisation, and the forget gates pushed towards 1
        torch.manual_seed(7)
        cell = torch.nn.LSTMCell(d, d, dtype=torch.float64)
        with torch.no_grad():
            cell.bias_ih[d:2 * d] += forget_bias  # the forget gate's slice of the bias
        c0 = torch.zeros(1, d, dtype=torch.float64, requires_grad=True)
        h, c, forget = torch.zeros(1, d, dtype=torch.float64), c0, []
        for t in range(steps):
            pre = x[t] @ cell.weight_ih.T + cell.bias_ih + h @ cell.weight_hh.T + cell.bias_hh
            forget.append(torch.sigmoid(pre[:, d:2 * d]).mean().item())  # the forget gate at step t
            h, c = cell(x[t], (h, c))
        (grad,) = torch.autograd.grad(c.sum(), c0)
        norms[forget_bias], gates[forget_bias] = float(grad.norm()), float(np.mean(forget))
    assert norms[0.0] < 1e-30 and 1 < norms[5.0] < 2
    assert abs(gates[0.0] - 0.5) < 0.05 and gates[5.0] > 0.98
    review.add(NOTE, 39, RECURRENCE,
               "Even a gated LSTM forgets over hundreds of tokens.",
               "assumption",
               rf"true while the forget gates stay well below 1. The gradient of the cell state after {steps} "
               rf"steps with respect to the first one ($d = {d}$, autograd): at PyTorch's initialisation (mean "
               rf"forget gate {fixed(gates[0.0], 2)}) {bound(norms[0.0], 1e-30, 'norm')}; with a forget-gate bias "
               rf"of 5 (mean gate {fixed(gates[5.0], 2)}) its norm is {fixed(norms[5.0], 1)}, no decay at all. Which "
               rf"regime a trained LSTM is in depends on its data", "beyond",
               brief="not with forget bias #{5}: gradient #{7} after #{1} steps")


def all_positions_at_once(review) -> None:
    """Every output row comes from the same few matrix operations, however long the sequence."""
    rng = np.random.default_rng(8)
    n, d_k = 256, 64
    q, k, v = (rng.standard_normal((n, d_k)) for _ in range(3))
    o, a = att.attention(q, k, v)
    rows = np.vstack([att.attention(q[i:i + 1], k, v)[0] for i in range(n)])
    assert (a > 0).all()
    review.add(NOTE, 45, ALTERNATIVE,
               "Self-attention computes all positions at once, in a few matrix products.",
               "correct",
               rf"all {n} output rows come from one call, two matrix products ($QK^\top$, $AV$) with a row-wise "
               rf"softmax between them, each over all positions at once; they equal a row-at-a-time loop "
               rf"({agree(o, rows, TOL)}) and every weight is positive. The number of steps does not grow with $n$",
               "beyond", brief="one call equals a row-by-row loop: max |difference| < #{1}")


def path_length_one(review) -> None:
    """d o_n / d v_1 = a_{n1} I: one step between any two tokens, whatever their distance."""
    rng = np.random.default_rng(9)
    n, d = 64, 16
    q, k, v = (rng.standard_normal((n, d)) for _ in range(3))
    _, a = att.attention(q, k, v)
    last_output = lambda values: torch.softmax(torch.from_numpy(q[-1] @ k.T / np.sqrt(d)), -1) @ values  # noqa: E731
    jac = torch.autograd.functional.jacobian(last_output, torch.from_numpy(v)).numpy()  # (d, n, d)
    one_step = agree(jac[:, 0, :], a[-1, 0] * np.eye(d), TOL)
    review.add(NOTE, 46, ALTERNATIVE,
               "Attention links any two tokens in one step.",
               "correct",
               rf"for $n$ = {n}, $\partial o_n/\partial v_1 = a_{{n1}} I$ (autograd: {one_step}): "
               rf"one factor, at any distance. Its size is the weight $a_{{n1}}$, not 1; and under a causal mask only "
               rf"the later token can reach the earlier one", "beyond",
               brief=r"$\partial o_n/\partial v_1 = a_{n1} I$ at $n$ = #{0}; its size is the weight")


def recurrence_linear_in_n(review) -> None:
    """A recurrent layer's cost grows like n; attention's scores like n^2."""
    d = 512
    rnn_ratio = rec.rnn_layer_flops(2048, d) / rec.rnn_layer_flops(1024, d)
    attn_ratio = attention_score_flops(2048, d) / attention_score_flops(1024, d)
    assert rnn_ratio == 2 and attn_ratio == 4
    review.add(NOTE, 48, ALTERNATIVE,
               "Recurrence is linear in sequence length, self-attention quadratic.",
               "correct",
               rf"from $n$ = 1024 to 2048 ($d = {d}$) `lib.recurrence.rnn_layer_flops` grows x{count(rnn_ratio)} "
               rf"and `lib.flops.attention_score_flops` x{count(attn_ratio)}; a recurrent layer keeps $n$ states of "
               rf"width $d$ for the backward pass", "beyond",
               brief="doubling $n$: recurrence x#{3}, attention scores x#{4}")


def model_weight_bytes() -> dict[str, int]:
    """The weights each model keeps on the GPU: the base model (d = 512, 6 + 6 layers, a shared vocabulary of
    37,000 tokens) in fp32, and Llama 2 7B (its checkpoint's own count) in fp16."""
    base = 6 * encoder_layer_param_count(512, 8, 2048) + 6 * decoder_layer_param_count(512, 8, 2048) + 37_000 * 512
    llama = parameter_count(load_config(FIXTURES / "Llama-2-7b-hf.config.json")).total
    return {"base": base * BYTES_PER_DTYPE["fp32"], "7b": llama * BYTES_PER_DTYPE["fp16"]}


def max_stored_length(heads_times_layers: int, dtype: str, weight_bytes: int) -> int:
    """Longest n whose n x n attention weights, all heads and layers, fit in one H100 beside the model's weights."""
    return longest_stored_n(heads_times_layers, BYTES_PER_DTYPE[dtype], GPUS["H100-80GB"].memory_bytes,
                            weight_bytes)


def training_fit() -> dict[str, float]:
    """Training Llama 2 7B with mixed-precision AdamW: its model states (16 bytes per parameter), and the longest
    single sequence whose counted eager activations fit one H100 beside the states sharded by ZeRO-3 over 8 GPUs."""
    import json

    from lib.planner import training as T

    shape = T.llama_shape(json.loads((FIXTURES / "Llama-2-7b-hf.config.json").read_text()))
    n_params = shape.parameters()
    states = sum(T.state_bytes(n_params, "adamw").values())
    per_gpu = sum(T.zero_state_bytes(n_params, "adamw", 3, 8).values())
    free = GPUS["H100-80GB"].memory_bytes - per_gpu
    lo, hi = 1, 1 << 17  # activations grow with n: the longest n that fits, by bisection
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if T.llama_activation_bytes(shape, 1, mid, 2, "eager")["total"] <= free else (lo, mid)
    assert states > GPUS["H100-80GB"].memory_bytes
    return {"states_gb": states / GB, "zero3_n": lo}


def acceptable_length(review) -> None:
    """Storing the n x n weights of every layer still fits on one GPU at several thousand tokens."""
    w = model_weight_bytes()
    base, large = max_stored_length(8 * 6, "fp32", w["base"]), max_stored_length(32 * 32, "fp16", w["7b"])
    bare = max_stored_length(32 * 32, "fp16", 0)
    assert base > 20_000 and 5_000 < large < bare < 8_000
    fit = training_fit()
    assert 2_000 < fit["zero3_n"] < 4_000
    review.add(NOTE, 48, ALTERNATIVE,
               "Quadratic attention is affordable up to a few thousand tokens.",
               "assumption",
               rf"only with the model states sharded: training Llama 2 7B with mixed-precision AdamW needs "
               rf"{fixed(fit['states_gb'], 1)} GB of weights, gradients and optimizer states, more than one H100 "
               rf"holds; with ZeRO-3 over 8 H100s the counted activations of one sequence with eager attention fit "
               rf"up to $n$ = {count(fit['zero3_n'])}. Counting the $n \times n$ weights alone beside fp16 weights "
               rf"(no optimizer) would give {count(large)} for the 7B model and {count(base)} for the base model",
               "train-memory",
               brief=f"7B states need {fixed(fit['states_gb'], 1)} GB; ZeRO-3 on 8 H100s: $n$ = "
                     f"{count(fit['zero3_n'])} (eager)")


# 2. What: scaled dot-product attention


def higher_score_more_weight(review) -> None:
    """Raising the score of key j raises its weight and lowers every other weight of the row."""
    s = np.random.default_rng(10).standard_normal(8)
    a = softmax(s)
    s_up = s.copy()
    s_up[3] += 1.0
    a_up = softmax(s_up)
    others = np.arange(8) != 3
    assert a_up[3] > a[3] and (a_up[others] < a[others]).all()
    review.add(NOTE, 63, INTUITION,
               "A higher query-key score gives that value more weight.",
               "correct",
               rf"raising one score of an 8-key row by 1 raises its weight from {fixed(a[3], 3)} to "
               rf"{fixed(a_up[3], 3)} and lowers all 7 others: $\partial a_j/\partial s_j = a_j(1 - a_j) > 0$ and "
               rf"$\partial a_k/\partial s_j = -a_k a_j < 0$", "softmax",
               brief="one score +1: weight #{2} to #{3}")


def attention_formula(review) -> None:
    """softmax(Q K^T / sqrt(d_k)) V against lib.attention and PyTorch's fused attention."""
    rng = np.random.default_rng(11)
    q, k, v = rng.standard_normal((7, 16)), rng.standard_normal((9, 16)), rng.standard_normal((9, 5))
    note = softmax(q @ k.T / np.sqrt(16)) @ v
    fused = F.scaled_dot_product_attention(*(torch.from_numpy(m) for m in (q, k, v)))
    review.add(NOTE, 69, FORMULA,
               r"Attention equals $\operatorname{softmax}(QK^\top/\sqrt{d_k})\,V$.",
               "correct",
               rf"the formula against `lib.attention.attention` ({agree(note, att.attention(q, k, v)[0], TOL)}) and "
               rf"PyTorch's `scaled_dot_product_attention` ({agree(note, fused, TOL)}), float64", "notation",
               brief="against lib and PyTorch: max |difference| < #{0}")


def score_matrix(review) -> None:
    """S = Q K^T is n x n with S_ij = q_i . k_j."""
    rng = np.random.default_rng(12)
    q, k = rng.standard_normal((6, 8)), rng.standard_normal((6, 8))
    s = q @ k.T
    by_entry = np.array([[float(np.dot(q[i], k[j])) for j in range(6)] for i in range(6)])
    review.add(NOTE, 73, FORMULA,
               r"Raw scores $QK^\top$ form an $n \times n$ matrix of query-key dot products.",
               "correct",
               rf"for 6 tokens $S$ is {dims(s)} and matches the dot products entry by entry "
               rf"({agree(s, by_entry, TOL)}); with $n_q$ queries over $n_k$ keys (cross-attention) it is "
               rf"$n_q \times n_k$", "notation", brief=r"entry by entry: < #{3}")


def five_steps(review) -> None:
    """Scores, scale, additive mask, row softmax, weighted sum: each output row is a convex combination of V."""
    rng = np.random.default_rng(13)
    q, k, v = rng.standard_normal((8, 16)), rng.standard_normal((8, 16)), rng.standard_normal((8, 4))
    keep = att.causal_mask(8)
    s_scaled = q @ k.T / np.sqrt(16) + np.where(keep, 0.0, -np.inf)  # steps 1 to 3
    a = softmax(s_scaled)  # step 4
    out = a @ v  # step 5
    lib_out, _ = att.attention(q, k, v, keep)
    lo = np.array([v[: i + 1].min(axis=0) for i in range(8)])  # smallest value among the rows token i may mix
    hi = np.array([v[: i + 1].max(axis=0) for i in range(8)])
    assert ((out >= lo - TOL) & (out <= hi + TOL)).all()
    review.add(NOTE, 77, FORMULA,
               "Scale, mask, softmax, sum: outputs mix the values.",
               "correct",
               rf"the steps with a causal mask reproduce `lib.attention.attention` ({agree(out, lib_out, TOL)}); "
               rf"every output entry lies between the smallest and largest value of its column among the rows "
               rf"the token may attend to (all {count(out.size)} entries)", "notation",
               brief="reproduces lib (< #{0})")


def unscaled_saturation(review) -> None:
    """Unscaled, the softmax gradient shrinks as d_k grows."""
    raw = softmax_gradient_by_width(scaled=False)
    for n_keys in (16, 1024):
        row = [raw[n_keys, d_k] for d_k in (16, 64, 256, 1024)]
        assert all(a > b for a, b in zip(row, row[1:], strict=False))
    assert raw[16, 1024] < raw[16, 16] / 4 and raw[1024, 1024] < raw[1024, 16] / 2
    review.add(NOTE, 81, SCALING,
               "Unscaled scores grow with $d_k$ and saturate the softmax, so gradients vanish.",
               "correct",
               rf"mean Frobenius norm of the softmax Jacobian, unscaled $q \cdot k$ with independent $N(0, 1)$ "
               rf"components, for $d_k$ = 16, 64, 256, 1024: over 16 keys "
               rf"{', '.join(fixed(raw[16, d_k], 2) for d_k in (16, 64, 256, 1024))}; over 1024 keys "
               rf"{', '.join(fixed(raw[1024, d_k], 2) for d_k in (16, 64, 256, 1024))}. How small it must get to "
               rf'"vanish" depends on the number of keys', "scaling",
               brief="Jacobian norm falls #{7} to #{10} from $d_k$ = 16 to 1024")


def mean_of_product(review) -> None:
    """E[q_l k_l] = E[q_l] E[k_l] = 0 for independent zero-mean components (any distribution)."""
    rng = np.random.default_rng(14)
    n = 1_000_000
    normal = rng.standard_normal(n) * rng.standard_normal(n)
    uniform = rng.uniform(-np.sqrt(3), np.sqrt(3), n) * rng.uniform(-np.sqrt(3), np.sqrt(3), n)  # variance 1
    standard_error = normal.std() / np.sqrt(n)
    review.add(NOTE, 91, SCALING,
               "Each product term has mean zero.",
               "correct",
               rf"{count(n)} independent pairs: {bound(abs(normal.mean()), 0.01, '|sample mean|')} for normal "
               rf"components and {bound(abs(uniform.mean()), 0.01, '|sample mean|')} for uniform ones of variance 1 "
               rf"(the standard error is {fixed(standard_error, 3)}). Only independence and zero means are used",
               "scaling", brief="sample means under #{1} for normal and uniform entries")


def variance_of_product(review) -> None:
    """Var(q_l k_l) = E[q^2] E[k^2] = 1 for independent, zero-mean, unit-variance components."""
    rng = np.random.default_rng(15)
    n = 1_000_000
    normal = rng.standard_normal(n) * rng.standard_normal(n)
    uniform = rng.uniform(-np.sqrt(3), np.sqrt(3), n) * rng.uniform(-np.sqrt(3), np.sqrt(3), n)
    q1, k1 = rng.standard_normal(n) + 1, rng.standard_normal(n) + 1  # means 1
    shifted, second_moments = q1 * k1, np.mean(q1**2) * np.mean(k1**2)
    assert abs(normal.var() - 1) < 0.02 and abs(uniform.var() - 1) < 0.02
    assert abs(shifted.var() - 3) < 0.05 and abs(second_moments - 4) < 0.05
    review.add(NOTE, 93, SCALING,
               "Each product term has variance 1.",
               "correct",
               rf"sample variance over {count(n)} pairs: {fixed(normal.var(), 1)} (normal components), "
               rf"{fixed(uniform.var(), 1)} (uniform, variance 1). The identity uses the zero means the note "
               rf"assumes: with means 1, $E[q^2]E[k^2]$ = {fixed(second_moments, 1)} but the variance is "
               rf"{fixed(shifted.var(), 1)}", "scaling", brief="sample variance #{1} for both; needs the zero means")


def scaled_variance(review) -> None:
    """Var(q.k / sqrt(d_k)) = 1 whatever d_k."""
    rng = np.random.default_rng(16)
    variances = {}
    for d_k in (16, 64, 256, 1024):
        variances[d_k] = (sample_dot_products(rng, 10_000, d_k)[0] / np.sqrt(d_k)).var()
    assert all(abs(v - 1) < 0.05 for v in variances.values())
    review.add(NOTE, 103, SCALING,
               r"For unit-variance independent entries, dividing by $\sqrt{d_k}$ gives unit variance for any "
               r"$d_k$.",
               "correct",
               rf"sample variance of the scaled product over 10,000 pairs for $d_k$ = 16, 64, 256, 1024: "
               rf"{', '.join(fixed(v, 1) for v in variances.values())} (each within 0.05 of 1)", "scaling",
               brief="sample variances #{5}, #{6}, #{7}, #{8} for $d_k$ = 16 to 1024")


def scaled_gradients_stable(review) -> None:
    """Scaled, the softmax gradient no longer depends on d_k."""
    scaled = softmax_gradient_by_width(scaled=True)
    for n_keys in (16, 1024):
        row = [scaled[n_keys, d_k] for d_k in (16, 64, 256, 1024)]
        assert max(row) / min(row) < 1.1
    review.add(NOTE, 105, SCALING,
               "With the scaling the softmax stays in its responsive range whatever $d_k$.",
               "correct",
               rf"mean softmax-Jacobian norm of the scaled scores for $d_k$ = 16, 64, 256, 1024: over 16 keys "
               rf"{', '.join(fixed(scaled[16, d_k], 2) for d_k in (16, 64, 256, 1024))}; over 1024 keys "
               rf"{', '.join(fixed(scaled[1024, d_k], 2) for d_k in (16, 64, 256, 1024))}: flat in $d_k$ (under the "
               rf"note's independence assumptions), though it still falls with the number of keys", "scaling",
               brief="Jacobian norm flat in $d_k$: #{5} to #{8} over 16 keys")


# 3. How: multi-head attention


def independent_heads(review) -> None:
    """Each head uses only its own projections: changing head 1's weights leaves the other heads' outputs."""
    d, h = 64, 4
    d_k = d // h
    rng = np.random.default_rng(17)
    params = mh.init_params(d, h, bias=False, rng=rng)
    x = rng.standard_normal((6, d))
    identity = params._replace(w_o=np.eye(d))  # W^O = I exposes the concatenated heads
    before, _ = mh.multi_head_attention(x, None, identity, h)
    w_q = params.w_q.copy()
    w_q[:, :d_k] += rng.standard_normal((d, d_k))  # head 1's query projection only
    after, _ = mh.multi_head_attention(x, None, identity._replace(w_q=w_q), h)
    assert np.abs(after[:, :d_k] - before[:, :d_k]).max() > 0.01
    review.add(NOTE, 113, MOTIVATION,
               "Each head is an independent attention with its own projections.",
               "correct",
               rf"with $h = 4$ heads of width 16, changing head 1's $W^Q$ changes its own output columns and leaves "
               rf"the other three heads' ({agree(after[:, d_k:], before[:, d_k:], TOL)})", "multihead",
               brief="changing one head's $W^Q$ leaves the others (< #{3})")


def multihead_formula(review) -> None:
    """Concat(head_1..head_h) W^O, head by head with the stated shapes, against lib.multihead."""
    d, h = 64, 4
    d_k = d // h
    rng = np.random.default_rng(18)
    params = mh.init_params(d, h, bias=False, rng=rng)
    x = rng.standard_normal((6, d))
    heads = []
    for i in range(h):
        cols = slice(i * d_k, (i + 1) * d_k)  # W_i^Q, W_i^K, W_i^V: the i-th block of d_k columns, d x d_k
        heads.append(att.attention(x @ params.w_q[:, cols], x @ params.w_k[:, cols], x @ params.w_v[:, cols])[0])
    note = np.concatenate(heads, axis=1) @ params.w_o  # W^O: h d_v x d
    review.add(NOTE, 125, FORMULATION,
               r"Multi-head output is the concatenated heads times $W^O$ ($h d_v \times d$).",
               "correct",
               rf"head by head with those shapes ($d = 64$, $h = 4$) against `lib.multihead.multi_head_attention`: "
               rf"{agree(note, mh.multi_head_attention(x, None, params, h)[0], TOL)}", "multihead",
               brief="head by head against lib: max |difference| < #{2}")


def projection_weights(d: int = 512, h: int = 8) -> mh.MultiHeadParams:
    """The weights (no biases, as in eq. 3.1) of one attention layer, to count them."""
    return mh.init_params(d, h, bias=False, rng=np.random.default_rng(19))


def per_head_count(review) -> None:
    """3 d (d/h) projection weights per head."""
    p, d, h = projection_weights(), 512, 8
    d_k = d // h
    per_head = sum(w[:, :d_k].size for w in (p.w_q, p.w_k, p.w_v))
    bias_per_head = (mh.param_count(d, h) - mh.param_count(d, h, bias=False) - d) // h  # torch's b_Q, b_K, b_V
    assert per_head == 3 * d**2 // h and bias_per_head == 3 * d_k
    review.add(NOTE, 133, PARAMS,
               "One head's $Q$, $K$, $V$ projections hold $3d^2/h$ parameters.",
               "correct",
               rf"head 1's $W^Q, W^K, W^V$ in `lib.multihead.init_params(512, 8)` hold {count(per_head)} "
               rf"$= 3d^2/h$ weights. Eq. (3.1) has no biases; a layer with them (`torch.nn.MultiheadAttention`) "
               rf"adds {count(bias_per_head)} per head", "multihead", brief="#{3} at $d$ = #{1}, $h$ = #{2}")


def all_heads_count(review) -> None:
    """3 d^2 projection weights over all heads."""
    p, d = projection_weights(), 512
    total = p.w_q.size + p.w_k.size + p.w_v.size
    assert total == 3 * d**2
    review.add(NOTE, 134, PARAMS,
               "All heads' $Q$, $K$, $V$ projections hold $3d^2$ parameters.",
               "correct",
               rf"the $Q$, $K$, $V$ projections of all 8 heads hold {count(total)} $= 3d^2$ weights ($d = 512$)",
               "multihead", brief="#{1} at $d$ = 512")


def output_projection_count(review) -> None:
    """d^2 weights in W^O."""
    p, d = projection_weights(), 512
    assert p.w_o.size == d**2
    review.add(NOTE, 135, PARAMS,
               "The output projection adds $d^2$ parameters.",
               "correct",
               rf"$W^O$ is {dims(p.w_o)}: {count(p.w_o.size)} $= d^2$ weights ($d = 512$)", "multihead",
               brief="#{2} at $d$ = 512")


def heads_do_not_add_parameters(review) -> None:
    """The parameter count does not depend on h."""
    counts = {h: mh.param_count(512, h, bias=False) for h in (1, 2, 8, 64)}
    with_bias = {h: mh.param_count(512, h) for h in (1, 2, 8, 64)}
    assert len(set(counts.values())) == 1 and len(set(with_bias.values())) == 1
    review.add(NOTE, 138, PARAMS,
               "Splitting into heads does not change the parameter count.",
               "correct",
               rf"`lib.multihead.param_count(512, h)` is {count(counts[1])} for $h$ = 1, 2, 8 and 64 (with biases "
               rf"{count(with_bias[1])} for each)", "multihead", brief="#{1} for every $h$ from 1 to 64 at $d$ = 512")


def heads_restructure(review) -> None:
    """Same FLOPs for every h, but a different function of the same weights."""
    flops = {h: mh.multi_head_flops(1024, 1024, 512, h)["total"] for h in (1, 8, 64)}
    rng = np.random.default_rng(21)
    params = mh.init_params(512, 8, rng=rng)
    x = rng.standard_normal((16, 512))
    gap = np.abs(mh.multi_head_attention(x, None, params, 8)[0] - mh.multi_head_attention(x, None, params, 1)[0])
    assert len(set(flops.values())) == 1 and gap.max() > 0.01
    review.add(NOTE, 138, PARAMS,
               "Splitting into heads only reorganises the computation.",
               "correct",
               rf"the matrix-product FLOPs for $n = 1024$, $d = 512$ are {count(flops[1])} for $h$ = 1, 8 and 64 "
               rf"(`lib.multihead.multi_head_flops`); with the same weights, 8 heads and 1 head compute different "
               rf"outputs (max difference {fixed(gap.max(), 2)}): the same cost, restructured into $h$ softmaxes",
               "multihead", brief="same FLOPs (#{2}) for every $h$, different outputs")


# 4. Positional encoding


def self_attention_equivariant(review) -> None:
    """Permuting the tokens permutes the outputs of self-attention, and of a whole encoder layer."""
    rng = np.random.default_rng(22)
    layer = encoder_layer(22)
    x = rng.standard_normal((7, 32))
    perm = rng.permutation(7)
    params = torch_mha_params(layer.self_attn)
    attn, attn_perm = (mh.multi_head_attention(inp, None, params, 4)[0] for inp in (x, x[perm]))
    enc, enc_perm = note_encoder(x, layer), note_encoder(x[perm], layer)
    assert np.abs(attn_perm - attn).max() > 0.1
    review.add(NOTE, 146, ORDER,
               "Self-attention is permutation equivariant and sees its input as a set.",
               "correct",
               rf"for 7 tokens, $d = 32$, 4 heads: {agree(attn_perm, attn[perm], TOL, 'max |f(Px) - P f(x)|')}, and "
               rf"for a whole Post-LN encoder layer {agree(enc_perm, enc[perm], TOL, 'max |f(Px) - P f(x)|')}. "
               rf"Without a mask: a causal mask breaks it (see Failure Case 3)", "positional",
               brief="max |f(Px) - P f(x)| < #{3}; a causal mask breaks it")


def sinusoid_formula(review) -> None:
    """Eq. (4.1) evaluated directly against lib.positional.sinusoidal_encoding."""
    n, d = 100, 512
    p = np.arange(n)[:, None]
    i = np.arange(d // 2)[None, :]  # i = 0 .. d/2 - 1
    direct = np.empty((n, d))
    direct[:, 0::2] = np.sin(p / 10000 ** (2 * i / d))
    direct[:, 1::2] = np.cos(p / 10000 ** (2 * i / d))
    review.add(NOTE, 152, SINUSOIDS,
               r"Sinusoidal encoding: $\sin$ and $\cos$ of $pos/10000^{2i/d}$ in alternating columns.",
               "correct",
               rf"the formula for 100 positions and $d = 512$ (256 values of $i$ fill the {count(d)} columns) "
               rf"against `lib.positional.sinusoidal_encoding`: {agree(direct, pos.sinusoidal_encoding(n, d), TOL)}",
               "positional", brief="against lib for #{0} positions: < #{4}")


def unique_positions(review) -> None:
    """No two positions share an encoding: the distance depends on the offset only and is never 0."""
    d, max_offset = 512, 20_000
    omega = pos.sinusoid_frequencies(d)
    offsets = np.arange(1, max_offset + 1)[:, None]
    distance = np.sqrt((2 - 2 * np.cos(offsets * omega)).sum(axis=1))  # ||PE(p + k) - PE(p)|| for every p
    table = pos.sinusoidal_encoding(1001, d)
    check = np.linalg.norm(table[1000] - table[1000 - 357]) - distance[356]  # offset 357, from position 643
    assert abs(check) < 1e-9
    nearest = int(np.argmin(distance)) + 1
    review.add(NOTE, 158, SINUSOIDS,
               "No two positions share a sinusoidal encoding.",
               "correct",
               rf"$\|\mathrm{{PE}}(p + k) - \mathrm{{PE}}(p)\|^2 = \sum_i (2 - 2\cos k\omega_i)$ depends on the "
               rf"offset $k$ only; for $d = 512$ its smallest value over $k$ = 1 to {count(max_offset)} is "
               rf"{fixed(distance.min(), 2)} (at $k$ = {count(nearest)}), far from 0. No two integer positions can "
               rf"coincide: the pair with $\omega_0 = 1$ would need $k$ to be a multiple of $2\pi$", "positional",
               brief="closest pair #{6} apart (neighbours), far from 0")


def bounded_entries(review) -> None:
    """Entries lie in [-1, 1]; every row has norm sqrt(d/2)."""
    table = pos.sinusoidal_encoding(10_000, 512)
    norms = np.linalg.norm(table, axis=1)
    assert np.abs(table).max() <= 1
    review.add(NOTE, 159, SINUSOIDS,
               "Sinusoidal entries stay within $[-1, 1]$.",
               "correct",
               rf"over 10,000 positions with $d = 512$ the largest $|\mathrm{{PE}}|$ is at most 1, and every row has "
               rf"the same norm $\sqrt{{d/2}}$ = {fixed(np.sqrt(256), 0)} "
               rf"({agree(norms, np.full(10_000, 16.0), TOL, 'max |norm - 16|')})", "positional",
               brief="largest |entry| at most 1; every row has norm #{4}")


def shift_is_linear(review) -> None:
    """PE(pos + k) = PE(pos) M_k with one rotation per frequency, the same M_k for every pos."""
    d, k = 512, 7
    table = pos.sinusoidal_encoding(1007, d)
    m_k = pos.sinusoid_shift_matrix(k, d)
    dots = (table[:1000] * table[k:]).sum(axis=1)  # PE(p) . PE(p + k)
    shifted = agree(table[:1000] @ m_k, table[k:], 1e-11)
    review.add(NOTE, 160, SINUSOIDS,
               "A fixed offset acts on sinusoidal codes as a rotation, exposing relative position.",
               "correct",
               rf"with $k = 7$, $d = 512$: $\mathrm{{PE}}(pos)\,M_k$ with `lib.positional.sinusoid_shift_matrix` "
               rf"gives $\mathrm{{PE}}(pos + 7)$ for all 1000 positions ({shifted}); "
               rf"$M_k$ is orthogonal ({agree(m_k.T @ m_k, np.eye(d), TOL, 'max |M^T M - I|')}), one rotation per "
               rf"frequency, i.e. {count(d // 2)} $(\sin, \cos)$ planes with their own angles; and "
               rf"$\mathrm{{PE}}(p)\cdot\mathrm{{PE}}(p + 7)$ is the same for every $p$ "
               rf"({agree(dots, np.full(1000, dots[0]), 1e-10, 'spread')})", "positional",
               brief=r"$\mathrm{PE}(pos)M_7 = \mathrm{PE}(pos + 7)$ for all positions: < #{4}")


def embedding_plus_pe(review) -> None:
    """X_input = X_embed + PE: balanced only when the embeddings carry the original's sqrt(d) factor."""
    d = 512
    rng = np.random.default_rng(23)
    embed = rng.normal(0.0, d**-0.5, size=(1000, d))  # token embeddings initialised with std d^-1/2
    embed_norm = np.linalg.norm(embed, axis=1).mean()
    pe_norm = np.linalg.norm(pos.sinusoidal_encoding(1000, d), axis=1).mean()
    scaled_norm = np.sqrt(d) * embed_norm
    assert abs(embed_norm - 1) < 0.05 and abs(pe_norm - 16) < TOL and abs(scaled_norm - 22.6) < 0.05
    review.add(NOTE, 167, USAGE,
               "The first layer receives token embeddings plus positional codes.",
               "assumption",
               rf"only if $X_{{\text{{embed}}}}$ already includes the factor $\sqrt{{d}}$ by which the original "
               rf"model multiplies its embeddings (as `lib.pt.model` does). With embeddings initialised at std "
               rf"$d^{{-1/2}}$ a token row has norm {fixed(embed_norm, 1)} and a PE row {fixed(pe_norm, 0)} "
               rf"($d = 512$): the positions drown the tokens. Times $\sqrt{{d}}$ the token part is "
               rf"{fixed(scaled_norm, 1)}", "positional",
               brief=r"only with embeddings times $\sqrt{d}$: otherwise norm #{2} against #{3}")


def lookup_error(table: np.ndarray, position: int) -> str | None:
    """The name of the error that looking up ``position`` in a learned position table raises, or None."""
    try:
        table[position]
    except IndexError as err:
        return type(err).__name__
    return None


def learned_table(review) -> None:
    """A learned table has n_max x d parameters and no row for a position at or beyond n_max."""
    gpt2 = load_config(FIXTURES / "gpt2.config.json")
    table = np.zeros((gpt2.n_positions, gpt2.d_model))
    error = lookup_error(table, gpt2.n_positions)
    assert error == "IndexError"
    review.add(NOTE, 173, ALTERNATIVES,
               r"Learned position tables are $n_{\max} \times d$ and cannot reach beyond $n_{\max}$.",
               "correct",
               rf"GPT-2's table (its `config.json`): {count(gpt2.n_positions)} $\times$ {count(gpt2.d_model)} = "
               rf"{count(table.size)} parameters; position {count(gpt2.n_positions)} has no row (`{error}`)",
               "beyond", brief="GPT-2: #{3} parameters; position #{4} has no row")


def learned_slightly_better(review) -> None:
    """'Slightly better in practice': the model of the training chapter, trained with each table alike."""
    threads, deterministic = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    set_determinism(seed=0, threads=1)
    steps, batch, min_len, max_len = 160, 64, 2, 6  # reversal of 2 to 6 digits: both tables learn it
    held_out = reversal_batch(600, min_len, max_len, torch.Generator().manual_seed(123))
    accuracy = {}
    for variant in ("sinusoidal", "learned"):
        torch.manual_seed(0)
        model = Seq2SeqTransformer(VOCAB_SIZE, 64, 4, 128, 2, norm="pre", positional=variant, max_len=32)
        train(model, steps, batch_size=batch, min_len=min_len, max_len=max_len, lr=3e-3, seed=0, task="reverse")
        by_length = evaluate_by_length(model, held_out)
        accuracy[variant] = min(r.sequence_acc for r in by_length.values())
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(deterministic)
    floor, gap = 0.9, 0.1  # asserted bounds: what the page prints holds on any machine
    assert min(accuracy.values()) >= floor and abs(accuracy["learned"] - accuracy["sinusoidal"]) <= gap
    review.add(NOTE, 173, ALTERNATIVES,
               "Learned position tables work slightly better in practice than sinusoids.",
               "assumption",
               f"an empirical result for some tasks, none named. Trained alike (the training chapter's model, "
               f"reversal of {min_len} to {max_len} digits, {steps} steps of {batch} sequences), both reach at "
               f"least {percent(floor, 0)} exact sequences at every length, within {percent(gap, 0)} of each "
               f"other; the original paper's comparison (its Table 3, row E) also has them level", "beyond",
               brief=f"trained alike on {min_len} to {max_len} digits, both reverse at least {percent(floor, 0)} "
                     f"of sequences exactly: level")


def relative_positions(review) -> None:
    """A relative bias depends on j - i only: shifting the whole sequence changes nothing."""
    table = np.random.default_rng(24).standard_normal(32)  # one learned scalar per bucket (one head)
    offsets = np.arange(64)[None, :] - np.arange(64)[:, None]  # j - i for positions 0..63
    shifted = (1000 + np.arange(64))[None, :] - (1000 + np.arange(64))[:, None]  # positions 1000..1063
    bias, bias_shifted = table[t5_relative_bucket(offsets)], table[t5_relative_bucket(shifted)]
    review.add(NOTE, 174, ALTERNATIVES,
               "Relative schemes encode the offset between positions, not the positions.",
               "correct",
               rf"with T5's buckets (`lib.position_bias.t5_relative_bucket`) the bias on the logits of positions "
               rf"0-63 equals that of positions 1000-1063 ({agree(bias, bias_shifted, 0, exact=True)}). Beyond a "
               rf"maximum distance the offset is clipped (Shaw) or shares one bucket (T5)", "beyond",
               brief="T5 biases on positions 0-63 equal those on 1000-1063 exactly")


def rope_relative(review) -> None:
    """<R_m q, R_n k> depends on n - m only; RoPE has no parameters."""
    rng = np.random.default_rng(25)
    q, k = rng.standard_normal(64), rng.standard_normal(64)
    r = {m: pos.rope_rotation_matrix(m, 64) for m in (3, 10, 103, 110)}
    near, far = (r[3] @ q) @ (r[10] @ k), (r[103] @ q) @ (r[110] @ k)
    review.add(NOTE, 175, ALTERNATIVES,
               "RoPE rotates queries and keys by position, giving relative positions for free.",
               "correct",
               rf"$\langle R_3 q, R_{{10}} k\rangle = \langle R_{{103}} q, R_{{110}} k\rangle$ "
               rf"({agree(near, far, TOL)}, $d = 64$); the rotations keep norms "
               rf"({agree(np.linalg.norm(r[103] @ q), np.linalg.norm(q), TOL, 'max |norm change|')}) and are fixed "
               rf"by the position and the base 10000: no parameter is learned", "positional",
               brief="scores depend on the offset only (< #{4}); no parameters")


# 5. Encoder block


def post_ln_encoder(review) -> None:
    """Eqs. (5.1)-(5.2) with lib's pieces against torch.nn.TransformerEncoderLayer(norm_first=False)."""
    layer = encoder_layer(26)
    x = np.random.default_rng(26).standard_normal((1, 9, 32))
    with torch.no_grad():
        ref = layer(torch.from_numpy(x))
    same = agree(note_encoder(x[0], layer), ref[0], TOL)
    review.add(NOTE, 199, ARCHITECTURE,
               "The Post-LN encoder layer: LN of input plus attention, then LN of that plus FFN.",
               "correct",
               rf"the two equations with `lib.multihead`, `lib.norms` and `lib.ffn` reproduce "
               rf"`torch.nn.TransformerEncoderLayer` with `norm_first=False` and the same weights ({same})",
               "blocks", brief="matches `torch.nn.TransformerEncoderLayer`: < #{0}")


def residual_increment(review) -> None:
    """A Post-LN block rescales its input; only Pre-LN adds an increment to it."""
    rng = np.random.default_rng(27)
    x = layer_norm(rng.standard_normal((2000, 512)))  # an input as a previous Post-LN block leaves it
    post = x
    for _ in range(6):  # six Post-LN sub-layers whose outputs are as large as their inputs, uncorrelated with them
        post = layer_norm(post + layer_norm(rng.standard_normal((2000, 512))))
    one = layer_norm(x + layer_norm(rng.standard_normal((2000, 512))))
    coef_one, coef_six = ((y * x).sum() / (x * x).sum() for y in (one, post))
    assert abs(coef_one - 1 / np.sqrt(2)) < 0.005 and abs(coef_six - 1 / 8) < 0.005
    review.add(NOTE, 203, ARCHITECTURE,
               "Residual plus LayerNorm means a block adds an increment to its input.",
               "imprecise",
               rf"the input is kept, but not as $X$ plus an increment: the LayerNorm after the sum rescales it. For "
               rf"a normalised input and a sub-layer output of the same size, uncorrelated with it ($d = 512$), the "
               rf"Post-LN output contains the input with coefficient {fixed(coef_one, 2)} ($1/\sqrt 2$), and after "
               rf"six such sub-layers {fixed(coef_six, 3)}, about $(1/\sqrt 2)^6 = 1/8$. Only Pre-LN, "
               rf"$X + F(\mathrm{{LN}}(X))$, adds an increment (coefficient exactly 1)", "layernorm-ffn",
               brief="Post-LN rescales: input weight #{1} per sub-layer, #{4} after six")


def ffn_position_wise(review) -> None:
    """The FFN acts on each position alone: applied to a sequence it equals a row-by-row loop."""
    rng = np.random.default_rng(28)
    w1, b1 = 0.1 * rng.standard_normal((64, 256)), rng.standard_normal(256)
    w2, b2 = 0.1 * rng.standard_normal((256, 64)), rng.standard_normal(64)
    x = rng.standard_normal((10, 64))
    rows = np.vstack([feed_forward(x[i], w1, b1, w2, b2) for i in range(10)])
    same = agree(feed_forward(x, w1, b1, w2, b2), rows, TOL)
    review.add(NOTE, 207, FFN,
               "The FFN is a two-layer MLP applied to each position alone.",
               "correct",
               rf"`lib.ffn.feed_forward` on 10 tokens equals it applied token by token ({same})",
               "layernorm-ffn", brief="all at once equals token by token: < #{1}")


def d_ff_four_d(review) -> None:
    """d_ff = 4d in the original model and GPT-2; gated FFNs use less."""
    defaults = inspect.signature(torch.nn.Transformer.__init__).parameters
    original = defaults["dim_feedforward"].default / defaults["d_model"].default
    gpt2, llama = (load_config(FIXTURES / f"{name}.config.json") for name in ("gpt2", "Llama-2-7b-hf"))
    assert original == 4 and gpt2.d_ff == 4 * gpt2.d_model and llama.gated
    review.add(NOTE, 211, FFN,
               "Typically $d_{ff} = 4d$.",
               "correct",
               rf"`torch.nn.Transformer`'s defaults (the base model): {count(defaults['dim_feedforward'].default)} / "
               rf"{count(defaults['d_model'].default)} = {count(original)}; GPT-2: {count(gpt2.d_ff)} / "
               rf"{count(gpt2.d_model)} = {count(gpt2.d_ff // gpt2.d_model)}. For the plain FFN the note describes; "
               rf"gated FFNs use less (Llama 2 7B: $d_{{ff}}/d$ = {fixed(llama.d_ff / llama.d_model, 2)})",
               "layernorm-ffn", brief="#{0}/#{1} and #{4}/#{5}; gated FFNs less (#{9})")


def layernorm_not_batchnorm(review) -> None:
    """LayerNorm of a token ignores the other tokens of the batch; BatchNorm does not."""
    rng = np.random.default_rng(29)
    x = rng.standard_normal((8, 64))
    x_other = x.copy()
    x_other[1:] = 3 + 2 * rng.standard_normal((7, 64))  # the rest of the batch changes, token 0 does not
    ln, ln_other = layer_norm(x)[0], layer_norm(x_other)[0]
    bn, bn_other = (F.batch_norm(torch.from_numpy(b), None, None, training=True)[0] for b in (x, x_other))
    bn_change = float((bn - bn_other).abs().max())
    assert bn_change > 0.5
    review.add(NOTE, 215, LAYERNORM,
               "LayerNorm normalises over features, BatchNorm over the batch.",
               "correct",
               rf"changing the other 7 tokens of a batch of 8 leaves `lib.norms.layer_norm` of token 0 unchanged "
               rf"({agree(ln, ln_other, TOL)}) and moves its BatchNorm output by up to {fixed(bn_change, 1)}",
               "layernorm-ffn", brief="other tokens leave LayerNorm unchanged; BatchNorm moves #{4}")


def layernorm_formula(review) -> None:
    """Eq. (5.4) with the biased variance over the d features; gamma, beta in R^d."""
    rng = np.random.default_rng(30)
    d = 512
    x, gamma, beta = rng.standard_normal((4, d)), rng.standard_normal(d), rng.standard_normal(d)
    mu = x.mean(axis=1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
    note = gamma * (x - mu) / np.sqrt(var + 1e-5) + beta
    torch_y = F.layer_norm(torch.from_numpy(x), (d,), torch.from_numpy(gamma), torch.from_numpy(beta), eps=1e-5)
    unbiased_gap = 1 - np.sqrt((d - 1) / d)
    review.add(NOTE, 217, LAYERNORM,
               r"LayerNorm is $\gamma \odot (x - \mu)/\sqrt{\sigma^2 + \epsilon} "
               r"+ \beta$ with learned vectors $\gamma, \beta$.",
               "correct",
               rf"the formula with the variance over $d$ (not $d - 1$) against `lib.norms.layer_norm` "
               rf"({agree(note, layer_norm(x, gamma, beta), TOL)}) and PyTorch ({agree(note, torch_y, TOL)}); "
               rf"$\gamma, \beta$ add {count(layer_norm_param_count(d))} parameters for $d = 512$. The note does not "
               rf"say which variance: $d - 1$ would shrink every $(x - \mu)/\sigma$ by {percent(unbiased_gap, 3)}",
               "layernorm-ffn", brief="matches lib and PyTorch (< #{1})")


def input_gradient_ratio(n_layers: int, residual: bool = True) -> float:
    """||dL/dX_0|| / ||dL/dX_L|| through n_layers Post-LN encoder layers at initialisation (float64), with or
    without their residual connections."""
    torch.manual_seed(31)
    blocks = [PostLNEncoderBlock(64, 4, 256).double() for _ in range(n_layers)]
    x = torch.randn(1, 16, 64, dtype=torch.float64, requires_grad=True)
    y = x
    for block in blocks:
        if residual:
            y = block(y)  # LN(y + F(y)) for both sub-layers
        else:
            y = block.norms[0](block.self_attn(y)[0])  # LN(F(y)): the same layer without its residuals
            y = block.norms[1](block.ffn(y))
    g = torch.randn(y.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(31))
    (y * g).sum().backward()
    return float(x.grad.norm() / g.norm())


def residual_gradient_path(review) -> None:
    """Through a deep Post-LN stack the gradient survives with the residuals and vanishes without them."""
    with_res = {n: input_gradient_ratio(n) for n in (6, 48)}
    without = {n: input_gradient_ratio(n, residual=False) for n in (6, 48)}
    assert min(with_res.values()) > 0.3 and without[48] < 0.01 < without[6]
    review.add(NOTE, 225, RESIDUALS,
               "Residual paths keep gradients from vanishing in deep stacks.",
               "correct",
               rf"gradient norm at the input over that at the output of a stack of the note's Post-LN encoder "
               rf"layers (`lib.pt.blocks`, $d = 64$, at initialisation): {fixed(with_res[6], 2)} for 6 layers and "
               rf"{fixed(with_res[48], 2)} for 48; the same layers without their residuals give "
               rf"{fixed(without[6], 2)} and {fixed(without[48], 3)}. In Post-LN the path crosses "
               rf"every LayerNorm, so it is additive but not direct; in Pre-LN it is both", "layernorm-ffn",
               brief="input/output gradient #{1} (6 layers), #{3} (48); without residuals #{6}")


def identity_when_zero(review) -> None:
    """SubLayer = 0 passes the input unchanged only in Pre-LN, or for an already normalised Post-LN input."""
    d = 512
    rng = np.random.default_rng(32)
    embedded = np.sqrt(d) * rng.normal(0.0, d**-0.5, size=(10, d)) + pos.sinusoidal_encoding(10, d)
    post_raw = np.abs(layer_norm(embedded + 0) - embedded).max()  # the first block's input
    normalised = layer_norm(embedded)
    post_normalised = np.abs(layer_norm(normalised + 0) - normalised).max()  # a later block's input
    assert post_raw > 0.5 and post_normalised < 1e-4
    review.add(NOTE, 226, RESIDUALS,
               "A useless sub-layer can output 0 and pass its input.",
               "assumption",
               rf"exactly so in Pre-LN ($X + 0 = X$). In the note's Post-LN block a zero sub-layer still leaves "
               rf"$\mathrm{{LN}}(X)$: for the first block's input (scaled embeddings plus PE, $d = 512$) that moves "
               rf"entries by up to {fixed(post_raw, 1)}; for an input already normalised with $\gamma = 1$, "
               rf"$\beta = 0$ it is the identity to within {bound(post_normalised, 1e-4, 'max |change|')}",
               "layernorm-ffn", brief="in Post-LN the LayerNorm still moves it by #{2}")


# 6. Decoder block


def parallel_decoder(review) -> None:
    """Causal self-attention over the whole target equals computing each position from its prefix."""
    rng = np.random.default_rng(33)
    q, k, v = (rng.standard_normal((32, 16)) for _ in range(3))
    full, _ = att.attention(q, k, v, att.causal_mask(32))
    one_by_one = np.vstack([att.attention(q[t:t + 1], k[: t + 1], v[: t + 1])[0] for t in range(32)])
    review.add(NOTE, 236, MASKED,
               "The decoder trains on the whole target at once.",
               "correct",
               rf"one causal pass over 32 positions equals computing each position from its own prefix, one at a "
               rf"time ({agree(full, one_by_one, TOL)})", "blocks",
               brief="one causal pass equals prefix-by-prefix: < #{1}")


def causal_mask_zero_future(review) -> None:
    """M_ij = -inf for j > i: strictly upper-triangular, zero weight on the future, outputs <= t untouched."""
    n = 8
    m = np.where(att.causal_mask(n), 0.0, -np.inf)  # the note's M
    torch_m = torch.nn.Transformer.generate_square_subsequent_mask(n, dtype=torch.float64).numpy()
    rng = np.random.default_rng(34)
    params = mh.init_params(32, 4, rng=rng)
    x = rng.standard_normal((n, 32))
    out, a = mh.multi_head_attention(x, None, params, 4, att.causal_mask(n))
    x_future = x.copy()
    x_future[5:] = rng.standard_normal((n - 5, 32))  # change positions 6..8
    out_future, _ = mh.multi_head_attention(x_future, None, params, 4, att.causal_mask(n))
    assert (m == np.triu(m, 1)).all() and np.isinf(np.triu(m, 1)[np.triu_indices(n, 1)]).all()
    future = np.triu(np.ones((n, n), dtype=bool), 1)
    review.add(NOTE, 240, MASKED,
               r"The causal mask hides the upper triangle: $t$ sees positions $\le t$.",
               "correct",
               rf"$M$ is strictly upper-triangular and equals PyTorch's `generate_square_subsequent_mask` "
               rf"({agree(m, torch_m, 0, exact=True)}); the future weights of all 4 heads are exactly 0 "
               rf"({agree(a[:, future], np.zeros((4, int(future.sum()))), 0, 'max |future weight|', exact=True)}); "
               rf"changing tokens 6-8 leaves outputs 1-5 unchanged ({agree(out_future[:5], out[:5], TOL)})", "blocks",
               brief="equals PyTorch's mask; future weights exactly 0")


def cross_attention(review) -> None:
    """Queries from the decoder, keys and values from the encoder: every decoder position reads every source one."""
    rng = np.random.default_rng(35)
    params = mh.init_params(32, 4, rng=rng)
    decoder_x, encoder_e = rng.standard_normal((5, 32)), rng.standard_normal((9, 32))
    out, a = mh.multi_head_attention(decoder_x, encoder_e, params, 4)
    e_changed = encoder_e.copy()
    e_changed[8] += 1.0  # the last source token only
    change = np.abs(mh.multi_head_attention(decoder_x, e_changed, params, 4)[0] - out).max(axis=1)
    assert (a > 0).all() and (change > 1e-6).all()
    review.add(NOTE, 246, CROSS,
               "Cross-attention: decoder queries, encoder keys and values.",
               "correct",
               rf"5 decoder positions over 9 encoder positions: the weights have shape {dims(a[0])} per head, all "
               rf"positive, and changing the last source token changes every one of the 5 outputs", "blocks",
               brief=r"weights $#{2} \times #{3}$ per head")


def post_ln_decoder(review) -> None:
    """The three decoder equations with lib's pieces against torch.nn.TransformerDecoderLayer(norm_first=False)."""
    torch.manual_seed(36)
    layer = torch.nn.TransformerDecoderLayer(32, 4, 64, dropout=0.0, batch_first=True, dtype=torch.float64).eval()
    rng = np.random.default_rng(36)
    x, e = rng.standard_normal((6, 32)), rng.standard_normal((9, 32))
    self_p, cross_p = torch_mha_params(layer.self_attn), torch_mha_params(layer.multihead_attn)
    z1 = layer_norm(x + mh.multi_head_attention(x, None, self_p, 4, att.causal_mask(6))[0], *torch_norm(layer.norm1))
    z2 = layer_norm(z1 + mh.multi_head_attention(z1, e, cross_p, 4)[0], *torch_norm(layer.norm2))
    z3 = layer_norm(z2 + feed_forward(z2, *torch_ffn(layer)), *torch_norm(layer.norm3))
    mask = torch.nn.Transformer.generate_square_subsequent_mask(6, dtype=torch.float64)
    with torch.no_grad():
        ref = layer(torch.from_numpy(x)[None], torch.from_numpy(e)[None], tgt_mask=mask)
    review.add(NOTE, 253, DECODER,
               "The decoder layer: masked self-attention, cross-attention, FFN, each Post-LN.",
               "correct",
               rf"the three equations with `lib`'s pieces reproduce `torch.nn.TransformerDecoderLayer` with "
               rf"`norm_first=False`, the same weights and a causal mask ({agree(z3, ref[0], TOL)})", "blocks",
               brief="matches `torch.nn.TransformerDecoderLayer`: < #{0}")


# 7. The full Transformer


def six_layers(review) -> None:
    """N = 6 encoder (and decoder) blocks in the original model."""
    defaults = inspect.signature(torch.nn.Transformer.__init__).parameters
    n_enc, n_dec = defaults["num_encoder_layers"].default, defaults["num_decoder_layers"].default
    assert n_enc == n_dec == 6
    review.add(NOTE, 267, FULL,
               "The usual stack has 6 encoder and 6 decoder layers.",
               "correct",
               rf"`torch.nn.Transformer`, which follows the base model, defaults to {count(n_enc)} encoder and "
               rf"{count(n_dec)} decoder layers", "blocks", brief="PyTorch's Transformer defaults: #{0} and #{1}")


def teacher_forcing(review) -> None:
    """The decoder input is BOS + the target shifted right: each target token is the input one step later."""
    b = reversal_batch(256, 2, 8, torch.Generator().manual_seed(37))
    digits = torch.arange(b.tgt_out.shape[1])[None, :] < b.lengths[:, None]  # target digits (before EOS)
    shifted_ok = (b.tgt_in[:, 1:] == b.tgt_out[:, :-1])[digits[:, :-1]]
    assert bool(shifted_ok.all()) and bool((b.tgt_in[:, 0] == BOS).all())
    review.add(NOTE, 271, FULL,
               "Teacher forcing feeds the shifted target and predicts all positions in parallel.",
               "correct",
               rf"in the training chapter's batches (`lib.pt.train.reversal_batch`, 256 sequences) the decoder input "
               rf"starts with BOS and each of the {count(int(shifted_ok.numel()))} target digits is the input token "
               rf"one position later; all positions are predicted in one causal pass (see 6.1)", "training",
               brief="#{1} target digits each one step ahead of the input")


# 8. Failure cases


def attention_matrix_memory(review) -> None:
    """The n x n weights of one head at n = 10,000."""
    n = 10_000
    fp32 = n * n * BYTES_PER_DTYPE["fp32"]
    assert fp32 == 4 * 10**8
    review.add(NOTE, 277, FAILURES,
               r"At $n = 10{,}000$ one head stores a $10{,}000 \times 10{,}000$ weight matrix.",
               "correct",
               rf"{count(n * n)} weights: {fixed(fp32 / GB, 1)} GB ({fixed(fp32 / GiB, 3)} GiB) in fp32 per head and "
               rf"sequence, {fixed(48 * fp32 / GB, 1)} GB for the 8 heads of 6 layers. It is the standard kernel that "
               rf"stores it; the tiled ones of the next item do not", "training",
               brief="#{1} GB in fp32; tiled kernels never store it")


def practical_limit(review) -> None:
    """'A few thousand tokens' is the limit when every layer's weights are kept; one layer at a time allows more."""
    w = model_weight_bytes()["7b"]
    training = max_stored_length(32 * 32, "fp16", w)  # all layers kept for the backward pass
    inference = max_stored_length(32, "fp16", w)  # one layer's 32 heads at a time
    assert training < 8_000 < 30_000 < inference
    fit = training_fit()
    review.add(NOTE, 279, FAILURES,
               "Without tiled, sparse or linear attention, models stop at a few thousand tokens.",
               "assumption",
               rf"it depends on how many $n \times n$ matrices are held at once and where the model states go. "
               rf"Training Llama 2 7B needs {fixed(fit['states_gb'], 1)} GB of model states (more than one H100); "
               rf"with ZeRO-3 over 8 H100s one sequence with eager attention fits up to $n$ = "
               rf"{count(fit['zero3_n'])}. In inference, one layer's 32 heads at a time beside fp16 weights, up to "
               rf"{count(inference)}",
               "train-memory",
               brief=f"training: $n$ = {count(fit['zero3_n'])} on 8 H100s (ZeRO-3); inference: "
                     f"{count(inference)}, one layer at a time")


def order_without_positions(review) -> None:
    """Without positions an encoder is permutation equivariant; a causal decoder is not."""
    rng = np.random.default_rng(38)
    params = mh.init_params(32, 4, rng=rng)
    x = rng.standard_normal((7, 32))
    perm = rng.permutation(7)
    causal = att.causal_mask(7)
    out, out_perm = (mh.multi_head_attention(inp, None, params, 4, causal)[0] for inp in (x, x[perm]))
    gap = np.abs(out_perm - out[perm]).max()
    assert gap > 0.1
    review.add(NOTE, 281, FAILURES,
               "Without positions the Transformer is permutation equivariant.",
               "assumption",
               rf"true of the encoder and of unmasked attention (see 4.1); the decoder's causal mask already "
               rf"depends on order. For causal self-attention with no positions (7 tokens, $d = 32$) "
               rf"$\max|f(Px) - P f(x)|$ = {fixed(gap, 2)}", "positional",
               brief="the encoder is; a causal decoder is not (#{3})")


def extrapolation(review) -> None:
    """Sinusoids are defined at any position; a learned table has no row beyond its size."""
    far = pos.sinusoidal_encoding(1, 512)[0] @ pos.sinusoid_shift_matrix(10**6, 512)  # PE(10^6) = PE(0) M_k
    table = np.zeros((512, 512))  # a learned table for 512 positions
    error = lookup_error(table, 512)
    assert np.abs(far).max() <= 1 + TOL and error == "IndexError"
    review.add(NOTE, 283, FAILURES,
               "Sinusoids exist at any position; learned tables stop at their length.",
               "correct",
               rf"$\mathrm{{PE}}(10^6) = \mathrm{{PE}}(0)\,M_{{10^6}}$ exists, with every entry in $[-1, 1]$ and norm "
               rf"{fixed(np.linalg.norm(far), 0)}; a learned table of 512 rows has no row 512 (`{error}`). What a "
               rf"trained model does at unseen positions is measured in the chapter: trained on 2 to 8 digits, the "
               rf"training chapter's model copies almost no longer sequence with either scheme, and both break at "
               rf"the first position training never showed", "beyond",
               brief="true, but neither scheme copies beyond trained lengths")


def causal_mask_leak(review) -> None:
    """Without the causal mask, output t depends on token t + 1."""
    rng = np.random.default_rng(39)
    params = mh.init_params(32, 4, rng=rng)
    x = rng.standard_normal((8, 32))
    x_next = x.copy()
    x_next[5] += 1.0  # change token 6 only
    leak = {}
    for name, mask in (("none", None), ("causal", att.causal_mask(8))):
        before, _ = mh.multi_head_attention(x, None, params, 4, mask)
        after, _ = mh.multi_head_attention(x_next, None, params, 4, mask)
        leak[name] = np.abs(after[:5] - before[:5]).max()
    assert leak["none"] > 1e-3
    review.add(NOTE, 285, FAILURES,
               "Without the causal mask training leaks the future and generation fails.",
               "correct",
               rf"changing token 6 moves the outputs at positions 1-5 by up to {fixed(leak['none'], 3)} without the "
               rf"mask; with it, {bound(leak['causal'], TOL, 'max |change|')}. The training chapter trains such a "
               rf"model: its loss falls while its generations fail", "training",
               brief="token 6 moves earlier outputs by #{3} unmasked; < #{4} masked")


def padding_leak(review) -> None:
    """Without a padding mask the real tokens give weight to the padding."""
    rng = np.random.default_rng(40)
    q, k, v = (rng.standard_normal((1, 8, 16)) for _ in range(3))  # 3 real tokens, then 5 padding positions
    keep = att.padding_mask(np.array([3]), 8)
    _, a_open = att.attention(q, k, v)
    _, a_masked = att.attention(q, k, v, keep)
    on_padding = a_open[0, :3, 3:].sum(axis=1).mean()
    assert on_padding > 0.3
    review.add(NOTE, 287, FAILURES,
               "Without a padding mask attention spreads onto padding.",
               "correct",
               rf"3 real tokens padded to 8 ($d_k = 16$): without the mask the real queries put "
               rf"{percent(on_padding, 0)} of their weight on the 5 padding keys on average; with "
               rf"`lib.attention.padding_mask` "
               rf"{agree(a_masked[0, :, 3:], np.zeros((8, 5)), 0, 'max |weight on padding|', exact=True)}", "training",
               brief="#{3} of the weight lands on padding; masked, #{5}")


def weights_not_importance(review) -> None:
    """The key with the largest weight is often not the one whose removal changes the output most."""
    rng = np.random.default_rng(41)
    rows, n_keys, d = 500, 16, 64
    q, k, v = rng.standard_normal((rows, 1, d)), rng.standard_normal((rows, n_keys, d)), rng.standard_normal(
        (rows, n_keys, d))
    out, a = att.attention(q, k, v)  # (rows, 1, d), (rows, 1, n_keys)
    leave_one_out, _ = att.attention(np.repeat(q, n_keys, axis=1), k, v, ~np.eye(n_keys, dtype=bool))  # row j: no key j
    effect = np.linalg.norm(leave_one_out - out, axis=2)  # (rows, n_keys)
    disagree = (a[:, 0].argmax(axis=1) != effect.argmax(axis=1)).mean()
    assert 0.05 < disagree < 0.95
    review.add(NOTE, 289, FAILURES,
               "Attention weights mix values; they do not attribute importance.",
               "correct",
               rf"removing key $j$ changes the output by $a_j\|v_j - o\|/(1 - a_j)$, which depends on the value as "
               rf"well as the weight: in {percent(disagree, 0)} of {rows} random rows (16 keys, $d = 64$) the key "
               rf"with the largest weight is not the one whose removal changes the output most", "softmax",
               brief="in #{1} of rows the top-weight key is not the most influential")


def weight_means_alignment(review) -> None:
    """Within a row, the order of the weights is exactly the order of q . k_j."""
    rng = np.random.default_rng(42)
    q, k = rng.standard_normal((1000, 1, 64)), rng.standard_normal((1000, 16, 64))
    _, a = att.attention(q, k, np.zeros((1000, 16, 1)))
    same_order = (np.argsort(a[:, 0], axis=1) == np.argsort((q * k).sum(axis=2), axis=1)).all(axis=1)
    assert same_order.all()
    review.add(NOTE, 291, FAILURES,
               "A high weight shows alignment of query and key, not importance.",
               "correct",
               rf"in all {count(int(same_order.sum()))} rows (16 keys, $d_k = 64$) the weights are in exactly the "
               rf"order of the dot products $q \cdot k_j$: the softmax is increasing, so a weight records alignment "
               rf"and nothing else (with a position bias such as ALiBi, the bias too)", "softmax",
               brief="weights follow the dot products' order in all #{0} rows")


# 9. Connections


def rnn_vs_attention_memory(review) -> None:
    """O(n) memory for a recurrence; O(n^2) for attention only when the weights are stored."""
    n, d, block = 10_000, 512, 128
    rnn_states = n * d  # the states a recurrent layer keeps for its backward pass
    stored = n * n  # one head's weights, as a standard kernel stores them
    tiled_buffer = n * block  # the scores a tiled kernel holds at a time
    rng = np.random.default_rng(43)
    q, k, v = (rng.standard_normal((512, 64)) for _ in range(3))
    assert tiled_buffer < rnn_states < stored
    review.add(NOTE, 300, CONNECTIONS,
               "RNNs use linear memory and run sequentially; Transformers quadratic memory, in parallel.",
               "assumption",
               rf"the $O(n^2)$ holds only when the $n \times n$ weights are stored. At $n$ = 10,000 a recurrent "
               rf"layer ($d = 512$) keeps {count(rnn_states)} state entries; one head's weights are "
               rf"{count(stored)}, but a tiled kernel holds {count(tiled_buffer)} scores at a time (128 keys) and is "
               rf"exact (`lib.tiled.tiled_attention`, $n = 512$: "
               rf"{agree(tiled_attention(q, k, v, block_size=128)[0], att.attention(q, k, v)[0], TOL)})",
               "tiled-attention", brief="a tile holds #{5} scores, exact")


def softmax_distribution(review) -> None:
    """Softmax outputs are probability distributions; cross-entropy is -log softmax at the target."""
    rng = np.random.default_rng(44)
    logits, targets = rng.standard_normal((32, 100)), rng.integers(0, 100, 32)
    p = softmax(logits)
    ce = -log_softmax(logits)[np.arange(32), targets].mean()
    ce_torch = F.cross_entropy(torch.from_numpy(logits), torch.from_numpy(targets))
    assert (p >= 0).all()
    sums = agree(p.sum(axis=1), np.ones(32), TOL, "max |row sum - 1|")
    review.add(NOTE, 301, CONNECTIONS,
               "Models train with cross-entropy on softmax probabilities.",
               "correct",
               rf"each softmax row is non-negative and sums to 1 ({sums}); "
               rf"the mean of $-\log \operatorname{{softmax}}$ at the targets is PyTorch's `cross_entropy` "
               rf"({agree(ce, ce_torch, TOL)})", "softmax",
               brief="rows sum to 1; matches PyTorch's `cross_entropy` (< #{3})")


def flashattention_exact(review) -> None:
    """FlashAttention-style tiling is exact and moves less memory."""
    rng = np.random.default_rng(45)
    q, k, v = (rng.standard_normal((512, 64)) for _ in range(3))
    tiled, _ = tiled_attention(q, k, v, block_size=128, causal=True)
    exact, _ = att.attention(q, k, v, att.causal_mask(512))
    io = io_elements(4096, 4096, 64, 64, 128)
    assert io["tiled"] < io["naive"] / 2
    review.add(NOTE, 302, CONNECTIONS,
               "FlashAttention is exact attention that uses less memory.",
               "correct",
               rf"`lib.tiled.tiled_attention` (128-key tiles, causal, $n = 512$) equals exact attention "
               rf"({agree(tiled, exact, TOL)}) without forming the $n \times n$ matrix; at $n = 4096$, $d_k = 64$ it "
               rf"moves {count(io['tiled'])} elements between slow and fast memory against {count(io['naive'])} "
               rf"(`lib.tiled.io_elements`)", "tiled-attention",
               brief="tiled equals exact (< #{2}); #{5} elements moved against #{6}")


def check(review) -> None:
    """Every checkable claim of the Theory Notes, in the note's order."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the tensors here are small: a second thread only adds waiting on a busy machine
    try:
        notation_shapes(review)
        weights_row_stochastic(review)
        additive_mask(review)
        head_widths(review)
        recurrence_is_sequential(review)
        recurrence_bandwidth(review)
        gradient_path_length(review)
        lstm_gating(review)
        all_positions_at_once(review)
        path_length_one(review)
        recurrence_linear_in_n(review)
        acceptable_length(review)
        higher_score_more_weight(review)
        attention_formula(review)
        score_matrix(review)
        five_steps(review)
        unscaled_saturation(review)
        mean_of_product(review)
        variance_of_product(review)
        scaled_variance(review)
        scaled_gradients_stable(review)
        independent_heads(review)
        multihead_formula(review)
        per_head_count(review)
        all_heads_count(review)
        output_projection_count(review)
        heads_do_not_add_parameters(review)
        heads_restructure(review)
        self_attention_equivariant(review)
        sinusoid_formula(review)
        unique_positions(review)
        bounded_entries(review)
        shift_is_linear(review)
        embedding_plus_pe(review)
        learned_table(review)
        learned_slightly_better(review)
        relative_positions(review)
        rope_relative(review)
        post_ln_encoder(review)
        residual_increment(review)
        ffn_position_wise(review)
        d_ff_four_d(review)
        layernorm_not_batchnorm(review)
        layernorm_formula(review)
        residual_gradient_path(review)
        identity_when_zero(review)
        parallel_decoder(review)
        causal_mask_zero_future(review)
        cross_attention(review)
        post_ln_decoder(review)
        six_layers(review)
        teacher_forcing(review)
        attention_matrix_memory(review)
        practical_limit(review)
        order_without_positions(review)
        extrapolation(review)
        causal_mask_leak(review)
        padding_leak(review)
        weights_not_importance(review)
        weight_means_alignment(review)
        rnn_vs_attention_memory(review)
        softmax_distribution(review)
        flashattention_exact(review)
    finally:
        torch.set_num_threads(threads)
