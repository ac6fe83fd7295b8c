r"""FLOP counts of a Transformer layer: the one source of truth for every chapter that counts compute.

Conventions (see the chapter "When does attention cost more than the feed-forward block?"):

* A multiply-add is ``FLOPS_PER_MAC = 2`` FLOPs (:mod:`lib.constants`), so the product of an ``(m, k)``
  and a ``(k, p)`` matrix costs ``2 m k p`` FLOPs (:func:`matmul_flops`).
* Only matrix products are counted. Biases, the softmax, the scaling by :math:`1/\sqrt{d_k}`, activations,
  normalisation and residual additions are :math:`O(n\,d_\text{model})` or :math:`O(n^2 h)` elementwise
  work, lower order than the products at every size the book uses, and left out (as in Kaplan et al. 2020).
* Counts are for one layer and one sequence of ``n`` tokens (multiply by the batch size and by ``L``),
  forward pass only (the backward pass of a matrix product costs two products, so training is about 3x).
* The attention width is ``h * d_k``; it equals ``d_model`` unless a model sets ``head_dim`` on its own.

The parts of one layer, with :math:`w = h\,d_k` (query width) and :math:`w_{kv} = h_{kv} d_k`:

.. math::
    F_\text{scores} = 2\cdot 2\,n^2 w \;(Q K^\top \text{ and } A V), \qquad
    F_\text{proj} = 2\,n\,d_\text{model}(2 w + 2 w_{kv}), \qquad
    F_\text{ffn} = 2\,m\,n\,d_\text{model} d_\text{ff}
    \qquad\text{(eq. flops-layer)}

with :math:`m = 2` matrices for the plain block (Vaswani et al. 2017, eq. 2) and :math:`m = 3` for a gated
block such as SwiGLU (Shazeer 2020).
"""

from __future__ import annotations

from dataclasses import dataclass

from ._validate import check_bool, check_heads, check_int
from .constants import FLOPS_PER_MAC

__all__ = [
    "matmul_flops",
    "multi_head_flops",
    "LayerFlops",
    "PerTokenFlops",
    "attention_score_flops",
    "causal_pairs",
    "causal_block_pairs",
    "projection_flops",
    "ffn_flops",
    "layer_flops",
    "crossover_length",
    "forward_flops_per_token",
]


def matmul_flops(m: int, k: int, n: int, batch: int = 1) -> int:
    """FLOPs of ``batch`` products of an ``(m, k)`` and a ``(k, n)`` matrix:
    ``FLOPS_PER_MAC * batch * m * k * n``."""
    m, k, n = (check_int(v, name, minimum=0) for v, name in ((m, "m"), (k, "k"), (n, "n")))
    return FLOPS_PER_MAC * check_int(batch, "batch", minimum=0) * m * k * n


def multi_head_flops(
    n_q: int, n_k: int, d_model: int, n_heads: int, n_kv_heads: int | None = None
) -> dict[str, int]:
    """Matmul FLOPs of one forward pass of :func:`lib.multihead.multi_head_attention` for one sequence,
    counted from its shapes (biases, softmax and scaling are lower order and left out).

    Returns a dict with the stages ``"q_proj"``, ``"kv_proj"``, ``"scores"`` (``Q Kᵀ`` per head),
    ``"weighted_sum"`` (``A V`` per head), ``"out_proj"`` and their ``"total"``.
    """
    d_k, h, h_kv = check_heads(d_model, n_heads, n_kv_heads)
    out = {
        "q_proj": matmul_flops(n_q, d_model, h * d_k),
        "kv_proj": 2 * matmul_flops(n_k, d_model, h_kv * d_k),
        "scores": matmul_flops(n_q, d_k, n_k, batch=h),
        "weighted_sum": matmul_flops(n_q, n_k, d_k, batch=h),
        "out_proj": matmul_flops(n_q, h * d_k, d_model),
    }
    out["total"] = sum(out.values())
    return out


