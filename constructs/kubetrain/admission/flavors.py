"""Kueue's flavor assigner, on an idle cluster: which flavor each pod set of a job gets, and whether any can.

A port of Kueue v0.19.2 `pkg/scheduler/flavorassigner/flavorassigner.go` and `tas_flavorassigner.go`:

- a pod set's requests (each pod's times its count; `pods` too where the ClusterQueue covers it) are
  assigned one flavor per resource group; a requested resource no group covers refuses the pod set ("resource
  ... unavailable in ClusterQueue"), unless its request is zero (kueue#8079);
- the group's flavors are tried in the queue's order (`findFlavorForPodSets`); a flavor is skipped when it
  does not match the pods (`checkFlavorForPodSets`): a NoSchedule or NoExecute taint of the flavor that the
  pods' and the flavor's own tolerations do not tolerate, node labels that the pods' node selector or
  required node affinity rule out (judged on the flavor's own label keys only), or topology-aware
  scheduling (`checkPodSetAndFlavorMatchForTAS`): pods that ask for a topology need a flavor with a Topology
  holding their level (in a ClusterQueue whose every flavor has a Topology, it is implied), and a flavor with
  a Topology takes only such pods;
- `fitsResourceQuota`: a request past the queue's potentialAvailable (quota.py), counted with what earlier
  pod sets of the job already took from the flavor, does not fit; one within it fits, borrowing from the
  lowest cohort whose subtree holds it when it is past the nominal quota;
- flavor fungibility: the first flavor that fits ends the search, unless it must borrow and
  `whenCanBorrow` is TryNextFlavor; then the best flavor tried wins (least borrowing).

On an idle cluster `available` is `potentialAvailable`, so preemption never comes into it. Kueue retries a
job from the flavor after the one it last tried, so it can reach any combination of flavors across pod
sets: `search` decides whether one exists at all, within given caps.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubetrain.admission.cluster_objects import (
    ClusterObjects,
    ClusterQueueSnapshot,
    Flavor,
    FlavorResource,
    ResourceGroupSnapshot,
)
from kubetrain.admission.quota import Amount, CohortTree
from kubetrain.model.pod_sets import PODS, PodSet, show

TAINT_EFFECTS = ("NoSchedule", "NoExecute")  # what Kueue's flavor check considers
SEARCH_BUDGET = 200_000  # combinations `search` tries before it gives up and assumes one exists


def tolerated(taint: Mapping[str, Any], tolerations: Sequence[Mapping[str, Any]]) -> bool:
    """Kubernetes' Toleration.ToleratesTaint: an empty key with Exists tolerates everything; an empty effect
    every effect."""
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if t.get("operator", "Equal") == "Exists" and (not t.get("key") or t["key"] == taint.get("key")):
            return True
        if t.get("key") == taint.get("key") and t.get("value", "") == taint.get("value", ""):
            return True
    return False


def _expression_matches(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, operator, values = expression.get("key"), expression.get("operator"), expression.get("values") or []
    value = labels.get(key)
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and value is not None and values:
        try:
            left, right = int(value), int(values[0])
        except ValueError:
            return False
        return left > right if operator == "Gt" else left < right
    return False


def matches_node_labels(pod_set: PodSet, labels: Mapping[str, str]) -> bool:
    """Kueue's flavorSelector: the pods' node selector and required node affinity, restricted to the
    flavor's own label keys, against the flavor's node labels. A term left empty by the restriction matches
    any flavor (terms are ORed)."""
    if any(key in labels and labels[key] != value for key, value in pod_set.node_selector.items()):
        return False
    terms = []
    for term in pod_set.affinity_terms or ():
        expressions = [e for e in term.get("matchExpressions") or [] if e.get("key") in labels]
        if not expressions:
            return True
        terms.append(expressions)
    return not terms or any(all(_expression_matches(e, labels) for e in term) for term in terms)


@dataclass(frozen=True)
class Mode:
    """Kueue's granularMode on an idle cluster: a flavor fits, at a borrowing level (0: within the nominal
    quota; else the height of the cohort that lends), or it does not."""

    fits: bool
    borrowing: int = 0


NO_FIT = Mode(False, sys.maxsize)


def preferred(a: Mode, b: Mode) -> bool:
    """Kueue's isPreferred with no preemption in play: a fit beats no fit, less borrowing beats more."""
    if not a.fits:
        return False
    return not b.fits or a.borrowing < b.borrowing


@dataclass(frozen=True)
class Mismatch:
    """Why a flavor does not take a pod set: `kind` is topology, taint, labels or missing."""

    kind: str
    text: str


@dataclass(frozen=True)
class FlavorTry:
    """One flavor tried for one pod set and resource group."""

    flavor: str
    mode: Mode
    reason: str | None = None  # why it does not match the pods, or cannot hold the request


