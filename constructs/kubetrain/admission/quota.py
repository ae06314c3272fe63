"""Kueue's cohort tree: how much of one flavor's resource a ClusterQueue can ever be given.

A port of Kueue v0.19.2 `pkg/cache/scheduler/resource_node.go` for an idle cluster (no usage), where
`available` equals `potentialAvailable`:

- a node's SubtreeQuota is its own nominal quota plus what each child lends it: the child's SubtreeQuota
  less the child's localQuota (`accumulateFromChild`);
- a node's localQuota is what its lendingLimit keeps inside its subtree, SubtreeQuota - lendingLimit (at
  least 0), or nothing without a lending limit: then it lends all of it;
- potentialAvailable of a root is its SubtreeQuota; of any other node, its localQuota plus its parent's
  potentialAvailable, capped at SubtreeQuota + borrowingLimit where it has a borrowing limit.

Borrowing (`FindHeightOfLowestSubtreeThatFits`, pkg/scheduler/preemption/classical): what a request needs
beyond the ClusterQueue's nominal quota comes from the lowest cohort on its path whose subtree holds what
is left; Kueue ranks flavors by that cohort's height.

A cohort the fleet does not define (a ClusterQueue's cohort or a Cohort's parent with no Cohort object in
the fleet) may have members and quota of its own elsewhere: through it, potentialAvailable is known only
between a lower bound (what the fleet's own members lend) and an upper bound (unlimited, within the
borrowing limits on the way). A cohort in a parent cycle disables its members (Kueue's ErrCohortHasCycle).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from kubetrain.admission.cluster_objects import ClusterQueueSnapshot, FlavorResource, QuotaHolder

UNLIMITED = math.inf
Amount = int | float
Node = tuple[str, str]  # ("ClusterQueue" | "Cohort", name): the two kinds name their objects apart


class CohortTree:
    def __init__(self, queues: Mapping[str, ClusterQueueSnapshot], cohorts: Mapping[str, QuotaHolder]):
        self._holders: dict[Node, QuotaHolder] = {**{("ClusterQueue", n): q for n, q in queues.items()},
                                                  **{("Cohort", n): c for n, c in cohorts.items()}}
        self.outside = frozenset(h.parent for h in self._holders.values() if h.parent and h.parent not in cohorts)
        self._holders.update({("Cohort", name): QuotaHolder(name, None) for name in self.outside})
        self._children: dict[str, list[Node]] = {}
        for node, holder in self._holders.items():
            if holder.parent:
                self._children.setdefault(holder.parent, []).append(node)
        self.cyclic = frozenset(self._cycles())
        self._memo: dict[tuple[str, Node, FlavorResource, bool], Amount] = {}

    def _cycles(self) -> set[str]:
        cyclic: set[str] = set()
        for name in (n for kind, n in self._holders if kind == "Cohort"):
            walk: list[str] = []
            while name is not None and name not in walk:
                walk.append(name)
                name = self._holders[("Cohort", name)].parent
            if name is not None:
                cyclic.update(walk[walk.index(name):])
        return cyclic

    def path(self, queue: str) -> list[str]:
        """The cohorts above a ClusterQueue, its own first, up to the root (or into a cycle, once)."""
        found: list[str] = []
        name = self._holders[("ClusterQueue", queue)].parent
        while name is not None and name not in found:
            found.append(name)
            name = self._holders[("Cohort", name)].parent
        return found

    def in_cycle(self, queue: str) -> str | None:
        return next((c for c in self.path(queue) if c in self.cyclic), None)

    def outside_cohort(self, queue: str) -> str | None:
        """The first cohort on the queue's path that the fleet does not define."""
        return next((c for c in self.path(queue) if c in self.outside), None)

    def _parent(self, node: Node) -> Node | None:
        parent = self._holders[node].parent
        return ("Cohort", parent) if parent else None

    def _cached(self, what: str, node: Node, fr: FlavorResource, open_outside: bool, compute) -> Amount:
        key = (what, node, fr, open_outside)
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def subtree(self, node: Node, fr: FlavorResource, open_outside: bool = False) -> Amount:
        def compute() -> Amount:
            if open_outside and node[0] == "Cohort" and node[1] in self.outside:
                return UNLIMITED
            total: Amount = self._holders[node].quota(fr).nominal
            for child in self._children.get(node[1], []) if node[0] == "Cohort" else []:
                total += self.subtree(child, fr, open_outside) - self.local(child, fr, open_outside)
            return total
        return self._cached("subtree", node, fr, open_outside, compute)

    def local(self, node: Node, fr: FlavorResource, open_outside: bool = False) -> Amount:
        """What a lending limit keeps inside the node's subtree (its parent never sees it)."""
        lending = self._holders[node].quota(fr).lending_limit
        return max(0, self.subtree(node, fr, open_outside) - lending) if lending is not None else 0

    def potential(self, node: Node, fr: FlavorResource, open_outside: bool = False) -> Amount:
        """Kueue's potentialAvailable: the largest request the node could be given, with no usage anywhere."""
        def compute() -> Amount:
            parent = self._parent(node)
            if parent is None:
                return self.subtree(node, fr, open_outside)
            available = self.local(node, fr, open_outside) + self.potential(parent, fr, open_outside)
            borrowing = self._holders[node].quota(fr).borrowing_limit
            if borrowing is not None:
                available = min(self.subtree(node, fr, open_outside) + borrowing, available)
            return available
        return self._cached("potential", node, fr, open_outside, compute)

    def queue_potential(self, queue: str, fr: FlavorResource, open_outside: bool = False) -> Amount:
        return self.potential(("ClusterQueue", queue), fr, open_outside)

    def nominal(self, queue: str, fr: FlavorResource) -> int:
        return self._holders[("ClusterQueue", queue)].quota(fr).nominal

    def lender(self, queue: str, fr: FlavorResource, value: Amount) -> tuple[int, str | None]:
        """(height, name) of the lowest cohort whose subtree holds `value` beyond the queue's own quota:
        (0, None) when the nominal quota holds it (Kueue's borrowing level 0)."""
        node = ("ClusterQueue", queue)
        path = self.path(queue)
        if value <= self.nominal(queue, fr) or not path:
            return 0, None
        remaining = value - self.local(node, fr)
        for cohort in path:
            if self.subtree(("Cohort", cohort), fr) >= remaining:
                return self.height(cohort), cohort
            remaining -= self.local(("Cohort", cohort), fr)
        return self.height(path[-1]), path[-1]

    def height(self, cohort: str) -> int:
        """Kueue's getNodeHeight: the distance to the furthest leaf (a cohort of only ClusterQueues is 1)."""
        children = self._children.get(cohort, [])
        return max([min(len(children), 1), *(self.height(name) + 1 for kind, name in children if kind == "Cohort")])
