"""What a change to dist/ costs: `kubetrain diff` prices every job whose run object changed.

Per job, from its cost at the base revision and in the working tree (kubetrain.cost.estimate):
  - a new job, or a new run of a create-once job (a new `<job>-<hash>` name: Argo CD creates it and prunes the
    old run, whose work is lost), costs its whole run;
  - a job changed in place costs the difference; a removed job gives back its planned run.
The headline sums what is added and what is removed apart, GPU-hours and dollars each, and nets them: a change
that drops a reserved job and adds a spot one says both. A dollar total is never printed over a job without a
price: the headline names those jobs instead (their GPU-hours still count when they have them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kubetrain.cost.cost_report import number, usd
from kubetrain.cost.estimate import JobCost, fleet_costs
from kubetrain.kinds.base import pod_specs
from kubetrain.kinds.kind_registry import kind_of, run_kind, shape_of
from kubetrain.model.vocabulary import JOB_LABEL, NODEPOOL_LABEL

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
        # A run without accelerators takes no GPU-hours (none unknown): it has no peak to estimate hours from.
        return self._delta(lambda c: c.gpu_hours if c.shape.accelerators_per_pod else 0.0)

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


@dataclass(frozen=True)
class Tally:
    """One measure (dollars or GPU-hours) over the changed jobs: what they add, what they give back, and the jobs
    it is unknown for."""

    added: float
    removed: float  # positive: what the removed runs and cheaper changes give back
    unknown: tuple[str, ...]  # jobs whose change in this measure is unknown

    @classmethod
    def of(cls, values: list[tuple[str, float | None]]) -> Tally:
        return cls(sum(v for _, v in values if v is not None and v > 0),
                   -sum(v for _, v in values if v is not None and v < 0),
                   tuple(name for name, v in values if v is None))

    @property
    def net(self) -> float:
        """Only meaningful when nothing is unknown (the headline prints it only then)."""
        return self.added - self.removed


@dataclass
class CostChange:
    jobs: list[JobChange] = field(default_factory=list)

    @property
    def dollars(self) -> Tally:
        return Tally.of([(job.name, job.usd) for job in self.jobs])

    @property
    def gpu_hours(self) -> Tally:
        return Tally.of([(job.name, job.gpu_hours) for job in self.jobs])

    @property
    def sunk_usd(self) -> float:
        """Of the added dollars, those on reserved capacity already paid for."""
        return sum(job.sunk_usd for job in self.jobs if job.sunk_usd and job.sunk_usd > 0)

    def headline(self) -> str:
        hours, dollars = self.gpu_hours, self.dollars
        clauses = [_clause(hours, "GPU-hours", lambda v: f"{number(v)} GPU-hours",
                           lambda v: number(v, True) + " GPU-hours"),
                   _clause(dollars, "dollars (no price)", usd, lambda v: usd(v, True))]
        text = "this change " + "; ".join(clause for clause in clauses if clause)
        if self.sunk_usd and dollars.added:
            text += f" ({usd(self.sunk_usd)} of the added dollars on reserved capacity already paid for)"
        return text


def _clause(tally: Tally, what: str, amount: Callable[[float], str], signed: Callable[[float], str]) -> str:
    """"adds X and removes Y (net Z)"; where the measure is unknown for some jobs, the sums over the others and the
    jobs named, never a net figure that would hide them."""
    unknown = tally.unknown
    parts = []
    if not unknown:
        parts.append(f"adds {amount(tally.added)} and removes {amount(tally.removed)} (net {signed(tally.net)})")
    elif tally.added or tally.removed:  # no zero side here: "$0.00" next to an unknown would read as a total
        sides = [f"{verb} {amount(value)}" for verb, value in (("adds", tally.added), ("removes", tally.removed))
                 if value]
        parts.append(" and ".join(sides) + " where known")
    if unknown:
        names = ", ".join(unknown[:3]) + (f" and {len(unknown) - 3} more" if len(unknown) > 3 else "")
        parts.append(f"{what} unknown for {len(unknown)} job{'s' if len(unknown) > 1 else ''} ({names})")
    return ", ".join(parts)


def _needed_paths(objects: list[tuple[str, dict[str, Any]]]) -> set[str]:
    """The files a run's cost reads besides the run object (synth's layout: <cluster>/<namespace or _cluster>/
    <Kind>.<name>.yaml): the ConfigMaps its pods mount, its NodePool, and what its shape is read from (a TrainJob's
    TrainingRuntime, which holds its pods)."""
    paths: set[str] = set()
    for cluster, obj in objects:
        namespace = (obj.get("metadata") or {}).get("namespace", "")
        kind = kind_of(obj)
        if kind is not None and kind.holds_pod_templates:
            pods = pod_specs(obj)
        else:
            shape = shape_of(obj)
            pods = shape.pod_specs
            for read, name in shape.reads:  # a TrainJob's runtime: namespaced, or cluster-scoped
                paths |= {f"{cluster}/{folder}/{read}.{name}.yaml" for folder in (namespace, "_cluster")}
        for pod in pods:
            paths |= {f"{cluster}/{namespace}/ConfigMap.{name}.yaml" for v in pod.get("volumes") or []
                      if (name := (v.get("configMap") or {}).get("name"))}
            if pool := (pod.get("nodeSelector") or {}).get(NODEPOOL_LABEL):
                paths.add(f"{cluster}/_cluster/NodePool.{pool}.yaml")
    return paths


def _costs(changed: Iterable[tuple[str, dict[str, Any]]], load: Loader) -> dict[tuple[str, str, str], JobCost]:
    runs = [(cluster, obj) for cluster, obj in changed
            if run_kind(obj) is not None and ((obj.get("metadata") or {}).get("labels") or {})
            .get(JOB_LABEL)]
    extra = load(_needed_paths(runs))
    # What the pods of a template holder (a TrainJob's runtime) mount and run on.
    extra += load(_needed_paths([(c, o) for c, o in extra if (kind := kind_of(o)) and kind.holds_pod_templates]))
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
