"""A job placed on platform objects: its pool, its storage and its queue decide the pod, and the rules check it."""

from __future__ import annotations

from typing import Any

from kubetrain import (
    App,
    ClaimVolume,
    Cluster,
    ClusterQueue,
    EfaNodePool,
    JsonPatch,
    LocalQueue,
    PyTorchJob,
    ResourceFlavor,
    S3Bucket,
    Topology,
    TopologyPlacement,
    TrainingJob,
    TrainJob,
)
from kubetrain.pipeline import check_objects, fleet_errors, fleet_findings, render_objects

RUN = {"batch": {"global_size": 16, "micro_size": 1}, "max_steps": 10, "checkpoint": {"dir": "/ckpt/run"}}


def fleet(**job: Any) -> tuple[dict[str, dict], list[tuple[str, str]]]:
    return synthesized(queued_job(**job))


def queued_job(**job: Any) -> TrainingJob:
    app = App()
    cluster = Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"])
    pool = EfaNodePool(cluster, "p5", instance_types=["p5.48xlarge"], zones=["us-west-2a"], subnet_ids=["subnet-00000001"],
                       security_group_ids=["sg-00000001"], role="NodeRole", max_nodes=4, static_nodes=4)
    flavor = ResourceFlavor(cluster, "p5", pool=pool, topology=Topology(cluster, "net"))
    queue = LocalQueue(cluster, "training", namespace="ml", cluster_queue=ClusterQueue(cluster, "q", flavors=[flavor]))
    bucket = S3Bucket(cluster, "bucket", namespace="ml", bucket_name="corp-data", region="us-west-2")
    props = {"image": "img:1", "nodes": 2, "procs_per_node": 8, "pool": pool, "queue": queue, "target": PyTorchJob(),
             "resources": {"cpu": "96", "memory": "1000Gi", "accelerators": 8, "efa": 32},
             "volumes": [{"name": "ckpt", "claim": "ckpt", "mount_path": "/ckpt"}],
             "workload": {"kind": "trainer", "run": RUN}}
    job = {key: (bucket if value == "BUCKET" else value) for key, value in job.items()}
    if job.pop("bucket_checkpoints", False):
        job["volumes"] = [ClaimVolume(name="ckpt", claim=bucket, mount_path="/ckpt")]
    return TrainingJob(cluster, "job", {**props, **job})


def synthesized(job: TrainingJob) -> tuple[dict[str, dict], list[tuple[str, str]]]:
    app = job.node.root
    found = fleet_findings(app)
    if [f for f in found if f.severity == "error"]:
        return {}, [(f.problem.code, f.problem.path) for f in [f for f in found if f.severity == "error"]]
    objects = render_objects(app)
    check_objects(objects)
    return {str(path): obj for path, obj in objects.items()}, []


def test_a_queued_job_leaves_suspend_to_kueue():
    """KT422 where suspend can come from: a patch of a job Kueue queues, checked on the patched object, where its
    kind keeps suspend."""
    for target, suspend in ((PyTorchJob(), "/spec/runPolicy/suspend"), (TrainJob(), "/spec/suspend")):
        job = queued_job(target=target)
        job.patch(JsonPatch.add(suspend, False))
        assert synthesized(job)[1] == [("KT422", suspend[1:].replace("/", "."))]
    job = queued_job(queue=None)
    job.patch(JsonPatch.add("/spec/runPolicy/suspend", True))  # not queued: suspend is the user's
    assert synthesized(job)[1] == []


