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
report names as an assumption; where the total is only implied by other printed figures (the A100 80GB: vLLM logs
at two utilizations), the preset says how, and so does the report. Figures vary a little with the driver (a few
MiB): ``--gpu-memory`` takes a measured size with an explicit unit instead (``--gpu-memory 81089MiB``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..constants import GiB, MiB

__all__ = ["GPU", "GPUS", "ALIASES", "gpu", "Roofline", "ROOFLINES", "roofline"]


@dataclass(frozen=True)
class GPU:
    name: str
    memory_mib: int  #: nvidia-smi's ``memory.total`` (rocm-smi's VRAM total), MiB (2**20 bytes)
    marketed: str  #: the capacity on the data sheet, as written there
    source: str  #: where ``memory_mib`` was read
    engine_bytes: int | None = None  #: ``torch.cuda.mem_get_info()`` total, bytes; None where no printout was found
    engine_source: str = "no public printout found"  #: where ``engine_bytes`` was read
    derived: bool = False  #: ``engine_bytes`` inferred from other printed figures, not printed itself

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
    # No printout of torch's total for an A100 80GB was found (the one total_memory printout, 81920MB in a README,
    # equals nvidia-smi's figure exactly, unlike every other card here, so it is not taken as a measurement); the
    # engine's total is the one four vLLM logs on the card imply, printed to 0.01 GiB.
    GPU("A100-80GB", 81_920, "80 GB HBM2e", _SMI_MODAL,
        _gib(79.26), "not printed: implied by vLLM 0.10.1.1 logs of Qwen2-7B-Instruct on 'A100 80GB' at"
        " gpu_memory_utilization 0.25 and 0.5, where only the budget u x total changes: (24.83 - 5.01) / 0.25 ="
        " 79.28 GiB at tensor-parallel 1, (31.83 - 12.02) / 0.25 = 79.24 GiB at tensor-parallel 2, their mean"
        " (github.com/dennislee22/vLLM-benchmarking, log/vllm-7B-1gpuA10080GB-0.25GRAM.log, -0.5GRAM.log and the"
        " 2gpu same-node pair; tests/fixtures/vllm_logs); about 0.02 GiB either way", derived=True),
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


# ---------------------------------------------------------------------------------------------------------------
# Speed: memory bandwidth and dense matrix peaks (issue #35), for lib.planner.speed's roofline.


@dataclass(frozen=True)
class Roofline:
    """What a card can read and compute per second, from its data sheet (theoretical peaks, never measured here).

    ``peak_flops`` holds *dense* matrix (tensor-core) FLOP/s per dtype. Data sheets print the Hopper, Ada and
    Blackwell figures "with sparsity" (2:4 structured sparsity, which dense serving does not use): those are halved
    here, and the source says so. A dtype the card has no matrix unit for is absent (an A100 has no fp8: fp8 weights
    are then multiplied at the 16-bit peak, as weight-only kernels do)."""

    bandwidth: float  #: HBM/GDDR bytes per second (data sheet, 10**12 B/s = 1 TB/s)
    peak_flops: dict[str, float]  #: dense matrix FLOP/s per dtype ("bf16", "fp8", "fp4")
    link_bandwidth: float  #: GPU-to-GPU bytes per second, one direction (NVLink / Infinity Fabric / PCIe)
    source: str  #: where the figures were read
    matmul_measured: float | None = None  #: largest bf16 matrix-product FLOP/s measured on the card (None: none
    #: found), from :data:`MAMF_SOURCE`; scales every dtype's peak by ``achievable``

    @property
    def achievable(self) -> float:
        """Measured over data-sheet bf16 matrix peak (at most 1; 1 where no measurement was found): the share of the
        sheet's peak a large matrix product reaches on this card, before any serving engine's losses."""
        if self.matmul_measured is None:
            return 1.0
        return min(1.0, self.matmul_measured / self.peak_flops["bf16"])

    def peak(self, dtype: str) -> float:
        """Dense matrix FLOP/s for multiplications in ``dtype`` (fp8 or fp4; a card without that unit multiplies at its
        16-bit peak, as weight-only kernels do; everything else runs at the 16-bit peak)."""
        for d in {"fp4": ("fp4", "bf16"), "fp8": ("fp8", "bf16")}.get(dtype, ("bf16",)):
            if d in self.peak_flops:
                return self.peak_flops[d]
        raise ValueError(f"no matrix peak for {dtype!r}")


T = 1e12
#: Where ``matmul_measured`` comes from: the "Maximum Achievable Matmul FLOPS" finder (Stas Bekman's mamf-finder.py,
#: ml-engineering/compute/accelerator) run on each card, bf16, the best shape's TFLOPS, as tabulated in the
#: README of github.com/mag-/gpu_benchmark ("Stats").
MAMF_SOURCE = ("largest bf16 matmul measured with mamf-finder (github.com/mag-/gpu_benchmark README, 'Stats': H100 SXM"
               " 80GB 821.2, GH200 144G 853.8, H100 PCIe 499.5, H100 NVL 488.5, MI300X 788.2, A100 SXM 267.9,"
               " L40S 252.0, L4 91.4, RTX 4090 178.8 TFLOPS)")
_H100_SHEET = ("NVIDIA H100 Tensor Core GPU data sheet (resources.nvidia.com/en-us-tensor-core/"
               "nvidia-tensor-core-gpu-datasheet)")
_SPARSE = "; the sheet's 'with sparsity' tensor figures halved for dense"

#: Data-sheet figures for every preset of :data:`GPUS`, plus three cards that published measurements use
#: (``GH200-144GB``, ``H100-NVL``, ``H100-PCIe``): rooflines only, no memory preset.
ROOFLINES: dict[str, Roofline] = {
    "H100-80GB": Roofline(3.35 * T, {"bf16": 989.5 * T, "fp8": 1979 * T}, 450e9,
                          f"{_H100_SHEET}, H100 SXM column: 3.35 TB/s, BF16 1,979 and FP8 3,958 TFLOPS with"
                          f" sparsity, NVLink 900 GB/s (two directions){_SPARSE}", 821.2 * T),
    "H200": Roofline(4.8 * T, {"bf16": 989.5 * T, "fp8": 1979 * T}, 450e9,
                     "NVIDIA H200 Tensor Core GPU data sheet (nvidia.com/en-us/data-center/h200), H200 SXM: 4.8 TB/s,"
                     f" BF16 1,979 and FP8 3,958 TFLOPS with sparsity, NVLink 900 GB/s{_SPARSE}; measured matmul:"
                     " the H100 SXM's (the same GH100 chip and clocks; none found for the H200)", 821.2 * T),
    "B200": Roofline(8.0 * T, {"bf16": 2250 * T, "fp8": 4500 * T, "fp4": 9000 * T}, 900e9,
                     "NVIDIA DGX B200 data sheet (resources.nvidia.com/en-us-dgx-systems/dgx-b200-datasheet), eight"
                     " GPUs: 64 TB/s HBM3e, FP8 72 PFLOPS and FP4 144 PFLOPS (with sparsity), NVLink 14.4 TB/s;"
                     " per GPU 8 TB/s and half the sparse figures (HGX B200 sheet: BF16 4.5 PFLOPS sparse)"),
    "GB200": Roofline(8.0 * T, {"bf16": 2500 * T, "fp8": 5000 * T, "fp4": 10000 * T}, 900e9,
                      "NVIDIA GB200 NVL72 data sheet (nvidia.com/en-us/data-center/gb200-nvl72): 72 GPUs, 576 TB/s,"
                      " FP16/BF16 360 PFLOPS, FP8 720 PFLOPS, FP4 1,440 PFLOPS (with sparsity), NVLink 130 TB/s;"
                      " per GPU, sparse figures halved"),
    "H20": Roofline(4.0 * T, {"bf16": 148 * T, "fp8": 296 * T}, 450e9,
                    "NVIDIA HGX H20 product brief as quoted by public spec tables (no public NVIDIA data sheet found):"
                    " 4.0 TB/s, BF16 148 and FP8 296 TFLOPS dense, NVLink 900 GB/s"),
    "A100-80GB": Roofline(2.039 * T, {"bf16": 312 * T}, 300e9,
                          "NVIDIA A100 data sheet (nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
                          "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf), A100 80GB SXM: 2,039 GB/s, BF16"
                          " 312 TFLOPS dense (624 with sparsity), NVLink 600 GB/s; no FP8 unit", 267.9 * T),
    "A100-40GB": Roofline(1.555 * T, {"bf16": 312 * T}, 300e9,
                          "NVIDIA A100 data sheet (as A100-80GB), A100 40GB SXM: 1,555 GB/s, BF16 312 TFLOPS dense,"
                          " NVLink 600 GB/s; no FP8 unit; measured matmul: the A100 SXM's (same chip)", 267.9 * T),
    "L40S": Roofline(0.864 * T, {"bf16": 362.05 * T, "fp8": 733 * T}, 32e9,
                     "NVIDIA L40S data sheet (nvidia.com/en-us/data-center/l40s): 864 GB/s, BF16 362.05 (733 with"
                     " sparsity) and FP8 733 (1,466 with sparsity) TFLOPS, PCIe Gen4 x16 64 GB/s (two directions)",
                     252.0 * T),
    "L20": Roofline(0.864 * T, {"bf16": 119.5 * T, "fp8": 239 * T}, 32e9,
                    "NVIDIA L20 product brief as quoted by public spec tables: 864 GB/s, BF16 119.5 and FP8 239"
                    " TFLOPS dense, PCIe Gen4 x16"),
    "L4": Roofline(0.300 * T, {"bf16": 121 * T, "fp8": 242.5 * T}, 32e9,
                   "NVIDIA L4 data sheet (nvidia.com/en-us/data-center/l4): 300 GB/s, BF16 242 and FP8 485 TFLOPS"
                   f" with sparsity, PCIe Gen4 x16{_SPARSE}", 91.4 * T),
    "A10": Roofline(0.600 * T, {"bf16": 125 * T}, 32e9,
                    "NVIDIA A10 data sheet (nvidia.com/content/dam/en-zz/Solutions/Data-Center/a10/pdf/"
                    "a10-datasheet.pdf): 600 GB/s, BF16 125 TFLOPS dense (250 with sparsity), PCIe Gen4 x16"),
    "T4": Roofline(0.320 * T, {"bf16": 65 * T}, 16e9,
                   "NVIDIA T4 data sheet (nvidia.com/en-us/data-center/tesla-t4): 320 GB/s, mixed-precision"
                   " FP16/FP32 65 TFLOPS (the card has no BF16 unit: 16-bit means FP16 here), PCIe Gen3 x16"),
    "RTX-4090": Roofline(1.008 * T, {"bf16": 165.2 * T, "fp8": 330.3 * T}, 32e9,
                         "NVIDIA Ada Lovelace architecture whitepaper, GeForce RTX 4090: 1,008 GB/s, BF16 (FP32"
                         " accumulate) 165.2 and FP8 (FP32 accumulate) 330.3 TFLOPS dense, PCIe Gen4 x16", 178.8 * T),
    "MI300X": Roofline(5.3 * T, {"bf16": 1307.4 * T, "fp8": 2614.9 * T}, 448e9,
                       "AMD Instinct MI300X data sheet (amd.com/en/products/accelerators/instinct/mi300/mi300x.html):"
                       " 5.3 TB/s, FP16/BF16 1,307.4 and FP8 2,614.9 TFLOPS dense, 7 Infinity Fabric links of"
                       " 64 GB/s each way", 788.2 * T),
    "GH200-144GB": Roofline(4.9 * T, {"bf16": 989.5 * T, "fp8": 1979 * T}, 450e9,
                            "NVIDIA GH200 Grace Hopper Superchip data sheet (nvidia.com/en-us/data-center/grace-hopper-"
                            "superchip), 144 GB HBM3e: 4.9 TB/s, BF16 1,979 and FP8 3,958 TFLOPS with sparsity"
                            f"{_SPARSE}", 853.8 * T),
    "H100-PCIe": Roofline(2.0 * T, {"bf16": 756.5 * T, "fp8": 1513 * T}, 300e9,
                          f"{_H100_SHEET}, H100 PCIe column: 80 GB (HBM2e), 2 TB/s, BF16 1,513 and FP8 3,026 TFLOPS"
                          f" with sparsity, NVLink bridge 600 GB/s{_SPARSE}; no memory preset: no public printout of"
                          " torch's total for the card was found (nvidia-smi: 81,559 MiB, a TensorRT-LLM report)",
                          499.5 * T),
    "H100-NVL": Roofline(3.9 * T, {"bf16": 835.5 * T, "fp8": 1670.5 * T}, 300e9,
                         f"{_H100_SHEET}, H100 NVL column: 3.9 TB/s, BF16 1,671 and FP8 3,341 TFLOPS with sparsity,"
                         f" NVLink bridge 600 GB/s{_SPARSE}", 488.5 * T),
}


def roofline(name: str) -> Roofline:
    """The data-sheet roofline of a preset (any spelling :func:`gpu` accepts) or of ``GH200-144GB``, ``H100-NVL`` or
    ``H100-PCIe``."""
    if isinstance(name, str) and name in ROOFLINES:
        return ROOFLINES[name]
    return ROOFLINES[gpu(name).name]
