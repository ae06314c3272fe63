"""One cluster's admission-relevant objects, read from its manifests (what synth writes to dist/<cluster>/).

Kueue's objects (kueue.x-k8s.io/v1beta2: ClusterQueue, Cohort, LocalQueue, ResourceFlavor, Topology), the
Namespaces (their labels, which ClusterQueue namespace selectors read) and Karpenter NodePools with what
kubetrain records on them for offline checks: the annotations below. A pool's facts that Karpenter itself
does not hold (how many nodes it may reach, what one node gives pods, how many instances its capacity
reservation holds, how many of its nodes share a topology domain) ride on the NodePool as annotations, so
dist/ describes itself and `kubetrain plan` needs nothing else.

The `...Snapshot` types are those objects as admission reads them (as Kueue's scheduler reads its cache's
snapshot), apart from the constructs that emit them (kubetrain.platform.kueue_queues).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubetrain.kinds.kind_registry import all_kinds, group_kind, kind_of
from kubetrain.model.pod_sets import Workload, amount
from kubetrain.model.quantity import parse_quantity
from kubetrain.model.vocabulary import JOB_LABEL, QUEUE_LABEL

MAX_NODES_ANNOTATION = "kubetrain.dev/max-nodes"
RESERVED_NODES_ANNOTATION = "kubetrain.dev/reserved-nodes"
ALLOCATABLE_ANNOTATION = "kubetrain.dev/node-allocatable"  # JSON: instance type -> resource -> quantity
DOMAIN_NODES_ANNOTATION = "kubetrain.dev/topology-domain-nodes"  # JSON: node label level -> nodes per domain
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # the API server puts it on every namespace
KUEUE_GROUP = "kueue.x-k8s.io"


@dataclass(frozen=True)
class QuotaSnapshot:
    """One flavor's quota of one resource, in Kueue's units."""

    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


FlavorResource = tuple[str, str]  # (flavor, resource)


@dataclass(frozen=True)
class ResourceGroupSnapshot:
    covered: tuple[str, ...]
    flavors: tuple[str, ...]  # in the order Kueue tries them


@dataclass(frozen=True)
class QuotaHolder:
    """A ClusterQueue or a Cohort: a node of Kueue's cohort tree."""

    name: str
    parent: str | None  # the cohort (a ClusterQueue's cohortName, a Cohort's parentName)
    groups: tuple[ResourceGroupSnapshot, ...] = ()
    quotas: Mapping[FlavorResource, QuotaSnapshot] = field(default_factory=dict)
    fair_weight: float | None = None  # spec.fairSharing.weight (None: not set; Kueue's default is 1)

    def group_of(self, resource: str) -> ResourceGroupSnapshot | None:
        return next((g for g in self.groups if resource in g.covered), None)

    def quota(self, fr: FlavorResource) -> QuotaSnapshot:
        return self.quotas.get(fr, QuotaSnapshot(0))


@dataclass(frozen=True)
class ClusterQueueSnapshot(QuotaHolder):
    namespace_selector: Mapping[str, Any] | None = None  # None selects nothing; {} selects every namespace
    when_can_borrow: str = "MayStopSearch"
    when_can_preempt: str = "TryNextFlavor"
    preference: str | None = None
    # What the schedule simulation (kubetrain.schedule) reads; Kueue's defaults.
    queueing_strategy: str = "BestEffortFIFO"
    within_cluster_queue: str = "Never"
    reclaim_within_cohort: str = "Never"
    borrow_within_cohort: str | None = None  # borrowWithinCohort.policy
    borrow_max_priority: int | None = None  # borrowWithinCohort.maxPriorityThreshold

    @property
    def flavors(self) -> list[str]:
        return [f for g in self.groups for f in g.flavors]


@dataclass(frozen=True)
class Flavor:
    name: str
    node_labels: Mapping[str, str]
    node_taints: tuple[Mapping[str, Any], ...]
    tolerations: tuple[Mapping[str, Any], ...]
    topology: str | None


