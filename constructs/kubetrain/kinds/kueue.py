"""Kueue's own kinds (kueue.x-k8s.io/v1beta2, Kueue v0.19.2): the platform's queues, cohorts, flavors and
topologies, for delivery and checks (kubetrain.platform.kueue_queues builds them).

Waves: a Topology, a Cohort and a WorkloadPriorityClass are definitions others name; a ResourceFlavor names its
Topology; a ClusterQueue names its flavors and its cohort, a LocalQueue its ClusterQueue, and jobs name the
LocalQueue: each comes a wave after what it names. Both queues carry the health check that shows an inactive
queue (which admits nothing) as Degraded.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from kubetrain.kinds.base import (
    DEFINITIONS,
    LOCAL_QUEUES,
    PLATFORM,
    QUEUES,
    CrdSource,
    Kind,
    Manifest,
    Reference,
    Sibling,
)
from kubetrain.model.quantity import node_resource_problem, parse_quantity
from kubetrain.rules.registry import register
from kubetrain_runtime.problems import INVALID_VALUE

KUEUE = "kueue.x-k8s.io"
API_VERSION = f"{KUEUE}/v1beta2"


def _kueue_crd(name: str) -> CrdSource:
    return CrdSource(f"{KUEUE}_{name}.yaml", "kubernetes-sigs/kueue", "v0.19.2", (API_VERSION,))


def _cluster_queue_references(obj: Manifest) -> list[Reference]:
    spec = obj.get("spec") or {}
    found = [Reference(KUEUE, "ResourceFlavor", None, flavor["name"])
             for group in spec.get("resourceGroups") or [] for flavor in group.get("flavors") or []]
    if spec.get("cohortName"):
        found.append(Reference(KUEUE, "Cohort", None, spec["cohortName"]))
    return found


def _cohort_references(obj: Manifest) -> list[Reference]:
    # Its quotas name flavors only as keys: Kueue needs no ResourceFlavor to hold a Cohort's quota.
    parent = (obj.get("spec") or {}).get("parentName")
    return [Reference(KUEUE, "Cohort", None, parent)] if parent else []


def _flavor_references(obj: Manifest) -> list[Reference]:
    topology = (obj.get("spec") or {}).get("topologyName")
    return [Reference(KUEUE, "Topology", None, topology)] if topology else []


def _local_queue_references(obj: Manifest) -> list[Reference]:
    return [Reference(KUEUE, "ClusterQueue", None, (obj.get("spec") or {}).get("clusterQueue", ""))]


LIMITS_REFUSED = register(
    "KT451", "error", "quota limits Kueue refuses",
    rationale="Kueue's admission webhook refuses a borrowing or lending limit on a ClusterQueue without a cohort "
              "(or a Cohort without a parent), where nothing can be borrowed or lent, and a ClusterQueue's lending "
              "limit above its nominal quota.",
    fix="give the queue a cohort (the Cohort a parent) or drop the limit; keep lending_limit at most nominal",
    source="https://github.com/kubernetes-sigs/kueue/blob/v0.19.2/pkg/webhooks/clusterqueue_webhook.go (validateLimit, "
           "validateLendingLimit); https://kueue.sigs.k8s.io/docs/concepts/cluster_queue/#borrowinglimit")


def covered_twice(groups: Sequence[Sequence[str]]) -> Iterator[tuple[int, int, str, int]]:
    """(group, position, resource, the group that covered it first) for each resource a later group covers
    again: Kueue's webhook takes each resource in one group (clusterqueue_webhook.go, validateResourceGroups)."""
    seen: dict[str, int] = {}
    for i, resources in enumerate(groups):
        for j, resource in enumerate(resources):
            if resource in seen:
                yield i, j, resource, seen[resource]
            else:
                seen[resource] = i


def _quantity(value: Any) -> Any:
    try:
        return parse_quantity(str(value))
    except ValueError:
        return None  # the schema's finding


