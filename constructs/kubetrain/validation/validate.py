"""Strict offline validation of manifests: what the API server would reject or silently drop.

Built-in kinds are checked against the Kubernetes OpenAPI schemas that `kubernetes-validate`
ships (its strict variant: unknown fields are errors). Custom resources are checked against the
strict schemas kubetrain ships (generated from the operators' CRDs, see schemas.py), or against
the CRDs of a `--crds` folder, which add kinds or override shipped ones; a custom resource that
passes its schema is then checked against the schema's `x-kubernetes-validations` (CEL) rules, as the
API server checks them on create (cel_rules.py). Then every object, and what its controllers and
operators create from it, gets the API server's own checks, names per kind included
(kubetrain.apiserver).

Speed: every schema is compiled once per (Kubernetes version, kind) by jsonschema-rs, which checks
an object in microseconds; only an object that fails is checked again with `jsonschema`, whose
error messages and paths are the ones users see. This module imports no cdk8s.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

import jsonschema
import jsonschema_rs
import yaml
from kubernetes_validate.utils import all_versions
from referencing import Registry, Resource

from kubetrain.model.manifests import Manifest, UnreadableManifest, manifest_files, read_manifest
from kubetrain.model.phases import Advance, Progress, phase
from kubetrain.model.vocabulary import KUBERNETES_VERSION_ANNOTATION
from kubetrain.validation.api_checks import api_server_problems
from kubetrain.validation.cel_rules import RULE_FAILED, RULES_NOT_CHECKED, RulePlan
from kubetrain.validation.schemas import crd_schemas, shipped_schemas
from kubetrain_runtime.spelling import closest

_SCHEMAS = files("kubernetes_validate") / "kubernetes-json-schema"
_DEFINITIONS_ID = "https://kubernetes.io/api/_definitions.json"
_OBJECT_META = {"$ref": f"{_DEFINITIONS_ID}#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}


@dataclass(frozen=True)
class Finding:
    """One problem with one object, printed as `file: kind/name: field.path: message [code]`."""

    file: str
    object: str
    path: str
    message: str
    code: str = "KT602"  # the rule synth reports it under: schema findings KT602, CEL rules KT604, the API server's
    # own checks KT610-KT625

    def format(self, with_code: bool = True) -> str:
        line = f"{self.file}: {self.object}: {self.path or '(object)'}: {self.message}"
        return f"{line} [{self.code}]" if with_code else line


@cache
def _all_versions() -> tuple[str, ...]:
    return tuple(all_versions())


def supported_kubernetes_versions() -> list[str]:
    """The Kubernetes versions kubetrain can validate against: the only ones a cluster may declare."""
    return sorted({".".join(v.split(".")[:2]) for v in _all_versions()}, key=lambda v: tuple(map(int, v.split("."))))


@cache
def _schema_version(kubernetes_version: str) -> str | None:
    """The newest schema set that is not newer than the cluster (as kubernetes-validate picks)."""
    try:
        wanted = tuple(map(int, kubernetes_version.lstrip("v").split(".")[:2]))
    except ValueError:
        return None
    older = [v for v in _all_versions() if tuple(map(int, v.split(".")[:2])) <= wanted]
    return older[-1] if older else None


@cache
def _definitions(schema_version: str) -> tuple[Path, dict[str, Any]]:
    folder = _SCHEMAS / f"v{schema_version}-local-strict"
    return folder, json.loads((folder / "_definitions.json").read_text())


@cache
def _registries(schema_version: str) -> tuple[Registry, jsonschema_rs.Registry]:
    definitions = _definitions(schema_version)[1]
    return (Resource.from_contents(definitions) @ Registry(),
            jsonschema_rs.Registry([(_DEFINITIONS_ID, definitions)]))


NOT_CHECKED = ("some validation rules were not checked because the object was invalid; correct the existing "
               "errors to complete validation")  # the API server's words


@dataclass
class _Validator:
    """A compiled validator for one kind, with `jsonschema` kept for the messages of failing objects."""

    schema: dict[str, Any]
    schema_version: str
    custom: bool = False  # a CRD's schema, whose x-kubernetes-validations rules are evaluated too
    fast: Any = field(init=False)
    _slow: jsonschema.Validator | None = field(default=None, init=False)
    _rules: RulePlan | None = field(default=None, init=False)
    _rules_built: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.fast = jsonschema_rs.Draft202012Validator(self.schema, registry=_registries(self.schema_version)[1])

    def errors(self, body: Any) -> list[tuple[str, str]]:
        if self.fast.is_valid(body):
            return []
        if self._slow is None:
            self._slow = jsonschema.Draft202012Validator(self.schema, registry=_registries(self.schema_version)[0])
        found = sorted(self._slow.iter_errors(body), key=lambda e: list(map(str, e.absolute_path)))
        return [(_field_path(e.absolute_path), e.message + _near_names(e)) for e in found] or [("", "invalid")]

    def rule_failures(self, body: Any, schema_valid: bool) -> list[tuple[str, str, str]]:
        """(path, message, code) for each CEL rule `body` fails; rules are compiled on the kind's first object.
        Like the API server, rules are not evaluated on an object the schema already refuses (KT606)."""
        if not self._rules_built:
            self._rules, self._rules_built = (RulePlan.build(self.schema) if self.custom else None), True
        if self._rules is None:
            return []
        if not schema_valid:
            return [("", NOT_CHECKED, RULES_NOT_CHECKED.code)]
        return [(path, message, RULE_FAILED.code) for path, message in self._rules.failures(body)]


class Schemas:
    """Every kind kubetrain can validate: built-in ones, the shipped custom resources, and `--crds` folders."""

    def __init__(self, crd_folders: Iterable[Path] = ()):
        self.custom: dict[tuple[str, str], Path | dict[str, Any]] = dict(shipped_schemas())
        self.crd_folders = list(crd_folders)
        self.unreadable: list[str] = []  # CRD files that could not be read: bad input, reported by the caller
        for folder in self.crd_folders:
            for path in sorted(folder.glob("*.y*ml")):
                try:
                    self.custom.update(crd_schemas(path.read_bytes().decode("utf-8")))
                except (UnicodeDecodeError, yaml.YAMLError, KeyError, TypeError, AttributeError, ValueError) as exc:
                    reason = "not UTF-8" if isinstance(exc, UnicodeDecodeError) else " ".join(str(exc).split())[:200]
                    self.unreadable.append(f"{path}: not a CRD kubetrain can read ({reason})")
        self._validators: dict[tuple[str, str, str], _Validator | None] = {}

    def validator(self, schema_version: str, api_version: str, kind: str) -> _Validator | None:
        key = (schema_version, api_version, kind)
        if key not in self._validators:
            self._validators[key] = self._build(schema_version, api_version, kind)
        return self._validators[key]

    def _build(self, schema_version: str, api_version: str, kind: str) -> _Validator | None:
        custom = self.custom.get((api_version, kind))
        if custom is not None:
            schema = json.loads(custom.read_text()) if isinstance(custom, Path) else json.loads(json.dumps(custom))
            # The CRD says only `metadata: {type: object}`; check it as the API server does.
            schema.setdefault("properties", {})["metadata"] = _OBJECT_META
            return _Validator(schema, schema_version, custom=True)
        folder = _definitions(schema_version)[0]
        # kubernetes-validate's file naming: rbac.authorization.k8s.io/v1 -> rbac-v1, v1 -> v1
        group, _, version = api_version.rpartition("/")
        stem = f"{group.split('.')[0]}-{version}" if group else version
        path = folder / f"{kind.lower()}-{stem}.json"
        if not path.is_file():
            return None
        return _Validator(json.loads(path.read_text()), schema_version)


def load_manifests(files: Iterable[tuple[Path, Path]], progress: Advance | None = None) -> Iterator[Manifest | Finding]:
    """The objects of (file, folder) pairs from `manifest_files`, or a finding for each file that cannot be read."""
    for count, (file, folder) in enumerate(files, 1):
        if progress and count % 256 == 0:
            progress(256)
        try:
            docs = read_manifest(str(file), file.read_bytes())
        except OSError as exc:
            yield Finding(str(file), "?", "", f"cannot be read: {exc.strerror}")
            continue
        except UnreadableManifest as exc:
            where = f"line {exc.line}: " if exc.line else ""
            yield Finding(str(file), "?", "", f"{where}{exc.reason}; fix: {exc.fix}")
            continue
        name = str(file)
        for doc in docs:
            yield Manifest(name, doc, folder)


def _cluster_versions(manifests: list[Manifest]) -> dict[Path, str]:
    """Cluster folder -> Kubernetes version, from the annotation kubetrain puts on namespaces."""
    versions = {}
    for m in manifests:
        if isinstance(m.body, dict) and m.body.get("kind") == "Namespace" and m.folder is not None:
            version = ((m.body.get("metadata") or {}).get("annotations") or {}).get(KUBERNETES_VERSION_ANNOTATION)
            if isinstance(version, str):
                versions[m.folder.parent] = version
    return versions


def _version_for(m: Manifest, versions: dict[Path, str], default: str) -> str:
    for folder in [m.folder, *m.folder.parents] if m.folder else []:
        if folder in versions:
            return versions[folder]
    return default


def _near_names(error: jsonschema.ValidationError) -> str:
    """For a field the schema does not have, the one it was meant to be: ' (did you mean ...?)'."""
    if error.validator != "additionalProperties" or not isinstance(error.instance, dict):
        return ""
    known = list(error.schema.get("properties") or {})
    guesses = [f"{guess!r} for {key!r}" for key in sorted(set(error.instance) - set(known))
               if (guess := closest(key, known))]
    return f" (did you mean {', '.join(guesses)}?)" if guesses else ""


def _field_path(parts: Iterable[Any]) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def validate_objects(manifests: list[Manifest], schemas: Schemas, kubernetes_version: str | None = None,
                     progress: Advance | None = None) -> list[Finding]:
    """Validate objects in memory. Each is checked against its cluster's Kubernetes version (from its
    folder's namespaces), else `kubernetes_version`, else the newest supported."""
    versions = {} if kubernetes_version else _cluster_versions(manifests)
    default = kubernetes_version or supported_kubernetes_versions()[-1]
    by_folder: dict[Path | None, str] = {}  # a folder's objects share its version: look it up once
    findings: list[Finding] = []
    for i, m in enumerate(manifests, 1):
        version = by_folder.get(m.folder)
        if version is None:
            version = by_folder[m.folder] = _version_for(m, versions, default)
        findings.extend(_validate_one(m, schemas, version))
        if progress and i % 256 == 0:
            progress(256)
    findings += [Finding(m.file, m.label, path, message, code) for m, code, path, message in api_server_problems(
        manifests, lambda m: by_folder[m.folder], {(f.file, f.object) for f in findings})]
    return findings


