"""The admission port against Kueue's own unit-test scenarios (kubernetes-sigs/kueue v0.19.2).

Each case names the Kueue test and case it translates. Kueue's tests build objects with wrappers such as
`MakeFlavorQuotas("red").Resource("cpu", nominal, borrowingLimit, lendingLimit)`; the helpers below build the
same objects as manifests, which is what kubetrain's admission reads. Kueue's scheduler tests run with usage in
the cluster; kubetrain judges an idle one, so where a case has usage it is translated by taking the usage off
the nominal quota it is charged to (said at the case). Amounts are Kueue's: millicores for cpu.
"""

from __future__ import annotations

from itertools import product
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubetrain.admission.cluster_objects import ClusterObjects
from kubetrain.admission.flavors import FlavorAssigner
from kubetrain.admission.quota import CohortTree
from kubetrain.admission.verdict import plan_cluster
from kubetrain.model.pod_sets import pod_requests, pod_set

KUEUE = "kueue.x-k8s.io/v1beta2"
RESOURCE = {"example_com_gpu": "example.com/gpu"}  # keyword arguments cannot hold the resource's name


def quotas(flavor: str, **resources: str | tuple[str, ...]) -> dict[str, Any]:
    """MakeFlavorQuotas(flavor).Resource(name, nominal[, borrowingLimit[, lendingLimit]]) ("" is unset)."""
    out = []
    for name, value in resources.items():
        nominal, borrowing, lending = (*((value,) if isinstance(value, str) else value), "", "")[:3]
        resource = {"name": RESOURCE.get(name, name), "nominalQuota": nominal}
        resource |= {"borrowingLimit": borrowing} if borrowing else {}
        resource |= {"lendingLimit": lending} if lending else {}
        out.append(resource)
    return {"name": flavor, "resources": out}


def group(*flavors: dict[str, Any]) -> dict[str, Any]:
    return {"coveredResources": [r["name"] for r in flavors[0]["resources"]], "flavors": list(flavors)}


def cluster_queue(name: str, *groups: dict[str, Any], cohort: str | None = None,
                  when_can_borrow: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"namespaceSelector": {}, "resourceGroups": list(groups)}
    spec |= {"cohortName": cohort} if cohort else {}
    spec |= {"flavorFungibility": {"whenCanBorrow": when_can_borrow}} if when_can_borrow else {}
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def cohort(name: str, *groups: dict[str, Any], parent: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"resourceGroups": list(groups)}
    spec |= {"parentName": parent} if parent else {}
    return {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def flavor(name: str, labels: dict[str, str] | None = None, taints: list[dict] | None = None,
           tolerations: list[dict] | None = None, topology: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeLabels": labels or {}, "nodeTaints": taints or [], "tolerations": tolerations or []}
    spec |= {"topologyName": topology} if topology else {}
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def topology(name: str, *levels: str) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "Topology", "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": level} for level in levels]}}


SPOT = {"key": "instance", "value": "spot", "effect": "NoSchedule"}
TOLERATE_SPOT = {"key": "instance", "operator": "Equal", "value": "spot", "effect": "NoSchedule"}
# TestAssignFlavors' resourceFlavors
FLAVORS = [flavor("default"), flavor("one", {"type": "one"}), flavor("two", {"type": "two"}),
           flavor("b_one", {"b_type": "one"}), flavor("b_two", {"b_type": "two"}), flavor("tainted", taints=[SPOT]),
           flavor("taint_and_toleration", taints=[SPOT], tolerations=[TOLERATE_SPOT]),
           flavor("label-x-a", {"x": "a"}), flavor("label-xy-b", {"x": "b", "y": "k"})]


