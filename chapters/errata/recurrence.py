"""Pitfalls about what attention replaced: recurrent networks (their gradients, their use of the hardware) and what
attention does and does not change."""

from __future__ import annotations

import numpy as np
import torch

import lib.attention as att
import lib.recurrence as rec
from lib.book.fmt import agree, count, fixed
from lib.constants import BYTES_PER_DTYPE
from lib.flops import matmul_flops

from . import TOL, pitfall


@pitfall("beyond")
def rnn_compute_idle() -> dict[str, str]:
    """One recurrent step h W_hh (d = 1024, bf16) is bandwidth-bound: for a batch of 64 it does 57 FLOPs per byte
    against the 295 an H100 needs. The intensity is B d / (d + 2B), about the batch size B while B << d."""
    batch, d = 64, 1024

    def intensity(b: int) -> float:
        moved = (d * d + 2 * b * d) * BYTES_PER_DTYPE["bf16"]  # read W_hh and h_{t-1}, write h_t
        return matmul_flops(b, d, d) / moved

    ridge = 989e12 / 3.35e12  # H100 SXM data sheet: 989 TFLOP/s dense bf16, 3.35 TB/s
    assert intensity(batch) < ridge / 4 and abs(intensity(batch) - batch * d / (d + 2 * batch)) < TOL
    assert all(0.8 * b < intensity(b) <= b for b in (1, 8, batch))
    return {"batch": count(batch), "d": count(d), "intensity": fixed(intensity(batch), 0), "ridge": fixed(ridge, 0)}


@pitfall("beyond")
def lstm_forget_bias() -> dict[str, str]:
    """How fast an LSTM (d = 16) forgets is set by its forget gates: with a forget-gate bias of 5 the cell-state
    gradient after 300 steps keeps a norm of order 1 (1.4 in this draw); at PyTorch's initialisation it is below
    1e-30."""
    d, steps = 16, 300
    x = torch.randn(steps, 1, d, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
    norms = {}
    open_gate = 5  # a forget-gate bias that holds the gates near 1
    for bias in (0.0, open_gate):
        torch.manual_seed(7)
        cell = torch.nn.LSTMCell(d, d, dtype=torch.float64)
        with torch.no_grad():
            cell.bias_ih[d:2 * d] += bias  # the forget gate's slice
        c0 = torch.zeros(1, d, dtype=torch.float64, requires_grad=True)
        h, c = torch.zeros(1, d, dtype=torch.float64), c0
        for t in range(steps):
            h, c = cell(x[t], (h, c))
        norms[bias] = float(torch.autograd.grad(c.sum(), c0)[0].norm())
    assert norms[0.0] < 1e-30 and 0.1 < norms[open_gate] < 10
    return {"bias": count(open_gate), "steps": count(steps), "d": count(d), "tiny": "10⁻³⁰"}


@pitfall("beyond")
def rnn_explodes() -> dict[str, str]:
    """The chain of Jacobians that makes an RNN's gradient vanish makes it explode when the recurrence expands."""
    d, n = 32, 101
    rng = np.random.default_rng(0)
    x, w_xh = rng.normal(size=(n, d)), rng.normal(size=(d, d)) * 0.5 / np.sqrt(d)
    chain = {}
    expanding = 3  # spectral radius of an expanding recurrence
    for rho in (0.5, expanding):
        w_hh = rec.random_recurrent_weight(d, rho, np.random.default_rng(1))
        chain[rho] = rec.jacobian_chain_norms(rec.rnn_jacobians(rec.rnn_forward(x, w_xh, w_hh), w_hh))[-1]
    assert chain[0.5] < 1e-30 and chain[expanding] > 1e8
    return {"radius": count(expanding), "steps": count(n - 1), "bound": "10⁸"}


@pitfall("beyond")
def attention_dilutes() -> dict[str, str]:
    """Attention's path to any token is one step, but a query spread over n tokens gives each only 1/n."""
    n, d = 100, 16
    rng = np.random.default_rng(2)
    q, k, v = (rng.normal(size=(n, d)) for _ in range(3))
    k[0] = 3.0 * q[-1]  # the first key matches the last query
    _, a = att.attention(q, k, v, att.causal_mask(n))
    jac = torch.autograd.functional.jacobian(
        lambda vt: torch.softmax(torch.from_numpy(q[-1] @ k.T / np.sqrt(d)), -1) @ vt, torch.from_numpy(v)).numpy()
    agree(jac[:, 0, :], a[-1, 0] * np.eye(d), TOL)  # d o_n / d v_1 = a_n1 I: one step
    assert a[-1, 0] > 0.99
    n_long = 4096
    _, even = att.attention(np.zeros((1, d)), rng.normal(size=(n_long, d)), rng.normal(size=(n_long, d)))
    agree(even, np.full((1, n_long), 1 / n_long), 0, exact=True)
    return {"n": count(n_long), "weight": f"1/{count(n_long)}"}
