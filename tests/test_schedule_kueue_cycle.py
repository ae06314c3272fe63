"""The schedule simulation's first cycle decides as Kueue's does: cases of Kueue v0.19.2's own
pkg/scheduler/scheduler_test.go TestSchedule and scheduler_fs_test.go TestScheduleForFairSharing
(github.com/kubernetes-sigs/kueue, tag v0.19.2), translated.

Each case's ClusterQueues and Cohorts become manifests; its admitted workloads start admitted on the flavors
the case gives them (`Simulation.admitted_already`); its pending workloads arrive, older first where the case
gives creation times; one cycle runs (`Simulation.first_cycle`). The assertions are the case's: which pending
workloads are admitted and on which flavor (wantAssignments), which admitted ones are preempted (the Evicted
condition with reason Preempted in wantWorkloads), and which stay pending (wantLeft, wantInadmissibleLeft).
Every case translated agrees; AGREEMENT below counts them."""

from __future__ import annotations

from typing import Any

import pytest
from kubetrain.admission.cluster_objects import ClusterObjects
from kubetrain.model.pod_sets import PodSet
from kubetrain.schedule.simulation import Simulation
from kubetrain.schedule.workload_state import SimWorkload

KUEUE = "kueue.x-k8s.io/v1beta2"
FLAVORS = ("default", "on-demand", "spot", "model-a")
TAINTED = {f"spot-tainted{suffix}": {"nodeTaints": [{"key": "key", "value": value, "effect": "NoSchedule"}]}
           for suffix, value in (("", "val"), ("-2", "val2"))}  # TestSchedule's tainted flavors


def flavor_quotas(flavor: str, resource: str, nominal: str, borrowing: str | None = None,
                  lending: str | None = None) -> dict[str, Any]:
    quota = {"name": resource, "nominalQuota": nominal} | ({"borrowingLimit": borrowing} if borrowing else {}) | \
        ({"lendingLimit": lending} if lending else {})
    return {"name": flavor, "resources": [quota]}


def cq(name: str, cohort: str | None, *flavors: dict[str, Any], within: str = "Never", reclaim: str = "Never",
       borrow: str | None = None, strategy: str = "BestEffortFIFO", when_can_preempt: str = "TryNextFlavor",
       when_can_borrow: str = "MayStopSearch", preference: str | None = None) -> dict[str, Any]:
    covered = sorted({r["name"] for f in flavors for r in f["resources"]})
    preemption: dict[str, Any] = {"withinClusterQueue": within, "reclaimWithinCohort": reclaim}
    if borrow:
        preemption["borrowWithinCohort"] = {"policy": borrow}
    spec = {"namespaceSelector": {}, "queueingStrategy": strategy, "preemption": preemption,
            "flavorFungibility": {"whenCanPreempt": when_can_preempt, "whenCanBorrow": when_can_borrow} |
            ({"preference": preference} if preference else {}),
            "resourceGroups": [{"coveredResources": covered, "flavors": list(flavors)}]}
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": spec | ({"cohortName": cohort} if cohort else {})}