def resource_group_problems(obj: Manifest, sibling: Sibling) -> list[tuple[str, str, str]]:
    """What Kueue's webhook refuses in a ClusterQueue's or a Cohort's resource groups beyond the CRD's rules (a
    resource or a flavor in two groups, a flavor's resources out of the covered order, a lending limit without a
    cohort or above the nominal quota), and a covered resource no node offers: (path, message and fix, code)."""
    spec = obj.get("spec") or {}
    groups = [g for g in spec.get("resourceGroups") or [] if isinstance(g, dict)]
    cluster_queue = obj.get("kind") == "ClusterQueue"
    has_cohort = bool(spec.get("cohortName") if cluster_queue else spec.get("parentName"))
    found = []
    covered = [[str(r) for r in g.get("coveredResources") or []] for g in groups]
    for i, j, resource, first in covered_twice(covered):
        found.append((f"spec.resourceGroups[{i}].coveredResources[{j}]", f"{resource} is covered by resource groups "
                      f"{first} and {i}: Kueue takes each resource in one group; fix: cover {resource} in one group",
                      INVALID_VALUE))
    flavors: dict[str, int] = {}
    for i, group in enumerate(groups):
        path = f"spec.resourceGroups[{i}]"
        for j, resource in enumerate(covered[i]):
            if (problem := node_resource_problem(resource)) is not None:
                found.append((f"{path}.coveredResources[{j}]", f"{problem[0]}; fix: {problem[1]}", INVALID_VALUE))
        for j, flavor in enumerate(f for f in group.get("flavors") or [] if isinstance(f, dict)):
            name = flavor.get("name")
            if name in flavors:
                found.append((f"{path}.flavors[{j}].name", f"flavor {name} is already in resource group "
                              f"{flavors[name]}: Kueue takes each flavor in one group; fix: list each flavor once",
                              INVALID_VALUE))
            flavors.setdefault(name, i)
            for k, quota in enumerate(q for q in flavor.get("resources") or [] if isinstance(q, dict)):
                where = f"{path}.flavors[{j}].resources[{k}]"
                if k < len(covered[i]) and quota.get("name") != covered[i][k]:
                    found.append((f"{where}.name", f"{quota.get('name')} is not coveredResources[{k}] "
                                  f"({covered[i][k]}); fix: list a flavor's quotas in the order of coveredResources",
                                  INVALID_VALUE))
                for limit in ("lendingLimit",) if cluster_queue else ("borrowingLimit", "lendingLimit"):
                    # A ClusterQueue's borrowingLimit without a cohort is its CRD's rule (KT604).
                    if quota.get(limit) is not None and not has_cohort:
                        found.append((f"{where}.{limit}", f"{limit} needs {'a cohort' if cluster_queue else 'a parent'}"
                                      f"; fix: set {'cohortName' if cluster_queue else 'parentName'}, or drop the "
                                      "limit", LIMITS_REFUSED.code))
                lending = quota.get("lendingLimit")
                if lending is not None and has_cohort and cluster_queue and None not in (
                        nominal := _quantity(quota.get("nominalQuota")), lent := _quantity(lending)) \
                        and lent > nominal:
                    found.append((f"{where}.lendingLimit", f"lending limit {lending} is above the nominal quota "
                                  f"{quota.get('nominalQuota')}; fix: lend at most the nominal quota",
                                  LIMITS_REFUSED.code))
    return found


KINDS = (
    Kind(API_VERSION, "Topology", DEFINITIONS, crd=_kueue_crd("topologies")),
    Kind(API_VERSION, "Cohort", DEFINITIONS, crd=_kueue_crd("cohorts"), references=_cohort_references,
         admission=resource_group_problems),
    Kind(API_VERSION, "WorkloadPriorityClass", DEFINITIONS, crd=_kueue_crd("workloadpriorityclasses")),
    Kind(API_VERSION, "ResourceFlavor", PLATFORM, crd=_kueue_crd("resourceflavors"),
         references=_flavor_references),
    Kind(API_VERSION, "ClusterQueue", QUEUES, crd=_kueue_crd("clusterqueues"), health="kueue_queue.lua",
         references=_cluster_queue_references, admission=resource_group_problems),
    Kind(API_VERSION, "LocalQueue", LOCAL_QUEUES, crd=_kueue_crd("localqueues"), health="kueue_queue.lua",
         references=_local_queue_references),
)
