"""The schedule simulation (kubetrain.schedule) decides as Kueue v0.19.2 does: cases of Kueue's own
pkg/scheduler/preemption/preemption_test.go TestPreemption, translated (the case's ClusterQueues as
manifests, its admitted workloads admitted first, its incoming workload arriving after), and the queueing
behaviours over time."""

from __future__ import annotations

from typing import Any

import pytest
from kubetrain.admission.cluster_objects import ClusterObjects
from kubetrain.model.pod_sets import PodSet
from kubetrain.schedule.api_writes import WriteLimiter
from kubetrain.schedule.simulation import simulate
from kubetrain.schedule.workload_state import SimWorkload

KUEUE = "kueue.x-k8s.io/v1beta2"
HOUR = 3600.0


def queue(name: str, cpu: str, cohort: str | None = None, borrowing: str | None = None, within: str = "Never",
          reclaim: str = "Never", strategy: str = "BestEffortFIFO", **spec: Any) -> dict[str, Any]:
    resource = {"name": "cpu", "nominalQuota": cpu} | ({"borrowingLimit": borrowing} if borrowing else {})
    body = {"namespaceSelector": {}, "queueingStrategy": strategy,
            "preemption": {"withinClusterQueue": within, "reclaimWithinCohort": reclaim},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [resource]}]}],
            **spec} | ({"cohortName": cohort} if cohort else {})
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": body}


def cluster(*queues: dict[str, Any]) -> ClusterObjects:
    flavor = {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "default"}, "spec": {}}
    return ClusterObjects.from_manifests("c", [flavor, *queues])


def wl(key: str, cq: str, cpu: int, priority: int = 0, at: float = 0.0, hours: float = 10.0) -> SimWorkload:
    return SimWorkload(key, cq, priority, at, (PodSet("main", 1, {"cpu": cpu * 1000}, {}, None, (), None),),
                       hours * HOUR)


def preempted_by_incoming(objects: ClusterObjects, admitted: list[SimWorkload], incoming: SimWorkload) -> set[str]:
    for i, w in enumerate(admitted):
        w.created = -100.0 + i
    incoming.created = 0.0
    simulate(objects, [*admitted, incoming])
    assert all(w.admitted_at is not None and w.admitted_at < 0 for w in admitted), "the case's usage is admitted first"
    return {w.key for w in admitted if incoming.key in w.preempted_by}


STANDALONE = queue("standalone", "6", within="LowerPriority")
C1 = queue("c1", "6", "cohort", "6", within="LowerPriority", reclaim="LowerPriority")
C2 = queue("c2", "6", "cohort", "6", within="Never", reclaim="Any")

CASES = [  # TestPreemption case name, queues, admitted, incoming, victims
    ("preempt lowest priority", [STANDALONE],
     [wl("low", "standalone", 2, -1), wl("mid", "standalone", 2), wl("high", "standalone", 2, 1)],
     wl("in", "standalone", 2, 1), {"low"}),
    ("preempt multiple", [STANDALONE],
     [wl("low", "standalone", 2, -1), wl("mid", "standalone", 2), wl("high", "standalone", 2, 1)],
     wl("in", "standalone", 3, 1), {"low", "mid"}),
    ("no preemption for low priority", [STANDALONE],
     [wl("low", "standalone", 3, -1), wl("mid", "standalone", 3)],
     wl("in", "standalone", 1, -1), set()),
    ("not enough low priority workloads", [STANDALONE],
     [wl("low", "standalone", 3, -1), wl("mid", "standalone", 3)],
     wl("in", "standalone", 4, -1), set()),
    ("some free quota, preempt low priority", [STANDALONE],
     [wl("low", "standalone", 1, -1), wl("mid", "standalone", 1), wl("high", "standalone", 3, 1)],
     wl("in", "standalone", 2, 1), {"low"}),
    ("minimal set excludes low priority", [STANDALONE],
     [wl("low", "standalone", 1, -1), wl("mid", "standalone", 2), wl("high", "standalone", 3, 1)],
     wl("in", "standalone", 2, 1), {"mid"}),
    ("reclaim quota from borrower", [C1, C2],
     [wl("c1-low", "c1", 3, -1), wl("c2-mid", "c2", 3), wl("c2-high", "c2", 6, 1)],
     wl("in", "c1", 3, 1), {"c2-mid"}),
    ("no workloads borrowing", [C1, C2],
     [wl("c1-high", "c1", 4, 1), wl("c2-low-1", "c2", 4, -1)],
     wl("in", "c1", 4, 1), set()),
    ("not enough workloads borrowing", [C1, C2],
     [wl("c1-high", "c1", 4, 1), wl("c2-low-1", "c2", 4, -1), wl("c2-low-2", "c2", 4, -1)],
     wl("in", "c1", 4, 1), set()),
    ("can't preempt workloads in ClusterQueue for withinClusterQueue=Never", [C1, C2],
     [wl("c2-low", "c2", 3, -1)], wl("in", "c2", 4, 1), set()),
]


