"""Kueue as Kueue decides: flavor fungibility picks the flavor, flavors carry their own tolerations, a queue has
several resource groups; and one verdict: synth judges the objects it writes (after `job.patch()` and the render
steps), so `kubetrain plan` on dist/ says what synth said."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cdk8s import ApiObject, JsonPatch
from kubetrain import (
    App,
    Cluster,
    ClusterQueue,
    Cohort,
    Command,
    CpuNodePool,
    EfaNodePool,
    LauncherResources,
    LocalQueue,
    NcclTest,
    NodeResources,
    PodSecurity,
    PyTorchJob,
    ResourceFlavor,
    ResourceGroup,
    Toleration,
    TrainingJob,
)
from kubetrain.admission.plan_command import plan_dist, plan_files
from kubetrain.model.diagnostics import DefinitionError
from kubetrain.pipeline import fleet_findings, render, synth
from kubetrain.state import add_render_step
from platform_support import emitted, rejected

P5 = {"instance_types": ["p5.48xlarge"], "zones": ["us-west-2a"], "subnet_ids": ["subnet-00000001"],
      "security_group_ids": ["sg-00000001"], "role": "NodeRole", "max_nodes": 16}
CPU = {**P5, "instance_types": ["m5.4xlarge"]}
GPU_NODE = NodeResources(cpu="184", memory="1800Gi")


def cluster() -> Cluster:
    return Cluster(App(), "c", kubernetes_version="1.33", namespaces=["ml"])


def job(c: Cluster, name: str, pool: Any, nodes: int, queue: LocalQueue, **extra: Any) -> TrainingJob:
    return TrainingJob(c, name, image="img:1", nodes=nodes, procs_per_node=8, pool=pool, queue=queue,
                       resources=GPU_NODE, workload=Command(command=["train.py"]), **extra)


def found(c: Cluster) -> list[tuple[str, str, str]]:
    return [(f.problem.code, f.problem.path, f.problem.message) for f in fleet_findings(c)]


def planned(c: Cluster) -> dict[str, Any]:
    """`kubetrain plan`'s verdict of every job, on what synth would write."""
    files = {str(path): text.encode() for path, text in render(c.node.root).items()}
    return {p.workload.job: p for p in plan_files(files)[0]}


# -- fungibility: the flavor Kueue picks decides the verdict --------------------------------------------------

def _two_flavors(when_can_borrow: str) -> tuple[Cluster, Any, LocalQueue]:
    """Flavor a holds 8 GPUs of the queue's own and borrows 8 more from the cohort; flavor b holds 16."""
    c = cluster()
    pool = EfaNodePool(c, "p5", **P5)
    a, b = ResourceFlavor(c, "a", pool=pool), ResourceFlavor(c, "b", pool=pool)
    org = Cohort(c, "org", flavors=[a], quotas={"a": {"nvidia.com/gpu": "8"}})
    cq = ClusterQueue(c, "q", flavors=[a, b], cohort=org, when_can_borrow=when_can_borrow,
                      quotas={"a": {"nvidia.com/gpu": "8"}, "b": {"nvidia.com/gpu": "16"}})
    return c, pool, LocalQueue(c, "q", cluster_queue=cq)


def test_may_stop_search_admits_in_the_first_flavor_by_borrowing():
    c, pool, queue = _two_flavors("MayStopSearch")
    job(c, "gpt", pool, nodes=2, queue=queue)
    [(code, path, message)] = found(c)
    assert (code, path) == ("KT442", "queue")
    assert "16 nvidia.com/gpu in flavor a against a nominal quota of 8, the rest lent by cohort org" in message
    plan = planned(c)["gpt"]
    assert (plan.verdict, plan.flavor) == ("borrows", "a")


