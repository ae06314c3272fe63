"""Fair-sharing preemption decides as Kueue's does: every case of Kueue v0.19.2's
pkg/scheduler/preemption/preemption_fair_test.go TestFairPreemptions (github.com/kubernetes-sigs/kueue, tag
v0.19.2) that uses the default strategies, translated.

As the Go test does, each case's ClusterQueues and Cohorts are loaded, its admitted workloads hold their quota
(admitted at one time, their names as UIDs: the candidates' last tie-break), and the preemptor is asked for
the targets of the incoming workload on a flavor needing preemption (GetTargets with a Preempt assignment).
The assertion is the case's wantPreempted: each target and the reason Kueue gives it."""

from __future__ import annotations

from typing import Any

import pytest
from kubetrain.admission.cluster_objects import ClusterObjects
from kubetrain.model.pod_sets import PodSet
from kubetrain.schedule.preemption import FAIR, RECLAIM, WITHIN_QUEUE
from kubetrain.schedule.simulation import Simulation
from kubetrain.schedule.workload_state import SimWorkload

KUEUE = "kueue.x-k8s.io/v1beta2"


def quota(cpu: str, flavor: str = "default") -> dict[str, Any]:
    return {"name": flavor, "resources": [{"name": "cpu", "nominalQuota": cpu}]}


