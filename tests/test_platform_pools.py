"""Karpenter node pools: objects valid against the CRDs, placement derived from the instance, pool rules."""

from __future__ import annotations

import pytest
from kubetrain.pipeline import fleet_errors
from kubetrain.platform.kueue_queues import ResourceFlavor
from kubetrain.platform.node_pools import CpuNodePool, EfaNodePool, pool_placement_problems
from platform_support import CPU, P5, cluster, codes, emitted, pools, rejected


def test_efa_and_cpu_pools_emit_valid_karpenter_objects(crds):
    c = cluster()
    pools(c)
    objects = emitted(c, crds)
    pool = objects["NodePool/p5"]["spec"]
    assert pool["template"]["spec"]["taints"] == [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    assert pool["disruption"] == {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "10m"}
    assert pool["limits"]["nvidia.com/gpu"] == "128"
    assert {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-west-2a"]} in \
        pool["template"]["spec"]["requirements"]
    node_class = objects["EC2NodeClass/p5"]["spec"]
    assert node_class["instanceStorePolicy"] == "RAID0"
    assert node_class["subnetSelectorTerms"] == [{"id": "subnet-0abc1234"}]
    assert node_class["securityGroupSelectorTerms"] == [{"id": "sg-0efa1234"}]
    assert "taints" not in objects["NodePool/cpu"]["spec"]["template"]["spec"]
    assert objects["NodePool/cpu"]["spec"]["disruption"]["consolidationPolicy"] == "WhenEmptyOrUnderutilized"
    assert codes(c) == []


def test_reserved_capacity_selects_its_reservations(crds):
    c = cluster()
    EfaNodePool(c, "p5r", **{**P5, "capacity_type": "reserved", "capacity_reservation_ids": ["cr-0123456789abcdef1"],
                             "reserved_nodes": 8, "placement_group": "p5-pg"})
    spec = emitted(c, crds)["EC2NodeClass/p5r"]["spec"]
    assert spec["capacityReservationSelectorTerms"] == [{"id": "cr-0123456789abcdef1"}]
    assert spec["placementGroupSelector"] == {"name": "p5-pg"}
    # KT407 breaking: reserved without a reservation
    [problem] = rejected(c, lambda: EfaNodePool(c, "bad", **{**P5, "capacity_type": "reserved"}))
    assert (problem.code, problem.path) == ("KT407", "capacity_reservation_ids") and "cr-" in problem.fix
    # and reservations on spot
    assert rejected(c, lambda: EfaNodePool(c, "bad2", **{**P5, "capacity_type": "spot",
                                                           "capacity_reservation_ids": ["cr-0123456789abcdef2"]}))

    # KT452: reserved_nodes belongs to a reserved pool, and its static nodes stay within it
    for i, (bad, path) in enumerate((({"capacity_type": "reserved", "capacity_reservation_ids": ["cr-0123456789abcdef2"],
                                       "reserved_nodes": 4, "static_nodes": 8}, "static_nodes"),
                                     ({"reserved_nodes": 4}, "reserved_nodes"))):
        assert [(p.code, p.path) for p in rejected(c, lambda: EfaNodePool(c, f"bad{i + 3}", **{**P5, **bad}))] == [
            ("KT452", path)]
    # KT449: a reserved pool that does not say how many instances its reservations hold is judged by max_nodes
    assert [code for code, _, _ in codes(c)] == ["KT407", "KT407", "KT452", "KT452"]
    unsized = EfaNodePool(c, "unsized", **{**P5, "capacity_type": "reserved",
                                           "capacity_reservation_ids": ["cr-0123456789abcdef2"]})
    assert unsized.emitted and [(code, path) for code, path, _ in codes(c)][-1] == ("KT449", "reserved_nodes")
    assert unsized.capacity_nodes == 16


def test_what_a_pool_gives_the_pods_placed_on_it():
    c = cluster()
    gpu, cpu = pools(c)
    assert gpu.node_selector() == {"karpenter.sh/nodepool": "p5", "topology.kubernetes.io/zone": "us-west-2a"}
    assert gpu.tolerations() == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert (gpu.huge_pages(), gpu.shm_size("1000Gi")) == ("5120Mi", "125Gi")  # an eighth of the pod's memory
    assert (gpu.instance_type.name, gpu.zone, gpu.name) == ("p5.48xlarge", "us-west-2a", "p5")
    assert cpu.tolerations() == [] and cpu.zone is None
    assert (cpu.huge_pages(), cpu.shm_size("8Gi")) == (None, None)


def test_a_pod_is_checked_against_its_pool():
    c = cluster()
    gpu, cpu = pools(c)
    tolerations = gpu.tolerations()
    fits = {"cpu": "180", "memory": "1500Gi", "nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32",
            "hugepages-2Mi": "5120Mi"}
    assert pool_placement_problems(gpu, fits, tolerations) == []
    assert pool_placement_problems(gpu, {**fits, "memory": "1800Gi"}, tolerations) == []  # apps/prod.py's
    # KT401: more memory (with huge pages) than a node allocates; more GPUs than it has
    too_big = pool_placement_problems(gpu, {**fits, "memory": "1890Gi", "nvidia.com/gpu": "16"},
                                      tolerations)
    assert [(p.code, p.path) for p in too_big] == [("KT401", "resources.memory"), ("KT401", "resources.nvidia.com/gpu")]
    assert all(p.fix for p in too_big)
    # KT402: no toleration of the GPU taint; KT403: no EFA on an EFA pool
    untolerated = pool_placement_problems(gpu, {"cpu": "8", "nvidia.com/gpu": "8"}, [])
    assert [(p.code, p.path) for p in untolerated] == [("KT403", "resources.vpc.amazonaws.com/efa"),
                                                       ("KT402", "tolerations")]
    # KT403: EFA on a pool without EFA
    assert [p.code for p in pool_placement_problems(cpu, {"cpu": "2", "vpc.amazonaws.com/efa": "1"}, [])] == ["KT403"]
    assert pool_placement_problems(cpu, {"cpu": "2", "memory": "8Gi"}, []) == []
    # A toleration of every taint (empty key, Exists) is a toleration
    assert pool_placement_problems(gpu, fits, [{"operator": "Exists"}]) == []


def test_pool_rules_have_codes_paths_and_fixes(crds):
    c = cluster()
    EfaNodePool(c, "spread", **{**P5, "zones": ["us-west-2a", "us-west-2b"]})                        # KT404
    EfaNodePool(c, "mixed", **{**P5, "instance_types": ["p5.48xlarge", "p5en.48xlarge"]})            # KT405
    EfaNodePool(c, "g5", **{**P5, "instance_types": ["g5.xlarge"]})                                  # KT406
    CpuNodePool(c, "gpus", **{**CPU, "instance_types": ["p5.48xlarge"]})                             # KT406
    EfaNodePool(c, "typo", **{**P5, "instance_types": ["p5.48xlarg"]})                               # KT406
    found = codes(c)
    assert [(code, path) for code, path, _ in found] == [
        ("KT404", "zones"), ("KT405", "instance_types"), ("KT406", "instance_types.0"),
        ("KT406", "instance_types.0"), ("KT406", "instance_types.0")]
    assert all(fix for _, _, fix in found)
    assert set(emitted(c, crds)) == {"Namespace/ml"}  # a pool with an error emits nothing


def test_bad_props_are_recorded_and_what_is_built_on_the_pool_is_not_checked(crds):
    c = cluster()
    pool = EfaNodePool(c, "p5", **{**P5, "max_nodes": 0, "consolidate_after": "soon", "zone": "us-west-2a"})
    assert pool.rejected
    assert {(p.code, p.path) for p in fleet_errors(c) and [f.problem for f in fleet_errors(c)]} == {
        ("KT003", "max_nodes"), ("KT003", "consolidate_after"), ("KT001", "zone")}
    # A flavor on the rejected pool is rejected in turn (KT011); the cluster's other pools go on.
    [problem] = rejected(c, lambda: ResourceFlavor(c, "p5", pool=pool))
    assert (problem.code, problem.path) == ("KT011", "pool") and "prod/nodepool/p5" in problem.message
    CpuNodePool(c, "cpu", **CPU)
    assert set(emitted(c, crds)) == {"Namespace/ml", "NodePool/cpu", "EC2NodeClass/cpu"}


def test_a_fleets_own_instance_type_makes_a_pool(crds):
    from kubetrain import App, Cluster
    from kubetrain.model.instances import InstanceType
    mine = InstanceType(name="p5.4xlarge", vcpus=16, memory_gib=256, accelerator_resource="nvidia.com/gpu",
                        accelerators=1, accelerator="H100", accelerator_memory_gib=80, efa_interfaces=1,
                        gpudirect_rdma=True, peak_bf16_flops=989e12)
    c = Cluster(App(), "prod", kubernetes_version="1.33", namespaces=["ml"], instance_types=[mine])
    pool = EfaNodePool(c, "small", **{**P5, "instance_types": ["p5.4xlarge"]})
    assert pool.instance_type is mine and pool.node_capacity()["vpc.amazonaws.com/efa"] == 1
    assert emitted(c, crds)["NodePool/small"]["spec"]["limits"]["nvidia.com/gpu"] == "16"
    assert codes(c) == []


def test_a_trainium_pool_asks_for_neuron_devices():
    c = cluster()
    trn = EfaNodePool(c, "trn2", **{**P5, "instance_types": ["trn2.48xlarge"]})
    capacity = trn.node_capacity()
    assert (capacity["aws.amazon.com/neuron"], capacity["vpc.amazonaws.com/efa"]) == (16, 16)
    assert trn.taints == [{"key": "aws.amazon.com/neuron", "effect": "NoSchedule"}]
    requests = {"cpu": "8", "nvidia.com/gpu": "1", "aws.amazon.com/neuron": "16", "vpc.amazonaws.com/efa": "16"}
    assert pool_placement_problems(trn, requests, trn.tolerations())[0].path == "resources.nvidia.com/gpu"


def test_a_pod_fits_a_mixed_cpu_pool_when_its_roomiest_type_holds_it():
    c = cluster()
    _, cpu = pools(c)  # m5.2xlarge (8 vCPU, 32 GiB) and m5.4xlarge (16 vCPU, 64 GiB)
    assert pool_placement_problems(cpu, {"cpu": "12", "memory": "48Gi"}, []) == []
    [problem] = pool_placement_problems(cpu, {"cpu": "16", "memory": "48Gi"}, [])
    assert (problem.code, problem.path) == ("KT401", "resources.cpu") and "m5.4xlarge" in problem.message


def test_two_pools_with_one_id_are_a_recorded_problem_and_the_rest_is_still_checked(crds):
    c = cluster()
    EfaNodePool(c, "p5", **P5)
    EfaNodePool(c, "p5", **P5)                                                 # KT010, recorded
    EfaNodePool(c, "spread", **{**P5, "zones": ["us-west-2a", "us-west-2b"]})  # still checked: KT404
    assert [(code, path) for code, path, _ in codes(c)] == [("KT010", "name"), ("KT404", "zones")]


@pytest.mark.parametrize(("huge_pages", "code"), [("5121Mi", "KT132"), ("5Gi", None), ("lots", "KT003")])
def test_a_pools_huge_pages_are_whole_2mi_pages(huge_pages, code):
    c = cluster()
    if code is None:
        assert EfaNodePool(c, "p5", **{**P5, "huge_pages": huge_pages}).huge_pages() == huge_pages
        return
    # the API server refuses a pod asking for part of a page
    [problem] = rejected(c, lambda: EfaNodePool(c, "p5", **{**P5, "huge_pages": huge_pages}))
    assert (problem.code, problem.path) == (code, "huge_pages") and problem.fix
