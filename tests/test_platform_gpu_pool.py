"""A GPU pool without EFA (g4dn, g5, g6, g6e: the Training Operator guides' pool), its jobs, DCGM, queues and cost."""

from __future__ import annotations

from typing import Any

from kubetrain import (
    App,
    Cluster,
    ClusterQueue,
    DcgmExporter,
    GpuNodePool,
    LocalQueue,
    ResourceFlavor,
    TrainingJob,
)
from kubetrain.model.instances import BUILTIN_CATALOG
from kubetrain.pipeline import check_objects, fleet_findings, render_objects
from platform_support import cluster, codes, emitted, pools

G5 = {"instance_types": ["g5.12xlarge"], "zones": ["us-west-2a", "us-west-2b"],
      "subnet_ids": ["subnet-0abc1234", "subnet-0def5678"], "security_group_ids": ["sg-0c0de123"],
      "role": "KarpenterNodeRole-prod", "max_nodes": 4}
RUN = {"batch": {"global_size": 64, "micro_size": 1}, "max_steps": 10, "checkpoint": {"dir": "/ckpt/run"}}


def job_on_g5(**job: Any) -> tuple[dict[str, dict], list[tuple[str, str]]]:
    app = App()
    c = Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"])
    pool = GpuNodePool(c, "g5", **G5)
    queue = LocalQueue(c, "gpu", namespace="ml",
                       cluster_queue=ClusterQueue(c, "gpu", flavors=[ResourceFlavor(c, "g5", pool=pool)]))
    props = {"image": "img:1", "nodes": 2, "procs_per_node": 4, "pool": pool, "queue": queue,
             "resources": {"cpu": "40", "memory": "160Gi"},
             "volumes": [{"name": "ckpt", "claim": "ckpt", "mount_path": "/ckpt"}],
             "workload": {"kind": "trainer", "run": RUN}}
    TrainingJob(c, "job", {**props, **job})
    found = fleet_findings(app)
    if [f for f in found if f.severity == "error"]:
        return {}, [(f.problem.code, f.problem.path) for f in [f for f in found if f.severity == "error"]]
    objects = render_objects(app)
    check_objects(objects)
    return {str(path): obj for path, obj in objects.items()}, []


