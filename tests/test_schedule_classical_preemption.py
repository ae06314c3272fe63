"""Preemption picks Kueue's targets: every case of Kueue v0.19.2's pkg/scheduler/preemption/preemption_test.go
TestPreemption and preemption_hierarchical_test.go TestHierarchicalPreemptions (github.com/kubernetes-sigs/kueue,
tag v0.19.2), translated, but one: "prefer to preempt evicted workloads" (a workload evicted and not yet gone;
the simulation's victims leave at once).

As the Go test does, the case's ClusterQueues and Cohorts are loaded, its admitted workloads hold their quota on
the flavors it gives them (at the times it gives), and the preemptor is asked for the targets of the incoming
workload on the case's flavor assignment, its flavor-resources in Preempt mode needing preemption (GetTargets).
The assertion is the set of workloads the case's IssuePreemptions evicts. No fair sharing: classical preemption
(classical/hierarchical_preemption.go, preemption.go classicalPreemptions)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from kubetrain.admission.cluster_objects import ClusterObjects
from kubetrain.model.pod_sets import PodSet, amount
from kubetrain.schedule.simulation import Simulation
from kubetrain.schedule.workload_state import SimWorkload

KUEUE = "kueue.x-k8s.io/v1beta2"


def quotas(flavor: str, *resources: tuple[str, str, str | None, str | None]) -> dict[str, Any]:
    """A flavor's quotas: (resource, nominal, borrowing limit, lending limit)."""
    return {"name": flavor, "resources": [
        {"name": r, "nominalQuota": n} | ({"borrowingLimit": b} if b else {}) | ({"lendingLimit": lend} if lend else {})
        for r, n, b, lend in resources]}


def cq(name: str, cohort: str | None, *groups: list[dict[str, Any]], within: str = "Never", reclaim: str = "Never",
       borrow_threshold: int | None = None) -> dict[str, Any]:
    preemption: dict[str, Any] = {"withinClusterQueue": within, "reclaimWithinCohort": reclaim}
    if borrow_threshold is not None:
        preemption["borrowWithinCohort"] = {"policy": "LowerPriority", "maxPriorityThreshold": borrow_threshold}
    spec = {"namespaceSelector": {}, "preemption": preemption, "resourceGroups": [
        {"coveredResources": sorted({r["name"] for f in flavors for r in f["resources"]}), "flavors": flavors}
        for flavors in groups]}
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": spec | ({"cohortName": cohort} if cohort else {})}


