"""Volcano's kinds (scheduling.volcano.sh/v1beta1, Volcano v1.15): a Queue, a definition jobs name, and the
PodGroup of a gang, which comes with its job and names its queue (kubetrain.platform.volcano_queues builds them).
"""

from __future__ import annotations

from kubetrain.kinds.base import DEFINITIONS, WORKLOADS, CrdSource, Kind, Manifest, Reference


def _pod_group_references(obj: Manifest) -> list[Reference]:
    queue = (obj.get("spec") or {}).get("queue")
    return [Reference("scheduling.volcano.sh", "Queue", None, queue)] if queue else []


def _volcano_crd(name: str) -> CrdSource:
    return CrdSource(f"scheduling.volcano.sh_{name}.yaml", "volcano-sh/volcano", "v1.15",
                     (API_VERSION,))


API_VERSION = "scheduling.volcano.sh/v1beta1"


KINDS = (
    Kind(API_VERSION, "Queue", DEFINITIONS, crd=_volcano_crd("queues")),
    Kind(API_VERSION, "PodGroup", WORKLOADS, crd=_volcano_crd("podgroups"),
         references=_pod_group_references),
)