def test_a_job_on_a_gpu_pool_gets_every_gpu_and_the_taints_toleration_and_no_efa(crds):
    objects, problems = job_on_g5()
    assert problems == []
    runtime = objects["c/ml/TrainingRuntime.job-runtime.yaml"]["spec"]["template"]["spec"]["replicatedJobs"][0]
    spec = runtime["template"]["spec"]["template"]["spec"]
    [container] = spec["containers"]
    # g5.12xlarge has an EFA interface; the pool attaches none, so the pod asks for none and gets no huge pages.
    assert container["resources"]["limits"] == {"memory": "160Gi", "nvidia.com/gpu": "4"}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert not {"FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "NCCL_SOCKET_IFNAME"} & set(env)
    assert env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "3" and env["TRITON_CACHE_DIR"] == "/var/cache/triton"
    assert spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert spec["nodeSelector"] == {"karpenter.sh/nodepool": "g5"}  # two zones: no zone pinned
    assert {v["name"]: v for v in spec["volumes"]}["shm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "20Gi"}
    pool = objects["c/_cluster/NodePool.g5.yaml"]["spec"]
    assert pool["template"]["spec"]["taints"] == [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    assert pool["disruption"]["consolidationPolicy"] == "WhenEmpty"
    assert pool["limits"]["nvidia.com/gpu"] == "16"
    assert objects["c/_cluster/EC2NodeClass.g5.yaml"]["spec"]["instanceStorePolicy"] == "RAID0"
    # Kueue's ClusterQueue covers what the pods request: GPUs, no EFA.
    [group] = objects["c/_cluster/ClusterQueue.gpu.yaml"]["spec"]["resourceGroups"]
    assert "nvidia.com/gpu" in group["coveredResources"] and "vpc.amazonaws.com/efa" not in group["coveredResources"]


def test_the_pool_judges_what_a_job_asks_of_it():
    assert ("KT403", "resources.efa") in job_on_g5(resources={"cpu": "40", "memory": "160Gi", "efa": 1})[1]
    assert ("KT401", "resources.accelerators") in job_on_g5(procs_per_node=8, resources={
        "cpu": "40", "memory": "160Gi", "accelerators": 8})[1]
    assert ("KT401", "resources.memory") in job_on_g5(resources={"cpu": "40", "memory": "190Gi"})[1]
    # Not enough GPUs in the pool for the job: 4 nodes at most, 8 wanted.
    assert ("KT440", "nodes") in job_on_g5(nodes=8)[1]


def test_gpu_pool_types_and_shapes_are_checked(crds):
    c = cluster()
    GpuNodePool(c, "mixed", **{**G5, "instance_types": ["g5.12xlarge", "g5.xlarge"]})
    GpuNodePool(c, "neuron", **{**G5, "instance_types": ["trn1.32xlarge"]})
    GpuNodePool(c, "cpu", **{**G5, "instance_types": ["m5.xlarge"]})
    GpuNodePool(c, "p5", **{**G5, "instance_types": ["p5.48xlarge"]})  # works, but pays for EFA it never uses
    found = [(f.where, f.problem.code, f.problem.path) for f in fleet_findings(c)]
    assert found == [("prod/nodepool/mixed", "KT405", "instance_types"),
                     ("prod/nodepool/neuron", "KT406", "instance_types.0"),
                     ("prod/nodepool/cpu", "KT406", "instance_types.0"),
                     ("prod/nodepool/p5", "KT433", "instance_types.0")]
    assert "NodePool/p5" in emitted(c, crds) and "NodePool/mixed" not in emitted(c, crds)
    # The other pools send each kind of type to the pool made for it.
    c = cluster()
    from kubetrain import CpuNodePool, EfaNodePool
    EfaNodePool(c, "g5", **{**G5, "instance_types": ["g5.xlarge"], "zones": ["us-west-2a"],
                            "subnet_ids": ["subnet-0abc1234"]})
    CpuNodePool(c, "g6", **{**G5, "instance_types": ["g6.xlarge"]})
    assert [(f.problem.code, f.problem.message) for f in fleet_findings(c) if f.problem.code == "KT406"] == [
        ("KT406", "g5.xlarge has no EFA interfaces: use a GpuNodePool"),
        ("KT406", "g6.xlarge has accelerators: use a GpuNodePool (or an EfaNodePool)")]


def test_dcgm_exporter_covers_gpu_pools_with_and_without_efa(crds):
    c = cluster()
    efa, cpu = pools(c)
    gpu = GpuNodePool(c, "g6", **{**G5, "instance_types": ["g6.xlarge", "g6.2xlarge"], "zones": ["us-east-1a"],
                                  "subnet_ids": ["subnet-0abc1234"]})  # priced in us-east-1 (Karpenter's table)
    DcgmExporter(c, "dcgm-exporter", pools=[efa, gpu])
    pod = emitted(c, crds)["DaemonSet/dcgm-exporter"]["spec"]["template"]["spec"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0]["values"] == ["g6", "p5"]
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    DcgmExporter(c, "cpu-dcgm", namespace="cpu-monitoring", pools=[cpu])
    assert [code for code, _, _ in codes(c)] == ["KT432"]


def test_g6_is_in_the_catalog_and_priced():
    from kubetrain.cost.prices import node_price

    g6 = BUILTIN_CATALOG.get("g6.48xlarge")
    assert (g6.vcpus, g6.memory_gib, g6.accelerators, g6.accelerator, g6.accelerator_memory_gib,
            g6.efa_interfaces) == (192, 768, 8, "L4", 24, 1)
    assert BUILTIN_CATALOG.get("g6.xlarge").efa_interfaces == 0 and g6.peak_bf16_flops == 121e12
    assert node_price(["g6.xlarge"], "us-east-1", "on-demand", None).usd == 0.8048
