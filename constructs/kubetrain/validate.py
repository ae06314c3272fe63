"""Strict offline validation of manifests: what the API server would reject or silently drop.

Built-in kinds are checked against the Kubernetes OpenAPI schemas that `kubernetes-validate`
ships (its strict variant: unknown fields are errors). Custom resources are checked against
the `openAPIV3Schema` of their CRD, made strict the same way: the API server prunes fields a
structural schema does not declare, so an undeclared field is a silent misconfiguration.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from kubernetes_validate.utils import all_versions
from referencing import Registry, Resource

from kubetrain.cluster import KUBERNETES_VERSION_ANNOTATION

_SCHEMAS = files("kubernetes_validate") / "kubernetes-json-schema"
_DEFINITIONS_ID = "https://kubernetes.io/api/_definitions.json"
_OBJECT_META = {"$ref": f"{_DEFINITIONS_ID}#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}


@dataclass(frozen=True)
class Finding:
    """One problem with one object, printed as `file: kind/name: field.path: message`."""

    file: str
    object: str
    path: str
    message: str

    def format(self) -> str:
        return f"{self.file}: {self.object}: {self.path or '(object)'}: {self.message}"


@dataclass(frozen=True)
class Manifest:
    file: Path
    body: Any

    @property
    def label(self) -> str:
        if not isinstance(self.body, dict):
            return "?"
        name = (self.body.get("metadata") or {}).get("name", "?")
        return f"{self.body.get('kind', '?')}/{name}"


def supported_versions() -> list[str]:
    return sorted({".".join(v.split(".")[:2]) for v in all_versions()}, key=lambda v: tuple(map(int, v.split("."))))


def _schema_version(kubernetes_version: str) -> str:
    """The newest schema set that is not newer than the cluster (as kubernetes-validate picks)."""
    wanted = tuple(map(int, kubernetes_version.lstrip("v").split(".")[:2]))
    older = [v for v in all_versions() if tuple(map(int, v.split(".")[:2])) <= wanted]
    if not older:
        raise ValueError(f"no Kubernetes schemas for {kubernetes_version}; supported: {', '.join(supported_versions())}")
    return older[-1]


@cache
def _registry(schema_version: str) -> tuple[Path, Registry]:
    folder = _SCHEMAS / f"v{schema_version}-local-strict"
    definitions = json.loads((folder / "_definitions.json").read_text())
    return folder, Resource.from_contents(definitions) @ Registry()


@cache
def _builtin_validator(schema_version: str, kind: str, api_version: str) -> jsonschema.Validator | None:
    folder, registry = _registry(schema_version)
    # kubernetes-validate's file naming: rbac.authorization.k8s.io/v1 -> rbac-v1, v1 -> v1
    group, _, version = api_version.rpartition("/")
    stem = f"{group.split('.')[0]}-{version}" if group else version
    path = folder / f"{kind.lower()}-{stem}.json"
    if not path.is_file():
        return None
    return jsonschema.Draft202012Validator(json.loads(path.read_text()), registry=registry)


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


class CrdSchemas:
    """Validators for custom resources, from a folder of CRD YAML files."""

    def __init__(self, folder: Path):
        self.folder = folder
        self._schemas: dict[tuple[str, str], dict[str, Any]] = {}
        self._validators: dict[tuple[str, str, str], jsonschema.Validator | None] = {}
        for path in sorted(folder.glob("*.y*ml")):
            for crd in yaml.safe_load_all(path.read_text()):
                if not isinstance(crd, dict) or crd.get("kind") != "CustomResourceDefinition":
                    continue
                spec = crd["spec"]
                for version in spec["versions"]:
                    schema = (version.get("schema") or {}).get("openAPIV3Schema")
                    if version.get("served", True) and schema:
                        self._schemas[(f"{spec['group']}/{version['name']}", spec["names"]["kind"])] = schema

    def __len__(self) -> int:
        return len(self._schemas)

    def validator(self, schema_version: str, api_version: str, kind: str) -> jsonschema.Validator | None:
        key = (schema_version, api_version, kind)
        if key not in self._validators:
            schema = self._schemas.get((api_version, kind))
            if schema is not None:
                schema = strict_schema(schema)
                # The CRD says only `metadata: {type: object}`; check it as the API server does.
                schema.setdefault("properties", {})["metadata"] = _OBJECT_META
                schema = jsonschema.Draft202012Validator(schema, registry=_registry(schema_version)[1])
            self._validators[key] = schema
        return self._validators[key]


def load_manifests(paths: Iterable[Path]) -> Iterator[Manifest | Finding]:
    for path in paths:
        files_ = sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml")) if path.is_dir() else [path]
        for file in files_:
            try:
                docs = list(yaml.safe_load_all(file.read_text()))
            except (OSError, yaml.YAMLError) as exc:
                yield Finding(str(file), "?", "", f"cannot read YAML: {exc}")
                continue
            for doc in docs:
                if doc is not None:
                    yield Manifest(file, doc)


def _cluster_versions(manifests: list[Manifest]) -> dict[Path, str]:
    """Cluster folder -> Kubernetes version, from the annotation kubetrain puts on namespaces."""
    versions = {}
    for m in manifests:
        if isinstance(m.body, dict) and m.body.get("kind") == "Namespace":
            version = ((m.body.get("metadata") or {}).get("annotations") or {}).get(KUBERNETES_VERSION_ANNOTATION)
            if version:
                versions[m.file.parent.parent.resolve()] = version
    return versions


def _version_for(file: Path, versions: dict[Path, str], default: str) -> str:
    for folder in file.resolve().parents:
        if folder in versions:
            return versions[folder]
    return default


def _field_path(parts: Iterable[Any]) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def validate_manifests(paths: list[Path], crds: CrdSchemas | None, kubernetes_version: str | None
                       ) -> tuple[int, list[Finding]]:
    """Validate every object under `paths`. Returns (objects checked, findings)."""
    loaded = list(load_manifests(paths))
    findings = [item for item in loaded if isinstance(item, Finding)]
    manifests = [item for item in loaded if isinstance(item, Manifest)]
    versions = {} if kubernetes_version else _cluster_versions(manifests)
    default = kubernetes_version or supported_versions()[-1]
    for m in manifests:
        findings.extend(_validate_one(m, crds, _version_for(m.file, versions, default)))
    return len(manifests), findings


def _validate_one(m: Manifest, crds: CrdSchemas | None, kubernetes_version: str) -> Iterator[Finding]:
    body = m.body
    if not isinstance(body, dict) or not body.get("apiVersion") or not body.get("kind"):
        yield Finding(str(m.file), m.label, "", "not a Kubernetes object: apiVersion and kind are required")
        return
    schema_version = _schema_version(kubernetes_version)
    api_version, kind = body["apiVersion"], body["kind"]
    validator = _builtin_validator(schema_version, kind, api_version)
    if validator is None and crds is not None:
        validator = crds.validator(schema_version, api_version, kind)
    if validator is None:
        where = f"Kubernetes {kubernetes_version}" + (f" or the CRDs in {crds.folder}" if crds else "")
        fix = "" if crds else "; pass --crds with the operator's CRDs"
        yield Finding(str(m.file), m.label, "", f"unknown kind {api_version} {kind}: not in {where}{fix}")
        return
    for error in sorted(validator.iter_errors(body), key=lambda e: list(map(str, e.absolute_path))):
        yield Finding(str(m.file), m.label, _field_path(error.absolute_path), error.message)
