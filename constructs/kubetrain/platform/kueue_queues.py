"""Kueue (kueue.x-k8s.io/v1beta2): gang admission with quotas and topology-aware scheduling.

    topology = Topology(cluster, "eks-network")                 # EKS network-node-layer labels, then the host
    p5 = ResourceFlavor(cluster, "p5", pool=gpu_pool, topology=topology)
    org = Cohort(cluster, "org")                                # queues in it lend each other unused quota
    cq = ClusterQueue(cluster, "training", flavors=[p5, cpu], cohort=org,
                      quotas={"p5": {"nvidia.com/gpu": Quota(nominal="64", borrowing_limit="64")}})
                                                                # other quotas: each pool at its most nodes
    queue = LocalQueue(cluster, "training", cluster_queue=cq, namespace="ml")
    queue.job_labels()                                          # {"kueue.x-k8s.io/queue-name": "training"}
    queue.pod_annotations(TopologyPlacement(level="topology.k8s.aws/network-node-layer-3"))

    host = ResourceFlavor(cluster, "host")                      # no pool: any node's CPU and memory
    split = ClusterQueue(cluster, "split", resource_groups=[    # GPUs by pool, host resources from `host`
        ResourceGroup(resources=["nvidia.com/gpu", "vpc.amazonaws.com/efa", "hugepages-2Mi"], flavors=[p5]),
        ResourceGroup(resources=["cpu", "memory"], flavors=[host])],
        quotas={"host": {"cpu": "400", "memory": "4Ti"}}, when_can_borrow="TryNextFlavor")

Facts: Kueue v0.19 (https://kueue.sigs.k8s.io/docs/). A queued job carries the queue label and never `suspend:
false` (Kueue sets suspend on creation; an explicit false under Argo CD's self-heal would resume a job
Kueue holds): `queued_job_problems(manifest)` is rule KT422, checked on a job's object after its patches.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, InstanceOf, field_validator, model_validator

from kubetrain.cluster import Cluster
from kubetrain.kinds.kind_registry import run_kind
from kubetrain.kinds.kueue import API_VERSION, LIMITS_REFUSED, covered_twice
from kubetrain.model.names import Dns1123Label, Dns1123Subdomain
from kubetrain.model.pod_sets import PREFERRED_TOPOLOGY, REQUIRED_TOPOLOGY
from kubetrain.model.quantity import NodeResourceName, Quantity, format_quantity, parse_quantity
from kubetrain.model.strict import StrictProps
from kubetrain.model.vocabulary import EFA_RESOURCE, GPU_RESOURCE, HUGE_PAGES_RESOURCE, NEURON_RESOURCE, QUEUE_LABEL
from kubetrain.platform.node_pools import NodePool
from kubetrain.platform.platform_construct import PlatformConstruct
from kubetrain.platform.queues import PLACEMENT_LEVEL, TopologyPlacement, claim_queue_system
from kubetrain.platform.scheduling import Toleration
from kubetrain.rules.registry import register
from kubetrain.rules.sources import KARPENTER_NODECLASS, KUEUE_JOBS, KUEUE_KEP, cite
from kubetrain_runtime.problems import INVALID_VALUE, Problem, rule_violation

# EKS labels nodes with their place in EC2's network hierarchy, broadest first (EKS user guide, "Place
# distributed AI/ML workloads with network topology labels").
HOSTNAME_LABEL = "kubernetes.io/hostname"
EKS_NETWORK_LEVELS = ("topology.k8s.aws/network-node-layer-1", "topology.k8s.aws/network-node-layer-2",
                      "topology.k8s.aws/network-node-layer-3", HOSTNAME_LABEL)
_RESOURCE_ORDER = ("cpu", "memory", GPU_RESOURCE, NEURON_RESOURCE, EFA_RESOURCE, HUGE_PAGES_RESOURCE)

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
    pool: InstanceOf[NodePool] | None = Field(
        None, description="The node pool whose nodes this flavor stands for: its node labels and taints are the "
                          "pool's, and its default quotas what the pool holds at its most. None: a flavor of no "
                          "particular nodes (no labels, no taints; Kueue's usual 'default-flavor'), e.g. for CPU "
                          "and memory in a resource group of their own; its quotas must then be given.")
    topology: InstanceOf[Topology] | None = Field(None, description="Topology for topology-aware scheduling.")
    tolerations: list[Toleration] = Field(
        default_factory=list, max_length=8,
        description="Kueue adds these to the pods it admits in this flavor, and takes the flavor's taints they "
                    "tolerate as tolerated when it picks a flavor. Default: none.")


class ResourceFlavor(PlatformConstruct):
    """A flavor per node pool: its node labels and taints, the tolerations Kueue adds to the pods it admits in
    it, and the Topology its nodes are placed in."""

    Props = ResourceFlavorProps
    kind = "flavor"

    def __init__(self, scope: Cluster, id: str, props: ResourceFlavorProps | Mapping[str, Any] | None = None,
                 **kwargs: Any):
        super().__init__(scope, id, props, kwargs)
        self.name: str = self.props.name
        self.pool: NodePool | None = self.props.pool
        self.topology: Topology | None = self.props.topology
        self.depends_on = (*([self.pool] if self.pool else []), *([self.topology] if self.topology else []))
        spec: dict[str, Any] = {"nodeLabels": self.pool.node_selector()} if self.pool else {}
        if self.pool and self.pool.taints:
            spec["nodeTaints"] = self.pool.taints
        if self.props.tolerations:
            spec["tolerations"] = [t.manifest() for t in self.props.tolerations]
        problems = claim_queue_system(scope, "kueue")
        if self.topology:
            spec["topologyName"] = self.topology.name
            if self.pool and self.pool.scales_from_zero:
                problems.append(Problem(TOPOLOGY_ON_DYNAMIC_POOL.code, "topology", f"pool {self.pool.name} scales "
                                        "from zero; Kueue places topology-aware jobs only on nodes that exist",
                                        TOPOLOGY_ON_DYNAMIC_POOL.fix))
        self._emit(problems, [{
            "apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": self.name}, "spec": spec}])

    def default_quota(self) -> dict[str, str]:
        """The pool at its most: what its capacity_nodes nodes give pods (nothing for a flavor of no pool)."""
        if self.pool is None:
            return {}
        nodes = self.pool.capacity_nodes
        return {name: format_quantity(name, amount * nodes) for name, amount in self.pool.node_capacity().items()}


class Quota(StrictProps):
    """One flavor's quota of one resource (Kueue's ResourceQuota). A bare quantity is the nominal quota."""

    nominal: Quantity = Field(..., description="What the queue (or cohort) holds of the resource, e.g. '64'.")
    borrowing_limit: Quantity | None = Field(
        None, description="At most this much more, borrowed from the cohort while its other members leave it "
                          "unused. Default: no limit. Needs a cohort (a parent, on a Cohort).")
    lending_limit: Quantity | None = Field(
        None, description="At most this much of the nominal quota lent to the cohort; the rest is the queue's "
                          "own. Default: all of it may be lent. Needs a cohort (a parent, on a Cohort).")

    def manifest(self, resource: str) -> dict[str, str]:
        out = {"name": resource, "nominalQuota": self.nominal}
        if self.borrowing_limit is not None:
            out["borrowingLimit"] = self.borrowing_limit
        if self.lending_limit is not None:
            out["lendingLimit"] = self.lending_limit
        return out


def _quotas(value: Any) -> Any:
    """{flavor: {resource: quantity or Quota}}: a bare quantity is the nominal quota."""
    if not isinstance(value, Mapping):
        return value
    return {flavor: {r: {"nominal": str(q)} if isinstance(q, (str, int)) else q for r, q in resources.items()}
            if isinstance(resources, Mapping) else resources for flavor, resources in value.items()}


Quotas = Annotated[dict[str, dict[NodeResourceName, Quota]], BeforeValidator(_quotas)]

OUTSIDE_COHORT = register(
    "KT450", "warning", "cohort defined outside the fleet",
    rationale="A cohort named by a string instead of a Cohort object of the fleet may have members and quota "
              "that kubetrain cannot see, so whether a job fits by borrowing through it is unknown offline: "
              "synth and `kubetrain plan` judge such jobs only against the queue's own quota and borrowing limits.",
    fix="define the cohort in the fleet (Cohort(cluster, ...)) and pass the object, if it is yours",
    source="https://kueue.sigs.k8s.io/docs/concepts/cohort/")


def _check_limits(quotas: Mapping[str, Mapping[str, Quota]], has_cohort: bool, what: str, lending_at_most_nominal: bool):
    """KT451: limits Kueue's webhook refuses."""
    for flavor, resources in quotas.items():
        for resource, quota in resources.items():
            where = f"quotas.{flavor}.{resource}"
            limits = [n for n in ("borrowing_limit", "lending_limit") if getattr(quota, n) is not None]
            if limits and not has_cohort:
                raise rule_violation(LIMITS_REFUSED.code, f"{limits[0]} needs {what}", LIMITS_REFUSED.fix,
                                     field=f"{where}.{limits[0]}")
            if lending_at_most_nominal and quota.lending_limit is not None and \
                    parse_quantity(quota.lending_limit) > parse_quantity(quota.nominal):
                raise rule_violation(LIMITS_REFUSED.code, f"lending_limit {quota.lending_limit} is above the nominal "
                                     f"quota {quota.nominal}", LIMITS_REFUSED.fix, field=f"{where}.lending_limit")


