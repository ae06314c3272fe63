"""Accelerators' peak FLOP/s, the basis of MFU: the runtime's measured MFU and the compiler's catalog and cost
estimate (`kubetrain cost`) read the same table, and one matcher turns a device's name into its chip. Imports no
torch.
"""

from __future__ import annotations

import re

# Dense bf16 peak of one accelerator in FLOP/s, without sparsity, by chip. Sources: NVIDIA's datasheets (H100
# SXM 989, H100 NVL 835, H100 PCIe 756 TFLOP/s; H200 989, the H100's compute; A100 312, SXM and PCIe alike; HGX B200
# 2,250; L40S 362; L40 181; L4 121, where the datasheet's 242 is with sparsity; T4 65, its mixed-precision FP16 peak:
# Turing has no bf16, so an fp16 run is what it trains); the A10G, AWS's variant of the A10 in G5 instances, 70 (the
# A10's datasheet says 125; the A10G trades tensor throughput for CUDA-core clocks: Baseten, "NVIDIA A10 vs A10G for
# ML model inference"); AWS Neuron's architecture pages (Trainium 190 per chip, "Trn1/Trn1n Architecture": 3,040 for
# 16 chips of a trn1.32xlarge; Trainium2 667 per chip, "Trainium2 Architecture"). torchtitan uses 989 for the H100.
PEAK_BF16_FLOPS: dict[str, float] = {
    "H100 SXM": 989e12, "H100 NVL": 835e12, "H100 PCIe": 756e12, "H200": 989e12, "A100": 312e12, "B200": 2250e12,
    "L40S": 362e12, "L40": 181e12, "L4": 121e12, "A10G": 70e12, "T4": 65e12, "Trainium": 190e12,
    "Trainium2": 667e12}

# A chip name's model word -> the chip; H100 is told apart by its form factor (see device_chip).
_MODELS = {chip.split()[0].upper(): chip for chip in PEAK_BF16_FLOPS if " " not in chip}
_H100 = {"NVL": "H100 NVL", "PCIE": "H100 PCIe"}  # anything else (SXM5, "80GB HBM3") is the SXM part


def device_chip(name: str) -> str | None:
    """The chip of PEAK_BF16_FLOPS a device is, from its full name as torch.cuda.get_device_name() gives it
    ("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA L40S", "Tesla T4", "NVIDIA A100-SXM4-80GB") or as the
    instance catalog spells it ("H100", "Trainium2"); None for any other. The model is the whole first word after
    the vendor, never a prefix, so an L40 is no L4 and an A10 no A10G; an H100's form factor is a word of its own
    (NVL, PCIe), and a variant this table does not know (an H200 NVL) is None rather than another part's peak."""
    words = [word for word in re.split(r"[\s_-]+", name.strip()) if word]
    if words and words[0].upper() in ("NVIDIA", "TESLA"):
        words = words[1:]
    if not words:
        return None
    model, rest = words[0].upper(), {word.upper() for word in words[1:]}
    if model == "H100":
        return next((chip for word, chip in _H100.items() if word in rest), "H100 SXM")
    if "NVL" in rest or ("PCIE" in rest and model != "A100"):
        return None  # a form factor with another peak than the table's part
    return _MODELS.get(model)


def chip_peak_flops(name: str) -> float | None:
    """The dense bf16 peak of a chip named `name` (a catalog chip or a CUDA device name), or None."""
    chip = device_chip(name)
    return PEAK_BF16_FLOPS[chip] if chip else None