def groups(*flavors: dict[str, Any]) -> dict[str, Any]:
    return {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": list(flavors)}]} if flavors else {}


def cq(name: str, cohort: str | None, *flavors: dict[str, Any], within: str = "Never", reclaim: str = "Never",
       weight: str | None = None, **spec: Any) -> dict[str, Any]:
    body = {"namespaceSelector": {}, "preemption": {"withinClusterQueue": within, "reclaimWithinCohort": reclaim},
            **groups(*flavors), **spec} | ({"cohortName": cohort} if cohort else {}) | \
        ({"fairSharing": {"weight": weight}} if weight is not None else {})
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": body}


def cohort(name: str, parent: str | None, *flavors: dict[str, Any], weight: str | None = None) -> dict[str, Any]:
    spec = ({"parentName": parent} if parent else {}) | groups(*flavors) | \
        ({"fairSharing": {"weight": weight}} if weight is not None else {})
    return {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def w(name: str, queue: str, cpu: float = 1, priority: int = 0,
      flavor: str = "default") -> tuple[str, str, float, int, str]:
    return name, queue, cpu, priority, flavor


def targets(objects: list[dict[str, Any]], admitted: list[tuple], incoming: tuple) -> set[tuple[str, str]]:
    flavors = {f["name"] for o in objects for g in o["spec"].get("resourceGroups", []) for f in g["flavors"]}
    manifests = [{"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": f}, "spec": {}}
                 for f in sorted(flavors)]
    sim = Simulation(ClusterObjects.from_manifests("c", [*manifests, *objects]), [], fair_sharing=True)

    def workload(name: str, queue: str, cpu: float, priority: int) -> SimWorkload:
        pod_set = PodSet("main", 1, {"cpu": int(cpu * 1000)}, {}, None, (), None)
        return SimWorkload(name, queue, priority, 0.0, (pod_set,), 1.0)
    uids = {name: i + 1 for i, name in enumerate(sorted(a[0] for a in admitted))}
    for name, queue, cpu, priority, flavor in admitted:
        admitted_workload = workload(name, queue, cpu, priority)
        admitted_workload.uid = uids[name]
        sim.admitted_already(admitted_workload, [{"cpu": flavor}])
    name, queue, cpu, priority, flavor = incoming
    preemptor = workload(name, queue, cpu, priority)
    preemptor.uid = len(uids) + 1
    found = sim.preemptor.targets(preemptor, {(flavor, "cpu"): int(cpu * 1000)}, {(flavor, "cpu")})
    return {(t.workload.key, t.variant) for t in found}


LOWER, ANY = "LowerPriority", "Any"
BASE = [cq(n, "all", quota("3"), within=LOWER, reclaim=ANY,
           borrowWithinCohort={"policy": LOWER, "maxPriorityThreshold": -3}) for n in "abc"] + \
    [cq("preemptible", "all", quota("0"))]
UNITS = {q: [w(f"{q}{i}", q) for i in range(1, 7)] for q in "abc"}


def plain(name: str, weight: str | None = None) -> dict[str, Any]:
    return cq(name, "all", quota("3"), within=LOWER, reclaim=ANY, weight=weight)


CASES: list[tuple[str, list[dict[str, Any]], list[tuple], tuple, set[tuple[str, str]]]] = [
    # (case, objects, admitted, incoming, wantPreempted: (workload, reason))
    ("reclaim nominal from user using the most", BASE, UNITS["a"][:3] + UNITS["b"][:5] + UNITS["c"][:1],
     w("c_incoming", "c"), {("b1", RECLAIM)}),
    ("can reclaim from queue using less, if taking the latest workload from user using the most isn't enough",
     BASE, [w("a1", "a", 3), w("a2", "a", 1), w("b1", "b", 2), w("b2", "b", 3)], w("c_incoming", "c", 3),
     {("a1", RECLAIM)}),
    ("reclaim borrowable quota from user using the most", BASE, UNITS["a"][:3] + UNITS["b"][:5] + UNITS["c"][:1],
     w("a_incoming", "a"), {("b1", FAIR)}),
    ("preempt one from each CQ borrowing", BASE,
     [w("a1", "a", 0.5), w("a2", "a", 0.5), w("a3", "a", 3), w("b1", "b", 0.5), w("b2", "b", 0.5), w("b3", "b", 3)],
     w("c_incoming", "c", 2), {("a1", RECLAIM), ("b1", RECLAIM)}),
    ("can't preempt when everyone under nominal", BASE, UNITS["a"][:3] + UNITS["b"][:3] + UNITS["c"][:3],
     w("c_incoming", "c"), set()),
    ("can't preempt when it would switch the imbalance", BASE, UNITS["a"][:3] + UNITS["b"][:5],
     w("a_incoming", "a", 2), set()),
    ("can preempt lower priority workloads from same CQ", BASE,
     [w("a1_low", "a", 1, -1), w("a2_low", "a", 1, -1), w("a3", "a"), w("a4", "a")] + UNITS["b"][:5],
     w("a_incoming", "a", 2), {("a1_low", WITHIN_QUEUE), ("a2_low", WITHIN_QUEUE)}),
    ("can preempt a combination of same CQ and highest user", BASE,
     [w("a_low", "a", 1, -1), w("a2", "a"), w("a3", "a")] + UNITS["b"][:6],
     w("a_incoming", "a", 2), {("a_low", WITHIN_QUEUE), ("b1", FAIR)}),
    ("preempt huge workload if there is no other option, as long as the target CQ gets a lower share", BASE,
     [w("b1", "b", 9)], w("a_incoming", "a", 2), {("b1", RECLAIM)}),
    ("can't preempt huge workload if the incoming is also huge", BASE, [w("a1", "a", 2), w("b1", "b", 7)],
     w("a_incoming", "a", 5), set()),
    ("can't preempt 2 smaller workloads if the incoming is huge", BASE,
     [w("b1", "b", 2), w("b2", "b", 2), w("b3", "b", 3)], w("a_incoming", "a", 6), set()),
    ("preempt from target and others even if over nominal", BASE,
     [w("a1_low", "a", 2, -1), w("a2_low", "a", 1, -1), w("b1", "b", 3), w("b2", "b", 3)],
     w("a_incoming", "a", 4), {("a1_low", WITHIN_QUEUE), ("b1", FAIR)}),
    ("prefer to preempt workloads that don't make the target CQ have the biggest share", BASE,
     [w("b1", "b", 2), w("b2", "b", 1), w("b3", "b", 2), w("c1", "c", 1)], w("a_incoming", "a", 3.5),
     {("b2", FAIR)}),
    ("preempt from different cluster queues if the end result has a smaller max share", BASE,
     [w("b1", "b", 2), w("b2", "b", 2.5), w("c1", "c", 2), w("c2", "c", 2.5)], w("a_incoming", "a", 3.5),
     {("b1", FAIR), ("c1", FAIR)}),
    ("scenario above does not flap", BASE, [w("a1", "a", 3.5), w("b2", "b", 2.5), w("c2", "c", 2.5)],
     w("b_incoming", "b", 2), set()),
    ("cannot preempt if it would make the candidate CQ go under nominal after preempting one element", BASE,
     [w("b1", "b", 3), w("b2", "b", 3), w("c1", "c", 3)], w("a_incoming", "a", 4), set()),
    ("workloads under priority threshold not capriciously preempted", BASE,
     UNITS["a"][:3] + UNITS["b"][:3] + [w(f"preemptible{i}", "preemptible", 1, -3) for i in (1, 2, 3)],
     w("a_incoming", "a", 2), set()),
    ("CQ with higher weight can preempt more", [plain("a", "2"), plain("b"), plain("c")],
     UNITS["a"][:3] + UNITS["b"][:6], w("a_incoming", "a", 2), {("b1", FAIR), ("b2", FAIR)}),
    ("can preempt anything borrowing from CQ with 0 weight", [plain("a"), plain("b", "0"), plain("c")],
     UNITS["a"][:3] + UNITS["b"][:6], w("a_incoming", "a", 3), {("b1", FAIR), ("b2", FAIR), ("b3", FAIR)}),
    ("can't preempt nominal from CQ with 0 weight", [plain("a"), plain("b", "0")],
     UNITS["a"][:3] + UNITS["b"][:3], w("a_incoming", "a"), set()),
    ("can't preempt nominal from Cohort with 0 weight", [
        cq("left-cq", "root", quota("0"), reclaim=ANY),
        cq("right-cq", "right-cohort", quota("0"), reclaim=ANY, weight="0"),
        cohort("right-cohort", "root", quota("1"), weight="0")],
     [w("right-1", "right-cq")], w("left-1", "left-cq"), set()),
    ("can preempt within cluster queue when no cohort", [cq("a", None, quota("1"), within=LOWER)],
     [w("a1", "a")], w("a_incoming", "a", 1, 1000), {("a1", WITHIN_QUEUE)}),
    ("hierarchical preemption", [
        cq("a", "LEFT", quota("1"), reclaim=ANY, weight="2"), cq("b", "LEFT", quota("1")), cq("c", "ROOT", quota("1")),
        cq("d", "RIGHT", quota("1")), cq("e", "RIGHT", quota("1"), weight="0.99"),
        cohort("ROOT", None, quota("5")), cohort("LEFT", "ROOT", quota("5"), weight="2"),
        cohort("RIGHT", "ROOT", quota("5"))],
     [w(f"{q}{p}", q, 1, p) for q in "bcde" for p in range(1, 6)], w("unit", "a", 5),
     {("b1", FAIR), ("b2", FAIR), ("c1", FAIR), ("c2", FAIR), ("e1", FAIR)}),
    ("borrowing cq in non-borrowing cohort is protected", [
        cq("a", "ROOT", quota("5"), within=LOWER, reclaim=ANY, weight="10"), cq("b", "RIGHT", weight="0.1"),
        cohort("ROOT", None), cohort("RIGHT", "ROOT", quota("1"), weight="0.1")],
     [w("a1", "a", 1, -1), w("a2", "a", 1, -1), w("a3", "a", 1, -1), w("b1", "b", 1, -1)], w("unit", "a", 5),
     {("a1", WITHIN_QUEUE), ("a2", WITHIN_QUEUE), ("a3", WITHIN_QUEUE)}),
    ("forced to preempt within clusterqueue because borrowing workload too important", [
        cq("a", "ROOT", quota("5"), within=LOWER, reclaim=LOWER, weight="10"), cq("b", "RIGHT", weight="0.1"),
        cohort("ROOT", None), cohort("RIGHT", "ROOT", quota("3"), weight="0.1")],
     [w("a1", "a", 1, -1), w("a2", "a", 1, -1), w("a3", "a", 1, -1), w("b1", "b", 4, 100)], w("unit", "a", 4),
     {("a1", WITHIN_QUEUE), ("a2", WITHIN_QUEUE), ("a3", WITHIN_QUEUE)}),
    ("deep preemption", [
        cq("a", "AAA", quota("0"), reclaim=ANY), cq("b", "BBB", quota("0")), cohort("ROOT", None),
        cohort("A", "ROOT", weight="1.01"), cohort("AA", "A"), cohort("AAA", "AA"),
        cohort("B", "ROOT", weight="0.99"), cohort("BB", "B"), cohort("BBB", "BB"),
        cohort("C", "ROOT"), cohort("CC", "C"), cohort("CCC", "CC"), cohort("CCCC", "CCC", quota("1"))],
     [w("b1", "b")], w("a1", "a"), {("b1", FAIR)}),
    ("cq with zero weight can reclaim nominal quota", [
        cq("a", "ROOT", quota("1"), reclaim=ANY, weight="0.0"), cq("b", "ROOT", quota("0"), weight="1.0")],
     [w("b1", "b")], w("a1", "a"), {("b1", RECLAIM)}),
    ("cohort with zero weight can reclaim nominal quota", [
        cq("a", "A", quota("0"), reclaim=ANY, weight="0.0"), cq("b", "ROOT", quota("0"), weight="1.0"),
        cohort("A", "ROOT", quota("1"), weight="0.0")],
     [w("b1", "b")], w("a1", "a"), {("b1", FAIR)}),
    ("nominal first: workload fitting within nominal can preempt despite high aggregate DRS", [
        cq("a", "all", quota("3", "premium"), quota("0", "cheap"), reclaim=ANY,
           flavorFungibility={"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"}),
        cq("b", "all", quota("0", "premium"), quota("6", "cheap"))],
     [w("a_prem1", "a", flavor="premium"), w("a_prem2", "a", flavor="premium")] +
     [w(f"a_cheap{i}", "a", flavor="cheap") for i in range(1, 6)] + [w("b_prem1", "b", flavor="premium")],
     w("a_incoming", "a", flavor="premium"), {("b_prem1", RECLAIM)}),
    ("zero weight borrowing preemptor cannot preempt from a borrowing CQ with a non-zero weight", [
        cq("a", "all", quota("1"), reclaim=ANY, weight="0"), cq("b", "all", quota("1"), weight="1")],
     [w("a1", "a"), w("b1", "b"), w("b2", "b")], w("a_incoming", "a"), set()),
    ("zero weight borrowing preemptor can preempt from a borrowing CQ which also has zero weight", [
        cohort("all", None, quota("3")), cq("a", "all", quota("1"), reclaim=ANY, weight="0"),
        cq("b", "all", quota("0"), weight="0")],
     [w("b1", "b"), w("b2", "b"), w("b3", "b")], w("a_incoming", "a", 2), {("b1", FAIR)}),
    ("non-zero weight borrowing preemptor preempts from a borrowing CQ", [
        cohort("all", None, quota("3")), cq("a", "all", quota("1"), reclaim=ANY, weight="1"),
        cq("b", "all", quota("0"), weight="1")],
     [w("b1", "b"), w("b2", "b"), w("b3", "b")], w("a_incoming", "a", 2), {("b1", FAIR)}),
    ("candidates skipped by the first strategy are still available to the second strategy", [
        cohort("A", "ROOT", quota("1"), weight="0"), cq("p", "A", quota("2"), reclaim=ANY, weight="1"),
        cq("y", "A", quota("2"), weight="1"), cq("x", "ROOT", quota("1"), weight="1")],
     [w("p1", "p", 2), w("y1", "y", 2), w("y2", "y", 2), w("x1", "x"), w("x2", "x")], w("p_incoming", "p"),
     {("y1", FAIR), ("x1", FAIR)}),
]
# Left out of the translation: the two cases that configure other strategies than Kueue's default
# (fairSharing.preemptionStrategies is the Kueue Configuration's, which a fleet does not declare).


@pytest.mark.parametrize("case, objects, admitted, incoming, want", CASES, ids=[c[0] for c in CASES])
def test_fair_sharing_preemption_picks_kueues_targets(case, objects, admitted, incoming, want):
    assert targets(objects, admitted, incoming) == want