def _known_flavors(quotas: Mapping[str, Any], flavors: list[ResourceFlavor], owner: str) -> None:
    names = {f.name for f in flavors}
    unknown = sorted(set(quotas) - names)
    if unknown:
        raise rule_violation("KT003", f"quotas for flavors the {owner} does not have: {', '.join(unknown)}",
                             f"use flavor names of its flavors: {', '.join(sorted(names)) or 'none yet'}",
                             field="quotas")


def resource_groups(flavors: list[ResourceFlavor], quotas: Mapping[str, Mapping[str, Quota]]) -> list[dict[str, Any]]:
    """One resource group covering every resource any flavor has a quota of; a flavor without a quota of a
    covered resource has 0 (Kueue needs every flavor to list every covered resource, in order)."""
    covered = sorted({r for q in quotas.values() for r in q},
                     key=lambda r: (_RESOURCE_ORDER.index(r) if r in _RESOURCE_ORDER else len(_RESOURCE_ORDER), r))
    return [_group(covered, flavors, quotas)] if covered else []


def _group(covered: list[str], flavors: list[ResourceFlavor],
           quotas: Mapping[str, Mapping[str, Quota]]) -> dict[str, Any]:
    return {"coveredResources": covered, "flavors": [
        {"name": f.name, "resources": [quotas.get(f.name, {}).get(r, Quota(nominal="0")).manifest(r) for r in covered]}
        for f in flavors]}


