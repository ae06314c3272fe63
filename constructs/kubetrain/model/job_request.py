"""What a launch target reads of a job (kubetrain.kinds): the run's names, labels and shape, as plain data.

`JobSpec.request` (kubetrain.jobs.spec) builds it from the validated props, so the targets depend on this and
never on the job's props: a new field a target needs is added here, where every target can see what the others
read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class MountedVolume:
    name: str
    mount_path: str


@dataclass(frozen=True)
class JobRequest:
    name: str  # the run's objects' name (the job's, plus its hash for create-once runs)
    namespace: str
    labels: dict[str, str]  # on every object of the run
    object_labels: dict[str, str]  # on the operator's object: the job's labels and its queue's
    nodes: int  # pods at the start
    procs_per_node: int
    node_range: range  # every pod count the job may train with (more than one: elastic)
    elastic: bool
    max_restarts: int  # times torchrun restarts all ranks of a pod
    backoff_limit: int  # pod restarts before the job fails
    restart_policy: str  # the training operator's replica restart policy
    launched_by_torchrun: bool
    kueue_queue: str | None  # the LocalQueue whose Kueue labels the job carries; None when not queued on Kueue
    pod_group_policy: dict[str, Any] | None  # Volcano's schedulingPolicy for the operator's PodGroup, when queued there
    volumes: tuple[MountedVolume, ...]

    @property
    def max_nodes(self) -> int:
        return max(self.nodes, self.node_range.stop - 1)
