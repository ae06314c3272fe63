"""Affinity is Kubernetes' own structure: checked against the Kubernetes schema, then as the API server checks
it (kubetrain.apiserver), not re-modelled."""

from __future__ import annotations

import json
import re
from functools import cache
from importlib.resources import files
from typing import Any

import jsonschema
from referencing import Registry, Resource

from kubetrain.apiserver.pod_scheduling import validate_affinity
from kubetrain.apiserver.report import Report
from kubetrain.rules.registry import register
from kubetrain.rules.sources import K8S_CORE_VALIDATION
from kubetrain_runtime.problems import INVALID_VALUE, rule_violation
from kubetrain_runtime.spelling import closest

_DEFINITIONS_ID = "https://kubernetes.io/api/_definitions.json"
_AFFINITY = "io.k8s.api.core.v1.Affinity"
_INDEX = re.compile(r"\[([0-9]+)\]")

AFFINITY = register(
    "KT131", "error", "affinity the API server refuses, or that no node can satisfy",
    rationale="A required node affinity needs at least one term and every term an expression (an empty term matches "
              "no node); In and NotIn need values, Exists and DoesNotExist take none, Gt and Lt exactly one integer; "
              "preferred terms weigh 1-100; pod (anti-)affinity terms need a topologyKey and valid label selectors. "
              "The API server refuses such a pod (or the scheduler never places it) after the job was merged.",
    fix="give every term an expression: In/NotIn with values, Exists/DoesNotExist without, Gt/Lt one integer; "
        "weights 1-100; a topologyKey in every pod (anti-)affinity term",
    source=K8S_CORE_VALIDATION)


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
        near = ""
        if first.validator == "additionalProperties" and isinstance(first.instance, dict):
            known = list(first.schema.get("properties") or {})
            for key in sorted(set(first.instance) - set(known)):
                guess = closest(key, known, cutoff=0.5)
                near += f"did you mean {guess!r} for {key!r}? " if guess else ""
        raise rule_violation(INVALID_VALUE, f"not a Kubernetes Affinity: {where}: {first.message}",
                             f"{near}write it as in a pod spec, e.g. {{'nodeAffinity': {{'requiredDuringScheduling"
                             "IgnoredDuringExecution': {'nodeSelectorTerms': [...]}}}")
    report = Report((1, 33))
    validate_affinity(value, "", report)
    if report.found:
        _, path, message = report.found[0]
        field = _INDEX.sub(r".\1", path).lstrip(".")
        raise rule_violation(AFFINITY.code, message, AFFINITY.fix, field=field)