def _cohort_reference(cohort: Cohort | str | None, field: str, cluster: Cluster) -> tuple[str | None, list[Problem]]:
    """The cohort's name, and KT450 when it is given by name: a cohort outside the fleet, or one of the fleet's
    Cohorts named by a string where its object belongs."""
    if cohort is None or not isinstance(cohort, str):
        return (cohort.name if cohort else None), []
    if any(e.manifest.get("kind") == "Cohort" and e.manifest["metadata"]["name"] == cohort
           for e in cluster.state.objects):
        return cohort, [Problem(OUTSIDE_COHORT.code, field, f"cohort {cohort!r} is a Cohort of this fleet given by "
                                "its name: a name means a cohort defined outside the fleet, whose quota is unknown "
                                "offline", f"pass the Cohort object itself ({field}=<the Cohort {cohort!r}>), so "
                                "its quota and members are checked")]
    return cohort, [Problem(OUTSIDE_COHORT.code, field, f"cohort {cohort!r} is not a Cohort of this fleet: what it "
                            "lends is unknown offline", OUTSIDE_COHORT.fix)]


class CohortProps(StrictProps):
    name: Dns1123Subdomain
    parent: InstanceOf[PlatformConstruct] | Dns1123Subdomain | None = Field(
        None, description="The Cohort above it (a Cohort object; a name is a cohort defined outside the fleet). "
                          "Default: it is a root.")
    flavors: list[InstanceOf[ResourceFlavor]] = Field(default_factory=list,
                                                      description="The flavors its own quotas are of.")
    quotas: Quotas = Field(default_factory=dict, description="Per flavor name, the cohort's own quotas, lent to its "
                                                             "members: {'p5': {'nvidia.com/gpu': '16'}}.")
    fair_sharing_weight: Quantity | None = Field(None, description="Its share against its siblings under fair "
                                                                   "sharing (Kueue's default 1). Does not change "
                                                                   "what can ever be admitted.")

    @model_validator(mode="after")
    def _valid(self) -> CohortProps:
        if self.parent is not None and not isinstance(self.parent, (str, Cohort)):
            raise rule_violation("KT003", f"parent is a {type(self.parent).__name__}, not a Cohort",
                                 "pass a Cohort object, or the name of a cohort defined outside the fleet",
                                 field="parent")
        _known_flavors(self.quotas, self.flavors, "cohort")
        _check_limits(self.quotas, self.parent is not None, "a parent cohort", lending_at_most_nominal=False)
        return self


