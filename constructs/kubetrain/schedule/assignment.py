"""Kueue's flavor assigner under load: which flavors a pending workload gets now, and whether it fits, needs
preemption, or cannot be admitted at all.

A port of Kueue v0.19.2 `pkg/scheduler/flavorassigner/flavorassigner.go` (findFlavorForPodSets,
fitsResourceQuota, isPreferred, shouldTryNextFlavor) that reuses kubetrain's idle-cluster assigner
(kubetrain.admission.flavors) for everything quota does not decide: the requests Kueue counts, and whether a
flavor matches the pods (taints, node labels, topology). Per flavor and resource:

- past potentialAvailable: noFit;
- within `available` (usage counted, kubetrain.schedule.ledger): fit, at the borrowing level of the lowest
  cohort that holds it;
- otherwise, where the nominal quota holds it, a cohort above could be reclaimed from, or the queue may
  preempt while borrowing (borrowWithinCohort, or fair sharing): the preemption oracle says whether victims
  exist (reclaim: all in other queues; preempt: some in its own; noCandidates);
- else noFit.

A resource group's flavors are tried in order; `whenCanBorrow`/`whenCanPreempt` TryNextFlavor keep searching
past a flavor that needs borrowing or preemption, and the best mode found wins (`preference`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kubetrain.admission.cluster_objects import ClusterObjects, ClusterQueueSnapshot, FlavorResource
from kubetrain.admission.flavors import FlavorAssigner
from kubetrain.model.pod_sets import PodSet
from kubetrain.schedule.ledger import Ledger

# Kueue's preemptionMode, worst first.
NO_FIT, NO_CANDIDATES, PREEMPT, RECLAIM, FIT = range(5)
# The representative mode of an assignment (FlavorAssignmentMode).
MODE_NAMES = {NO_FIT: "NoFit", NO_CANDIDATES: "Preempt", PREEMPT: "Preempt", RECLAIM: "Preempt", FIT: "Fit"}

Oracle = Callable[[FlavorResource, int], tuple[int, int]]  # (fr, quantity) -> (mode, borrowing after preemption)


@dataclass(frozen=True)
class Granular:
    mode: int
    borrowing: int = 0


WORST = Granular(NO_FIT, sys.maxsize)
BEST = Granular(FIT, 0)


def is_preferred(a: Granular, b: Granular, preference: str | None) -> bool:
    """Kueue's isPreferred: is mode `a` better than `b`."""
    if a.mode == NO_FIT:
        return False
    if b.mode == NO_FIT:
        return True
    if (a.mode == NO_CANDIDATES) != (b.mode == NO_CANDIDATES):
        return a.mode != NO_CANDIDATES
    if preference == "PreemptionOverBorrowing":
        if a.borrowing != b.borrowing:
            return a.borrowing < b.borrowing
        return a.mode > b.mode
    if a.mode != b.mode:
        return a.mode > b.mode
    return a.borrowing < b.borrowing


def try_next_flavor(mode: Granular, queue: ClusterQueueSnapshot) -> bool:
    """Kueue's shouldTryNextFlavor."""
    if mode.mode in (NO_FIT, NO_CANDIDATES):
        return True
    if mode.mode in (PREEMPT, RECLAIM) and queue.when_can_preempt == "TryNextFlavor":
        return True
    return mode.borrowing > 0 and queue.when_can_borrow == "TryNextFlavor"


@dataclass
class LoadedAssignment:
    flavors: list[dict[str, str]] = field(default_factory=list)  # per pod set: resource -> flavor
    modes: dict[FlavorResource, Granular] = field(default_factory=dict)
    usage: dict[FlavorResource, int] = field(default_factory=dict)
    failed: str | None = None  # why no flavor fits a pod set

    @property
    def mode(self) -> int:
        """RepresentativeMode: NoFit, Preempt (any flavor needing preemption) or Fit."""
        if self.failed is not None or not self.flavors:
            return NO_FIT
        return PREEMPT if any(m.mode != FIT for m in self.modes.values()) else FIT

    @property
    def borrowing(self) -> int:
        return max((m.borrowing for m in self.modes.values()), default=0)

    @property
    def needs_preemption(self) -> set[FlavorResource]:
        return {fr for fr, m in self.modes.items() if m.mode != FIT}


