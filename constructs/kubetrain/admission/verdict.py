"""One job's verdict on its cluster's objects, the rules it breaks, and what each pool is asked for.

- fits: nothing offline says it cannot start: its pool can have the nodes it needs, and its queue admits it
  within the ClusterQueue's nominal quota of the flavors Kueue assigns it;
- borrows: the flavors Kueue assigns it (its fungibility decides: by default the first that fits, borrowing
  included) hold it only with quota a cohort lends (KT442, a warning);
- never: it can never start (an error: KT440, KT441, KT443-KT448, or KT421 for a placement no flavor's
  Topology has).

Every problem names the job's field it is about as the user writes it (nodes, queue, pool, placement.level,
resources.*), so synth reports it on the job's definition and `kubetrain plan` shows the same words.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kubetrain.admission import admission_rules
from kubetrain.admission.capacity import domain_nodes, nodes_needed, pods_per_node
from kubetrain.admission.cluster_objects import ClusterObjects, FlavorResource, Pool
from kubetrain.admission.flavors import FlavorAssigner, Mismatch, Undecided
from kubetrain.admission.quota import UNLIMITED, Amount, CohortTree
from kubetrain.apiserver.meta import selector_matches
from kubetrain.model.pod_sets import CPU, PodSet, Workload, show
from kubetrain.model.vocabulary import (
    ACCELERATOR_RESOURCES,
    EFA_RESOURCE,
    GPU_RESOURCE,
    HUGE_PAGES_RESOURCE,
    NEURON_RESOURCE,
)
from kubetrain.rules.registry import get

PLACEMENT_LEVEL_CODE = "KT421"  # kubetrain.platform.queues: topology placement the queue cannot honour
RESOURCE_FIELDS = {"cpu": "resources.cpu", "memory": "resources.memory", GPU_RESOURCE: "resources.accelerators",
                   NEURON_RESOURCE: "resources.accelerators", EFA_RESOURCE: "resources.efa",
                   HUGE_PAGES_RESOURCE: "resources.hugepages_2mi"}


@dataclass(frozen=True)
class Reason:
    """A rule the job breaks, on one of its fields."""

    code: str
    field: str
    message: str
    fix: str

    @property
    def severity(self) -> str:
        rule = get(self.code)
        return rule.severity if rule else "error"


@dataclass
class JobPlan:
    cluster: str
    workload: Workload
    reasons: list[Reason] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    pool: str | None = None
    pool_nodes: int | None = None  # the most nodes the pool can ever have
    nodes_needed: int | None = None  # at least, on the pool
    cluster_queue: str | None = None
    flavor: str | None = None  # the flavor Kueue assigns on an idle cluster
    quota: str | None = None  # the queue's nominal quota of the job's main resource in that flavor
    potential: str | None = None  # with what its cohort can lend
    memory: dict[str, Any] | None = None  # one rank's memory estimate (kubetrain.jobs.memory_fit), when synth made one

    @property
    def verdict(self) -> str:
        severities = {r.severity for r in self.reasons}
        return "never" if "error" in severities else "borrows" if "warning" in severities else "fits"

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.cluster, self.workload.namespace, self.workload.job)

    def to_json(self) -> dict[str, Any]:
        w = self.workload
        return {"cluster": self.cluster, "namespace": w.namespace, "job": w.job, "kind": w.kind, "name": w.name,
                "pool": self.pool, "queue": w.queue, "cluster_queue": self.cluster_queue, "flavor": self.flavor,
                "pods": w.pods, "accelerators": w.accelerators, "nodes_needed": self.nodes_needed,
                "pool_nodes": self.pool_nodes, "quota": self.quota, "potential": self.potential,
                "verdict": self.verdict,
                "reasons": [{"code": r.code, "severity": r.severity, "field": r.field, "message": r.message,
                             "fix": r.fix} for r in self.reasons],
                "notes": self.notes, "memory": self.memory}


@dataclass
class PoolPlan:
    """What a pool's declared jobs need together, against what it can have."""

    cluster: str
    pool: Pool
    demand: list[tuple[str, int]]  # (namespace/job, nodes), in declaration order

    @property
    def total(self) -> int:
        return sum(n for _, n in self.demand)

    def at_once(self) -> list[str]:
        """The jobs that can run together, taken in declaration order while they fit."""
        room, together = self.pool.capacity_nodes, []
        for job, nodes in self.demand:
            if room is None or nodes <= room:
                together.append(job)
                room = None if room is None else room - nodes
        return together

    def to_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "pool": self.pool.name, "capacity_nodes": self.pool.capacity_nodes,
                "limited_by": self.pool.limited_by.split(":")[0], "demand_nodes": self.total,
                "jobs": [{"job": job, "nodes": nodes} for job, nodes in self.demand], "at_once": self.at_once()}


