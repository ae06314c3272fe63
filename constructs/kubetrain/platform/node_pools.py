"""Karpenter node pools: an EFA accelerator pool, a GPU pool without EFA, a CPU pool, and what a job placed on one
gets.

    gpu = EfaNodePool(cluster, "p5", instance_types=["p5.48xlarge"], zones=["us-west-2a"],
                      subnet_ids=["subnet-0abc"], security_group_ids=["sg-0efa"], role="KarpenterNodeRole-prod",
                      max_nodes=16)
    TrainingJob(cluster, "gpt", pool=gpu, ...)  # selector, tolerations, GPUs, EFA, huge pages, /dev/shm derived

Each pool is a `NodePool` (karpenter.sh/v1) and its own `EC2NodeClass` (karpenter.k8s.aws/v1), both
cluster-scoped. Facts: Karpenter v1 (https://karpenter.sh/docs/concepts/). Pools scale to zero: Karpenter creates nodes only
for pending pods, and `consolidationPolicy` removes them (an EFA pool only when empty, so a running job's
nodes are never consolidated away) after `consolidate_after`.

`GpuNodePool` is the pool of the Kubeflow Training Operator's guides: GPU instances (g4dn, g5, g6, g6e, ...) whose
jobs get every GPU of the node, the GPU taint's toleration and no EFA (requests, huge pages or NCCL's EFA
environment), for single-node jobs and multi-node jobs that are content with TCP between nodes.

Interface for jobs (read-only): `name`, `instance_type` / `instance_types`, `zone`, `taints`, `uses_efa`,
`node_selector()`, `tolerations()`, `huge_pages()`, `shm_size(memory)` and
`pool_placement_problems(pool, ...)` (KT401-403). The job derives its pod from these (kubetrain.jobs).
For admission (kubetrain.admission): `capacity_nodes`, the most nodes the pool can ever have (static nodes,
else max_nodes within what a capacity reservation holds), and what one node of each type gives pods, both
written onto the NodePool as `kubetrain.dev/*` annotations so dist/ describes itself.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from kubetrain.admission.cluster_objects import (
    ALLOCATABLE_ANNOTATION,
    DOMAIN_NODES_ANNOTATION,
    MAX_NODES_ANNOTATION,
    RESERVED_NODES_ANNOTATION,
)
from kubetrain.admission.flavors import tolerated
from kubetrain.cluster import Cluster
from kubetrain.cost import annotations as cost_annotations
from kubetrain.cost.cost_props import POOL_PRICING_INVALID, PoolPricing
from kubetrain.cost.prices import node_price, unpriced_reason
from kubetrain.kinds.base import pod_specs
from kubetrain.kinds.karpenter import EC2NODECLASS_API_VERSION, NODEPOOL_API_VERSION
from kubetrain.model.aws_ids import (
    AvailabilityZone,
    CapacityReservationId,
    IamRoleName,
    PlacementGroupName,
    SecurityGroupId,
    SubnetId,
    region_of_zone,
)
from kubetrain.model.instances import InstanceType
from kubetrain.model.names import Dns1123Label, LabelKey
from kubetrain.model.quantity import HugePages2Mi, format_bytes, format_quantity, parse_quantity
from kubetrain.model.strict import StrictProps
from kubetrain.model.vocabulary import (
    EFA_RESOURCE,
    GPU_RESOURCE,
    HUGE_PAGES_RESOURCE,
    INSTANCE_TYPE_LABEL,
    NEURON_RESOURCE,
    NODEPOOL_LABEL,
)
from kubetrain.platform.platform_construct import PlatformConstruct
from kubetrain.rules.registry import register, severity
from kubetrain.rules.sources import EKS_EFA, KARPENTER_GPU, KARPENTER_NODECLASS, KARPENTER_TYPES, TAINTS, cite
from kubetrain_runtime.problems import INVALID_VALUE, Problem, rule_violation

ZONE_LABEL = "topology.kubernetes.io/zone"
MIB = 2**20

POD_DOES_NOT_FIT = register(
    "KT401", "error", "pod does not fit the pool's instance",
    rationale="A pod asking for more CPU, memory (with its huge pages) or accelerators "
              "than one node of its pool can allocate stays Pending forever: Karpenter finds no instance type "
              "for it. Allocatable is the instance less kube-reserved and the eviction threshold.",
    fix="request at most the pool's allocatable figures, or choose a larger instance type",
    source=cite(KARPENTER_TYPES, "constructs/kubetrain/model/instances.py"))
TAINT_NOT_TOLERATED = register(
    "KT402", "error", "pod does not tolerate the pool's taints",
    rationale="Accelerator pools are tainted (nvidia.com/gpu, aws.amazon.com/neuron) so that only pods that need "
              "them land there; a pod without the toleration is never scheduled on the pool.",
    fix="use the pool's tolerations() (a job placed on the pool gets them)", source=cite(TAINTS, KARPENTER_GPU))
EFA_MISMATCH = register(
    "KT403", "error", "EFA requested where the pool has none, or not requested where it has",
    rationale="Karpenter attaches EFA interfaces only when a pending pod requests vpc.amazonaws.com/efa; a pod on "
              "an EFA pool without the request gets no EFA and NCCL falls back to TCP sockets, and a request on a "
              "pool without EFA can never be met.",
    fix="request exactly the instance's EFA interfaces on EFA pools, none elsewhere",
    source=cite(EKS_EFA, KARPENTER_NODECLASS))
EFA_POOL_SPANS_ZONES = register(
    "KT404", "error", "EFA pool not confined to one zone and subnet",
    rationale="EFA traffic does not cross availability zones, and a job's nodes should share a cluster placement "
              "group; an EFA pool spanning zones (or subnets) can split one job's nodes where they cannot talk.",
    fix="give the EFA pool exactly one zone and one subnet (make one pool per zone)",
    source=EKS_EFA)
MIXED_INSTANCE_TYPES = register(
    "KT405", "error", "pool mixes instance types with different accelerator or EFA counts",
    rationale="A job on a pool requests the instance's accelerators and EFA interfaces; with types that differ in "
              "them, no single request fits every node the pool may create.",
    fix="split the pool, one per accelerator/EFA shape", source="README.md (The platform)")
WRONG_INSTANCE_TYPE = register(
    "KT406", "error", "instance type unknown, or of the wrong kind for the pool",
    rationale="A pool's instance types come from the cluster's catalog: an accelerator pool needs accelerator types "
              "(and an EFA pool EFA types), a CPU pool CPU types.",
    fix="use a type of the catalog that fits the pool, or register yours with Cluster(instance_types=[...])",
    source="constructs/kubetrain/model/instances.py")
EFA_TYPE_WITHOUT_EFA = register(
    "KT433", "warning", "GPU pool without EFA on an instance type built for it",
    rationale="p4d, p5, p6 and their kind are sold for their EFA network with GPUDirect RDMA; on a GpuNodePool no "
              "pod requests vpc.amazonaws.com/efa, so Karpenter attaches none and multi-node collectives run over "
              "TCP sockets at a fraction of the instance's bandwidth, while the instance is paid in full.",
    fix="put the type in an EfaNodePool (its jobs get every EFA interface), or choose a g-family type",
    source=cite(EKS_EFA, KARPENTER_NODECLASS))
PRICE_UNKNOWN = register(
    "KT471", "warning", "no price for the pool's nodes",
    rationale="The cost of a job's run (kubetrain cost, the pull request's priced diff) needs the hourly price "
              "of its pool's node: kubetrain's table (kubetrain/cost/prices.json) covers the built-in catalog's "
              "types in us-east-1 and us-west-2 where AWS publishes a price for the capacity type; a fleet's own "
              "instance type, another region or an unpublished rate has none.",
    fix="give the pool pricing=PoolPricing(usd_per_node_hour=...) (your rate), or regenerate the table with "
        "scripts/generate_prices.py from an AWS Price List offer file of the region",
    source="scripts/generate_prices.py; constructs/kubetrain/cost/prices.json (its sources)")
CAPACITY_RESERVATION = register(
    "KT407", "error", "capacity reservations and capacity type disagree",
    rationale="Karpenter launches into capacity reservations only for capacity type 'reserved', and a 'reserved' "
              "pool needs at least one reservation to select.",
    fix="with capacity_type='reserved' list capacity_reservation_ids (cr-...); otherwise list none",
    source=KARPENTER_NODECLASS)
UNDECLARED_RESERVATION = register(
    "KT449", "warning", "reserved pool without the node count its reservation holds",
    rationale="A pool of capacity type 'reserved' launches only into its capacity reservations or capacity "
              "blocks, so it has at most as many nodes as they hold instances; without that number kubetrain "
              "assumes max_nodes and cannot refuse a job that needs more than the reservation (KT448).",
    fix="set reserved_nodes to the instances the reservations hold",
    source=f"{KARPENTER_NODECLASS}#speccapacityreservationselectorterms")
RESERVED_NODES = register(
    "KT452", "error", "reserved_nodes without a reservation, or static nodes beyond it",
    rationale="reserved_nodes is the size of a 'reserved' pool's capacity reservations; on another capacity type "
              "it means nothing, and static nodes beyond it are never launched, so the pool never has them.",
    fix="set reserved_nodes only with capacity_type='reserved', and keep static_nodes within it",
    source=f"{KARPENTER_NODECLASS}#speccapacityreservationselectorterms")


# Karpenter's EC2NodeClass CEL rules on amiSelectorTerms[].alias (karpenter.k8s.aws_ec2nodeclasses.yaml, v1.9).
AMI_ALIAS_FAMILIES = ("al2", "al2023", "bottlerocket", "windows2019", "windows2022", "windows2025")


class NodePoolProps(StrictProps):
    """What every pool has. Defaults are documented beside each field."""

    name: Dns1123Label = Field(..., description="NodePool and EC2NodeClass name; defaults to the construct id.")
    instance_types: list[str] = Field(..., min_length=1, description="Catalog names, e.g. ['p5.48xlarge'].")
    capacity_type: Literal["on-demand", "spot", "reserved"] = Field("on-demand")
    capacity_reservation_ids: list[CapacityReservationId] = Field(default_factory=list,
                                                description="cr-... ids, only with capacity_type='reserved'.")
    zones: list[AvailabilityZone] = Field(..., min_length=1, description="Availability zones of one region, e.g. "
                                                                      "['us-west-2a'].")
    subnet_ids: list[SubnetId] = Field(..., min_length=1, description="subnet-... ids the nodes launch in.")
    security_group_ids: list[SecurityGroupId] = Field(..., min_length=1, description="sg-... ids of the nodes.")
    role: IamRoleName = Field(..., description="Name of the nodes' IAM role (Karpenter creates the instance "
                                               "profile), not its ARN.")
    ami_alias: str = Field("al2023@latest", description="amiSelectorTerms alias; pin a version (al2023@v2025...) "
                                                        "for reproducible nodes. Karpenter picks the NVIDIA or "
                                                        "Neuron variant of AL2023 for accelerator types.")
    root_volume_gib: int = Field(200, ge=20, description="Root EBS volume (gp3, encrypted): images live here.")
    max_nodes: int = Field(..., ge=1, description="Limit on the pool's nodes (NodePool limits, in CPU and "
                                                  "accelerators); the pool scales from zero to this.")
    consolidate_after: str = Field("10m", pattern=r"^(([0-9]+(s|m|h))+|Never)$",
                                   description="How long a node stays empty (EFA) or underused (CPU) before "
                                               "Karpenter removes it.")
    static_nodes: int | None = Field(None, ge=0, description="Keep exactly this many nodes up (Karpenter's alpha "
                                                              "static capacity, NodePool `replicas`) instead of "
                                                              "scaling with pending pods; needed for Kueue "
                                                              "topology-aware placement (KT423). A pool cannot switch "
                                                              "between static and dynamic later.")
    expire_after: str = Field("720h", pattern=r"^(([0-9]+(s|m|h))+|Never)$",
                              description="Node lifetime (Karpenter's default 720h). 'Never' keeps long runs' "
                                          "nodes from expiring under them.")
    reserved_nodes: int | None = Field(None, ge=1, description="How many instances the capacity reservations "
                                                               "(or capacity blocks) hold: the most nodes the pool "
                                                               "can launch. Declare it with capacity_type='reserved' "
                                                               "(KT449 warns when it is missing).")
    topology_domain_nodes: dict[LabelKey, Annotated[int, Field(ge=1)]] = Field(
        default_factory=dict, description="The most nodes of the pool in one topology domain, per node label level, "
                                          "where you know it (e.g. {'topology.k8s.aws/network-node-layer-3': 8} for "
                                          "a capacity block that spans two such domains): a job whose required "
                                          "placement at that level needs more is refused (KT447). Unlisted levels "
                                          "are unknown offline; kubernetes.io/hostname is always one node.")

    pricing: PoolPricing | None = Field(None, description="The pool's own price terms (a negotiated rate or "
                                                          "discount, a reservation's rate and size). Default: the "
                                                          "price table's rate for the capacity type "
                                                          "(kubetrain/cost/prices.json).")

    @field_validator("ami_alias")
    @classmethod
    def _alias_format(cls, alias: str) -> str:
        # EC2NodeClass rules on amiSelectorTerms[].alias: family@version, a family with an alias, and
        # Windows only at 'latest'.
        parts = alias.split("@")
        fix = "write family@version, e.g. al2023@latest or al2023@v20250505 (one of " + \
              ", ".join(AMI_ALIAS_FAMILIES) + ")"
        if not re.fullmatch(r"[a-zA-Z0-9]+@.+", alias, re.DOTALL):
            raise rule_violation(INVALID_VALUE, f"{alias!r} is not in the format 'family@version'", fix)
        if parts[0] not in AMI_ALIAS_FAMILIES:
            raise rule_violation(INVALID_VALUE, f"AMI family {parts[0]!r} has no Karpenter alias", fix)
        if parts[0].startswith("windows") and parts[1] != "latest":
            raise rule_violation(INVALID_VALUE, f"{alias!r}: Windows aliases may only specify version 'latest'",
                                 f"use {parts[0]}@latest")
        return alias

    @model_validator(mode="after")
    def _one_region(self) -> NodePoolProps:
        regions = sorted({region_of_zone(zone) for zone in self.zones})
        if len(regions) > 1:
            raise rule_violation(INVALID_VALUE, f"zones span regions {', '.join(regions)}: a cluster's nodes are "
                                 "in one region", "list zones of the cluster's region only", field="zones")
        return self

    @model_validator(mode="after")
    def _static_within_limit(self) -> NodePoolProps:
        if self.static_nodes is not None and self.static_nodes > self.max_nodes:
            raise rule_violation("KT003", f"static_nodes {self.static_nodes} is above max_nodes {self.max_nodes}",
                                 "raise max_nodes or lower static_nodes", field="static_nodes")
        return self

    @model_validator(mode="after")
    def _reservations(self) -> NodePoolProps:
        reserved = self.capacity_type == "reserved"
        if reserved != bool(self.capacity_reservation_ids):
            raise rule_violation(CAPACITY_RESERVATION.code,
                                 "capacity_type 'reserved' needs capacity_reservation_ids" if reserved else
                                 f"capacity_reservation_ids are used only with capacity_type 'reserved', not "
                                 f"{self.capacity_type!r}", CAPACITY_RESERVATION.fix, field="capacity_reservation_ids")
        if not reserved and self.reserved_nodes is not None:
            raise rule_violation(RESERVED_NODES.code, f"reserved_nodes is used only with capacity_type 'reserved', "
                                 f"not {self.capacity_type!r}", RESERVED_NODES.fix, field="reserved_nodes")
        if self.reserved_nodes is not None and self.static_nodes is not None and \
                self.static_nodes > self.reserved_nodes:
            raise rule_violation(RESERVED_NODES.code, f"static_nodes {self.static_nodes} is more than the "
                                 f"{self.reserved_nodes} instances the reservations hold", RESERVED_NODES.fix,
                                 field="static_nodes")
        return self

    @model_validator(mode="after")
    def _pricing_fits_capacity(self) -> NodePoolProps:
        if self.pricing is not None and self.pricing.rate and self.capacity_type != "reserved":
            raise rule_violation(POOL_PRICING_INVALID.code, f"pricing.rate {self.pricing.rate!r} is a reservation's "
                                 f"rate; this pool's capacity_type is {self.capacity_type!r}",
                                 POOL_PRICING_INVALID.fix, field="pricing.rate")
        return self

    @property
    def resolved_pricing(self) -> PoolPricing | None:
        """The pricing the NodePool carries: the pool's terms with the nodes paid whether used or not resolved
        (a reservation's max_nodes, a static pool's static_nodes)."""
        reserved = self.pricing.reserved_nodes if self.pricing else None
        if reserved is None:  # a reservation's nodes (its declared size, else the pool's limit), or static nodes
            reserved = (self.reserved_nodes or self.max_nodes) if self.capacity_type == "reserved" else self.static_nodes
        if not reserved and self.pricing is None:
            return None
        terms = self.pricing or PoolPricing()
        return terms.model_copy(update={"reserved_nodes": reserved or 0}) if reserved else terms


class AcceleratorPoolProps(NodePoolProps):
    """What both accelerator pools have: a /dev/shm sized from the pod's memory."""

    max_nodes: int = Field(..., ge=1)
    shm_fraction: float = Field(0.125, gt=0, lt=0.5, description="/dev/shm of a pod on the pool as a share of the "
                                                                   "pod's memory (it counts against the memory "
                                                                   "limit). A job's resources.shm overrides it.")


