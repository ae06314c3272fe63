"""The admission checks on a fleet being synthesized, reported like every other rule.

A cluster keeps the plain manifests its queue, pool and job constructs emit (`AdmissionRecord`). The checks
run when the diagnostics are read, once the fleet is defined (a cohort may gain the member a job borrows from
after the job is defined), on exactly the objects synth writes, and report each problem on the job's
definition with the user's field path. A job whose pool or queue, or anything behind them, has an error of
its own is left out: that error says why.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from kubetrain.admission.objects import ClusterObjects
from kubetrain.admission.quota import CohortTree
from kubetrain.admission.verdict import plan_job
from kubetrain.diagnostics import Finding
from kubetrain_runtime.problems import Problem


class Emitting(Protocol):
    emitted: bool
    depends_on: tuple[Emitting, ...]


def ready(construct: Emitting) -> bool:
    """The construct and everything it is built on emitted their objects."""
    return construct.emitted and all(ready(d) for d in construct.depends_on)


class AdmissionRecord:
    """One cluster's emitted objects, for the checks that need the whole fleet."""

    def __init__(self, cluster: str, namespaces: Iterable[str]):
        self.cluster = cluster
        self._platform: list[Mapping[str, Any]] = [{"apiVersion": "v1", "kind": "Namespace",
                                                    "metadata": {"name": n}} for n in namespaces]
        self._jobs: list[tuple[str, list[Mapping[str, Any]], tuple[Emitting, ...]]] = []

    def add_platform(self, manifests: Iterable[Mapping[str, Any]]) -> None:
        self._platform.extend(manifests)

    def add_job(self, where: str, manifests: list[Mapping[str, Any]], upstream: Iterable[Emitting]) -> None:
        """A job on a pool or a queue: `where` is its definition, `upstream` its pool and queue."""
        self._jobs.append((where, manifests, tuple(upstream)))

    def findings(self, recorded: list[Finding]) -> list[Finding]:
        jobs = [(where, manifests) for where, manifests, upstream in self._jobs if all(ready(u) for u in upstream)]
        if not jobs:
            return []
        objects = ClusterObjects.from_manifests(self.cluster, [*self._platform, *(m for _, ms in jobs for m in ms)])
        owner = {(m.get("kind"), m["metadata"].get("namespace"), m["metadata"].get("name")): where
                 for where, manifests in jobs for m in manifests}
        already = {(f.where, f.problem.code) for f in recorded}
        tree = CohortTree(objects.cluster_queues, objects.cohorts)
        found = []
        for workload in objects.workloads:
            where = owner[(workload.kind, workload.namespace, workload.name)]
            found += [Finding(where, Problem(r.code, r.field, r.message, r.fix))
                      for r in plan_job(objects, tree, workload).reasons if (where, r.code) not in already]
        return found
