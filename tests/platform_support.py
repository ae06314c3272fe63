"""Helpers of the platform tests: a cluster, a p5 pool and a CPU pool, strict validation of what synth emits."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from kubetrain import App, Cluster
from kubetrain.model.manifests import Manifest
from kubetrain.pipeline import fleet_findings, render_objects
from kubetrain.platform.node_pools import CpuNodePool, EfaNodePool
from kubetrain.validation.validate import Schemas, validate_objects

from kubetrain_runtime.problems import Problem

P5 = {"instance_types": ["p5.48xlarge"], "zones": ["us-west-2a"], "subnet_ids": ["subnet-0abc1234"],
      "security_group_ids": ["sg-0efa1234"], "role": "KarpenterNodeRole-prod", "max_nodes": 16}
CPU = {"instance_types": ["m5.2xlarge", "m5.4xlarge"], "zones": ["us-west-2a", "us-west-2b"],
       "subnet_ids": ["subnet-0abc1234", "subnet-0def5678"], "security_group_ids": ["sg-0c0de123"],
       "role": "KarpenterNodeRole-prod", "max_nodes": 10}


def cluster(namespaces: tuple[str, ...] = ("ml",)) -> Cluster:
    return Cluster(App(), "prod", kubernetes_version="1.33", namespaces=list(namespaces))


def pools(c: Cluster) -> tuple[EfaNodePool, CpuNodePool]:
    return EfaNodePool(c, "p5", **P5), CpuNodePool(c, "cpu", **CPU)


@cache
def _schemas(crds: Path) -> Schemas:
    return Schemas([crds])  # compiled validators are kept across tests


def emitted(c: Cluster, crds: Path) -> dict[str, dict[str, Any]]:
    """Every object of the cluster by 'Kind/name', after checking each strictly against the upstream CRDs
    and the Kubernetes 1.33 schemas."""
    objects = render_objects(c.node.root)
    manifests = [Manifest(str(path), obj) for path, obj in objects.items()]
    findings = validate_objects(manifests, _schemas(crds), "1.33")
    assert [f.format() for f in findings] == []
    return {f"{obj['kind']}/{obj['metadata']['name']}": obj for obj in objects.values()}


def rejected(c: Cluster, make: Callable[[], Any]) -> list[Problem]:
    """The problems `make()` records: a platform construct whose props cannot be read is rejected (it emits
    nothing, and what is built on it is not checked) instead of stopping the fleet."""
    before = len(fleet_findings(c))
    assert make().rejected
    return [f.problem for f in fleet_findings(c)[before:]]


def codes(c: Cluster) -> list[tuple[str, str, str]]:
    """(code, path, fix) of every finding recorded in the cluster's diagnostics."""
    return [(f.problem.code, f.problem.path, f.problem.fix) for f in fleet_findings(c)]