def pods(name: str = "main", count: int = 1, node_selector: dict | None = None, tolerations: list | None = None,
         affinity: list | None = None, required: str | None = None, **requests: str):
    spec: dict[str, Any] = {"containers": [{"resources": {"requests": {RESOURCE.get(k, k): v
                                                                        for k, v in requests.items()}}}]}
    spec |= {"nodeSelector": node_selector} if node_selector else {}
    spec |= {"tolerations": tolerations} if tolerations else {}
    if affinity is not None:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": term} for term in affinity]}}}
    metadata = {"annotations": {"kueue.x-k8s.io/podset-required-topology": required}} if required else {}
    return pod_set(name, count, {"metadata": metadata, "spec": spec})


def assigner(queue: str, *manifests: dict[str, Any]) -> FlavorAssigner:
    objects = ClusterObjects.from_manifests("c", [*FLAVORS, *manifests])
    return FlavorAssigner(objects, CohortTree(objects.cluster_queues, objects.cohorts), objects.cluster_queues[queue])


def assigned(a: FlavorAssigner, *pod_sets) -> list[dict[str, str]] | None:
    """Kueue's flavors per pod set on an idle cluster (None when a pod set gets none)."""
    result = a.assign(pod_sets)
    return [p.flavors for p in result.pod_sets] if result.fits else None


# -- pkg/cache/scheduler/resource_test.go, TestAvailable: potentialAvailable (the "before adding usage" half) --

@pytest.mark.parametrize(("name", "manifests", "expected"), [
    ("base cqs", [cluster_queue("cq1", group(quotas("red", cpu="0"))),
                  cluster_queue("cq2", group(quotas("red", cpu="5"), quotas("blue", cpu="10")))],
     {("cq1", "red"): 0, ("cq2", "red"): 5_000, ("cq2", "blue"): 10_000}),
    ("cqs with cohort", [cluster_queue("cq1", group(quotas("red", cpu="10")), cohort="cohort"),
                         cluster_queue("cq2", group(quotas("red", cpu=("10", "", "9"))), cohort="cohort"),
                         cohort("cohort", group(quotas("red", cpu="10")))],
     {("cq1", "red"): 29_000, ("cq2", "red"): 30_000}),
    ("cq borrows from cohort", [cluster_queue("cq1", group(quotas("red", cpu="10")), cohort="cohort"),
                                cohort("cohort", group(quotas("red", cpu="10")))],
     {("cq1", "red"): 20_000}),
    ("cq oversubscription spills into cohort", [
        cluster_queue("cq1", group(quotas("red", cpu="10")), cohort="cohort"),
        cluster_queue("cq2", group(quotas("red", cpu=("10", "0", "0"))), cohort="cohort"),
        cohort("cohort", group(quotas("red", cpu="10")))],
     {("cq1", "red"): 20_000, ("cq2", "red"): 10_000}),
    ("lending and borrowing limits respected", [
        cluster_queue("cq1", group(quotas("red", cpu="10")), cohort="cohort"),
        cluster_queue("cq2", group(quotas("red", cpu=("10", "2"))), cohort="cohort"),
        cluster_queue("cq3", group(quotas("red", cpu=("10", "", "5"))), cohort="cohort"),
        cohort("cohort", group(quotas("red", cpu="10")))],
     {("cq1", "red"): 35_000, ("cq2", "red"): 12_000, ("cq3", "red"): 40_000}),
    ("hierarchical cohort", [
        cluster_queue("cq1", group(quotas("red", cpu="10")), cohort="left"),
        cluster_queue("cq2", group(quotas("red", cpu=("10", "", "0"))), cohort="right"),
        cohort("root"), cohort("left", group(quotas("red", cpu="10")), parent="root"),
        cohort("right", group(quotas("red", cpu="10")), parent="root")],
     {("cq1", "red"): 30_000, ("cq2", "red"): 40_000}),
    ("hierarchical cohort respects borrowing limit", [
        cluster_queue("left-cq1", group(quotas("red", cpu="10")), cohort="left"),
        cluster_queue("left-cq2", group(quotas("red", cpu=("10", "5"))), cohort="left"),
        cluster_queue("right-cq", group(quotas("red", cpu="10")), cohort="right"),
        cohort("root"), cohort("left", group(quotas("red", cpu=("10", "5"))), parent="root"),
        cohort("right", group(quotas("red", cpu="10")), parent="root")],
     {("left-cq1", "red"): 35_000, ("left-cq2", "red"): 15_000, ("right-cq", "red"): 50_000}),
    ("hierarchical cohort respects lending limit", [
        cluster_queue("left-cq1", group(quotas("red", cpu=("10", "", "5"))), cohort="left"),
        cluster_queue("left-cq2", group(quotas("red", cpu="10")), cohort="left"),
        cluster_queue("right-cq", group(quotas("red", cpu="0")), cohort="right"),
        cluster_queue("root-cq", group(quotas("red", cpu="0")), cohort="root"),
        cohort("root"), cohort("left", group(quotas("red", cpu=("0", "", "5"))), parent="root"),
        cohort("right", group(quotas("red", cpu="0")), parent="root")],
     {("left-cq1", "red"): 20_000, ("left-cq2", "red"): 15_000, ("right-cq", "red"): 5_000,
      ("root-cq", "red"): 5_000}),
])
def test_potential_available_is_kueues(name, manifests, expected):
    objects = ClusterObjects.from_manifests("c", manifests)
    tree = CohortTree(objects.cluster_queues, objects.cohorts)
    assert {key: tree.queue_potential(key[0], (key[1], "cpu")) for key in expected} == expected, name