def cohort(name: str, parent: str | None, *flavors: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {"parentName": parent} if parent else {}
    if flavors:
        covered = sorted({r["name"] for f in flavors for r in f["resources"]})
        spec["resourceGroups"] = [{"coveredResources": covered, "flavors": list(flavors)}]
    return {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def wl(key: str, queue: str, resource: str, amount: int, priority: int = 0, on: str | None = None,
       created: float = 0.0) -> tuple[SimWorkload, str | None]:
    """A workload of one pod; `on`: the flavor it is admitted on (None: pending); `created`: seconds, older
    first (a case's Creation(now) is later than its workloads with no creation time)."""
    value = amount * 1000 if resource == "cpu" else amount
    pod_set = PodSet("main", 1, {resource: value}, {}, None, (), None)
    return SimWorkload(key, queue, priority, created, (pod_set,), 3600.0), on


def wl_sets(key: str, queue: str, *pod_sets: dict[str, float], priority: int = 0, on: tuple[str, ...] | None = None,
            created: float = 0.0) -> tuple[SimWorkload, tuple[str, ...] | None]:
    """A workload of several pod sets (resource -> the set's total request, CPU in cores); `on`: each set's
    flavor where it is admitted."""
    sets = tuple(PodSet(f"set{i}", 1, {r: int(v * 1000) if r == "cpu" else int(v) for r, v in requests.items()},
                        {}, None, (), None) for i, requests in enumerate(pod_sets))
    return SimWorkload(key, queue, priority, created, sets, 3600.0), on


# TestSchedule's own ClusterQueues (the top of the test); a case adds its own.
ENG_ALPHA = cq("eng-alpha", "eng", flavor_quotas("on-demand", "cpu", "50", "50"),
               flavor_quotas("spot", "cpu", "100", "0"), strategy="StrictFIFO")
ENG_BETA = cq("eng-beta", "eng", flavor_quotas("on-demand", "cpu", "50", "10"), flavor_quotas("spot", "cpu", "0", "100"),
              within="LowerPriority", reclaim="Any", strategy="StrictFIFO")
ENG_BETA_WITH_GPU = ENG_BETA | {"spec": ENG_BETA["spec"] | {"resourceGroups": [
    *ENG_BETA["spec"]["resourceGroups"],
    {"coveredResources": ["example.com/gpu"], "flavors": [flavor_quotas("model-a", "example.com/gpu", "20", "0")]}]}}
SALES = cq("sales", None, flavor_quotas("default", "cpu", "50", "0"), strategy="StrictFIFO")
LEND_A = cq("lend-a", "lend", flavor_quotas("default", "cpu", "3", lending="2"))
LEND_B = cq("lend-b", "lend", flavor_quotas("default", "cpu", "2", lending="2"))
OTHER_ALPHA_2 = cq("other-alpha", "other", flavor_quotas("on-demand", "cpu", "2"), within="LowerPriority",
                   reclaim="Any")

LOCAL_CAPACITY = [  # scheduler_fs_test.go's "prefer flavor with most local capacity", with and without fair sharing
    cohort("root-cohort", None, flavor_quotas("on-demand", "gpu", "2"), flavor_quotas("spot", "gpu", "0")),
    cohort("child-cohort", "root-cohort", flavor_quotas("on-demand", "gpu", "5"), flavor_quotas("spot", "gpu", "7")),
    cq("queue1", "child-cohort", flavor_quotas("on-demand", "gpu", "3"), flavor_quotas("spot", "gpu", "3"),
       within="LowerPriority", reclaim="Any", when_can_borrow="TryNextFlavor")]


def local_capacity_workloads() -> list[tuple[SimWorkload, str | None]]:
    return [wl("a1", "queue1", "gpu", 8, on="on-demand"), wl("a2", "queue1", "gpu", 3, on="spot"),
            wl("a3", "queue1", "gpu", 1)]


Case = tuple[str, list[dict[str, Any]], list[tuple[SimWorkload, Any]], dict[str, Any], set[str]]
CASES: list[Case] = [
    # (case, objects, workloads, admitted this cycle: key -> flavor, preempted)
    ("single clusterQueue full", [SALES], [
        wl("new", "sales", "cpu", 11), wl("assigned", "sales", "cpu", 40, on="default")], {}, set()),
    ("admit in different cohorts", [SALES, ENG_ALPHA, ENG_BETA], [
        wl("sales/new", "sales", "cpu", 1), wl("eng-alpha/new", "eng-alpha", "cpu", 51)],
     {"sales/new": "default", "eng-alpha/new": "on-demand"}, set()),
    ("admit in same cohort with no borrowing", [ENG_ALPHA, ENG_BETA], [
        wl("eng-alpha/new", "eng-alpha", "cpu", 40), wl("eng-beta/new", "eng-beta", "cpu", 40)],
     {"eng-alpha/new": "on-demand", "eng-beta/new": "on-demand"}, set()),
    ("cannot borrow if cohort was assigned and would result in overadmission", [ENG_ALPHA, ENG_BETA], [
        wl("eng-alpha/new", "eng-alpha", "cpu", 45), wl("eng-beta/new", "eng-beta", "cpu", 56)],
     {"eng-alpha/new": "on-demand"}, set()),
    ("can borrow if cohort was assigned and will not result in overadmission", [ENG_ALPHA, ENG_BETA], [
        wl("eng-alpha/new", "eng-alpha", "cpu", 45), wl("eng-beta/new", "eng-beta", "cpu", 55)],
     {"eng-alpha/new": "on-demand", "eng-beta/new": "on-demand"}, set()),
    ("can borrow if needs reclaim from cohort in different flavor", [ENG_ALPHA, ENG_BETA], [
        wl("can-reclaim", "eng-alpha", "cpu", 100), wl("needs-to-borrow", "eng-beta", "cpu", 1),
        wl("user-on-demand", "eng-beta", "cpu", 50, on="on-demand"), wl("user-spot", "eng-beta", "cpu", 1, on="spot")],
     {"needs-to-borrow": "on-demand"}, set()),
    ("workload exceeds lending limit when borrow in cohort", [LEND_A, LEND_B], [
        wl("a", "lend-b", "cpu", 2, on="default"), wl("b", "lend-b", "cpu", 3)], {}, set()),
    *[(f"hierarchical cohort {how}", [
        cohort("root", None), cohort("child", "root"),
        cq("cq-lender", "child", flavor_quotas("on-demand", "cpu", "10", lending=lending)),
        cq("cq-borrower", "child", flavor_quotas("on-demand", "cpu", "5", "10"))], [
        wl("wl-existing", "cq-borrower", "cpu", 5, on="on-demand"), wl("wl-pending", "cq-borrower", "cpu", 4 if
                                                                        lending == "3" else 5)], admitted, set())
      for how, lending, admitted in (("respects lending limit when borrowing", "3", {}),
                                     ("allows borrowing up to lending limit", "5", {"wl-pending": "on-demand"}))],
    ("cannot borrow resource not listed in clusterQueue", [ENG_ALPHA, ENG_BETA], [
        wl("new", "eng-alpha", "example.com/gpu", 1)], {}, set()),
    ("not enough resources to borrow, fallback to next flavor; WhenCanPreempt: TryNextFlavor", [ENG_ALPHA, ENG_BETA], [
        wl("new", "eng-alpha", "cpu", 60), wl("existing", "eng-beta", "cpu", 45, on="on-demand")],
     {"new": "spot"}, set()),
    *[(f"{how} from the same flavor in the same cycle{when}", [
        cq(f"cq{i}", "co", {"name": "default", "resources": [
            {"name": r, "nominalQuota": "10", "borrowingLimit": "10"} for r in ("r1", "r2")]},
           within="LowerPriority", reclaim="Any") for i in (1, 2, 3)], [
        wl("wl1", "cq1", "r1", 16, -1), wl("wl2", "cq2", second, amount, -2)], admitted, set())
      for how, when, second, amount, admitted in (
          ("two workloads can borrow different resources", "", "r2", 16, {"wl1": "default", "wl2": "default"}),
          ("two workloads can borrow the same resources", " if fits in the cohort quota", "r1", 14,
           {"wl1": "default", "wl2": "default"}),
          ("only one workload can borrow one resources", " if cohort quota cannot fit", "r1", 16, {"wl1": "default"}))],
    ("preemption while borrowing, workload waiting for preemption should not block a borrowing workload in another "
     "CQ", [
        cq("cq_shared", "preemption-while-borrowing", flavor_quotas("default", "cpu", "4", "0")),
        cq("cq_a", "preemption-while-borrowing", flavor_quotas("default", "cpu", "0", "3"), reclaim="LowerPriority",
           borrow="LowerPriority"),
        cq("cq_b", "preemption-while-borrowing", flavor_quotas("default", "cpu", "0"), reclaim="LowerPriority",
           borrow="LowerPriority")], [
        wl("a", "cq_a", "cpu", 3, created=1.0), wl("b", "cq_b", "cpu", 1, created=2.0),
        wl("admitted_a", "cq_a", "cpu", 2, on="default")], {"b": "default"}, set()),
    ("A workload is only eligible to do preemptions if it fits fully within nominal quota", [
        cq("other-alpha", "other", flavor_quotas("on-demand", "cpu", "2"), within="LowerPriority", reclaim="Any"),
        cq("other-beta", "other", flavor_quotas("on-demand", "cpu", "2"))], [
        wl("a1", "other-alpha", "cpu", 1, -1, on="on-demand"), wl("b1", "other-beta", "cpu", 1, -1, on="on-demand"),
        wl("incoming", "other-alpha", "cpu", 3, 1)], {}, set()),
    ("not enough resources", [SALES], [wl("new", "sales", "cpu", 100)], {}, set()),
    *[(f"prefer first preemption flavor when second flavor {what}", [
        cq("other-alpha", "other", flavor_quotas("on-demand", "gpu", "10"), flavor_quotas("spot", "gpu", "10"),
           within="LowerPriority", reclaim="LowerPriority"),
        cq("other-beta", "other", flavor_quotas("on-demand", "gpu", "0"), flavor_quotas("spot", "gpu", "0"))], [
        wl("a1", "other-alpha", "gpu", first, 50, on="on-demand"), wl("a2", "other-alpha", "gpu", 5, 50, on="spot"),
        wl("b1", "other-beta", "gpu", 5, beta_priority, on="spot"), wl("preemptor", "other-alpha", "gpu", wanted, 100)],
      {}, {"a1"}) for what, first, beta_priority, wanted in (
          ("requires both reclaim and cq priority preemption", 5, 50, 6), ("also requires cq preemption", 6, 9001, 5))],
    ("prefer flavor with most local capacity (FS=false)", LOCAL_CAPACITY, local_capacity_workloads(), {"a3": "spot"},
     set()),
    ("assign multiple resources and flavors", [ENG_ALPHA, ENG_BETA_WITH_GPU], [
        wl_sets("new", "eng-beta", {"cpu": 60, "example.com/gpu": 10}, {"cpu": 40})],
     {"new": ((("cpu", "on-demand"), ("example.com/gpu", "model-a")), (("cpu", "spot"),))}, set()),
    ("no overadmission while borrowing", [ENG_ALPHA, ENG_BETA, cq(
        "eng-gamma", "eng", flavor_quotas("on-demand", "cpu", "50", "10"), flavor_quotas("spot", "cpu", "0", "100"),
        within="LowerPriority", reclaim="Any")], [
        wl("new", "eng-beta", "cpu", 50, created=-2.0), wl("new-alpha", "eng-alpha", "cpu", 1, created=-1.0),
        wl("new-gamma", "eng-gamma", "cpu", 50),
        wl_sets("existing", "eng-gamma", {"cpu": 51}, {"cpu": 100}, on=("on-demand", "spot"))],
     {"new": "on-demand", "new-alpha": "on-demand"}, set()),
    ("admit workload with zero-quantity request for resource not in ClusterQueue", [SALES], [
        wl_sets("zero-resource-wl", "sales", {"cpu": 1, "example.com/gpu": 0})],
     {"zero-resource-wl": "default"}, set()),
    ("preempt when workload requests zero of a resource not defined in ClusterQueue", [
        cq("preempt-zero-gpu-cq", None, flavor_quotas("default", "cpu", "4"), within="LowerPriority")], [
        wl("low-priority", "preempt-zero-gpu-cq", "cpu", 4, -1, on="default"),
        wl_sets("preemptor", "preempt-zero-gpu-cq", {"cpu": 2, "example.com/gpu": 0})], {}, {"low-priority"}),
    *[(name, [cq(queue, None, flavor_quotas("spot-tainted", "cpu", "20", "20"),
                 flavor_quotas(second, "cpu", limit, limit), strategy="StrictFIFO")], workloads, {}, set())
      for name, queue, second, limit, workloads in (
          ("flavors with mixed misconfiguration and insufficient quota", "custom-cq", "on-demand", "15", [
              wl("existing-on-demand-job", "custom-cq", "cpu", 10, on="on-demand"),
              wl("new-job", "custom-cq", "cpu", 10)]),
          ("flavors with mixed taint mismatch and exceeding limits", "custom-cq2", "on-demand", "5", [
              wl("new-job2", "custom-cq2", "cpu", 10)]),
          ("flavors are structurally incompatible", "custom-cq3", "spot-tainted-2", "5", [
              wl("new-job3", "custom-cq3", "cpu", 1)]))],
    ("preempt workloads in ClusterQueue and cohort", [ENG_ALPHA, ENG_BETA], [
        wl("preemptor", "eng-beta", "cpu", 20),
        wl("use-all-spot", "eng-alpha", "cpu", 100, on="spot"),
        wl("low-1", "eng-beta", "cpu", 30, -1, on="on-demand"),
        wl("low-2", "eng-beta", "cpu", 10, -2, on="on-demand"),
        wl("borrower", "eng-alpha", "cpu", 60, on="on-demand")], {}, {"borrower", "low-2"}),
    ("multiple CQs need preemption", [
        cq("other-alpha", "other", flavor_quotas("on-demand", "cpu", "50", "50")),
        cq("other-beta", "other", flavor_quotas("on-demand", "cpu", "50", "10"), within="LowerPriority",
           reclaim="Any")], [
        wl("preemptor", "other-beta", "cpu", 1, -1),
        wl("pending", "other-alpha", "cpu", 1, 1),
        wl("use-all", "other-alpha", "cpu", 100, on="on-demand")], {}, {"use-all"}),
    ("minimal preemptions when target queue is exhausted", [
        OTHER_ALPHA_2, cq("other-beta", "other", flavor_quotas("on-demand", "cpu", "2")),
        cq("other-gamma", "other", flavor_quotas("on-demand", "cpu", "2"))], [
        wl("a1", "other-alpha", "cpu", 1, -2, on="on-demand"), wl("a2", "other-alpha", "cpu", 1, -2, on="on-demand"),
        wl("a3", "other-alpha", "cpu", 1, -1, on="on-demand"), wl("b1", "other-beta", "cpu", 1, on="on-demand"),
        wl("b2", "other-beta", "cpu", 1, on="on-demand"), wl("b3", "other-beta", "cpu", 1, on="on-demand"),
        wl("incoming", "other-alpha", "cpu", 2)], {}, {"a1", "a2"}),
    ("prefer reclamation over cq priority based preemption", [
        cq("other-alpha", "other", flavor_quotas("on-demand", "gpu", "10"), flavor_quotas("spot", "gpu", "10"),
           within="LowerPriority", reclaim="LowerPriority"),
        cq("other-beta", "other", flavor_quotas("on-demand", "gpu", "0"), flavor_quotas("spot", "gpu", "0"),
           within="LowerPriority", reclaim="LowerPriority")], [
        wl("a1", "other-alpha", "gpu", 5, 50, on="on-demand"), wl("b1", "other-beta", "gpu", 5, 50, on="spot"),
        wl("preemptor", "other-alpha", "gpu", 6, 100)], {}, {"b1"}),
    *[(f"capacity {verdict} when lending clusterqueue {how} (ReclaimWithinCohort={policy})", [
        cq("ClusterQueueA", "root", flavor_quotas("on-demand", "gpu", "2"), reclaim=policy),
        cq("ClusterQueueB", "root", flavor_quotas("on-demand", "gpu", "0"))], [
        wl("a1-admitted", "ClusterQueueA", "gpu", 1, on="on-demand"),
        wl("a2-pending", "ClusterQueueA", "gpu", 2),
        wl("b1-pending", "ClusterQueueB", "gpu", 1, created=1.0)], admitted, set())
      for verdict, how, policy, admitted in (
          ("not blocked", "can reclaim", "Any", {"b1-pending": "on-demand"}),
          ("blocked", "not guaranteed to reclaim", "LowerPriority", {}),
          ("blocked", "not guaranteed to reclaim", "Never", {}))],
    ("in a hierarchical cohort, workload borrowing less is scheduled first", [
        cohort("root", None), cohort("guaranteed", "root", flavor_quotas("default", "cpu", "4")),
        cq("guaranteed", "guaranteed", flavor_quotas("default", "cpu", "0")),
        cq("best-effort", "root", flavor_quotas("default", "cpu", "0"))], [
        wl("guaranteed", "guaranteed", "cpu", 4, 0), wl("best-effort", "best-effort", "cpu", 4, 3)],
     {"guaranteed": "default"}, set()),
    ("don't assign flavor if there are no candidates for preemption", [
        cq("cq1", "cohort", flavor_quotas("on-demand", "cpu", "0", "1"), flavor_quotas("spot", "cpu", "0", "1"),
           within="LowerPriority", reclaim="Any", borrow="LowerPriority", when_can_preempt="MayStopSearch"),
        cq("cq2", "cohort", flavor_quotas("on-demand", "cpu", "1"), flavor_quotas("spot", "cpu", "1"))], [
        wl("admitted", "cq2", "cpu", 1, 0, on="on-demand"), wl("new", "cq1", "cpu", 1, 100)],
     {"new": "spot"}, set()),
    ("admit to second flavor when first needs preemption; WhenCanPreempt: TryNextFlavor", [
        cq("preempt-attempts-cq", None, flavor_quotas("on-demand", "cpu", "1"), flavor_quotas("spot", "cpu", "1"),
           within="LowerPriority")], [
        wl("blocker", "preempt-attempts-cq", "cpu", 1, 50, on="on-demand"),
        wl("test-wl", "preempt-attempts-cq", "cpu", 1, 100)], {"test-wl": "spot"}, set()),
]
CASES += [
    ("multiple preemptions without borrowing", [
        cq("other-alpha", "other", flavor_quotas("default", "cpu", "2"), within="LowerPriority"),
        cq("other-beta", "other", flavor_quotas("default", "cpu", "2"), within="LowerPriority")], [
        wl("a1", "other-alpha", "cpu", 2, on="default"), wl("b1", "other-beta", "cpu", 2, on="default"),
        wl("alpha/preemptor", "other-alpha", "cpu", 2, 100), wl("beta/preemptor", "other-beta", "cpu", 2, 100)],
     {}, {"a1", "b1"}),
    ("multiple preemptions preemption possible after earlier workload fits", [
        cq("other-alpha", "other", flavor_quotas("default", "cpu", "1"), within="LowerPriority"),
        cq("other-beta", "other", flavor_quotas("default", "cpu", "2"), within="LowerPriority")], [
        wl("b1", "other-beta", "cpu", 2, on="default"), wl("fit", "other-alpha", "cpu", 1, 100),
        wl("preemptor", "other-beta", "cpu", 2, 99)], {"fit": "default"}, {"b1"}),
    ("multiple preemptions skip preemption when shared limited resource", [
        cq("other-alpha", "other", flavor_quotas("default", "cpu", "2"), within="LowerPriority",
           borrow="LowerPriority"),
        cq("other-beta", "other", flavor_quotas("default", "cpu", "2"), within="LowerPriority",
           borrow="LowerPriority"),
        cq("resource-bank", "other", flavor_quotas("default", "cpu", "1"))], [
        wl("a1", "other-alpha", "cpu", 2, on="default"), wl("b1", "other-beta", "cpu", 2, on="default"),
        wl("preemptor", "other-alpha", "cpu", 3, 100), wl("pretending-preemptor", "other-beta", "cpu", 3, 99)],
     {}, {"a1"}),
]
CASES += [
    ("use second flavor when the first has no preemption candidates; WhenCanPreempt: MayStopSearch", [
        cq("other-alpha", None, flavor_quotas("on-demand", "cpu", "50", "50"), flavor_quotas("spot", "cpu", "100", "0"),
           within="LowerPriority", when_can_preempt="MayStopSearch")], [
        wl("admitted", "other-alpha", "cpu", 50, on="on-demand"), wl("new", "other-alpha", "cpu", 20)],
     {"new": "spot"}, set()),
    ("workload requiring reclaimation prioritized over wl in another full cq", [
        cq("CQ1", "other", flavor_quotas("on-demand", "gpu", "10")),
        cq("CQ2", "other", flavor_quotas("on-demand", "gpu", "10"), reclaim="Any"),
        cq("CQ3", "other", flavor_quotas("on-demand", "gpu", "0"))], [
        wl("Admitted-Workload-1", "CQ1", "gpu", 5, on="on-demand"),
        wl("WL1", "CQ1", "gpu", 10, created=1.0), wl("WL2", "CQ2", "gpu", 10, created=2.0),
        wl("Admitted-Workload-2", "CQ3", "gpu", 5, 0, on="on-demand"),
        wl("Admitted-Workload-3", "CQ3", "gpu", 5, 1, on="on-demand")], {}, {"Admitted-Workload-2"}),
]
CASES += [
    (f"{preference} preference: {case}", [
        cq(f"{p}-cq", f"{p}-cohort", flavor_quotas("on-demand", "cpu", "5", "0"), flavor_quotas("spot", "cpu", "0", "5"),
           within="LowerPriority", when_can_borrow="TryNextFlavor", preference=preference),
        cq(f"{p}-lender", f"{p}-cohort", flavor_quotas("on-demand", "cpu", "0"), flavor_quotas("spot", "cpu", "5"))], [
        wl(f"low-{p}", f"{p}-cq", "cpu", 5, -1, on="on-demand"), wl(f"high-{p}", f"{p}-cq", "cpu", 5, 0)],
     admitted, preempted)
    for preference, p, case, admitted, preempted in (
        ("PreemptionOverBorrowing", "pob", "preempt in first flavor instead of borrowing in second", {},
         {"low-pob"}),
        ("BorrowingOverPreemption", "bop", "borrow in second flavor instead of preempting in first",
         {"high-bop": "spot"}, set()))]
CASES += [
    ("PreemptionOverBorrowing preference: select fitting second flavor over first flavor with no preemption "
     "candidates", [
        cohort("nopc-root", None, flavor_quotas("on-demand", "cpu", "0"), flavor_quotas("spot", "cpu", "5")),
        cohort("nopc-mid", "nopc-root"),
        cq("nopc-cq", "nopc-mid", flavor_quotas("on-demand", "cpu", "5", "0"), flavor_quotas("spot", "cpu", "0"),
           within="LowerPriority", when_can_borrow="TryNextFlavor", preference="PreemptionOverBorrowing"),
        cq("nopc-sibling", "nopc-mid", flavor_quotas("on-demand", "cpu", "5"), flavor_quotas("spot", "cpu", "0"))], [
        wl("admitted-nopc", "nopc-cq", "cpu", 5, on="on-demand"), wl("pending-nopc", "nopc-cq", "cpu", 5)],
     {"pending-nopc": "spot"}, set()),
]


def weighted(queue: dict[str, Any], weight: str) -> dict[str, Any]:
    return queue | {"spec": queue["spec"] | {"fairSharing": {"weight": weight}}}


ON_DEMAND = "on-demand"
# TestScheduleForFairSharing (pkg/scheduler/scheduler_fs_test.go), fair sharing on.
FAIR_CASES: list[Case] = [
    ("with fair sharing: schedule workload with lowest share first", [
        ENG_ALPHA, ENG_BETA, cq("eng-shared", "eng", flavor_quotas(ON_DEMAND, "cpu", "10", "0"))], [
        wl("all_nominal", "eng-alpha", "cpu", 50, on=ON_DEMAND), wl("borrowing", "eng-beta", "cpu", 55, on=ON_DEMAND),
        wl("older_new", "eng-beta", "cpu", 1, created=-60.0), wl("new", "eng-alpha", "cpu", 5)],
     {"new": ON_DEMAND}, set()),
    ("hierarchical fair sharing schedule workload which wins tournament", [
        cohort("A", None, flavor_quotas(ON_DEMAND, "cpu", "200")), cohort("B", "A"), cohort("C", "A"),
        *[cq(q, parent, flavor_quotas(ON_DEMAND, "cpu", "0")) for q, parent in zip("defg", "BBCC")]], [
        wl("d0", "d", "cpu", 10, on=ON_DEMAND), wl("e0", "e", "cpu", 20, on=ON_DEMAND),
        wl("g0", "g", "cpu", 100, on=ON_DEMAND), wl("d1", "d", "cpu", 70), wl("e1", "e", "cpu", 61),
        wl("f1", "f", "cpu", 1), wl("g1", "g", "cpu", 1)], {"d1": ON_DEMAND}, set()),
    ("fair sharing schedule workload with lowest drf after admission", [
        cohort("A", None, flavor_quotas(ON_DEMAND, "cpu", "100")),
        cq("b", "A", flavor_quotas(ON_DEMAND, "cpu", "0")), cq("c", "A", flavor_quotas(ON_DEMAND, "cpu", "0"))], [
        wl("b0", "b", "cpu", 10, on=ON_DEMAND), wl("b1", "b", "cpu", 50), wl("c1", "c", "cpu", 75)],
     {"b1": ON_DEMAND}, set()),
    *[(f"fair sharing two queues with {which} schedules workload which borrows less", [
        cohort("A", None, flavor_quotas(ON_DEMAND, "cpu", "8")),
        *[weighted(cq(q, "A", flavor_quotas(ON_DEMAND, "cpu", "0"), reclaim="Any"), weight) for q in "bc"]], [
        wl("b0", "b", "cpu", 4, on=ON_DEMAND), wl("b1", "b", "cpu", 4, 9001), wl("c1", "c", "cpu", 4, 0)],
      {"c1": ON_DEMAND}, set()) for which, weight in (("weight 0", "0"), ("high weight", "123456789"))],
    ("with fair sharing: nominal-first ordering admits workload fitting within nominal despite higher CQ DRS", [
        cq("fs-nom-a", "fs-nom", flavor_quotas(ON_DEMAND, "cpu", "50", "0"), flavor_quotas("spot", "cpu", "50", "50")),
        cq("fs-nom-b", "fs-nom", flavor_quotas(ON_DEMAND, "cpu", "10", "50"),
           flavor_quotas("spot", "cpu", "50", "0"))], [
        wl("spot-heavy", "fs-nom-a", "cpu", 80, on="spot"), wl("light-usage", "fs-nom-b", "cpu", 5, on=ON_DEMAND),
        wl("borrow-wl", "fs-nom-b", "cpu", 15, created=-60.0), wl("nom-wl", "fs-nom-a", "cpu", 45)],
     {"nom-wl": ON_DEMAND}, set()),
    *[(f"with fair sharing: hierarchical nominal-first {how}", [
        cohort("root", None), *subtree, cohort("Cohort-B", "root"),
        cq("cq-b", "Cohort-B", flavor_quotas(ON_DEMAND, "cpu", "5")),
        cq("cq-c", "Cohort-B", flavor_quotas(ON_DEMAND, "cpu", "0"))], [
        wl("c0", "cq-c", "cpu", 10, on=ON_DEMAND), wl("wl-a", "cq-a", "cpu", 5), wl("wl-b", "cq-b", "cpu", 5)],
      {"wl-a": ON_DEMAND}, set()) for how, subtree in (
        ("prefers non-borrowing subtree", [cohort("Cohort-A", "root", flavor_quotas(ON_DEMAND, "cpu", "10")),
                                           cq("cq-a", "Cohort-A", flavor_quotas(ON_DEMAND, "cpu", "0"))]),
        ("with deeper nesting", [cohort("Cohort-A", "root"),
                                 cohort("SUB-A", "Cohort-A", flavor_quotas(ON_DEMAND, "cpu", "10")),
                                 cq("cq-a", "SUB-A", flavor_quotas(ON_DEMAND, "cpu", "0"))]))],
    ("with fair sharing: hierarchical nominal-first with mixed CQ and cohort quotas", [
        cohort("root", None), cohort("Cohort-A", "root", flavor_quotas(ON_DEMAND, "cpu", "10")),
        cohort("Cohort-B", "root", flavor_quotas(ON_DEMAND, "cpu", "10")),
        *[cq(q, c, flavor_quotas(ON_DEMAND, "cpu", n)) for q, c, n in (
            ("cq-a1", "Cohort-A", "5"), ("cq-a2", "Cohort-A", "3"), ("cq-b", "Cohort-B", "5"),
            ("cq-c", "Cohort-B", "3"))]], [
        wl("a2-admitted", "cq-a2", "cpu", 6, on=ON_DEMAND), wl("c-admitted", "cq-c", "cpu", 20, on=ON_DEMAND),
        wl("wl-a1", "cq-a1", "cpu", 7), wl("wl-b", "cq-b", "cpu", 4)], {"wl-a1": ON_DEMAND}, set()),
    ("with fair sharing: hierarchical nominal-first per-flavor ignores cross-flavor borrowing", [
        cohort("root", None), cohort("Cohort-A", "root", flavor_quotas(ON_DEMAND, "cpu", "10")),
        cohort("Cohort-B", "root", flavor_quotas("spot", "cpu", "10")),
        cq("cq-a", "Cohort-A", flavor_quotas(ON_DEMAND, "cpu", "0"), flavor_quotas("spot", "cpu", "0")),
        cq("cq-b", "Cohort-B", flavor_quotas(ON_DEMAND, "cpu", "5"), flavor_quotas("spot", "cpu", "0"))], [
        wl("spot-admitted", "cq-a", "cpu", 5, on="spot"), wl("od-admitted", "cq-b", "cpu", 8, on=ON_DEMAND),
        wl("wl-a", "cq-a", "cpu", 4), wl("wl-b", "cq-b", "cpu", 4)], {"wl-a": ON_DEMAND}, set()),
    ("with fair sharing: preempt workload from CQ with the highest share", [
        ENG_ALPHA, ENG_BETA, cq("eng-gamma", "eng", flavor_quotas(ON_DEMAND, "cpu", "50", "0"))], [
        wl("all_spot", "eng-alpha", "cpu", 100, on="spot"),
        *[wl(f"alpha{i}", "eng-alpha", "cpu", 20, on=ON_DEMAND) for i in range(1, 5)],
        wl("gamma1", "eng-gamma", "cpu", 10, on=ON_DEMAND),
        *[wl(f"gamma{i}", "eng-gamma", "cpu", 20, on=ON_DEMAND) for i in range(2, 5)],
        wl("preemptor", "eng-beta", "cpu", 30)], {}, {"alpha1", "gamma1"}),
    ("multiple preemptions within cq when fair sharing", [
        *[cq(f"other-{q}", "other", flavor_quotas("default", "cpu", "2"), within="LowerPriority")
          for q in ("alpha", "beta", "gamma")], cq("resource-bank", "other", flavor_quotas("default", "cpu", "3"))], [
        *[wl(name, f"other-{q}", "cpu", 3, 0, on="default") for name, q in (("a1", "alpha"), ("b1", "beta"),
                                                                            ("c1", "gamma"))],
        *[wl(f"preemptor-{q}", f"other-{q}", "cpu", 3, 100) for q in ("alpha", "beta", "gamma")]],
     {}, {"a1", "b1", "c1"}),
    ("with fair sharing: prefer reclamation over cq priority based preemption; with preemption while borrowing", [
        cq("other-alpha", "other", flavor_quotas("on-demand", "gpu", "7"), flavor_quotas("spot", "gpu", "7"),
           within="LowerPriority", reclaim="LowerPriority"),
        cq("other-beta", "other", flavor_quotas("on-demand", "gpu", "3"), flavor_quotas("spot", "gpu", "3"))], [
        wl("a1", "other-alpha", "gpu", 5, 50, on="on-demand"), wl("b1", "other-beta", "gpu", 5, 50, on="spot"),
        wl("preemptor", "other-alpha", "gpu", 8, 100)], {}, {"b1"}),
    ("prefer flavor with most local capacity", LOCAL_CAPACITY, local_capacity_workloads(), {"a3": "spot"}, set()),
    ("fair sharing: in-CQ preemption for CQ without cohort; repro for nil pointer panic", [
        cq("no-cohort-cq", None, flavor_quotas("default", "cpu", "4"), within="LowerPriority")], [
        wl("nc-low", "no-cohort-cq", "cpu", 4, -1, on="default"), wl("nc-high", "no-cohort-cq", "cpu", 4, 100)],
     {}, {"nc-low"}),
    ("PreemptionOverBorrowing with fair sharing: preempt in first flavor instead of borrowing in second", [
        cq("fs-pob-cq", "fs-pob-cohort", flavor_quotas("on-demand", "cpu", "5", "0"),
           flavor_quotas("spot", "cpu", "0", "5"), within="LowerPriority", when_can_borrow="TryNextFlavor",
           preference="PreemptionOverBorrowing"),
        cq("fs-pob-lender", "fs-pob-cohort", flavor_quotas("on-demand", "cpu", "0"),
           flavor_quotas("spot", "cpu", "5"))], [
        wl("fs-low-pob", "fs-pob-cq", "cpu", 5, -1, on="on-demand"), wl("fs-high-pob", "fs-pob-cq", "cpu", 5, 0)],
     {}, {"fs-low-pob"}),
    ("multiple preemptions skip overlapping preemption targets", [
        *[cq(f"other-{q}", "other", {"name": "default", "resources": [
            {"name": "cpu", "nominalQuota": "0"}, {"name": f"{q}-resource", "nominalQuota": "1"}]},
            within="LowerPriority", reclaim="Any") for q in ("alpha", "beta", "gamma")],
        cq("resource-bank", "other", flavor_quotas("default", "cpu", "9"))], [
        wl_sets("a1", "other-alpha", {"alpha-resource": 1}, on=("default",)),
        wl_sets("b1", "other-beta", {"beta-resource": 1}, on=("default",)),
        wl_sets("c1", "other-gamma", {"cpu": 9, "gamma-resource": 1}, on=("default",)),
        wl_sets("preemptor", "other-alpha", {"cpu": 3, "alpha-resource": 1}, priority=100),
        wl_sets("pretending-preemptor", "other-beta", {"cpu": 3, "beta-resource": 1}, priority=99)],
     {}, {"a1", "c1"}),
    ("not enough resources with fair sharing enabled", [SALES], [wl("new", "sales", "cpu", 100)], {}, set()),
    ("fair sharing schedule singleton cqs and cq without cohort", [
        cohort("A", None, flavor_quotas(ON_DEMAND, "cpu", "10")), cohort("B", None),
        cq("a", "A", flavor_quotas(ON_DEMAND, "cpu", "0")), cq("b", "B", flavor_quotas(ON_DEMAND, "cpu", "10")),
        cq("c", None, flavor_quotas(ON_DEMAND, "cpu", "10"))], [
        wl("a1", "a", "cpu", 10), wl("b1", "b", "cpu", 10), wl("c1", "c", "cpu", 10)],
     {"a1": ON_DEMAND, "b1": ON_DEMAND, "c1": ON_DEMAND}, set()),
    ("fair sharing schedule highest priority first", [
        cohort("A", None, flavor_quotas(ON_DEMAND, "cpu", "10")),
        cq("b", "A", flavor_quotas(ON_DEMAND, "cpu", "0")), cq("c", "A", flavor_quotas(ON_DEMAND, "cpu", "0"))], [
        wl("b1", "b", "cpu", 10, 99), wl("c1", "c", "cpu", 10, 101)], {"c1": ON_DEMAND}, set()),
    ("fair sharing schedule earliest timestamp first", [
        cohort("A", None, flavor_quotas(ON_DEMAND, "cpu", "10")),
        cq("b", "A", flavor_quotas(ON_DEMAND, "cpu", "0")), cq("c", "A", flavor_quotas(ON_DEMAND, "cpu", "0"))], [
        wl("b1", "b", "cpu", 10, 101, created=1.0), wl("c1", "c", "cpu", 10, 101)], {"c1": ON_DEMAND}, set()),
]
AGREEMENT = len(CASES) + len(FAIR_CASES)  # every translated case agrees: none is left out for disagreeing


def first_cycle(objects: list[dict[str, Any]], workloads: list[tuple[SimWorkload, Any]],
                fair_sharing: bool | None = None) -> tuple[dict[str, Any], set[str]]:
    flavors = [{"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": f}, "spec": TAINTED.get(f, {})}
               for f in [*FLAVORS, *TAINTED]]
    cluster = ClusterObjects.from_manifests("kueue", [*flavors, *objects])
    pending = [w for w, on in workloads if on is None]
    simulation = Simulation(cluster, pending, fair_sharing=fair_sharing)
    for w, on in workloads:
        if on is not None:
            flavors = (on,) * len(w.pod_sets) if isinstance(on, str) else on
            simulation.admitted_already(w, [{r: f for r in p.requests} for p, f in zip(w.pod_sets, flavors)])
    simulation.now = max(w.created for w in pending)  # all pending at the cycle, their creation times kept
    simulation.first_cycle()
    admitted = {w.key: assigned(w) for w in pending if w.admitted_at is not None and w.flavors}
    preempted = {w.key for w, on in workloads if on is not None and w.preempted_at}
    return admitted, preempted


def assigned(w: SimWorkload) -> str | tuple[tuple[tuple[str, str], ...], ...]:
    """The one flavor a workload was given, or per pod set its resources' flavors."""
    flavors = {f for chosen in w.flavors or [] for f in chosen.values()}
    return next(iter(flavors)) if len(flavors) == 1 else tuple(tuple(sorted(c.items())) for c in w.flavors or [])


@pytest.mark.parametrize("case, objects, workloads, admitted, preempted", CASES, ids=[c[0] for c in CASES])
def test_the_first_cycle_admits_and_preempts_as_kueues_test_says(case, objects, workloads, admitted, preempted):
    assert first_cycle(objects, workloads) == (admitted, preempted)


@pytest.mark.parametrize("case, objects, workloads, admitted, preempted", FAIR_CASES, ids=[c[0] for c in FAIR_CASES])
def test_under_fair_sharing_the_first_cycle_admits_as_kueues_test_says(case, objects, workloads, admitted, preempted):
    assert first_cycle(objects, workloads, fair_sharing=True) == (admitted, preempted)
