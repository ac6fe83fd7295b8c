"""Argument checks: the one home of every check the library makes, so every public function fails the
same clear way.

One rule, as in NumPy and JAX: **TypeError for a wrong type, ValueError for a wrong value.** A NumPy
integer is an int (``np.int64(4)`` is accepted wherever ``4`` is); a ``bool`` is not. Each check names the
argument and shows what it got, e.g.
``ValueError: q has width 64 but k has width 32 (q.shape=(2, 5, 64), k.shape=(2, 5, 32))``.

The checks that read only ``.ndim``, ``.shape`` and ``.dtype`` (:func:`check_attention_shapes`,
:func:`check_mask_shape`, :func:`check_bias_layout`, :func:`check_mha_inputs`) and :func:`reduce_to` serve torch
tensors too; :mod:`lib.pt._validate` adds the
torch versions of the rest, with the same messages word for word.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = [
    "as_float_array",
    "dtype_name",
    "check_int",
    "check_real",
    "check_bool",
    "check_finite",
    "check_axis",
    "check_no_nan_or_posinf",
    "check_min_rank",
    "check_attention_shapes",
    "check_attention_inputs",
    "check_mask_shape",
    "check_bias_layout",
    "check_bias",
    "check_attention_bias",
    "check_mha_inputs",
    "check_causal",
    "check_heads",
    "reduce_to",
]


# ---------------------------------------------------------------- scalars


def dtype_name(dtype: Any) -> str:
    """``"int64"`` for ``np.int64`` and ``torch.int64`` alike, so both backends' messages read the same."""
    return str(dtype).removeprefix("torch.")


def check_int(value: Any, name: str, *, minimum: int = 1, even: bool = False, why: str = "") -> int:
    """Return ``value`` as a Python int, or raise: TypeError unless it is an int (or a NumPy integer; a bool
    is refused), ValueError if it is below ``minimum`` or, with ``even``, odd. ``why`` is appended to the
    message of an odd value, e.g. ``" (features are rotated in pairs)"``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        kind = {1: "a positive int", 0: "a non-negative int"}.get(minimum, f"an int >= {minimum}")
        raise ValueError(f"{name} must be {kind}, got {value!r}")
    if even and value % 2:
        raise ValueError(f"{name} must be even{why}, got {value}")
    return int(value)


def check_real(
    value: Any, name: str, *, above: float | None = None, at_least: float | None = None,
    below: float | None = None, why: str = "",
) -> float:
    """Return ``value`` as a finite Python float, or raise: TypeError unless it is a real number (int, float or
    a NumPy scalar of either; a bool is refused), ValueError if it is NaN, infinite or outside the bounds
    (``> above``, ``>= at_least``, ``< below``). ``why`` is appended to the message, e.g.
    ``" (it is added to the variance)"``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    tests = [(op, bound) for op, bound in ((">", above), (">=", at_least), ("<", below)) if bound is not None]
    inside = all({">": value > b, ">=": value >= b, "<": value < b}[op] for op, b in tests) if tests else True
    if not (math.isfinite(value) and inside):
        bounds = "".join(f" {op} {b:g}" if i == 0 else f" and {op} {b:g}" for i, (op, b) in enumerate(tests))
        raise ValueError(f"{name} must be a finite number{bounds}{why}, got {value!r}")
    return float(value)


