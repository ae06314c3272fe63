"""One workload as the simulation follows it: what it asks for, where it queues, and what happens to it.

Kueue orders a ClusterQueue's pending workloads by priority, then by the queue-ordering timestamp (the
creation time: a workload evicted by preemption keeps it, Kueue v0.19.2 pkg/workload/ordering.go), then by
UID; `order_key` is that order. `shape` is Kueue's scheduling equivalence hash (pkg/workload, the
SchedulingEquivalenceHashing gate, on by default since v0.18): workloads of one ClusterQueue with equal pod
sets and priority fare alike, so one that does not fit parks them all until capacity frees.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kubetrain.admission.cluster_objects import FlavorResource
from kubetrain.model.pod_sets import PodSet


@dataclass(eq=False)
class SimWorkload:
    key: str  # cluster/namespace/job for a declared run; class/index for background load
    cluster_queue: str
    priority: int
    created: float  # seconds from the start of the simulation
    pod_sets: tuple[PodSet, ...]
    duration: float  # seconds of running it needs
    uid: int = 0  # Kueue's last tie-break: submission order
    pool: str | None = None
    declared: bool = True  # the fleet's own run, reported; background load is not
    # what happens to it
    remaining: float = 0.0
    flavors: list[dict[str, str]] | None = None  # per pod set: resource -> flavor, while admitted
    usage: dict[FlavorResource, int] = field(default_factory=dict)  # quota it holds while admitted
    admitted_at: float | None = None  # first admission
    reserved_at: float | None = None  # the current admission (Kueue's QuotaReserved time)
    written_at: float | None = None  # the current admission on the API server (Kueue's patch landed)
    condition: tuple | None = None  # the pending condition Kueue last wrote on it (outcome, "N more needed")
    started_at: float | None = None  # its pods first ran (nodes ready)
    run_started: float | None = None  # the current stretch of running
    finished_at: float | None = None
    preempted_at: list[float] = field(default_factory=list)
    preempted_by: list[str] = field(default_factory=list)
    nodes: int = 0  # nodes of its pool it holds while running
    generation: int = 0  # bumped on each eviction: a stale finish event is ignored

    def __post_init__(self) -> None:
        self.remaining = self.duration
        self.shape = (self.cluster_queue, self.priority, tuple(
            (tuple(sorted(p.requests.items())), p.count, p.placement, tuple(sorted(p.node_selector.items())))
            for p in self.pod_sets))

    @property
    def order_key(self) -> tuple[int, float, int]:
        return (-self.priority, self.created, self.uid)

    @property
    def admitted(self) -> bool:
        return self.flavors is not None
