"""Sync waves: the order in which Argo CD applies a cluster's objects, and what each object needs before it.

A kind's wave is its descriptor's (kubetrain.kinds: `Kind.wave`; kinds/base.py says the order, and each kind's
module why its kinds are where they are).

Objects reference others (`references`): the offline sync check (`plan.py`) uses that to prove every
reference points at the same or an earlier wave, and strictly earlier where admission checks it. What every
object names by its shape (its namespace, the claims, configs and priority class of its pods, its Kueue
queue) is found here; what a kind names by its own fields, its descriptor's `references` says.
"""

from __future__ import annotations

from typing import Any

from kubetrain.kinds.base import Reference, pod_specs
from kubetrain.kinds.kind_registry import group_kind, kind_of
from kubetrain.model.vocabulary import QUEUE_LABEL

WAVE_ANNOTATION = "argocd.argoproj.io/sync-wave"

BUILTIN_GROUPS = frozenset({"", "apps", "batch", "rbac.authorization.k8s.io", "networking.k8s.io", "storage.k8s.io",
                            "scheduling.k8s.io", "apiextensions.k8s.io", "policy", "autoscaling"})


def wave_of(obj: dict[str, Any]) -> int | None:
    kind = kind_of(obj)
    return kind.wave if kind is not None else None


def is_custom_resource(obj: dict[str, Any]) -> bool:
    """A kind served by a CRD (installed by another app: the operator's), not by the API server itself."""
    return group_kind(obj)[0] not in BUILTIN_GROUPS


def references(obj: dict[str, Any]) -> list[Reference]:
    """The objects `obj` needs, as far as kubetrain's kinds name them."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    kind = kind_of(obj)
    found: list[Reference] = []
    if namespace:
        found.append(Reference("", "Namespace", None, namespace, admission=True))
    for pod in [] if kind is not None and kind.holds_pod_templates else pod_specs(obj):
        for volume in pod.get("volumes") or []:
            if "persistentVolumeClaim" in volume:
                found.append(Reference("", "PersistentVolumeClaim", namespace,
                                       volume["persistentVolumeClaim"]["claimName"]))
            if "configMap" in volume:
                found.append(Reference("", "ConfigMap", namespace, volume["configMap"]["name"]))
        if pod.get("priorityClassName"):
            found.append(Reference("scheduling.k8s.io", "PriorityClass", None, pod["priorityClassName"], True))
    queue = (meta.get("labels") or {}).get(QUEUE_LABEL)
    if queue:
        found.append(Reference("kueue.x-k8s.io", "LocalQueue", namespace, queue))
    return found + (kind.references(obj) if kind is not None else [])