def test_try_next_flavor_admits_in_the_flavor_that_fits_its_own_quota():
    c, pool, queue = _two_flavors("TryNextFlavor")
    job(c, "gpt", pool, nodes=2, queue=queue)
    assert found(c) == []
    plan = planned(c)["gpt"]
    assert (plan.verdict, plan.flavor) == ("fits", "b")


def test_fungibility_settings_are_emitted_and_a_preference_needs_both_policies(crds):
    c = cluster()
    flavor = ResourceFlavor(c, "p5", pool=EfaNodePool(c, "p5", **P5))
    ClusterQueue(c, "default", flavors=[flavor])
    ClusterQueue(c, "stop", flavors=[flavor], when_can_preempt="MayStopSearch")
    ClusterQueue(c, "prefer", flavors=[flavor], when_can_borrow="TryNextFlavor", preference="PreemptionOverBorrowing")
    objects = emitted(c, crds)
    assert "flavorFungibility" not in objects["ClusterQueue/default"]["spec"]  # Kueue's defaults
    assert objects["ClusterQueue/stop"]["spec"]["flavorFungibility"] == {"whenCanPreempt": "MayStopSearch"}
    assert objects["ClusterQueue/prefer"]["spec"]["flavorFungibility"] == {
        "whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor", "preference": "PreemptionOverBorrowing"}
    problems = rejected(c, lambda: ClusterQueue(c, "refused", flavors=[flavor], preference="BorrowingOverPreemption"))
    assert [(p.code, p.path) for p in problems] == [("KT453", "preference")]
    assert "needs when_can_borrow and when_can_preempt TryNextFlavor (they are MayStopSearch and TryNextFlavor)" \
        in problems[0].message


# -- flavors: their own tolerations, no pool, several resource groups ----------------------------------------