class LoadedAssigner:
    """Flavors for one ClusterQueue's workloads, against the ledger's usage now."""

    def __init__(self, objects: ClusterObjects, ledger: Ledger, queue: ClusterQueueSnapshot, fair_sharing: bool):
        self.idle = FlavorAssigner(objects, ledger.tree, queue)
        self.ledger, self.queue = ledger, queue
        policy = getattr(queue, "borrow_within_cohort", None)
        self.preempt_while_borrowing = fair_sharing or (policy is not None and policy != "Never")
        self._mismatch: dict[tuple[int, str], bool] = {}

    def matches(self, pod_set: PodSet, flavor: str) -> bool:
        """checkFlavorForPodSets, by kubetrain's idle assigner (cached: it does not change with usage)."""
        key = (id(pod_set), flavor)
        if key not in self._mismatch:
            group = next((g for g in self.queue.groups if flavor in g.flavors), None)
            self._mismatch[key] = group is not None and self.idle.mismatch(pod_set, flavor, group) is None
        return self._mismatch[key]

    def assign(self, pod_sets: Sequence[PodSet], oracle: Oracle) -> LoadedAssignment:
        result = LoadedAssignment()
        for pod_set in pod_sets:
            requests = self.idle.requests(pod_set)
            chosen: dict[str, str] = {}
            for resource in sorted(requests):
                if resource in chosen:
                    continue
                group = self.queue.group_of(resource)
                if group is None:
                    if requests[resource]:
                        result.failed = f"resource {resource} unavailable in ClusterQueue {self.queue.name}"
                        return result
                    continue
                wanted = {r: v for r, v in requests.items() if r in group.covered}
                found = self._find_flavor(pod_set, group.flavors, wanted, result.usage, oracle)
                if found is None:
                    result.failed = f"no flavor of {', '.join(group.flavors)} fits {pod_set.name}"
                    return result
                flavor, modes = found
                for r in wanted:
                    chosen[r] = flavor
                result.modes.update({(flavor, r): m for r, m in modes.items()})
            for resource, flavor in chosen.items():
                fr = (flavor, resource)
                result.usage[fr] = result.usage.get(fr, 0) + requests[resource]
            result.flavors.append(chosen)
        return result

    def _find_flavor(self, pod_set: PodSet, flavors: Sequence[str], wanted: dict[str, int],
                     usage: dict[FlavorResource, int], oracle: Oracle) -> tuple[str, dict[str, Granular]] | None:
        best: tuple[str, dict[str, Granular]] | None = None
        best_mode = WORST
        for flavor in flavors:
            if not self.matches(pod_set, flavor):
                continue
            mode, modes = BEST, {}
            for resource, value in wanted.items():
                fr = (flavor, resource)
                this = self._fits(fr, usage.get(fr, 0) + value, oracle)
                modes[resource] = this
                if is_preferred(mode, this, self.queue_preference):
                    mode = this
                if mode.mode == NO_FIT:
                    break
            if mode.mode == NO_FIT:
                continue
            if not try_next_flavor(mode, self.queue):
                return flavor, modes
            if is_preferred(mode, best_mode, self.queue_preference):
                best, best_mode = (flavor, modes), mode
        return best

    @property
    def queue_preference(self) -> str | None:
        return getattr(self.queue, "preference", None)

    def _fits(self, fr: FlavorResource, value: int, oracle: Oracle) -> Granular:
        """fitsResourceQuota."""
        name = self.queue.name
        if value > self.ledger.potential(name, fr):
            return WORST
        borrowing, may_reclaim = self.ledger.lowest_subtree(name, fr, value)
        if value <= self.ledger.queue_available(name, fr):
            return Granular(FIT, borrowing)
        if self.ledger.tree.nominal(name, fr) >= value or may_reclaim or self.preempt_while_borrowing:
            mode, after = oracle(fr, value)
            return Granular(mode, after)
        return Granular(NO_FIT, borrowing)