def test_the_pool_and_queue_decide_where_and_when_the_pods_run():
    objects, problems = fleet(placement=TopologyPlacement(level="topology.k8s.aws/network-node-layer-3"))
    assert not problems
    job = objects["c/ml/PyTorchJob.job.yaml"]
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "training"
    template = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]
    assert "kueue.x-k8s.io/queue-name" not in template["metadata"]["labels"], "Kueue admits the job, not its pods"
    assert template["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] == \
        "topology.k8s.aws/network-node-layer-3"
    assert template["spec"]["nodeSelector"] == {"karpenter.sh/nodepool": "p5", "topology.kubernetes.io/zone": "us-west-2a"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in template["spec"]["tolerations"]
    assert "suspend" not in job["spec"].get("runPolicy", {}), "Kueue owns suspend"


def test_a_job_on_a_pool_gets_its_accelerators_efa_huge_pages_shm_and_caches_from_the_pool():
    objects, problems = fleet(resources={"cpu": "96", "memory": "1000Gi"})  # no counts: the pool decides
    assert not problems
    spec = objects["c/ml/PyTorchJob.job.yaml"]["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    [container] = spec["containers"]
    assert container["resources"]["limits"] == {"memory": "1000Gi", "nvidia.com/gpu": "8",
                                                "vpc.amazonaws.com/efa": "32", "hugepages-2Mi": "5120Mi"}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["shm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "125Gi"}  # the pool's eighth
    assert volumes["triton-cache"] == {"name": "triton-cache", "emptyDir": {}}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["TRITON_CACHE_DIR"] == "/var/cache/triton"
    assert {"name": "triton-cache", "mountPath": "/var/cache/triton"} in container["volumeMounts"]
    assert env["FI_PROVIDER"] == "efa" and env["NCCL_SOCKET_IFNAME"].startswith("^")  # no profile: the safe set
    # Set a count only to deviate, and the rules judge it: half the GPUs is KT104 against 8 ranks.
    assert fleet(resources={"cpu": "96", "memory": "1000Gi", "accelerators": 4})[1] == [("KT104", "procs_per_node")]
    # The pool says where the pods run; an instance type beside it is a contradiction.
    assert fleet(instance_type="p4d.24xlarge")[1] == [("KT003", "instance_type")]


def test_pod_security_checks_jobs_whatever_the_order_of_definition():
    from kubetrain import NcclProfile, PodSecurity

    def findings(security_first: bool) -> list[tuple[str, str]]:
        app = App()
        cluster = Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml", "lab"])
        if security_first:
            PodSecurity(cluster, namespaces=["ml"])
        job = {"image": "img:1", "nodes": 1, "procs_per_node": 1, "resources": {"cpu": "2", "memory": "4Gi"},
               "workload": {"kind": "command", "command": ["train.py"]}}
        TrainingJob(cluster, "seed-style", {**job, "nccl": NcclProfile(aws_ofi_nccl="1.14.0", nccl="2.26.2",
                                                                       host_network=True)})
        TrainingJob(cluster, "own-choice", {**job, "pod": {"host_network": True}})
        TrainingJob(cluster, "lab", {**job, "namespace": "lab", "pod": {"host_network": True}})  # not labelled
        TrainingJob(cluster, "plain", job)
        if not security_first:
            PodSecurity(cluster, namespaces=["ml"])
        return [(f.where, f.problem.code, f.problem.path) for f in fleet_findings(app)]

    expected = [("c/ml/seed-style", "KT430", "nccl.host_network"), ("c/ml/own-choice", "KT430", "pod.host_network")]
    assert findings(security_first=True) == expected
    assert findings(security_first=False) == expected


def test_the_rules_check_the_job_against_its_platform():
    # The pool's finding names the field the user wrote, once (not KT128 beside it).
    found = fleet(resources={"cpu": "96", "memory": "1000Gi", "efa": 0})[1]
    assert ("KT403", "resources.efa") in found and "KT128" not in {code for code, _ in found}
    assert ("KT401", "resources.memory") in fleet(resources={"cpu": "191", "memory": "2000Gi", "accelerators": 8,
                                                      "efa": 32})[1]
    assert ("KT412", "workload.run.checkpoint.dir") in fleet(bucket_checkpoints=True)[1]
    assert ("KT421", "placement") in fleet(queue=None, placement=TopologyPlacement(level="kubernetes.io/hostname"))[1]


def test_the_nccl_environment_comes_from_the_images_versions():
    from kubetrain import NcclProfile

    def env(profile: NcclProfile) -> dict[str, str]:
        objects, problems = fleet(nccl=profile)
        assert not problems
        container = objects["c/ml/PyTorchJob.job.yaml"]["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"][
            "containers"][0]
        return {e["name"]: e.get("value") for e in container["env"]}

    new, old = env(NcclProfile(aws_ofi_nccl="1.14.0", nccl="2.26.2")), env(NcclProfile(aws_ofi_nccl="1.5.0",
                                                                                          nccl="2.18.1"))
    assert new["NCCL_TUNER_PLUGIN"] == "libnccl-ofi-tuner.so" and "FI_PROVIDER" not in new
    assert old["FI_PROVIDER"] == "efa" and old["NCCL_NVLS_ENABLE"] == "0" and "NCCL_TUNER_PLUGIN" not in old


def test_a_volcano_queue_gangs_the_pods_through_the_operator():
    from kubetrain import VolcanoQueue

    app = App()
    cluster = Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"])
    TrainingJob(cluster, "job", {"image": "img:1", "nodes": 3, "procs_per_node": 1, "queue": VolcanoQueue(
        cluster, "research"), "resources": {"cpu": "2", "memory": "4Gi"}, "target": PyTorchJob(),
        "workload": {"kind": "command", "command": ["train.py"]}})
    assert not fleet_errors(app)
    objects = render_objects(app)
    check_objects(objects)
    job = objects[next(p for p in objects if p.name == "PyTorchJob.job.yaml")]
    assert job["spec"]["runPolicy"]["schedulingPolicy"] == {"queue": "research", "minAvailable": 3}
    assert job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["schedulerName"] == "volcano"