@pytest.mark.parametrize("case, queues, admitted, incoming, victims", CASES, ids=[c[0] for c in CASES])
def test_first_cycle_preempts_the_victims_kueue_preempts(case, queues, admitted, incoming, victims):
    assert preempted_by_incoming(cluster(*queues), admitted, incoming) == victims


def test_the_preemptor_is_admitted_once_its_victims_leave_and_the_victim_resumes_after_it():
    low, high = wl("low", "standalone", 6, -1, at=0.0, hours=4), wl("high", "standalone", 6, 1, at=HOUR, hours=2)
    simulate(cluster(STANDALONE), [low, high])
    assert (high.admitted_at, high.finished_at) == (HOUR, 3 * HOUR)
    assert low.preempted_at == [HOUR] and low.finished_at == 6 * HOUR  # 1 h done, 3 h left after high's 2 h


@pytest.mark.parametrize("strategy, small_admitted_at, large_admitted_at", [
    ("BestEffortFIFO", 0.0, 10 * HOUR),  # small passes the large head at once, and holds its 2 CPUs for 10 h
    ("StrictFIFO", 15 * HOUR - 1.0, 5 * HOUR - 1.0)])  # the head blocks: small waits for it to end
def test_strict_fifo_holds_a_small_job_behind_a_large_head_best_effort_lets_it_pass(strategy, small_admitted_at,
                                                                                      large_admitted_at):
    objects = cluster(queue("q", "8", strategy=strategy))
    running, large = wl("running", "q", 4, at=-1.0, hours=5), wl("large", "q", 8, priority=1)
    small = wl("small", "q", 2)
    simulate(objects, [running, large, small])
    assert (small.admitted_at, large.admitted_at) == (small_admitted_at, large_admitted_at)


def test_a_queue_borrows_idle_quota_within_its_borrowing_limit():
    objects = cluster(queue("a", "4", "org", "2"), queue("b", "4", "org"))
    jobs = [wl("a1", "a", 4), wl("a2", "a", 2), wl("a3", "a", 2)]
    simulate(objects, jobs)
    assert [j.admitted_at for j in jobs] == [0.0, 0.0, 10 * HOUR]  # a3 would borrow past the limit of 2


def test_reclaim_within_cohort_evicts_the_borrower_when_the_lender_needs_its_quota():
    objects = cluster(queue("a", "4", "org", reclaim="Any"), queue("b", "4", "org"))
    borrower, owner = wl("borrower", "b", 8, hours=10), wl("owner", "a", 4, at=HOUR)
    simulate(objects, [borrower, owner])
    assert borrower.preempted_by == ["owner"] and owner.admitted_at == HOUR


@pytest.mark.parametrize("fair_sharing, first", [(False, "a2"), (True, "b1")])
def test_fair_sharing_admits_the_queue_with_the_lower_dominant_share_first(fair_sharing, first):
    objects = cluster(queue("a", "0", "org"), queue("b", "0", "org"), queue("lender", "4", "org"))
    running, a2, b1 = wl("a1", "a", 2, at=-2.0), wl("a2", "a", 2, at=-1.0), wl("b1", "b", 2, at=-1.0)
    simulate(objects, [running, a2, b1], fair_sharing=fair_sharing)  # a2 is first by submission: its UID
    assert {w.key for w in (a2, b1) if w.admitted_at == -1.0} == {first}