def validate_manifests(paths: list[Path], schemas: Schemas | None = None, kubernetes_version: str | None = None,
                       progress: Progress | None = None) -> tuple[int, list[Finding]]:
    """Validate every object under `paths`. Returns (objects checked, findings)."""
    files = [item for path in paths for item in manifest_files(path)]
    loaded = list(load_manifests(files, phase(progress, "reading", len(files))))
    findings = [item for item in loaded if isinstance(item, Finding)]
    manifests = [item for item in loaded if isinstance(item, Manifest)]
    findings += validate_objects(manifests, schemas or Schemas(), kubernetes_version,
                                 phase(progress, "validating", len(manifests)))
    return len(manifests), findings


def _annotation_findings(m: Manifest) -> Iterator[Finding]:
    """The kubetrain.dev/* annotations `plan` and `cost` read back, read as they read them: a hand edit they would
    refuse is found by validate too (CI runs it on every pull request)."""
    annotations = (m.body.get("metadata") or {}).get("annotations")
    if not isinstance(annotations, dict) or not any(str(key).startswith("kubetrain.dev/") for key in annotations):
        return
    from kubetrain.admission.cluster_objects import ClusterObjects
    from kubetrain.cost.annotations import ANNOTATION_FIX, estimate_of, peak_flops_of, pricing_of

    try:
        estimate_of(m.body), pricing_of(m.body), peak_flops_of(m.body)
        if m.body.get("kind") == "NodePool":
            ClusterObjects.from_manifests("", [m.body])
    except (ValueError, TypeError, AttributeError) as error:  # CostInputError is a ValueError
        message = str(error)
        yield Finding(m.file, m.label, "metadata.annotations",
                      message if "fix: " in message else f"{message}; fix: {ANNOTATION_FIX}")


