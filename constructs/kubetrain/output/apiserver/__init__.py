"""The API server's own validation of what kubetrain emits, and of what operators make of it (Kubernetes 1.33).

The schemas say which fields an object may have; the API server checks more: names per kind, label and
annotation syntax and size, tolerations, affinity, resources, ports, volumes and mounts, environment, Job,
Service and storage rules. Every built-in object is checked as the API server checks it, and every object
a controller or an operator will create from it (a Job's pods, a PyTorchJob's pods and Services, the Jobs
of a TrainJob's JobSet, an MPIJob's launcher and workers) is checked as the Pod, Job or Service it becomes,
with that operator's names and labels: a problem there is reported at the committed field it comes from.
What an operator creates is that operator's knowledge, in its module under `kubetrain.targets`.

Plain Python over the objects' dicts, written after Kubernetes 1.33 pkg/apis/core/validation,
pkg/apis/batch/validation, pkg/apis/apps/validation, pkg/apis/storage/validation and k8s.io/apimachinery
v0.33 pkg/api/validation and pkg/util/validation (see each module). This package imports no cdk8s.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from kubetrain.names import dns_1123_subdomain_problem, path_segment_problem
from kubetrain.output.apiserver.meta import validate_object_meta
from kubetrain.output.apiserver.objects import (
    validate_config_map,
    validate_namespace,
    validate_persistent_volume,
    validate_persistent_volume_claim,
    validate_priority_class,
    validate_secret,
    validate_service,
    validate_storage_class,
)
from kubetrain.output.apiserver.report import Report
from kubetrain.output.apiserver.rules import ADMISSION, DERIVED_NAMES
from kubetrain.output.apiserver.workloads import validate_cron_job, validate_job, validate_pod, validate_workload
from kubetrain.targets.base import Created, Sibling, operator_kind

if TYPE_CHECKING:
    from kubetrain.output.validate import Manifest

Validator = Callable[[dict[str, Any], Report], list[Created]]


def _meta_only(obj: dict[str, Any], report: Report) -> list[Created]:
    validate_object_meta(obj.get("metadata"), obj.get("kind"), dns_1123_subdomain_problem, report)
    return []


BUILTIN: dict[tuple[str, str], Validator] = {
    ("v1", "Pod"): validate_pod,
    ("v1", "Service"): validate_service,
    ("v1", "ConfigMap"): validate_config_map,
    ("v1", "Secret"): validate_secret,
    ("v1", "Namespace"): validate_namespace,
    ("v1", "ServiceAccount"): _meta_only,
    ("v1", "PersistentVolume"): validate_persistent_volume,
    ("v1", "PersistentVolumeClaim"): validate_persistent_volume_claim,
    ("storage.k8s.io/v1", "StorageClass"): validate_storage_class,
    ("scheduling.k8s.io/v1", "PriorityClass"): validate_priority_class,
    ("batch/v1", "Job"): validate_job,
    ("batch/v1", "CronJob"): validate_cron_job,
    **{("apps/v1", kind): validate_workload for kind in ("DaemonSet", "Deployment", "ReplicaSet", "StatefulSet")},
}
_PATH_SEGMENT_GROUPS = ("rbac.authorization.k8s.io/",)  # RBAC names are URL path segments, not DNS names


def check_object(obj: dict[str, Any], report: Report, sibling: Sibling) -> None:
    """Every problem the API server (and the controllers and operators behind it) has with `obj`, into `report`."""
    for created in _check(obj, report, sibling):
        _check_created(created, report, sibling)


def _check(obj: dict[str, Any], report: Report, sibling: Sibling) -> Iterable[Created]:
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    validator = BUILTIN.get((api_version, kind))
    if validator is not None:
        return validator(obj, report)
    operator = operator_kind(api_version, kind)
    if operator is not None:
        validate_object_meta(obj.get("metadata"), kind, operator.name_problem, report)
        for path, message in operator.derived_names(obj, sibling):
            report.add(DERIVED_NAMES.code, path, message)
            report.root.named.add(path)
        for path, message in operator.admission(obj, sibling):
            report.add(ADMISSION.code, path, message)
        return operator.created(obj, sibling)
    check = path_segment_problem if api_version.startswith(_PATH_SEGMENT_GROUPS) else dns_1123_subdomain_problem
    validate_object_meta(obj.get("metadata"), kind, check, report)
    return ()


def _check_created(created: Created, report: Report, sibling: Sibling) -> None:
    """An object a controller or operator creates, checked as the API server checks it when it is created; and
    what it creates in turn (a JobSet's Job, then the Job's pods)."""
    sub = report.of_created(created)
    for more in _check(created.body, sub, sibling):
        _check_created(more, sub, sibling)


def _version(text: str) -> tuple[int, int]:
    major, _, minor = text.lstrip("v").partition(".")
    try:
        return int(major), int(minor.split(".")[0])
    except ValueError:
        return 1, 33


def api_server_problems(manifests: list[Manifest], version_of: Callable[[Manifest], str],
                        malformed: Collection[tuple[str, str]] = ()) -> Iterator[tuple[Manifest, str, str, str]]:
    """(manifest, code, path, message) for every problem of every manifest. `malformed` names the (file, label) of
    objects the schema check found wrong: one whose shape keeps these checks from running (a string where a list
    belongs) is left to the schema's findings. Siblings (a TrainJob's runtime) come from the object's cluster folder
    (dist/<cluster>/<namespace>/...)."""
    # Folders as strings: hashing Path objects per manifest costs more than the checks of a small object.
    folders = [str(m.folder) for m in manifests]
    roots = {folder: folder.rpartition("/")[0] for folder in set(folders)}
    by_kind: dict[str, dict[tuple[str, str, Any], dict[str, Any]]] = {}

    def of_kind(kind: str) -> dict[tuple[str, str, Any], dict[str, Any]]:
        """(cluster folder, namespace, name) -> object, for the kinds operators look up (a runtime, say): built
        on the first look-up, so a fleet without such references pays nothing per object."""
        index = by_kind.get(kind)
        if index is None:
            index = by_kind[kind] = {}
            for m, folder in zip(manifests, folders):
                if isinstance(m.body, dict) and m.body.get("kind") == kind and isinstance(m.body.get("metadata"), dict):
                    meta = m.body["metadata"]
                    index[(roots[folder], meta.get("namespace") or "", meta.get("name"))] = m.body
        return index

    versions: dict[str, tuple[int, int]] = {}
    for m, folder in zip(manifests, folders):
        body = m.body
        if not (isinstance(body, dict) and isinstance(body.get("apiVersion"), str)
                and isinstance(body.get("kind"), str)):
            continue
        root, namespace = roots[folder], (body.get("metadata") or {}).get("namespace") or ""

        def sibling(kind: str, name: str, root: str = root, namespace: str = namespace) -> dict[str, Any] | None:
            index = of_kind(kind)
            return index.get((root, namespace, name)) or index.get((root, "", name))

        version = versions.get(folder)
        if version is None:
            version = versions[folder] = _version(version_of(m))
        report = Report(version)
        if (m.file, m.label) in malformed:
            try:
                check_object(body, report, sibling)
            except (TypeError, AttributeError, KeyError, ValueError, IndexError):
                continue
        else:
            check_object(body, report, sibling)
        for code, path, message in report.found:
            yield m, code, path, message