def test_a_cohort_outside_the_fleet_bounds_potential_only_by_borrowing_limits():
    objects = ClusterObjects.from_manifests("c", [
        cluster_queue("free", group(quotas("red", cpu="10")), cohort="elsewhere"),
        cluster_queue("capped", group(quotas("red", cpu=("10", "4"))), cohort="elsewhere")])
    tree = CohortTree(objects.cluster_queues, objects.cohorts)
    assert tree.outside == {"elsewhere"}
    # What the fleet's own members lend is known; what the outside cohort adds is not.
    assert tree.queue_potential("free", ("red", "cpu")) == 20_000
    assert tree.queue_potential("free", ("red", "cpu"), open_outside=True) == float("inf")
    assert tree.queue_potential("capped", ("red", "cpu"), open_outside=True) == 14_000


# -- pkg/scheduler/flavorassigner/flavorassigner_test.go, TestAssignFlavors (cases without usage) --------------

def test_single_flavor_fits_and_taints_need_tolerations():
    # "single flavor, fits"
    a = assigner("cq", cluster_queue("cq", group(quotas("default", cpu="1", memory="2Mi"))))
    assert assigned(a, pods(cpu="1", memory="1Mi")) == [{"cpu": "default", "memory": "default"}]
    # "single flavor, fits tainted flavor": the pods tolerate the taint
    a = assigner("cq", cluster_queue("cq", group(quotas("tainted", cpu="4"))))
    assert assigned(a, pods(cpu="1", tolerations=[TOLERATE_SPOT])) == [{"cpu": "tainted"}]
    assert assigned(a, pods(cpu="1")) is None  # and without the toleration none matches
    # "single flavor, fits tainted flavor with toleration": the flavor's own toleration counts
    a = assigner("cq", cluster_queue("cq", group(quotas("taint_and_toleration", cpu="4"))))
    assert assigned(a, pods(cpu="1")) == [{"cpu": "taint_and_toleration"}]


def test_multiple_resource_groups_fit():
    # "multiple resource groups, fits": cpu does not fit flavor one (3 > 2); memory takes the first flavor
    a = assigner("cq", cluster_queue("cq", group(quotas("one", cpu="2"), quotas("two", cpu="4")),
                                     group(quotas("b_one", memory="1Gi"), quotas("b_two", memory="5Gi"))))
    result = a.assign([pods(cpu="3", memory="10Mi")])
    assert [p.flavors for p in result.pod_sets] == [{"cpu": "two", "memory": "b_one"}]
    [one] = [t for t in result.pod_sets[0].tries if t.flavor == "one"]
    assert not one.mode.fits and "3 cpu is more than the 2 it can ever admit in flavor one" in one.reason


