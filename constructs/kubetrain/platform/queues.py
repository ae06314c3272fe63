"""One queue system per cluster: the first Kueue or Volcano construct of a cluster chooses it (KT420).

A job picks a queue object (a Kueue `LocalQueue` or a `VolcanoQueue`); both expose what the job needs:
`job_labels()`, `pod_annotations(placement)`, `scheduler_name`, `placement_problems(placement)`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kubetrain.cluster import Cluster
from kubetrain.model.names import LabelKey
from kubetrain.model.strict import StrictProps
from kubetrain.rules.registry import register
from kubetrain.rules.sources import KUEUE_JOBS, KUEUE_TAS, VOLCANO, cite
from kubetrain.state import QueueSystem
from kubetrain_runtime.problems import Problem

TWO_QUEUE_SYSTEMS = register(
    "KT420", "error", "two queue systems in one cluster",
    rationale="Kueue and Volcano both decide when a gang of pods may start; with both, a job admitted by one can "
              "be held by the other, and quotas are counted twice or not at all.",
    fix="use one queue system per cluster (Kueue or Volcano), for every queue of that cluster",
    source=cite("README.md (The platform)", KUEUE_JOBS, VOLCANO))
PLACEMENT_LEVEL = register(
    "KT421", "error", "topology placement the queue cannot honour",
    rationale="Kueue's topology-aware scheduling places a job's pods within one level of a Topology that its "
              "flavors reference; a level outside that Topology (or a queue without one) is never satisfied "
              "(required) or silently ignored.",
    fix="name a level of the flavors' Topology (e.g. topology.k8s.aws/network-node-layer-3), or give the "
        "flavors a Topology",
    source=KUEUE_TAS)

OTHER_SCHEDULER = register(
    "KT424", "error", "queued job names another scheduler than its queue's",
    rationale="A Volcano queue admits a gang through its PodGroup and places it with the volcano scheduler; pods "
              "that name another scheduler are placed one by one outside the gang, or never.",
    fix="leave pod.scheduler_name unset (the queue sets it)", source=VOLCANO)


class TopologyPlacement(StrictProps):
    """Where a job's pods must (required) or should (preferred) share one topology domain."""

    level: LabelKey = Field(..., description="A node label of the Topology, e.g. "
                                             "topology.k8s.aws/network-node-layer-3.")
    mode: Literal["required", "preferred"] = "required"


def claim_queue_system(cluster: Cluster, system: QueueSystem, path: str = "") -> list[Problem]:
    """The cluster's queue system: the first one used; another one is KT420."""
    chosen = cluster.state.queue_system
    if chosen is None:
        cluster.state.queue_system = system
        return []
    if chosen == system:
        return []
    return [Problem(TWO_QUEUE_SYSTEMS.code, path, f"cluster {cluster.props.name} already queues with {chosen}; "
                    f"this is a {system} object", TWO_QUEUE_SYSTEMS.fix)]


def queue_system(cluster: Cluster) -> QueueSystem | None:
    return cluster.state.queue_system