FUNGIBILITY_REFUSED = register(
    "KT453", "error", "flavor fungibility Kueue refuses",
    rationale="Kueue's ClusterQueue CRD accepts flavorFungibility.preference (whether borrowing or preemption is "
              "preferred when every flavor needs one of them) only when both whenCanBorrow and whenCanPreempt are "
              "TryNextFlavor: otherwise the search stops before there is anything to prefer. The API server "
              "refuses the ClusterQueue.",
    fix="set when_can_borrow='TryNextFlavor' and when_can_preempt='TryNextFlavor' with a preference, or drop "
        "the preference",
    source="https://github.com/kubernetes-sigs/kueue/blob/v0.19.2/apis/kueue/v1beta2/clusterqueue_types.go "
           "(FlavorFungibility)")


class ResourceGroup(StrictProps):
    """Resources a ClusterQueue covers together, with flavors of their own (Kueue's resource group): Kueue
    gives each pod set one flavor per group, trying the group's flavors in order. GPUs in one group and CPU
    and memory in another let a job's accelerators and its host resources come from different flavors."""

    resources: list[NodeResourceName] = Field(..., min_length=1, max_length=64,
                                          description="The resources it covers, e.g. ['cpu', 'memory'].")
    flavors: list[InstanceOf[ResourceFlavor]] = Field(..., min_length=1, max_length=64,
                                                      description="In order of preference.")


