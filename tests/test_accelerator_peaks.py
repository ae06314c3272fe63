"""The dense bf16 peak of every accelerator: the runtime's MFU (kubetrain_runtime/metrics.py `peak_flops` looks the CUDA
device name up with kubetrain_runtime.accelerators.chip_peak_flops) and the cost estimate (the catalog) read one table."""

from __future__ import annotations

import pytest
from kubetrain.model.instances import BUILTIN_CATALOG

from kubetrain_runtime.accelerators import PEAK_BF16_FLOPS, chip_peak_flops, device_chip

# Device names as torch.cuda.get_device_name() returns them (nvidia-smi's product names), and the chip each is.
DEVICE_NAMES = [
    ("NVIDIA H100 80GB HBM3", "H100 SXM"),
    ("NVIDIA H100", "H100 SXM"),
    ("NVIDIA H100 PCIe", "H100 PCIe"),
    ("NVIDIA H100 NVL", "H100 NVL"),
    ("NVIDIA H200", "H200"),
    ("NVIDIA B200", "B200"),
    ("NVIDIA A100-SXM4-80GB", "A100"),
    ("NVIDIA A100-SXM4-40GB", "A100"),
    ("NVIDIA A100 80GB PCIe", "A100"),
    ("NVIDIA A100-PCIE-40GB", "A100"),
    ("NVIDIA L40S", "L40S"),
    ("NVIDIA L40", "L40"),
    ("NVIDIA L4", "L4"),
    ("NVIDIA A10G", "A10G"),
    ("Tesla T4", "T4"),
]


@pytest.mark.parametrize(("name", "chip"), DEVICE_NAMES)
def test_a_device_name_is_its_own_chip(name: str, chip: str) -> None:
    assert device_chip(name) == chip
    assert chip_peak_flops(name) == PEAK_BF16_FLOPS[chip]


def test_no_name_takes_the_peak_of_a_chip_it_merely_starts_with() -> None:
    # An L40 is not an L4 (half the L40S's peak, not the L4's), and a PCIe or NVL H100 not the SXM part.
    assert chip_peak_flops("NVIDIA L40") == 181e12 != chip_peak_flops("NVIDIA L4")
    assert chip_peak_flops("NVIDIA H100 PCIe") == 756e12 < chip_peak_flops("NVIDIA H100 NVL") == 835e12 \
        < chip_peak_flops("NVIDIA H100 80GB HBM3") == 989e12
    # Chips the table does not hold get no peak (no MFU) rather than a neighbour's.
    for name in ("NVIDIA A10", "NVIDIA GH200 480GB", "NVIDIA H200 NVL", "NVIDIA GeForce RTX 4090", "Tesla V100-SXM2-16GB",
                 "cpu", ""):
        assert device_chip(name) is None and chip_peak_flops(name) is None, name


def test_every_accelerator_of_the_catalog_has_a_peak() -> None:
    chips = {t.accelerator: t.peak_bf16_flops for name in BUILTIN_CATALOG.names()
             if (t := BUILTIN_CATALOG.get(name)) is not None and t.accelerators}
    assert {"A10G", "T4", "L4", "L40S", "A100", "H100", "H200", "B200", "Trainium", "Trainium2"} <= set(chips)
    assert all(chips.values()), {chip for chip, peak in chips.items() if not peak}
    # The catalog's chip names resolve to the same entry the runtime's device names do.
    assert all(chip_peak_flops(chip) == peak for chip, peak in chips.items())