def raw_job(c: Cluster, name: str, pods: int, gpus: str = "8", tolerations: list | None = None) -> None:
    """An indexed Job added with cdk8s itself, queued on `small`, its pods on pool p5."""
    spec: dict[str, Any] = {"restartPolicy": "Never", "nodeSelector": {"karpenter.sh/nodepool": "p5"},
                            "containers": [{"name": "main", "image": "img:1",
                                            "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}
    spec |= {"tolerations": tolerations} if tolerations else {}
    obj = ApiObject(c, name, api_version="batch/v1", kind="Job", metadata={
        "name": name, "namespace": "ml", "labels": {"kueue.x-k8s.io/queue-name": "small"}})
    obj.add_json_patch(JsonPatch.add("/spec", {"parallelism": pods, "completions": pods, "completionMode": "Indexed",
                                               "suspend": True, "template": {"spec": spec}}))


@pytest.mark.parametrize(("tolerations", "verdict"), [
    ([Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")], "fits"),
    ([Toleration(key="nvidia.com/gpu", operator="Equal", value="other", effect="NoSchedule")], "never"),
    ([], "never"),
])
def test_a_flavors_own_tolerations_let_it_take_pods_that_do_not_tolerate_its_taints(crds, tolerations, verdict):
    c = cluster()
    pool = EfaNodePool(c, "p5", **P5)  # its nodes are tainted nvidia.com/gpu:NoSchedule
    flavor = ResourceFlavor(c, "p5", pool=pool, tolerations=tolerations)
    LocalQueue(c, "small", cluster_queue=ClusterQueue(c, "small", flavors=[flavor]))
    raw_job(c, "untolerant", pods=1)  # its pods tolerate nothing
    objects = emitted(c, crds)
    assert objects["ResourceFlavor/p5"]["spec"].get("tolerations", []) == [t.manifest() for t in tolerations]
    plan = planned(c)["untolerant"]
    assert plan.verdict == verdict
    if verdict == "never":
        assert [r.code for r in plan.reasons] == ["KT445"] and "not tolerate" in plan.reasons[0].message


def test_a_queue_with_gpus_and_host_resources_in_separate_resource_groups(crds):
    c = cluster()
    p5_pool, cpu_pool = EfaNodePool(c, "p5", **P5), CpuNodePool(c, "cpu", **CPU)
    p5, cpu = ResourceFlavor(c, "p5", pool=p5_pool), ResourceFlavor(c, "cpu", pool=cpu_pool)
    host = ResourceFlavor(c, "host")  # no pool: CPU and memory of every node
    cq = ClusterQueue(c, "q", resource_groups=[
        ResourceGroup(resources=["nvidia.com/gpu", "vpc.amazonaws.com/efa", "hugepages-2Mi"], flavors=[p5, cpu]),
        ResourceGroup(resources=["cpu", "memory"], flavors=[host])],
        quotas={"host": {"cpu": "400", "memory": "4000Gi"}})
    queue = LocalQueue(c, "q", cluster_queue=cq)
    job(c, "fits", p5_pool, nodes=2, queue=queue)
    job(c, "too-much-cpu", p5_pool, nodes=3, queue=queue)  # 3 x 184 cpu is more than the host flavor's 400
    spec = emitted(c, crds)["ClusterQueue/q"]["spec"]
    assert [g["coveredResources"] for g in spec["resourceGroups"]] == [
        ["nvidia.com/gpu", "vpc.amazonaws.com/efa", "hugepages-2Mi"], ["cpu", "memory"]]
    assert spec["resourceGroups"][1]["flavors"] == [{"name": "host", "resources": [
        {"name": "cpu", "nominalQuota": "400"}, {"name": "memory", "nominalQuota": "4000Gi"}]}]
    # The cpu pool's flavor has no GPUs: its default quota of them is 0
    assert spec["resourceGroups"][0]["flavors"][1]["resources"][0] == {"name": "nvidia.com/gpu", "nominalQuota": "0"}
    assert emitted(c, crds)["ResourceFlavor/host"]["spec"] == {}
    [(code, path, message)] = found(c)
    assert (code, path) == ("KT441", "nodes") and "552 cpu in flavor host, which can give it at most 400" in message
    plans = planned(c)
    assert (plans["fits"].verdict, plans["fits"].flavor) == ("fits", "p5")
    assert plans["too-much-cpu"].verdict == "never"


@pytest.mark.parametrize(("props", "path", "words"), [
    ({"flavors": ["p5"], "resource_groups": [{"resources": ["cpu"], "flavors": ["cpu"]}]}, "flavors",
     "give either flavors"),
    ({}, "flavors", "needs flavors"),
    ({"resource_groups": [{"resources": ["cpu"], "flavors": ["p5"]}, {"resources": ["cpu"], "flavors": ["cpu"]}]},
     "resource_groups.1.resources", "cpu is covered by resource groups 0 and 1"),
    ({"resource_groups": [{"resources": ["cpu"], "flavors": ["p5"]}, {"resources": ["memory"], "flavors": ["p5"]}]},
     "resource_groups", "flavors name p5 more than once"),
    ({"resource_groups": [{"resources": ["cpu"], "flavors": ["p5"]}], "quotas": {"p5": {"memory": "1Gi"}}},
     "quotas.p5.memory", "flavor p5 is in resource group 0, which does not cover memory"),
    ({"resource_groups": [{"resources": ["cpu"], "flavors": ["host"]}]}, "quotas.host",
     "flavor host has no pool to take its default quotas from"),
])
def test_resource_groups_kueue_refuses(props, path, words):
    c = cluster()
    flavors = {"p5": ResourceFlavor(c, "p5", pool=EfaNodePool(c, "p5", **P5)),
               "cpu": ResourceFlavor(c, "cpu", pool=CpuNodePool(c, "cpu", **CPU)), "host": ResourceFlavor(c, "host")}

    def resolved(value: Any) -> Any:  # flavor names -> the flavors
        if isinstance(value, list):
            return [resolved(v) for v in value]
        return {k: [flavors[f] for f in v] if k == "flavors" else resolved(v) if k == "resource_groups" else v
                for k, v in value.items()} if isinstance(value, dict) else value

    problems = rejected(c, lambda: ClusterQueue(c, "q", **resolved(props)))
    assert [(p.code, p.path) for p in problems] == [("KT003", path)] and words in problems[0].message


# -- one verdict: patches and render steps are judged --------------------------------------------------------

def _small_queue() -> tuple[Cluster, Any, LocalQueue]:
    c = cluster()
    pool = EfaNodePool(c, "p5", **P5)
    cq = ClusterQueue(c, "small", flavors=[ResourceFlavor(c, "p5", pool=pool)],
                      quotas={"p5": {"nvidia.com/gpu": "16"}})
    return c, pool, LocalQueue(c, "small", cluster_queue=cq)


def test_a_patched_job_no_queue_can_hold_fails_synth_and_plan_agrees(tmp_path: Path):
    c, pool, queue = _small_queue()
    gpt = job(c, "gpt", pool, nodes=2, queue=queue)
    assert found(c) == []
    gpt.patch(JsonPatch.replace("/spec/trainer/numNodes", 4))
    [(code, path, message)] = found(c)
    assert (code, path) == ("KT441", "nodes") and "can never admit its 4 pods" in message
    assert planned(c)["gpt"].verdict == "never"
    with pytest.raises(DefinitionError) as raised:  # synth of the objects themselves refuses too
        synth(c.node.root, tmp_path / "dist", validate=False)
    assert [p.code for p in raised.value.problems] == ["KT441"] and not (tmp_path / "dist").exists()


def test_a_patch_that_makes_a_job_fit_synthesizes_and_plan_agrees(tmp_path: Path):
    c, pool, queue = _small_queue()
    gpt = job(c, "gpt", pool, nodes=4, queue=queue)
    gpt.patch(JsonPatch.replace("/spec/trainer/numNodes", 2))
    assert found(c) == []
    synth(c.node.root, tmp_path / "dist", validate=False)
    [plan] = plan_dist(tmp_path / "dist")[0]
    assert (plan.workload.job, plan.verdict) == ("gpt", "fits")


def test_a_render_step_or_a_cdk8s_object_that_no_queue_can_hold_fails_synth(tmp_path: Path):
    c, pool, queue = _small_queue()
    job(c, "gpt", pool, nodes=2, queue=queue)

    def widen(objects: dict[Path, dict[str, Any]]) -> None:
        for obj in objects.values():
            if obj["kind"] == "TrainJob":
                obj["spec"]["trainer"]["numNodes"] = 3

    add_render_step(c, widen)
    with pytest.raises(DefinitionError) as raised:
        synth(c.node.root, tmp_path / "dist", validate=False)
    [finding] = raised.value.findings
    assert (finding.where, finding.problem.code, finding.problem.path) == ("c/ml/gpt", "KT441", "nodes")

    c, pool, queue = _small_queue()
    raw_job(c, "raw", pods=3, tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}])
    assert found(c) == []  # the fleet's own checks never saw it
    with pytest.raises(DefinitionError) as raised:
        synth(c.node.root, tmp_path / "dist", validate=False)
    assert [(f.where, f.problem.code) for f in raised.value.findings] == [("c/ml/raw", "KT441")]


# -- pod sets of different shapes: an MPIJob's launcher and workers ----------------------------------------------

def test_an_nccl_tests_launcher_and_workers_are_admitted_as_two_pod_sets(crds):
    c = cluster()
    p5_pool = EfaNodePool(c, "p5", **P5)
    p5, host = ResourceFlavor(c, "p5", pool=p5_pool), ResourceFlavor(c, "host")
    split = ClusterQueue(c, "split", resource_groups=[
        ResourceGroup(resources=["nvidia.com/gpu", "vpc.amazonaws.com/efa", "hugepages-2Mi"], flavors=[p5]),
        ResourceGroup(resources=["cpu", "memory"], flavors=[host])], quotas={"host": {"cpu": "8", "memory": "256Gi"}})
    gpus_only = ClusterQueue(c, "gpus-only", flavors=[p5])
    NcclTest(c, "fits", image="nccl:1", instance_type="p5.48xlarge", nodes=2,
             launcher=LauncherResources(cpu="2", memory="4Gi"), queue=LocalQueue(c, "split", cluster_queue=split))
    NcclTest(c, "untolerated", image="nccl:1", instance_type="p5.48xlarge", nodes=2,
             queue=LocalQueue(c, "gpus-only", cluster_queue=gpus_only))
    objects = emitted(c, crds)
    mpijob = objects["MPIJob/fits"]
    assert mpijob["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "split"
    launcher = mpijob["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["resources"]
    assert launcher == {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"memory": "4Gi"}}
    # The launcher's pods tolerate no GPU taint: only the flavor of no pool takes them
    [(code, path, message)] = found(c)
    assert (code, path) == ("KT445", "queue") and "pod set launcher" in message and "not tolerate" in message
    plans = planned(c)
    assert [(p.workload.kind, [s.name for s in p.workload.pod_sets]) for p in plans.values()] == [
        ("MPIJob", ["launcher", "worker"])] * 2
    assert (plans["fits"].verdict, plans["untolerated"].verdict) == ("fits", "never")


def test_every_new_field_passes_the_shipped_kueue_schemas_and_cel_rules_at_synth(tmp_path: Path):
    c = cluster()
    p5_pool = EfaNodePool(c, "p5", **P5)
    p5 = ResourceFlavor(c, "p5", pool=p5_pool, tolerations=[Toleration(key="nvidia.com/gpu", operator="Exists")])
    host = ResourceFlavor(c, "host", tolerations=[Toleration(operator="Exists")])
    cq = ClusterQueue(c, "q", resource_groups=[
        ResourceGroup(resources=["nvidia.com/gpu", "vpc.amazonaws.com/efa", "hugepages-2Mi"], flavors=[p5]),
        ResourceGroup(resources=["cpu", "memory"], flavors=[host])], quotas={"host": {"cpu": "400", "memory": "4Ti"}},
        when_can_borrow="TryNextFlavor", when_can_preempt="TryNextFlavor", preference="BorrowingOverPreemption")
    queue = LocalQueue(c, "q", cluster_queue=cq)
    job(c, "gpt", p5_pool, nodes=2, queue=queue)
    NcclTest(c, "allreduce", image="nccl:1", instance_type="p5.48xlarge", nodes=2, queue=queue)
    assert found(c) == []
    written = synth(c.node.root, tmp_path / "dist")  # the shipped schemas, with the CRDs' CEL rules
    assert {path.name for path in written} >= {"ClusterQueue.q.yaml", "ResourceFlavor.host.yaml",
                                               "MPIJob.allreduce.yaml"}
    assert {p.workload.job: p.verdict for p in plan_dist(tmp_path / "dist")[0]} == {"gpt": "fits", "allreduce": "fits"}


def test_a_patch_that_breaks_the_namespaces_pod_security_level_is_reported():
    c = Cluster(App(), "c", kubernetes_version="1.33", namespaces=["ml"])
    PodSecurity(c, "pod-security", level="baseline")
    gpt = TrainingJob(c, "gpt", image="img:1", nodes=2, procs_per_node=1, target=PyTorchJob(),
                      resources=NodeResources(cpu="2", memory="4Gi"), workload=Command(command=["train.py"]))
    assert found(c) == []
    gpt.patch(JsonPatch.add("/spec/pytorchReplicaSpecs/Worker/template/spec/containers/0/securityContext",
                            {"privileged": True}))
    # Master and Worker share no template any more: the worker's is reported, once
    [(code, path, message)] = found(c)
    assert (code, path) == ("KT430", "pod.containers.0.securityContext.privileged") and "privileged" in message
