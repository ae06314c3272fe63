"""The fleet's declared runs as the simulation's workloads: what each asks for, where it queues, at which
priority, when it is submitted and how long it runs.

Read from one cluster's objects in dist/ (kubetrain.admission.cluster_objects), like `kubetrain plan`:

- the ClusterQueue: the LocalQueue its `kueue.x-k8s.io/queue-name` label names (a run with no queue label is
  not Kueue's to schedule, and is left out of the simulation);
- the priority, as Kueue v0.19.2 gives a workload one (pkg/util/priority): the value of the
  WorkloadPriorityClass its `kueue.x-k8s.io/priority-class` label names, else of the PriorityClass its pods'
  `priorityClassName` names, else of the cluster's `globalDefault` PriorityClass, else 0;
- the duration: `kubetrain cost`'s hours at the node count it starts with (FLOPs over the accelerators' peak x
  MFU x ETTR, kubetrain.cost.estimate: the time lost to failures and restarts at the runtime's ETTR is in it);
  a duration the user gives wins, and a run with neither is left out with a note saying how to give one;
- the submission time: now (0) unless the user gives one, in hours from now.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubetrain.admission.cluster_objects import ClusterObjects
from kubetrain.cost.estimate import JobCost, fleet_costs
from kubetrain.kinds.kind_registry import group_kind, kind_of, run_kind, shape_of
from kubetrain.model.pod_sets import PodSet
from kubetrain.model.vocabulary import ACCELERATOR_RESOURCES

PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"  # names a WorkloadPriorityClass
HOUR = 3600.0


@dataclass(frozen=True)
class RunSpec:
    """A workload before a replica of the simulation runs it: `kubetrain.schedule.forecast` makes a fresh
    SimWorkload of it per replica."""

    key: str  # cluster/namespace/job for a declared run, cluster/class/index for background load
    cluster: str
    cluster_queue: str
    priority: int
    submitted_hours: float
    pod_sets: tuple[PodSet, ...]
    hours: float
    pool: str | None = None
    declared: bool = True
    node_usd: float | None = None  # one node's hourly price, for the dollars of waiting
    nodes: int = 0  # pods of the run (one per node for kubetrain's runs)

    @property
    def gpus(self) -> int:
        return sum(p.count * p.requests.get(a, 0) for p in self.pod_sets for a in ACCELERATOR_RESOURCES)


@dataclass
class DeclaredRuns:
    runs: list[RunSpec] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # runs left out, and why


def priority_classes(manifests: Iterable[Mapping[str, Any]]) -> tuple[dict[str, int], dict[str, int], int]:
    """(WorkloadPriorityClass values, PriorityClass values, the globalDefault PriorityClass's value or 0)."""
    workload_classes: dict[str, int] = {}
    pod_classes: dict[str, int] = {}
    default = 0
    for obj in manifests:
        group, kind = group_kind(obj)
        name = str((obj.get("metadata") or {}).get("name", ""))
        if (group, kind) == ("kueue.x-k8s.io", "WorkloadPriorityClass"):
            workload_classes[name] = int(obj.get("value") or 0)
        elif (group, kind) == ("scheduling.k8s.io", "PriorityClass"):
            pod_classes[name] = int(obj.get("value") or 0)
            if obj.get("globalDefault"):
                default = pod_classes[name]
    return workload_classes, pod_classes, default


def run_priority(obj: Mapping[str, Any], pod_specs: list[Mapping[str, Any]],
                 classes: tuple[dict[str, int], dict[str, int], int]) -> int:
    """Kueue's priority of the workload of run object `obj` (see the module docstring)."""
    workload_classes, pod_classes, default = classes
    label = ((obj.get("metadata") or {}).get("labels") or {}).get(PRIORITY_CLASS_LABEL)
    if label and label in workload_classes:
        return workload_classes[label]
    name = next((p.get("priorityClassName") for p in pod_specs if p.get("priorityClassName")), None)
    if name and name in pod_classes:
        return pod_classes[name]
    return default


def job_key(cluster: str, namespace: str, job: str) -> str:
    return f"{cluster}/{namespace}/{job}"


def declared_runs(cluster: str, manifests: list[Mapping[str, Any]], objects: ClusterObjects,
                  durations: Mapping[str, float] | None = None,
                  submissions: Mapping[str, float] | None = None) -> DeclaredRuns:
    """The queued runs of one cluster; `durations` and `submissions` are hours by job key (cluster/ns/job)."""
    durations, submissions = durations or {}, submissions or {}
    classes = priority_classes(manifests)
    index = {(str(m.get("kind")), (m.get("metadata") or {}).get("namespace") or "",
              (m.get("metadata") or {}).get("name")): m for m in manifests}
    costs: dict[tuple[str, str, str], JobCost] = {c.key: c for c in fleet_costs([(cluster, dict(m)) for m in manifests])}
    found = DeclaredRuns()
    for workload in objects.workloads:
        key = job_key(cluster, workload.namespace, workload.job)
        local = objects.local_queues.get((workload.namespace, workload.queue or ""))
        if workload.queue is None:
            continue  # not Kueue's: its pods go straight to the scheduler
        if local is None or local.cluster_queue not in objects.cluster_queues:
            found.notes.append(f"{key}: its queue {workload.queue} leads to no ClusterQueue of {cluster}: not "
                               "simulated (kubetrain plan says why)")
            continue
        obj = index.get((workload.kind, workload.namespace, workload.name)) or {}
        namespace = workload.namespace

        def sibling(kind: str, name: str) -> dict[str, Any] | None:
            found_obj = index.get((kind, namespace, name)) or index.get((kind, "", name))
            return dict(found_obj) if found_obj is not None else None

        pod_specs = shape_of(obj, sibling).pod_specs if run_kind(obj) is not None and kind_of(obj) else []
        cost = costs.get((cluster, workload.namespace, workload.job))
        nodes = cost.node_range[1] if cost is not None else workload.pods
        hours = durations.get(key, cost.hours(nodes) if cost is not None else None)
        if hours is None:
            found.notes.append(f"{key}: no duration (kubetrain cost has no hours for it): not simulated; give "
                               f"one with --duration {key}=HOURS")
            continue
        found.runs.append(RunSpec(key, cluster, local.cluster_queue, run_priority(obj, pod_specs, classes),
                                  submissions.get(key, 0.0), workload.pod_sets, hours, workload.pool, True,
                                  cost.price.usd if cost is not None and cost.price is not None else None, nodes))
    return found
