"""Handing plain manifests to cdk8s: one ApiObject and one patch call per object, whatever its size."""

from __future__ import annotations

from typing import Any

import cdk8s

from constructs import Construct


def api_object(scope: Construct, id: str, manifest: dict[str, Any]) -> cdk8s.ApiObject:
    """`manifest` (apiVersion, kind, metadata, and any other top-level fields) as a cdk8s ApiObject."""
    metadata = manifest.get("metadata", {})
    obj = cdk8s.ApiObject(scope, id, api_version=manifest["apiVersion"], kind=manifest["kind"],
                          metadata=cdk8s.ApiObjectMetadata(**{_SNAKE.get(k, k): v for k, v in metadata.items()}))
    rest = [cdk8s.JsonPatch.add(f"/{key}", value) for key, value in manifest.items()
            if key not in ("apiVersion", "kind", "metadata")]
    if rest:
        obj.add_json_patch(*rest)
    return obj


_SNAKE = {"ownerReferences": "owner_references"}
