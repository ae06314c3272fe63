"""Kueue's cohort tree with usage: what each ClusterQueue and Cohort has admitted, and what is still available.

A port of Kueue v0.19.2 `pkg/cache/scheduler/resource_node.go` on top of kubetrain's idle tree
(kubetrain.admission.quota.CohortTree, which holds SubtreeQuota, localQuota and potentialAvailable):

- `add`/`remove`: usage past what a node's lending limit keeps local is stored in its parent (addUsage,
  removeUsage);
- `available`: a root's SubtreeQuota less its usage; any other node's local availability plus its parent's,
  capped by its borrowing limit less what it already stores in the parent;
- `lowest_subtree`: FindHeightOfLowestSubtreeThatFits, with usage (pkg/scheduler/preemption/classical);
- `drs`: the dominant resource share of fair sharing (pkg/cache/scheduler/fair_sharing.go): per resource,
  usage over the node's own SubtreeQuota, against its parent's potentialAvailable over every flavor, x1000,
  the largest over resources, divided by the node's weight; as a key CompareDRS's order.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from kubetrain.admission.cluster_objects import FlavorResource
from kubetrain.admission.quota import Amount, CohortTree, Node

Usage = dict[FlavorResource, int]


def cq(name: str) -> Node:
    return ("ClusterQueue", name)


class Ledger:
    def __init__(self, tree: CohortTree, weights: Mapping[Node, float] | None = None):
        self.tree = tree
        self.usage: dict[Node, Usage] = {}
        self.weights = dict(weights or {})
        self._parent: dict[Node, Node | None] = {}
        self._lendable: dict[tuple[str, str], Amount] = {}
        self._static: dict[tuple[Node, FlavorResource], tuple[Amount, Amount, int | None, int]] = {}

    def static(self, node: Node, fr: FlavorResource) -> tuple[Amount, Amount, int | None, int]:
        """(SubtreeQuota, localQuota, borrowing limit, nominal quota): quota alone decides them."""
        key = (node, fr)
        found = self._static.get(key)
        if found is None:
            quota = self.tree._holders[node].quota(fr)
            found = self._static[key] = (self.tree.subtree(node, fr), self.tree.local(node, fr),
                                         quota.borrowing_limit, quota.nominal)
        return found

    def parent(self, node: Node) -> Node | None:
        if node not in self._parent:
            self._parent[node] = self.tree._parent(node)
        return self._parent[node]

    def used(self, node: Node, fr: FlavorResource) -> int:
        return self.usage.get(node, {}).get(fr, 0)

    def local_available(self, node: Node, fr: FlavorResource) -> Amount:
        return max(0, self.static(node, fr)[1] - self.used(node, fr))

    def add(self, node: Node, usage: Mapping[FlavorResource, int]) -> None:
        for fr, value in usage.items():
            self._add(node, fr, value)

    def remove(self, node: Node, usage: Mapping[FlavorResource, int]) -> None:
        for fr, value in usage.items():
            self._remove(node, fr, value)

    def _add(self, node: Node, fr: FlavorResource, value: int) -> None:
        while True:
            local = self.local_available(node, fr)
            held = self.usage.setdefault(node, {})
            held[fr] = held.get(fr, 0) + value
            parent = self.parent(node)
            if parent is None or value <= local:
                return
            node, value = parent, value - local

    def _remove(self, node: Node, fr: FlavorResource, value: int) -> None:
        while True:
            held = self.usage.setdefault(node, {})
            stored_in_parent = held.get(fr, 0) - self.static(node, fr)[1]
            held[fr] = held.get(fr, 0) - value
            parent = self.parent(node)
            if stored_in_parent <= 0 or parent is None:
                return
            node, value = parent, min(value, stored_in_parent)

    def available(self, node: Node, fr: FlavorResource) -> Amount:
        """Kueue's available (negative when in debt; ClusterQueueSnapshot.Available clamps it at 0)."""
        parent = self.parent(node)
        subtree, local, limit, _ = self.static(node, fr)
        if parent is None:
            return subtree - self.used(node, fr)
        from_parent = self.available(parent, fr)
        if limit is not None:
            stored = subtree - local
            used_in_parent = max(0, self.used(node, fr) - local)
            from_parent = min(stored - used_in_parent + limit, from_parent)
        return self.local_available(node, fr) + from_parent

    def queue_available(self, queue: str, fr: FlavorResource) -> Amount:
        return max(0, self.available(cq(queue), fr))

    def potential(self, queue: str, fr: FlavorResource) -> Amount:
        return self.tree.queue_potential(queue, fr)

    def borrowing_with(self, node: Node, fr: FlavorResource, value: Amount) -> bool:
        subtree, _, _, nominal = self.static(node, fr)
        return (nominal if node[0] == "ClusterQueue" else subtree) < self.used(node, fr) + value

    def lowest_subtree(self, queue: str, fr: FlavorResource, value: Amount) -> tuple[int, bool]:
        """(borrowing level, whether a cohort above the one that fits could still be reclaimed from)."""
        node = cq(queue)
        path = self.tree.path(queue)
        if not self.borrowing_with(node, fr, value) or not path:
            return 0, bool(path)
        remaining = value - self.local_available(node, fr)
        for i, cohort in enumerate(path):
            cohort_node = ("Cohort", cohort)
            if not self.borrowing_with(cohort_node, fr, remaining):
                return self.tree.height(cohort), i + 1 < len(path)
            remaining -= self.local_available(cohort_node, fr)
        return self.tree.height(path[-1]), False

    def within_nominal(self, node: Node, frs: Iterable[FlavorResource]) -> bool:
        """IsWithinNominalInResources: the node's usage is within its SubtreeQuota for every flavor-resource."""
        return all(self.used(node, fr) <= self.static(node, fr)[0] for fr in frs)

    def fits_in_quota(self, node: Node, requests: Mapping[FlavorResource, int]) -> tuple[bool, dict[FlavorResource, int]]:
        """QuantitiesFitInQuota: whether the requests fit the node's SubtreeQuota on top of its usage, and what
        is left of them past its local availability."""
        fits = all(self.static(node, fr)[0] >= self.used(node, fr) + v for fr, v in requests.items())
        return fits, {fr: max(0, v - self.local_available(node, fr)) for fr, v in requests.items()}

    def drs(self, node: Node, extra: Mapping[FlavorResource, int] | None = None
            ) -> tuple[frozenset[FlavorResource], tuple[int, float]]:
        """Kueue's DRS of a ClusterQueue or Cohort, with `extra` usage added: the flavor-resources it borrows
        (usage past its SubtreeQuota), and a key ordered as CompareDRS orders shares: one borrowing on a fair
        weight of 0 ranks above every other (those by their unweighted ratio), the rest by ratio / weight."""
        parent = self.parent(node)
        if parent is None:
            return frozenset(), (0, 0.0)
        borrowed: dict[str, Amount] = {}
        borrowed_frs = set()
        held = self.usage.get(node, {})
        for fr in {*held, *(extra or {})}:
            over = held.get(fr, 0) + (extra or {}).get(fr, 0) - self.static(node, fr)[0]
            if over > 0:
                borrowed[fr[1]] = borrowed.get(fr[1], 0) + over
                borrowed_frs.add(fr)
        ratio = 0.0
        for resource, amount in borrowed.items():
            lendable = self.lendable(parent, resource)
            if lendable > 0:
                ratio = max(ratio, amount * 1000 / lendable)
        weight = self.weights.get(node, 1.0)
        if weight == 0 and ratio > 0:
            return frozenset(borrowed_frs), (1, ratio)
        return frozenset(borrowed_frs), (0, ratio / weight if ratio else 0.0)

    def lendable(self, cohort: Node, resource: str) -> Amount:
        """calculateLendable: the potentialAvailable of the cohort, of one resource over every flavor."""
        key = (cohort[1], resource)
        if key not in self._lendable:
            flavors = {f for holder in self.tree._holders.values() for (f, r) in holder.quotas if r == resource}
            self._lendable[key] = sum(self.tree.potential(cohort, (f, resource)) for f in flavors)
        return self._lendable[key]
