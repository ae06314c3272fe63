"""Metrics lines: one JSON object per log step on rank 0's stdout, floats at full precision."""

from __future__ import annotations

import json
import sys
from typing import Any

import torch

# Peak dense bf16 FLOP/s per accelerator, for MFU (NVIDIA's data sheets; torchtitan's H100 figure).
PEAK_BF16_FLOPS = {"H100": 989e12, "H200": 989e12, "A100": 312e12, "B200": 2250e12}


def peak_flops(device: torch.device) -> float | None:
    """The accelerator's bf16 peak, or None when unknown (CPUs, unlisted GPUs): then no MFU is reported."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((peak for chip, peak in PEAK_BF16_FLOPS.items() if chip in name), None)


def emit(record: dict[str, Any]) -> None:
    # json writes floats with repr(): the shortest text that round-trips, so nothing is lost.
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()
