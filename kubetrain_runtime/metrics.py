"""Metrics lines: one JSON object per log step on rank 0's stdout, floats at full precision."""

from __future__ import annotations

import json
import sys
from typing import Any

import torch

from kubetrain_runtime.accelerators import chip_peak_flops


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else device.type


def peak_flops(device: torch.device) -> float | None:
    """The accelerator's bf16 peak (kubetrain_runtime/accelerators.py), or None when unknown (CPUs, unlisted GPUs): then no
    MFU is reported."""
    return chip_peak_flops(device_name(device)) if device.type == "cuda" else None


def emit(record: dict[str, Any]) -> None:
    # json writes floats with repr(): the shortest text that round-trips, so nothing is lost.
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()
