"""`kubetrain plan`: every job's admission verdict read back from dist/, and what each pool is asked for.

    kubetrain plan [--dist dist] [--json]

One row per job: cluster/namespace/job, its pool and queue (LocalQueue and ClusterQueue), its demand (pods,
accelerators, nodes of the pool at least), the capacity against it (the most nodes the pool can have, the
queue's nominal quota of the job's main resource in the flavor Kueue assigns it on an idle cluster, and the
potential with what the cohort can lend) and the verdict, fits, borrows or never, with the rules behind it.
Then per pool: the nodes its declared jobs need together against the nodes it can have, and which jobs can run
at the same time. `kubetrain diff` compares the verdicts of two revisions of dist/ with `verdict_changes`.

Only the files of the kinds admission reads are parsed (synth names files <Kind>.<name>.yaml).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kubetrain.admission.cluster_objects import ClusterObjects, admission_kinds
from kubetrain.admission.verdict import JobPlan, PoolPlan, plan_cluster
from kubetrain.cost.annotations import ANNOTATION_FIX
from kubetrain.model.manifests import UnreadableManifest, read_manifest, yaml_files
from kubetrain.model.memory_annotation import describe, read_annotation
from kubetrain.model.vocabulary import ACCELERATOR_RESOURCES, JOB_LABEL

EXIT_NEVER = 1
EXIT_BAD_INPUT = 2


class PlanInputError(Exception):
    """dist/ cannot be read: one line for the user."""


def _wanted(path: str, kinds: set[str]) -> bool:
    return Path(path).name.split(".", 1)[0] in kinds


def plan_files(files: Mapping[str, bytes], clusters: set[str] | None = None,
               folder: str = "dist") -> tuple[list[JobPlan], list[PoolPlan]]:
    """Plans of every cluster folder among `files` (dist/-relative path -> contents), or of `clusters` only;
    `folder` names where the files are, for messages."""
    manifests: dict[str, list[dict[str, Any]]] = {}
    kinds = admission_kinds()
    for path, data in sorted(files.items()):
        cluster = Path(path).parts[0]
        if len(Path(path).parts) < 2 or not _wanted(path, kinds) or (clusters is not None and cluster not in clusters):
            continue
        try:
            documents = read_manifest(f"{folder}/{path}", data)
        except UnreadableManifest as error:
            raise PlanInputError(str(error)) from None
        manifests.setdefault(cluster, []).extend(documents)
    jobs: list[JobPlan] = []
    pools: list[PoolPlan] = []
    for cluster, objects in sorted(manifests.items()):
        try:
            found = plan_cluster(ClusterObjects.from_manifests(cluster, objects))
        except (ValueError, TypeError, AttributeError, KeyError) as error:
            raise PlanInputError(f"{folder}/{cluster}: {_culprit(cluster, objects)} is malformed: {error}; fix: "
                                 f"{ANNOTATION_FIX}") from None
        memory = {((o.get("metadata") or {}).get("namespace"), ((o.get("metadata") or {}).get("labels") or {})
                   .get(JOB_LABEL)): estimate for o in objects if (estimate := read_annotation(o)) is not None}
        for job in found[0]:
            job.memory = memory.get((job.workload.namespace, job.workload.job))
        jobs += found[0]
        pools += found[1]
    return sorted(jobs, key=lambda j: j.key), pools


def _culprit(cluster: str, objects: list[dict[str, Any]]) -> str:
    """The object a cluster's objects could not be read for: the first that cannot be read alone."""
    for obj in objects:
        try:
            ClusterObjects.from_manifests(cluster, [obj])
        except (ValueError, TypeError, AttributeError, KeyError):
            return f"{obj.get('kind')} {(obj.get('metadata') or {}).get('name')}"
    return "an object admission reads"


def plan_dist(dist: Path) -> tuple[list[JobPlan], list[PoolPlan]]:
    if not dist.is_dir():
        raise PlanInputError(f"{dist} is not a folder; fix: run `kubetrain synth` to write dist, or give --dist the "
                             "folder it wrote")
    return plan_files(yaml_files(dist), folder=str(dist))


