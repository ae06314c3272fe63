"""What a change to dist/ costs: `kubetrain diff` prices every job whose run object changed.

Per job, from its cost at the base revision and in the working tree (kubetrain.cost.estimate):
  - a new job, or a new run of a create-once job (a new `<job>-<hash>` name: Argo CD creates it and prunes the
    old run, whose work is lost), costs its whole run;
  - a job changed in place costs the difference; a removed job gives back its planned run.
The headline sums them: "this change adds $X and Y GPU-hours to planned runs".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kubetrain.cost.estimate import JOB_LABEL, NODEPOOL_LABEL, JobCost, fleet_costs
from kubetrain.cost.report import number, usd
from kubetrain.gitops import waves
from kubetrain.gitops.runs import run_shape, runtime_pod_spec

# Reads the manifests at the given paths of one side (relative to dist/) as (cluster folder, manifest).
Loader = Callable[[Iterable[str]], list[tuple[str, dict[str, Any]]]]


@dataclass
class JobChange:
    key: tuple[str, str, str]
    change: str  # new job | new run | changed | removed
    old: JobCost | None
    new: JobCost | None

    def _delta(self, value: Callable[[JobCost], float | None]) -> float | None:
        """The new run's whole value for a new job or run, the difference for a job changed in place."""
        new = value(self.new) if self.new else 0.0
        old = value(self.old) if self.old and self.change in ("changed", "removed") else 0.0
        return None if new is None or old is None else new - old

    @property
    def hours(self) -> float | None:
        return self._delta(lambda c: c.hours(c.node_range[1]))

    @property
    def gpu_hours(self) -> float | None:
        return self._delta(lambda c: c.gpu_hours)

    @property
    def usd(self) -> float | None:
        return self._delta(lambda c: c.usd)

    @property
    def sunk_usd(self) -> float | None:
        return self._delta(lambda c: c.sunk_usd)

    @property
    def name(self) -> str:
        return "/".join(self.key)

    def description(self) -> str:
        if self.change == "new run" and self.old and self.new:
            return f"new run {self.new.run} (replaces {self.old.run}; priced as a whole run)"
        return self.change

    def basis(self) -> str:
        cost = self.new or self.old
        if cost is None or cost.price is None:
            return "no price"
        return f"{cost.shape.pods} x {cost.instance_type} {cost.capacity_type} at {usd(cost.price.usd)}/node-h"


@dataclass
class CostChange:
    jobs: list[JobChange] = field(default_factory=list)

    @property
    def priced(self) -> list[JobChange]:
        return [job for job in self.jobs if job.usd is not None]

    @property
    def usd(self) -> float:
        return sum(job.usd or 0.0 for job in self.jobs)

    @property
    def sunk_usd(self) -> float:
        return sum(job.sunk_usd or 0.0 for job in self.jobs)

    @property
    def gpu_hours(self) -> float:
        return sum(job.gpu_hours or 0.0 for job in self.jobs)

    def headline(self) -> str:
        verb, preposition = ("adds", "to") if self.usd >= 0 and self.gpu_hours >= 0 else ("removes", "from")
        text = (f"this change {verb} {usd(abs(self.usd))} and {number(abs(self.gpu_hours))} GPU-hours {preposition} "
                "planned runs")
        if self.sunk_usd:
            text += f" ({usd(abs(self.sunk_usd))} of it on reserved capacity already paid for)"
        unpriced = len(self.jobs) - len(self.priced)
        if unpriced:
            text += f"; {unpriced} job{'s' if unpriced > 1 else ''} without a price"
        return text


