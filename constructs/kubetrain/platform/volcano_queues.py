"""Volcano: gang scheduling by its own scheduler (`schedulerName: volcano`) and a Queue.

    queue = VolcanoQueue(cluster, "training", capability={"nvidia.com/gpu": "128"})
    queue.scheduler_name                      # "volcano"
    queue.scheduling_policy(min_available=4)  # PyTorchJob runPolicy.schedulingPolicy (the operator's PodGroup)
    queue.pod_group("gpt", "ml", min_member=4)  # a PodGroup, for targets whose operator makes none

Facts: Volcano v1.15 (https://volcano.sh/en/docs/) and the training operator v1.9. The training operator must run with
`--gang-scheduler-name=volcano` to create PodGroups from `schedulingPolicy`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field

from kubetrain.cluster import Cluster
from kubetrain.kinds.volcano import API_VERSION
from kubetrain.model.names import Dns1123Subdomain
from kubetrain.model.quantity import NodeResourceName, Quantity
from kubetrain.model.strict import StrictProps
from kubetrain.platform.platform_construct import PlatformConstruct
from kubetrain.platform.queues import PLACEMENT_LEVEL, TopologyPlacement, claim_queue_system
from kubetrain_runtime.problems import Problem

GROUP_ANNOTATION = "scheduling.k8s.io/group-name"


class VolcanoQueueProps(StrictProps):
    name: Dns1123Subdomain
    weight: int = Field(1, ge=1, description="Share of the cluster against other queues.")
    capability: dict[NodeResourceName, Quantity] = Field(default_factory=dict,
                                                     description="Upper bound on the queue's resources, e.g. "
                                                                 "{'nvidia.com/gpu': '64'}.")
    reclaimable: bool = Field(False, description="Whether other queues may reclaim what this one borrowed. Off: "
                                                 "a training gang is not preempted halfway.")


class VolcanoQueue(PlatformConstruct):
    """A Volcano Queue (cluster-scoped)."""

    Props = VolcanoQueueProps
    kind = "volcanoqueue"
    scheduler_name = "volcano"

    def __init__(self, scope: Cluster, id: str, props: VolcanoQueueProps | Mapping[str, Any] | None = None,
                 **kwargs: Any):
        super().__init__(scope, id, props, kwargs)
        self.name: str = self.props.name
        spec: dict[str, Any] = {"weight": self.props.weight, "reclaimable": self.props.reclaimable}
        if self.props.capability:
            spec["capability"] = dict(self.props.capability)
        self._emit(claim_queue_system(scope, "volcano"),
                   [{"apiVersion": API_VERSION, "kind": "Queue", "metadata": {"name": self.name}, "spec": spec}])

    def job_labels(self) -> dict[str, str]:
        return {}

    def pod_annotations(self, placement: TopologyPlacement | None = None) -> dict[str, str]:
        return {}

    def placement_problems(self, placement: TopologyPlacement | None, path: str = "placement") -> list[Problem]:
        if placement is None:
            return []
        return [Problem(PLACEMENT_LEVEL.code, path, "kubetrain models topology placement for Kueue only",
                        "drop the placement, or queue the cluster's jobs with Kueue")]

    def scheduling_policy(self, min_available: int, priority_class: str | None = None) -> dict[str, Any]:
        """Kubeflow runPolicy.schedulingPolicy: the operator builds the PodGroup from it."""
        policy: dict[str, Any] = {"queue": self.name, "minAvailable": min_available}
        if priority_class:
            policy["priorityClass"] = priority_class
        return policy

    def pod_group(self, job: str, namespace: str, min_member: int,
                  min_resources: dict[str, str] | None = None) -> dict[str, Any]:
        """A PodGroup whose pods carry `group_annotation(job)`."""
        spec: dict[str, Any] = {"minMember": min_member, "queue": self.name}
        if min_resources:
            spec["minResources"] = dict(min_resources)
        return {"apiVersion": API_VERSION, "kind": "PodGroup", "metadata": {"name": job, "namespace": namespace},
                "spec": spec}

    @staticmethod
    def group_annotation(job: str) -> dict[str, str]:
        return {GROUP_ANNOTATION: job}