def check_bool(value: Any, name: str) -> bool:
    """Return ``value`` as a Python bool, or raise TypeError (an int such as 1 is not a flag)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
    return bool(value)


def check_causal(causal: Any, n_q: int, n_k: int) -> bool:
    """A causal mask needs every query to see itself: ``n_k >= n_q`` (the queries are the last ``n_q``
    positions). Returns ``causal`` as a bool."""
    causal = check_bool(causal, "causal")
    if causal and n_k < n_q:
        raise ValueError(f"a causal mask needs n_k >= n_q (every query sees itself), got n_q={n_q}, n_k={n_k}")
    return causal


def check_heads(
    d_model: Any, n_heads: Any, n_kv_heads: Any | None = None, head_dim: Any | None = None
) -> tuple[int, int, int]:
    """Check a head layout and return ``(d_k, h, h_kv)``.

    Without ``head_dim``, ``n_heads`` must divide ``d_model`` (each head gets ``d_k = d_model / h`` columns);
    with it, any width is allowed (some models set ``h * head_dim != d_model``). ``n_kv_heads`` (default
    ``h``) must divide ``n_heads``: each key/value head serves ``h / h_kv`` query heads.
    """
    d_model = check_int(d_model, "d_model")
    h = check_int(n_heads, "n_heads")
    h_kv = h if n_kv_heads is None else check_int(n_kv_heads, "n_kv_heads")
    if head_dim is None:
        if d_model % h:
            raise ValueError(
                f"d_model={d_model} is not divisible by n_heads={h}: each head needs d_k = d_model / n_heads"
                f" columns (d_model % n_heads = {d_model % h})"
            )
        head_dim = d_model // h
    else:
        head_dim = check_int(head_dim, "head_dim")
    if h % h_kv:
        raise ValueError(
            f"n_heads={h} is not divisible by n_kv_heads={h_kv}: every key/value head must serve the same"
            f" number of query heads (n_heads % n_kv_heads = {h % h_kv})"
        )
    return head_dim, h, h_kv


# ---------------------------------------------------------------- arrays


def as_float_array(x: Any, name: str) -> np.ndarray:
    """Return ``x`` as a floating NumPy array, keeping a floating dtype as it is.

    Python numbers and (nested) lists of numbers become float64. A NumPy array (or anything with a
    ``dtype``) of integer, boolean or complex type is refused with a ``TypeError``: silently turning
    token ids or a mask into logits is a classic bug, so the caller must convert on purpose.
    """
    if hasattr(x, "dtype") and not isinstance(x, np.ndarray):
        # A torch tensor or another array type: say which backend to use instead of converting.
        raise TypeError(
            f"{name} must be a NumPy array for the NumPy reference, got {type(x).__module__}.{type(x).__name__}"
            " (use lib.pt for torch tensors)"
        )
    if isinstance(x, np.ndarray):
        if not np.issubdtype(x.dtype, np.floating):
            raise TypeError(f"{name} must have a floating dtype, got {dtype_name(x.dtype)} (shape {x.shape})")
        return x
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{name} must be an array of real numbers, got {type(x).__name__}: {err}") from None
    return arr


def check_finite(x: np.ndarray, name: str, why: str = "") -> None:
    """Refuse NaN and ``±inf`` in a NumPy array, naming the first bad value and its index."""
    bad = ~np.isfinite(x)
    if bad.any():
        idx = np.argwhere(bad)[0].tolist()
        raise ValueError(f"{name} contains a non-finite value ({float(x[tuple(idx)])}) at {idx}"
                         f" ({name}.shape={tuple(x.shape)}){why}")


def check_axis(x: Any, axis: int, name: str) -> int:
    """Normalise ``axis`` for ``x`` (negative axes allowed), or raise naming both. Reads only ``.ndim`` and
    ``.shape``, so it serves torch tensors too."""
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"axis must be an int, got {type(axis).__name__}")
    if x.ndim == 0:
        raise ValueError(f"{name} must have at least 1 dimension to take a softmax over, got a scalar")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(
            f"axis {axis} is out of range for {name} with {x.ndim} dimensions ({name}.shape={tuple(x.shape)})"
        )
    return int(axis) % x.ndim


def check_no_nan_or_posinf(x: np.ndarray, name: str) -> None:
    """Refuse NaN and +inf: the softmax of either is undefined, and a NaN would spread silently."""
    if np.isnan(x).any():
        raise ValueError(f"{name} contains NaN at {np.argwhere(np.isnan(x))[0].tolist()} ({name}.shape={x.shape})")
    if np.isposinf(x).any():
        raise ValueError(
            f"{name} contains +inf at {np.argwhere(np.isposinf(x))[0].tolist()}; the softmax is undefined there"
            f" ({name}.shape={x.shape})"
        )


def check_min_rank(x: Any, name: str, rank: int, meaning: str) -> None:
    """Raise unless ``x`` has at least ``rank`` dimensions, saying what they mean."""
    if x.ndim < rank:
        raise ValueError(f"{name} must have at least {rank} dimensions {meaning}, got shape {tuple(x.shape)}")


def check_attention_shapes(q: Any, k: Any, v: Any, *, grad: Any = None) -> None:
    """Check the shapes of an attention call: q (..., n_q, d_k), k (..., n_k, d_k), v (..., n_k, d_v).

    Works for NumPy arrays and torch tensors alike (it reads only ``.ndim`` and ``.shape``).
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_min_rank(t, name, 2, "(..., length, width)")
    qs, ks, vs = tuple(q.shape), tuple(k.shape), tuple(v.shape)
    if qs[-1] != ks[-1]:
        raise ValueError(f"q has width {qs[-1]} but k has width {ks[-1]} (q.shape={qs}, k.shape={ks})")
    if ks[-2] != vs[-2]:
        raise ValueError(f"k has length {ks[-2]} but v has length {vs[-2]} (k.shape={ks}, v.shape={vs})")
    try:
        np.broadcast_shapes(qs[:-2], ks[:-2], vs[:-2])
    except ValueError:
        raise ValueError(
            f"the leading (batch/head) dimensions of q, k and v do not broadcast (q.shape={qs}, k.shape={ks},"
            f" v.shape={vs})"
        ) from None
    if grad is not None:
        lead = np.broadcast_shapes(qs[:-2], ks[:-2], vs[:-2])
        want = (*lead, qs[-2], vs[-1])
        if tuple(grad.shape) != want:
            raise ValueError(f"d_out must have the output's shape {want}, got {tuple(grad.shape)}")


