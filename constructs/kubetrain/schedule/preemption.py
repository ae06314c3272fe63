"""Kueue's preemption: which admitted workloads a pending one evicts to fit, in Kueue's order.

A port of Kueue v0.19.2 `pkg/scheduler/preemption` (preemption.go, classical/, common/):

- classical (no fair sharing): candidates are the workloads using a flavor-resource that needs preemption,
  whose priority the ClusterQueue's policy lets it preempt (withinClusterQueue for its own queue,
  reclaimWithinCohort for others: Never, LowerPriority, LowerOrNewerEqualPriority, Any). Others' workloads
  are collected walking up the cohort tree (collectCandidatesForHierarchicalReclaim): from a queue above its
  nominal quota, where the preemptor has hierarchical advantage (its request fits the subtree's quota) any
  priority goes, otherwise the borrowWithinCohort policy and its maxPriorityThreshold decide whether the
  preemptor may keep borrowing. Candidates are ordered (CandidatesOrdering): other queues first, lower
  priority first, the most recently admitted first; hierarchy candidates, then priority candidates, then the
  queue's own. They are removed one by one until the preemptor fits (with or without borrowing, in Kueue's
  order of attempts), then those not needed are put back, last first (fillBackWorkloads);
- fair sharing: candidates in Kueue's order; a candidate of the preemptor's own queue is taken; one of another
  queue only while the strategies hold: LessThanOrEqualToFinalShare (the preemptor's share with the workload
  is at most the target queue's share without the candidate), then LessThanInitialShare (below the target's
  share before). Left out: Kueue compares shares at the two queues' lowest common ancestor cohort and picks
  target queues by those; here queues' own shares are compared and the largest share goes first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kubetrain.admission.cluster_objects import ClusterQueueSnapshot, FlavorResource
from kubetrain.admission.quota import Node
from kubetrain.schedule.ledger import Ledger, cq
from kubetrain.schedule.workload_state import SimWorkload

WITHIN_QUEUE = "InClusterQueue"
FAIR = "InCohortFairSharing"


def satisfies(policy: str, preemptor: SimWorkload, candidate: SimWorkload) -> bool:
    """SatisfiesPreemptionPolicy."""
    lower = preemptor.priority > candidate.priority
    if policy == "LowerPriority":
        return lower
    if policy == "LowerOrNewerEqualPriority":
        return lower or (preemptor.priority == candidate.priority and preemptor.created < candidate.created)
    return policy == "Any"


@dataclass
class Candidate:
    workload: SimWorkload
    lca: str | None  # the cohort whose subtree it was found in
    variant: str  # WithinCQ, HiearchicalReclaim, ReclaimWithoutBorrowing, ReclaimWhileBorrowing


class Preemptor:
    def __init__(self, ledger: Ledger, queues: Mapping[str, ClusterQueueSnapshot],
                 admitted: Mapping[str, dict[int, SimWorkload]], fair_sharing: bool):
        self.ledger, self.queues, self.admitted, self.fair_sharing = ledger, queues, admitted, fair_sharing
        self.children: dict[str, list[Node]] = ledger.tree._children

    # -- shared ----------------------------------------------------------------------------------------

    def _order(self, queue: str, candidates: list[Candidate]) -> list[Candidate]:
        return sorted(candidates, key=lambda c: (c.workload.cluster_queue == queue, c.workload.priority,
                                                 -(c.workload.reserved_at or 0.0), c.workload.uid))

    def _uses(self, workload: SimWorkload, frs: set[FlavorResource]) -> bool:
        return any(fr in frs for fr in workload.usage)

    def _fits(self, queue: str, requests: Mapping[FlavorResource, int], allow_borrowing: bool) -> bool:
        node = cq(queue)
        for fr, value in requests.items():
            if not allow_borrowing and self.ledger.borrowing_with(node, fr, value):
                return False
            if value > self.ledger.queue_available(queue, fr):
                return False
        return True

    def _remove(self, workload: SimWorkload) -> None:
        self.ledger.remove(cq(workload.cluster_queue), workload.usage)

    def _restore(self, workloads: Iterable[SimWorkload]) -> None:
        for workload in workloads:
            self.ledger.add(cq(workload.cluster_queue), workload.usage)

    def _fill_back(self, queue: str, requests: Mapping[FlavorResource, int], targets: list[Candidate],
                   allow_borrowing: bool) -> list[Candidate]:
        """fillBackWorkloads: in reverse order, put back every target the preemptor does not need."""
        for i in range(len(targets) - 2, -1, -1):
            self._restore([targets[i].workload])
            if self._fits(queue, requests, allow_borrowing):
                targets[i] = targets[-1]
                targets.pop()
            else:
                self._remove(targets[i].workload)
        return targets

    def targets(self, preemptor: SimWorkload, requests: Mapping[FlavorResource, int],
                frs: set[FlavorResource]) -> list[Candidate]:
        """GetTargets: the workloads to evict so that `requests` fit (empty when no set of them does); the
        ledger is left as it was."""
        if self.fair_sharing:
            return self._fair(preemptor, requests, frs)
        return self._classical(preemptor, requests, frs)

    # -- classical -------------------------------------------------------------------------------------

    def _variant(self, queue: ClusterQueueSnapshot, preemptor: SimWorkload, candidate: SimWorkload,
                 frs: set[FlavorResource], advantage: bool) -> str | None:
        """classifyPreemptionVariant."""
        if not self._uses(candidate, frs):
            return None
        same = candidate.cluster_queue == queue.name
        if not satisfies(queue.within_cluster_queue if same else queue.reclaim_within_cohort, preemptor, candidate):
            return None
        if same:
            return "WithinCQ"
        if advantage:
            return "HierarchicalReclaim"
        if queue.borrow_within_cohort in (None, "Never"):
            return "ReclaimWithoutBorrowing"
        threshold = queue.borrow_max_priority
        if candidate.priority >= preemptor.priority or (threshold is not None and candidate.priority > threshold):
            return "ReclaimWithoutBorrowing"
        return "ReclaimWhileBorrowing"

    def _from_queue(self, queue: ClusterQueueSnapshot, name: str, lca: str | None, preemptor: SimWorkload,
                    frs: set[FlavorResource], advantage: bool) -> list[Candidate]:
        found = []
        for workload in self.admitted.get(name, {}).values():
            variant = self._variant(queue, preemptor, workload, frs, advantage)
            if variant is not None:
                found.append(Candidate(workload, lca, variant))
        return found

    def _in_subtree(self, queue: ClusterQueueSnapshot, cohort: str, root: str, skip: str | None,
                    preemptor: SimWorkload, frs: set[FlavorResource], advantage: bool, into: list[Candidate]) -> None:
        for kind, child in self.children.get(cohort, []):
            if kind == "Cohort" and child != skip and not self.ledger.within_nominal(("Cohort", child), frs):
                self._in_subtree(queue, child, root, skip, preemptor, frs, advantage, into)
        for kind, child in self.children.get(cohort, []):
            if kind == "ClusterQueue" and child != queue.name and not self.ledger.within_nominal(cq(child), frs):
                into += self._from_queue(queue, child, root, preemptor, frs, advantage)

    def _classical(self, preemptor: SimWorkload, requests: Mapping[FlavorResource, int],
                   frs: set[FlavorResource]) -> list[Candidate]:
        queue = self.queues[preemptor.cluster_queue]
        same = [] if queue.within_cluster_queue == "Never" else \
            self._from_queue(queue, queue.name, None, preemptor, frs, False)
        hierarchy: list[Candidate] = []
        by_priority: list[Candidate] = []
        path = self.ledger.tree.path(queue.name)
        if path and queue.reclaim_within_cohort != "Never":
            advantage, remaining = self.ledger.fits_in_quota(cq(queue.name), requests)
            previous = None
            for cohort in path:
                self._in_subtree(queue, cohort, cohort, previous, preemptor, frs, advantage,
                                 hierarchy if advantage else by_priority)
                fits, remaining = self.ledger.fits_in_quota(("Cohort", cohort), remaining)
                advantage, previous = advantage or fits, cohort
        ordered = [*self._order(queue.name, hierarchy), *self._order(queue.name, by_priority),
                   *self._order(queue.name, same)]
        forbidden = queue.borrow_within_cohort in (None, "Never")
        under_nominal = all(self.ledger.tree.nominal(queue.name, fr) > self.ledger.used(cq(queue.name), fr)
                            for fr in frs)
        if (not hierarchy and not by_priority) or (forbidden and not under_nominal):
            attempts = [True]
        elif forbidden and not hierarchy:
            attempts = [False, True]
        else:
            attempts = [True, False]
        for allow_borrowing in attempts:
            targets: list[Candidate] = []
            for candidate in ordered:
                if not self._valid(queue.name, candidate, frs, allow_borrowing):
                    continue
                self._remove(candidate.workload)
                targets.append(candidate)
                if self._fits(queue.name, requests, allow_borrowing):
                    targets = self._fill_back(queue.name, requests, targets, allow_borrowing)
                    self._restore(t.workload for t in targets)
                    return targets
            self._restore(t.workload for t in targets)
        return []

    def _valid(self, queue: str, candidate: Candidate, frs: set[FlavorResource], allow_borrowing: bool) -> bool:
        """candidateIsValid, on the ledger as earlier targets left it."""
        name = candidate.workload.cluster_queue
        if name == queue:
            return True
        if allow_borrowing and candidate.variant == "ReclaimWithoutBorrowing":
            return False
        if self.ledger.within_nominal(cq(name), frs):
            return False
        for cohort in self.ledger.tree.path(name):
            if cohort == candidate.lca:
                break
            if self.ledger.within_nominal(("Cohort", cohort), frs):
                return False
        return True

    # -- fair sharing ----------------------------------------------------------------------------------

    def _fair(self, preemptor: SimWorkload, requests: Mapping[FlavorResource, int],
              frs: set[FlavorResource]) -> list[Candidate]:
        queue = self.queues[preemptor.cluster_queue]
        candidates = [] if queue.within_cluster_queue == "Never" else \
            self._from_queue(queue, queue.name, None, preemptor, frs, False)
        path = self.ledger.tree.path(queue.name)
        if path and queue.reclaim_within_cohort != "Never":
            for name in self._queues_under(path[-1]):
                if name != queue.name and not self.ledger.within_nominal(cq(name), frs):
                    candidates += self._from_queue(queue, name, path[-1], preemptor, frs, True)
        if not candidates:
            return []
        candidates = self._order(queue.name, candidates)
        node = cq(queue.name)
        self.ledger.add(node, requests)
        targets: list[Candidate] = []
        fits = False
        retry: list[Candidate] = []
        pending = list(candidates)
        while pending and not fits:
            by_queue: dict[str, list[Candidate]] = {}
            for c in pending:
                by_queue.setdefault(c.workload.cluster_queue, []).append(c)
            target_queue = max(by_queue, key=lambda n: (n == queue.name, self.ledger.dominant_share(cq(n)), n))
            group = by_queue[target_queue]
            pending = [c for c in pending if c.workload.cluster_queue != target_queue]
            preemptor_share = self.ledger.dominant_share(node)
            for candidate in group:
                workload = candidate.workload
                if target_queue != queue.name:
                    after = self._share_without(target_queue, workload)
                    if not preemptor_share <= after:
                        retry.append(candidate)
                        continue
                self._take(candidate, targets, WITHIN_QUEUE if target_queue == queue.name else FAIR)
                fits = self._fits_fair(queue.name, requests)
                if fits or target_queue != queue.name:
                    pending += [c for c in group if c is not candidate and c not in retry and c not in targets]
                    break
        if not fits:  # rule S2-b: below the target's share before any removal
            for name in dict.fromkeys(c.workload.cluster_queue for c in retry):
                if self.ledger.dominant_share(node) < self.ledger.dominant_share(cq(name)):
                    candidate = next(c for c in retry if c.workload.cluster_queue == name)
                    self._take(candidate, targets, FAIR)
                    if self._fits_fair(queue.name, requests):
                        fits = True
                        break
        self.ledger.remove(node, requests)
        if not fits:
            self._restore(t.workload for t in targets)
            return []
        targets = self._fill_back(queue.name, requests, targets, True)
        self._restore(t.workload for t in targets)
        return targets

    def _take(self, candidate: Candidate, targets: list[Candidate], reason: str) -> None:
        self._remove(candidate.workload)
        candidate.variant = reason
        targets.append(candidate)

    def _fits_fair(self, queue: str, requests: Mapping[FlavorResource, int]) -> bool:
        """workloadFitsForFairSharing: with the preemptor's usage already added, nothing may be in debt."""
        return all(self.ledger.available(cq(queue), fr) >= 0 for fr in requests)

    def _share_without(self, queue: str, workload: SimWorkload) -> float:
        self._remove(workload)
        share = self.ledger.dominant_share(cq(queue))
        self._restore([workload])
        return share

    def _queues_under(self, cohort: str) -> list[str]:
        found: list[str] = []
        for kind, child in self.children.get(cohort, []):
            found += [child] if kind == "ClusterQueue" else self._queues_under(child)
        return found


def victims(targets: Sequence[Candidate]) -> list[SimWorkload]:
    return [t.workload for t in targets]
