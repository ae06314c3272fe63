"""Sync waves: the order in which Argo CD applies a cluster's objects, by API group and kind.

Argo CD applies one wave, waits until its objects are healthy, then applies the next. So whatever an
object needs at admission or to become useful comes in an earlier wave: namespaces first, then
cluster-wide definitions (storage classes, node classes, Kueue topologies and flavors, training
runtimes), then queues, then the workloads. Two kinds break the pattern on purpose:

- PersistentVolumeClaims go in the jobs' wave: a claim on a `WaitForFirstConsumer` storage class stays
  Pending (Progressing) until a pod uses it, so a claim in an earlier wave would hold the sync forever.
- ConfigMaps, Secrets and Services come before the jobs that mount or address them, though a pod
  would only wait for them: a job then never starts against a missing config.

Objects reference others (`references`): the offline sync check (`plan.py`) uses that to prove every
reference points at the same or an earlier wave, and strictly earlier where admission checks it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

WAVE_ANNOTATION = "argocd.argoproj.io/sync-wave"

# (API group, kind) -> wave. "" is the core group.
NAMESPACES, DEFINITIONS, PLATFORM, QUEUES, LOCAL_QUEUES, WORKLOADS = 0, 1, 2, 3, 4, 5
WAVES: dict[tuple[str, str], int] = {
    ("", "Namespace"): NAMESPACES,
    ("apiextensions.k8s.io", "CustomResourceDefinition"): NAMESPACES,
    # Cluster-wide definitions that others name.
    ("storage.k8s.io", "StorageClass"): DEFINITIONS,
    ("scheduling.k8s.io", "PriorityClass"): DEFINITIONS,
    ("karpenter.k8s.aws", "EC2NodeClass"): DEFINITIONS,
    ("kueue.x-k8s.io", "Topology"): DEFINITIONS,
    ("kueue.x-k8s.io", "Cohort"): DEFINITIONS,
    ("kueue.x-k8s.io", "WorkloadPriorityClass"): DEFINITIONS,
    ("scheduling.volcano.sh", "Queue"): DEFINITIONS,
    ("rbac.authorization.k8s.io", "ClusterRole"): DEFINITIONS,
    # Namespaced configuration and cluster objects built on the definitions.
    ("", "ServiceAccount"): PLATFORM,
    ("", "ConfigMap"): PLATFORM,
    ("", "Secret"): PLATFORM,
    ("", "Service"): PLATFORM,
    ("", "PersistentVolume"): PLATFORM,
    ("", "ResourceQuota"): PLATFORM,
    ("", "LimitRange"): PLATFORM,
    ("rbac.authorization.k8s.io", "Role"): PLATFORM,
    ("rbac.authorization.k8s.io", "RoleBinding"): PLATFORM,
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): PLATFORM,
    ("networking.k8s.io", "NetworkPolicy"): PLATFORM,
    ("karpenter.sh", "NodePool"): PLATFORM,
    ("kueue.x-k8s.io", "ResourceFlavor"): PLATFORM,
    ("trainer.kubeflow.org", "ClusterTrainingRuntime"): PLATFORM,
    ("trainer.kubeflow.org", "TrainingRuntime"): PLATFORM,
    ("apps", "DaemonSet"): PLATFORM,
    ("apps", "Deployment"): PLATFORM,
    ("monitoring.coreos.com", "ServiceMonitor"): PLATFORM,
    ("monitoring.coreos.com", "PodMonitor"): PLATFORM,
    ("kueue.x-k8s.io", "ClusterQueue"): QUEUES,
    ("kueue.x-k8s.io", "LocalQueue"): LOCAL_QUEUES,
    # The workloads, and what must be created with them.
    ("", "PersistentVolumeClaim"): WORKLOADS,
    ("scheduling.volcano.sh", "PodGroup"): WORKLOADS,
    ("kubeflow.org", "PyTorchJob"): WORKLOADS,
    ("kubeflow.org", "MPIJob"): WORKLOADS,
    ("trainer.kubeflow.org", "TrainJob"): WORKLOADS,
    ("jobset.x-k8s.io", "JobSet"): WORKLOADS,
    ("batch", "Job"): WORKLOADS,
}

# Kinds whose spec cannot change once created (the API server or the operator's webhook rejects it):
# a changed definition has to become a new object, never an update.
IMMUTABLE_RUNS = frozenset({("kubeflow.org", "PyTorchJob"), ("kubeflow.org", "MPIJob"),
                            ("trainer.kubeflow.org", "TrainJob"), ("jobset.x-k8s.io", "JobSet"), ("batch", "Job")})

# Kinds that hold pod templates for others to instantiate: their pods' volumes and classes are needed by
# the runs made from them, not by the template itself.
POD_TEMPLATES = frozenset({("trainer.kubeflow.org", "TrainingRuntime"), ("trainer.kubeflow.org", "ClusterTrainingRuntime")})

BUILTIN_GROUPS = frozenset({"", "apps", "batch", "rbac.authorization.k8s.io", "networking.k8s.io", "storage.k8s.io",
                            "scheduling.k8s.io", "apiextensions.k8s.io", "policy", "autoscaling"})


def group_kind(obj: dict[str, Any]) -> tuple[str, str]:
    api_version = obj.get("apiVersion", "")
    return (api_version.rpartition("/")[0], obj.get("kind", ""))


def wave_of(obj: dict[str, Any]) -> int | None:
    return WAVES.get(group_kind(obj))


def is_custom_resource(obj: dict[str, Any]) -> bool:
    """A kind served by a CRD (installed by another app: the operator's), not by the API server itself."""
    return group_kind(obj)[0] not in BUILTIN_GROUPS


@dataclass(frozen=True)
class Reference:
    """One object naming another. `admission`: the API server or a webhook rejects the object while the
    target is missing, so the target must come in a strictly earlier wave (same wave is enough otherwise)."""

    group: str
    kind: str
    namespace: str | None  # None for cluster-scoped targets
    name: str
    admission: bool = False


def _pod_specs(obj: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every pod spec in an object, wherever its operator keeps its templates."""
    stack: list[Any] = [obj.get("spec")]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            template = node.get("template")
            if isinstance(template, dict) and isinstance(template.get("spec"), dict) \
                    and "containers" in template["spec"]:
                yield template["spec"]
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def references(obj: dict[str, Any]) -> list[Reference]:
    """The objects `obj` needs, as far as kubetrain's kinds name them."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    spec = obj.get("spec") or {}
    group, kind = group_kind(obj)
    found: list[Reference] = []
    if namespace:
        found.append(Reference("", "Namespace", None, namespace, admission=True))
    for pod in [] if (group, kind) in POD_TEMPLATES else _pod_specs(obj):
        for volume in pod.get("volumes") or []:
            if "persistentVolumeClaim" in volume:
                found.append(Reference("", "PersistentVolumeClaim", namespace,
                                       volume["persistentVolumeClaim"]["claimName"]))
            if "configMap" in volume:
                found.append(Reference("", "ConfigMap", namespace, volume["configMap"]["name"]))
        if pod.get("priorityClassName"):
            found.append(Reference("scheduling.k8s.io", "PriorityClass", None, pod["priorityClassName"], True))
    queue = (meta.get("labels") or {}).get("kueue.x-k8s.io/queue-name")
    if queue:
        found.append(Reference("kueue.x-k8s.io", "LocalQueue", namespace, queue))
    if (group, kind) == ("trainer.kubeflow.org", "TrainJob"):
        ref = spec.get("runtimeRef") or {}
        runtime_kind = ref.get("kind", "ClusterTrainingRuntime")
        found.append(Reference("trainer.kubeflow.org", runtime_kind,
                               None if runtime_kind == "ClusterTrainingRuntime" else namespace, ref.get("name", ""),
                               admission=True))
    elif (group, kind) == ("kueue.x-k8s.io", "LocalQueue"):
        found.append(Reference("kueue.x-k8s.io", "ClusterQueue", None, spec.get("clusterQueue", "")))
    elif (group, kind) == ("kueue.x-k8s.io", "ClusterQueue"):
        for resource_group in spec.get("resourceGroups") or []:
            for flavor in resource_group.get("flavors") or []:
                found.append(Reference("kueue.x-k8s.io", "ResourceFlavor", None, flavor["name"]))
        if spec.get("cohortName"):
            found.append(Reference("kueue.x-k8s.io", "Cohort", None, spec["cohortName"]))
    elif (group, kind) == ("kueue.x-k8s.io", "Cohort") and spec.get("parentName"):
        # Its quotas name flavors only as keys: Kueue needs no ResourceFlavor to hold a Cohort's quota.
        found.append(Reference("kueue.x-k8s.io", "Cohort", None, spec["parentName"]))
    elif (group, kind) == ("kueue.x-k8s.io", "ResourceFlavor") and spec.get("topologyName"):
        found.append(Reference("kueue.x-k8s.io", "Topology", None, spec["topologyName"]))
    elif (group, kind) == ("karpenter.sh", "NodePool"):
        ref = ((spec.get("template") or {}).get("spec") or {}).get("nodeClassRef") or {}
        if ref:
            found.append(Reference(ref.get("group", ""), ref.get("kind", ""), None, ref.get("name", "")))
    elif (group, kind) == ("", "PersistentVolumeClaim"):
        if spec.get("volumeName"):
            found.append(Reference("", "PersistentVolume", None, spec["volumeName"]))
        if spec.get("storageClassName"):
            found.append(Reference("storage.k8s.io", "StorageClass", None, spec["storageClassName"]))
    elif (group, kind) == ("", "PersistentVolume") and spec.get("storageClassName"):
        found.append(Reference("storage.k8s.io", "StorageClass", None, spec["storageClassName"]))
    elif (group, kind) == ("scheduling.volcano.sh", "PodGroup") and spec.get("queue"):
        found.append(Reference("scheduling.volcano.sh", "Queue", None, spec["queue"]))
    return found
