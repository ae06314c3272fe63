"""Kueue's own flavor-assigner and scheduler cases, as data: what `kubetrain plan` must say of each
(tests/test_kueue_conformance.py).

Every row is one case of kubernetes-sigs/kueue at tag v0.19.2, named by file, Go test and case name, translated
into the objects kubetrain reads from dist/: the case's ResourceFlavors, its ClusterQueue (and the secondary queue,
Cohorts and namespaces beside it) and its pod sets as a Kubernetes workload queued on a LocalQueue of that
ClusterQueue in the case's namespace (a batch/v1 Job for one pod set; a PyTorchJob, Master then Worker, for two,
which Kueue takes in that order). TestSchedule's cases are those of one pending workload with nothing admitted.

Kueue's tests run on a cluster with usage; kubetrain judges an idle one. A case with usage is translated by
taking the usage off the nominal quota it is charged to (the quota those workloads hold is not there for the
job); cases whose outcome rests on preempting that usage (a Preempt mode) are left out: offline, kubetrain never
counts on preemption. Expected outcomes are the case's own: `fits` where Kueue's mode is Fit within the nominal
quota, `borrows` where the flavor Kueue assigns needs its cohort's quota, `never` for NoFit; `flavor` is the flavor
Kueue assigns the job's main resource (its accelerator, else cpu) in the last pod set that requests it, which is
what `kubetrain plan` shows. Amounts are as the case writes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

KUEUE = "kueue.x-k8s.io/v1beta2"
REPOSITORY, TAG = "kubernetes-sigs/kueue", "v0.19.2"
FLAVOR_ASSIGNER_TEST = "pkg/scheduler/flavorassigner/flavorassigner_test.go"
SCHEDULER_TEST = "pkg/scheduler/scheduler_test.go"
GPU = "example.com/gpu"


@dataclass(frozen=True)
class Row:
    test: str  # the Go test function
    case: str  # its case name, verbatim
    objects: list[dict[str, Any]]  # the flavors, queues, cohorts and namespaces
    pod_sets: list[dict[str, Any]]  # pods(...) each
    verdict: str  # fits | borrows | never
    flavor: str | None = None
    code: str | None = None  # the rule behind a `never`
    translation: str = ""  # how the case's usage became an idle cluster's quota, where it had any
    file: str = FLAVOR_ASSIGNER_TEST
    namespace: str = "ml"  # the job's, where its LocalQueue is
    cluster_queue: str = "test"  # the ClusterQueue its LocalQueue points at
    repository: str = REPOSITORY
    tag: str = TAG

    @property
    def source(self) -> str:
        return f"{self.repository}@{self.tag} {self.file} {self.test}/{self.case}"


# -- Kueue's test wrappers, as manifests -------------------------------------------------------------------

def quotas(flavor: str, **resources: str | tuple[str, ...]) -> dict[str, Any]:
    """MakeFlavorQuotas(flavor).Resource(name, nominal[, borrowingLimit[, lendingLimit]]) ("" is unset)."""
    out = []
    for name, value in resources.items():
        nominal, borrowing, lending = (*((value,) if isinstance(value, str) else value), "", "")[:3]
        resource = {"name": GPU if name == "gpu" else name, "nominalQuota": nominal}
        resource |= {"borrowingLimit": borrowing} if borrowing else {}
        resource |= {"lendingLimit": lending} if lending else {}
        out.append(resource)
    return {"name": flavor, "resources": out}


def group(*flavors: dict[str, Any]) -> dict[str, Any]:
    return {"coveredResources": [r["name"] for r in flavors[0]["resources"]], "flavors": list(flavors)}


def cluster_queue(name: str, *groups: dict[str, Any], cohort: str | None = None, when_can_borrow: str | None = None,
                  when_can_preempt: str | None = None, preference: str | None = None,
                  department: str | None = None) -> dict[str, Any]:
    """MakeClusterQueue(name): every namespace, unless `department` (NamespaceSelector dep In [department])."""
    selector = {"matchExpressions": [{"key": "dep", "operator": "In", "values": [department]}]} if department else {}
    spec: dict[str, Any] = {"namespaceSelector": selector, "resourceGroups": list(groups)}
    spec |= {"cohortName": cohort} if cohort else {}
    fungibility = {"whenCanBorrow": when_can_borrow, "whenCanPreempt": when_can_preempt, "preference": preference}
    if any(fungibility.values()):
        spec["flavorFungibility"] = {k: v for k, v in fungibility.items() if v}
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def cohort(name: str, *groups: dict[str, Any], parent: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"resourceGroups": list(groups)}
    spec |= {"parentName": parent} if parent else {}
    return {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def flavor(name: str, labels: dict[str, str] | None = None, taints: list[dict] | None = None,
           tolerations: list[dict] | None = None, topology: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    spec |= {"nodeLabels": labels} if labels else {}
    spec |= {"nodeTaints": taints} if taints else {}
    spec |= {"tolerations": tolerations} if tolerations else {}
    spec |= {"topologyName": topology} if topology else {}
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def topology(name: str, *levels: str) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "Topology", "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": level} for level in levels]}}


def pods(name: str = "main", count: int = 1, node_selector: dict | None = None, tolerations: list | None = None,
         affinity: list | None = None, required: str | None = None, **requests: str) -> dict[str, Any]:
    """MakePodSet(name, count).Request(...): one pod set's template and count."""
    spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [{
        "name": "main", "image": "img:1",
        "resources": {"requests": {GPU if k == "gpu" else k: v for k, v in requests.items()}}}]}
    spec |= {"nodeSelector": node_selector} if node_selector else {}
    spec |= {"tolerations": tolerations} if tolerations else {}
    if affinity is not None:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": term} for term in affinity]}}}
    metadata = {"annotations": {"kueue.x-k8s.io/podset-required-topology": required}} if required else {}
    return {"name": name, "count": count, "template": {"metadata": metadata, "spec": spec}}


