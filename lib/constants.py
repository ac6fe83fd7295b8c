"""One source of truth for the book's conventions and units.

Every chapter and every module imports these; none retypes them.

Mask convention
    A boolean mask has ``True`` where a query **may attend** to a key and ``False`` where it may not
    (the convention of ``torch.nn.functional.scaled_dot_product_attention``'s boolean ``attn_mask``).
    Masked logits are replaced by ``MASKED_LOGIT`` (``-inf``) before the softmax, so a masked position
    gets a weight of exactly 0. A row in which every key is masked gets all-zero weights and a zero
    output row (see :func:`lib.softmax.masked_softmax`).

Units
    ``GB = 10**9`` bytes (decimal, as disks and most data sheets count) and ``GiB = 2**30`` bytes (binary, as
    ``nvidia-smi`` and most allocators report). The book never writes one for the other. A GPU's "80 GB" of HBM
    is a label, not a decimal size: an H100 reports 81,559 MiB (see :mod:`lib.planner.gpus`).
"""

from __future__ import annotations

import math
from typing import Final

#: ``True`` in a boolean mask means "may attend".
MASK_KEEP: Final = True
#: The logit written into masked positions before the softmax.
MASKED_LOGIT: Final = -math.inf

KB: Final = 10**3
MB: Final = 10**6
GB: Final = 10**9
TB: Final = 10**12
KiB: Final = 2**10
MiB: Final = 2**20
GiB: Final = 2**30
TiB: Final = 2**40

#: Bytes per element for the number formats the book sizes memory with. int4 packs two per byte.
BYTES_PER_DTYPE: Final[dict[str, float]] = {
    "fp64": 8,
    "fp32": 4,
    "tf32": 4,
    "fp16": 2,
    "bf16": 2,
    "fp8": 1,
    "int8": 1,
    "int4": 0.5,
}

#: FLOPs counted for one multiply-add (the convention of Kaplan et al. 2020 and of every chapter).
FLOPS_PER_MAC: Final = 2
