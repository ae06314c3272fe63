"""What Kueue counts for a job: its pod sets, and what each pod requests, in Kueue's units.

Kueue (v0.19.2, pkg/workload/workload.go `totalRequestsFromPodSets`) runs each pod set's template through
Kubernetes' `PodRequests` (k8s.io/component-helpers/resource): the containers' requests added up, or the
largest init container's when that is more (a restartable "sidecar" init container adds to both), plus the
pod's overhead. A request left out where a limit is set counts as the limit (the API server defaults it so,
and Kueue's `UseLimitsAsMissingRequestsInPod` does the same for the pod set). Amounts are whole numbers of
the unit Kueue keeps (`resources.ResourceValue`): millicores for cpu, bytes or devices for everything else,
rounded up.

Which pod sets a job has (its operator's replica types in Kueue's order, a TrainJob's runtime's replicated
jobs, a batch Job's template) is its kind's fact: `Run.pod_sets` of its descriptor (kubetrain.kinds).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubetrain.model.quantity import parse_quantity
from kubetrain.model.vocabulary import ACCELERATOR_RESOURCES, NODEPOOL_LABEL

CPU = "cpu"
PODS = "pods"  # a ClusterQueue that covers "pods" counts each pod as one
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED_TOPOLOGY = "kueue.x-k8s.io/podset-unconstrained-topology"


def amount(resource: str, quantity: str | float) -> int:
    """A quantity in Kueue's unit for `resource` (ValueError when it is not a quantity)."""
    value = parse_quantity(quantity)
    return math.ceil(value * 1000) if resource == CPU else math.ceil(value)


BYTE_RESOURCES = ("memory", "ephemeral-storage", "storage")
GIB, MIB = 2**30, 2**20


def show(resource: str, value: float) -> str:
    """An amount in Kueue's unit as people write it: 1500m or 184 (cpu), 1800Gi (bytes), 8 (devices)."""
    if value == math.inf:
        return "unlimited"
    if resource == CPU:
        return str(value // 1000) if value % 1000 == 0 else f"{value}m"
    if resource in BYTE_RESOURCES or resource.startswith("hugepages-"):
        if value % GIB == 0:
            return f"{value // GIB}Gi"
        return f"{value // MIB}Mi" if value % MIB == 0 else f"{value / GIB:.1f}Gi"
    return str(value)


def _container(container: Mapping[str, Any]) -> dict[str, int]:
    resources = container.get("resources") or {}
    requests = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {name: amount(name, value) for name, value in requests.items()}


def _add(into: dict[str, int], other: Mapping[str, int]) -> None:
    for name, value in other.items():
        into[name] = into.get(name, 0) + value


def _at_least(into: dict[str, int], other: Mapping[str, int]) -> None:
    for name, value in other.items():
        into[name] = max(into.get(name, 0), value)


def pod_requests(spec: Mapping[str, Any]) -> dict[str, int]:
    """What one pod of `spec` (a PodSpec) requests, as Kubernetes' PodRequests counts it."""
    total: dict[str, int] = {}
    for container in spec.get("containers") or []:
        _add(total, _container(container))
    sidecars: dict[str, int] = {}  # restartable init containers started so far keep running
    largest_init: dict[str, int] = {}
    for container in spec.get("initContainers") or []:
        requests = _container(container)
        if container.get("restartPolicy") == "Always":
            _add(total, requests)
            _add(sidecars, requests)
            requests = dict(sidecars)
        else:
            requests = {**requests}
            _add(requests, sidecars)
        _at_least(largest_init, requests)
    _at_least(total, largest_init)
    _add(total, {name: amount(name, value) for name, value in (spec.get("overhead") or {}).items()})
    return total


@dataclass(frozen=True)
class Placement:
    """A pod set's topology request (Kueue's podset-*-topology annotations)."""

    mode: str  # required | preferred | unconstrained
    level: str | None


@dataclass(frozen=True)
class PodSet:
    """`count` pods of one template: what Kueue admits together."""

    name: str
    count: int
    requests: Mapping[str, int]  # one pod's
    node_selector: Mapping[str, str]
    affinity_terms: tuple[Mapping[str, Any], ...] | None  # required node affinity terms (ORed), None: none
    tolerations: tuple[Mapping[str, Any], ...]
    placement: Placement | None

    @property
    def pool(self) -> str | None:
        return self.node_selector.get(NODEPOOL_LABEL)

    def total(self) -> dict[str, int]:
        return {name: value * self.count for name, value in self.requests.items()}


@dataclass(frozen=True)
class Workload:
    """A job object as Kueue sees it: its queue and its pod sets."""

    kind: str
    name: str  # the object's name
    namespace: str
    job: str  # the job's own name (kubetrain.dev/job), which stays when runs are renamed
    queue: str | None  # the LocalQueue it names
    pod_sets: tuple[PodSet, ...]
    min_pods: int | None = None  # an elastic job trains with this many pods at least

    @property
    def pods(self) -> int:
        return sum(p.count for p in self.pod_sets)

    @property
    def accelerators(self) -> int:
        return sum(p.count * p.requests.get(a, 0) for p in self.pod_sets for a in ACCELERATOR_RESOURCES)

    @property
    def pool(self) -> str | None:
        """The pool its pods are pinned to (the first pod set that names one)."""
        return next((p.pool for p in self.pod_sets if p.pool), None)


def _placement(template: Mapping[str, Any]) -> Placement | None:
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    for mode, key in (("required", REQUIRED_TOPOLOGY), ("preferred", PREFERRED_TOPOLOGY)):
        if annotations.get(key):
            return Placement(mode, annotations[key])
    if UNCONSTRAINED_TOPOLOGY in annotations:  # even "false" asks for topology-aware scheduling
        return Placement("unconstrained", None)
    return None


def pod_set(name: str, count: int, template: Mapping[str, Any]) -> PodSet:
    spec = template.get("spec") or {}
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution")
    terms = tuple(affinity.get("nodeSelectorTerms") or []) if affinity else None
    return PodSet(name, count, pod_requests(spec), dict(spec.get("nodeSelector") or {}), terms,
                  tuple(spec.get("tolerations") or []), _placement(template))


def count_of(value: Any, default: int = 1) -> int:
    """A replica or pod count of a manifest (`default` when it leaves it out)."""
    return int(value) if value is not None else default


def replica_pod_sets(replicas: Mapping[str, Any], order: Iterable[str]) -> list[PodSet]:
    """A Kubeflow job's replica specs as pod sets, in the order Kueue takes them."""
    return [pod_set(role.lower(), count_of(replicas[role].get("replicas")), replicas[role].get("template") or {})
            for role in order if role in replicas]
