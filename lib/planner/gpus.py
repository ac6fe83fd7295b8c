"""GPU memory as the driver and as the serving engine see it, for ``--gpu NAME``.

Each card has two totals, and they differ:

* ``nvidia-smi --query-gpu=memory.total`` (or ``rocm-smi --showmeminfo vram``): what the driver reports; an
  "80 GB" H100 shows 81,559 MiB;
* ``torch.cuda.mem_get_info()[1]`` (the CUDA runtime's ``cudaMemGetInfo`` total, which is also
  ``torch.cuda.get_device_properties(0).total_memory``): what a process can address. vLLM multiplies *this* by
  ``gpu_memory_utilization`` (its start-up log: ``total_gpu_memory (79.22GiB) x gpu_memory_utilization (0.90)``).
  On an H100 it is 81,082 to 81,090 MiB depending on the driver, about 470 MiB under nvidia-smi's figure.

A preset carries both with their sources; plans use the engine's (:attr:`GPU.plan_bytes`). Where no public
printout of the engine's total was found, the preset says so and plans fall back to nvidia-smi's figure, which the
report names as an assumption. Figures vary a little with the driver (a few MiB): ``--gpu-memory`` takes a measured
size with an explicit unit instead (``--gpu-memory 81089MiB``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..constants import GiB, MiB

__all__ = ["GPU", "GPUS", "ALIASES", "gpu"]


@dataclass(frozen=True)
class GPU:
    name: str
    memory_mib: int  #: nvidia-smi's ``memory.total`` (rocm-smi's VRAM total), MiB (2**20 bytes)
    marketed: str  #: the capacity on the data sheet, as written there
    source: str  #: where ``memory_mib`` was read
    engine_bytes: int | None = None  #: ``torch.cuda.mem_get_info()`` total, bytes; None where no printout was found
    engine_source: str = "no public printout found"  #: where ``engine_bytes`` was read

    @property
    def memory_bytes(self) -> int:
        """nvidia-smi's ``memory.total`` in bytes (the figure the driver reports)."""
        return self.memory_mib * MiB

    @property
    def plan_bytes(self) -> int:
        """The total a serving engine divides up: the engine's figure where known, else nvidia-smi's."""
        return self.engine_bytes if self.engine_bytes is not None else self.memory_bytes


def _gib(x: float) -> int:
    """A figure printed in GiB to two decimals (as vLLM and torch print it), in bytes."""
    return round(x * GiB)


_SMI_MODAL = ("nvidia-smi memory.total, listed in modal-labs/modal-client PR #2797"
              " (github.com/modal-labs/modal-client/pull/2797)")
_PROPS = "torch.cuda.get_device_properties total_memory"

