"""Names of create-once runs (`Cluster(run_names="content-hash")`): `<job>-<8 hex digits>` of what is rendered.

A run object's spec is immutable once created (a PyTorchJob's, TrainJob's or Job's pod templates), so a sync that
changes it fails ("field is immutable") and leaves the running run as it was. The name therefore hashes the run's
objects as synth writes them: the operator's object after `job.patch()`, what the target renders beside it
(Services, a TrainJob's runtime) and the run config's ConfigMap, with the run's own name in them replaced by a
placeholder. Whatever changes what the API server would get, a new prop or a new kubetrain that renders the same
props differently, is a new name: Argo CD creates the new run and prunes the old one, a replacement `kubetrain
diff` announces, never a sync that fails on a running run. Left out are each object's labels and annotations:
mutable, patched in place (the cost estimate, Argo CD's sync wave), so a new estimate re-prices a run without
re-running it. Fields Argo CD's ignoreDifferences covers (Kueue's `suspend`, the flavor's node selector) stay in:
kubetrain renders them the same every time, and a change to them is one Argo CD would never apply to a live run.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

# Stands for the hash while the run is rendered and checked: as long as the hash (so name lengths are judged right),
# and no hex digit in it, so it is never taken for a real run's name.
HASH_PLACEHOLDER = "xxxxxxxx"


def run_hash(objects: list[dict[str, Any]], name: str) -> str:
    """8 hex digits of the SHA-256 of `objects` (the run's, as written) with their run name `name` made neutral and
    their labels and annotations left out."""
    neutral = renamed([_without_mutable_metadata(obj) for obj in objects], name, HASH_PLACEHOLDER)
    text = json.dumps(sorted(json.dumps(obj, sort_keys=True) for obj in neutral))
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _without_mutable_metadata(obj: dict[str, Any]) -> dict[str, Any]:
    metadata = {key: value for key, value in (obj.get("metadata") or {}).items()
                if key not in ("labels", "annotations")}
    return {**obj, "metadata": metadata}


def renamed(value: Any, old: str, new: str) -> Any:
    """`value` with `old` (a run's name, `<job>-<hash>`) replaced by `new` in every string: its own name and the
    names derived from it (`<run>-config`, `<run>-worker-0.<run>`, `--rdzv-id=<run>`)."""
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, dict):
        return {key: renamed(item, old, new) for key, item in value.items()}
    if isinstance(value, list):
        return [renamed(item, old, new) for item in value]
    return value


def rename_in_place(obj: dict[str, Any], old: str, new: str) -> None:
    """`renamed`, on the object itself: whoever holds it (the admission record) sees the run's final name."""
    for key, item in obj.items():
        if isinstance(item, dict):
            rename_in_place(item, old, new)
        elif isinstance(item, list):
            for i, element in enumerate(item):
                if isinstance(element, dict):
                    rename_in_place(element, old, new)
                else:
                    item[i] = renamed(element, old, new)
        else:
            obj[key] = renamed(item, old, new)
