"""The PyTorch path: the same functions, names and signatures as the NumPy reference, for torch tensors.

Everything runs on the device the inputs live on (CPU in CI, CUDA when present) and is differentiable by
autograd. :func:`lib.pt.device.default_device` picks CUDA when available. The NumPy reference
(:mod:`lib.softmax`, :mod:`lib.attention`) is the oracle the tests hold this path to, and
``torch.autograd`` is the oracle for every hand-derived gradient.
"""

from __future__ import annotations