@pytest.mark.parametrize(("case", "pod", "expected"), [
    ("multiple flavors, fits while skipping tainted flavor", pods(cpu="3"), "two"),
    ("multiple flavors, fits a node selector",
     pods(cpu="1", node_selector={"type": "two", "ignored1": "foo"},
          affinity=[[{"key": "ignored2", "operator": "In", "values": ["bar"]}]]), "two"),
    ("multiple flavors, fits with node affinity",
     pods(cpu="1", node_selector={"ignored1": "foo"}, affinity=[[{"key": "type", "operator": "In",
                                                                    "values": ["two"]}]]), "two"),
    ("multiple flavors, node affinity fits any flavor",
     pods(cpu="1", affinity=[[{"key": "ignored2", "operator": "In", "values": ["bar"]}],
                             [{"key": "cpuType", "operator": "In", "values": ["two"]}]]), "one"),
    ("multiple flavors, doesn't fit node affinity",
     pods(cpu="1", affinity=[[{"key": "type", "operator": "In", "values": ["three"]}]]), None),
])
def test_flavors_match_the_pods_node_selection(case, pod, expected):
    first = "tainted" if "tainted" in case else "one"
    a = assigner("cq", cluster_queue("cq", group(quotas(first, cpu="4"), quotas("two", cpu="4"))))
    result = a.assign([pod])
    assert (result.pod_sets[0].flavors.get("cpu") if result.fits else None) == expected, case
    if expected is None:
        assert all("its nodes are labelled type=" in t.reason for t in result.pod_sets[0].tries)


def test_a_selector_is_judged_on_the_flavors_own_label_keys():
    # "multiple flavors with different label keys, selector only uses flavor's own keys"
    a = assigner("cq", cluster_queue("cq", group(quotas("label-x-a", cpu="4"), quotas("label-xy-b", cpu="4"))))
    assert assigned(a, pods(cpu="1", node_selector={"x": "a", "y": "g"})) == [{"cpu": "label-x-a"}]
    # "labelless flavor in group with labeled flavor, workload uses labeled selector"
    a = assigner("cq", cluster_queue("cq", group(quotas("default", cpu="4"), quotas("two", cpu="4"))))
    assert assigned(a, pods(cpu="1", node_selector={"type": "two"})) == [{"cpu": "default"}]


def test_pod_sets_add_up_in_a_flavor():
    # "multiple specs, fit different flavors": the driver takes two, the worker one
    a = assigner("cq", cluster_queue("cq", group(quotas("one", cpu="4"), quotas("two", cpu="10"))))
    assert assigned(a, pods("driver", cpu="5"), pods("worker", cpu="3")) == [{"cpu": "two"}, {"cpu": "one"}]
    # "num pods fit" / "num pods don't fit": a queue covering pods counts them
    for pods_quota, fits in (("3", True), ("2", False)):
        a = assigner("cq", cluster_queue("cq", group(quotas("default", pods=pods_quota, cpu="10"))))
        result = a.assign([pods(count=3, cpu="1")])
        assert result.fits == fits
        if not fits:
            assert "3 pods is more than the 2" in result.pod_sets[0].tries[0].reason