class ClusterQueueProps(StrictProps):
    name: Dns1123Subdomain
    flavors: list[InstanceOf[ResourceFlavor]] = Field(
        default_factory=list, description="In order of preference, in one resource group that covers every resource "
                                          "their quotas name. Give this or resource_groups.")
    resource_groups: list[ResourceGroup] | None = Field(
        None, max_length=16, description="Resource groups, each covering its own resources with its own flavors "
                                         "(e.g. GPUs by pool in one, CPU and memory in a flavor of no pool in "
                                         "another). Default: one group, of `flavors`.")
    namespaces: list[Dns1123Label] | None = Field(None, description="Namespaces whose LocalQueues may use it; "
                                                                    "default: every namespace of the cluster.")
    quotas: Quotas = Field(default_factory=dict, description="Per flavor name, quotas that replace the default (the "
                                                             "pool at its most nodes): a nominal quantity, or a Quota "
                                                             "with borrowing and lending limits, e.g. "
                                                             "{'p5': {'nvidia.com/gpu': Quota(nominal='64', "
                                                             "borrowing_limit='64')}}.")
    cohort: InstanceOf[PlatformConstruct] | Dns1123Subdomain | None = Field(
        None, description="The Cohort it borrows unused quota from and lends its own to (a Cohort object; a name is "
                          "a cohort defined outside the fleet, KT450).")
    queueing_strategy: Literal["StrictFIFO", "BestEffortFIFO"] = Field(
        "BestEffortFIFO", description="BestEffortFIFO lets a smaller job start while a large gang waits.")
    preemption: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] = Field(
        "LowerPriority", description="withinClusterQueue preemption.")
    when_can_borrow: Literal["MayStopSearch", "TryNextFlavor"] = Field(
        "MayStopSearch", description="Flavor fungibility: take the first flavor that fits even by borrowing "
                                     "(MayStopSearch, Kueue's default), or try the next flavors for one that fits "
                                     "without borrowing first (TryNextFlavor).")
    when_can_preempt: Literal["MayStopSearch", "TryNextFlavor"] = Field(
        "TryNextFlavor", description="Flavor fungibility: try the next flavors before preempting in this one "
                                     "(TryNextFlavor, Kueue's default), or stop at the first flavor where "
                                     "preempting makes room (MayStopSearch). Offline checks judge an idle "
                                     "cluster, where nothing is preempted: it does not change their verdict.")
    preference: Literal["BorrowingOverPreemption", "PreemptionOverBorrowing"] | None = Field(
        None, description="When every flavor needs borrowing or preemption, which Kueue prefers (its default "
                          "BorrowingOverPreemption). Only with both when_can_* TryNextFlavor (KT453).")
    fair_sharing_weight: Quantity | None = Field(None, description="Its share against the cohort's other members "
                                                                   "under fair sharing (Kueue's default 1). Does "
                                                                   "not change what can ever be admitted.")

    @model_validator(mode="after")
    def _valid(self) -> ClusterQueueProps:
        if self.cohort is not None and not isinstance(self.cohort, (str, Cohort)):
            raise rule_violation("KT003", f"cohort is a {type(self.cohort).__name__}, not a Cohort",
                                 "pass a Cohort object, or the name of a cohort defined outside the fleet",
                                 field="cohort")
        if bool(self.flavors) == (self.resource_groups is not None):
            raise rule_violation("KT003", "give either flavors (one resource group) or resource_groups" if self.flavors
                                 else "a ClusterQueue needs flavors", "list the flavors in order of preference "
                                 "(flavors=[...]), or the resource groups (resource_groups=[ResourceGroup(...)])",
                                 field="flavors")
        names = [flavor.name for flavor in self.all_flavors]
        twice = list(dict.fromkeys(n for n in names if names.count(n) > 1))
        if twice:  # Kueue's webhook: a flavor at most once across resource groups
            raise rule_violation("KT003", f"flavors name {', '.join(twice)} more than "
                                 "once", "list each ResourceFlavor once (in one resource group), in order of "
                                 "preference", field="resource_groups" if self.resource_groups else "flavors")
        if self.resource_groups:
            _check_groups(self.resource_groups, self.quotas)
        _known_flavors(self.quotas, self.all_flavors, "queue")
        bare = [f.name for f in self.all_flavors if f.pool is None and not self.quotas.get(f.name)]
        if bare:  # nothing to default its quotas from: it would hold nothing
            raise rule_violation("KT003", f"flavor {bare[0]} has no pool to take its default quotas from",
                                 f"give its quotas, e.g. quotas={{'{bare[0]}': {{'cpu': '400', 'memory': '4000Gi'}}}}",
                                 field=f"quotas.{bare[0]}")
        _check_limits(self.quotas, self.cohort is not None, "a cohort", lending_at_most_nominal=True)
        if self.preference and (self.when_can_borrow, self.when_can_preempt) != ("TryNextFlavor", "TryNextFlavor"):
            raise rule_violation(FUNGIBILITY_REFUSED.code, f"preference {self.preference} needs when_can_borrow and "
                                 f"when_can_preempt TryNextFlavor (they are {self.when_can_borrow} and "
                                 f"{self.when_can_preempt})", FUNGIBILITY_REFUSED.fix, field="preference")
        return self

    @property
    def all_flavors(self) -> list[ResourceFlavor]:
        return [f for g in self.resource_groups for f in g.flavors] if self.resource_groups else list(self.flavors)


def _check_groups(groups: list[ResourceGroup], quotas: Mapping[str, Mapping[str, Quota]]) -> None:
    """Kueue's webhook: a resource in one group at most; and a flavor's quotas only of its group's resources."""
    for i, _, resource, first in covered_twice([group.resources for group in groups]):
        raise rule_violation("KT003", f"{resource} is covered by resource groups {first} and {i}: Kueue takes each "
                             "resource in one group", "cover each resource in one group",
                             field=f"resource_groups.{i}.resources")
    for i, group in enumerate(groups):
        for flavor in group.flavors:
            for resource in quotas.get(flavor.name, {}):
                if resource not in group.resources:
                    raise rule_violation("KT003", f"flavor {flavor.name} is in resource group {i}, which does not "
                                         f"cover {resource}", f"cover {resource} in that group, or give its quota to "
                                         "a flavor of the group that covers it",
                                         field=f"quotas.{flavor.name}.{resource}")


def _fair_sharing(spec: dict[str, Any], weight: str | None) -> None:
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}