def plan_cluster(objects: ClusterObjects) -> tuple[list[JobPlan], list[PoolPlan]]:
    jobs = plan_jobs(objects, CohortTree(objects.cluster_queues, objects.cohorts), objects.workloads)
    pools = []
    for name, pool in sorted(objects.pools.items()):
        demand = [(f"{j.workload.namespace}/{j.workload.job}", j.nodes_needed) for j in jobs
                  if j.pool == name and j.nodes_needed]
        pools.append(PoolPlan(objects.name, pool, demand))
    return jobs, pools


def plan_jobs(objects: ClusterObjects, tree: CohortTree, workloads: Sequence[Workload]) -> list[JobPlan]:
    """Every workload's plan. A verdict depends on a workload's namespace, queue, pod sets and elastic minimum
    only (its messages name nothing else), so workloads alike in those are judged once: a fleet of many runs of
    a few shapes costs a few judgments."""
    judged: dict[tuple[Any, ...], JobPlan] = {}
    plans = []
    for workload in workloads:
        key = (workload.namespace, workload.queue, workload.min_pods, repr(workload.pod_sets))
        alike = judged.get(key)
        if alike is None:
            alike = judged[key] = plan_job(objects, tree, workload)
            plans.append(alike)
        else:
            plans.append(replace(alike, workload=workload, reasons=list(alike.reasons), notes=list(alike.notes)))
    return plans


def plan_job(objects: ClusterObjects, tree: CohortTree, workload: Workload) -> JobPlan:
    plan = JobPlan(objects.name, workload, pool=workload.pool)
    if workload.pool is not None:
        pool = objects.pools.get(workload.pool)
        if pool is None:
            plan.notes.append(f"its pods select pool {workload.pool}, which is not among this cluster's NodePools")
        else:
            _check_pool(plan, pool)
    if workload.queue is not None:
        _check_queue(plan, objects, tree)
    return plan


# -- the pool ---------------------------------------------------------------------------------------

def _check_pool(plan: JobPlan, pool: Pool) -> None:
    workload = plan.workload
    pod_sets = [p for p in workload.pod_sets if p.pool == pool.name]
    _check_domains(plan, pool, pod_sets)
    needed = nodes_needed(pool, pod_sets)
    plan.nodes_needed, plan.pool_nodes = needed, pool.capacity_nodes
    capacity = pool.capacity_nodes
    if needed is None or capacity is None:
        return
    field, gang = "nodes", needed
    if needed > capacity and workload.min_pods is not None:
        fewest = nodes_needed(pool, [replace(p, count=min(p.count, workload.min_pods)) for p in pod_sets]) or 0
        if fewest <= capacity:
            plan.notes.append(f"elastic: {needed} nodes for all its pods, and pool {pool.name} has at most "
                              f"{capacity}; it trains with those that start")
            return
        field, gang = "elastic.min_nodes", fewest
    if gang > capacity:
        rule = admission_rules.RESERVATION_TOO_SMALL if pool.limited_by.startswith("reserved") else admission_rules.POOL_TOO_SMALL
        shapes = {tuple(sorted(p.requests.items())) for p in pod_sets}
        per_node = pods_per_node(pool, pod_sets[0].requests) if len(shapes) == 1 else None
        packing = f" ({per_node} per node)" if per_node else ""
        plan.reasons.append(Reason(
            rule.code, field, f"its pods{packing} need {gang} nodes of pool {pool.name} at once; the pool can have "
            f"at most {capacity} ({pool.limited_by})",
            f"lower {field} so the pods fit {capacity} nodes, or {_grow(pool)}"))


def _grow(pool: Pool) -> str:
    if pool.static_nodes is not None:
        return "raise the pool's static_nodes"
    if pool.limited_by.startswith("reserved"):
        return "reserve more instances and raise the pool's reserved_nodes"
    return "raise the pool's max_nodes"


