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
- fair sharing (preemption.go fairPreemptions, fairsharing/): candidates are the queue's own lower-priority
  workloads and those of every borrowing ClusterQueue under the root cohort; target queues come in
  TargetClusterQueueOrdering's order (down the tree, the child with the highest dominant resource share);
  shares are compared at the two queues' lowest common ancestor (each side's child of it, the almost-LCA):
  LessThanOrEqualToFinalShare, then LessThanInitialShare on the candidates passed over; while the preemptor
  stays within its nominal quota it reclaims without comparing shares (FairSharingPreemptWithinNominal).
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
RECLAIM = "InCohortReclamation"


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

    @staticmethod
    def _rank(queue: str, c: Candidate) -> tuple:
        """CandidatesOrdering: other queues' first, lower priority first, the latest admitted first, UID."""
        return (c.workload.cluster_queue == queue, c.workload.priority, -(c.workload.reserved_at or 0.0),
                c.workload.uid)

    def _order(self, queue: str, candidates: list[Candidate]) -> list[Candidate]:
        return sorted(candidates, key=lambda c: self._rank(queue, c))

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
        """fairPreemptions with Kueue's default strategies: LessThanOrEqualToFinalShare, then
        LessThanInitialShare on the candidates the first one passed over."""
        queue = self.queues[preemptor.cluster_queue]
        candidates = [] if queue.within_cluster_queue == "Never" else \
            self._from_queue(queue, queue.name, None, preemptor, frs, False)
        path = self.ledger.tree.path(queue.name)
        if path and queue.reclaim_within_cohort != "Never":
            for name in self._queues_under(path[-1]):
                if name != queue.name and any(self.ledger.borrowing_with(cq(name), fr, 0) for fr in frs):
                    candidates += self._from_queue(queue, name, path[-1], preemptor, frs, True)
        if not candidates:
            return []
        candidates = self._order(queue.name, candidates)
        self.ledger.add(cq(queue.name), requests)  # the shares include the incoming workload
        fits, targets, retry = self._first_strategy(queue.name, requests, frs, candidates)
        if not fits:
            fits = self._second_strategy(queue.name, requests, retry, targets)
        self.ledger.remove(cq(queue.name), requests)
        if not fits:
            self._restore(t.workload for t in targets)
            return []
        targets = self._fill_back(queue.name, requests, targets, True)
        self._restore(t.workload for t in targets)
        return targets

    def _first_strategy(self, queue: str, requests: Mapping[FlavorResource, int], frs: set[FlavorResource],
                        candidates: list[Candidate]) -> tuple[bool, list[Candidate], list[Candidate]]:
        """runFirstFsStrategy: target queues in TargetClusterQueueOrdering's order; the preemptor's own
        workloads go first come; while the preemptor stays within its nominal quota (the
        FairSharingPreemptWithinNominal gate, on by default) others' go too; otherwise a candidate goes when
        the preemptor's share at the lowest common ancestor, with the workload, is at most the target's share
        there without the candidate (LessThanOrEqualToFinalShare)."""
        targets: list[Candidate] = []
        retry: list[Candidate] = []
        within_nominal = not any(self.ledger.borrowing_with(cq(queue), fr, 0) for fr in frs)
        ordering = _TargetOrdering(self, queue, candidates)
        for target in ordering:
            if target == queue or within_nominal:
                self._take(ordering.pop(target), targets, WITHIN_QUEUE if target == queue else RECLAIM)
                if self._fits_fair(queue, requests):
                    return True, targets, []
                continue
            preemptor_share, target_share = self._shares(queue, target)
            if preemptor_share[0] and not target_share[0]:  # an infinite share never passes: skip the tries
                while ordering.has(target):
                    retry.append(ordering.pop(target))
                continue
            while ordering.has(target):
                candidate = ordering.pop(target)
                if preemptor_share <= self._share_without(queue, target, candidate.workload):
                    self._take(candidate, targets, FAIR)
                    if self._fits_fair(queue, requests):
                        return True, targets, []
                    break  # the shares changed: the next target queue may be another
                retry.append(candidate)
        return False, targets, retry

    def _second_strategy(self, queue: str, requests: Mapping[FlavorResource, int], retry: list[Candidate],
                         targets: list[Candidate]) -> bool:
        """runSecondFsStrategy (rule S2-b): once per target queue, its first candidate goes when the preemptor's
        share at the lowest common ancestor is below the target's share there before any removal."""
        ordering = _TargetOrdering(self, queue, retry)
        for target in ordering:
            preemptor_share, target_share = self._shares(queue, target)
            candidate = ordering.pop(target)
            if preemptor_share < target_share:
                self._take(candidate, targets, FAIR)
                if self._fits_fair(queue, requests):
                    return True
            ordering.drop(target)
        return False

    def _take(self, candidate: Candidate, targets: list[Candidate], reason: str) -> None:
        self._remove(candidate.workload)
        candidate.variant = reason
        targets.append(candidate)

    def _fits_fair(self, queue: str, requests: Mapping[FlavorResource, int]) -> bool:
        """workloadFitsForFairSharing: without the incoming workload's usage (added for the shares), it fits."""
        self.ledger.remove(cq(queue), requests)
        fits = self._fits(queue, requests, True)
        self.ledger.add(cq(queue), requests)
        return fits

    def _almost_lca(self, queue: str, other: str) -> Node:
        """getAlmostLCA: the child of `queue`'s and `other`'s lowest common ancestor on `queue`'s side."""
        shared = set(self.ledger.tree.path(other))
        node = cq(queue)
        while (parent := self.ledger.parent(node)) is not None and parent[1] not in shared:
            node = parent
        return node

    def _shares(self, queue: str, target: str) -> tuple[tuple[int, float], tuple[int, float]]:
        """ComputeShares: the preemptor's and the target's shares at their almost-LCAs."""
        return (self.ledger.drs(self._almost_lca(queue, target))[1],
                self.ledger.drs(self._almost_lca(target, queue))[1])

    def _share_without(self, queue: str, target: str, workload: SimWorkload) -> tuple[int, float]:
        """ComputeTargetShareAfterRemoval."""
        self._remove(workload)
        share = self.ledger.drs(self._almost_lca(target, queue))[1]
        self._restore([workload])
        return share

    def _queues_under(self, cohort: str) -> list[str]:
        found: list[str] = []
        for kind, child in self.children.get(cohort, []):
            found += [child] if kind == "ClusterQueue" else self._queues_under(child)
        return found


