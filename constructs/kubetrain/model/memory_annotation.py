"""A job's memory estimate as dist/ carries it: the `kubetrain.dev/memory` annotation on its run object, written
by synth (kubetrain.jobs.memory_fit) and read by `kubetrain plan` and `kubetrain cost`, which read dist/ alone and so
import nothing that builds constructs.

    kubetrain.dev/memory: '{"accelerator":"H100","basis":"run config at 16 ranks","capacity_gib":80.0,
                            "per_rank_gib":{"activations":6.89,...,"total":16.97}}'
"""

from __future__ import annotations

import json
from typing import Any

MEMORY_ANNOTATION = "kubetrain.dev/memory"


def read_annotation(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The estimate on a run object of dist/, or None (a job the check could not judge, or an older dist/)."""
    text = ((obj.get("metadata") or {}).get("annotations") or {}).get(MEMORY_ANNOTATION)
    try:
        found = json.loads(text) if text else None
    except ValueError:
        return None
    # A hand-edited annotation is shown as absent rather than half-read: every figure must be a number.
    if not isinstance(found, dict) or not isinstance(found.get("per_rank_gib", {}), dict):
        return None
    numbers = [found.get("capacity_gib", 0), *found.get("per_rank_gib", {}).values()]
    if not all(isinstance(n, (int, float)) and not isinstance(n, bool) for n in numbers):
        return None
    return found


def describe(memory: dict[str, Any]) -> str:
    """One line from an annotation: 'per H100: 17.0 of 80 GiB (21%): parameters 0.9, ...'."""
    gib = memory.get("per_rank_gib") or {}
    capacity = memory.get("capacity_gib") or 0
    share = f" ({gib.get('total', 0) / capacity:.0%})" if capacity else ""
    return (f"per {memory.get('accelerator', 'accelerator')}: {gib.get('total', 0):.1f} of {capacity:g} GiB{share}: "
            f"parameters {gib.get('parameters', 0):.1f}, gradients {gib.get('gradients', 0):.1f}, optimizer "
            f"{gib.get('optimizer', 0):.1f}, activations {gib.get('activations', 0):.1f}, CUDA/NCCL/allocator "
            f"{gib.get('cuda_context', 0) + gib.get('nccl', 0) + gib.get('fragmentation', 0):.1f} "
            f"({memory.get('basis', '')})")