def _check_domains(plan: JobPlan, pool: Pool, pod_sets: Sequence[PodSet]) -> None:
    """Kueue places a pod set with a required topology in one domain of its level."""
    for pod_set in pod_sets:
        placement = pod_set.placement
        if placement is None or placement.mode != "required" or not placement.level:
            continue
        needed = nodes_needed(pool, [pod_set])
        size = domain_nodes(pool, placement.level)
        if needed is None or needed <= 1:
            continue
        if size is None:
            plan.notes.append(f"pod set {pod_set.name} needs {needed} nodes in one {placement.level} domain; how many "
                              f"nodes of pool {pool.name} share one is unknown offline (the pool's "
                              "topology_domain_nodes says it when you know)")
        elif needed > size:
            plan.reasons.append(Reason(
                admission_rules.DOMAIN_TOO_SMALL.code, "placement.level",
                f"pod set {pod_set.name} needs {needed} nodes in one {placement.level} domain; pool {pool.name} has "
                f"at most {size} in one", admission_rules.DOMAIN_TOO_SMALL.fix))


# -- the queue --------------------------------------------------------------------------------------

def _check_queue(plan: JobPlan, objects: ClusterObjects, tree: CohortTree) -> None:
    workload = plan.workload
    local = objects.local_queues.get((workload.namespace, workload.queue))
    if local is None:
        elsewhere = sorted(ns for ns, name in objects.local_queues if name == workload.queue)
        where = f" (LocalQueue {workload.queue} is in {', '.join(elsewhere)})" if elsewhere else ""
        plan.reasons.append(Reason(admission_rules.QUEUE_ELSEWHERE.code, "queue", f"there is no LocalQueue {workload.queue} in "
                                   f"the job's namespace {workload.namespace}{where}", admission_rules.QUEUE_ELSEWHERE.fix))
        return
    queue = objects.cluster_queues.get(local.cluster_queue)
    if queue is None:
        plan.reasons.append(Reason(admission_rules.QUEUE_ELSEWHERE.code, "queue", f"LocalQueue {local.name} points at "
                                   f"ClusterQueue {local.cluster_queue}, which does not exist",
                                   "create the ClusterQueue, or point the LocalQueue at one that exists"))
        return
    plan.cluster_queue = queue.name
    labels = objects.namespaces.get(workload.namespace, {"kubernetes.io/metadata.name": workload.namespace})
    if not selector_matches(queue.namespace_selector, labels):
        plan.reasons.append(Reason(admission_rules.NAMESPACE_EXCLUDED.code, "queue", f"ClusterQueue {queue.name} (behind "
                                   f"LocalQueue {local.name}) does not admit namespace {workload.namespace}: its "
                                   "namespaceSelector excludes it", admission_rules.NAMESPACE_EXCLUDED.fix))
        return
    cycle = tree.in_cycle(queue.name)
    if cycle:
        plan.reasons.append(Reason(admission_rules.QUOTA_NEVER.code, "queue", f"cohort {cycle} of ClusterQueue {queue.name} is in "
                                   "a cycle of parents, and Kueue disables every member of such a tree",
                                   "break the cycle of Cohort parents"))
        return
    assigner = FlavorAssigner(objects, tree, queue)
    if not _structure_fits(plan, assigner):
        return
    _check_quota(plan, assigner)


def _structure_fits(plan: JobPlan, assigner: FlavorAssigner) -> bool:
    """Every requested resource is covered, and some flavor of each resource group takes each pod set."""
    queue, workload = assigner.queue, plan.workload
    uncovered: dict[str, None] = {}
    unmatched: dict[str, tuple[list[str], list[tuple[str, Mismatch]]]] = {}
    for pod_set in workload.pod_sets:
        requests = assigner.requests(pod_set)
        uncovered.update({r: None for r in sorted(requests) if requests[r] and queue.group_of(r) is None})
        for group in dict.fromkeys(g for r in requests if (g := queue.group_of(r)) is not None):
            found = [(f, assigner.mismatch(pod_set, f, group)) for f in group.flavors]
            if all(m is not None for _, m in found):
                text = "; ".join(f"flavor {f}: {m.text}" for f, m in found) or "it has no flavors"
                unmatched.setdefault(text, ([], found))[0].append(pod_set.name)
    covered = sorted({r for g in queue.groups for r in g.covered})
    # A pod set no flavor takes is the first thing to fix: its pool's resources are often what is not covered.
    for resource in uncovered if not unmatched else ():
        plan.reasons.append(Reason(admission_rules.UNCOVERED.code, RESOURCE_FIELDS.get(resource, "resources"),
                                   f"its pods request {resource}, which ClusterQueue {queue.name} does not cover "
                                   f"(it covers {', '.join(covered) or 'nothing'})", admission_rules.UNCOVERED.fix))
    for text, (names, found) in unmatched.items():
        topology = all(m.kind == "topology" for _, m in found) and any(
            p.placement for p in workload.pod_sets if p.name in names)
        code, field = (PLACEMENT_LEVEL_CODE, "placement.level") if topology else (
            admission_rules.NO_FLAVOR.code, "pool" if workload.pool else "queue")
        pods = "pod set" if len(names) == 1 else "pod sets"
        plan.reasons.append(Reason(code, field, f"no flavor of ClusterQueue {queue.name} takes {pods} "
                                   f"{', '.join(names)}: {text}", admission_rules.NO_FLAVOR.fix if not topology else
                                   "name a level of the Topology of the flavor for the job's pool, or give that "
                                   "flavor a Topology with the level"))
    return not uncovered and not unmatched


