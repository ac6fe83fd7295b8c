"""The test command's "other machine" really is another machine for floating point.

``tools/other_machine.env`` lists the settings under which the test command runs nbval a second time. A
setting that changes nothing proves nothing, so each one is checked here: run a few float kernels in a fresh
process natively and with that one setting, and require that the bits of the result the setting governs
change. Every setting in the file must have a probe below (a new setting without one fails), and the whole
set together must change the bits of both NumPy's and PyTorch's results.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.tools  # make check runs it only when a tool or the configuration changed
ENV_FILE = ROOT / "tools" / "other_machine.env"

NUMPY_PROBE = r"""
import hashlib, json
import numpy as np

rng = np.random.default_rng(0)
a = rng.standard_normal((257, 513)).astype(np.float32)
b = rng.standard_normal((513, 129)).astype(np.float32)
x = rng.standard_normal(100_003).astype(np.float32)


def h(arr):
    return hashlib.sha256(np.ascontiguousarray(arr).tobytes()).hexdigest()


out = {
    "numpy_matmul_f32": h(a @ b),
    "numpy_matmul_f64": h(a.astype(np.float64) @ b.astype(np.float64)),
    "numpy_exp_f32": h(np.exp(a)),
}
"""
TORCH_PROBE = NUMPY_PROBE + r"""
import torch

out |= {
    "torch_matmul_f32": h((torch.from_numpy(a) @ torch.from_numpy(b)).numpy()),
    "torch_softmax_f32": h(torch.softmax(torch.from_numpy(a), dim=-1).numpy()),
    "torch_sum_f32": h(torch.from_numpy(x).sum().numpy()),
}
"""
# Which result each setting must change on this machine kind (two cores, AVX-512); a NumPy setting is probed
# without importing torch.
GOVERNS = {
    "ATEN_CPU_CAPABILITY": "torch_softmax_f32",
    "MKL_CBWR": "torch_matmul_f32",
    "OPENBLAS_CORETYPE": "numpy_matmul_f32",
    "NPY_DISABLE_CPU_FEATURES": "numpy_exp_f32",
    "OMP_NUM_THREADS": "torch_sum_f32",
    "MKL_NUM_THREADS": None,  # torch's MKL matmuls of this size do not split differently; set for consistency
    "OPENBLAS_NUM_THREADS": "numpy_matmul_f64",
}
THREAD_SETTINGS = {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"}


def settings() -> dict[str, str]:
    out = {}
    for line in ENV_FILE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def _clean_env() -> dict[str, str]:
    """This machine as it is: none of the settings, so every library picks its own kernels and thread count."""
    return {k: v for k, v in os.environ.items() if k not in GOVERNS}


def _probe(extra: dict[str, str], torch: bool = True) -> dict[str, str]:
    code = (TORCH_PROBE if torch else NUMPY_PROBE) + "\nprint(json.dumps(out))\n"
    proc = subprocess.run([sys.executable, "-c", code], env={**_clean_env(), **extra}, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def native() -> dict[str, str]:
    first, second = _probe({}), _probe({})
    assert first == second, "the probe is not deterministic natively: it cannot show what a setting changes"
    return first


def test_every_setting_has_a_probe() -> None:
    assert settings(), f"{ENV_FILE} sets nothing"
    assert set(settings()) <= set(GOVERNS), f"settings without a probe: {set(settings()) - set(GOVERNS)}"


@pytest.mark.parametrize("name", sorted(k for k, v in GOVERNS.items() if v))
def test_setting_changes_the_bits_it_governs(name: str, native: dict[str, str]) -> None:
    value = settings().get(name)
    if value is None:
        pytest.fail(f"{name} has a probe but is not set in {ENV_FILE}")
    if name in THREAD_SETTINGS and (os.cpu_count() or 1) < 2:
        pytest.skip("one core: the native thread count is already 1")
    key = GOVERNS[name]
    changed = _probe({name: value}, torch=key.startswith("torch"))
    assert changed[key] != native[key], f"{name}={value} does not change {key}: it simulates nothing"


def test_other_machine_changes_numpy_and_torch(native: dict[str, str]) -> None:
    other = _probe(settings())
    differ = {k for k in native if native[k] != other[k]}
    assert any(k.startswith("numpy") for k in differ) and any(k.startswith("torch") for k in differ), differ
