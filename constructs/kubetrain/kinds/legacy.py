"""The kinds not yet moved to a module of their own: their facts, gathered from the tables that held them.

Transitional: each kind moves to its operator's or API family's module, and this module goes when empty.
"""

from __future__ import annotations

from typing import Any

from kubetrain.admission.requests import count_of, pod_set, replica_pod_sets
from kubetrain.kinds.base import (
    DEFINITIONS,
    LOCAL_QUEUES,
    NAMESPACES,
    PLATFORM,
    QUEUES,
    WORKLOADS,
    CrdSource,
    IgnoredFields,
    Kind,
    Manifest,
    Reference,
    Run,
    Sibling,
    pod_facts,
    pod_template_fields,
    scheduling_queue,
)

KUEUE = "kueue.x-k8s.io"


def _spec(obj: Manifest) -> dict[str, Any]:
    return obj.get("spec") or {}


# -- Kueue ------------------------------------------------------------------------------------------------------

def _kueue_crd(name: str) -> CrdSource:
    return CrdSource(f"{KUEUE}_{name}.yaml", "kubernetes-sigs/kueue", "v0.19.2", (f"{KUEUE}/v1beta2",))


def _cluster_queue_references(obj: Manifest) -> list[Reference]:
    spec = _spec(obj)
    found = [Reference(KUEUE, "ResourceFlavor", None, flavor["name"])
             for group in spec.get("resourceGroups") or [] for flavor in group.get("flavors") or []]
    if spec.get("cohortName"):
        found.append(Reference(KUEUE, "Cohort", None, spec["cohortName"]))
    return found


def _cohort_references(obj: Manifest) -> list[Reference]:
    # Its quotas name flavors only as keys: Kueue needs no ResourceFlavor to hold a Cohort's quota.
    parent = _spec(obj).get("parentName")
    return [Reference(KUEUE, "Cohort", None, parent)] if parent else []


def _flavor_references(obj: Manifest) -> list[Reference]:
    topology = _spec(obj).get("topologyName")
    return [Reference(KUEUE, "Topology", None, topology)] if topology else []


def _local_queue_references(obj: Manifest) -> list[Reference]:
    return [Reference(KUEUE, "ClusterQueue", None, _spec(obj).get("clusterQueue", ""))]


KUEUE_KINDS = (
    Kind(f"{KUEUE}/v1beta2", "Topology", DEFINITIONS, crd=_kueue_crd("topologies")),
    Kind(f"{KUEUE}/v1beta2", "Cohort", DEFINITIONS, crd=_kueue_crd("cohorts"), references=_cohort_references),
    Kind(f"{KUEUE}/v1beta2", "WorkloadPriorityClass", DEFINITIONS, crd=_kueue_crd("workloadpriorityclasses")),
    Kind(f"{KUEUE}/v1beta2", "ResourceFlavor", PLATFORM, crd=_kueue_crd("resourceflavors"),
         references=_flavor_references),
    Kind(f"{KUEUE}/v1beta2", "ClusterQueue", QUEUES, crd=_kueue_crd("clusterqueues"), health="kueue_queue.lua",
         references=_cluster_queue_references),
    Kind(f"{KUEUE}/v1beta2", "LocalQueue", LOCAL_QUEUES, crd=_kueue_crd("localqueues"), health="kueue_queue.lua",
         references=_local_queue_references),
)


# -- Karpenter ----------------------------------------------------------------------------------------------------

def _node_pool_references(obj: Manifest) -> list[Reference]:
    ref = ((_spec(obj).get("template") or {}).get("spec") or {}).get("nodeClassRef") or {}
    return [Reference(ref.get("group", ""), ref.get("kind", ""), None, ref.get("name", ""))] if ref else []


KARPENTER_KINDS = (
    Kind("karpenter.sh/v1", "NodePool", PLATFORM, references=_node_pool_references,
         crd=CrdSource("karpenter.sh_nodepools.yaml", "aws/karpenter-provider-aws", "v1.9", ("karpenter.sh/v1",))),
    Kind("karpenter.k8s.aws/v1", "EC2NodeClass", DEFINITIONS,
         crd=CrdSource("karpenter.k8s.aws_ec2nodeclasses.yaml", "aws/karpenter-provider-aws", "v1.9",
                       ("karpenter.k8s.aws/v1",))),
)