def _check_quota(plan: JobPlan, assigner: FlavorAssigner) -> None:
    queue, tree, pod_sets = assigner.queue, assigner.tree, plan.workload.pod_sets

    def potential(open_outside: bool) -> Callable[[FlavorResource], Amount]:
        return lambda fr: tree.queue_potential(queue.name, fr, open_outside)

    try:
        if assigner.search(pod_sets, potential(True)) is None:
            plan.reasons.append(_never(plan, assigner))
            return
        # Kueue's pick on an idle cluster: with whenCanBorrow MayStopSearch, the first flavor that fits, even
        # by borrowing, wins over a later one that fits within the nominal quota.
        assignment = assigner.assign(pod_sets)
        if assignment.fits:
            chosen = [r.flavors for r in assignment.pod_sets]
            if any(r.lenders for r in assignment.pod_sets):
                plan.reasons.append(_borrowing(plan, assigner, chosen))
        else:
            # One pass cannot place every pod set (an earlier one took the quota a later one needed); Kueue
            # retries from the flavors after those it tried, so any combination can be reached.
            chosen = assigner.search(pod_sets, lambda fr: tree.nominal(queue.name, fr))
            if chosen is None:
                chosen = assigner.search(pod_sets, potential(False))
                plan.reasons.append(_borrowing(plan, assigner, chosen))
    except Undecided:
        plan.notes.append(f"too many ways to spread its pod sets over ClusterQueue {queue.name}'s flavors to decide "
                          "offline")
        return
    _show_quota(plan, assigner, chosen or [])