class Cohort(PlatformConstruct):
    """A Kueue Cohort (cluster-scoped): ClusterQueues and Cohorts under it lend each other unused quota; its own
    quotas are lent to them, and its parent's to it."""

    Props = CohortProps
    kind = "cohort"

    def __init__(self, scope: Cluster, id: str, props: CohortProps | Mapping[str, Any] | None = None, **kwargs: Any):
        super().__init__(scope, id, props, kwargs)
        p = self.props
        self.name: str = p.name
        self.parent: Cohort | str | None = p.parent
        self.depends_on = (*p.flavors, *([p.parent] if isinstance(p.parent, Cohort) else []))
        parent, problems = _cohort_reference(p.parent, "parent", scope)
        spec: dict[str, Any] = {}
        if parent:
            spec["parentName"] = parent
        groups = resource_groups(list(p.flavors), p.quotas)
        if groups:
            spec["resourceGroups"] = groups
        _fair_sharing(spec, p.fair_sharing_weight)
        self._emit(claim_queue_system(scope, "kueue") + problems, [
            {"apiVersion": API_VERSION, "kind": "Cohort", "metadata": {"name": self.name}, "spec": spec}])


class ClusterQueue(PlatformConstruct):
    """A cluster-wide queue with quotas per flavor. Given `flavors`, every resource any flavor's pods request is
    covered (Kueue does not admit a pod that requests an uncovered resource), in one resource group; given
    `resource_groups`, each group covers its own resources with its own flavors."""

    Props = ClusterQueueProps
    kind = "clusterqueue"

    def __init__(self, scope: Cluster, id: str, props: ClusterQueueProps | Mapping[str, Any] | None = None,
                 **kwargs: Any):
        super().__init__(scope, id, props, kwargs)
        p = self.props
        self.name: str = p.name
        self.flavors: list[ResourceFlavor] = p.all_flavors
        self.cohort: Cohort | str | None = p.cohort
        self.depends_on = (*self.flavors, *([p.cohort] if isinstance(p.cohort, Cohort) else []))
        self.namespaces: list[str] = list(p.namespaces or scope.props.namespaces)
        defaults = {f.name: {r: Quota(nominal=q) for r, q in f.default_quota().items()} for f in self.flavors}
        quotas = {name: {**defaults[name], **p.quotas.get(name, {})} for name in defaults}
        spec: dict[str, Any] = {
            "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In",
                                                        "values": self.namespaces}]},
            "queueingStrategy": p.queueing_strategy,
            "preemption": {"withinClusterQueue": p.preemption},
            "resourceGroups": resource_groups(self.flavors, quotas) if not p.resource_groups else [
                _group(list(g.resources), list(g.flavors), quotas) for g in p.resource_groups]}
        cohort, problems = _cohort_reference(p.cohort, "cohort", scope)
        if cohort:
            spec["cohortName"] = cohort
        # Kueue's defaults are left out, except beside a preference, whose CRD rule reads both policies.
        fungibility = {"whenCanBorrow": p.when_can_borrow if p.when_can_borrow != "MayStopSearch" else None,
                       "whenCanPreempt": p.when_can_preempt if p.when_can_preempt != "TryNextFlavor" or p.preference
                       else None, "preference": p.preference}
        if any(fungibility.values()):
            spec["flavorFungibility"] = {k: v for k, v in fungibility.items() if v}
        _fair_sharing(spec, p.fair_sharing_weight)
        problems += claim_queue_system(scope, "kueue")
        problems += [q for n in self.namespaces for q in scope.check_namespace(n)[1]]
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
        self.depends_on = (self.cluster_queue,)
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


def queued_job_problems(manifest: Mapping[str, Any]) -> list[Problem]:
    """KT422 on a rendered job object that Kueue queues (its queue label): `suspend` set where its kind keeps it
    (the kind's descriptor: spec.suspend, or spec.runPolicy.suspend of the Kubeflow kinds)."""
    kind = run_kind(manifest)
    if kind is None or QUEUE_LABEL not in ((manifest.get("metadata") or {}).get("labels") or {}):
        return []
    for path in kind.run.suspend:
        holder: Any = manifest
        for part in path[:-1]:
            holder = holder.get(part) if isinstance(holder, Mapping) else None
        if isinstance(holder, Mapping) and path[-1] in holder:
            return [Problem(SUSPEND_SET.code, ".".join(path), f"a queued job sets suspend: "
                            f"{str(holder[path[-1]]).lower()}", SUSPEND_SET.fix)]
    return []
