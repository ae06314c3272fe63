"""Admission as a step of synth (kubetrain.pipeline), reported like every other rule.

A cluster keeps the plain manifests its queue, pool and job constructs emit (`AdmissionRecord`, kubetrain.state); a
job's are its entries in the cluster, read when the step runs, so they are judged as `job.patch()` left them. The
step runs once the fleet is defined (a cohort may gain the member a job borrows from after the job is defined) and
reports each problem on the job's definition with the user's field path (`definition_findings`). A job whose pool
or queue, or anything behind them, has an error of its own is left out: that error says why.

Synth judges the objects once more as it writes them (`rendered_findings`), after the fleet's render steps and
with every object of the charts, the cdk8s objects a user added among them: what `kubetrain plan` reads from
dist/ is what synth judged, so the two reach one verdict.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kubetrain.admission.cluster_objects import ClusterObjects, admission_kinds
from kubetrain.admission.quota import CohortTree
from kubetrain.admission.verdict import plan_cluster, plan_jobs
from kubetrain.model.diagnostics import Finding
from kubetrain.state import AdmissionRecord, ready
from kubetrain_runtime.problems import Problem


def definition_findings(record: AdmissionRecord, recorded: list[Finding]) -> list[Finding]:
    """The admission problems of one cluster's jobs as defined, each on the job's definition with the user's
    field path; a job whose pool or queue is not ready (it has errors of its own) is left out, as is a problem
    `recorded` already holds for its job."""
    jobs = [(where, [e.manifest for e in emitted]) for where, emitted, upstream in record.jobs
            if all(ready(u) for u in upstream)]
    if not jobs:
        return []
    objects = ClusterObjects.from_manifests(record.cluster, [*record.platform, *(m for _, ms in jobs for m in ms)])
    owner = {(m.get("kind"), m["metadata"].get("namespace"), m["metadata"].get("name")): where
             for where, manifests in jobs for m in manifests}
    already = {(f.where, f.problem.code) for f in recorded}
    tree = CohortTree(objects.cluster_queues, objects.cohorts)
    found = []
    for plan in plan_jobs(objects, tree, objects.workloads):
        workload = plan.workload
        where = owner[(workload.kind, workload.namespace, workload.name)]
        found += [Finding(where, Problem(r.code, r.field, r.message, r.fix))
                  for r in plan.reasons if (where, r.code) not in already]
    return found


def rendered_findings(objects: Mapping[Path, Mapping[str, Any]]) -> list[Finding]:
    """The admission problems of the objects synth is about to write (dist/-relative path -> object), each on
    its job's definition (`<cluster>/<namespace>/<job>`): what `kubetrain plan` would say of them."""
    kinds = admission_kinds()
    clusters: dict[str, list[Mapping[str, Any]]] = {}
    for path, obj in objects.items():
        if obj.get("kind") in kinds:
            clusters.setdefault(path.parts[0], []).append(obj)
    found = []
    for cluster, manifests in sorted(clusters.items()):
        for plan in plan_cluster(ClusterObjects.from_manifests(cluster, manifests))[0]:
            where = f"{cluster}/{plan.workload.namespace}/{plan.workload.job}"
            found += [Finding(where, Problem(r.code, r.field, r.message, r.fix)) for r in plan.reasons]
    return found