def _totals(assigner: FlavorAssigner, pod_sets: Sequence[PodSet]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for pod_set in pod_sets:
        for resource, value in assigner.requests(pod_set).items():
            totals[resource] = totals.get(resource, 0) + value
    return totals


def _quota_text(assigner: FlavorAssigner, fr: FlavorResource) -> str:
    """The queue's quota of one flavor-resource, and what its cohort adds."""
    queue, tree = assigner.queue, assigner.tree
    nominal, resource = tree.nominal(queue.name, fr), fr[1]
    text = f"nominal quota {show(resource, nominal)}"
    path = tree.path(queue.name)
    if not path:
        return f"{text}, no cohort"
    outside = tree.outside_cohort(queue.name)
    if outside:
        upper = tree.queue_potential(queue.name, fr, open_outside=True)
        more = f"at most {show(resource, upper - nominal)}" if upper != UNLIMITED else "an unknown amount"
        return f"{text}, plus {more} through cohort {outside}, which is defined outside the fleet"
    lent = max(0, tree.queue_potential(queue.name, fr) - nominal)
    return f"{text}, plus {show(resource, lent)} cohort {path[0]} can lend"


def _never(plan: JobPlan, assigner: FlavorAssigner) -> Reason:
    queue, tree, workload = assigner.queue, assigner.tree, plan.workload
    totals = _totals(assigner, workload.pod_sets)
    usable = list(dict.fromkeys(f for p in workload.pod_sets for g in queue.groups for f in g.flavors
                                if any(r in g.covered for r in assigner.requests(p))
                                and assigner.mismatch(p, f, g) is None))
    lines, fields, best = [], [], None
    for flavor in usable:
        over = []  # (how many times over, resource, limit): the worst one is named
        for resource in sorted(totals):
            group = queue.group_of(resource)
            if group is not None and flavor in group.flavors:
                limit = tree.queue_potential(queue.name, (flavor, resource), open_outside=True)
                if totals[resource] > limit:
                    over.append((totals[resource] / limit if limit else UNLIMITED, resource, limit))
        over.sort(key=lambda o: -o[0])
        fields += [f"quotas.{flavor}.{resource}" for _, resource, _ in over]
        if over:
            _, resource, limit = over[0]
            lines.append(f"{show(resource, totals[resource])} {resource} in flavor {flavor}, which can give it at "
                         f"most {show(resource, limit)} ({_quota_text(assigner, (flavor, resource))})")
    shapes = {tuple(sorted(assigner.requests(replace(p, count=1)).items())) for p in workload.pod_sets}
    if len(shapes) == 1:  # one shape of pod: how many of them the roomiest flavor admits
        per_pod = dict(next(iter(shapes)))
        for flavor in usable:
            limits = [(tree.queue_potential(queue.name, (flavor, r), True), v) for r, v in per_pod.items()
                      if v and (g := queue.group_of(r)) is not None and flavor in g.flavors]
            fits = [int(limit // v) for limit, v in limits if limit != UNLIMITED]
            if fits:
                best = max(best or 0, min(fits))
    detail = "; ".join(lines) or "its pod sets cannot be spread over the flavors within what each can give it"
    room = f"lower nodes to at most {best}" if best is not None and best < workload.pods else "lower nodes"
    others = f" (and {', '.join(fields[1:])})" if fields[1:] else ""
    quotas = f"{fields[0]}{others}" if fields else "quotas"
    return Reason(admission_rules.QUOTA_NEVER.code, "nodes", f"ClusterQueue {queue.name} (behind LocalQueue {workload.queue}) "
                  f"can never admit its {workload.pods} pods: they request {detail}",
                  f"{room}, or raise ClusterQueue {queue.name}'s {quotas}, what its cohort lends, or its "
                  "borrowing_limit")


def _borrowing(plan: JobPlan, assigner: FlavorAssigner, chosen: list[dict[str, str]] | None) -> Reason:
    queue, tree, workload = assigner.queue, assigner.tree, plan.workload
    outside = tree.outside_cohort(queue.name)
    if chosen is None:  # fits only if a cohort outside the fleet lends: unknown offline
        return Reason(admission_rules.BORROWS.code, "queue", f"ClusterQueue {queue.name} admits it only by borrowing through "
                      f"cohort {outside}, which is defined outside the fleet: whether it can lend enough is unknown "
                      "offline", admission_rules.BORROWS.fix)
    used: dict[FlavorResource, int] = {}
    for pod_set, flavors in zip(workload.pod_sets, chosen):
        requests = assigner.requests(pod_set)
        for resource, flavor in flavors.items():
            used[(flavor, resource)] = used.get((flavor, resource), 0) + requests[resource]
    lines = []
    for (flavor, resource), total in used.items():
        nominal = tree.nominal(queue.name, (flavor, resource))
        if total > nominal:
            lender = tree.lender(queue.name, (flavor, resource), total)[1]
            lines.append(f"{show(resource, total)} {resource} in flavor {flavor} against a nominal quota of "
                         f"{show(resource, nominal)}, the rest lent by cohort {lender}")
    return Reason(admission_rules.BORROWS.code, "queue", f"ClusterQueue {queue.name} admits it only by borrowing: "
                  f"{'; '.join(lines)}, while other queues leave it unused", admission_rules.BORROWS.fix)


def _show_quota(plan: JobPlan, assigner: FlavorAssigner, flavors: Sequence[dict[str, str]]) -> None:
    requested = {r for p in plan.workload.pod_sets for r, v in p.requests.items() if v}
    resource = next((a for a in ACCELERATOR_RESOURCES if a in requested), CPU)
    flavor = next((f[resource] for f in reversed(flavors) if resource in f), None)
    if flavor is None:
        return
    queue, tree = assigner.queue, assigner.tree
    plan.flavor = flavor
    plan.quota = f"{show(resource, tree.nominal(queue.name, (flavor, resource)))} {resource}"
    potential = tree.queue_potential(queue.name, (flavor, resource))
    unknown = "+" if tree.outside_cohort(queue.name) else ""
    plan.potential = f"{show(resource, potential)}{unknown} {resource}"