class EfaNodePoolProps(AcceleratorPoolProps):
    """An accelerator pool with EFA: one zone, one subnet, an EFA security group, instance store as RAID0."""

    placement_group: PlacementGroupName | None = Field(None, description="Name of a cluster placement group "
                                                                         "(Karpenter >= 1.11).")
    huge_pages: HugePages2Mi = Field("5120Mi", description="2 MiB huge pages each pod requests (the EFA driver's; "
                                                           "AWS's NCCL-test manifests use 5120Mi): whole 2Mi pages.")
    shm_fraction: float = Field(0.125, gt=0, lt=0.5, description="/dev/shm of a pod on the pool as a share of the "
                                                                   "pod's memory (it counts against the memory "
                                                                   "limit). A job's resources.shm overrides it.")


class GpuNodePoolProps(AcceleratorPoolProps):
    """A pool of NVIDIA GPU instances without EFA (g4dn, g5, g6, g6e, ...): any zones, instance store as RAID0."""


class CpuNodePoolProps(NodePoolProps):
    """A pool of CPU instances for everything else (data preparation, controllers, evaluation)."""

    max_nodes: int = Field(..., ge=1)


class NodePool(PlatformConstruct):
    """What every pool shares, and the type a job's `pool=` takes (use EfaNodePool, GpuNodePool or CpuNodePool)."""

    kind = "nodepool"
    accelerated: bool
    uses_efa: bool = False  # its nodes attach EFA interfaces to the pods that request them

    def __init__(self, scope: Cluster, id: str, props: Any, kwargs: dict[str, Any]):
        super().__init__(scope, id, props, kwargs)
        self.name: str = self.props.name
        self.instance_types: list[InstanceType] = [t for n in self.props.instance_types
                                                   if (t := scope.instance_type(n)) is not None]
        problems = self._type_problems() + self._pool_problems()
        if self.props.capacity_type == "reserved" and self.props.reserved_nodes is None:
            problems.append(Problem(UNDECLARED_RESERVATION.code, "reserved_nodes", f"pool {self.name} is reserved "
                                    f"capacity of unknown size: its jobs are judged against max_nodes "
                                    f"({self.props.max_nodes})", UNDECLARED_RESERVATION.fix))
        broken = any(severity(p.code) == "error" for p in problems)  # the objects could not be built
        # A missing price is a warning: the pool works, only its jobs' cost cannot be shown.
        self._emit(problems + self._price_problems(), None if broken else [self._node_pool(), self._node_class()])

    # -- the interface jobs use ---------------------------------------------------------------------------

    @property
    def instance_type(self) -> InstanceType | None:
        """The pool's instance type (the first; KT405 keeps the others' accelerator and EFA shape equal)."""
        return self.instance_types[0] if self.instance_types else None

    @property
    def zone(self) -> str | None:
        """The pool's zone when it has exactly one."""
        return self.props.zones[0] if len(self.props.zones) == 1 else None

    @property
    def taints(self) -> list[dict[str, str]]:
        resource = self.instance_type.accelerator_resource if self.instance_type else None
        return [{"key": resource, "effect": "NoSchedule"}] if self.accelerated and resource else []

    def node_selector(self) -> dict[str, str]:
        selector = {NODEPOOL_LABEL: self.name}
        if self.zone:
            selector[ZONE_LABEL] = self.zone
        return selector

    def tolerations(self) -> list[dict[str, str]]:
        return [{"key": t["key"], "operator": "Exists", "effect": t["effect"]} for t in self.taints]

    @property
    def max_nodes(self) -> int:
        return self.props.max_nodes

    @property
    def scales_from_zero(self) -> bool:
        """True when nodes exist only while pods wait for them (no static capacity)."""
        return self.props.static_nodes is None

    @property
    def capacity_nodes(self) -> int:
        """The most nodes the pool can ever have: its static nodes (Karpenter keeps exactly those), else
        max_nodes, within what its capacity reservations hold."""
        p = self.props
        if p.static_nodes is not None:
            return p.static_nodes
        return min(p.max_nodes, p.reserved_nodes) if p.reserved_nodes is not None else p.max_nodes

    def node_allocatable(self, instance: InstanceType) -> dict[str, Decimal]:
        """What one node of `instance` gives pods, by Kubernetes resource name."""
        capacity = {"cpu": instance.allocatable_cpu(), "memory": instance.allocatable_memory()}
        if instance.accelerator_resource:
            capacity[instance.accelerator_resource] = Decimal(instance.accelerators)
        return capacity

    def node_capacity(self) -> dict[str, Decimal]:
        """What one node of the pool's instance type gives pods (the queues' quotas are this x capacity_nodes)."""
        return self.node_allocatable(self.instance_type) if self.instance_type else {}

    def huge_pages(self) -> str | None:
        """2 MiB huge pages a pod on the pool requests (EFA pools only)."""
        return None

    def shm_size(self, memory: str) -> str | None:
        """/dev/shm of a pod with `memory` on the pool; None for kubetrain's general default."""
        return None

    # -- checks and objects -------------------------------------------------------------------------------

    def _wrong_type(self, t: InstanceType) -> str | None:
        """Why a catalog type does not belong in this kind of pool (None when it does)."""
        return "has accelerators: use a GpuNodePool (or an EfaNodePool)" if t.accelerators else None

    def _shape(self, t: InstanceType) -> tuple[Any, ...]:
        """What a job on the pool requests of each node: every node type must give the same."""
        return (t.accelerator_resource, t.accelerators)

    def _type_problems(self) -> list[Problem]:
        problems = []
        for i, name in enumerate(self.props.instance_types):
            t = self.cluster.instance_type(name)
            wrong = "is not in the cluster's instance catalog" if t is None else self._wrong_type(t)
            if wrong:
                near = self.cluster.instance_catalog.near(name) if t is None else ""
                problems.append(Problem(WRONG_INSTANCE_TYPE.code, f"instance_types.{i}", f"{name} {wrong}",
                                        f"{near}{WRONG_INSTANCE_TYPE.fix}"))
        shapes = {self._shape(t) for t in self.instance_types}
        if len(shapes) > 1:
            efa = (lambda t: f", {t.efa_interfaces} EFA") if self.uses_efa else (lambda t: "")
            listed = ", ".join(f"{t.name} ({t.accelerators} accelerators{efa(t)})" for t in self.instance_types)
            problems.append(Problem(MIXED_INSTANCE_TYPES.code, "instance_types", f"the pool mixes {listed}",
                                    MIXED_INSTANCE_TYPES.fix))
        return problems

    def _pool_problems(self) -> list[Problem]:
        return []

    def _price_problems(self) -> list[Problem]:
        p = self.props
        if not self.instance_types or (p.pricing is not None and p.pricing.usd_per_node_hour is not None):
            return []
        region = region_of_zone(p.zones[0])  # the zones are of one region (_one_region)
        if node_price([t.name for t in self.instance_types], region, p.capacity_type, p.pricing) is not None:
            return []
        names = ", ".join(t.name for t in self.instance_types)
        reason = unpriced_reason([t.name for t in self.instance_types], region, p.capacity_type, p.pricing)
        return [Problem(PRICE_UNKNOWN.code, "pricing", f"no {p.capacity_type} price for {names} in "
                        f"{region} in kubetrain's price table{f' ({reason})' if reason else ''}: `kubetrain cost` "
                        "and the pull request's diff show hours and GPU-hours but no dollars for its jobs",
                        PRICE_UNKNOWN.fix)]

    def _node_pool(self) -> dict[str, Any]:
        p = self.props
        requirements = [
            {"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": list(p.instance_types)},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [p.capacity_type]},
            {"key": ZONE_LABEL, "operator": "In", "values": list(p.zones)},
        ]
        spec: dict[str, Any] = {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": self.name},
            "requirements": requirements, "expireAfter": p.expire_after}
        if self.taints:
            spec["taints"] = self.taints
        pool: dict[str, Any] = {
            "template": {"metadata": {"labels": {"kubetrain.dev/pool": self.name}}, "spec": spec},
            "limits": self._limits(),
            "disruption": {"consolidationPolicy": self.consolidation_policy, "consolidateAfter": p.consolidate_after}}
        if p.static_nodes is not None:
            # Static capacity: Karpenter keeps `replicas` nodes and accepts only a node-count limit.
            pool["replicas"] = p.static_nodes
            pool["limits"] = {"nodes": str(p.max_nodes)}
        return {"apiVersion": NODEPOOL_API_VERSION, "kind": "NodePool",
                "metadata": {"name": self.name, "annotations": self._capacity_annotations()}, "spec": pool}

    def _capacity_annotations(self) -> dict[str, str]:
        """What the pool can hold, for the offline admission checks on dist/ (`kubetrain plan`): Karpenter
        holds neither what a node gives pods nor what a capacity reservation holds."""
        p = self.props
        allocatable = {t.name: {r: format_quantity(r, v) for r, v in self.node_allocatable(t).items()}
                       for t in self.instance_types}
        annotations = {MAX_NODES_ANNOTATION: str(p.max_nodes),
                       ALLOCATABLE_ANNOTATION: json.dumps(allocatable, sort_keys=True, separators=(",", ":"))}
        if p.reserved_nodes is not None:
            annotations[RESERVED_NODES_ANNOTATION] = str(p.reserved_nodes)
        if p.topology_domain_nodes:
            annotations[DOMAIN_NODES_ANNOTATION] = json.dumps(p.topology_domain_nodes, sort_keys=True,
                                                              separators=(",", ":"))
        if (pricing := p.resolved_pricing) is not None:
            annotations[cost_annotations.PRICING] = cost_annotations.encode(pricing)
        return annotations

    consolidation_policy = "WhenEmptyOrUnderutilized"

    def _limits(self) -> dict[str, str]:
        n = self.props.max_nodes
        limits = {"cpu": str(n * max(t.vcpus for t in self.instance_types)),
                  "memory": f"{n * max(int(t.memory_gib) for t in self.instance_types)}Gi"}
        t = self.instance_type
        if t is not None and t.accelerator_resource:
            limits[t.accelerator_resource] = str(n * t.accelerators)
        return limits

    def _node_class(self) -> dict[str, Any]:
        p = self.props
        spec: dict[str, Any] = {
            "role": p.role,
            "amiSelectorTerms": [{"alias": p.ami_alias}],
            "subnetSelectorTerms": [{"id": s} for s in p.subnet_ids],
            "securityGroupSelectorTerms": [{"id": s} for s in p.security_group_ids],
            "blockDeviceMappings": [{"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {
                "volumeSize": f"{p.root_volume_gib}Gi", "volumeType": "gp3", "encrypted": True,
                "deleteOnTermination": True}}],
            # IMDSv2 only, one hop: pods cannot reach the node's credentials.
            "metadataOptions": {"httpEndpoint": "enabled", "httpTokens": "required", "httpPutResponseHopLimit": 1},
        }
        if p.capacity_reservation_ids:
            spec["capacityReservationSelectorTerms"] = [{"id": r} for r in p.capacity_reservation_ids]
        return {"apiVersion": EC2NODECLASS_API_VERSION, "kind": "EC2NodeClass", "metadata": {"name": self.name},
                "spec": {**spec, **self._node_class_extra()}}

    def _node_class_extra(self) -> dict[str, Any]:
        return {}