SPOT = {"key": "instance", "value": "spot", "effect": "NoSchedule"}
TOLERATE_SPOT = {"key": "instance", "operator": "Equal", "value": "spot", "effect": "NoSchedule"}
# TestAssignFlavors' resourceFlavors
FLAVORS = {f["metadata"]["name"]: f for f in [
    flavor("default"), flavor("one", {"type": "one"}), flavor("two", {"type": "two"}),
    flavor("b_one", {"b_type": "one"}), flavor("b_two", {"b_type": "two"}), flavor("tainted", taints=[SPOT]),
    flavor("taint_and_toleration", taints=[SPOT], tolerations=[TOLERATE_SPOT]),
    flavor("label-x-a", {"x": "a"}), flavor("label-xy-b", {"x": "b", "y": "k"}),
    flavor("tas-a", topology="tas-topo-a"), flavor("tas-b", topology="tas-topo-b")]}
HOSTNAME = "kubernetes.io/hostname"
TOPOLOGIES = [topology("tas-topo-a", HOSTNAME), topology("tas-topo-b", HOSTNAME)]


def assign(case: str, queue: dict[str, Any], pod_sets: list[dict[str, Any]], verdict: str, flavor: str | None = None,
           code: str | None = None, others: tuple[dict[str, Any], ...] = (), translation: str = "") -> Row:
    """A TestAssignFlavors case: the test's resource flavors, its ClusterQueue ("test") and secondary queue, and
    the Cohort object the test adds for the queue's cohort (AddOrUpdateCohort(MakeCohort(cohortName)))."""
    name = queue["spec"].get("cohortName")
    cohorts = [cohort(name)] if name else []
    return Row("TestAssignFlavors", case, [*FLAVORS.values(), *TOPOLOGIES, queue, *others, *cohorts], pod_sets,
               verdict, flavor, code, translation)


def test_queue(*groups: dict[str, Any], **options: Any) -> dict[str, Any]:
    return cluster_queue("test", *groups, **options)


def secondary(*groups: dict[str, Any]) -> dict[str, Any]:
    return cluster_queue("test-secondary-clusterqueue", *groups, cohort="test-cohort")


def _hierarchical(case: str, test_flavors: list[dict[str, Any]], cohort_quota: dict[str, str], verdict: str,
                  expected: str, translation: str, **fungibility: str) -> Row:
    """TestHierarchical: cohorts three > two > one, each lending 4 cpu of the flavor of its name; the test
    queue in cohort one, another (all quotas 0) in cohort two."""
    zeros = group(*(quotas(f, cpu="0") for f in ("one", "two", "three")))
    objects = [flavor("one"), flavor("two"), flavor("three"),
               cohort("three", group(quotas("three", cpu=cohort_quota["three"]))),
               cohort("two", group(quotas("two", cpu=cohort_quota["two"])), parent="three"),
               cohort("one", group(quotas("one", cpu=cohort_quota["one"])), parent="two"),
               cluster_queue("test", group(*test_flavors), cohort="one", **fungibility),
               cluster_queue("other-clusterqueue", zeros, cohort="two")]
    return Row("TestHierarchical", case, objects, [pods(cpu="4")], verdict, expected, translation=translation)


