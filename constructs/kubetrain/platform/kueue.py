"""Kueue (kueue.x-k8s.io/v1beta2): gang admission with quotas and topology-aware scheduling.

    topology = Topology(cluster, "eks-network")                 # EKS network-node-layer labels, then the host
    p5 = ResourceFlavor(cluster, "p5", pool=gpu_pool, topology=topology)
    cq = ClusterQueue(cluster, "training", flavors=[p5, cpu])   # quotas default to each pool's max_nodes
    queue = LocalQueue(cluster, "training", cluster_queue=cq, namespace="ml")
    queue.job_labels()                                          # {"kueue.x-k8s.io/queue-name": "training"}
    queue.pod_annotations(TopologyPlacement(level="topology.k8s.aws/network-node-layer-3"))

Facts: Kueue v0.19 (https://kueue.sigs.k8s.io/docs/). A queued job carries the queue label and never `suspend:
false` (Kueue sets suspend on creation; an explicit false under Argo CD's self-heal would resume a job
Kueue holds): `queued_job_problems(manifest)` is rule KT422.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Literal

from pydantic import Field, InstanceOf, field_validator, model_validator

from kubetrain.cluster import Cluster
from kubetrain.names import Dns1123Label, Dns1123Subdomain
from kubetrain.platform.construct import PlatformConstruct
from kubetrain.platform.node_pools import EFA_RESOURCE, HUGE_PAGES_RESOURCE, NodePool
from kubetrain.platform.queues import PLACEMENT_LEVEL, TopologyPlacement, claim_queue_system
from kubetrain.quantity import parse_quantity
from kubetrain.rules.registry import register
from kubetrain.rules.sources import KARPENTER_NODECLASS, KUEUE_JOBS, KUEUE_KEP, cite
from kubetrain.strict import StrictProps
from training.problems import INVALID_VALUE, Problem, rule_violation

API_VERSION = "kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
# EKS labels nodes with their place in EC2's network hierarchy, broadest first (EKS user guide, "Place
# distributed AI/ML workloads with network topology labels").
HOSTNAME_LABEL = "kubernetes.io/hostname"
EKS_NETWORK_LEVELS = ("topology.k8s.aws/network-node-layer-1", "topology.k8s.aws/network-node-layer-2",
                      "topology.k8s.aws/network-node-layer-3", HOSTNAME_LABEL)
_RESOURCE_ORDER = ("cpu", "memory", "nvidia.com/gpu", "aws.amazon.com/neuron", EFA_RESOURCE, HUGE_PAGES_RESOURCE)

SUSPEND_SET = register(
    "KT422", "error", "queued job sets suspend",
    rationale="Kueue suspends a labelled job when it is created and resumes it on admission. A definition that "
              "says suspend: false starts pods before admission (and Argo CD's self-heal keeps resetting it); "
              "suspend: true fights Kueue's resume.",
    fix="leave suspend out of queued jobs (or ignoreDifferences on it with RespectIgnoreDifferences=true)",
    source=KUEUE_JOBS)


TOPOLOGY_ON_DYNAMIC_POOL = register(
    "KT423", "warning", "topology-aware flavor on a pool that scales from zero",
    rationale="Kueue's topology-aware scheduling assigns a job's pods to topology domains of nodes that exist "
              "and admits it only then; Karpenter creates nodes only for pods that are pending, which Kueue holds "
              "back until admission. On a pool with no nodes up, a topology placement can wait forever (the TAS "
              "design relies on existing capacity or ProvisioningRequests, which Karpenter does not serve).",
    fix="keep the pool's nodes up (EfaNodePool(static_nodes=N), e.g. over a capacity reservation), or drop the "
        "Topology from this flavor",
    source=cite(KUEUE_KEP, KARPENTER_NODECLASS))


class TopologyProps(StrictProps):
    name: Dns1123Subdomain
    levels: list[str] = Field(list(EKS_NETWORK_LEVELS), min_length=1,
                              description="Node labels from the broadest level to the narrowest; default EKS's "
                                          "network-node-layer-1..3 and kubernetes.io/hostname.")

    @field_validator("levels")
    @classmethod
    def _levels_as_kueue_requires(cls, levels: list[str]) -> list[str]:
        # The Topology CRD's rules on spec.levels (Kueue v0.19): unique, and the hostname only last.
        for i, level in enumerate(levels):
            if level in levels[:i]:
                raise rule_violation(INVALID_VALUE, f"{level!r} is already level {levels.index(level)}: Kueue "
                                     "requires unique levels", "list each node label once", field=str(i))
            if level == HOSTNAME_LABEL and i != len(levels) - 1:
                raise rule_violation(INVALID_VALUE, f"{HOSTNAME_LABEL} can only be the lowest (last) level",
                                     f"move {HOSTNAME_LABEL} to the end, or drop it", field=str(i))
        return levels


class Topology(PlatformConstruct):
    """A Kueue Topology (cluster-scoped)."""

    Props = TopologyProps
    kind = "topology"

    def __init__(self, scope: Cluster, id: str, props: TopologyProps | Mapping[str, Any] | None = None,
                 **kwargs: Any):
        super().__init__(scope, id, props, kwargs)
        self.name: str = self.props.name
        self.levels: tuple[str, ...] = tuple(self.props.levels)
        self._emit(claim_queue_system(scope, "kueue"), [{
            "apiVersion": API_VERSION, "kind": "Topology", "metadata": {"name": self.name},
            "spec": {"levels": [{"nodeLabel": level} for level in self.levels]}}])


class ResourceFlavorProps(StrictProps):
    name: Dns1123Subdomain
    pool: InstanceOf[NodePool] = Field(..., description="The node pool whose nodes this flavor stands for.")
    topology: InstanceOf[Topology] | None = Field(None, description="Topology for topology-aware scheduling.")


class ResourceFlavor(PlatformConstruct):
    """A flavor per node pool: its node labels and taints, and the Topology its nodes are placed in."""

    Props = ResourceFlavorProps
    kind = "flavor"

    def __init__(self, scope: Cluster, id: str, props: ResourceFlavorProps | Mapping[str, Any] | None = None,
                 **kwargs: Any):
        super().__init__(scope, id, props, kwargs)
        self.name: str = self.props.name
        self.pool: NodePool = self.props.pool
        self.topology: Topology | None = self.props.topology
        spec: dict[str, Any] = {"nodeLabels": self.pool.node_selector()}
        if self.pool.taints:
            spec["nodeTaints"] = self.pool.taints
        problems = claim_queue_system(scope, "kueue")
        if self.topology:
            spec["topologyName"] = self.topology.name
            if self.pool.scales_from_zero:
                problems.append(Problem(TOPOLOGY_ON_DYNAMIC_POOL.code, "topology", f"pool {self.pool.name} scales "
                                        "from zero; Kueue places topology-aware jobs only on nodes that exist",
                                        TOPOLOGY_ON_DYNAMIC_POOL.fix))
        self._emit(problems, [{
            "apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": self.name}, "spec": spec}])

    def default_quota(self) -> dict[str, Decimal]:
        """The pool at its limit: what max_nodes nodes give pods."""
        return {name: amount * self.pool.max_nodes for name, amount in self.pool.node_capacity().items()}


class ClusterQueueProps(StrictProps):
    name: Dns1123Subdomain
    flavors: list[InstanceOf[ResourceFlavor]] = Field(..., min_length=1, description="In order of preference.")
    namespaces: list[Dns1123Label] | None = Field(None, description="Namespaces whose LocalQueues may use it; "
                                                                    "default: every namespace of the cluster.")
    quotas: dict[str, dict[str, str]] = Field(default_factory=dict, description="Per flavor name, nominal quotas "
                                              "that replace the default (the pool at max_nodes), e.g. "
                                              "{'p5': {'nvidia.com/gpu': '64'}}.")
    cohort: Dns1123Subdomain | None = Field(None, description="Cohort to borrow unused quota from.")
    queueing_strategy: Literal["StrictFIFO", "BestEffortFIFO"] = Field(
        "BestEffortFIFO", description="BestEffortFIFO lets a smaller job start while a large gang waits.")
    preemption: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] = Field(
        "LowerPriority", description="withinClusterQueue preemption.")

    @model_validator(mode="after")
    def _known_flavors(self) -> ClusterQueueProps:
        names = {f.name for f in self.flavors}
        unknown = sorted(set(self.quotas) - names)
        if unknown:
            raise rule_violation("KT003", f"quotas for flavors the queue does not have: {', '.join(unknown)}",
                                 f"use flavor names of this queue: {', '.join(sorted(names))}", field="quotas")
        for flavor, quotas in self.quotas.items():
            for resource, quantity in quotas.items():
                try:
                    parse_quantity(quantity)
                except ValueError as error:
                    raise rule_violation("KT003", str(error), "use a quantity such as 64 or 2Ti",
                                         field=f"quotas.{flavor}.{resource}") from None
        return self


def _quantity(resource: str, amount: Decimal) -> str:
    if resource == "cpu":
        return f"{int(amount * 1000)}m" if amount % 1 else str(int(amount))
    return str(int(amount))


class ClusterQueue(PlatformConstruct):
    """A cluster-wide queue with quotas per flavor. Every resource any flavor's pods request is covered
    (Kueue does not admit a pod that requests an uncovered resource), in one resource group."""

    Props = ClusterQueueProps
    kind = "clusterqueue"

    def __init__(self, scope: Cluster, id: str, props: ClusterQueueProps | Mapping[str, Any] | None = None,
                 **kwargs: Any):
        super().__init__(scope, id, props, kwargs)
        p = self.props
        self.name: str = p.name
        self.flavors: list[ResourceFlavor] = list(p.flavors)
        quotas = {f.name: {**{k: _quantity(k, v) for k, v in f.default_quota().items()}, **p.quotas.get(f.name, {})}
                  for f in self.flavors}
        covered = sorted({r for q in quotas.values() for r in q},
                         key=lambda r: (_RESOURCE_ORDER.index(r) if r in _RESOURCE_ORDER else len(_RESOURCE_ORDER), r))
        namespaces = p.namespaces or scope.props.namespaces
        spec = {
            "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In",
                                                        "values": list(namespaces)}]},
            "queueingStrategy": p.queueing_strategy,
            "preemption": {"withinClusterQueue": p.preemption},
            "resourceGroups": [{"coveredResources": covered, "flavors": [
                {"name": f.name, "resources": [{"name": r, "nominalQuota": quotas[f.name].get(r, "0")}
                                               for r in covered]} for f in self.flavors]}]}
        if p.cohort:
            spec["cohortName"] = p.cohort
        problems = claim_queue_system(scope, "kueue")
        problems += [q for n in namespaces for q in scope.check_namespace(n)[1]]
        self._emit(problems, [{"apiVersion": API_VERSION, "kind": "ClusterQueue", "metadata": {"name": self.name},
                               "spec": spec}])

    @property
    def topology_levels(self) -> tuple[str, ...] | None:
        """The levels jobs may be placed within: the flavors' Topology (None when they have none)."""
        topologies = {f.topology.name: f.topology for f in self.flavors if f.topology is not None}
        if len(topologies) != 1:
            return None
        return next(iter(topologies.values())).levels