@dataclass
class PodSetResult:
    pod_set: PodSet
    flavors: dict[str, str] = field(default_factory=dict)  # resource -> flavor
    lenders: dict[str, str] = field(default_factory=dict)  # resource -> the cohort it borrows from
    tries: list[FlavorTry] = field(default_factory=list)
    uncovered: str | None = None  # a requested resource no resource group covers
    failed: bool = False


@dataclass
class Assignment:
    pod_sets: list[PodSetResult]

    @property
    def fits(self) -> bool:
        return bool(self.pod_sets) and not any(p.failed for p in self.pod_sets)


class Undecided(Exception):
    """`search` ran out of budget: whether a combination exists is not known."""


class FlavorAssigner:
    """Flavors for one ClusterQueue's jobs, on an idle cluster."""

    def __init__(self, objects: ClusterObjects, tree: CohortTree, queue: ClusterQueueSnapshot):
        self.objects, self.tree, self.queue = objects, tree, queue
        flavors = [objects.flavors.get(name) for name in queue.flavors]
        # Kueue treats a queue whose every flavor has a Topology as topology-only: its pods need not ask.
        self.topology_only = all(f is not None and f.topology in objects.topologies for f in flavors)

    def requests(self, pod_set: PodSet) -> dict[str, int]:
        total = pod_set.total()
        if self.queue.group_of(PODS) is not None:
            total[PODS] = pod_set.count
        return total

    def asks_for_topology(self, pod_set: PodSet) -> bool:
        return pod_set.placement is not None or self.topology_only

    # -- does a flavor match the pods? -------------------------------------------------------------

    def mismatch(self, pod_set: PodSet, name: str, group: ResourceGroupSnapshot) -> Mismatch | None:
        """Why flavor `name` cannot take the pod set whatever the quota (None when it can)."""
        flavor = self.objects.flavors.get(name)
        if flavor is None:
            return Mismatch("missing", f"ResourceFlavor {name} does not exist")
        reason = self._topology_mismatch(pod_set, flavor, group)
        if reason:
            return Mismatch("topology", reason)
        taint = next((t for t in flavor.node_taints if t.get("effect") in TAINT_EFFECTS
                      and not tolerated(t, [*pod_set.tolerations, *flavor.tolerations])), None)
        if taint is not None:
            value = f"={taint['value']}" if taint.get("value") else ""
            return Mismatch("taint", f"its nodes are tainted {taint.get('key')}{value}:{taint.get('effect')}, which "
                                     "the pods do not tolerate")
        if not matches_node_labels(pod_set, flavor.node_labels):
            selector = {k: v for k, v in pod_set.node_selector.items() if k in flavor.node_labels}
            wanted = ", ".join(f"{k}={v}" for k, v in selector.items()) or "other nodes by their node affinity"
            labels = ", ".join(f"{k}={v}" for k, v in flavor.node_labels.items())
            return Mismatch("labels", f"its nodes are labelled {labels}; the pods select {wanted}")
        return None

    def _topology_mismatch(self, pod_set: PodSet, flavor: Flavor, group: ResourceGroupSnapshot) -> str | None:
        if not self.asks_for_topology(pod_set):
            if flavor.topology:
                return f"it has Topology {flavor.topology}, and Kueue gives a flavor with a Topology only to pods " \
                       "that ask for topology-aware placement (the queue has flavors without one)"
            return None
        if pod_set.placement is None:
            return None  # implied by a topology-only queue: any of its flavors will do
        if flavor.topology is None:
            if not set(pod_set.requests) & set(group.covered):
                return None
            return "it has no Topology, and the pods ask for topology-aware placement"
        levels = self.objects.topologies.get(flavor.topology)
        if levels is None:
            return f"its Topology {flavor.topology} does not exist"
        level = pod_set.placement.level
        if level is not None and level not in levels:
            return f"{level} is not a level of its Topology {flavor.topology} ({', '.join(levels)})"
        return None

    # -- Kueue's choice ----------------------------------------------------------------------------

    def assign(self, pod_sets: Sequence[PodSet]) -> Assignment:
        """The flavors Kueue assigns on an idle cluster, pod set by pod set, in order; it stops at the first
        pod set that gets none."""
        usage: dict[FlavorResource, int] = {}
        results: list[PodSetResult] = []
        for pod_set in pod_sets:
            requests = self.requests(pod_set)
            result = PodSetResult(pod_set)
            results.append(result)
            for resource in sorted(requests):
                group = self.queue.group_of(resource)
                if group is None:
                    if requests[resource]:
                        result.uncovered, result.failed = resource, True
                        break
                    continue
                if resource not in result.flavors and not self._find_flavor(pod_set, group, requests, usage, result):
                    result.failed = True
                    break
            if result.failed:
                break
            for resource, flavor in result.flavors.items():
                usage[(flavor, resource)] = usage.get((flavor, resource), 0) + requests[resource]
        return Assignment(results)

    def _find_flavor(self, pod_set: PodSet, group: ResourceGroupSnapshot, requests: Mapping[str, int],
                     usage: Mapping[FlavorResource, int], result: PodSetResult) -> bool:
        wanted = {r: v for r, v in requests.items() if r in group.covered}
        best: dict[str, tuple[str, str | None]] | None = None
        best_mode = NO_FIT
        for flavor in group.flavors:
            mismatch = self.mismatch(pod_set, flavor, group)
            if mismatch:
                result.tries.append(FlavorTry(flavor, NO_FIT, mismatch.text))
                continue
            mode, picks, why = Mode(True), {}, None
            for resource, value in wanted.items():
                fr = (flavor, resource)
                total = usage.get(fr, 0) + value
                limit = self.tree.queue_potential(self.queue.name, fr)
                if total > limit:
                    this, why = NO_FIT, (resource, usage.get(fr, 0), value, limit)
                else:
                    height, lender = self.tree.lender(self.queue.name, fr, total)
                    this, picks[resource] = Mode(True, height), (flavor, lender)
                if preferred(mode, this):
                    mode = this
                if not mode.fits:
                    break
            result.tries.append(FlavorTry(flavor, mode, _quota_reason(flavor, why) if why else None))
            if not self._try_next(mode):
                best = picks
                break
            if preferred(mode, best_mode):
                best, best_mode = picks, mode
        if best is None:
            return False
        for resource, (flavor, lender) in best.items():
            result.flavors[resource] = flavor
            if lender:
                result.lenders[resource] = lender
        return True

    def _try_next(self, mode: Mode) -> bool:
        """Kueue's shouldTryNextFlavor, with no preemption in play."""
        return not mode.fits or (mode.borrowing > 0 and self.queue.when_can_borrow == "TryNextFlavor")

    # -- can any combination fit? ------------------------------------------------------------------

    def search(self, pod_sets: Sequence[PodSet], cap: Callable[[FlavorResource], Amount]) -> list[dict[str, str]] | None:
        """Flavors for every pod set (resource -> flavor) whose requests, added up per flavor, stay within
        `cap`; None when there are none. Raises Undecided past SEARCH_BUDGET tries."""
        steps: list[tuple[int, ResourceGroupSnapshot, list[str], dict[str, int]]] = []
        for i, pod_set in enumerate(pod_sets):
            requests = self.requests(pod_set)
            if any(v and self.queue.group_of(r) is None for r, v in requests.items()):
                return None
            groups = list(dict.fromkeys(g for r in requests if (g := self.queue.group_of(r)) is not None))
            for group in groups:
                flavors = [f for f in group.flavors if self.mismatch(pod_set, f, group) is None]
                if not flavors:
                    return None
                steps.append((i, group, flavors, {r: v for r, v in requests.items() if r in group.covered}))
        chosen: list[dict[str, str]] = [{} for _ in pod_sets]
        usage: dict[FlavorResource, int] = {}
        budget = [SEARCH_BUDGET]

        def place(k: int) -> bool:
            if k == len(steps):
                return True
            i, _, flavors, wanted = steps[k]
            for flavor in flavors:
                budget[0] -= 1
                if budget[0] < 0:
                    raise Undecided
                if self.asks_for_topology(pod_sets[i]) and self._topology_flavor(flavor) and any(
                        f != flavor and self._topology_flavor(f) for f in chosen[i].values()):
                    continue  # Kueue gives a pod set one topology flavor at most
                if any(usage.get((flavor, r), 0) + v > cap((flavor, r)) for r, v in wanted.items()):
                    continue
                for r, v in wanted.items():
                    usage[(flavor, r)] = usage.get((flavor, r), 0) + v
                    chosen[i][r] = flavor
                if place(k + 1):
                    return True
                for r, v in wanted.items():
                    usage[(flavor, r)] -= v
                    del chosen[i][r]
            return False

        return chosen if place(0) else None

    def _topology_flavor(self, name: str) -> bool:
        flavor = self.objects.flavors.get(name)
        return flavor is not None and flavor.topology is not None


def _quota_reason(flavor: str, why: tuple[str, int, int, Amount]) -> str:
    resource, before, value, limit = why
    earlier = f"{show(resource, before)} for earlier pod sets + " if before else ""
    return f"{earlier}{show(resource, value)} {resource} is more than the {show(resource, limit)} it can ever admit " \
           f"in flavor {flavor}"
