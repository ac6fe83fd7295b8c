"""One battery for every NumPy/PyTorch twin declared in :mod:`twins` (the contract as data, as PyTorch's
OpInfo tests do it): forward and backward agreement per dtype (float64, float32, float16, bfloat16) against
the float64 reference, ``torch.autograd.gradcheck`` in float64, and identical errors for bad inputs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from tolerances import tol
from twins import TWINS, Twin

DTYPES = ["float64", "float32", "float16", "bfloat16"]
GRAD_TWINS = [t for t in TWINS if t.grad_args]
LOW = [t for t in TWINS if t.low_precision]


def _is_float_array(a: Any) -> bool:
    return isinstance(a, np.ndarray) and np.issubdtype(a.dtype, np.floating)


def _map(obj: Any, f) -> Any:
    """Apply ``f`` to every array in ``obj``, keeping tuples and NamedTuples as they are."""
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_map(a, f) for a in obj))
    if isinstance(obj, tuple):
        return tuple(_map(a, f) for a in obj)
    return f(obj) if isinstance(obj, np.ndarray) else obj


def rounded(args: tuple, dtype: str) -> tuple:
    """The float inputs rounded to ``dtype`` and returned as float64 NumPy arrays (the reference's inputs)."""
    tdt = getattr(torch, dtype)
    return _map(args, lambda a: torch.from_numpy(a).to(tdt).double().numpy() if _is_float_array(a) else a)


def as_numpy(args: tuple, dtype: str) -> tuple:
    return _map(args, lambda a: a.astype(dtype) if _is_float_array(a) else a)


def _tensor(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.array(a, order="C"))  # a copy that keeps 0-d arrays 0-d


def as_torch(args: tuple, dtype: str, grad: tuple[int, ...] = ()) -> tuple:
    tdt = getattr(torch, dtype)
    out = _map(args, lambda a: _tensor(a).to(tdt) if _is_float_array(a) else _tensor(a))
    return tuple(a.requires_grad_() if i in grad else a for i, a in enumerate(out))


def flat(out: Any) -> list[np.ndarray]:
    """Every array of a result (array, tuple, NamedTuple), as float64 NumPy arrays."""
    if isinstance(out, (tuple, list)):
        return [x for o in out for x in flat(o)]
    if isinstance(out, torch.Tensor):
        return [out.detach().double().numpy() if out.is_floating_point() else out.numpy()]
    arr = np.asarray(out)
    return [arr.astype(np.float64) if np.issubdtype(arr.dtype, np.floating) else arr]


def out_dtypes(out: Any) -> list[str]:
    if isinstance(out, (tuple, list)):
        return [d for o in out for d in out_dtypes(o)]
    return [str(out.dtype).removeprefix("torch.")]


def assert_close(got: list[np.ndarray], want: list[np.ndarray], dtype: str, what: str) -> None:
    assert len(got) == len(want), what
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.shape == w.shape, f"{what}[{i}]: shape {g.shape} != {w.shape}"
        if not np.issubdtype(w.dtype, np.floating):
            np.testing.assert_array_equal(g, w, err_msg=f"{what}[{i}]")
            continue
        finite = np.isfinite(w)
        scale = max(1.0, float(np.abs(w[finite]).max())) if finite.any() else 1.0
        np.testing.assert_allclose(g, w, rtol=tol(dtype), atol=tol(dtype) * scale, err_msg=f"{what}[{i}] ({dtype})")


def _sample(twin: Twin) -> tuple:
    return twin.sample(np.random.default_rng(14))


def _cotangents(twin: Twin, outputs: list[np.ndarray]) -> list[np.ndarray]:
    rng = np.random.default_rng(41)
    idx = range(len(outputs)) if twin.grad_outputs is None else twin.grad_outputs
    return [rng.normal(size=outputs[i].shape) for i in idx]


def _selected(twin: Twin, out: Any) -> list[torch.Tensor]:
    outs = _flat_tensors(out)
    return outs if twin.grad_outputs is None else [outs[i] for i in twin.grad_outputs]


def _flat_tensors(out: Any) -> list[torch.Tensor]:
    if isinstance(out, (tuple, list)):
        return [x for o in out for x in _flat_tensors(o)]
    return [out]


def autograd(twin: Twin, args: tuple, dtype: str, cots: list[np.ndarray]) -> list[np.ndarray]:
    """Gradients of ``sum(output_i * cotangent_i)`` w.r.t. the twin's grad_args, by torch.autograd in ``dtype``."""
    targs = as_torch(args, dtype, grad=twin.grad_args)
    outs = _selected(twin, twin.pt_fn(*targs, **twin.kwargs))
    tdt = getattr(torch, dtype)
    loss = sum((o * torch.from_numpy(c).to(tdt)).sum() for o, c in zip(outs, cots, strict=True))
    grads = torch.autograd.grad(loss, [targs[i] for i in twin.grad_args], allow_unused=True)
    return [np.zeros(args[i].shape) if g is None else g.double().numpy()
            for i, g in zip(twin.grad_args, grads, strict=True)]


# ---------------------------------------------------------------- the table itself


def test_every_public_twin_of_lib_pt_is_in_the_table():
    """A new function in lib.pt with a NumPy twin of the same name must get a row (or a reason to have none)."""
    import lib.position_bias
    import lib.pt.attention
    import lib.pt.ffn
    import lib.pt.multihead
    import lib.pt.norms
    import lib.pt.positional
    import lib.pt.softmax
    import lib.pt.tiled

    covered = {t.pt_fn for t in TWINS} | {t.np_fn for t in TWINS}
    wrapped = {"sinusoidal_encoding", "alibi_slopes", "alibi_bias", "alibi_bias_symmetric"}  # dtype defaults
    rows = {t.name for t in TWINS}
    missing = []
    for mod in (lib.pt.softmax, lib.pt.attention, lib.pt.norms, lib.pt.ffn, lib.pt.multihead, lib.pt.positional,
                lib.pt.tiled):
        np_mods = [__import__(mod.__name__.replace("lib.pt.", "lib."), fromlist=["_"])]
        if mod is lib.pt.positional:  # also holds the twins of lib.position_bias (ALiBi)
            np_mods.append(lib.position_bias)
        for name in mod.__all__:
            f = getattr(mod, name)
            g = next((getattr(m, name) for m in np_mods if hasattr(m, name)), None)
            if not callable(f) or isinstance(f, type) or g is None or f is g:
                continue  # classes, torch-only names and re-exports of the NumPy function itself
            if f not in covered and not (name in wrapped and name in rows and g in covered):
                missing.append(f"{mod.__name__}.{name}")
    assert not missing, f"twins without a row in tests/twins.py: {missing}"
    assert len(TWINS) >= 35


# ---------------------------------------------------------------- forward


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("twin", TWINS, ids=str)
def test_forward_agrees_per_dtype(twin: Twin, dtype: str):
    if dtype != "float64" and not twin.low_precision:
        pytest.skip("integer-only inputs")
    args = _sample(twin)
    ref = flat(twin.np_fn(*rounded(args, dtype), **twin.kwargs))  # float64 NumPy on the rounded inputs
    pt_out = twin.pt_fn(*as_torch(args, dtype), **twin.kwargs)
    assert_close(flat(pt_out), ref, dtype, f"{twin.name} torch")
    if twin.low_precision:
        assert all(d in (dtype, "bool") for d in out_dtypes(pt_out)), out_dtypes(pt_out)
    if dtype != "bfloat16":  # NumPy has no bfloat16
        np_out = twin.np_fn(*as_numpy(args, dtype), **twin.kwargs)
        assert_close(flat(np_out), ref, dtype, f"{twin.name} numpy")
        if twin.low_precision:
            assert all(d in (dtype, "bool") for d in out_dtypes(np_out)), out_dtypes(np_out)


# ---------------------------------------------------------------- backward


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("twin", GRAD_TWINS, ids=str)
def test_backward_agrees_per_dtype(twin: Twin, dtype: str):
    """Autograd through the PyTorch twin, and both closed-form backwards, against float64 autograd."""
    args = rounded(_sample(twin), dtype)
    ref_out = flat(twin.np_fn(*args, **twin.kwargs))
    cots = _cotangents(twin, ref_out)
    ref = autograd(twin, args, "float64", cots)
    assert_close(autograd(twin, args, dtype, cots), ref, dtype, f"{twin.name} autograd")
    if twin.backward is not None:
        np_bw, pt_bw = twin.backward
        tdt = getattr(torch, dtype)
        got_pt = pt_bw(as_torch(args, dtype), [torch.from_numpy(c).to(tdt) for c in cots])
        assert all(d == dtype for d in out_dtypes(got_pt)), f"closed-form torch backward: {out_dtypes(got_pt)}"
        assert_close(flat(got_pt), ref, dtype, f"{twin.name} closed-form torch backward")
        if dtype != "bfloat16":
            got_np = np_bw(as_numpy(args, dtype), [c.astype(dtype) for c in cots])
            assert all(d == dtype for d in out_dtypes(got_np)), f"closed-form numpy backward: {out_dtypes(got_np)}"
            assert_close(flat(got_np), ref, dtype, f"{twin.name} closed-form numpy backward")


@pytest.mark.parametrize("twin", GRAD_TWINS, ids=str)
def test_gradcheck_float64(twin: Twin):
    args = _sample(twin)

    def f(*grad_inputs):
        full = list(as_torch(args, "float64"))
        for i, g in zip(twin.grad_args, grad_inputs, strict=True):
            full[i] = g
        return tuple(_selected(twin, twin.pt_fn(*full, **twin.kwargs)))

    inputs = tuple(torch.from_numpy(np.ascontiguousarray(args[i])).requires_grad_() for i in twin.grad_args)
    assert torch.autograd.gradcheck(f, inputs, atol=1e-6, rtol=1e-5)


# ---------------------------------------------------------------- bad inputs


BAD = [(t, i) for t in TWINS for i in range(len(t.bad))]


@pytest.mark.parametrize("twin,i", BAD, ids=[f"{t.name}-{i}" for t, i in BAD])
def test_bad_inputs_raise_the_same_error(twin: Twin, i: int):
    bad = twin.bad[i]
    with pytest.raises(bad.exc, match=bad.match) as np_err:
        twin.np_fn(*bad.args, **bad.kwargs)
    with pytest.raises(bad.exc) as pt_err:
        twin.pt_fn(*_map(bad.args, _tensor), **bad.kwargs)
    assert type(pt_err.value) is type(np_err.value)
    assert str(pt_err.value) == str(np_err.value)

