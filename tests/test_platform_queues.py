"""Kueue with topology-aware scheduling, Volcano, and one queue system per cluster."""

from __future__ import annotations

from kubetrain.pipeline import fleet_errors
from kubetrain.platform.kueue_queues import (
    ClusterQueue,
    Cohort,
    LocalQueue,
    Quota,
    ResourceFlavor,
    Topology,
)
from kubetrain.platform.node_pools import CpuNodePool, EfaNodePool
from kubetrain.platform.queues import TopologyPlacement
from kubetrain.platform.volcano_queues import VolcanoQueue
from platform_support import CPU, P5, cluster, codes, emitted, rejected

LAYER_3 = "topology.k8s.aws/network-node-layer-3"


def kueue(c, **queue):
    # Topology-aware placement needs nodes that exist: the GPU pool keeps 4 up (KT423)
    gpu, cpu = EfaNodePool(c, "p5", **P5, static_nodes=4), CpuNodePool(c, "cpu", **CPU)
    topology = Topology(c, "eks-network")
    flavors = [ResourceFlavor(c, "p5", pool=gpu, topology=topology), ResourceFlavor(c, "cpu", pool=cpu)]
    cq = ClusterQueue(c, "training", flavors=flavors, **queue)
    return LocalQueue(c, "training", cluster_queue=cq)


def test_kueue_objects_are_valid_and_cover_every_resource_the_pools_give(crds):
    c = cluster()
    queue = kueue(c, quotas={"p5": {"nvidia.com/gpu": "64"}}, cohort="org")
    objects = emitted(c, crds)
    assert [lv["nodeLabel"] for lv in objects["Topology/eks-network"]["spec"]["levels"]] == [
        "topology.k8s.aws/network-node-layer-1", "topology.k8s.aws/network-node-layer-2", LAYER_3,
        "kubernetes.io/hostname"]
    flavor = objects["ResourceFlavor/p5"]["spec"]
    assert flavor == {"nodeLabels": {"karpenter.sh/nodepool": "p5", "topology.kubernetes.io/zone": "us-west-2a"},
                      "nodeTaints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}], "topologyName": "eks-network"}
    [group] = objects["ClusterQueue/training"]["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu", "vpc.amazonaws.com/efa", "hugepages-2Mi"]
    quotas = {f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]} for f in group["flavors"]}
    # Quotas default to the pool at its most nodes: its 4 static nodes (a static pool keeps exactly those).
    assert quotas["p5"]["nvidia.com/gpu"] == "64" and quotas["p5"]["vpc.amazonaws.com/efa"] == "128"
    assert quotas["cpu"]["nvidia.com/gpu"] == "0"
    assert objects["ClusterQueue/training"]["spec"]["cohortName"] == "org"
    assert objects["NodePool/p5"]["spec"]["replicas"] == 4
    assert objects["NodePool/p5"]["spec"]["limits"] == {"nodes": "16"}
    assert objects["LocalQueue/training"]["metadata"]["namespace"] == "ml"
    assert (queue.job_labels(), queue.scheduler_name) == ({"kueue.x-k8s.io/queue-name": "training"}, None)
    assert queue.pod_annotations(TopologyPlacement(level=LAYER_3)) == {
        "kueue.x-k8s.io/podset-required-topology": LAYER_3}
    assert queue.pod_annotations(TopologyPlacement(level=LAYER_3, mode="preferred")) == {
        "kueue.x-k8s.io/podset-preferred-topology": LAYER_3}
    [(code, path, fix)] = codes(c)  # a cohort by name is one defined outside the fleet
    assert (code, path) == ("KT450", "cohort") and "Cohort(cluster" in fix


def test_placement_must_name_a_level_of_the_flavors_topology():
    c = cluster()
    queue = kueue(c)
    assert queue.placement_problems(TopologyPlacement(level=LAYER_3)) == []
    [problem] = queue.placement_problems(TopologyPlacement(level="topology.kubernetes.io/rack"))
    assert (problem.code, problem.path) == ("KT421", "placement.level") and LAYER_3 in problem.fix
    gpu = c.node.find_child("nodepool:p5")
    bare = LocalQueue(c, "bare", cluster_queue=ClusterQueue(c, "bare", flavors=[ResourceFlavor(c, "plain", pool=gpu)]))
    assert [p.code for p in bare.placement_problems(TopologyPlacement(level=LAYER_3))] == ["KT421"]