# -- Volcano ------------------------------------------------------------------------------------------------------

def _pod_group_references(obj: Manifest) -> list[Reference]:
    queue = _spec(obj).get("queue")
    return [Reference("scheduling.volcano.sh", "Queue", None, queue)] if queue else []


def _volcano_crd(name: str) -> CrdSource:
    return CrdSource(f"scheduling.volcano.sh_{name}.yaml", "volcano-sh/volcano", "v1.15",
                     ("scheduling.volcano.sh/v1beta1",))


VOLCANO_KINDS = (
    Kind("scheduling.volcano.sh/v1beta1", "Queue", DEFINITIONS, crd=_volcano_crd("queues")),
    Kind("scheduling.volcano.sh/v1beta1", "PodGroup", WORKLOADS, crd=_volcano_crd("podgroups"),
         references=_pod_group_references),
)


# -- Prometheus operator and Argo CD ------------------------------------------------------------------------------

def _monitoring_crd(name: str) -> CrdSource:
    return CrdSource(f"monitoring.coreos.com_{name}.yaml", "prometheus-operator/prometheus-operator", "v0.86",
                     ("monitoring.coreos.com/v1",))


def _argocd_crd(name: str) -> CrdSource:
    return CrdSource(f"argoproj.io_{name}.yaml", "argoproj/argo-cd", "v3.6", ("argoproj.io/v1alpha1",))


OTHER_KINDS = (
    Kind("monitoring.coreos.com/v1", "ServiceMonitor", PLATFORM, crd=_monitoring_crd("servicemonitors")),
    Kind("monitoring.coreos.com/v1", "PodMonitor", PLATFORM, crd=_monitoring_crd("podmonitors")),
    Kind("argoproj.io/v1alpha1", "Application", None, crd=_argocd_crd("applications")),
    Kind("argoproj.io/v1alpha1", "ApplicationSet", None, crd=_argocd_crd("applicationsets")),
    Kind("argoproj.io/v1alpha1", "AppProject", None, crd=_argocd_crd("appprojects")),
)


# -- Kubernetes itself ------------------------------------------------------------------------------------------------

def _claim_references(obj: Manifest) -> list[Reference]:
    spec, found = _spec(obj), []
    if spec.get("volumeName"):
        found.append(Reference("", "PersistentVolume", None, spec["volumeName"]))
    if spec.get("storageClassName"):
        found.append(Reference("storage.k8s.io", "StorageClass", None, spec["storageClassName"]))
    return found


def _volume_references(obj: Manifest) -> list[Reference]:
    storage_class = _spec(obj).get("storageClassName")
    return [Reference("storage.k8s.io", "StorageClass", None, storage_class)] if storage_class else []


KUBERNETES_KINDS = (
    Kind("v1", "Namespace", NAMESPACES, name_format="DNS-1123 label"),
    Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition", NAMESPACES),
    Kind("storage.k8s.io/v1", "StorageClass", DEFINITIONS),
    Kind("scheduling.k8s.io/v1", "PriorityClass", DEFINITIONS),
    Kind("rbac.authorization.k8s.io/v1", "ClusterRole", DEFINITIONS),
    Kind("v1", "ServiceAccount", PLATFORM),
    Kind("v1", "ConfigMap", PLATFORM),
    Kind("v1", "Secret", PLATFORM),
    Kind("v1", "Service", PLATFORM, name_format="DNS-1035 label"),
    Kind("v1", "PersistentVolume", PLATFORM, references=_volume_references),
    Kind("v1", "ResourceQuota", PLATFORM),
    Kind("v1", "LimitRange", PLATFORM),
    Kind("rbac.authorization.k8s.io/v1", "Role", PLATFORM),
    Kind("rbac.authorization.k8s.io/v1", "RoleBinding", PLATFORM),
    Kind("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", PLATFORM),
    Kind("networking.k8s.io/v1", "NetworkPolicy", PLATFORM),
    Kind("apps/v1", "DaemonSet", PLATFORM),
    Kind("apps/v1", "Deployment", PLATFORM),
    Kind("v1", "PersistentVolumeClaim", WORKLOADS, references=_claim_references),
)

KINDS = (*KUEUE_KINDS,
         *KARPENTER_KINDS, *VOLCANO_KINDS, *OTHER_KINDS, *KUBERNETES_KINDS)
