"""What a Karpenter pool can ever hold: how many nodes a job's pods need on it, at least.

The pool's node count (objects.Pool.capacity_nodes) is its static `replicas` (Karpenter keeps exactly that
many nodes, whatever is pending: karpenter.sh v1.8 docs, concepts/nodepools#specreplicas), else the smaller
of max_nodes and the instances its capacity reservations hold. What one node gives pods is the pool's
allocatable per instance type (instance less kube-reserved and the eviction threshold,
kubetrain.model.instances); the roomiest type counts, so every figure here is a lower bound on the nodes
a real scheduler needs: a job refused on it can never run.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from kubetrain.admission.cluster_objects import Pool
from kubetrain.model.pod_sets import PodSet
from kubetrain.model.vocabulary import ACCELERATOR_RESOURCES, EFA_RESOURCE, HUGE_PAGES_RESOURCE

HOSTNAME_LEVEL = "kubernetes.io/hostname"  # a domain of this level is one node
# Resources a pool lists when its nodes have them: a pod asking for one a pool does not list fits no node.
NODE_DEVICES = (*ACCELERATOR_RESOURCES, EFA_RESOURCE, HUGE_PAGES_RESOURCE, "hugepages-1Gi")


def pods_per_node(pool: Pool, requests: Mapping[str, int]) -> int | None:
    """The most pods with `requests` one node of the pool holds; 0 when none does (rule KT401's concern),
    None when nothing the pool describes bounds it."""
    best: int | None = None
    for allocatable in pool.allocatable.values():
        bounds = [allocatable.get(r, 0) // v for r, v in requests.items()
                  if v > 0 and (r in allocatable or r in NODE_DEVICES)]
        if not bounds:
            return None
        best = max(best or 0, min(bounds))
    return best


def nodes_needed(pool: Pool, pod_sets: Iterable[PodSet]) -> int | None:
    """A lower bound on the nodes of `pool` that the pod sets' pods need at once: each shape of pod needs
    count / pods-per-node nodes, and all of them together need what they request over what a node gives,
    per resource. None when the pool does not say what its nodes give, or a pod fits none."""
    shapes: dict[tuple[tuple[str, int], ...], int] = {}
    for pod_set in pod_sets:
        key = tuple(sorted(pod_set.requests.items()))
        shapes[key] = shapes.get(key, 0) + pod_set.count
    bounds: list[int] = []
    totals: dict[str, int] = {}
    for shape, count in shapes.items():
        per_node = pods_per_node(pool, dict(shape))
        if per_node == 0:
            return None
        if per_node is not None:
            bounds.append(math.ceil(count / per_node))
        for resource, value in shape:
            totals[resource] = totals.get(resource, 0) + value * count
    for resource, total in totals.items():
        largest = max((a.get(resource, 0) for a in pool.allocatable.values()), default=0)
        if largest:
            bounds.append(math.ceil(total / largest))
    return max(bounds, default=None)


def domain_nodes(pool: Pool, level: str) -> int | None:
    """The most nodes of the pool in one domain of `level`, when known offline."""
    if level == HOSTNAME_LEVEL:
        return 1
    return pool.domain_nodes.get(level)
