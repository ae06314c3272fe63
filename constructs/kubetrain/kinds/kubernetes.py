"""Kubernetes' own kinds (served by the API server; their schemas come with kubernetes-validate).

Waves: namespaces (and CRDs) first, then cluster-wide definitions, then namespaced configuration. Two kinds break
the pattern on purpose:

- PersistentVolumeClaims go in the jobs' wave: a claim on a `WaitForFirstConsumer` storage class stays Pending
  (Progressing) until a pod uses it, so a claim in an earlier wave would hold the sync forever.
- ConfigMaps, Secrets and Services come before the jobs that mount or address them, though a pod would only wait
  for them: a job then never starts against a missing config.

What the API server checks beyond the schemas is each kind's `check` (kubetrain.apiserver: a Namespace's
name is a DNS-1123 label, a Service's a DNS-1035 label, a Deployment's pods are checked as pods); RBAC names are
path segments. Pods, ReplicaSets, StatefulSets and CronJobs are checked where they appear (a controller creates
them, or a fleet adds one) and have no sync wave: Argo CD would deliver no kubetrain object of theirs. The batch Job
is the Indexed Job target's kind (indexed_job.py).
"""

from __future__ import annotations

from kubetrain.apiserver.core_objects import (
    validate_config_map,
    validate_namespace,
    validate_persistent_volume,
    validate_persistent_volume_claim,
    validate_priority_class,
    validate_secret,
    validate_service,
    validate_storage_class,
)
from kubetrain.apiserver.workloads import validate_cron_job, validate_pod, validate_workload
from kubetrain.kinds.base import DEFINITIONS, NAMESPACES, PLATFORM, WORKLOADS, Kind, Manifest, Reference
from kubetrain.model.names import path_segment_problem


def _claim_references(obj: Manifest) -> list[Reference]:
    spec, found = obj.get("spec") or {}, []
    if spec.get("volumeName"):
        found.append(Reference("", "PersistentVolume", None, spec["volumeName"]))
    if spec.get("storageClassName"):
        found.append(Reference("storage.k8s.io", "StorageClass", None, spec["storageClassName"]))
    return found


def _volume_references(obj: Manifest) -> list[Reference]:
    storage_class = (obj.get("spec") or {}).get("storageClassName")
    return [Reference("storage.k8s.io", "StorageClass", None, storage_class)] if storage_class else []


RBAC = "rbac.authorization.k8s.io/v1"

APPS_API_VERSION = "apps/v1"
STORAGE_API_VERSION = "storage.k8s.io/v1"
SCHEDULING_API_VERSION = "scheduling.k8s.io/v1"


KINDS = (
    Kind("v1", "Namespace", NAMESPACES, check=validate_namespace),
    Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition", NAMESPACES),
    Kind(STORAGE_API_VERSION, "StorageClass", DEFINITIONS, check=validate_storage_class),
    Kind(SCHEDULING_API_VERSION, "PriorityClass", DEFINITIONS, check=validate_priority_class),
    Kind(RBAC, "ClusterRole", DEFINITIONS, name_problem=path_segment_problem),
    Kind("v1", "ServiceAccount", PLATFORM),
    Kind("v1", "ConfigMap", PLATFORM, check=validate_config_map),
    Kind("v1", "Secret", PLATFORM, check=validate_secret),
    Kind("v1", "Service", PLATFORM, check=validate_service),
    Kind("v1", "PersistentVolume", PLATFORM, check=validate_persistent_volume, references=_volume_references),
    Kind("v1", "ResourceQuota", PLATFORM),
    Kind("v1", "LimitRange", PLATFORM),
    Kind(RBAC, "Role", PLATFORM, name_problem=path_segment_problem),
    Kind(RBAC, "RoleBinding", PLATFORM, name_problem=path_segment_problem),
    Kind(RBAC, "ClusterRoleBinding", PLATFORM, name_problem=path_segment_problem),
    Kind("networking.k8s.io/v1", "NetworkPolicy", PLATFORM),
    Kind(APPS_API_VERSION, "DaemonSet", PLATFORM, check=validate_workload),
    Kind(APPS_API_VERSION, "Deployment", PLATFORM, check=validate_workload),
    Kind(APPS_API_VERSION, "ReplicaSet", None, check=validate_workload),
    Kind(APPS_API_VERSION, "StatefulSet", None, check=validate_workload),
    Kind("v1", "Pod", None, check=validate_pod),
    Kind("batch/v1", "CronJob", None, check=validate_cron_job),
    Kind("v1", "PersistentVolumeClaim", WORKLOADS, check=validate_persistent_volume_claim,
         references=_claim_references),
)
