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
from kubetrain.kinds.base import DEFINITIONS, NAMESPACES, PLATFORM, WORKLOADS, Kind, Manifest, Reference, Sibling
from kubetrain.model.names import path_segment_problem
from kubetrain.model.vocabulary import JOB_LABEL, RUN_CONFIG_FILE
from kubetrain.rules import runconfig  # noqa: F401 - registers the codes a run config's problems carry
from kubetrain_runtime.problems import ConfigError, Problem
from training.config import RunConfig, read_run_config

# A run config in dist/ that cannot be read was edited by hand: it is written from the job's workload.run.
RUN_CONFIG_FIX = ("the run config is written by `kubetrain synth` from the job's workload.run: set it there and run "
                  "synth, or undo the hand edit (`git checkout -- dist/`)")


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


def run_config_text(config_map: Manifest) -> str | None:
    """The trainer's run config a job's ConfigMap holds (its run.yaml), or None for any other ConfigMap."""
    labels = (config_map.get("metadata") or {}).get("labels") or {}
    text = (config_map.get("data") or {}).get(RUN_CONFIG_FILE) if isinstance(labels, dict) and JOB_LABEL in labels \
        else None
    return text if isinstance(text, str) else None


def read_config_map_run(config_map: Manifest) -> tuple[RunConfig | None, list[Problem]]:
    """(the run config, []) of a job's ConfigMap, read as the pod reads its file; (None, its problems) when the pod
    would refuse it, paths from the ConfigMap (data[run.yaml].model.n_heads); (None, []) for another ConfigMap."""
    text = run_config_text(config_map)
    if text is None:
        return None, []
    try:
        return read_run_config(text, "", unreadable_fix=RUN_CONFIG_FIX), []
    except ConfigError as error:
        return None, [Problem(p.code, ".".join(filter(None, [f"data[{RUN_CONFIG_FILE}]", p.path])), p.message, p.fix)
                      for p in error.problems]


def run_config_problems(config_map: Manifest, sibling: Sibling) -> list[tuple[str, str, str]]:
    """What the pod's `python -m training --check` refuses in a job's run config: (path, message and fix, code)."""
    return [(p.path, f"{p.message}; fix: {p.fix}", p.code) for p in read_config_map_run(config_map)[1]]


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
    Kind("v1", "ConfigMap", PLATFORM, check=validate_config_map, admission=run_config_problems),
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