def test_borrowing_from_the_cohort():
    # "multiple specs, fits borrowing": 10 cpu and 5Gi against 2 and 2Gi, lent by the secondary queue
    a = assigner("cq", cluster_queue("cq", group(quotas("default", cpu=("2", "98"), memory="2Gi")), cohort="test"),
                 cluster_queue("secondary", group(quotas("default", cpu="198", memory="198Gi")), cohort="test"))
    result = a.assign([pods("driver", cpu="4", memory="1Gi"), pods("worker", cpu="6", memory="4Gi")])
    assert [p.flavors for p in result.pod_sets] == [{"cpu": "default", "memory": "default"}] * 2
    assert [p.lenders for p in result.pod_sets] == [{"cpu": "test"}, {"cpu": "test", "memory": "test"}]
    # "not enough space to borrow": the secondary lends none of its 10 (lending limit 0)
    a = assigner("cq", cluster_queue("cq", group(quotas("one", cpu="1")), cohort="test"),
                 cluster_queue("secondary", group(quotas("one", cpu=("10", "", "0"))), cohort="test"))
    assert assigned(a, pods(cpu="2")) is None


def test_resources_the_queue_does_not_cover():
    # "resource not listed in clusterQueue"
    a = assigner("cq", cluster_queue("cq", group(quotas("one", cpu="4"))))
    result = a.assign([pods(example_com_gpu="2")])
    assert not result.fits and result.pod_sets[0].uncovered == "example.com/gpu"
    # "zero resource request not in clusterQueue should succeed"
    a = assigner("cq", cluster_queue("cq", group(quotas("default", cpu="4"))))
    assert assigned(a, pods(cpu="1", example_com_gpu="0")) == [{"cpu": "default"}]
    # "zero resource request defined in clusterQueue should get flavor assigned"
    a = assigner("cq", cluster_queue("cq", group(quotas("default", cpu="4", example_com_gpu="4"))))
    assert assigned(a, pods(cpu="1", example_com_gpu="0")) == [{"cpu": "default", "example.com/gpu": "default"}]


@pytest.mark.parametrize(("case", "when_can_borrow", "two_cpu", "expected"), [
    ("borrow try next flavor, found the first flavor", "TryNextFlavor", "1", "one"),
    ("borrow try next flavor, found the second flavor", "TryNextFlavor", "10", "two"),
    ("borrow before try next flavor", None, "10", "one"),
])
def test_flavor_fungibility(case, when_can_borrow, two_cpu, expected):
    # Kueue's case charges 2 cpu of usage to flavor one (nominal 10, borrowing limit 1): here its nominal is 8.
    a = assigner("cq", cluster_queue("cq", group(quotas("one", pods="10", cpu=("8", "1")),
                                                 quotas("two", pods="10", cpu=two_cpu)),
                                     cohort="test", when_can_borrow=when_can_borrow),
                 cluster_queue("secondary", group(quotas("one", cpu="1")), cohort="test"))
    assert assigned(a, pods(cpu="9")) == [{"cpu": expected, "pods": expected}], case


# -- TestHierarchical: the lowest cohort that fits decides the flavor --------------------------------------

@pytest.mark.parametrize(("case", "used", "expected"), [
    # Kueue's cases charge usage to the cohorts' quotas: here the used flavors' quotas are 0.
    ("Select the first flavor which fits", {"one"}, "two"),
    ("Select the top flavor", {"one", "two"}, "three"),
])
def test_hierarchical_cohorts(case, used, expected):
    def own(name: str) -> dict[str, Any]:
        return group(quotas(name, cpu="0" if name in used else "4"))

    a = assigner("test", flavor("three"),
                 cohort("three", own("three")), cohort("two", own("two"), parent="three"),
                 cohort("one", own("one"), parent="two"),
                 cluster_queue("test", group(*(quotas(f, cpu="0") for f in ("one", "two", "three"))), cohort="one"),
                 cluster_queue("other", group(*(quotas(f, cpu="0") for f in ("one", "two", "three"))), cohort="two"))
    result = a.assign([pods(cpu="4")])
    assert result.pod_sets[0].flavors == {"cpu": expected}, case
    assert result.pod_sets[0].lenders == {"cpu": expected}  # each cohort lends the flavor of its name


# -- TestIsNoFitDueToCapacityAndLimits -------------------------------------------------------------------

