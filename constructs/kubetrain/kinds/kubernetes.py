"""Kubernetes' own kinds (served by the API server; their schemas come with kubernetes-validate).

Waves: namespaces (and CRDs) first, then cluster-wide definitions, then namespaced configuration. Two kinds break
the pattern on purpose:

- PersistentVolumeClaims go in the jobs' wave: a claim on a `WaitForFirstConsumer` storage class stays Pending
  (Progressing) until a pod uses it, so a claim in an earlier wave would hold the sync forever.
- ConfigMaps, Secrets and Services come before the jobs that mount or address them, though a pod would only wait
  for them: a job then never starts against a missing config.

A Namespace's name is a DNS-1123 label and a Service's a DNS-1035 label (it becomes a DNS name); the batch Job is
the Indexed Job target's kind (indexed_job.py).
"""

from __future__ import annotations

from kubetrain.kinds.base import DEFINITIONS, NAMESPACES, PLATFORM, WORKLOADS, Kind, Manifest, Reference


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


KINDS = (
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