def causal_pairs(n: int) -> int:
    r"""Query-key pairs a causal mask keeps for ``n`` tokens: :math:`n(n+1)/2` (query ``i`` sees keys
    ``0..i``), out of :math:`n^2`."""
    n = check_int(n, "n")
    return n * (n + 1) // 2


def causal_block_pairs(n: int, block_q: int, block_k: int | None = None) -> int:
    r"""Query-key pairs computed by a tiled kernel that skips only the tiles lying wholly above the diagonal.

    The ``n x n`` score matrix is cut into tiles of ``block_q`` queries by ``block_k`` keys (the last tile
    in each direction may be smaller). A tile is computed in full if it holds at least one kept pair, i.e.
    if its first key ``j0`` is at most its last query ``i1``; FlashAttention-style kernels
    (Dao et al. 2022) work this way and mask inside the diagonal tiles. The result lies between
    :func:`causal_pairs` ``(n)`` and ``n**2`` and tends to :math:`n^2/2` when ``n`` is much larger than the tiles.
    """
    n = check_int(n, "n")
    block_q = check_int(block_q, "block_q")
    block_k = block_q if block_k is None else check_int(block_k, "block_k")
    total = 0
    for i0 in range(0, n, block_q):
        i1 = min(i0 + block_q, n) - 1  # last query of this row of tiles
        rows = i1 - i0 + 1
        # keys covered by tiles whose first key j0 <= i1: every key up to the end of the tile holding i1
        last_key = min((i1 // block_k + 1) * block_k, n)
        total += rows * last_key
    return total


def attention_score_flops(n: int, d_model: int, *, causal: bool = False) -> int:
    r"""FLOPs of :math:`Q K^\top` and :math:`A V` for one layer, all heads, one sequence of ``n`` tokens.

    Unmasked: each product costs :math:`2 n^2 d_\text{model}` (summed over heads, :math:`h\,d_k = d_\text{model}`;
    pass ``h * head_dim`` as ``d_model`` where the two differ), so the total is :math:`4 n^2 d_\text{model}`.

    ``causal=True`` counts only the kept pairs, as a kernel that skips every masked element would:
    :math:`n(n+1)/2` pairs instead of :math:`n^2`, total :math:`2\,n(n+1)\,d_\text{model}`. Real kernels skip
    whole masked tiles and compute the diagonal tiles in full, doing slightly more
    (:func:`causal_block_pairs`); a kernel that masks without skipping does the full unmasked count.
    The number of heads does not enter: splitting ``d_model`` into heads does not change the FLOPs.
    """
    n = check_int(n, "n")
    d_model = check_int(d_model, "d_model")
    causal = check_bool(causal, "causal")
    pairs = causal_pairs(n) if causal else n * n
    return 2 * FLOPS_PER_MAC * pairs * d_model  # Q Kᵀ and A V, each one MAC per pair per width


def projection_flops(
    n: int, d_model: int, n_heads: int, n_kv_heads: int | None = None, head_dim: int | None = None
) -> int:
    r"""FLOPs of the Q, K, V and output projections of one layer for ``n`` tokens.

    :math:`W_Q: d_\text{model} \to h\,d_k`, :math:`W_K, W_V: d_\text{model} \to h_{kv} d_k` (grouped-query
    attention, Ainslie et al. 2023, shrinks these two), :math:`W_O: h\,d_k \to d_\text{model}`:

    .. math:: F_\text{proj} = 2\,n\,d_\text{model}\,(2\,h\,d_k + 2\,h_{kv} d_k)

    which is :math:`8\,n\,d_\text{model}^2` for multi-head attention with :math:`h\,d_k = d_\text{model}`.
    ``head_dim`` defaults to ``d_model // n_heads`` (then ``n_heads`` must divide ``d_model``).
    """
    n = check_int(n, "n")
    d_k, h, h_kv = check_heads(d_model, n_heads, n_kv_heads, head_dim)
    w, w_kv = h * d_k, h_kv * d_k
    return (
        matmul_flops(n, d_model, w)  # Q
        + 2 * matmul_flops(n, d_model, w_kv)  # K and V
        + matmul_flops(n, w, d_model)  # O
    )


def ffn_flops(n: int, d_model: int, d_ff: int, *, gated: bool = False) -> int:
    r"""FLOPs of the position-wise feed-forward block for ``n`` tokens.

    Plain (eq. ffn, Vaswani et al. 2017): two matrices, :math:`2 \cdot 2\,n\,d_\text{model} d_\text{ff}`.
    Gated (SwiGLU/GeGLU, Shazeer 2020: :math:`(\phi(x W) \odot x V) W_2`): three matrices,
    :math:`3 \cdot 2\,n\,d_\text{model} d_\text{ff}`. The elementwise gate and activation are not counted.
    """
    n = check_int(n, "n")
    d_model = check_int(d_model, "d_model")
    d_ff = check_int(d_ff, "d_ff")
    gated = check_bool(gated, "gated")
    n_matrices = 3 if gated else 2
    return n_matrices * matmul_flops(n, d_model, d_ff)


@dataclass(frozen=True)
class LayerFlops:
    """The matmul FLOPs of one layer for one sequence, by part (eq. flops-layer)."""

    scores: int  #: Q Kᵀ and A V, all heads
    projections: int  #: W_Q, W_K, W_V, W_O
    ffn: int  #: the feed-forward block

    @property
    def attention(self) -> int:
        """The whole attention sub-layer: scores plus projections."""
        return self.scores + self.projections

    @property
    def total(self) -> int:
        return self.scores + self.projections + self.ffn


def layer_flops(
    n: int,
    d_model: int,
    n_heads: int,
    d_ff: int,
    *,
    n_kv_heads: int | None = None,
    head_dim: int | None = None,
    gated: bool = False,
    causal: bool = False,
) -> LayerFlops:
    """FLOPs of one Transformer layer for one sequence of ``n`` tokens, split into its parts.

    See :func:`attention_score_flops` (with width ``n_heads * head_dim``), :func:`projection_flops` and
    :func:`ffn_flops` for what each part counts.
    """
    d_k, h, h_kv = check_heads(d_model, n_heads, n_kv_heads, head_dim)
    return LayerFlops(
        scores=attention_score_flops(n, h * d_k, causal=causal),
        projections=projection_flops(n, d_model, h, h_kv, d_k),
        ffn=ffn_flops(n, d_model, d_ff, gated=gated),
    )


def crossover_length(
    d_model: int,
    d_ff: int | None = None,
    *,
    include_projections: bool = False,
    causal: bool = False,
    gated: bool = False,
    n_heads: int = 1,
    n_kv_heads: int | None = None,
    head_dim: int | None = None,
) -> float:
    r"""The sequence length ``n`` at which attention's FLOPs equal the feed-forward block's (closed form).

    Attention is :math:`a_2 n^2 + a_1 n` and the feed-forward block :math:`b_1 n`, so for ``n > 0`` they meet
    at :math:`n^\ast = (b_1 - a_1)/a_2`, with :math:`w = h\,d_k`, :math:`w_{kv} = h_{kv} d_k`,
    :math:`m = 2` (plain) or 3 (gated):

    * :math:`b_1 = 2 m\,d_\text{model} d_\text{ff}`;
    * unmasked scores: :math:`a_2 = 4w`, :math:`a_1 = 0`; causal (every masked pair skipped, the count of
      :func:`attention_score_flops`): :math:`a_2 = a_1 = 2w`;
    * ``include_projections`` adds :math:`4\,d_\text{model}(w + w_{kv})` to :math:`a_1`.

    Special cases: plain block, scores only, :math:`d_\text{ff} = 4 d_\text{model}`:
    :math:`n^\ast = d_\text{ff} = 4\,d_\text{model}`; causal: :math:`2 d_\text{ff} - 1`; gated:
    :math:`\tfrac32 d_\text{ff}`. ``d_ff`` defaults to ``4 * d_model``. Heads matter only through
    ``head_dim`` and, with projections, ``n_kv_heads``. Returns ``0.0`` when attention costs at least as much
    as the feed-forward block at every length (projections alone outweigh it).
    """
    d_k, h, h_kv = check_heads(d_model, n_heads, n_kv_heads, head_dim)
    d_ff = 4 * d_model if d_ff is None else check_int(d_ff, "d_ff")
    for name, flag in (("include_projections", include_projections), ("causal", causal), ("gated", gated)):
        check_bool(flag, name)
    w, w_kv = h * d_k, h_kv * d_k
    m = 3 if gated else 2
    b1 = FLOPS_PER_MAC * m * d_model * d_ff
    a2, a1 = (FLOPS_PER_MAC * w, FLOPS_PER_MAC * w) if causal else (2 * FLOPS_PER_MAC * w, 0)
    if include_projections:
        a1 += FLOPS_PER_MAC * 2 * d_model * (w + w_kv)
    return max(0.0, (b1 - a1) / a2)


@dataclass(frozen=True)
class PerTokenFlops:
    """Forward FLOPs spent on one token at context position ``n_context``, summed over layers, by part."""

    attention: int  #: Q Kᵀ row and A V row against ``n_context`` keys, all layers
    projections: int  #: Q, K, V, O projections, all layers
    ffn: int  #: feed-forward blocks, all layers
    lm_head: int  #: the final d_model -> vocab product (0 without a vocabulary)

    @property
    def total(self) -> int:
        return self.attention + self.projections + self.ffn + self.lm_head


def forward_flops_per_token(
    n_context: int,
    d_model: int,
    n_layers: int,
    n_heads: int,
    n_kv_heads: int | None,
    head_dim: int | None,
    d_ff: int,
    gated: bool,
    vocab_size: int | None = None,
) -> PerTokenFlops:
    r"""Forward FLOPs of one token that attends to ``n_context`` keys (itself and the ones before it).

    Convention: the token at position ``n_context`` (1-based) of a causal sequence, or the new token when
    decoding with a cache of ``n_context - 1`` earlier tokens; it attends to exactly ``n_context`` keys.
    Per layer, with :math:`w = h\,d_k`:

    .. math::
        F_\text{attn} = 2\cdot 2\,n_\text{context} w, \quad
        F_\text{proj} = 2\,d_\text{model}(2w + 2w_{kv}), \quad
        F_\text{ffn} = 2 m\,d_\text{model} d_\text{ff},

    times ``n_layers``, plus :math:`2\,d_\text{model} V` for the language-model head when ``vocab_size`` is
    given (embedding look-ups cost no FLOPs). Summing over positions ``1..n`` gives ``n_layers`` times
    :func:`layer_flops` ``(n, ..., causal=True)`` plus ``n`` heads: the two conventions agree exactly.
    """
    n_context = check_int(n_context, "n_context")
    n_layers = check_int(n_layers, "n_layers")
    d_k, h, h_kv = check_heads(d_model, n_heads, n_kv_heads, head_dim)
    d_ff = check_int(d_ff, "d_ff")
    gated = check_bool(gated, "gated")
    lm_head = 0 if vocab_size is None else matmul_flops(1, d_model, check_int(vocab_size, "vocab_size"))
    return PerTokenFlops(
        attention=n_layers * 2 * matmul_flops(1, h * d_k, n_context),
        projections=n_layers * projection_flops(1, d_model, h, h_kv, d_k),
        ffn=n_layers * ffn_flops(1, d_model, d_ff, gated=gated),
        lm_head=lm_head,
    )

