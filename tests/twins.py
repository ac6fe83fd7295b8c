"""The twin contract as data: every NumPy/PyTorch pair of the library, declared once.

Like PyTorch's OpInfo (``common_methods_invocations.py``): each :class:`Twin` names the two functions, a
sample input (NumPy arrays; the battery casts them to each backend and dtype), which arguments and outputs
carry gradients, the closed-form backward pair where the library has one, and bad inputs with the error
both backends must raise. :mod:`tests.test_twins` applies one battery to every row:

* forward agreement in float64, float32, float16 and bfloat16 (NumPy has no bfloat16), each against the
  float64 NumPy reference evaluated on the same rounded inputs, within ``conftest.TOL``;
* backward agreement in the same dtypes: torch.autograd through the PyTorch twin, and the closed-form
  backward of both backends, against float64 autograd;
* ``torch.autograd.gradcheck`` in float64;
* each bad input: the same error class, and the same message word for word, from both backends.

Functions that one backend simply re-exports from the other (``default_scale``, ``tile_schedule``,
``check_head_config``, the parameter and FLOP counts) are the same object and need no twin test.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

import lib.attention as npa
import lib.ffn as npf
import lib.multihead as npm
import lib.norms as npn
import lib.position_bias as npb
import lib.positional as npp
import lib.pt.attention as pta
import lib.pt.ffn as ptf
import lib.pt.multihead as ptm
import lib.pt.norms as ptn
import lib.pt.positional as ptp
import lib.pt.softmax as pts
import lib.pt.tiled as ptt
import lib.softmax as nps
import lib.tiled as nt

Args = tuple[Any, ...]


@dataclass(frozen=True)
class Bad:
    """A bad input: the arguments (NumPy form; converted to torch float64 for the PyTorch twin), the error
    class both backends raise and a regular expression its message matches."""

    args: Args
    exc: type[Exception]
    match: str
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Twin:
    """One NumPy/PyTorch pair. ``sample(rng)`` returns the positional arguments in NumPy form."""

    name: str
    np_fn: Callable[..., Any]
    pt_fn: Callable[..., Any]
    sample: Callable[[np.random.Generator], Args]
    kwargs: dict[str, Any] = field(default_factory=dict)
    #: indices of the arguments to differentiate (empty: no gradient battery)
    grad_args: tuple[int, ...] = ()
    #: indices of the (flattened) outputs that carry a gradient; None: all of them
    grad_outputs: tuple[int, ...] | None = None
    #: closed-form backward pair ``(np_bw, pt_bw)``: ``bw(args, cotangents) -> grads of grad_args``
    backward: tuple[Callable[..., Any], Callable[..., Any]] | None = None
    #: whether the inputs may be cast to float16/bfloat16 (False for integer-only arguments)
    low_precision: bool = True
    bad: tuple[Bad, ...] = ()

    def __str__(self) -> str:
        return self.name


def _n(rng: np.random.Generator, *shape: int, scale: float = 1.0, offset: float = 0.0) -> np.ndarray:
    return offset + scale * rng.normal(size=shape)


def _mask(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """A boolean mask (True = may attend) with row 1 fully masked and every other row keeping key 0."""
    m = rng.random(size=shape) < 0.6
    m[..., 0] = True
    m[..., 1, :] = False
    return m


def _qkv(rng: np.random.Generator) -> Args:
    return _n(rng, 2, 4, 3), _n(rng, 2, 5, 3), _n(rng, 2, 5, 2), _mask(rng, 4, 5)


def _qkv_bias(rng: np.random.Generator) -> Args:
    """``_qkv`` plus ``scale=None`` and an additive logit bias ``(n_q, n_k)``, broadcast over the batch."""
    return (*_qkv(rng), None, _n(rng, 4, 5, scale=2))


def _tiled_backward_args(rng: np.random.Generator) -> Args:
    q, k, v, _ = _qkv(rng)
    out, lse = nt.tiled_attention(q, k, v, block_size=3)
    return q, k, v, out, lse, _n(rng, *out.shape)


X = np.arange(6.0).reshape(2, 3)  # a small finite input for bad-input cases
NAN_X = np.array([[0.0, np.nan, 1.0]])
INF_X = np.array([[0.0, np.inf, 1.0]])
W = dict(w1=np.ones((3, 4)), b1=np.zeros(4), w2=np.ones((4, 3)), b2=np.zeros(3))


def _with(base: Args, i: int, value: Any) -> Args:
    return tuple(value if j == i else a for j, a in enumerate(base))


QKV_BAD = (np.ones((4, 3)), np.ones((5, 3)), np.ones((5, 2)))
FFN_ARGS = (np.ones((2, 3)), W["w1"], W["b1"], W["w2"], W["b2"])
MHA_PARAMS = npm.init_params(8, 2, rng=np.random.default_rng(0))
NAN_XQ = np.ones((3, 8))
NAN_XQ[0, 1] = np.nan
NEG_INF_BIAS = np.zeros((4, 5))
NEG_INF_BIAS[2, 3] = -np.inf
MHA_X = np.ones((3, 8))  # unbatched, 3 tokens; with MHA_PARAMS and 2 heads the scores are (2, 3, 3)

TWINS: tuple[Twin, ...] = (
    # ---------------------------------------------------------------- softmax (lib.softmax)
    Twin("softmax_naive", nps.softmax_naive, pts.softmax_naive, lambda r: (_n(r, 3, 5),), grad_args=(0,)),
    Twin(
        "softmax", nps.softmax, pts.softmax, lambda r: (_n(r, 3, 5, scale=3),), grad_args=(0,),
        backward=(lambda a, c: (nps.softmax_vjp(nps.softmax(a[0]), c[0]),),
                  lambda a, c: (pts.softmax_vjp(pts.softmax(a[0]), c[0]),)),
        bad=(
            Bad((NAN_X,), ValueError, r"x contains NaN at \[0, 1\]"),
            Bad((INF_X,), ValueError, r"x contains \+inf at \[0, 1\]"),
            Bad((np.array([[0.0, 1.0], [-np.inf, -np.inf]]),), ValueError, "no finite entry"),
            Bad((np.ones((2, 0)),), ValueError, "length 0 along axis 1"),
            Bad((X,), ValueError, "axis 2 is out of range for x", {"axis": 2}),
            Bad((X,), TypeError, "axis must be an int, got float", {"axis": 1.0}),
            Bad((np.array(1.0),), ValueError, "at least 1 dimension"),
        ),
    ),
    Twin("softmax[axis=0]", nps.softmax, pts.softmax, lambda r: (_n(r, 4, 3, 2),), {"axis": 0}, grad_args=(0,)),
    Twin(
        "log_softmax", nps.log_softmax, pts.log_softmax, lambda r: (_n(r, 3, 5, scale=3),), grad_args=(0,),
        bad=(Bad((NAN_X,), ValueError, r"x contains NaN at \[0, 1\]"),
             Bad((np.array([[-np.inf, -np.inf]]),), ValueError, "no finite entry")),
    ),
    Twin(
        "logsumexp", nps.logsumexp, pts.logsumexp, lambda r: (_n(r, 3, 5, scale=3),), grad_args=(0,),
        bad=(Bad((INF_X,), ValueError, r"x contains \+inf at \[0, 1\]"),),
    ),
    Twin("logsumexp[keepdims]", nps.logsumexp, pts.logsumexp, lambda r: (_n(r, 2, 3, 4),),
         {"axis": 1, "keepdims": True}, grad_args=(0,)),
    Twin(
        "softmax_vjp", nps.softmax_vjp, pts.softmax_vjp,
        lambda r: (nps.softmax(_n(r, 3, 5)), _n(r, 3, 5)), grad_args=(0, 1),
        bad=(Bad((np.ones((2, 3)), np.ones((2, 4))), ValueError, "y and dy must have the same shape"),),
    ),
    Twin(
        "masked_softmax", nps.masked_softmax, pts.masked_softmax, lambda r: (_n(r, 2, 4, 5), _mask(r, 4, 5)),
        grad_args=(0,),
        bad=(
            Bad((X, np.ones((2, 3), dtype=np.int64)), TypeError, "mask must be boolean .* got dtype int64"),
            Bad((X, np.ones((2, 2), dtype=bool)), ValueError, r"mask of shape \(2, 2\) does not broadcast"),
            Bad((NAN_X, np.ones(3, dtype=bool)), ValueError, r"x \(at unmasked positions\) contains NaN"),
        ),
    ),
    Twin("masked_softmax[None]", nps.masked_softmax, pts.masked_softmax, lambda r: (_n(r, 3, 4), None),
         grad_args=(0,)),
    Twin(
        "online_softmax", nps.online_softmax, pts.online_softmax, lambda r: (_n(r, 3, 6, scale=3),),
        grad_args=(0,),
        bad=(Bad((np.array([[-np.inf, -np.inf]]),), ValueError, "no finite entry"),
             Bad((NAN_X,), ValueError, r"x contains NaN at \[0, 1\]")),
    ),
    Twin("online_normalizer", nps.online_normalizer, pts.online_normalizer, lambda r: (_n(r, 3, 6, scale=3),),
         grad_args=(0,)),
    Twin("merge_normalizers", nps.merge_normalizers, pts.merge_normalizers,
         lambda r: (_n(r, 3, 1), r.uniform(0.5, 2, (3, 1)), _n(r, 3, 1), r.uniform(0.5, 2, (3, 1))),
         grad_args=(0, 1, 2, 3)),
    # ---------------------------------------------------------------- attention (lib.attention)
    Twin(
        "attention", npa.attention, pta.attention, _qkv, grad_args=(0, 1, 2), grad_outputs=(0,),
        backward=(lambda a, c: npa.attention_backward(*a[:3], c[0], a[3]),
                  lambda a, c: pta.attention_backward(*a[:3], c[0], a[3])),
        bad=(
            Bad(_with(QKV_BAD, 1, np.ones((5, 4))), ValueError, r"q has width 3 but k has width 4"),
            Bad(_with(QKV_BAD, 2, np.ones((6, 2))), ValueError, r"k has length 5 but v has length 6"),
            Bad(_with(QKV_BAD, 0, np.ones(3)), ValueError, r"q must have at least 2 dimensions"),
            Bad(_with(QKV_BAD, 0, np.ones((4, 3), dtype=np.float32)), TypeError,
                "q, k and v must share a dtype, got float32, float64, float64"),
            Bad(_with(QKV_BAD, 0, np.ones((4, 3), dtype=np.int64)), TypeError, "q must have a floating dtype"),
            Bad((*QKV_BAD, np.ones((4, 4), dtype=bool)), ValueError, r"mask of shape \(4, 4\) does not broadcast"),
            Bad((*QKV_BAD, np.ones((4, 5))), TypeError, "mask must be boolean"),
            Bad((np.ones((2, 4, 3)), np.ones((3, 5, 3)), np.ones((5, 2))), ValueError, "do not broadcast"),
        ),
    ),
    Twin("attention[broadcast k, v; scale]", npa.attention, pta.attention,
         lambda r: (_n(r, 2, 3, 4, 3), _n(r, 1, 5, 3), _n(r, 5, 2), None), {"scale": 0.7},
         grad_args=(0, 1, 2), grad_outputs=(0,),
         backward=(lambda a, c: npa.attention_backward(*a[:3], c[0], a[3], scale=0.7),
                   lambda a, c: pta.attention_backward(*a[:3], c[0], a[3], scale=0.7))),
    # an additive bias on the scaled logits (positions as biases: ALiBi, T5), argument 5 after scale
    Twin(
        "attention[bias]", npa.attention, pta.attention, _qkv_bias, grad_args=(0, 1, 2), grad_outputs=(0,),
        backward=(lambda a, c: npa.attention_backward(*a[:3], c[0], a[3], bias=a[5]),
                  lambda a, c: pta.attention_backward(*a[:3], c[0], a[3], bias=a[5])),
        bad=(
            Bad((*QKV_BAD, None, None, [[0.0] * 5] * 4), TypeError, "bias must be a floating array of q's dtype,"
                " got list"),
            Bad((*QKV_BAD, None, None, np.zeros((4, 5), dtype=np.int64)), TypeError,
                r"bias must have a floating dtype, got int64 \(shape \(4, 5\)\)"),
            Bad((*QKV_BAD, None, None, np.zeros((4, 5), dtype=np.float32)), TypeError,
                r"bias must have q's dtype float64, got float32 \(shape \(4, 5\)\)"),
            Bad((*QKV_BAD, None, None, np.zeros((4, 4))), ValueError,
                r"bias of shape \(4, 4\) does not broadcast to the scores' shape \(4, 5\) \(\.\.\., n_q, n_k\)"),
            Bad((*QKV_BAD, None, None, np.zeros((2, 4, 5))), ValueError,  # would enlarge the scores
                r"bias of shape \(2, 4, 5\) does not broadcast to the scores' shape \(4, 5\)"),
            Bad((*QKV_BAD, None, None, NEG_INF_BIAS), ValueError,
                r"bias contains a non-finite value \(-inf\) at \[2, 3\] \(bias.shape=\(4, 5\)\) \(exclude pairs"
                " with the boolean mask, not with -inf\\)"),
            Bad((*QKV_BAD, None, None, np.full((1, 5), np.nan)), ValueError,
                r"bias contains a non-finite value \(nan\) at \[0, 0\]"),
        ),
    ),
    # a bias broadcast over heads and queries, with a scale, and the bias's own gradient (autograd, gradcheck)
    Twin("attention[bias broadcast; scale; d bias]", npa.attention, pta.attention,
         lambda r: (_n(r, 2, 3, 4, 3), _n(r, 1, 5, 3), _n(r, 5, 2), None, 0.7, _n(r, 3, 1, 5)),
         grad_args=(0, 1, 2, 5), grad_outputs=(0,)),
    Twin(
        "causal_mask", npa.causal_mask, pta.causal_mask, lambda r: (3, 5), low_precision=False,
        bad=(Bad((4, 2), ValueError, r"a causal mask needs n_k >= n_q"),
             Bad((-1,), ValueError, "n_q must be a non-negative int, got -1"),
             Bad((2.0,), TypeError, "n_q must be an int, got float")),
    ),
    Twin(
        "padding_mask", npa.padding_mask, pta.padding_mask, lambda r: (np.array([3, 0, 5]), 5), low_precision=False,
        bad=(Bad((np.array([1, 6]), 5), ValueError, r"every length must lie in \[0, n=5\], got \[1, 6\]"),
             Bad((np.array([1.0, 2.0]), 5), TypeError, "lengths must be a 1-D array of ints, got dtype float64"),
             Bad((np.array([1, 2]), -1), ValueError, "n must be a non-negative int")),
    ),
    Twin(
        "attention_backward", npa.attention_backward, pta.attention_backward,
        lambda r: (*_qkv(r)[:3], _n(r, 2, 4, 2), _qkv(r)[3]),
        bad=(Bad((*QKV_BAD, np.ones((4, 3))), ValueError, r"d_out must have the output's shape \(4, 2\)"),),
    ),
    # ---------------------------------------------------------------- layer norm (lib.norms)
    Twin(
        "layer_norm", npn.layer_norm, ptn.layer_norm, lambda r: (_n(r, 2, 3, 6, scale=2, offset=3), _n(r, 6),
                                                                 _n(r, 6)),
        grad_args=(0, 1, 2),
        backward=(lambda a, c: npn.layer_norm_backward(a[0], c[0], a[1]),
                  lambda a, c: ptn.layer_norm_backward(a[0], c[0], a[1])),
        bad=(
            Bad((X,), ValueError, "eps must be a finite number > 0", {"eps": 0.0}),
            Bad((X,), TypeError, "eps must be a real number, got str", {"eps": "1e-5"}),
            Bad((X, np.ones(2)), ValueError, r"gamma must have shape \(d,\) = \(3,\)"),
            Bad((X, None, np.ones(4)), ValueError, r"beta must have shape \(d,\) = \(3,\)"),
            Bad((INF_X,), ValueError, r"x contains a non-finite value \(inf\) at \[0, 1\]"),
            Bad((np.ones((2, 0)),), ValueError, "no features to normalise over"),
            Bad((np.array(1.0),), ValueError, "at least 1 dimension"),
        ),
    ),
    # the case of issue 14: activations 1000 ± 300, whose float16 backward used to return exact zeros
    Twin("layer_norm[offset 1000]", npn.layer_norm, ptn.layer_norm,
         lambda r: (_n(r, 4, 64, scale=300, offset=1000), _n(r, 64), _n(r, 64)), grad_args=(0, 1, 2),
         backward=(lambda a, c: npn.layer_norm_backward(a[0], c[0], a[1]),
                   lambda a, c: ptn.layer_norm_backward(a[0], c[0], a[1]))),
    Twin(
        "layer_norm_backward", npn.layer_norm_backward, ptn.layer_norm_backward,
        lambda r: (_n(r, 3, 5, offset=2), _n(r, 3, 5), _n(r, 5)),
        bad=(Bad((X, np.ones((2, 2))), ValueError, r"dy must have x's shape \(2, 3\), got \(2, 2\)"),
             Bad((INF_X, np.ones((1, 3))), ValueError, r"x contains a non-finite value \(inf\)")),
    ),
    # ---------------------------------------------------------------- feed-forward (lib.ffn)
    Twin("relu", npf.relu, ptf.relu, lambda r: (_n(r, 4, 5) + 0.05,), grad_args=(0,),
         bad=(Bad((np.ones(3, dtype=np.int64),), TypeError, "x must have a floating dtype"),)),
    Twin("gelu", npf.gelu, ptf.gelu, lambda r: (_n(r, 4, 5, scale=2),), grad_args=(0,)),
    Twin("gelu_tanh", npf.gelu_tanh, ptf.gelu_tanh, lambda r: (_n(r, 4, 5, scale=2),), grad_args=(0,)),
    Twin(
        "feed_forward", npf.feed_forward, ptf.feed_forward,
        lambda r: (_n(r, 2, 3, 4), _n(r, 4, 6, scale=0.5), _n(r, 6), _n(r, 6, 4, scale=0.5), _n(r, 4)),
        grad_args=(0, 1, 2, 3, 4),
        bad=(
            *(Bad(_with(FFN_ARGS, i, np.full_like(FFN_ARGS[i], np.nan)), ValueError,
                  rf"{name} contains a non-finite value \(nan\) at \[0")
              for i, name in enumerate(("x", "w1", "b1", "w2", "b2"))),
            Bad(_with(FFN_ARGS, 0, np.ones((2, 2))), ValueError, "x has width 2 but w1 expects d_model=3"),
            Bad(_with(FFN_ARGS, 3, np.ones((3, 4))), ValueError, r"w2 must have shape \(d_ff, d_model\) = \(4, 3\)"),
            Bad(_with(FFN_ARGS, 2, np.ones(3)), ValueError, r"b1 must have shape \(d_ff,\) = \(4,\)"),
            Bad(_with(FFN_ARGS, 4, np.ones(4)), ValueError, r"b2 must have shape \(d_model,\) = \(3,\)"),
            Bad(_with(FFN_ARGS, 1, np.ones(3)), ValueError, "w1 and w2 must be matrices"),
            Bad(_with(FFN_ARGS, 0, np.array(1.0)), ValueError, "x must have at least 1 dimension"),
        ),
    ),
    # ---------------------------------------------------------------- multi-head attention (lib.multihead)
    Twin(
        "split_heads", npm.split_heads, ptm.split_heads, lambda r: (_n(r, 2, 3, 6), 3), grad_args=(0,),
        bad=(Bad((np.ones((3, 7)), 2), ValueError, r"x has width 7, which is not divisible by h=2 heads"),
             Bad((np.ones((3, 4)), 0), ValueError, "h must be a positive int, got 0"),
             Bad((np.ones((3, 4)), 2.0), TypeError, "h must be an int, got float"),
             Bad((np.ones(4), 2), ValueError, "x must have at least 2 dimensions")),
    ),
    Twin("merge_heads", npm.merge_heads, ptm.merge_heads, lambda r: (_n(r, 2, 3, 4, 2),), grad_args=(0,),
         bad=(Bad((np.ones((3, 4)),), ValueError, r"x must have at least 3 dimensions \(\.\.\., h, n, d\)"),)),
    Twin("repeat_kv", npm.repeat_kv, ptm.repeat_kv, lambda r: (_n(r, 2, 3, 4, 2), 2), grad_args=(0,),
         bad=(Bad((np.ones((3, 4, 2)), -1), ValueError, "n_rep must be a positive int"),
              Bad((np.ones((4, 2)), 2), ValueError, "x must have at least 3 dimensions"))),
    Twin(
        "multi_head_attention", npm.multi_head_attention, ptm.multi_head_attention,
        lambda r: (_n(r, 2, 4, 8), _n(r, 2, 5, 8), npm.init_params(8, 4, n_kv_heads=2, rng=r), 4,
                   _mask(r, 4, 4, 5)),
        grad_args=(0, 1),
        bad=(
            Bad((NAN_XQ, None, MHA_PARAMS, 2), ValueError,
                r"x_q contains a non-finite value \(nan\) at \[0, 1\]"),
            Bad((np.ones((3, 8)), None, MHA_PARAMS, 3), ValueError,
                "params.w_q has 8 output columns, not divisible by n_heads=3"),
            Bad((np.ones((3, 6)), None, MHA_PARAMS, 2), ValueError, "params.w_q has 8 input rows"),
            Bad((np.ones((3, 8)), np.ones((3, 4)), MHA_PARAMS, 2), ValueError, "x_q has width 8 but x_kv has width 4"),
            Bad((np.ones((3, 8)), None, MHA_PARAMS, 2, np.ones((3, 4), dtype=bool)), ValueError,
                r"mask of shape \(3, 4\) does not broadcast"),
            Bad((np.ones((3, 8)), None, MHA_PARAMS._replace(b_v=np.zeros(7)), 2), ValueError,
                r"params.b_v must have shape \(8,\)"),
        ),
    ),
    # ALiBi's per-head bias (h, n_q, n_k) on grouped-query attention; its gradient too (a learned bias needs it)
    Twin(
        "multi_head_attention[bias]", npm.multi_head_attention, ptm.multi_head_attention,
        lambda r: (_n(r, 2, 4, 8), _n(r, 2, 5, 8), npm.init_params(8, 4, n_kv_heads=2, rng=r), 4,
                   _mask(r, 4, 4, 5), npb.alibi_bias_symmetric(4, 5, 4) + _n(r, 4, 4, 5, scale=0.5)),
        grad_args=(0, 1, 5),
        bad=(
            Bad((MHA_X, None, MHA_PARAMS, 2, None, np.zeros((3, 3, 3))), ValueError,
                r"bias of shape \(3, 3, 3\) does not broadcast to the scores' shape \(2, 3, 3\)"
                r" \(\.\.\., h, n_q, n_k\)"),
            Bad((MHA_X, None, MHA_PARAMS, 2, None, np.zeros((2, 3, 3), dtype=np.float32)), TypeError,
                r"bias must have x_q's dtype float64, got float32"),
            Bad((MHA_X, None, MHA_PARAMS, 2, None, np.zeros((2, 3, 3), dtype=bool)), TypeError,
                r"bias must have a floating dtype, got bool"),
            Bad((MHA_X, None, MHA_PARAMS, 2, None, np.full((2, 1, 3), -np.inf)), ValueError,
                r"bias contains a non-finite value \(-inf\) at \[0, 0, 0\] .*not with -inf"),
            Bad((MHA_X, None, MHA_PARAMS, 2, None, 0.5), TypeError,
                "bias must be a floating array of x_q's dtype, got float"),
        ),
    ),
    # ---------------------------------------------------------------- positions (lib.positional)
    Twin("sinusoid_frequencies", npp.sinusoid_frequencies, ptp.sinusoid_frequencies, lambda r: (10,),
         low_precision=False,
         bad=(Bad((0,), ValueError, "d_model must be a positive int, got 0"),
              Bad((8, 1.0), ValueError, "base must be a finite number > 1, got 1.0"),
              Bad((8.0,), TypeError, "d_model must be an int, got float"))),
    Twin(
        "sinusoidal_encoding", npp.sinusoidal_encoding,
        lambda n, d, base=10000.0: ptp.sinusoidal_encoding(n, d, base, dtype=torch.float64),
        lambda r: (7, 9), low_precision=False,
        bad=(Bad((-1, 8), ValueError, "n_positions must be a non-negative int, got -1"),
             Bad((4, 8, float("inf")), ValueError, "base must be a finite number > 1, got inf")),
    ),
    Twin(
        "rope_angles", npp.rope_angles, ptp.rope_angles, lambda r: (np.arange(5), 6), low_precision=False,
        bad=(Bad((np.arange(3), 5), ValueError, r"d must be even \(features are rotated in pairs\), got 5"),
             Bad((np.array([0.0, np.nan]), 4), ValueError, r"positions contains a non-finite value \(nan\) at \[1\]"),
             Bad((np.ones(3, dtype=bool), 4), TypeError, "positions must be a"),
             ),
    ),
    Twin(
        "apply_rope", npp.apply_rope, ptp.apply_rope, lambda r: (_n(r, 2, 5, 6), 3 + np.arange(5)), grad_args=(0,),
        bad=(
            Bad((np.ones((3, 5)),), ValueError, r"x must have an even width d .* got d=5"),
            Bad((np.ones(4),), ValueError, "x must have at least 2 dimensions"),
            Bad((np.ones((3, 4)), np.arange(4)), ValueError, r"positions of shape \(4,\) do not broadcast"),
            Bad((np.ones((3, 4)), np.zeros((2, 3))), ValueError, "to a larger shape"),
        ),
    ),
    Twin("apply_rope_halves", npp.apply_rope_halves, ptp.apply_rope_halves, lambda r: (_n(r, 2, 5, 6),),
         grad_args=(0,)),
    # ---------------------------------------------------------------- positions as biases (lib.position_bias)
    # the torch twins live in lib.pt.positional; wrapped for a float64 result (their default dtype is float32)
    Twin(
        "alibi_slopes", npb.alibi_slopes, lambda h: ptp.alibi_slopes(h, dtype=torch.float64), lambda r: (6,),
        low_precision=False,
        bad=(Bad((0,), ValueError, "n_heads must be a positive int, got 0"),
             Bad((4.0,), TypeError, "n_heads must be an int, got float")),
    ),
    Twin(
        "alibi_bias", npb.alibi_bias, lambda q, k, h: ptp.alibi_bias(q, k, h, dtype=torch.float64),
        lambda r: (3, 7, 6), low_precision=False,
        bad=(Bad((-1, 4, 2), ValueError, "n_q must be a non-negative int, got -1"),
             Bad((3, 2.0, 2), TypeError, "n_k must be an int, got float"),
             Bad((3, None, 0), ValueError, "n_heads must be a positive int, got 0")),
    ),
    Twin("alibi_bias[n_k=None]", npb.alibi_bias, lambda q, k, h: ptp.alibi_bias(q, k, h, dtype=torch.float64),
         lambda r: (5, None, 8), low_precision=False),
    Twin(
        "alibi_bias_symmetric", npb.alibi_bias_symmetric,
        lambda q, k, h: ptp.alibi_bias_symmetric(q, k, h, dtype=torch.float64), lambda r: (4, 9, 4),
        low_precision=False,
        bad=(Bad((2.0, 4, 2), TypeError, "n_q must be an int, got float"),
             Bad((3, -2, 2), ValueError, "n_k must be a non-negative int, got -2"),
             Bad((3, 3, -1), ValueError, "n_heads must be a positive int, got -1")),
    ),
    Twin("alibi_bias_symmetric[n_q > n_k]", npb.alibi_bias_symmetric,
         lambda q, k, h: ptp.alibi_bias_symmetric(q, k, h, dtype=torch.float64), lambda r: (6, 3, 2),
         low_precision=False),
    # ---------------------------------------------------------------- tiled attention (lib.tiled)
    Twin(
        "tiled_attention", nt.tiled_attention, ptt.tiled_attention, _qkv, {"block_size": 2},
        grad_args=(0, 1, 2), grad_outputs=(0,),
        backward=(
            lambda a, c: nt.tiled_attention_backward(*a[:3], *nt.tiled_attention(*a, block_size=2), c[0],
                                                     mask=a[3], block_size=3),
            lambda a, c: ptt.tiled_attention_backward(*a[:3], *ptt.tiled_attention(*a, block_size=2), c[0],
                                                      mask=a[3], block_size=3),
        ),
        bad=(
            Bad(QKV_BAD, ValueError, "block_size must be a positive int, got 0", {"block_size": 0}),
            Bad(QKV_BAD, TypeError, "block_size must be an int, got float", {"block_size": 2.5}),
            Bad(QKV_BAD, TypeError, "causal must be a bool, got int", {"causal": 1}),
            Bad((np.ones((6, 3)), *QKV_BAD[1:]), ValueError, "causal mask needs n_k >= n_q", {"causal": True}),
            Bad(_with(QKV_BAD, 1, np.full((5, 3), np.inf)), ValueError, r"k contains a non-finite value \(inf\)"),
        ),
    ),
    Twin(
        "tiled_attention_backward", nt.tiled_attention_backward, ptt.tiled_attention_backward,
        lambda r: _tiled_backward_args(r), {"block_size": 2},
        bad=(Bad((*QKV_BAD, np.zeros((4, 2)), np.full(4, np.nan), np.zeros((4, 2))), ValueError,
                 "lse must be finite or -inf"),
             Bad((*QKV_BAD, np.zeros((4, 3)), np.zeros(4), np.zeros((4, 2))), ValueError,
                 r"out must have shape \(4, 2\), got \(4, 3\)")),
    ),
    Twin("tiled_attention[causal]", nt.tiled_attention, ptt.tiled_attention,
         lambda r: (_n(r, 2, 4, 3), _n(r, 2, 6, 3), _n(r, 2, 6, 2)), {"block_size": 3, "causal": True},
         grad_args=(0, 1, 2), grad_outputs=(0,)),
    Twin("tile_partial", nt.tile_partial, ptt.tile_partial, lambda r: (_n(r, 2, 3, 4), _n(r, 2, 4, 2)),
         grad_args=(0, 1)),
    Twin("merge_partials", nt.merge_partials, ptt.merge_partials,
         lambda r: (nt.Partial(_n(r, 3, 1), r.uniform(0.5, 2, (3, 1)), _n(r, 3, 2)),
                    nt.Partial(_n(r, 3, 1), r.uniform(0.5, 2, (3, 1)), _n(r, 3, 2)))),
)