def _needed_paths(objects: list[tuple[str, dict[str, Any]]]) -> set[str]:
    """The files a run's cost reads besides the run object (synth's layout: <cluster>/<namespace or _cluster>/
    <Kind>.<name>.yaml): the ConfigMaps its pods mount, its NodePool, and a TrainJob's TrainingRuntime, which
    holds its pods."""
    paths: set[str] = set()
    for cluster, obj in objects:
        namespace = (obj.get("metadata") or {}).get("namespace", "")
        if obj.get("kind") == "TrainingRuntime":
            pods = [runtime_pod_spec(obj)]
        else:
            shape = run_shape(obj)
            pods = shape.pod_specs
            if shape.runtime:
                paths.add(f"{cluster}/{namespace}/TrainingRuntime.{shape.runtime}.yaml")
        for pod in pods:
            paths |= {f"{cluster}/{namespace}/ConfigMap.{name}.yaml" for v in pod.get("volumes") or []
                      if (name := (v.get("configMap") or {}).get("name"))}
            if pool := (pod.get("nodeSelector") or {}).get(NODEPOOL_LABEL):
                paths.add(f"{cluster}/_cluster/NodePool.{pool}.yaml")
    return paths


def _costs(changed: Iterable[tuple[str, dict[str, Any]]], load: Loader) -> dict[tuple[str, str, str], JobCost]:
    runs = [(cluster, obj) for cluster, obj in changed
            if waves.group_kind(obj) in waves.IMMUTABLE_RUNS and ((obj.get("metadata") or {}).get("labels") or {})
            .get(JOB_LABEL)]
    extra = load(_needed_paths(runs))
    extra += load(_needed_paths([(c, o) for c, o in extra if o.get("kind") == "TrainingRuntime"]))
    return {cost.key: cost for cost in fleet_costs([*runs, *extra])}


def _priced_as(cost: JobCost | None) -> tuple[Any, ...]:
    """What a job's cost depends on: a job changed in ways that leave it equal is not repriced."""
    if cost is None:
        return ()
    return (cost.work, cost.node_range, cost.shape.accelerators_per_pod, cost.peak_flops, cost.estimate.mfu,
            cost.estimate.ettr, cost.price, cost.pool.reserved_nodes if cost.pool else 0)


def price_change(old: Iterable[tuple[str, dict[str, Any]]], new: Iterable[tuple[str, dict[str, Any]]],
                 load_old: Loader, load_new: Loader) -> CostChange:
    """The cost of the jobs whose run objects changed between two revisions of dist/: `old` and `new` are the
    changed objects of each side, `load_old`/`load_new` read further files of each side."""
    before, after = _costs(old, load_old), _costs(new, load_new)
    jobs = []
    for key in sorted(before.keys() | after.keys()):
        was, now = before.get(key), after.get(key)
        change = ("new job" if was is None else "removed" if now is None else
                  "new run" if was.run != now.run else "changed")
        if change != "changed" or _priced_as(was) != _priced_as(now):
            jobs.append(JobChange(key, change, was, now))
    return CostChange(jobs)


def text_lines(change: CostChange) -> list[str]:
    if not change.jobs:
        return []
    lines = [f"cost: {change.headline()}"]
    for job in change.jobs:
        lines.append(f"  {job.name}: {job.description()}: {number(job.hours, True, ' h')}, "
                     f"{number(job.gpu_hours, True)} GPU-hours, {usd(job.usd, True)} ({job.basis()})")
    return lines


def markdown_lines(change: CostChange) -> list[str]:
    if not change.jobs:
        return []
    lines = ["#### Cost", "", f"**{change.headline()}.**", "",
             "| job | change | Δ hours | Δ GPU-hours | Δ $ | priced as |", "|---|---|---|---|---|---|"]
    for job in change.jobs:
        lines.append(f"| `{job.name}` | {job.description()} | {number(job.hours, True)} | "
                     f"{number(job.gpu_hours, True)} | {usd(job.usd, True)} | {job.basis()} |")
    lines += ["", ("_Estimates: FLOPs / (GPUs x peak x MFU x ETTR); `kubetrain cost` shows the assumptions and "
                   "the price table's sources._"), ""]
    return lines