def check_attention_inputs(q: Any, k: Any, v: Any, mask: Any | None) -> tuple[Any, Any, Any, Any]:
    """The inputs of an attention call as floating NumPy arrays of one dtype, with shapes checked by
    :func:`check_attention_shapes` and the mask (if any) by :func:`check_mask_shape`."""
    q, k, v = (as_float_array(t, name) for t, name in ((q, "q"), (k, "k"), (v, "v")))
    check_attention_shapes(q, k, v)
    if len({q.dtype, k.dtype, v.dtype}) > 1:
        raise TypeError(
            f"q, k and v must share a dtype, got {dtype_name(q.dtype)}, {dtype_name(k.dtype)}, {dtype_name(v.dtype)}"
        )
    if mask is not None:
        mask = np.asarray(mask)
        lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        check_mask_shape(mask, (*lead, q.shape[-2], k.shape[-2]))
    return q, k, v, mask


def reduce_to(grad: Any, shape: tuple[int, ...]) -> Any:
    """Sum a broadcast gradient back to an input's ``shape``: the adjoint of broadcasting.

    Leading axes the input did not have are summed away, and axes where the input had size 1 are summed
    with ``keepdims``. Works for NumPy arrays and torch tensors alike (both take ``axis``/``keepdims``).
    """
    extra = grad.ndim - len(shape)
    if extra:
        grad = grad.sum(axis=tuple(range(extra)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    return grad.sum(axis=axes, keepdims=True) if axes else grad


def check_mask_shape(mask: Any, scores_shape: tuple[int, ...]) -> None:
    """A mask must be boolean and broadcast to the scores' shape (..., n_q, n_k)."""
    dtype = dtype_name(mask.dtype)
    if "bool" not in dtype:
        raise TypeError(f"mask must be boolean (True = may attend), got dtype {dtype}")
    try:
        out = np.broadcast_shapes(tuple(mask.shape), scores_shape)
    except ValueError:
        out = None
    if out != tuple(scores_shape):
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the scores' shape {tuple(scores_shape)}"
            " (..., n_q, n_k)"
        )


def check_bias_layout(
    bias: Any, floating: bool, scores_shape: tuple[int, ...], like: Any, like_name: str, axes: str
) -> None:
    """The backend-neutral part of :func:`check_bias`: a floating dtype (``floating``, as the backend sees it),
    ``like``'s dtype, and a shape that broadcasts to ``scores_shape`` without enlarging it. Reads only ``.dtype``
    and ``.shape``, so it serves torch tensors too (and gives the same messages, word for word)."""
    if not floating:
        raise TypeError(f"bias must have a floating dtype, got {dtype_name(bias.dtype)} (shape {tuple(bias.shape)})")
    if bias.dtype != like.dtype:
        raise TypeError(
            f"bias must have {like_name}'s dtype {dtype_name(like.dtype)}, got {dtype_name(bias.dtype)}"
            f" (shape {tuple(bias.shape)})"
        )
    try:
        out = np.broadcast_shapes(tuple(bias.shape), tuple(scores_shape))
    except ValueError:
        out = None
    if out != tuple(scores_shape):
        raise ValueError(
            f"bias of shape {tuple(bias.shape)} does not broadcast to the scores' shape {tuple(scores_shape)} {axes}"
        )


#: appended to the message of a non-finite bias
BIAS_FINITE_WHY = " (exclude pairs with the boolean mask, not with -inf)"


def check_bias(
    bias: Any, scores_shape: tuple[int, ...], like: np.ndarray, like_name: str = "q",
    axes: str = "(..., n_q, n_k)",
) -> np.ndarray:
    """An additive bias on the scaled attention logits (ALiBi, T5's relative positions): a finite floating NumPy
    array of ``like``'s dtype that broadcasts to the scores' shape ``scores_shape`` (named ``axes`` in the
    message). ``-inf`` is refused: pairs that may not attend are the boolean mask's business (True = may
    attend), which also handles a row with nothing to attend to. Returns ``bias``."""
    if not isinstance(bias, np.ndarray):
        if hasattr(bias, "dtype"):
            raise TypeError(
                f"bias must be a NumPy array for the NumPy reference, got {type(bias).__module__}."
                f"{type(bias).__name__} (use lib.pt for torch tensors)"
            )
        raise TypeError(f"bias must be a floating array of {like_name}'s dtype, got {type(bias).__name__}")
    check_bias_layout(bias, np.issubdtype(bias.dtype, np.floating), scores_shape, like, like_name, axes)
    check_finite(bias, "bias", BIAS_FINITE_WHY)
    return bias


def check_attention_bias(bias: Any, q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """:func:`check_bias` for an attention call on checked ``q, k, v``: the scores have shape
    ``(*lead, n_q, n_k)``, ``lead`` the broadcast leading dimensions of ``q``, ``k`` and ``v``."""
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    return check_bias(bias, (*lead, q.shape[-2], k.shape[-2]), q)


def check_mha_inputs(x_q: Any, x_kv: Any) -> tuple[int, ...]:
    """Check the inputs of multi-head attention, ``x_q (..., n_q, d_model)`` and ``x_kv (..., n_k, d_model)``,
    and return their broadcast leading (batch) shape. Reads only ``.ndim`` and ``.shape``, so it serves the NumPy
    reference and the PyTorch path alike."""
    for name, x in (("x_q", x_q), ("x_kv", x_kv)):
        check_min_rank(x, name, 2, "(..., n, d_model)")
    qs, ks = tuple(x_q.shape), tuple(x_kv.shape)
    if qs[-1] != ks[-1]:
        raise ValueError(f"x_q has width {qs[-1]} but x_kv has width {ks[-1]} (x_q.shape={qs}, x_kv.shape={ks})")
    try:
        return np.broadcast_shapes(qs[:-2], ks[:-2])
    except ValueError:
        raise ValueError(
            f"the batch dimensions of x_q and x_kv do not broadcast (x_q.shape={qs}, x_kv.shape={ks})"
        ) from None