class _AcceleratorPool(NodePool):
    """Tainted accelerator nodes, emptied only when idle, their instance store in RAID0."""

    accelerated = True
    # Consolidating an underused node would evict a training pod; only empty nodes go.
    consolidation_policy = "WhenEmpty"

    def _node_class_extra(self) -> dict[str, Any]:
        # RAID0 puts the kubelet's and containerd's storage on the instance store's NVMe (/mnt/k8s-disks/0):
        # emptyDir volumes such as the Triton cache live on local flash, not on the root EBS volume.
        return {"instanceStorePolicy": "RAID0"}

    def shm_size(self, memory: str) -> str:
        mib = int(parse_quantity(memory) * Decimal(str(self.props.shm_fraction)) / MIB)
        return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"


class EfaNodePool(_AcceleratorPool):
    """Accelerator nodes with EFA (p4d, p5, p6, trn...): tainted, one zone, emptied only when idle.

    A job placed here gets the accelerators and EFA interfaces of the whole instance, huge pages, a
    memory-backed /dev/shm, a Triton cache on the node's instance store and the NCCL profile's environment.
    """

    Props = EfaNodePoolProps
    uses_efa = True

    def __init__(self, scope: Cluster, id: str, props: EfaNodePoolProps | Mapping[str, Any] | None = None,
                 **kwargs: Any):
        super().__init__(scope, id, props, kwargs)

    def _wrong_type(self, t: InstanceType) -> str | None:
        return ("has no accelerators" if not t.accelerators else
                "has no EFA interfaces: use a GpuNodePool" if not t.uses_efa else None)

    def _shape(self, t: InstanceType) -> tuple[Any, ...]:
        return (t.accelerator_resource, t.accelerators, t.efa_interfaces)

    def _pool_problems(self) -> list[Problem]:
        p = self.props
        spans = [f"{len(v)} {what}" for what, v in (("zones", p.zones), ("subnets", p.subnet_ids)) if len(v) != 1]
        if spans:
            return [Problem(EFA_POOL_SPANS_ZONES.code, "zones" if len(p.zones) != 1 else "subnet_ids",
                            f"an EFA pool must stay in one zone and subnet; this one has {' and '.join(spans)}",
                            EFA_POOL_SPANS_ZONES.fix)]
        return []

    def _node_class_extra(self) -> dict[str, Any]:
        extra = super()._node_class_extra()
        if self.props.placement_group:
            extra["placementGroupSelector"] = {"name": self.props.placement_group}
        return extra

    def node_allocatable(self, instance: InstanceType) -> dict[str, Decimal]:
        capacity = super().node_allocatable(instance)
        if instance.efa_interfaces:
            capacity[EFA_RESOURCE] = Decimal(instance.efa_interfaces)
            capacity[HUGE_PAGES_RESOURCE] = parse_quantity(self.props.huge_pages)
            capacity["memory"] -= capacity[HUGE_PAGES_RESOURCE]  # huge pages come out of the node's memory
        return capacity

    def huge_pages(self) -> str:
        return self.props.huge_pages


