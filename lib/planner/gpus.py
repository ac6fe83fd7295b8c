"""GPU memory as the devices report it, for ``--gpu NAME``.

Marketing names round: an "80 GB" H100 has five 16 GiB HBM3 stacks (80 GiB physical) and reports 81,559 MiB
(85.5 × 10⁹ bytes) to ``nvidia-smi``, not 80 × 10⁹ bytes. HBM and GDDR capacities are powers of two, so these
cards are *binary*-sized; the figure a serving engine multiplies by its utilization is the device's reported total
(vLLM: ``torch.cuda.mem_get_info()``), which is what each preset holds, in MiB, with its source.

Every figure is ``memory.total`` of ``nvidia-smi --query-gpu=name,memory.total --format=csv`` (NVIDIA) or the VRAM
total of ``rocm-smi --showmeminfo vram`` (AMD), as recorded below. Where a figure comes from a public device
listing rather than a measurement made for this book, the comment says so; ``--gpu-memory`` takes any measured
size with an explicit unit instead (e.g. ``--gpu-memory 81559MiB``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..constants import MiB

__all__ = ["GPU", "GPUS", "gpu"]


@dataclass(frozen=True)
class GPU:
    name: str
    memory_mib: int  #: the device-reported total, MiB (2**20 bytes)
    marketed: str  #: the capacity on the data sheet, as written there
    source: str

    @property
    def memory_bytes(self) -> int:
        return self.memory_mib * MiB


GPUS: dict[str, GPU] = {g.name: g for g in [
    # nvidia-smi on H100 80GB HBM3 (SXM5) and H100 PCIe: 81559MiB, checked against public nvidia-smi listings.
    # 5 stacks x 16 GiB physical, part reserved by the driver.
    GPU("H100-80GB", 81_559, "80 GB HBM3", "nvidia-smi memory.total (public nvidia-smi listings)"),
    # nvidia-smi on H200 (SXM, 141 GB HBM3e): 143771MiB, recalled from public nvidia-smi listings; 6 stacks x 24 GiB.
    GPU("H200", 143_771, "141 GB HBM3e", "nvidia-smi memory.total (public listings, recalled; not measured here)"),
    # nvidia-smi on A100-SXM4-80GB / A100 80GB PCIe: 81920MiB (public listings, recalled).
    GPU("A100-80GB", 81_920, "80 GB HBM2e", "nvidia-smi memory.total (public listings, recalled; not measured here)"),
    # nvidia-smi on A100-SXM4-40GB / A100-PCIE-40GB: 40960MiB (public listings, recalled).
    GPU("A100-40GB", 40_960, "40 GB HBM2", "nvidia-smi memory.total (public listings, recalled; not measured here)"),
    # nvidia-smi on L4: 23034MiB (public listings, recalled; 24 GB GDDR6 with ECC reservations).
    GPU("L4", 23_034, "24 GB GDDR6", "nvidia-smi memory.total (public listings, recalled; not measured here)"),
    # nvidia-smi on L40S: 46068MiB (public listings, recalled; 48 GB GDDR6 with ECC on).
    GPU("L40S", 46_068, "48 GB GDDR6", "nvidia-smi memory.total (public listings, recalled; not measured here)"),
    # nvidia-smi on GeForce RTX 4090: 24564MiB (public listings, recalled; 24 GB GDDR6X).
    GPU("RTX-4090", 24_564, "24 GB GDDR6X", "nvidia-smi memory.total (public listings, recalled; not measured here)"),
    # AMD Instinct MI300X: 192 GB HBM3 = 8 stacks x 24 GiB = 192 GiB = 196,608 MiB (AMD data sheet; the driver
    # may reserve some of it, as NVIDIA's does: measure with rocm-smi and pass --gpu-memory).
    GPU("MI300X", 196_608, "192 GB HBM3", "AMD data sheet, 8 x 24 GiB HBM3 stacks (binary); not measured here"),
]}
_ALIASES = {"h100": "H100-80GB", "h100-80gb": "H100-80GB", "h100-sxm": "H100-80GB", "h200": "H200",
            "a100": "A100-80GB", "a100-80gb": "A100-80GB", "a100-40gb": "A100-40GB", "l4": "L4", "l40s": "L40S",
            "rtx-4090": "RTX-4090", "4090": "RTX-4090", "rtx4090": "RTX-4090", "mi300x": "MI300X"}


def gpu(name: str) -> GPU:
    """The preset called ``name`` (case-insensitive; ``"h100"`` is the 80 GB H100), or a ValueError listing them."""
    if not isinstance(name, str):
        raise ValueError(f"GPU name must be a string, got {type(name).__name__} {name!r}")
    key = name.strip().lower().replace(" ", "-").replace("_", "-")
    if key in _ALIASES:
        return GPUS[_ALIASES[key]]
    raise ValueError(
        f"unknown GPU {name!r}; presets: {', '.join(GPUS)} (or give --gpu-memory with a unit, e.g. 81559MiB)")