def _validate_one(m: Manifest, schemas: Schemas, kubernetes_version: str) -> Iterator[Finding]:
    body = m.body
    if not isinstance(body, dict) or not isinstance(body.get("apiVersion"), str) or not isinstance(
            body.get("kind"), str):
        yield Finding(m.file, m.label, "", "not a Kubernetes object: apiVersion and kind are required")
        return
    schema_version = _schema_version(kubernetes_version)
    if schema_version is None:
        yield Finding(m.file, m.label, "", f"Kubernetes {kubernetes_version} is older than every schema kubetrain "
                      f"ships ({', '.join(supported_kubernetes_versions()[:1])} is the oldest): declare a supported "
                      "version on the cluster, or pass --kubernetes-version")
        return
    yield from _annotation_findings(m)
    api_version, kind = body["apiVersion"], body["kind"]
    validator = schemas.validator(schema_version, api_version, kind)
    if validator is None:
        folders = f" or the CRDs in {', '.join(map(str, schemas.crd_folders))}" if schemas.crd_folders else ""
        yield Finding(m.file, m.label, "", f"unknown kind {api_version} {kind}: not in Kubernetes "
                      f"{kubernetes_version}, kubetrain's shipped schemas{folders}; add the folder of its CRD: "
                      "`--crds DIR` (kubetrain synth and validate) or `kubetrain.add_crds(app, DIR)` in the fleet")
        return
    errors = validator.errors(body)
    for path, message in errors:
        yield Finding(m.file, m.label, path, message)
    for path, message, code in validator.rule_failures(body, schema_valid=not errors):
        yield Finding(m.file, m.label, path, message, code)