GPUS: dict[str, GPU] = {g.name: g for g in [
    GPU("H100-80GB", 81_559, "80 GB HBM3",
        "nvidia-smi on 'NVIDIA H100 80GB HBM3', driver 580.105.08 (github.com/vllm-project/vllm/issues/55169); "
        "also " + _SMI_MODAL,
        81_089 * MiB,
        f"{_PROPS}=81089MB (MiB) on 'NVIDIA H100 80GB HBM3', torch 2.7.0 / CUDA 12.8 (a public benchmark write-up); "
        "other printouts 81082 and 81090 MiB; vLLM logs total_gpu_memory 79.22GiB "
        "(github.com/vllm-project/vllm/pull/10511)"),
    GPU("H200", 143_771, "141 GB HBM3e",
        "nvidia-smi on 'NVIDIA H200' (public nvidia-smi tables in several repositories; H200 NVL the same)",
        143_156 * MiB, f"{_PROPS}=143156MB (MiB) on 'NVIDIA H200' (a public vLLM example's comment)"),
    GPU("B200", 183_359, "180 GB HBM3e",
        "nvidia-smi on 'NVIDIA B200', driver 580.95.05 (github.com/NVIDIA/TensorRT-LLM/issues/10278)",
        182_642 * MiB, f"{_PROPS}=182642MB (MiB) on 'NVIDIA B200' (a public vLLM example's comment; another "
        "printout 182631 MiB)"),
    GPU("GB200", 189_471, "186 GB HBM3e",
        "nvidia-smi on 'NVIDIA GB200', driver 580.95.05 (public nvidia-smi tables in several repositories)"),
    GPU("H20", 97_871, "96 GB HBM3",
        "nvidia-smi on 'NVIDIA H20' (public nvidia-smi tables in several repositories; older drivers show 98304)",
        97_285 * MiB, f"{_PROPS}=97285MB (MiB) on 'NVIDIA H20' (comments in public Triton kernels)"),
    # The one total_memory printout found for an A100 80GB (81920MB, in a README) equals nvidia-smi's figure
    # exactly, unlike every other card here, so it is not taken as a measurement.
    GPU("A100-80GB", 81_920, "80 GB HBM2e", _SMI_MODAL),
    GPU("A100-40GB", 40_960, "40 GB HBM2", _SMI_MODAL,
        40_326 * MiB, f"{_PROPS}=40326MB (MiB) on 'NVIDIA A100-PCIE-40GB', torch 1.9.0 (a public README)"),
    GPU("L40S", 46_068, "48 GB GDDR6", _SMI_MODAL,
        45_589 * MiB, f"{_PROPS}=45589MB (MiB) on 'NVIDIA L40S' (a public write-up)"),
    GPU("L20", 46_068, "48 GB GDDR6",
        "nvidia-smi on 'NVIDIA L20', ECC on (public nvidia-smi tables in several repositories; 49140 with ECC off)"),
    GPU("L4", 23_034, "24 GB GDDR6", _SMI_MODAL),
    GPU("A10", 23_028, "24 GB GDDR6", _SMI_MODAL,
        _gib(22.18), "PyTorch's out-of-memory message 'GPU 0 has a total capacity of 22.18 GiB' on an A10 "
        "(github.com/OpenBMB/MiniCPM-V/issues/640), printed to 0.01 GiB"),
    GPU("T4", 15_360, "16 GB GDDR6", _SMI_MODAL,
        15_109 * MiB, f"{_PROPS}=15109MB (MiB) on 'Tesla T4' (several public printouts; others 15079-15102)"),
    GPU("RTX-4090", 24_564, "24 GB GDDR6X",
        "nvidia-smi on 'NVIDIA GeForce RTX 4090', driver 535 (github.com/vllm-project/vllm/issues/7553)",
        24_563 * MiB, f"{_PROPS}=24563MB (MiB) on 'NVIDIA GeForce RTX 4090' (a public printout)"),
    # 192 GB HBM3 = 8 stacks x 24 GiB: the data sheet's figure, binary; rocm-smi not found in a public printout.
    GPU("MI300X", 196_288, "192 GB HBM3",
        "rocm-smi --showmeminfo vram on 'AMD Instinct MI300X': VRAM Total Memory (B): 205822885888 (public printouts"
        " in several repositories; the same total in amdgpu's mem_info_vram_total and hipDeviceProp totalGlobalMem),"
        " not the data sheet's 8 x 24 GiB = 196,608 MiB",
        205_822_885_888,
        "torch.cuda.mem_get_info() total 205822885888 on an MI300X under ROCm (a public serving write-up's"
        " memory_total_bytes): the whole VRAM total, as rocm-smi reports it"),
]}

#: Lower-case spellings accepted by :func:`gpu`, each naming one preset.
ALIASES: dict[str, str] = {
    "h100": "H100-80GB", "h100-80gb": "H100-80GB", "h100-sxm": "H100-80GB", "h200": "H200", "b200": "B200",
    "gb200": "GB200", "h20": "H20", "a100-80gb": "A100-80GB", "a100-80": "A100-80GB", "a100-40gb": "A100-40GB",
    "a100-40": "A100-40GB", "l40s": "L40S", "l20": "L20", "l4": "L4", "a10": "A10", "t4": "T4",
    "rtx-4090": "RTX-4090", "4090": "RTX-4090", "rtx4090": "RTX-4090", "mi300x": "MI300X",
}
#: Spellings that name more than one card: refused, with the choices.
_AMBIGUOUS = {"a100": ("A100-40GB", "A100-80GB")}


def gpu(name: str) -> GPU:
    """The preset called ``name`` (case-insensitive; :data:`ALIASES`), or a ValueError listing them. An ambiguous
    name (``"a100"``: 40 or 80 GB?) is refused with its choices."""
    if not isinstance(name, str):
        raise ValueError(f"GPU name must be a string, got {type(name).__name__} {name!r}")
    key = name.strip().lower().replace(" ", "-").replace("_", "-")
    if key in _AMBIGUOUS:
        raise ValueError(f"GPU {name!r} is ambiguous: say {' or '.join(_AMBIGUOUS[key])}")
    if key in ALIASES:
        return GPUS[ALIASES[key]]
    raise ValueError(
        f"unknown GPU {name!r}; presets: {', '.join(GPUS)} (or give --gpu-memory with a unit, e.g. 81089MiB)")
