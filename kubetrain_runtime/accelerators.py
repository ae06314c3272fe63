"""Accelerators' peak FLOP/s, the basis of MFU: the runtime's measured MFU and the compiler's catalog and cost
estimate (`kubetrain cost`) read the same table. Imports no torch.
"""

from __future__ import annotations

# Dense bf16 peak of one accelerator in FLOP/s, without sparsity, by the chip's name as the catalog
# (kubetrain.platform.instances) and torch.cuda.get_device_name() spell it. NVIDIA's datasheets:
# A100 SXM 312 TFLOP/s; H100 SXM 989 (torchtitan uses 989 for H100); H200 SXM 989 (the H100's compute);
# B200 2,250 (HGX B200, dense); L40S 362; L4 121 (its datasheet's 242 is with sparsity). Chips absent here (T4, A10G, Trainium) have no MFU.
PEAK_BF16_FLOPS: dict[str, float] = {"H100": 989e12, "H200": 989e12, "A100": 312e12, "B200": 2250e12,
                                     "L40S": 362e12, "L4": 121e12}


def chip_peak_flops(name: str) -> float | None:
    """The dense bf16 peak of a chip named `name` (a catalog chip or a CUDA device name), or None."""
    return next((peak for chip, peak in PEAK_BF16_FLOPS.items() if chip in name), None)