NEGATIVE = (0, -1.0)  # NegativeDRS: below every share


class _TargetOrdering:
    """TargetClusterQueueOrdering (pkg/scheduler/preemption/fairsharing/ordering.go): from the root cohort
    down, the child with the highest share (a cohort on a tie with a queue), among queues that borrow (or are
    the preemptor's) and have candidates left, and cohorts that borrow (or hold the preemptor); pruned nodes
    are not visited again. Yields target ClusterQueue names; the caller pops or drops between them."""

    def __init__(self, preemptor: Preemptor, queue: str, candidates: list[Candidate]):
        self.p, self.queue = preemptor, queue
        self.ancestors = set(preemptor.ledger.tree.path(queue))
        self.by_queue: dict[str, list[Candidate]] = {}
        for c in candidates:
            self.by_queue.setdefault(c.workload.cluster_queue, []).append(c)
        self.pruned_queues: set[str] = set()
        self.pruned_cohorts: set[str] = set()

    def has(self, name: str) -> bool:
        return bool(self.by_queue.get(name))

    def pop(self, name: str) -> Candidate:
        return self.by_queue[name].pop(0)

    def drop(self, name: str) -> None:
        self.pruned_queues.add(name)

    def __iter__(self):
        path = self.p.ledger.tree.path(self.queue)
        if not path:
            while self.queue not in self.pruned_queues and self.has(self.queue):
                yield self.queue
            return
        root = path[-1]
        while root not in self.pruned_cohorts:
            target = self._next(root)
            if target is not None:
                yield target

    def _next(self, cohort: str) -> str | None:
        ledger = self.p.ledger
        best_queue, best_queue_share = None, NEGATIVE
        best_cohort, best_cohort_share = None, NEGATIVE
        for kind, child in self.p.children.get(cohort, []):
            if kind == "ClusterQueue":
                if child in self.pruned_queues:
                    continue
                borrowing, share = ledger.drs(cq(child))
                if (not borrowing and child != self.queue) or not self.has(child):
                    self.pruned_queues.add(child)
                elif share == best_queue_share and best_queue is not None:
                    mine, theirs = self.by_queue[child][0], self.by_queue[best_queue][0]
                    if self.p._rank(self.queue, mine) < self.p._rank(self.queue, theirs):
                        best_queue = child
                elif share > best_queue_share:
                    best_queue, best_queue_share = child, share
            elif child not in self.pruned_cohorts:
                borrowing, share = ledger.drs(("Cohort", child))
                if not borrowing and child not in self.ancestors:
                    self.pruned_cohorts.add(child)
                elif share >= best_cohort_share:
                    best_cohort, best_cohort_share = child, share
        if best_queue is None and best_cohort is None:
            self.pruned_cohorts.add(cohort)
            return None
        if best_cohort is not None and best_cohort_share >= best_queue_share:
            return self._next(best_cohort)
        return best_queue


def victims(targets: Sequence[Candidate]) -> list[SimWorkload]:
    return [t.workload for t in targets]