class GpuNodePool(_AcceleratorPool):
    """NVIDIA GPU nodes without EFA (g4dn, g5, g6, g6e, ...): tainted, emptied only when idle.

    A job placed here gets every GPU of the instance, the GPU taint's toleration, a memory-backed /dev/shm and
    a Triton cache on the node's instance store; no EFA interfaces, huge pages or EFA environment, even on the
    larger sizes that have an EFA interface (Karpenter attaches one only for pods that request it). A type made
    for EFA (GPUDirect RDMA: p4d, p5, ...) is a warning here (KT433).
    """

    Props = GpuNodePoolProps

    def __init__(self, scope: Cluster, id: str, props: GpuNodePoolProps | Mapping[str, Any] | None = None,
                 **kwargs: Any):
        super().__init__(scope, id, props, kwargs)

    def _wrong_type(self, t: InstanceType) -> str | None:
        return None if t.accelerator_resource == GPU_RESOURCE else \
            f"has no NVIDIA GPUs{f' ({t.accelerator_resource})' if t.accelerator_resource else ''}"

    def _pool_problems(self) -> list[Problem]:
        return [Problem(EFA_TYPE_WITHOUT_EFA.code, f"instance_types.{self.props.instance_types.index(t.name)}",
                        f"{t.name} is built for EFA ({t.efa_interfaces} interfaces, GPUDirect RDMA); on a GpuNodePool "
                        "its jobs get none, and their nodes talk over TCP", EFA_TYPE_WITHOUT_EFA.fix)
                for t in self.instance_types if t.gpudirect_rdma and self._wrong_type(t) is None]


