"""JSON schemas of the custom resources kubetrain emits: generated from upstream CRDs, shipped in the package.

The API server prunes fields that a CRD's structural schema does not declare, so a typo in a
custom resource is dropped silently. `strict_schema` turns a CRD's `openAPIV3Schema` into a JSON
Schema that rejects what would be pruned. `generate` does that for the CRD of every kind whose descriptor
names one (`Kind.crd`, pinned to the operator versions kubetrain targets) and writes one compact JSON file per kind plus
`PROVENANCE.json` (project, version, source file, sha256, and how many CEL rules the schema carries);
`scripts/generate_schemas.py` runs it, and a test regenerates from the upstream files when they are
present and compares. Only descriptions are dropped: `default`s and the `x-kubernetes-validations`
rules stay at their schema nodes, where validation/cel_rules.py evaluates them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml

from kubetrain.kinds.base import CrdSource
from kubetrain.kinds.kind_registry import all_kinds

SHIPPED = files("kubetrain.validation") / "schemas"
PROVENANCE = "PROVENANCE.json"
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def crd_sources() -> list[CrdSource]:
    """The CRD of every registered kind that has one (kubetrain.kinds), at the version kubetrain targets."""
    return [kind.crd for kind in all_kinds() if kind.crd is not None]


def strict_schema(node: Any) -> Any:
    """A structural schema as JSON Schema, rejecting what the API server would prune."""
    if isinstance(node, list):
        return [strict_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: strict_schema(value) for key, value in node.items()}
    if node.get("nullable") and "type" in node:
        out["type"] = [node["type"], "null"]
    if node.get("x-kubernetes-int-or-string") and "anyOf" not in node:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if (node.get("type") == "object" and "properties" in node and "additionalProperties" not in node
            and not node.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


def _without_docs(node: Any) -> Any:
    """Descriptions are most of a CRD's bytes and no part of validation."""
    if isinstance(node, list):
        return [_without_docs(item) for item in node]
    if not isinstance(node, dict):
        return node
    return {k: _without_docs(v) for k, v in node.items() if k != "description" or not isinstance(v, str)}


def crd_schemas(text: str) -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> strict schema, for every served version of the CRDs in one YAML text."""
    out = {}
    for crd in yaml.load_all(text, Loader=_LOADER):
        if crd is None:  # an empty document, e.g. after a trailing ---
            continue
        if not isinstance(crd, dict) or crd.get("kind") != "CustomResourceDefinition":
            # A folder of CRDs that also holds other objects (a chart's templates) would leave kinds unchecked.
            what = f"a {crd.get('kind')} object" if isinstance(crd, dict) else f"a {type(crd).__name__}"
            raise ValueError(f"holds {what}, not a CustomResourceDefinition")
        spec = crd.get("spec") or {}
        for version in spec.get("versions") or []:
            schema = (version.get("schema") or {}).get("openAPIV3Schema")
            if version.get("served", True) and schema:
                out[(f"{spec['group']}/{version['name']}", spec["names"]["kind"])] = strict_schema(_without_docs(schema))
    return out


def count_rules(node: Any) -> int:
    """The x-kubernetes-validations rules anywhere in a schema."""
    if isinstance(node, list):
        return sum(count_rules(item) for item in node)
    if not isinstance(node, dict):
        return 0
    own = node.get("x-kubernetes-validations")
    return (len(own) if isinstance(own, list) else 0) + sum(
        count_rules(value) for key, value in node.items() if key != "x-kubernetes-validations")


def schema_file(api_version: str, kind: str) -> str:
    return f"{api_version.replace('/', '_')}_{kind}.json"


def generate(crds: Path | Sequence[Path], out: Path) -> list[str]:
    """Write the shipped schemas from the CRD files in `crds` (a folder, or folders searched in order) into
    `out`; returns the files written. A kind whose CRD file none of the folders holds keeps the schema and
    provenance already in `out` (the upstream folder at hand need not hold every operator's CRDs)."""
    folders = [crds] if isinstance(crds, Path) else list(crds)
    out.mkdir(parents=True, exist_ok=True)
    old = json.loads((out / PROVENANCE).read_text()) if (out / PROVENANCE).is_file() else {}
    provenance, written = {}, []
    for source in crd_sources():
        path = next((folder / source.file for folder in folders if (folder / source.file).is_file()), None)
        if path is None:
            kept = {name: entry for name, entry in old.items() if entry["source"] == source.file}
            if not kept:
                raise FileNotFoundError(f"{source.file} ({source.project} {source.version}) is in none of "
                                        f"{', '.join(map(str, folders))}, and {out} has no schema from it")
            provenance.update(kept)
            continue
        data = path.read_bytes()
        schemas = crd_schemas(data.decode("utf-8"))
        for (api_version, kind), schema in sorted(schemas.items()):
            if api_version not in source.api_versions:
                continue
            name = schema_file(api_version, kind)
            (out / name).write_text(json.dumps(schema, sort_keys=True, separators=(",", ":")) + "\n")
            provenance[name] = {"apiVersion": api_version, "kind": kind, "project": source.project,
                                "version": source.version, "source": source.file,
                                "sha256": hashlib.sha256(data).hexdigest(), "rules": count_rules(schema)}
            written.append(name)
    (out / PROVENANCE).write_text(json.dumps(provenance, indent=1, sort_keys=True) + "\n")
    return [*written, PROVENANCE]


def shipped_schemas() -> dict[tuple[str, str], Path]:
    """(apiVersion, kind) -> the shipped schema file; read lazily, kind by kind."""
    provenance = json.loads((SHIPPED / PROVENANCE).read_text())
    return {(entry["apiVersion"], entry["kind"]): SHIPPED / name for name, entry in provenance.items()}
