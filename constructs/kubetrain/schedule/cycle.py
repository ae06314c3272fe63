"""One scheduling cycle of Kueue v0.19.2 (pkg/scheduler/scheduler.go `schedule`).

The head of every ClusterQueue with pending workloads is nominated: its flavors against the usage now
(kubetrain.schedule.assignment) and, where it needs preemption, its victims (kubetrain.schedule.preemption).
The entries are then processed in order: classically, those that borrow less first, then higher priority,
then older (makeClassicalIterator with PrioritySortingWithinCohort); under fair sharing, one at a time by
the tournament of fair_sharing_iterator.go: shares compared cohort by cohort up the tree, each entry's with
its workload added, on the usage the earlier entries left. Each entry: NoFit is requeued; Preempt with
no victims reserves the quota it can (unless its queue reclaims Any) and is requeued; one whose victims
overlap an earlier entry's, or that no longer fits after the earlier admissions, is skipped (requeued at
once); one with victims evicts them and waits for them to leave; the rest is admitted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from kubetrain.admission.cluster_objects import ClusterQueueSnapshot, FlavorResource
from kubetrain.schedule.assignment import FIT, NO_CANDIDATES, NO_FIT, PREEMPT, RECLAIM, LoadedAssigner, LoadedAssignment
from kubetrain.schedule.ledger import Ledger, cq
from kubetrain.schedule.pending import PendingQueue
from kubetrain.schedule.preemption import Candidate, Preemptor
from kubetrain.schedule.workload_state import SimWorkload


@dataclass
class Entry:
    workload: SimWorkload
    assignment: LoadedAssignment
    targets: list[Candidate] = field(default_factory=list)
    outcome: str = ""  # admitted, preempting, nofit, skipped, waiting
    # What it lacks, per flavor-resource, on the snapshot it was nominated on: the "N more needed" of the
    # condition Kueue writes on a head it does not admit (flavorassigner.go fitsResourceQuota).
    shortfall: tuple[tuple[FlavorResource, int], ...] = ()


@dataclass
class CycleResult:
    entries: list[Entry]
    changed: bool


class Scheduler:
    def __init__(self, ledger: Ledger, queues: Mapping[str, ClusterQueueSnapshot],
                 assigners: Mapping[str, LoadedAssigner], pending: Mapping[str, PendingQueue], preemptor: Preemptor,
                 fair_sharing: bool):
        self.ledger, self.queues, self.assigners = ledger, queues, assigners
        self.pending, self.preemptor, self.fair_sharing = pending, preemptor, fair_sharing

    def nominate(self, workload: SimWorkload) -> Entry:
        assigner = self.assigners[workload.cluster_queue]
        # The oracle's targets, by the request they were found for: nominating asks for the same request's
        # targets again when the workload needs one flavor-resource, on the same ledger (nothing is admitted
        # while the heads are nominated), so the search is not repeated.
        found: dict[tuple[FlavorResource, int], list[Candidate]] = {}

        def oracle(fr: FlavorResource, value: int) -> tuple[int, int]:
            """PreemptionOracle.SimulatePreemption for one flavor-resource."""
            targets = found[(fr, value)] = self.preemptor.targets(workload, {fr: value}, {fr})
            if not targets:
                return NO_CANDIDATES, self.ledger.lowest_subtree(workload.cluster_queue, fr, value)[0]
            for t in targets:
                self.preemptor._remove(t.workload)
            borrowing = self.ledger.lowest_subtree(workload.cluster_queue, fr, value)[0]
            self.preemptor._restore(t.workload for t in targets)
            own = any(t.workload.cluster_queue == workload.cluster_queue for t in targets)
            return (PREEMPT if own else RECLAIM), borrowing

        assignment = assigner.assign(workload.pod_sets, oracle)
        entry = Entry(workload, assignment)
        if assignment.mode != FIT:
            entry.shortfall = tuple((fr, value - self.ledger.queue_available(workload.cluster_queue, fr))
                                    for fr, value in sorted(assignment.usage.items()))
        if assignment.mode == PREEMPT:
            [(fr, value)] = assignment.usage.items() if len(assignment.usage) == 1 else [(None, 0)]
            reused = found.get((fr, value)) if assignment.needs_preemption == {fr} else None
            entry.targets = reused if reused is not None else \
                self.preemptor.targets(workload, assignment.usage, assignment.needs_preemption)
        return entry

    def _in_order(self, entries: list[Entry]) -> Iterator[Entry]:
        """The entries in the order Kueue processes them: classically sorted once; under fair sharing one at a
        time, each the winner of a tournament on the usage the earlier ones left."""
        if not self.fair_sharing:
            yield from sorted(entries, key=lambda e: (e.assignment.borrowing, -e.workload.priority,
                                                      e.workload.created, e.workload.uid))
            return
        remaining = list(entries)
        while remaining:
            entry = self._tournament_winner(remaining)
            remaining.remove(entry)
            yield entry

    def _tournament_winner(self, entries: list[Entry]) -> Entry:
        """fairSharingIterator.pop: in the first entry's root cohort, each entry's share with its workload
        admitted, at every level of the tree (its ClusterQueue's, then each ancestor cohort's); from the leaves
        up, each cohort's winner among its children's: not borrowing on the requested flavor-resources first
        (FairSharingPrioritizeNonBorrowing), then the lower share, higher priority, older."""
        path = self.ledger.tree.path(entries[0].workload.cluster_queue)
        if not path:
            return entries[0]
        root = path[-1]
        by_queue: dict[str, Entry] = {}
        keys: dict[tuple[str, int], tuple] = {}
        for e in entries:
            name = e.workload.cluster_queue
            ancestors = self.ledger.tree.path(name)
            if not ancestors or ancestors[-1] != root:
                continue
            by_queue[name] = e
            usage = e.assignment.usage
            self.ledger.add(cq(name), usage)
            node = cq(name)
            for cohort in ancestors:
                borrowed, share = self.ledger.drs(node)
                keys[(cohort, e.workload.uid)] = (any(usage.get(fr, 0) > 0 for fr in borrowed), share,
                                                  -e.workload.priority, e.workload.created)
                node = ("Cohort", cohort)
            self.ledger.remove(cq(name), usage)

        def winner(cohort: str) -> Entry | None:
            found = [w for kind, child in self.preemptor.children.get(cohort, []) if kind == "Cohort"
                     for w in [winner(child)] if w is not None]
            found += [by_queue[child] for kind, child in self.preemptor.children.get(cohort, [])
                      if kind == "ClusterQueue" and child in by_queue]
            best = None
            for e in found:
                if best is None or keys[(cohort, e.workload.uid)] < keys[(cohort, best.workload.uid)]:
                    best = e
            return best
        return winner(root) or entries[0]

    def run(self, evict: Callable[[SimWorkload, SimWorkload], None],
            admit: Callable[[SimWorkload, LoadedAssignment], None]) -> CycleResult:
        heads = [w for q in self.pending.values() if q and (w := q.pop()) is not None]
        entries = [self.nominate(w) for w in heads]
        preempted: dict[int, SimWorkload] = {}
        held: list[tuple[str, dict[FlavorResource, int]]] = []  # usage this cycle's snapshot holds, not admitted
        changed = False
        to_evict: list[tuple[SimWorkload, SimWorkload]] = []
        for e in self._in_order(entries):
            w, a = e.workload, e.assignment
            queue = self.queues[w.cluster_queue]
            if a.mode == NO_FIT:
                e.outcome = "nofit"
                continue
            if a.mode == PREEMPT and not e.targets:
                e.outcome = "waiting"
                if queue.reclaim_within_cohort != "Any":
                    reserve = self._reserve(queue, a)
                    self.ledger.add(cq(w.cluster_queue), reserve)
                    held.append((w.cluster_queue, reserve))
                continue
            if any(t.workload.uid in preempted for t in e.targets):
                e.outcome = "skipped"
                continue
            if not self._fits(w.cluster_queue, a.usage, [*preempted.values(), *(t.workload for t in e.targets)]):
                e.outcome = "skipped"
                continue
            preempted.update({t.workload.uid: t.workload for t in e.targets})
            if a.mode == PREEMPT:
                self.ledger.add(cq(w.cluster_queue), a.usage)
                held.append((w.cluster_queue, a.usage))
                to_evict += [(t.workload, w) for t in e.targets]
                e.outcome = "preempting"
            else:
                admit(w, a)
                e.outcome = "admitted"
            changed = True
        for name, usage in held:
            self.ledger.remove(cq(name), usage)
        for victim, by in to_evict:
            evict(victim, by)
        for e in entries:
            if e.outcome in ("nofit", "waiting"):
                changed |= self.pending[e.workload.cluster_queue].requeue(e.workload, immediate=False)
            elif e.outcome in ("skipped", "preempting"):
                self.pending[e.workload.cluster_queue].requeue(e.workload, immediate=True)
        return CycleResult(entries, changed)

    def _fits(self, queue: str, usage: Mapping[FlavorResource, int], removed: list[SimWorkload]) -> bool:
        for w in removed:
            self.ledger.remove(cq(w.cluster_queue), w.usage)
        fits = all(self.ledger.queue_available(queue, fr) >= v for fr, v in usage.items())
        for w in removed:
            self.ledger.add(cq(w.cluster_queue), w.usage)
        return fits

    def _reserve(self, queue: ClusterQueueSnapshot, a: LoadedAssignment) -> dict[FlavorResource, int]:
        """quotaResourcesToReserve for a Preempt entry with no victims."""
        reserve = {}
        for fr, value in a.usage.items():
            quota = queue.quota(fr)
            used = self.ledger.used(cq(queue.name), fr)
            if a.borrowing > 0:
                limit = quota.borrowing_limit
                reserve[fr] = value if limit is None else min(value, quota.nominal + limit - used)
            else:
                reserve[fr] = max(0, min(value, quota.nominal - used))
        return reserve