@dataclass(frozen=True)
class Pool:
    """A Karpenter NodePool and how many nodes it can ever have."""

    name: str
    max_nodes: int | None  # None: unknown (no kubetrain annotation, no node limit)
    static_nodes: int | None  # `replicas`: Karpenter keeps exactly this many, whatever is pending
    reserved_nodes: int | None  # instances its capacity reservations hold
    allocatable: Mapping[str, Mapping[str, int]]  # instance type -> what one node gives pods
    domain_nodes: Mapping[str, int]  # node label level -> most nodes of the pool in one domain of it

    @property
    def capacity_nodes(self) -> int | None:
        """The most nodes the pool can ever have at once."""
        if self.static_nodes is not None:
            return self.static_nodes
        known = [n for n in (self.max_nodes, self.reserved_nodes) if n is not None]
        return min(known) if known else None

    @property
    def limited_by(self) -> str:
        """The pool setting behind `capacity_nodes`, for messages."""
        if self.static_nodes is not None:
            return "static_nodes: a static pool keeps exactly that many nodes"
        if self.reserved_nodes is not None and (self.max_nodes is None or self.reserved_nodes <= self.max_nodes):
            return "reserved_nodes: what its capacity reservation holds"
        return "max_nodes"


@dataclass(frozen=True)
class LocalQueueSnapshot:
    namespace: str
    name: str
    cluster_queue: str


# The kinds `ClusterObjects.from_manifests` reads besides the workloads: Kueue's own objects, the namespaces
# and the Karpenter pools.
READS = ("Namespace", "ResourceFlavor", "Topology", "ClusterQueue", "Cohort", "LocalQueue", "NodePool")


def admission_kinds() -> set[str]:
    """Every kind admission reads: `READS`, the kinds Kueue admits and the objects they name."""
    runs = [kind for kind in all_kinds() if kind.run is not None and kind.run.pod_sets is not None]
    return {*READS, *(kind.kind for kind in runs), *(read for kind in runs for read in kind.run.reads)}


@dataclass
class ClusterObjects:
    """What admission reads in one cluster."""

    name: str
    namespaces: dict[str, Mapping[str, str]] = field(default_factory=dict)  # name -> labels
    flavors: dict[str, Flavor] = field(default_factory=dict)
    topologies: dict[str, tuple[str, ...]] = field(default_factory=dict)  # name -> levels
    cluster_queues: dict[str, ClusterQueueSnapshot] = field(default_factory=dict)
    cohorts: dict[str, QuotaHolder] = field(default_factory=dict)
    local_queues: dict[tuple[str, str], LocalQueueSnapshot] = field(default_factory=dict)
    pools: dict[str, Pool] = field(default_factory=dict)
    workloads: list[Workload] = field(default_factory=list)

    @classmethod
    def from_manifests(cls, name: str, manifests: Iterable[Mapping[str, Any]]) -> ClusterObjects:
        """Read a cluster's objects; ValueError when a quantity or annotation kubetrain reads is malformed."""
        manifests = list(manifests)
        found = cls(name, workloads=workloads(manifests))
        for obj in manifests:
            group, kind = group_kind(obj)
            meta = obj.get("metadata") or {}
            spec = obj.get("spec") or {}
            obj_name = str(meta.get("name", ""))
            if (group, kind) == ("", "Namespace"):
                found.namespaces[obj_name] = {**(meta.get("labels") or {}), NAMESPACE_NAME_LABEL: obj_name}
            elif (group, kind) == (KUEUE_GROUP, "ResourceFlavor"):
                found.flavors[obj_name] = Flavor(obj_name, dict(spec.get("nodeLabels") or {}),
                                                 tuple(spec.get("nodeTaints") or []),
                                                 tuple(spec.get("tolerations") or []), spec.get("topologyName"))
            elif (group, kind) == (KUEUE_GROUP, "Topology"):
                found.topologies[obj_name] = tuple(level.get("nodeLabel", "") for level in spec.get("levels") or [])
            elif (group, kind) == (KUEUE_GROUP, "ClusterQueue"):
                fungibility = spec.get("flavorFungibility") or {}
                preemption = spec.get("preemption") or {}
                borrow = preemption.get("borrowWithinCohort") or {}
                groups, quotas = _resource_groups(spec)
                found.cluster_queues[obj_name] = ClusterQueueSnapshot(
                    obj_name, spec.get("cohortName") or None, groups, quotas, _fair_weight(spec),
                    namespace_selector=spec.get("namespaceSelector"),
                    when_can_borrow=fungibility.get("whenCanBorrow", "MayStopSearch"),
                    when_can_preempt=fungibility.get("whenCanPreempt", "TryNextFlavor"),
                    preference=fungibility.get("preference"),
                    queueing_strategy=spec.get("queueingStrategy", "BestEffortFIFO"),
                    within_cluster_queue=preemption.get("withinClusterQueue", "Never"),
                    reclaim_within_cohort=preemption.get("reclaimWithinCohort", "Never"),
                    borrow_within_cohort=borrow.get("policy"), borrow_max_priority=borrow.get("maxPriorityThreshold"))
            elif (group, kind) == (KUEUE_GROUP, "Cohort"):
                groups, quotas = _resource_groups(spec)
                found.cohorts[obj_name] = QuotaHolder(obj_name, spec.get("parentName") or None, groups, quotas,
                                                      _fair_weight(spec))
            elif (group, kind) == (KUEUE_GROUP, "LocalQueue"):
                queue = LocalQueueSnapshot(str(meta.get("namespace") or ""), obj_name, str(spec.get("clusterQueue", "")))
                found.local_queues[(queue.namespace, queue.name)] = queue
            elif (group, kind) == ("karpenter.sh", "NodePool"):
                found.pools[obj_name] = _pool(obj_name, meta.get("annotations") or {}, spec)
        return found


