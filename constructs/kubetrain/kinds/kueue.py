"""Kueue's own kinds (kueue.x-k8s.io/v1beta2, Kueue v0.19.2): the platform's queues, cohorts, flavors and
topologies, for delivery and checks (kubetrain.platform.kueue_queues builds them).

Waves: a Topology, a Cohort and a WorkloadPriorityClass are definitions others name; a ResourceFlavor names its
Topology; a ClusterQueue names its flavors and its cohort, a LocalQueue its ClusterQueue, and jobs name the
LocalQueue: each comes a wave after what it names. Both queues carry the health check that shows an inactive
queue (which admits nothing) as Degraded.
"""

from __future__ import annotations

from kubetrain.kinds.base import DEFINITIONS, LOCAL_QUEUES, PLATFORM, QUEUES, CrdSource, Kind, Manifest, Reference

KUEUE = "kueue.x-k8s.io"
API_VERSION = f"{KUEUE}/v1beta2"


def _kueue_crd(name: str) -> CrdSource:
    return CrdSource(f"{KUEUE}_{name}.yaml", "kubernetes-sigs/kueue", "v0.19.2", (API_VERSION,))


def _cluster_queue_references(obj: Manifest) -> list[Reference]:
    spec = obj.get("spec") or {}
    found = [Reference(KUEUE, "ResourceFlavor", None, flavor["name"])
             for group in spec.get("resourceGroups") or [] for flavor in group.get("flavors") or []]
    if spec.get("cohortName"):
        found.append(Reference(KUEUE, "Cohort", None, spec["cohortName"]))
    return found


def _cohort_references(obj: Manifest) -> list[Reference]:
    # Its quotas name flavors only as keys: Kueue needs no ResourceFlavor to hold a Cohort's quota.
    parent = (obj.get("spec") or {}).get("parentName")
    return [Reference(KUEUE, "Cohort", None, parent)] if parent else []


def _flavor_references(obj: Manifest) -> list[Reference]:
    topology = (obj.get("spec") or {}).get("topologyName")
    return [Reference(KUEUE, "Topology", None, topology)] if topology else []


def _local_queue_references(obj: Manifest) -> list[Reference]:
    return [Reference(KUEUE, "ClusterQueue", None, (obj.get("spec") or {}).get("clusterQueue", ""))]


KINDS = (
    Kind(API_VERSION, "Topology", DEFINITIONS, crd=_kueue_crd("topologies")),
    Kind(API_VERSION, "Cohort", DEFINITIONS, crd=_kueue_crd("cohorts"), references=_cohort_references),
    Kind(API_VERSION, "WorkloadPriorityClass", DEFINITIONS, crd=_kueue_crd("workloadpriorityclasses")),
    Kind(API_VERSION, "ResourceFlavor", PLATFORM, crd=_kueue_crd("resourceflavors"),
         references=_flavor_references),
    Kind(API_VERSION, "ClusterQueue", QUEUES, crd=_kueue_crd("clusterqueues"), health="kueue_queue.lua",
         references=_cluster_queue_references),
    Kind(API_VERSION, "LocalQueue", LOCAL_QUEUES, crd=_kueue_crd("localqueues"), health="kueue_queue.lua",
         references=_local_queue_references),
)