class CpuNodePool(NodePool):
    """CPU nodes, untainted, consolidated when empty or underused."""

    Props = CpuNodePoolProps
    accelerated = False

    def __init__(self, scope: Cluster, id: str, props: CpuNodePoolProps | Mapping[str, Any] | None = None,
                 **kwargs: Any):
        super().__init__(scope, id, props, kwargs)


def pool_placement_problems(pool: NodePool, requests: Mapping[str, str | int], tolerations: list[Mapping[str, Any]],
                            path: str = "resources") -> list[Problem]:
    """KT401-KT403 for one pod on `pool`: `requests` are the container's (Kubernetes names: cpu, memory,
    nvidia.com/gpu, vpc.amazonaws.com/efa, hugepages-2Mi; a memory-backed /dev/shm is inside `memory`, as it
    counts against the memory limit), `tolerations` the pod's."""
    problems: list[Problem] = []
    t = pool.instance_type
    if t is None:
        return problems  # KT406 already reported on the pool
    amounts = {name: parse_quantity(value) for name, value in requests.items()}
    memory = amounts.get("memory", Decimal(0)) + amounts.get(HUGE_PAGES_RESOURCE, Decimal(0))
    # Karpenter launches whichever of the pool's types fits the pod, so the pod must fit the roomiest one.
    largest = max(pool.instance_types, key=lambda i: (i.allocatable_memory(), i.allocatable_cpu()))
    checks = [("cpu", amounts.get("cpu", Decimal(0)), max(i.allocatable_cpu() for i in pool.instance_types),
               lambda cores: f"{cores.normalize():f} cores"),
              ("memory", memory, largest.allocatable_memory(), format_bytes)]
    if t.accelerator_resource:
        checks.append((t.accelerator_resource, amounts.get(t.accelerator_resource, Decimal(0)),
                       Decimal(t.accelerators), lambda count: f"{count:f} accelerators"))
    for name, wanted, has, show in checks:
        if wanted > has:
            what = " of memory and huge pages" if name == "memory" else ""
            problems.append(Problem(POD_DOES_NOT_FIT.code, f"{path}.{name}", f"asks for {show(wanted)}{what}; the "
                                    f"largest node of pool {pool.name} ({largest.name}) can allocate {show(has)}",
                                    POD_DOES_NOT_FIT.fix))
    for other in (GPU_RESOURCE, NEURON_RESOURCE):
        if other != t.accelerator_resource and amounts.get(other):
            problems.append(Problem(POD_DOES_NOT_FIT.code, f"{path}.{other}", f"{t.name} has no {other}",
                                    POD_DOES_NOT_FIT.fix))
    efa = amounts.get(EFA_RESOURCE, Decimal(0))
    if efa and not pool.uses_efa:
        has = f"whose {t.name} has none" if not t.efa_interfaces else "a pool without EFA (a GpuNodePool)"
        problems.append(Problem(EFA_MISMATCH.code, f"{path}.{EFA_RESOURCE}", f"asks for EFA on pool {pool.name}, "
                                f"{has}", EFA_MISMATCH.fix))
    elif pool.uses_efa and efa != t.efa_interfaces:
        problems.append(Problem(EFA_MISMATCH.code, f"{path}.{EFA_RESOURCE}", f"asks for {efa:f} EFA interfaces on "
                                f"pool {pool.name}, whose {t.name} has {t.efa_interfaces}", EFA_MISMATCH.fix))
    return problems + untolerated_taints(pool, tolerations)


def untolerated_taints(pool: NodePool, tolerations: list[Mapping[str, Any]]) -> list[Problem]:
    """KT402: the pool's taints a pod's tolerations leave out. A job on the pool gets the pool's tolerations, so
    this fires where something took them away: a patch of the job's object (`patched_pod_problems`)."""
    return [Problem(TAINT_NOT_TOLERATED.code, "tolerations", f"pool {pool.name} is tainted {taint['key']}:"
                    f"{taint['effect']}", TAINT_NOT_TOLERATED.fix)
            for taint in pool.taints if not tolerated(taint, tolerations)]


def patched_pod_problems(pool: NodePool, manifest: Mapping[str, Any]) -> list[Problem]:
    """KT402 on a job's patched object: every pod template in it still tolerates the pool's taints (each
    problem once, however many templates have it)."""
    return list(dict.fromkeys(problem for spec in pod_specs(manifest)
                              for problem in untolerated_taints(pool, spec.get("tolerations") or [])))