def _no_fit_objects(*extra: dict[str, Any], tas: bool = False) -> FlavorAssigner:
    flavors = [flavor("flavor-a", {"type": "a"}), flavor("flavor-b", taints=[{"key": "key", "value": "val",
                                                                                "effect": "NoSchedule"}]),
               flavor("flavor-tas", topology="topology-tas"), topology("topology-tas", "rack")]
    names = ["flavor-a", "flavor-b", *(["flavor-tas"] if tas else [])]
    queue = cluster_queue("cq", group(*(quotas(n, cpu=("2", "4")) for n in names)))
    objects = ClusterObjects.from_manifests("c", [*flavors, queue, *extra])
    return FlavorAssigner(objects, CohortTree(objects.cluster_queues, objects.cohorts), objects.cluster_queues["cq"])


@pytest.mark.parametrize(("case", "pod", "tas", "kinds"), [
    ("succeeds to schedule on flavor-a", pods(cpu="1"), False, None),
    ("insufficient quota", pods(cpu="3"), False, {"flavor-a": "quota", "flavor-b": "taint"}),
    ("exceeds max capacity limits", pods(cpu="5"), False, {"flavor-a": "quota", "flavor-b": "taint"}),
    ("taints mismatch", pods(cpu="1", node_selector={"type": "wrong"}), False,
     {"flavor-a": "labels", "flavor-b": "taint"}),
    ("TAS not supported", pods(cpu="1", required="rack"), False, {"flavor-a": "topology", "flavor-b": "topology"}),
    ("TAS level not supported", pods(cpu="1", required="block"), True,
     {"flavor-a": "topology", "flavor-b": "topology", "flavor-tas": "topology"}),
    ("TAS only flavor mismatch", pods(cpu="1", node_selector={"type": "wrong"}), True,
     {"flavor-a": "labels", "flavor-b": "taint", "flavor-tas": "topology"}),
])
def test_why_no_flavor_fits(case, pod, tas, kinds):
    a = _no_fit_objects(tas=tas)
    result = a.assign([pod])
    assert result.fits == (kinds is None), case
    if kinds is not None:
        [group_] = a.queue.groups
        got = {f: (m.kind if (m := a.mismatch(pod, f, group_)) else "quota") for f in group_.flavors}
        assert got == kinds, case


def test_succeeds_on_flavor_b_with_a_tolerated_taint():
    # "succeeds to schedule on flavor-b with a tolerated taint": flavor-b has no label keys, so the selector is
    # irrelevant to it
    a = _no_fit_objects()
    pod = pods(cpu="1", node_selector={"type": "non-existent"},
               tolerations=[{"key": "key", "operator": "Equal", "value": "val", "effect": "NoSchedule"}])
    assert assigned(a, pod) == [{"cpu": "flavor-b"}]


# -- beyond one pass: Kueue resumes from the flavor after the last one it tried -------------------------------

def test_a_gang_one_pass_cannot_place_is_not_refused_when_another_order_fits():
    manifests = [*FLAVORS, cluster_queue("cq", group(quotas("one", cpu="4"), quotas("two", cpu="2"))),
                 {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "q", "namespace": "ml"},
                  "spec": {"clusterQueue": "cq"}}]
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {
        "name": "j", "namespace": "ml", "labels": {"kueue.x-k8s.io/queue-name": "q"}}, "spec": {"pytorchReplicaSpecs": {
            role: {"replicas": 1, "template": {"spec": {"containers": [{"resources": {"requests": {"cpu": cpu}}}]}}}
            for role, cpu in (("Master", "2"), ("Worker", "3"))}}}
    objects = ClusterObjects.from_manifests("c", [*manifests, job])
    a = FlavorAssigner(objects, CohortTree(objects.cluster_queues, objects.cohorts), objects.cluster_queues["cq"])
    # One pass puts the master on one (2 of 4), and then the worker fits neither one (5 > 4) nor two (3 > 2) ...
    assert not a.assign(objects.workloads[0].pod_sets).fits
    # ... but the master on two and the worker on one fit, which a later pass reaches.
    [plan], _ = plan_cluster(objects)
    assert plan.verdict == "fits" and plan.reasons == []