HIERARCHY_ZEROS = [quotas(f, cpu="0") for f in ("one", "two", "three")]


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


# TestSchedule's resourceFlavors, clusterQueues and namespaces; the cohorts its queues name exist in Kueue's cache
# as soon as a queue names them, as Cohort objects without quota here.
KEY_VAL = {"key": "key", "value": "val", "effect": "NoSchedule"}
SCHEDULE_OBJECTS = [
    flavor("default"), flavor("on-demand"), flavor("spot"), flavor("model-a"),
    flavor("spot-tainted", taints=[KEY_VAL]), flavor("spot-tainted-2", taints=[{**KEY_VAL, "value": "val2"}]),
    cluster_queue("sales", group(quotas("default", cpu=("50", "0"))), department="sales"),
    cluster_queue("eng-alpha", group(quotas("on-demand", cpu=("50", "50")), quotas("spot", cpu=("100", "0"))),
                  cohort="eng", department="eng"),
    cluster_queue("eng-beta", group(quotas("on-demand", cpu=("50", "10")), quotas("spot", cpu=("0", "100"))),
                  group(quotas("model-a", gpu=("20", "0"))), cohort="eng", department="eng"),
    cluster_queue("flavor-nonexistent-cq", group(quotas("nonexistent-flavor", cpu="50"))),
    cluster_queue("lend-a", group(quotas("default", cpu=("3", "", "2"))), cohort="lend", department="lend"),
    cluster_queue("lend-b", group(quotas("default", cpu=("2", "", "2"))), cohort="lend", department="lend"),
    cohort("eng"), cohort("lend"),
    namespace("default"), namespace("eng-alpha", dep="eng"), namespace("eng-beta", dep="eng"),
    namespace("sales", dep="sales"), namespace("lend", dep="lend")]


def schedule(case: str, where: str, pod_sets: list[dict[str, Any]], verdict: str, flavor: str | None = None,
             code: str | None = None, others: tuple[dict[str, Any], ...] = ()) -> Row:
    """A TestSchedule case of one pending workload on an idle cluster: `where` is its namespace/ClusterQueue."""
    ns, queue = where.split("/")
    return Row("TestSchedule", case, [*SCHEDULE_OBJECTS, *others], pod_sets, verdict, flavor, code,
               file=SCHEDULER_TEST, namespace=ns, cluster_queue=queue)