def workloads(manifests: Iterable[Mapping[str, Any]]) -> list[Workload]:
    """Every object among `manifests` whose kind Kueue admits (its descriptor's pod sets), with the objects of
    its namespace and the cluster-scoped ones as its siblings (a TrainJob's runtime)."""
    manifests = list(manifests)
    index = {(m.get("kind"), (m.get("metadata") or {}).get("namespace"), (m.get("metadata") or {}).get("name")): m
             for m in manifests}
    found = []
    for obj in manifests:
        kind = kind_of(obj)
        if kind is None or kind.run is None or kind.run.pod_sets is None:
            continue
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace")

        def sibling(sibling_kind: str, name: str, namespace: str | None = namespace) -> dict[str, Any] | None:
            return index.get((sibling_kind, namespace, name)) or index.get((sibling_kind, None, name))

        pod_sets, min_pods = kind.run.pod_sets(obj, sibling)
        labels = meta.get("labels") or {}
        found.append(Workload(str(obj.get("kind")), str(meta.get("name")), str(namespace or ""),
                              str(labels.get(JOB_LABEL) or meta.get("name")), labels.get(QUEUE_LABEL),
                              tuple(pod_sets), min_pods))
    return found


def _resource_groups(spec: Mapping[str, Any]) -> tuple[tuple[ResourceGroupSnapshot, ...], dict[FlavorResource, QuotaSnapshot]]:
    groups, quotas = [], {}
    for group in spec.get("resourceGroups") or []:
        covered = tuple(group.get("coveredResources") or [])
        groups.append(ResourceGroupSnapshot(covered, tuple(f.get("name", "") for f in group.get("flavors") or [])))
        for flavor in group.get("flavors") or []:
            for resource in flavor.get("resources") or []:
                name = resource.get("name", "")
                limits = [amount(name, resource[k]) if resource.get(k) is not None else None
                          for k in ("borrowingLimit", "lendingLimit")]
                quotas[(flavor.get("name", ""), name)] = QuotaSnapshot(amount(name, resource.get("nominalQuota", 0)), *limits)
    return tuple(groups), quotas


def _fair_weight(spec: Mapping[str, Any]) -> float | None:
    weight = (spec.get("fairSharing") or {}).get("weight")
    return None if weight is None else float(parse_quantity(weight))  # a quantity: "0.5", "500m", 2


def _json_annotation(annotations: Mapping[str, str], key: str) -> Any:
    text = annotations.get(key)
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"annotation {key} is not JSON ({error.msg} at column {error.colno})") from None
    if not isinstance(value, dict):
        raise ValueError(f"annotation {key} is a JSON {type(value).__name__}, not an object")
    return value


def _int_annotation(annotations: Mapping[str, str], key: str) -> int | None:
    text = annotations.get(key)
    if text is None:
        return None
    if not str(text).isdigit():
        raise ValueError(f"annotation {key} is {text!r}, not a whole number")
    return int(text)


def _pool(name: str, annotations: Mapping[str, str], spec: Mapping[str, Any]) -> Pool:
    """A NodePool's capacity: kubetrain's annotations, else Karpenter's own `replicas` and node limit."""
    node_limit = (spec.get("limits") or {}).get("nodes")
    max_nodes = _int_annotation(annotations, MAX_NODES_ANNOTATION)
    if max_nodes is None and node_limit is not None:
        max_nodes = amount("nodes", node_limit)
    allocatable = {instance: {resource: amount(resource, q) for resource, q in resources.items()}
                   for instance, resources in _json_annotation(annotations, ALLOCATABLE_ANNOTATION).items()}
    domains = {level: int(n) for level, n in _json_annotation(annotations, DOMAIN_NODES_ANNOTATION).items()}
    static = spec.get("replicas")
    return Pool(name, max_nodes, int(static) if static is not None else None,
                _int_annotation(annotations, RESERVED_NODES_ANNOTATION), allocatable, domains)