def _cells(plan: JobPlan) -> list[str]:
    w = plan.workload
    queue = f"{w.queue} ({plan.cluster_queue})" if w.queue and plan.cluster_queue else (w.queue or "-")
    unit = next((a.split("/")[-1] for a in ACCELERATOR_RESOURCES if any(p.requests.get(a) for p in w.pod_sets)), "gpu")
    return [f"{plan.cluster}/{w.namespace}/{w.job}", plan.pool or "-", queue, str(w.pods),
            f"{w.accelerators} {unit}" if w.accelerators else "0", _dash(plan.nodes_needed), _dash(plan.pool_nodes),
            plan.flavor or "-", _short(plan.quota), _short(plan.potential), plan.verdict]


def _dash(value: int | None) -> str:
    return "-" if value is None else str(value)


def _short(amount: str | None) -> str:
    """'112 nvidia.com/gpu' -> '112 gpu'."""
    if not amount:
        return "-"
    value, _, resource = amount.partition(" ")
    return f"{value} {resource.rsplit('/', 1)[-1]}"


HEADER = ["JOB", "POOL", "QUEUE", "PODS", "ACCEL", "NODES", "POOL MAX", "FLAVOR", "QUOTA", "POTENTIAL", "VERDICT"]


def render_text(jobs: list[JobPlan], pools: list[PoolPlan]) -> str:
    rows = [HEADER, *(_cells(j) for j in jobs)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]
    lines = []
    for i, row in enumerate(rows):
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
        if i:
            job = jobs[i - 1]
            lines += [f"    {r.severity} {r.code} {r.field}: {r.message}" for r in job.reasons]
            lines += [f"    note: {note}" for note in job.notes]
            lines += [f"    memory {describe(job.memory)}"] if job.memory else []
    if pools:
        lines += ["", "POOLS"]
        lines += [f"  {_pool_line(p)}" for p in pools]
    never = sum(j.verdict == "never" for j in jobs)
    borrows = sum(j.verdict == "borrows" for j in jobs)
    lines += ["", f"{len(jobs)} jobs: {len(jobs) - never - borrows} fit, {borrows} borrow, {never} never start"]
    return "\n".join(lines) + "\n"


def _pool_line(pool: PoolPlan) -> str:
    capacity = pool.pool.capacity_nodes
    name = f"{pool.cluster}/{pool.pool.name}"
    held = f"{capacity} nodes ({pool.pool.limited_by.split(':')[0]})" if capacity is not None else "nodes unknown"
    if not pool.demand:
        return f"{name}: {held}; no declared job needs it"
    needs = ", ".join(f"{job.split('/')[-1]} {nodes}" for job, nodes in pool.demand)
    line = f"{name}: {held}; declared jobs need {pool.total} together ({needs})"
    if capacity is None or pool.total <= capacity:
        return f"{line}: all can run at once"
    together = pool.at_once()
    waiting = [job.split("/")[-1] for job, _ in pool.demand if job not in together]
    return f"{line}: not all at once; {', '.join(j.split('/')[-1] for j in together) or 'none'} fit together, " \
           f"{', '.join(waiting)} wait"


def render_json(jobs: list[JobPlan], pools: list[PoolPlan]) -> str:
    return json.dumps({"jobs": [j.to_json() for j in jobs], "pools": [p.to_json() for p in pools]}, indent=2) + "\n"


def exit_code(jobs: list[JobPlan]) -> int:
    return EXIT_NEVER if any(j.verdict == "never" for j in jobs) else 0


def verdict_changes(old: Mapping[str, bytes], new: Mapping[str, bytes], old_folder: str = "base",
                    new_folder: str = "dist") -> list[str]:
    """One line per job whose verdict differs between two revisions of dist/ (a new job that does not fit
    counts), planning only the cluster folders where a file differs."""
    changed = {Path(p).parts[0] for p in old.keys() | new.keys() if old.get(p) != new.get(p)}
    if not changed:
        return []
    before = {p.key: p for p in plan_files(old, changed, old_folder)[0]}
    after = {p.key: p for p in plan_files(new, changed, new_folder)[0]}
    lines = []
    for key in sorted(after):
        was, now = before.get(key), after[key]
        if (was.verdict if was else "fits") == now.verdict:
            continue
        why = f": {now.reasons[0].code} {now.reasons[0].message}" if now.reasons else ""
        lines.append(f"{'/'.join(key)}: {was.verdict if was else 'new job'} -> {now.verdict}{why}")
    return lines