ROWS: list[Row] = [
    # -- single flavor, taints and tolerations ---------------------------------------------------------------
    assign("single flavor, fits", test_queue(group(quotas("default", cpu="1", memory="2Mi"))),
           [pods(cpu="1", memory="1Mi")], "fits", "default"),
    assign("single flavor, fits tainted flavor", test_queue(group(quotas("tainted", cpu="4"))),
           [pods(cpu="1", tolerations=[TOLERATE_SPOT])], "fits", "tainted"),
    assign("single flavor, fits tainted flavor with toleration",
           test_queue(group(quotas("taint_and_toleration", cpu="4"))), [pods(cpu="1")], "fits",
           "taint_and_toleration"),
    assign("multiple flavors, fits while skipping tainted flavor",
           test_queue(group(quotas("tainted", cpu="4"), quotas("two", cpu="4"))), [pods(cpu="3")], "fits", "two"),
    # -- several resource groups, several resources in a group -----------------------------------------------
    assign("multiple resource groups, fits",
           test_queue(group(quotas("one", cpu="2"), quotas("two", cpu="4")),
                      group(quotas("b_one", memory="1Gi"), quotas("b_two", memory="5Gi"))),
           [pods(cpu="3", memory="10Mi")], "fits", "two"),
    assign("multiple resource groups, one could fit with preemption, other doesn't fit",
           test_queue(group(quotas("one", cpu="3")), group(quotas("b_one", memory="1Mi"))),
           [pods(cpu="3", memory="10Mi")], "never", code="KT441",
           translation="the 1 cpu used in flavor one is taken off its nominal quota (3 -> 2)"),
    assign("multiple resource groups with multiple resources, fits",
           test_queue(group(quotas("one", cpu="2", memory="1Gi"), quotas("two", cpu="4", memory="15Mi")),
                      group(quotas("b_one", gpu="4"), quotas("b_two", gpu="2"))),
           [pods(cpu="3", memory="10Mi", gpu="3")], "fits", "two"),
    assign("multiple resources in a group, doesn't fit",
           test_queue(group(quotas("one", cpu="2", memory="1Gi"), quotas("two", cpu="4", memory="5Mi"))),
           [pods(cpu="3", memory="10Mi")], "never", code="KT441"),
    # -- node selectors and affinity, judged on each flavor's own label keys ---------------------------------
    assign("multiple flavors, fits a node selector",
           test_queue(group(quotas("one", cpu="4"), quotas("two", cpu="4"))),
           [pods(cpu="1", node_selector={"type": "two", "ignored1": "foo"},
                 affinity=[[{"key": "ignored2", "operator": "In", "values": ["bar"]}]])], "fits", "two"),
    assign("multiple flavors, fits with node affinity",
           test_queue(group(quotas("one", cpu="4", memory="1Gi"), quotas("two", cpu="4", memory="1Gi"))),
           [pods(cpu="1", memory="1Mi", node_selector={"ignored1": "foo"},
                 affinity=[[{"key": "type", "operator": "In", "values": ["two"]}]])], "fits", "two"),
    assign("multiple flavors, node affinity fits any flavor",
           test_queue(group(quotas("one", cpu="4"), quotas("two", cpu="4"))),
           [pods(cpu="1", affinity=[[{"key": "ignored2", "operator": "In", "values": ["bar"]}],
                                    [{"key": "cpuType", "operator": "In", "values": ["two"]}]])], "fits", "one"),
    assign("multiple flavors with different label keys, selector only uses flavor's own keys",
           test_queue(group(quotas("label-x-a", cpu="4"), quotas("label-xy-b", cpu="4"))),
           [pods(cpu="1", node_selector={"x": "a", "y": "g"})], "fits", "label-x-a"),
    assign("labelless flavor in group with labeled flavor, workload uses labeled selector",
           test_queue(group(quotas("default", cpu="4"), quotas("two", cpu="4"))),
           [pods(cpu="1", node_selector={"type": "two"})], "fits", "default"),
    assign("multiple flavors, doesn't fit node affinity",
           test_queue(group(quotas("one", cpu="4"), quotas("two", cpu="4"))),
           [pods(cpu="1", affinity=[[{"key": "type", "operator": "In", "values": ["three"]}]])], "never",
           code="KT445"),
    # -- pod sets of different shapes --------------------------------------------------------------------
    assign("multiple specs, fit different flavors",
           test_queue(group(quotas("one", cpu="4"), quotas("two", cpu="10"))),
           [pods("driver", cpu="5"), pods("worker", cpu="3")], "fits", "one"),
    assign("multiple specs, fits borrowing",
           test_queue(group(quotas("default", cpu=("2", "98"), memory="2Gi")), cohort="test-cohort"),
           [pods("driver", cpu="4", memory="1Gi"), pods("worker", cpu="6", memory="4Gi")], "borrows", "default",
           others=(secondary(group(quotas("default", cpu="198", memory="198Gi"))),)),
    assign("multi-podset, one fits and another fails, fitting podset attempts skipped in resolveNoFitReason",
           test_queue(group(quotas("one", cpu="2"), quotas("two", cpu="2"))),
           [pods("fitting-podset", cpu="1", node_selector={"type": "one"}), pods("blocking-podset", cpu="5")],
           "never", code="KT441"),
    # -- resources the queue covers, zero requests, pods -------------------------------------------------
    assign("resource not listed in clusterQueue", test_queue(group(quotas("one", cpu="4"))), [pods(gpu="2")],
           "never", code="KT446"),
    assign("zero resource request not in clusterQueue should succeed", test_queue(group(quotas("default", cpu="4"))),
           [pods(cpu="1", gpu="0")], "fits", "default"),
    assign("zero resource request defined in clusterQueue should get flavor assigned",
           test_queue(group(quotas("default", cpu="4", gpu="4"))), [pods(cpu="1", gpu="0")], "fits", "default"),
    assign("num pods fit", test_queue(group(quotas("default", pods="3", cpu="10"))), [pods(count=3, cpu="1")],
           "fits", "default"),
    assign("num pods don't fit", test_queue(group(quotas("default", pods="2", cpu="10"))), [pods(count=3, cpu="1")],
           "never", code="KT441"),
    # -- borrowing and lending limits, flavor fungibility ----------------------------------------------------
    assign("not enough space to borrow", test_queue(group(quotas("one", cpu="1")), cohort="test-cohort"),
           [pods(cpu="2")], "never", code="KT441",
           others=(secondary(group(quotas("one", cpu=("1", "", "0")))),),
           translation="the secondary queue's 9 cpu used in flavor one are taken off its nominal quota (10 -> 1)"),
    assign("borrow try next flavor, found the first flavor",
           test_queue(group(quotas("one", pods="10", cpu=("8", "1")), quotas("two", pods="10", cpu="1")),
                      cohort="test-cohort", when_can_borrow="TryNextFlavor", when_can_preempt="TryNextFlavor"),
           [pods(cpu="9")], "borrows", "one", others=(secondary(group(quotas("one", cpu="1"))),),
           translation="the 2 cpu used in flavor one are taken off its nominal quota (10 -> 8)"),
    assign("borrow try next flavor, found the second flavor",
           test_queue(group(quotas("one", pods="10", cpu=("8", "1")), quotas("two", pods="10", cpu="10")),
                      cohort="test-cohort", when_can_borrow="TryNextFlavor", when_can_preempt="TryNextFlavor"),
           [pods(cpu="9")], "fits", "two", others=(secondary(group(quotas("one", cpu="1"))),),
           translation="the 2 cpu used in flavor one are taken off its nominal quota (10 -> 8)"),
    assign("borrow before try next flavor",
           test_queue(group(quotas("one", pods="10", cpu=("8", "1")), quotas("two", pods="10", cpu="10")),
                      cohort="test-cohort"),
           [pods(cpu="9")], "borrows", "one", others=(secondary(group(quotas("one", cpu="1"))),),
           translation="the 2 cpu used in flavor one are taken off its nominal quota (10 -> 8); whenCanBorrow is "
                       "Kueue's default MayStopSearch: the first flavor that fits by borrowing wins"),
    assign("when borrowing while preemption is needed for flavor one; WhenCanBorrow=TryNextFlavor",
           test_queue(group(quotas("one", cpu=("0", "12")), quotas("two", cpu="12")), cohort="test-cohort",
                      when_can_borrow="TryNextFlavor", when_can_preempt="MayStopSearch"),
           [pods(cpu="12")], "fits", "two", others=(secondary(group(quotas("one", cpu="12"))),)),
    assign("when borrowing while preemption is needed, but borrowingLimit exceeds the quota available in the cohort",
           test_queue(group(quotas("one", cpu=("0", "12"))), cohort="test-cohort"), [pods(cpu="12")], "never",
           code="KT441", others=(secondary(group(quotas("one", cpu="1"))),),
           translation="the secondary queue's 10 cpu used in flavor one are taken off its nominal quota (11 -> 1)"),
    assign("lend try next flavor, found the second flavor",
           test_queue(group(quotas("one", pods="10", cpu=("8", "", "1")),
                            quotas("two", pods="10", cpu=("10", "", "0"))),
                      cohort="test-cohort", when_can_borrow="TryNextFlavor", when_can_preempt="TryNextFlavor"),
           [pods(cpu="9")], "fits", "two", others=(secondary(group(quotas("one", cpu="1"))),),
           translation="the 2 cpu used in flavor one are taken off its nominal quota (10 -> 8)"),
    assign("lend try next flavor, found the first flavor",
           test_queue(group(quotas("one", pods="10", cpu=("8", "", "1")), quotas("two", pods="10", cpu=("1", "", "0"))),
                      cohort="test-cohort", when_can_borrow="TryNextFlavor", when_can_preempt="TryNextFlavor"),
           [pods(cpu="9")], "borrows", "one", others=(secondary(group(quotas("one", cpu="1"))),),
           translation="the 2 cpu used in flavor one are taken off its nominal quota (10 -> 8)"),
    assign("cannot preempt in cohort (oracle returns None) for the first flavor, tries the second flavor (which fits)",
           test_queue(group(quotas("one", cpu=("0", "2")), quotas("two", cpu=("0", "2"))), cohort="test-cohort",
                      when_can_borrow="MayStopSearch", when_can_preempt="MayStopSearch"),
           [pods(cpu="2")], "borrows", "two",
           others=(secondary(group(quotas("one", cpu="0"), quotas("two", cpu="2"))),),
           translation="the secondary queue's 2 cpu used in flavor one are taken off its nominal quota (2 -> 0)"),
    assign("when borrowing while preemption is needed for flavor one, fair sharing enabled, reclaimWithinCohort=Never",
           test_queue(group(quotas("one", cpu="0"), quotas("two", cpu="12")), cohort="test-cohort",
                      when_can_borrow="MayStopSearch", when_can_preempt="MayStopSearch"),
           [pods(cpu="12")], "fits", "two", others=(secondary(group(quotas("one", cpu="2"))),),
           translation="the secondary queue's 10 cpu used in flavor one are taken off its nominal quota (12 -> 2)"),
    # -- topology-aware scheduling -------------------------------------------------------------------------
    assign("multiple TAS flavors assigned to different resources in the same PodSet leads to NoFit",
           test_queue(group(quotas("tas-a", cpu="10")), group(quotas("tas-b", memory="10Mi"))),
           [pods(cpu="1", memory="1Mi", required=HOSTNAME)], "never", code="KT441"),
    # -- TestHierarchical: the lowest cohort that lends decides between flavors --------------------------------
    _hierarchical("Select the first flavor which fits", HIERARCHY_ZEROS, {"one": "0", "two": "4", "three": "4"},
                  "borrows", "two", "the test queue's 4 cpu used in flavor one are taken off cohort one's quota of "
                  "it (4 -> 0), which lends it"),
    _hierarchical("Select the top flavor", HIERARCHY_ZEROS, {"one": "0", "two": "0", "three": "4"},
                  "borrows", "three", "the 4 cpu used in flavors one and two are taken off the quotas of cohorts "
                  "one and two (4 -> 0), which lend them"),
    _hierarchical("Select deeper-borrowing flavor that fits when shallower-borrowing flavor has no preemption "
                  "candidates", [quotas("one", cpu=("0", "0")), *HIERARCHY_ZEROS[1:]],
                  {"one": "4", "two": "4", "three": "4"}, "borrows", "two",
                  "the 4 cpu used in flavor one are taken off the test queue's nominal quota of it (4 -> 0)",
                  when_can_borrow="TryNextFlavor", when_can_preempt="TryNextFlavor",
                  preference="PreemptionOverBorrowing"),
    # -- TestSchedule: one pending workload, nothing admitted ------------------------------------------------
    schedule("workload fits in single clusterQueue, with check state ready", "sales/sales",
             [pods("one", count=10, cpu="1")], "fits", "default"),
    schedule("flavors with mixed taint mismatch and exceeding limits", "sales/custom-cq2", [pods(cpu="10")], "never",
             code="KT441", others=(cluster_queue("custom-cq2", group(quotas("spot-tainted", cpu=("20", "20")),
                                                                       quotas("on-demand", cpu=("5", "5")))),)),
    schedule("flavors are structurally incompatible", "sales/custom-cq3", [pods(cpu="1")], "never", code="KT445",
             others=(cluster_queue("custom-cq3", group(quotas("spot-tainted", cpu=("20", "20")),
                                                       quotas("spot-tainted-2", cpu=("5", "5")))),)),
    schedule("failed to match clusterQueue selector", "sales/eng-alpha", [pods("one", cpu="1")], "never",
             code="KT444"),
    schedule("assign multiple resources and flavors", "eng-beta/eng-beta",
             [pods("one", count=10, cpu="6", gpu="1"), pods("two", count=40, cpu="1")], "borrows", "spot"),
    schedule("cannot borrow resource not listed in clusterQueue", "eng-alpha/eng-alpha", [pods(gpu="1")], "never",
             code="KT446"),
    schedule("workload should not fit in nonexistent clusterQueue", "sales/nonexistent-cq", [pods(cpu="1")], "never",
             code="KT443"),
    schedule("workload should not fit in clusterQueue with nonexistent flavor", "sales/flavor-nonexistent-cq",
             [pods(cpu="1")], "never", code="KT445"),
    schedule("not enough resources", "sales/sales", [pods("one", cpu="100")], "never", code="KT441"),
    schedule("pending admission check with nofit and fit flavors", "eng-beta/eng-beta", [pods(cpu="80")], "borrows",
             "spot"),
    schedule("admit workload with zero-quantity request for resource not in ClusterQueue", "sales/sales",
             [pods(cpu="1", gpu="0")], "fits", "default"),
    schedule("prevent integer overflow when sum of requests over podsets exceeds MaxInt64", "default/overflow-cq",
             [pods("ps1", cpu="1000000m"), pods("ps2", cpu="9223372036854775000m")], "never", code="KT441",
             others=(cluster_queue("overflow-cq", group(quotas("default", cpu="10000"))),)),
    schedule("prevent integer overflow in ResourceValue conversion to MilliValue", "default/overflow-cq",
             [pods("ps1", cpu="9223372036854776")], "never", code="KT441",
             others=(cluster_queue("overflow-cq", group(quotas("default", cpu="10"))),)),
]