def test_pod_requests_are_kubernetes_pod_requests():
    """k8s.io/component-helpers resource.PodRequests: containers add up, init containers count at their
    largest, sidecars (restartable init containers) add to both, overhead adds, limits stand in for requests."""
    spec = {"containers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
                           {"resources": {"limits": {"cpu": "500m", "nvidia.com/gpu": "2"}}}],
            "initContainers": [{"resources": {"requests": {"cpu": "4"}}},
                               {"restartPolicy": "Always", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
                               {"resources": {"requests": {"memory": "1Gi"}}}],
            "overhead": {"cpu": "250m"}}
    # containers 1.5 cpu + sidecar 1 = 2.5; init max(4, sidecar 1, 0 + sidecar 1) = 4 -> 4 cpu, + 250m overhead;
    # memory: containers 1Gi + sidecar 1Gi = 2Gi against the last init's 1Gi + sidecar 1Gi = 2Gi
    assert pod_requests(spec) == {"cpu": 4250, "memory": 2 * 2**30, "nvidia.com/gpu": 2}


# -- properties: the search against brute force, Kueue's one pass against the search -------------------------

_cpu = st.integers(0, 8).map(str)
_flavor_quotas = st.lists(st.tuples(_cpu, st.sampled_from(["", "0", "2"]), st.sampled_from(["", "0", "3"])),
                          min_size=1, max_size=3)
_pod_sets = st.lists(st.tuples(st.integers(1, 3), st.integers(0, 5), st.sampled_from([None, "f0", "f1"])),
                     min_size=1, max_size=3)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(mine=_flavor_quotas, lender=_flavor_quotas, sets=_pod_sets, try_next=st.booleans())
def test_search_is_brute_force_and_one_pass_never_beats_it(mine, lender, sets, try_next):
    flavors = [flavor(f"f{i}", {"type": f"f{i}"}) for i in range(3)]
    queue = cluster_queue("cq", group(*(quotas(f"f{i}", cpu=q) for i, q in enumerate(mine))), cohort="org",
                          when_can_borrow="TryNextFlavor" if try_next else None)
    other = cluster_queue("other", group(*(quotas(f"f{i}", cpu=q) for i, q in enumerate(lender))), cohort="org")
    objects = ClusterObjects.from_manifests("c", [*flavors, queue, other, cohort("org")])
    tree = CohortTree(objects.cluster_queues, objects.cohorts)
    a = FlavorAssigner(objects, tree, objects.cluster_queues["cq"])
    pod_sets = [pods(f"p{i}", count=n, node_selector={"type": sel} if sel else None, cpu=str(cpu))
                for i, (n, cpu, sel) in enumerate(sets)]
    names = list(a.queue.flavors)

    def cap(fr):
        return tree.queue_potential("cq", fr)

    def brute() -> bool:
        options = [[f for f in names if a.mismatch(p, f, a.queue.groups[0]) is None] for p in pod_sets]
        for choice in product(*options):
            used: dict[str, int] = {}
            for p, f in zip(pod_sets, choice):
                used[f] = used.get(f, 0) + p.total()["cpu"]
            if all(v <= cap((f, "cpu")) for f, v in used.items()):
                return True
        return False

    found = a.search(pod_sets, cap)
    assert (found is not None) == brute()
    if found is not None:
        used: dict[str, int] = {}
        for p, chosen in zip(pod_sets, found):
            used[chosen["cpu"]] = used.get(chosen["cpu"], 0) + p.total()["cpu"]
        assert all(v <= cap((f, "cpu")) for f, v in used.items())
    if a.assign(pod_sets).fits:  # whatever Kueue's one pass places, some combination holds
        assert found is not None
