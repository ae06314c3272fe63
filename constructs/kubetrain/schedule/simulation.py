"""The schedule over time: workloads arrive, Kueue admits them cycle by cycle, their pods wait for nodes,
they run for their duration, finish or are preempted, and quota frees.

Events (arrivals, finishes, releases, nodes ready) are applied at their own times, and a cycle sees those that
happened before it began; cycles run back to back while one admits or preempts, and again after an event that
could change what they decide (an arrival, quota freed). Each cycle takes `cycle_seconds` of simulated time,
and `head_seconds` more per head it nominates (Kueue's cycle assigns flavors to each head and writes each
admission; 0: instantaneous, right for runs of hours; Kueue's own scheduler performance scenario calibrates it).
A finished run's quota is released `release_seconds` after its end (the time Kueue's controllers take to see it
end; 0 by default, "releasing" in the segments meanwhile). Quota freed in a cohort tree requeues its parked
workloads `requeue_seconds` later, the releases meanwhile batched into one (0 by default: at once; Kueue's
requeuer waits KUEUE_REQUEUE_SECONDS). `api_writes` (writes per second, burst) puts Kueue's
API writes through its client's rate limiter (kubetrain.schedule.api_writes): an admission counts its quota
from the cycle that assumed it but shows on the API server, and its pods start, only when its patch lands; an
eviction frees the quota when its patch lands; the cycle waits for its evictions and for the condition it writes
on each head it did not admit (when that changed). None (the default): writes land at once, right for runs of
hours on a cluster at Kueue's default 300/s. A preempted run is requeued with its creation time
and resumes where it stopped (the runtime checkpoints; `restart_seconds` is added to what is left).

Pools (kubetrain.admission.capacity): an admitted job's pods need `nodes_needed` nodes of its pool. A static
pool has its `replicas` and no more; a Karpenter pool launches nodes up to its most nodes, each ready
`provisioning_seconds` after it is asked for, and keeps freed nodes for the next job (consolidation is left
out). Pods that find no node wait, first fit in admission order; the quota stays held.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kubetrain.admission.capacity import nodes_needed
from kubetrain.admission.cluster_objects import ClusterObjects, FlavorResource, Pool
from kubetrain.admission.quota import CohortTree
from kubetrain.schedule.api_writes import WriteLimiter
from kubetrain.schedule.assignment import LoadedAssigner, LoadedAssignment
from kubetrain.schedule.cycle import CycleResult, Entry, Scheduler
from kubetrain.schedule.ledger import Ledger, cq
from kubetrain.schedule.pending import PendingQueue
from kubetrain.schedule.preemption import Preemptor
from kubetrain.schedule.workload_state import SimWorkload

PROVISIONING_SECONDS = 300.0  # a Karpenter node from launch to Ready: EC2 boot, kubelet join, GPU drivers
# Kueue's inadmissible-workload requeuer waits this long after quota frees in a cohort tree before it moves the
# tree's parked workloads back to their heaps, batching the releases meanwhile into one requeue (v0.19.2
# pkg/cache/queue/inadmissible_workloads.go requeueBatchPeriod, NewRequeuer: a delaying workqueue, AddAfter).
KUEUE_REQUEUE_SECONDS = 1.0


@dataclass
class PoolState:
    pool: Pool | None
    name: str
    nodes: int = 0  # existing nodes (a static pool's replicas from the start)
    busy: int = 0
    provisioning: int = 0
    waiting: list[SimWorkload] = field(default_factory=list)

    @property
    def limit(self) -> int | None:
        return self.pool.capacity_nodes if self.pool is not None else None

    @property
    def static(self) -> bool:
        return self.pool is not None and self.pool.static_nodes is not None


@dataclass
class Segment:
    """One stretch of a workload's life, for the timeline: pending, admitted (waiting for nodes) or running."""

    workload: SimWorkload
    state: str
    start: float
    end: float
    cluster_queue: str
    flavor: str | None = None
    pool: str | None = None


@dataclass
class Outcome:
    workloads: list[SimWorkload]
    segments: list[Segment]
    cycles: int
    end: float


