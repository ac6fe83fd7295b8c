"""Where the PyTorch path runs."""

from __future__ import annotations

import torch


def default_device() -> torch.device:
    """CUDA when a GPU is visible, else the CPU. Every ``lib.pt`` function follows its inputs' device."""
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
