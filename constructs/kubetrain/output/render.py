"""kubetrain's objects as plain data, written as cdk8s would write them.

Constructs emit plain manifests into their cluster (`Cluster.add_object`); nothing crosses into cdk8s's
Node.js process while the fleet is defined or written. `written` gives an object the form cdk8s's
`ApiObject.toJson()` gives it, so dist/ is what it would be had every object gone through cdk8s: the chart's
labels under the object's own, metadata with empty and null fields dropped and keys sorted, null fields of the
rest dropped and whole floats made integers (as JavaScript returns them), and apiVersion, kind and metadata
first. A JSON patch (`TrainingJob.patch`) is applied to that form, by cdk8s's own
`JsonPatch.apply`, as cdk8s applies an ApiObject's patches: the one call into cdk8s an object may cost.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import cdk8s

from kubetrain.state import Emitted

_HEAD = ("apiVersion", "kind", "metadata")


def _sanitized(value: Any) -> Any:
    """cdk8s's sanitizeValue for metadata: keys sorted, nulls, empty lists and empty mappings dropped (None when
    nothing is left)."""
    if isinstance(value, Mapping):
        kept = {key: clean for key in sorted(value) if (clean := _sanitized(value[key])) is not None}
        return kept or None
    if isinstance(value, list):
        return [_sanitized(item) for item in value] or None
    return value


_KEPT = frozenset({str, int, bool})  # what JavaScript hands back unchanged


def _as_json(value: Any) -> Any:
    """A value as it comes back from cdk8s's JavaScript: a mapping's null fields gone, whole floats integers."""
    kind = type(value)
    if kind is dict:
        return {key: item if type(item) in _KEPT else _as_json(item) for key, item in value.items()
                if item is not None}
    if kind is list:
        return [item if type(item) in _KEPT else _as_json(item) for item in value]
    if kind is float and value.is_integer():
        return int(value)
    return value


def written(manifest: Mapping[str, Any], labels: Mapping[str, str]) -> dict[str, Any]:
    """`manifest` as cdk8s writes it from an ApiObject of a chart with `labels`, the rest of its fields added by
    JSON patch (what crossing into JavaScript and back makes of them)."""
    metadata = manifest.get("metadata") or {}
    metadata = {**metadata, "labels": {**labels, **(metadata.get("labels") or {})}}
    out = {"apiVersion": manifest["apiVersion"], "kind": manifest["kind"], "metadata": _sanitized(metadata) or {}}
    out.update((key, _as_json(value)) for key, value in manifest.items() if key not in _HEAD)
    return out


def patched(document: dict[str, Any], patches: tuple[cdk8s.JsonPatch, ...]) -> dict[str, Any]:
    """A written object with JSON patches applied (one call into cdk8s), apiVersion, kind and metadata first."""
    result = cdk8s.JsonPatch.apply(document, *patches)
    return {key: result[key] for key in [*_HEAD, *result] if key in result}


def patch_object(emitted: Emitted, labels: Mapping[str, str], patches: tuple[cdk8s.JsonPatch, ...]) -> None:
    """Apply JSON patches to an emitted object, in its written form."""
    document = emitted.manifest if emitted.written else written(emitted.manifest, labels)
    emitted.manifest = patched(document, patches)
    emitted.written = True


def as_written(emitted: Emitted, labels: Mapping[str, str]) -> dict[str, Any]:
    return emitted.manifest if emitted.written else written(emitted.manifest, labels)