def test_a_karpenter_pool_starts_pods_after_its_nodes_are_provisioned_and_a_static_pool_waits_for_free_nodes():
    pool = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "p", "annotations": {
        "kubetrain.dev/node-allocatable": '{"m5": {"cpu": "4", "memory": "16Gi"}}', "kubetrain.dev/max-nodes": "2"}},
        "spec": {"template": {"spec": {}}}}
    flavor = {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "default"}, "spec": {}}
    objects = ClusterObjects.from_manifests("c", [flavor, queue("q", "100"), pool])
    jobs = [wl(f"j{i}", "q", 4, hours=1) for i in range(3)]
    for job in jobs:
        job.pool = "p"
    simulate(objects, jobs, provisioning_seconds=300)
    assert [j.admitted_at for j in jobs] == [0.0, 0.0, 0.0]  # Kueue admits on quota alone
    assert [j.started_at for j in jobs] == [300.0, 300.0, 300.0 + HOUR]  # two nodes at most, then a freed one


@pytest.mark.parametrize("asked_at, lands_at", [
    ([0.0, 0.0, 0.0], [0.0, 0.0, 0.5]),  # the burst of 2, then one every 1/2 s
    ([0.0, 0.0, 0.0, 0.1], [0.0, 0.0, 0.5, 1.0]),  # asked later, served after the earlier asks
    ([0.0, 0.0, 5.0, 5.0, 5.0], [0.0, 0.0, 5.0, 5.0, 5.5]),  # refilled while idle, up to the burst only
])
def test_kueues_api_writes_wait_for_their_token_in_the_order_asked(asked_at, lands_at):
    limiter = WriteLimiter(2.0, 2)
    assert [limiter.reserve(t) for t in asked_at] == lands_at


def test_an_admission_holds_its_quota_from_the_cycle_but_its_pods_start_when_kueues_patch_lands():
    jobs = [wl(f"j{i}", "q", 1, hours=1) for i in range(3)]
    outcome = simulate(cluster(queue("q", "3")), jobs, api_writes=(1.0, 1))
    assert [j.reserved_at for j in jobs] == [0.0, 0.0, 0.0]  # assumed in one cycle: QuotaReserved is stamped then
    assert [j.written_at for j in jobs] == [j.started_at for j in jobs] == [0.0, 1.0, 2.0]  # one write a second
    held = {(s.workload.key, s.state): (s.start, s.end) for s in outcome.segments}
    assert held[("j2", "admitted")] == (0.0, 2.0) and held[("j2", "running")] == (2.0, 2.0 + HOUR)


@pytest.mark.parametrize("requeue_seconds, admitted_at", [(0.0, [5.0, 5.5]), (1.0, [6.0, 6.0])])
def test_freed_quota_requeues_parked_workloads_after_kueues_batch_and_arrivals_of_a_parked_class_wait_too(
        requeue_seconds, admitted_at):
    """The queue is full until 5 s; "parked" found no room at 1 s, "arriving" (its class) comes at 5.5 s: before
    a 1 s batch requeues the class, so it waits with it although the quota is free (Kueue's PushOrUpdate)."""
    running, parked, arriving = wl("running", "q", 4, hours=5 / HOUR), wl("parked", "q", 2, at=1.0), \
        wl("arriving", "q", 2, at=5.5)
    simulate(cluster(queue("q", "4")), [running, parked, arriving], requeue_seconds=requeue_seconds)
    assert [parked.admitted_at, arriving.admitted_at] == admitted_at


def test_an_eviction_frees_its_quota_when_kueues_patch_lands_and_the_preemptor_runs_after_its_own():
    low, high = wl("low", "standalone", 6, -1, hours=4), wl("high", "standalone", 6, 1, at=HOUR, hours=2)
    busy = [wl(f"busy{i}", "other", 1, at=HOUR, hours=1) for i in range(3)]
    simulate(cluster(STANDALONE, queue("other", "3")), [low, *busy, high], api_writes=(1.0, 1))
    # at 1 h the cycle admits busy0 (its patch takes the one token) and evicts low: that patch lands a second
    # later, and the quota with it; high is admitted by the next cycle and its own patch lands a second after
    assert low.preempted_at == [HOUR + 1.0] and low.finished_at is not None  # resumed after high
    assert high.reserved_at == HOUR + 1.0 and high.started_at == HOUR + 2.0
