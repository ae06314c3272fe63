"""Affinity is Kubernetes' own structure: checked against the Kubernetes schema, not re-modelled."""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from typing import Any

import jsonschema
from referencing import Registry, Resource

from training.problems import INVALID_VALUE, rule_violation

_DEFINITIONS_ID = "https://kubernetes.io/api/_definitions.json"
_AFFINITY = "io.k8s.api.core.v1.Affinity"


@cache
def _validator() -> jsonschema.Validator:
    # The strict schemas kubernetes-validate ships (unknown fields are errors), newest version.
    root = files("kubernetes_validate") / "kubernetes-json-schema"
    newest = max((p.name for p in root.iterdir() if p.name.endswith("-local-strict")),
                 key=lambda name: tuple(int(x) for x in name[1:].split("-")[0].split(".")))
    definitions = json.loads((root / newest / "_definitions.json").read_text())
    registry = Resource.from_contents(definitions) @ Registry()
    return jsonschema.Draft202012Validator({"$ref": f"{_DEFINITIONS_ID}#/$defs/{_AFFINITY}"}, registry=registry)


def check_affinity(value: dict[str, Any]) -> None:
    errors = sorted(_validator().iter_errors(value), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        first = errors[0]
        where = ".".join(map(str, first.absolute_path)) or "(affinity)"
        raise rule_violation(INVALID_VALUE, f"not a Kubernetes Affinity: {where}: {first.message}",
                             "write it as in a pod spec, e.g. {'nodeAffinity': {'requiredDuringScheduling"
                             "IgnoredDuringExecution': {'nodeSelectorTerms': [...]}}}")