def cohort(name: str, parent: str | None, *groups: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = {"parentName": parent} if parent else {}
    if groups:
        spec["resourceGroups"] = [{"coveredResources": sorted({r["name"] for f in flavors for r in f["resources"]}),
                                   "flavors": flavors} for flavors in groups]
    return {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def cpu_mem(cpu: str, memory: str, borrowing: tuple[str, str] | None = None) -> list[dict[str, Any]]:
    b = borrowing or (None, None)
    return [quotas("default", ("cpu", cpu, b[0], None), ("memory", memory, b[1], None))]


LOWER, ANY = "LowerPriority", "Any"
# TestPreemption's defaultClusterQueues
DEFAULT_QUEUES = [
    cq("standalone", None, [quotas("default", ("cpu", "6", None, None))],
       [quotas("alpha", ("memory", "3Gi", None, None)), quotas("beta", ("memory", "3Gi", None, None))], within=LOWER),
    cq("c1", "cohort", cpu_mem("6", "3Gi", ("6", "3Gi")), within=LOWER, reclaim=LOWER),
    cq("c2", "cohort", cpu_mem("6", "3Gi", ("6", "3Gi")), reclaim=ANY),
    cq("d1", "cohort-no-limits", cpu_mem("6", "3Gi"), within=LOWER, reclaim=LOWER),
    cq("d2", "cohort-no-limits", cpu_mem("6", "3Gi"), reclaim=ANY),
    cq("l1", "legion", cpu_mem("6", "3Gi", ("12", "6Gi")), within=LOWER, reclaim=LOWER),
    cq("preventStarvation", None, [quotas("default", ("cpu", "6", None, None))], within="LowerOrNewerEqualPriority"),
    cq("a_standard", "with_shared_cq", [quotas("default", ("cpu", "1", "12", None))], reclaim=LOWER,
       borrow_threshold=0),
    cq("b_standard", "with_shared_cq", [quotas("default", ("cpu", "1", "12", None))], within=LOWER, reclaim=ANY,
       borrow_threshold=0),
    cq("a_best_effort", "with_shared_cq", [quotas("default", ("cpu", "1", "12", None))], reclaim=LOWER,
       borrow_threshold=0),
    cq("b_best_effort", "with_shared_cq", [quotas("default", ("cpu", "0", "13", None))], reclaim=LOWER,
       borrow_threshold=0),
    cq("shared", "with_shared_cq", [quotas("default", ("cpu", "10", None, None))]),
    cq("lend1", "cohort-lend", [quotas("default", ("cpu", "6", None, "4"))], within=LOWER, reclaim=LOWER),
    cq("lend2", "cohort-lend", [quotas("default", ("cpu", "6", None, "2"))], within=LOWER, reclaim=LOWER),
    cq("a", "cohort-three", [quotas("default", ("cpu", "2", None, None), ("memory", "2", None, None))], within=LOWER,
       reclaim=ANY),
    cq("b", "cohort-three", [quotas("default", ("cpu", "2", None, None), ("memory", "2", None, None))]),
    cq("c", "cohort-three", [quotas("default", ("cpu", "2", None, None), ("memory", "2", None, None))]),
]
LONG_RANGE = [  # "long range preemption": two cohorts under one root
    cq("cq-left", "cohort-left", [quotas("default", ("cpu", "10", None, None))], reclaim=ANY),
    cq("cq-right", "cohort-right", [quotas("default", ("cpu", "0", None, None))]),
    *[{"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": n}, "spec": {"parentName": "root"}}
      for n in ("cohort-left", "cohort-right")]]


def a(name: str, queue: str, requests: dict[str, str], priority: int = 0, on: str | dict[str, str] = "default",
      reserved: float = 0.0, created: float = 0.0) -> tuple[SimWorkload, dict[str, str], float]:
    """An admitted workload: its requests, the flavor of each (one for all, or per resource), when it was
    admitted and created (seconds from the case's now)."""
    flavors = {r: on if isinstance(on, str) else on[r] for r in requests}
    w = SimWorkload(name, queue, priority, created, (PodSet("main", 1, {r: amount(r, q) for r, q in requests.items()},
                                                            {}, None, (), None),), 3600.0)
    return w, flavors, reserved


def incoming(requests: dict[Any, str], on: str | dict[str, str] = "default", preempt: Iterable[str] | None = None,
             priority: int = 0, created: float = 0.0) -> tuple[SimWorkload, dict[tuple[str, str], int], set]:
    """The preemptor: its usage per flavor-resource (requests by resource on `on`'s flavors, or by
    (flavor, resource)), the flavor-resources in Preempt mode (`preempt`'s resources; all by default)."""
    usage = {}
    for key, quantity in requests.items():
        fr = key if isinstance(key, tuple) else (on if isinstance(on, str) else on[key], key)
        usage[fr] = amount(fr[1], quantity)
    modes = set(usage) if preempt is None else {fr for fr in usage if fr[1] in preempt}
    w = SimWorkload("in", "", priority, created, (), 3600.0)
    return w, usage, modes


CASES: list[tuple[str, str, list, tuple, set[str]]] = [  # (case, target queue, admitted, incoming, victims)
    ("preempt lowest priority", "standalone", [
        a("low", "standalone", {"cpu": "2"}, priority=-1),
        a("mid", "standalone", {"cpu": "2"}),
        a("high", "standalone", {"cpu": "2"}, priority=1)],
     incoming({"cpu": "2"}, priority=1), {"low"}),
    ("preempt multiple", "standalone", [
        a("low", "standalone", {"cpu": "2"}, priority=-1),
        a("mid", "standalone", {"cpu": "2"}),
        a("high", "standalone", {"cpu": "2"}, priority=1)],
     incoming({"cpu": "3"}, priority=1), {"mid", "low"}),
    ("no preemption for low priority", "standalone", [
        a("low", "standalone", {"cpu": "3"}, priority=-1),
        a("mid", "standalone", {"cpu": "3"})],
     incoming({"cpu": "1"}, priority=-1), set()),
    ("not enough low priority workloads", "standalone", [
        a("low", "standalone", {"cpu": "3"}, priority=-1),
        a("mid", "standalone", {"cpu": "3"})],
     incoming({"cpu": "4"}), set()),
    ("some free quota, preempt low priority", "standalone", [
        a("low", "standalone", {"cpu": "1"}, priority=-1),
        a("mid", "standalone", {"cpu": "1"}),
        a("high", "standalone", {"cpu": "3"}, priority=1)],
     incoming({"cpu": "2"}, priority=1), {"low"}),
    ("minimal set excludes low priority", "standalone", [
        a("low", "standalone", {"cpu": "1"}, priority=-1),
        a("mid", "standalone", {"cpu": "2"}),
        a("high", "standalone", {"cpu": "3"}, priority=1)],
     incoming({"cpu": "2"}, priority=1), {"mid"}),
    ("only preempt workloads using the chosen flavor", "standalone", [
        a("low", "standalone", {"memory": "2Gi"}, priority=-1, on="alpha"),
        a("mid", "standalone", {"memory": "1Gi"}, on="beta"),
        a("high", "standalone", {"memory": "1Gi"}, priority=1, on="beta")],
     incoming({"cpu": "1", "memory": "2Gi"}, on={"cpu": "default", "memory": "beta"}, preempt=["memory"], priority=1),
     {"mid"}),
    ("reclaim quota from borrower", "c1", [
        a("c1-low", "c1", {"cpu": "3"}, priority=-1),
        a("c2-mid", "c2", {"cpu": "3"}),
        a("c2-high", "c2", {"cpu": "6"}, priority=1)],
     incoming({"cpu": "3"}, priority=1), {"c2-mid"}),
    ("reclaim quota if workload requests 0 resources for a resource at nominal quota", "c1", [
        a("c1-low", "c1", {"cpu": "3", "memory": "3Gi"}, priority=-1),
        a("c2-mid", "c2", {"cpu": "3"}),
        a("c2-high", "c2", {"cpu": "6"}, priority=1)],
     incoming({"cpu": "3", "memory": "0"}, preempt=["cpu"], priority=1), {"c2-mid"}),
    ("no workloads borrowing", "c1", [
        a("c1-high", "c1", {"cpu": "4"}, priority=1),
        a("c2-low-1", "c2", {"cpu": "4"}, priority=-1)],
     incoming({"cpu": "4"}, priority=1), set()),
    ("not enough workloads borrowing", "c1", [
        a("c1-high", "c1", {"cpu": "4"}, priority=1),
        a("c2-low-1", "c2", {"cpu": "4"}, priority=-1),
        a("c2-low-2", "c2", {"cpu": "4"}, priority=-1)],
     incoming({"cpu": "4"}, priority=1), set()),
    ("preempting locally and borrowing other resources in cohort, without cohort candidates", "c1", [
        a("c1-low", "c1", {"cpu": "4"}, priority=-1),
        a("c2-low-1", "c2", {"cpu": "4"}, priority=-1),
        a("c2-high-2", "c2", {"cpu": "4"}, priority=1)],
     incoming({"cpu": "4", "memory": "5Gi"}, priority=1), {"c1-low"}),
    ("preempting locally and borrowing same resource in cohort", "c1", [
        a("c1-med", "c1", {"cpu": "4"}),
        a("c1-low", "c1", {"cpu": "4"}, priority=-1),
        a("c2-low-1", "c2", {"cpu": "4"}, priority=-1)],
     incoming({"cpu": "4"}, priority=1), {"c1-low"}),
    ("preempting locally and borrowing same resource in cohort; no borrowing limit in the cohort", "d1", [
        a("d1-med", "d1", {"cpu": "4"}),
        a("d1-low", "d1", {"cpu": "4"}, priority=-1),
        a("d2-low-1", "d2", {"cpu": "4"}, priority=-1)],
     incoming({"cpu": "4"}, priority=1), {"d1-low"}),
    ("preempting locally and borrowing other resources in cohort, with cohort candidates", "c1", [
        a("c1-med", "c1", {"cpu": "4"}),
        a("c2-low-1", "c2", {"cpu": "5"}, priority=-1),
        a("c2-low-2", "c2", {"cpu": "1"}, priority=-1),
        a("c2-low-3", "c2", {"cpu": "1"}, priority=-1)],
     incoming({"cpu": "2", "memory": "5Gi"}, priority=1), {"c1-med"}),
    ("preempting locally and not borrowing same resource in 1-queue cohort", "l1", [
        a("l1-med", "l1", {"cpu": "4"}),
        a("l1-low", "l1", {"cpu": "2"}, priority=-1)],
     incoming({"cpu": "4"}, priority=1), {"l1-med"}),
    ("do not reclaim borrowed quota from same priority for withinCohort=ReclaimFromLowerPriority", "c1", [
        a("c1", "c1", {"cpu": "2"}),
        a("c2-1", "c2", {"cpu": "4"}),
        a("c2-2", "c2", {"cpu": "4"})],
     incoming({"cpu": "4"}), set()),
    ("reclaim borrowed quota from same priority for withinCohort=ReclaimFromAny", "c2", [
        a("c1-1", "c1", {"cpu": "4"}),
        a("c1-2", "c1", {"cpu": "4"}, priority=1),
        a("c2", "c2", {"cpu": "2"})],
     incoming({"cpu": "4"}), {"c1-1"}),
    ("preempt from all ClusterQueues in cohort", "c1", [
        a("c1-low", "c1", {"cpu": "3"}, priority=-1),
        a("c1-mid", "c1", {"cpu": "2"}),
        a("c2-low", "c2", {"cpu": "3"}, priority=-1),
        a("c2-mid", "c2", {"cpu": "4"})],
     incoming({"cpu": "4"}), {"c1-low", "c2-low"}),
    ("can't preempt workloads in ClusterQueue for withinClusterQueue=Never", "c2", [
        a("c2-low", "c2", {"cpu": "3"}, priority=-1)],
     incoming({"cpu": "4"}, priority=1), set()),
    ("each podset preempts a different flavor", "standalone", [
        a("low-alpha", "standalone", {"memory": "2Gi"}, priority=-1, on="alpha"),
        a("low-beta", "standalone", {"memory": "2Gi"}, priority=-1, on="beta")],
     incoming({("alpha", "memory"): "2Gi", ("beta", "memory"): "2Gi"}), {"low-alpha", "low-beta"}),
    ("preempt newer workloads with the same priority", "preventStarvation", [
        a("wl1", "preventStarvation", {"cpu": "2"}, priority=2),
        a("wl2", "preventStarvation", {"cpu": "2"}, priority=1, reserved=1.0, created=0.0),
        a("wl3", "preventStarvation", {"cpu": "2"}, priority=1, created=0.0)],
     incoming({"cpu": "2"}, priority=1, created=-15.0), {"wl2"}),
    ("use BorrowWithinCohort; allow preempting a lower-priority workload from another ClusterQueue "
     "while borrowing",
     "a_standard", [
        a("a_best_effort_low", "a_best_effort", {"cpu": "10"}, priority=-1),
        a("b_best_effort_low", "b_best_effort", {"cpu": "1"}, priority=-1)],
     incoming({"cpu": "10"}), {"a_best_effort_low"}),
    ("use BorrowWithinCohort; don't allow preempting a lower-priority workload with priority above "
     "MaxPriorityThreshold, if borrowing is required even after the preemption",
     "a_standard", [
        a("b_standard", "b_standard", {"cpu": "10"}, priority=1)],
     incoming({"cpu": "10"}, priority=2), set()),
    ("use BorrowWithinCohort; allow preempting a lower-priority workload with priority above "
     "MaxPriorityThreshold, if borrowing is not required after the preemption",
     "a_standard", [
        a("b_standard", "b_standard", {"cpu": "13"}, priority=1)],
     incoming({"cpu": "1"}, priority=2), {"b_standard"}),
    ("use BorrowWithinCohort; don't allow for preemption of lower-priority workload from the same "
     "ClusterQueue",
     "a_standard", [
        a("a_standard", "a_standard", {"cpu": "13"}, priority=1)],
     incoming({"cpu": "1"}, priority=2), set()),
    ("use BorrowWithinCohort; only preempt from CQ if no workloads below threshold and already above "
     "nominal",
     "b_standard", [
        a("a_standard_1", "a_standard", {"cpu": "10"}, priority=1),
        a("a_standard_2", "a_standard", {"cpu": "1"}, priority=1),
        a("b_standard_1", "b_standard", {"cpu": "1"}, priority=1),
        a("b_standard_2", "b_standard", {"cpu": "1"}, priority=2)],
     incoming({"cpu": "1"}, priority=3), {"b_standard_1"}),
    ("use BorrowWithinCohort; preempt from CQ and from other CQs with workloads below threshold", "b_standard", [
        a("b_standard_high", "b_standard", {"cpu": "10"}, priority=2),
        a("b_standard_mid", "b_standard", {"cpu": "1"}, priority=1),
        a("a_best_effort_low", "a_best_effort", {"cpu": "1"}, priority=-1),
        a("a_best_effort_lower", "a_best_effort", {"cpu": "1"}, priority=-2)],
     incoming({"cpu": "2"}, priority=2), {"b_standard_mid", "a_best_effort_lower"}),
    ("reclaim quota from lender", "lend1", [
        a("lend1-low", "lend1", {"cpu": "3"}, priority=-1),
        a("lend2-mid", "lend2", {"cpu": "3"}),
        a("lend2-high", "lend2", {"cpu": "4"}, priority=1)],
     incoming({"cpu": "3"}, priority=1), {"lend2-mid"}),
    ("preempt from all ClusterQueues in cohort-lend", "lend1", [
        a("lend1-low", "lend1", {"cpu": "3"}, priority=-1),
        a("lend1-mid", "lend1", {"cpu": "2"}),
        a("lend2-low", "lend2", {"cpu": "3"}, priority=-1),
        a("lend2-mid", "lend2", {"cpu": "4"})],
     incoming({"cpu": "4"}), {"lend1-low", "lend2-low"}),
    ("cannot preempt from other ClusterQueues if exceeds requestable quota including lending limit", "lend1", [
        a("lend2-low", "lend2", {"cpu": "10"}, priority=-1)],
     incoming({"cpu": "9"}), set()),
    ("preemptions from cq when target queue is exhausted for the single requested resource", "a", [
        a("a1", "a", {"cpu": "1"}, priority=-2),
        a("a2", "a", {"cpu": "1"}, priority=-2),
        a("a3", "a", {"cpu": "1"}, priority=-1),
        a("b1", "b", {"cpu": "1"}),
        a("b2", "b", {"cpu": "1"}),
        a("b3", "b", {"cpu": "1"})],
     incoming({"cpu": "2"}), {"a2", "a1"}),
    ("preemptions from cq when target queue is exhausted for two requested resources", "a", [
        a("a1", "a", {"cpu": "1", "memory": "1"}, priority=-2),
        a("a2", "a", {"cpu": "1", "memory": "1"}, priority=-2),
        a("a3", "a", {"cpu": "1", "memory": "1"}, priority=-1),
        a("b1", "b", {"cpu": "1", "memory": "1"}),
        a("b2", "b", {"cpu": "1", "memory": "1"}),
        a("b3", "b", {"cpu": "1", "memory": "1"})],
     incoming({"cpu": "2", "memory": "2"}), {"a2", "a1"}),
    ("preemptions from cq when target queue is exhausted for one requested resource, but not the other", "a", [
        a("a1", "a", {"cpu": "1"}, priority=-2),
        a("a2", "a", {"cpu": "1"}, priority=-2),
        a("a3", "a", {"cpu": "1"}, priority=-1),
        a("b1", "b", {"cpu": "1"}),
        a("b2", "b", {"cpu": "1"}),
        a("b3", "b", {"cpu": "1"})],
     incoming({"cpu": "2", "memory": "2"}), {"a2", "a1"}),
    ("allow preemption from other cluster queues if target cq is not exhausted for the requested resource", "a", [
        a("a1", "a", {"cpu": "1"}, priority=-1),
        a("b1", "b", {"cpu": "1"}),
        a("b2", "b", {"cpu": "1"}),
        a("b3", "b", {"cpu": "1"}),
        a("b4", "b", {"cpu": "1"}),
        a("b5", "b", {"cpu": "1"}, priority=-1)],
     incoming({"cpu": "2"}), {"a1", "b5"}),
    ("long range preemption", "cq-left", [  # its own ClusterQueues: LONG_RANGE
        a("to-be-preempted", "cq-right", {"cpu": "5"})],
     incoming({"cpu": "8"}), {"to-be-preempted"}),
]

NO_CPU = [quotas("default", ("cpu", "0", None, None))]


def tree(cpu: str, root_cpu: str | None = None) -> list[dict[str, Any]]:
    """The cases' usual tree: cohort c (`cpu`) under root r (`root_cpu`, if any)."""
    return [cohort("r", None, *([[quotas("default", ("cpu", root_cpu, None, None))]] if root_cpu else [])),
            cohort("c", "r", [quotas("default", ("cpu", cpu, None, None))])]


def member(name: str, parent: str) -> dict[str, Any]:
    """A ClusterQueue of no quota of its own, preempting lower priority within and anything in its cohort."""
    return cq(name, parent, NO_CPU, within=LOWER, reclaim=ANY)


# TestHierarchicalPreemptions: each case its own tree (r the root; quotas "0" where the case's queue lists none)
HIERARCHICAL_CASES: list[tuple[str, list[dict[str, Any]], str, list, tuple, set[str]]] = [
    ("preempt with hierarchical advantage", [
        *tree("2"),
        member("q", "c"),
        member("q_borrowing", "r")],
     "q", [
        a("admitted2", "q_borrowing", {"cpu": "2"})],
     incoming({"cpu": "2"}), {"admitted2"}),
    ("avoid queues within nominal quota", [
        *tree("2"),
        cq("q_nominal", "r", [quotas("default", ("cpu", "2", None, None))], within=LOWER, reclaim=ANY),
        member("q", "c"),
        member("q_borrowing", "r")],
     "q", [
        a("admitted1", "q_nominal", {"cpu": "2"}, priority=-10),
        a("admitted2", "q_borrowing", {"cpu": "2"})],
     incoming({"cpu": "2"}), {"admitted2"}),
    ("preempt multiple with hierarchical advantage", [
        *tree("2"),
        member("q", "c"),
        member("q_borrowing", "r")],
     "q", [
        a("admitted1", "q_borrowing", {"cpu": "1"}, priority=1),
        a("admitted2", "q_borrowing", {"cpu": "1"}, priority=2)],
     incoming({"cpu": "2"}), {"admitted1", "admitted2"}),
    ("preempt in cohort and own CQ", [
        *tree("3"),
        cq("q", "c", NO_CPU, within=LOWER, reclaim=ANY, borrow_threshold=0),
        member("q_same_cohort", "c")],
     "q", [
        a("admitted_not_preemptible", "q_same_cohort", {"cpu": "1"}, priority=1),
        a("admitted_preemptible", "q_same_cohort", {"cpu": "1"}),
        a("admitted_own_queue", "q", {"cpu": "1"}, priority=-1)],
     incoming({"cpu": "2"}, priority=1), {"admitted_own_queue", "admitted_preemptible"}),
    ("prefer to preempt hierarchical candidate", [
        *tree("2"),
        member("q", "c"),
        member("q_borrowing", "r")],
     "q", [
        a("admitted_borrowing", "q_borrowing", {"cpu": "1"}, priority=1),
        a("admitted_same_queue", "q", {"cpu": "1"}, priority=-2)],
     incoming({"cpu": "1"}), {"admitted_borrowing"}),
    ("forced to preempt priority candidate", [
        *tree("2"),
        cq("q", "c", NO_CPU, within=LOWER, reclaim=ANY, borrow_threshold=0),
        cq("q_nominal", "r", [quotas("default", ("cpu", "2", None, None))], within=LOWER, reclaim=ANY),
        member("q_same_cohort", "c")],
     "q", [
        a("admitted_nominal", "q_nominal", {"cpu": "2"}, priority=-10),
        a("admitted_same_cohort", "q_same_cohort", {"cpu": "2"}, priority=-1)],
     incoming({"cpu": "2"}), {"admitted_same_cohort"}),
    ("incoming workload fits in CQ nominal quota", [
        *tree("2"),
        cq("q", "c", [quotas("default", ("cpu", "4", None, None))], within=LOWER, reclaim=ANY),
        member("q_borrowing", "r"),
        member("q_same_cohort", "c")],
     "q", [
        a("admitted_borrowing", "q_borrowing", {"cpu": "3"}, priority=10),
        a("admitted_same_cohort", "q_same_cohort", {"cpu": "3"}, priority=10)],
     incoming({"cpu": "4"}), {"admitted_borrowing", "admitted_same_cohort"}),
    *[(f"preempt hierarchical {what}", [
        *tree("4", root_cpu="1"),
        cq("q", "c", NO_CPU, within=LOWER, reclaim=LOWER, borrow_threshold=0),
        member("q_borrowing", "r"),
        member("q_same_cohort", "c")],
      "q", [
        a("admitted_borrowing", "q_borrowing", {"cpu": "2"}, priority=-1),
        a(preemptible, queue, {"cpu": "1"}, priority=-1),
        a("admitted_borrowing_not_preemptible", "q_borrowing", {"cpu": "2"}, priority=1)],
      incoming({"cpu": "3"}), {"admitted_borrowing", preemptible})
      for what, preemptible, queue in (
          ("and priority candidates", "admitted_same_cohort_preemptible", "q_same_cohort"),
          ("candidates and inside CQ", "admitted_same_queue_preemptible", "q"))],
    ("reclaim nominal quota from lowest priority workload, excluding non-borrowing", [
        *tree("3"),
        member("q", "c"),
        member("q_borrowing", "r"),
        cq("q_nominal", "r", [quotas("default", ("cpu", "2", None, None))], within=LOWER, reclaim=ANY)],
     "q", [
        a("admitted_borrowing_prio_8", "q_borrowing", {"cpu": "1"}, priority=8),
        a("admitted_borrowing_prio_9", "q_borrowing", {"cpu": "1"}, priority=9),
        a("admitted_borrowing_prio_10", "q_borrowing", {"cpu": "1"}, priority=9),
        a("admitted_nominal", "q_nominal", {"cpu": "2"}, priority=-2)],
     incoming({"cpu": "1"}), {"admitted_borrowing_prio_8"}),
    ("infeasible preemption all available workloads in pruned subtrees", [
        *tree("2"),
        cohort("c_other", "r", [quotas("default", ("cpu", "2", None, None))]),
        member("q_other", "c_other"),
        member("q", "c"),
        member("q_same_cohort", "c")],
     "q", [
        a("admitted_other_1", "q_other", {"cpu": "1"}, priority=-10),
        a("admitted_other_2", "q_other", {"cpu": "1"}, priority=-10),
        a("admitted_same_cohort", "q_same_cohort", {"cpu": "2"})],
     incoming({"cpu": "2"}), set()),
    ("hiearchical preemption with multiple resources", [
        cohort("r", None, [quotas("default", ("cpu", "3", None, None))]),
        cohort("c", "r", [quotas("default", ("cpu", "4", None, None), ("memory", "4Gi", None, None))]),
        cq("q", "c", [quotas("default", ("cpu", "0", None, None), ("memory", "0", None, None))],
           within=LOWER, reclaim=ANY),
        cq("q_borrowing", "r", [quotas("default", ("cpu", "0", None, None), ("memory", "0", None, None))],
           within=LOWER, reclaim=ANY),
        cq("q_same_cohort", "c", [quotas("default", ("cpu", "0", None, None), ("memory", "0", None, None))],
           within=LOWER, reclaim=ANY)],
     "q", [
        a("admitted_borrowing", "q_borrowing", {"cpu": "3", "memory": "1Gi"}),
        a("admitted_same_cohort", "q_same_cohort", {"cpu": "1", "memory": "3Gi"}, priority=-2)],
     incoming({"cpu": "2", "memory": "1Gi"}, priority=-2), {"admitted_borrowing"}),
    ("respect lending limits", [
        *tree("2"),
        cq("q", "c", [quotas("default", ("cpu", "3", None, "2"))], within=LOWER, reclaim=ANY),
        member("q_borrowing", "r")],
     "q", [
        a("admitted_borrowing", "q_borrowing", {"cpu": "4"})],
     incoming({"cpu": "5"}, priority=-2), {"admitted_borrowing"}),
    ("reclaim in complex hierarchy", [
        cohort("r", None),
        cohort("c11", "r", [quotas("default", ("cpu", "4", None, None))]),
        cohort("c12", "r", [quotas("default", ("cpu", "4", None, None))]),
        cohort("c21", "c11", [quotas("default", ("cpu", "4", None, None))]),
        cohort("c22", "c11", [quotas("default", ("cpu", "4", None, None))]),
        cohort("c23", "c11", [quotas("default", ("cpu", "4", None, None))]),
        cohort("c31", "c21", [quotas("default", ("cpu", "4", None, None))]),
        cohort("c32", "c21", [quotas("default", ("cpu", "4", None, None))]),
        member("q1", "c12"),
        member("q2", "c23"),
        member("q3", "c22"),
        member("q4", "c32"),
        member("q5", "c31")],
     "q5", [
        a("admitted_borrowing_1", "q1", {"cpu": "4"}, priority=-6),
        a("admitted_borrowing_2", "q1", {"cpu": "4"}, priority=-5),
        a("admitted_borrowing_3", "q2", {"cpu": "4"}, priority=-9),
        a("admitted_borrowing_4", "q2", {"cpu": "4"}, priority=-10),
        a("admitted_borrowing_5", "q3", {"cpu": "4"}, priority=-4),
        a("admitted_borrowing_6", "q3", {"cpu": "3"}, priority=-3),
        a("admitted_borrowing_7", "q4", {"cpu": "2"}, priority=4),
        a("admitted_borrowing_8", "q4", {"cpu": "3"}, priority=2)],
     incoming({"cpu": "7"}, priority=-2), {"admitted_borrowing_1", "admitted_borrowing_4"}),
]


def targets(objects: list[dict[str, Any]], target: str, admitted: list, preemptor: tuple) -> set[str]:
    flavors = [{"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": f}, "spec": {}}
               for f in ("default", "alpha", "beta")]
    sim = Simulation(ClusterObjects.from_manifests("c", [*flavors, *objects]), [], fair_sharing=False)
    for uid, (w, on, reserved) in enumerate(admitted, start=1):
        w.uid = uid
        sim.admitted_already(w, [on])
        w.reserved_at = reserved
    w, usage, modes = preemptor
    w.cluster_queue, w.uid = target, len(admitted) + 1
    return {t.workload.key for t in sim.preemptor.targets(w, usage, modes)}


@pytest.mark.parametrize("case, target, admitted, preemptor, victims", CASES, ids=[c[0] for c in CASES])
def test_classical_preemption_picks_kueues_targets(case, target, admitted, preemptor, victims):
    objects = LONG_RANGE if case == "long range preemption" else DEFAULT_QUEUES
    assert targets(objects, target, admitted, preemptor) == victims


@pytest.mark.parametrize("case, objects, target, admitted, preemptor, victims", HIERARCHICAL_CASES,
                         ids=[c[0] for c in HIERARCHICAL_CASES])
def test_hierarchical_preemption_picks_kueues_targets(case, objects, target, admitted, preemptor, victims):
    assert targets(objects, target, admitted, preemptor) == victims