def test_a_topology_on_a_pool_that_scales_from_zero_is_a_warning():
    c = cluster()
    gpu = EfaNodePool(c, "p5", **P5)
    ResourceFlavor(c, "p5", pool=gpu, topology=Topology(c, "eks-network"))
    [(code, path, fix)] = codes(c)
    assert (code, path) == ("KT423", "topology") and "static_nodes" in fix
    assert fleet_errors(c) == []  # a warning: the flavor is still emitted


def test_one_queue_system_per_cluster(crds):
    c = cluster()
    kueue(c)
    VolcanoQueue(c, "gangs")
    [(code, path, fix)] = codes(c)
    assert (code, path) == ("KT420", "") and "one queue system" in fix
    assert "Queue/gangs" not in emitted(c, crds)


def test_volcano_queue_gives_jobs_its_scheduler_and_pod_group(crds):
    c = cluster()
    queue = VolcanoQueue(c, "training", capability={"nvidia.com/gpu": "128"})
    group = queue.pod_group("gpt", "ml", min_member=4, min_resources={"nvidia.com/gpu": "32"})
    objects = emitted(c, crds)
    assert objects["Queue/training"]["spec"] == {"weight": 1, "reclaimable": False,
                                                  "capability": {"nvidia.com/gpu": "128"}}
    from kubetrain.model.manifests import Manifest
    from kubetrain.validation.validate import Schemas, validate_objects
    assert validate_objects([Manifest("podgroup", group)], Schemas([crds]), "1.33") == []
    assert queue.scheduler_name == "volcano" and queue.job_labels() == {}
    assert queue.scheduling_policy(4) == {"queue": "training", "minAvailable": 4}
    assert queue.group_annotation("gpt") == {"scheduling.k8s.io/group-name": "gpt"}
    assert [p.code for p in queue.placement_problems(TopologyPlacement(level=LAYER_3))] == ["KT421"]


def test_quotas_name_the_queues_flavors():
    c = cluster()
    kueue(c, quotas={"p4d": {"nvidia.com/gpu": "8"}})
    assert [(code, path) for code, path, _ in codes(c)] == [("KT003", "quotas"), ("KT011", "cluster_queue")]


def test_cohorts_quota_limits_and_fair_sharing_are_valid_kueue_objects(crds):
    c = cluster()
    gpu = EfaNodePool(c, "p5", **P5, static_nodes=16)
    flavor = ResourceFlavor(c, "p5", pool=gpu, topology=Topology(c, "eks-network"))
    root = Cohort(c, "org", flavors=[flavor], quotas={"p5": {"nvidia.com/gpu": 16}}, fair_sharing_weight="2")
    team = Cohort(c, "team", parent=root, flavors=[flavor],
                  quotas={"p5": {"nvidia.com/gpu": Quota(nominal="0", lending_limit="0", borrowing_limit="32")}})
    ClusterQueue(c, "training", flavors=[flavor], cohort=team, when_can_borrow="TryNextFlavor",
                 fair_sharing_weight="0.5", quotas={"p5": {"nvidia.com/gpu": Quota(nominal="64", borrowing_limit="16",
                                                                                  lending_limit="32")}})
    objects = emitted(c, crds)
    assert objects["Cohort/org"]["spec"] == {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
        {"name": "p5", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "16"}]}]}], "fairSharing": {"weight": "2"}}
    assert objects["Cohort/team"]["spec"]["parentName"] == "org"
    assert objects["Cohort/team"]["spec"]["resourceGroups"][0]["flavors"][0]["resources"] == [
        {"name": "nvidia.com/gpu", "nominalQuota": "0", "borrowingLimit": "32", "lendingLimit": "0"}]
    spec = objects["ClusterQueue/training"]["spec"]
    assert (spec["cohortName"], spec["flavorFungibility"], spec["fairSharing"]) == (
        "team", {"whenCanBorrow": "TryNextFlavor"}, {"weight": "0.5"})
    gpus = next(r for r in spec["resourceGroups"][0]["flavors"][0]["resources"] if r["name"] == "nvidia.com/gpu")
    assert gpus == {"name": "nvidia.com/gpu", "nominalQuota": "64", "borrowingLimit": "16", "lendingLimit": "32"}
    assert codes(c) == []  # every cohort is an object of the fleet
    outside = Cohort(c, "lab", parent="corp")
    assert outside.emitted and codes(c) == [("KT450", "parent", OUTSIDE_FIX)]
    assert [(p.code, p.path) for p in rejected(c, lambda: ClusterQueue(c, "bad", flavors=[flavor], cohort=gpu))] == [
        ("KT003", "cohort")]


OUTSIDE_FIX = "define the cohort in the fleet (Cohort(cluster, ...)) and pass the object, if it is yours"