class LocalQueueProps(StrictProps):
    name: Dns1123Subdomain
    namespace: Dns1123Label | None = Field(None, description="Default: the cluster's first namespace.")
    cluster_queue: InstanceOf[ClusterQueue]


class LocalQueue(PlatformConstruct):
    """A namespace's entry to a ClusterQueue: what jobs name to be queued."""

    Props = LocalQueueProps
    kind = "localqueue"
    scheduler_name: str | None = None  # Kueue admits; the default scheduler places

    def __init__(self, scope: Cluster, id: str, props: LocalQueueProps | Mapping[str, Any] | None = None,
                 **kwargs: Any):
        super().__init__(scope, id, props, kwargs)
        self.name: str = self.props.name
        self.cluster_queue: ClusterQueue = self.props.cluster_queue
        self.namespace, problems = scope.check_namespace(self.props.namespace)
        problems += claim_queue_system(scope, "kueue")
        self._emit(problems, [{"apiVersion": API_VERSION, "kind": "LocalQueue",
                               "metadata": {"name": self.name, "namespace": self.namespace},
                               "spec": {"clusterQueue": self.cluster_queue.name}}])

    def job_labels(self) -> dict[str, str]:
        return {QUEUE_LABEL: self.name}

    def pod_annotations(self, placement: TopologyPlacement | None = None) -> dict[str, str]:
        if placement is None:
            return {}
        return {REQUIRED_TOPOLOGY if placement.mode == "required" else PREFERRED_TOPOLOGY: placement.level}

    def placement_problems(self, placement: TopologyPlacement | None, path: str = "placement") -> list[Problem]:
        """KT421: a placement level the queue's flavors' Topology does not have."""
        if placement is None:
            return []
        levels = self.cluster_queue.topology_levels
        if levels is None:
            return [Problem(PLACEMENT_LEVEL.code, path, f"queue {self.name}'s flavors reference no single Topology",
                            PLACEMENT_LEVEL.fix)]
        if placement.level not in levels:
            return [Problem(PLACEMENT_LEVEL.code, f"{path}.level", f"{placement.level!r} is not a level of the "
                            f"queue's Topology ({', '.join(levels)})", PLACEMENT_LEVEL.fix)]
        return []


def queued_job_problems(manifest: Mapping[str, Any], path: str = "") -> list[Problem]:
    """KT422 on a rendered job object (spec.suspend, or spec.runPolicy.suspend of the Kubeflow kinds)."""
    spec = manifest.get("spec") or {}
    for where, holder in (("spec.suspend", spec), ("spec.runPolicy.suspend", spec.get("runPolicy") or {})):
        if "suspend" in holder:
            return [Problem(SUSPEND_SET.code, path or where, f"a queued job sets suspend: "
                            f"{str(holder['suspend']).lower()}", SUSPEND_SET.fix)]
    return []