class Simulation:
    def __init__(self, objects: ClusterObjects, workloads: Sequence[SimWorkload], *, cycle_seconds: float = 0.0,
                 head_seconds: float = 0.0, release_seconds: float = 0.0,
                 fair_sharing: bool | None = None, provisioning_seconds: float = PROVISIONING_SECONDS,
                 restart_seconds: float = 0.0, api_writes: tuple[float, int] | None = None,
                 requeue_seconds: float = 0.0,
                 record: bool = True):
        self.objects = objects
        tree = CohortTree(objects.cluster_queues, objects.cohorts)
        if fair_sharing is None:  # Kueue's fair sharing is the cluster's setting: on where the fleet sets weights
            fair_sharing = any(h.fair_weight is not None for h in [*objects.cluster_queues.values(),
                                                                    *objects.cohorts.values()])
        weights = {**{cq(n): q.fair_weight for n, q in objects.cluster_queues.items() if q.fair_weight is not None},
                   **{("Cohort", n): c.fair_weight for n, c in objects.cohorts.items() if c.fair_weight is not None}}
        self.ledger = Ledger(tree, weights)
        queues = objects.cluster_queues
        self.pending = {n: PendingQueue(n, q.queueing_strategy) for n, q in queues.items()}
        self.admitted: dict[str, dict[int, SimWorkload]] = {n: {} for n in queues}
        self.preemptor = Preemptor(self.ledger, queues, self.admitted, fair_sharing)
        assigners = {n: LoadedAssigner(objects, self.ledger, q, fair_sharing) for n, q in queues.items()}
        self.scheduler = Scheduler(self.ledger, queues, assigners, self.pending, self.preemptor, fair_sharing)
        self.pools = {n: PoolState(p, n, p.static_nodes or 0) for n, p in objects.pools.items()}
        self.roots = {n: (tree.path(n) or [f"queue {n}"])[-1] for n in queues}
        self.cycle_seconds, self.provisioning, self.restart = cycle_seconds, provisioning_seconds, restart_seconds
        self.head_seconds, self.release_seconds = head_seconds, release_seconds
        self.api_writes = WriteLimiter(*api_writes) if api_writes is not None else None
        self.requeue_seconds = requeue_seconds
        self._requeues: set[str] = set()  # root cohorts with a requeue on its way
        self._busy_until = float("-inf")  # the scheduler waits for its own writes until then
        self._stale = True  # whether a scheduling cycle could decide anything new
        self.record = record
        self.workloads = list(workloads)
        self.segments: list[Segment] = []
        self._since: dict[int, tuple[str, float]] = {}  # uid -> (state, since)
        self._events: list[tuple[float, int, str, object]] = []
        self._seq = 0
        self.now = min((w.created for w in self.workloads), default=0.0)
        self.cycles = 0
        for i, w in enumerate(self.workloads):
            w.uid = w.uid or i + 1
            self._at(w.created, "arrive", w)

    def admitted_already(self, w: SimWorkload, flavors: Sequence[Mapping[str, str]]) -> None:
        """Start with `w` admitted on `flavors` (per pod set: resource -> flavor), holding the quota Kueue counts
        for it: a Kueue test case's admitted workloads, or a cluster's running ones."""
        usage: dict[FlavorResource, int] = {}
        for pod_set, chosen in zip(w.pod_sets, flavors):
            for resource, flavor in chosen.items():
                usage[(flavor, resource)] = usage.get((flavor, resource), 0) + \
                    pod_set.requests.get(resource, 0) * pod_set.count
        self.workloads.append(w)
        w.uid = w.uid or len(self.workloads)
        self._assume(w, LoadedAssignment([dict(f) for f in flavors], usage=usage))
        self._on_written((w, w.generation))

    def first_cycle(self) -> CycleResult:
        """What has arrived by now, and one scheduling cycle: Kueue's scheduler tests judge exactly that."""
        self._apply_events()
        self.cycles += 1
        return self.scheduler.run(self._evict, self._admit)

    # -- events ----------------------------------------------------------------------------------------

    def _at(self, time: float, kind: str, payload: object) -> None:
        self._seq += 1
        heapq.heappush(self._events, (time, self._seq, kind, payload))

    def _state(self, w: SimWorkload, state: str | None) -> None:
        """Close the workload's current segment and open one in `state` (None: it is done)."""
        if not self.record:
            return
        previous = self._since.pop(w.uid, None)
        if previous is not None and self.now > previous[1]:
            flavor = next((f for fl in w.flavors or [] for f in fl.values()), None)
            self.segments.append(Segment(w, previous[0], previous[1], self.now, w.cluster_queue, flavor, w.pool))
        if state is not None:
            self._since[w.uid] = (state, self.now)

    def _apply_events(self) -> None:
        """Apply every event due by now, each at its own time: a run that ends during a cycle ends then (its
        finish, its release and the usage it held are timed by it), but the scheduler sees it only from the
        next cycle, as Kueue's cycle works on the snapshot it took when it began."""
        boundary = self.now
        while self._events and self._events[0][0] <= boundary:
            self.now, _, kind, payload = heapq.heappop(self._events)
            getattr(self, f"_on_{kind}")(payload)
        self.now = boundary

    def run(self, until: float | None = None) -> Outcome:
        while True:
            self._apply_events()
            changed = False
            # A cycle runs when something it reads changed: a workload arrived or came back, quota freed, or
            # the last cycle admitted or preempted (nodes coming up, a run ending before its release change
            # nothing it reads).
            if self._stale and any(self.pending.values()):
                self.cycles += 1
                result = self.scheduler.run(self._evict, self._admit)
                changed = result.changed
                spent = self.cycle_seconds + self.head_seconds * len(result.entries) if changed else 0.0
                self._busy_until = max(self._busy_until, self._write_conditions(result.entries, self.now + spent))
            self._stale = changed
            if changed:
                self.now = max(self.now, self._busy_until)
                continue
            if not self._events or (until is not None and self._events[0][0] > until):
                break
            self.now = max(self.now + self.cycle_seconds, self._busy_until, self._events[0][0])
        for w in self.workloads:
            self._state(w, None)
        return Outcome(self.workloads, self.segments, self.cycles, self.now)

    def _write_conditions(self, entries: list[Entry], start: float) -> float:
        """When the cycle's last write of a pending head's condition lands: Kueue writes them one after
        another at the end of the cycle (scheduler.go requeueAndUpdate), each only when its message changed
        (a head skipped, or "N more needed" of another N)."""
        end = start
        for e in entries:
            if e.outcome in ("nofit", "waiting", "skipped") and e.workload.condition != (e.outcome, e.shortfall):
                e.workload.condition = (e.outcome, e.shortfall)
                if self.api_writes is not None:
                    end = self.api_writes.reserve(end)
        return end

    def _on_arrive(self, w: SimWorkload) -> None:
        if w.cluster_queue not in self.pending:
            return
        self.pending[w.cluster_queue].push(w)
        self._state(w, "pending")
        self._stale = True

    def _on_finish(self, payload: object) -> None:
        w, generation = payload  # type: ignore[misc]
        if generation != w.generation:
            return
        w.finished_at = self.now
        w.remaining = 0.0
        if self.release_seconds:
            self._state(w, "releasing")
            self._at(self.now + self.release_seconds, "release", (w, generation))
            return
        self._release(w)
        self._state(w, None)

    def _on_release(self, payload: object) -> None:
        w, generation = payload  # type: ignore[misc]
        if generation == w.generation:
            self._release(w)
            self._state(w, None)

    def _on_nodes(self, payload: object) -> None:
        state, count = payload  # type: ignore[misc]
        state.provisioning -= count
        state.nodes += count
        self._start_waiting(state)

    # -- what the cycle does ---------------------------------------------------------------------------

    def _admit(self, w: SimWorkload, assignment: LoadedAssignment) -> None:
        """The cycle admits `w`: assumed now, on the API server when its patch lands."""
        self._assume(w, assignment)
        if self.api_writes is None:
            self._on_written((w, w.generation))
            return
        self._state(w, "admitted")
        self._at(self.api_writes.reserve(self.now), "written", (w, w.generation))

    def _assume(self, w: SimWorkload, assignment: LoadedAssignment) -> None:
        """Kueue's assumeWorkload: the quota counts from now (QuotaReserved is stamped now)."""
        w.flavors, w.usage = assignment.flavors, dict(assignment.usage)
        w.reserved_at = self.now
        w.condition, w.nodes = None, 0
        if w.admitted_at is None:
            w.admitted_at = self.now
        self.ledger.add(cq(w.cluster_queue), w.usage)
        self.admitted[w.cluster_queue][w.uid] = w

    def _on_written(self, payload: object) -> None:
        """The admission is on the API server: the job's pods are created and look for nodes."""
        w, generation = payload  # type: ignore[misc]
        if generation != w.generation:
            return
        w.written_at = self.now
        state = self.pools.get(w.pool or "")
        w.nodes = (nodes_needed(state.pool, w.pod_sets) or 0) if state is not None and state.pool is not None else 0
        if state is None or not w.nodes:
            self._start(w)
            return
        state.waiting.append(w)
        self._state(w, "admitted")
        self._start_waiting(state)

    def _start_waiting(self, state: PoolState) -> None:
        for w in list(state.waiting):
            if state.nodes - state.busy >= w.nodes:
                state.waiting.remove(w)
                state.busy += w.nodes
                self._start(w)
        wanted = sum(w.nodes for w in state.waiting) - (state.nodes - state.busy) - state.provisioning
        if wanted > 0 and not state.static:
            room = wanted if state.limit is None else min(wanted, state.limit - state.nodes - state.provisioning)
            if room > 0:
                state.provisioning += room
                self._at(self.now + self.provisioning, "nodes", (state, room))

    def _start(self, w: SimWorkload) -> None:
        if w.started_at is None:
            w.started_at = self.now
        w.run_started = self.now
        self._state(w, "running")
        self._at(self.now + w.remaining, "finish", (w, w.generation))

    def _on_requeue(self, root: str) -> None:
        """QueueInadmissibleWorkloads on a root cohort: its parked workloads compete again."""
        self._requeues.discard(root)
        self._stale = True
        for name, queue in self.pending.items():
            if self.roots[name] == root:
                queue.release()

    def _release(self, w: SimWorkload) -> None:
        """Its quota and nodes free; Kueue requeues the parked workloads of its cohort `requeue_seconds`
        later."""
        self._stale = True
        self.ledger.remove(cq(w.cluster_queue), w.usage)
        del self.admitted[w.cluster_queue][w.uid]
        state = self.pools.get(w.pool or "")
        if state is not None and w.nodes:
            if w in state.waiting:
                state.waiting.remove(w)
            elif w.run_started is not None:
                state.busy -= w.nodes
        w.flavors, w.usage = None, {}
        root = self.roots[w.cluster_queue]
        if not self.requeue_seconds:
            self._on_requeue(root)
        elif root not in self._requeues:  # later releases before it are batched into it
            self._requeues.add(root)
            self._at(self.now + self.requeue_seconds, "requeue", root)
        if state is not None:
            self._start_waiting(state)

    def _evict(self, w: SimWorkload, by: SimWorkload) -> None:
        """The cycle evicts `w` for `by`: its quota frees when the eviction's patch lands (the cycle waits
        for it: preemption.go IssuePreemptions)."""
        if self.api_writes is None:
            self._on_evicted((w, by, w.generation))
            return
        landed = self.api_writes.reserve(self.now)
        self._busy_until = max(self._busy_until, landed)
        self._at(landed, "evicted", (w, by, w.generation))

    def _on_evicted(self, payload: object) -> None:
        w, by, generation = payload  # type: ignore[misc]
        if generation != w.generation or w.flavors is None:  # it ended (and freed its quota) meanwhile
            return
        if w.finished_at is not None:  # it has ended and its quota was not released yet: the eviction releases it
            w.generation += 1
            self._release(w)
            self._state(w, None)
            return
        if w.run_started is not None:
            w.remaining = max(0.0, w.remaining - (self.now - w.run_started)) + self.restart
        w.generation += 1
        self._release(w)
        w.run_started = None
        w.preempted_at.append(self.now)
        w.preempted_by.append(by.key)
        self.pending[w.cluster_queue].push(w)
        self._state(w, "pending")


def simulate(objects: ClusterObjects, workloads: Iterable[SimWorkload], **options: object) -> Outcome:
    return Simulation(objects, list(workloads), **options).run()  # type: ignore[arg-type]
