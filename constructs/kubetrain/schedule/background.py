"""The load nobody declared in this repository: recurring workload classes, and past submissions.

A load file (YAML), in the spirit of Kueue's own scheduler performance generator
(test/performance/scheduler/configs/*/generator.yaml: per class a count, a creation interval, a runtime, a
priority and a request), checked strictly (unknown fields, bad values and names the fleet lacks are errors
naming the field path and the fix):

    classes:
      - name: nightly-eval          # workloads are keyed <cluster>/<name>/<index>
        cluster: prod               # may be left out when dist/ holds one cluster with ClusterQueues
        cluster_queue: research
        count: 20                   # how many arrive ...
        every_hours: 1.5            # ... one every 1.5 h (0: all at start_hours), or
        # rate_per_hour: 0.7        # ... at random times, a Poisson process of this rate (seeded)
        start_hours: -4             # the first arrives 4 h before now (already running, perhaps)
        priority: 100               # or priority_class: <a WorkloadPriorityClass of dist/>
        hours: 2                    # how long each runs
        pod_sets:
          - {count: 2, pool: p5, requests: {nvidia.com/gpu: 8, cpu: 96, memory: 1000Gi}}

A history file (CSV) replays past submissions, one a row, hours relative to now (negative: before now):

    submitted_hours,cluster,cluster_queue,priority,hours,pods,pool,nvidia.com/gpu,cpu,memory
    -3.5,prod,training,0,6,2,p5,8,96,1000Gi

Columns past the first seven are resources, each a quantity per pod (empty: not requested); `name` may be
given as a column too. Times are hours from now: the simulation's clock reads 0 at now. Background workloads
ran on the clusters already, so they tolerate every taint and take a flavor with a Topology (as a pod set that
asks for unconstrained topology-aware placement): their pool (the node selector it gives) and their queue's
flavors decide where they go.
"""

from __future__ import annotations

import csv
import io
import math
import random
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kubetrain.admission.cluster_objects import ClusterObjects
from kubetrain.model.pod_sets import Placement, PodSet, amount
from kubetrain.model.vocabulary import NODEPOOL_LABEL
from kubetrain.schedule.fleet_runs import RunSpec
from kubetrain_runtime.problems import INVALID_VALUE, ConfigError, Problem, rule_violation, validate_model

TOLERATE_ALL = ({"operator": "Exists"},)
ANY_TOPOLOGY = Placement("unconstrained", None)  # takes a flavor with a Topology too
PositiveHours = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Hours = Annotated[float, Field(allow_inf_nan=False)]


class LoadPodSet(BaseModel):
    model_config = ConfigDict(extra="forbid")

    count: int = Field(1, ge=1, description="pods of this shape")
    requests: dict[str, str | int | float] = Field(description="one pod's requests: resource -> quantity")
    pool: str | None = Field(None, description="the pool (NodePool) its pods are pinned to")

    @field_validator("requests")
    @classmethod
    def _quantities(cls, requests: dict[str, str | int | float]) -> dict[str, str | int | float]:
        if not requests:
            raise rule_violation(INVALID_VALUE, "no requests", "give what one pod asks for, e.g. "
                                 "{nvidia.com/gpu: 8, cpu: 96, memory: 1000Gi}")
        for resource, quantity in requests.items():
            try:
                amount(resource, quantity)
            except ValueError as error:
                raise rule_violation(INVALID_VALUE, f"{resource}: {error}", "write a Kubernetes quantity: 8, "
                                     "500m, 16Gi") from None
        return requests

    def pod_set(self, name: str) -> PodSet:
        selector = {NODEPOOL_LABEL: self.pool} if self.pool else {}
        # Load that runs on the clusters already passed their flavors' taints: it tolerates every taint.
        return PodSet(name, self.count, {r: amount(r, q) for r, q in self.requests.items()}, selector, None,
                      TOLERATE_ALL, ANY_TOPOLOGY)


class LoadClass(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63)
    cluster: str | None = None
    cluster_queue: str
    count: int = Field(ge=1, le=1_000_000)
    every_hours: Hours | None = Field(None, ge=0)
    rate_per_hour: PositiveHours | None = None
    start_hours: Hours = 0.0
    priority: int | None = None
    priority_class: str | None = None
    hours: PositiveHours
    pod_sets: list[LoadPodSet] = Field(min_length=1)

    @model_validator(mode="after")
    def _one_of_each(self) -> LoadClass:
        if self.every_hours is not None and self.rate_per_hour is not None:
            raise rule_violation(INVALID_VALUE, "both every_hours and rate_per_hour are given",
                                 "keep every_hours (fixed interval) or rate_per_hour (random arrivals)", "rate_per_hour")
        if self.priority is not None and self.priority_class is not None:
            raise rule_violation(INVALID_VALUE, "both priority and priority_class are given",
                                 "keep one: a number, or the name of a WorkloadPriorityClass", "priority_class")
        return self

    def arrivals(self, rng: random.Random) -> list[float]:
        """Hours from now at which its workloads are submitted."""
        if self.rate_per_hour is not None:
            times, now = [], self.start_hours
            for _ in range(self.count):
                now += rng.expovariate(self.rate_per_hour)
                times.append(now)
            return times
        return [self.start_hours + i * (self.every_hours or 0.0) for i in range(self.count)]


class Load(BaseModel):
    """A load file: the recurring workload classes of the clusters that the fleet does not declare."""

    model_config = ConfigDict(extra="forbid")

    classes: list[LoadClass] = Field(min_length=1)


def _problem(path: str, message: str, fix: str) -> Problem:
    return Problem(INVALID_VALUE, path, message, fix)


def _cluster_of(where: str, field_path: str, cluster: str | None, clusters: Mapping[str, ClusterObjects]) -> str:
    queued = sorted(name for name, objects in clusters.items() if objects.cluster_queues)
    if cluster is None:
        if len(queued) == 1:
            return queued[0]
        raise ConfigError(where, [_problem(field_path, "no cluster given and dist/ "
                                           f"has {len(queued)} with ClusterQueues ({', '.join(queued) or 'none'})",
                                           "name the cluster: cluster: " + (queued[0] if queued else "<cluster>"))])
    if cluster not in clusters:
        raise ConfigError(where, [_problem(field_path, f"cluster {cluster} is not "
                                           "in dist/", f"use one of {', '.join(sorted(clusters)) or 'none'}")])
    return cluster


def _check_names(queue_path: str, objects: ClusterObjects, cluster_queue: str, pools: list[tuple[str, str]],
                 priority_class: tuple[str, str] | None, classes: Mapping[str, int]) -> list[Problem]:
    problems = []
    if cluster_queue not in objects.cluster_queues:
        problems.append(_problem(queue_path,
                                 f"ClusterQueue {cluster_queue} is not in cluster {objects.name}",
                                 f"use one of {', '.join(sorted(objects.cluster_queues)) or 'none (declare one)'}"))
    for field_path, pool in pools:
        if pool not in objects.pools:
            problems.append(_problem(field_path, f"pool {pool} is not in cluster {objects.name}",
                                     f"use one of {', '.join(sorted(objects.pools)) or 'none'}, or leave pool out"))
    if priority_class is not None and priority_class[1] not in classes:
        problems.append(_problem(priority_class[0], f"WorkloadPriorityClass {priority_class[1]} is not in "
                                 f"cluster {objects.name}", f"use one of {', '.join(sorted(classes)) or 'none'}, "
                                 "or give priority: <number>"))
    return problems


def load_runs(text: str, where: str, clusters: Mapping[str, ClusterObjects],
              workload_classes: Mapping[str, Mapping[str, int]], seed: int = 0) -> list[RunSpec]:
    """The workloads a load file describes; ConfigError (every problem, with its field path) on bad input.
    `workload_classes` holds each cluster's WorkloadPriorityClass values."""
    import yaml

    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ConfigError(where, [_problem("", f"not YAML: {str(error).splitlines()[0]}",
                                           "write the load file as YAML (see README, the schedule simulation)")])
    load = validate_model(Load, raw, where)
    rng = random.Random(f"load:{seed}")
    problems: list[Problem] = []
    runs: list[RunSpec] = []
    for i, item in enumerate(load.classes):
        path = f"classes[{i}]"
        cluster = _cluster_of(where, f"{path}.cluster", item.cluster, clusters)
        objects, classes = clusters[cluster], workload_classes.get(cluster, {})
        pools = [(f"{path}.pod_sets[{j}].pool", p.pool) for j, p in enumerate(item.pod_sets) if p.pool]
        named_class = (f"{path}.priority_class", item.priority_class) if item.priority_class else None
        found = _check_names(f"{path}.cluster_queue", objects, item.cluster_queue, pools, named_class, classes)
        if found:
            problems += found
            continue
        priority = classes[item.priority_class] if item.priority_class else item.priority or 0
        pod_sets = tuple(p.pod_set("main" if len(item.pod_sets) == 1 else f"set-{j}")
                         for j, p in enumerate(item.pod_sets))
        pool = next((p.pool for p in item.pod_sets if p.pool), None)
        runs += [RunSpec(f"{cluster}/{item.name}/{n}", cluster, item.cluster_queue, priority, at, pod_sets, item.hours,
                         pool, False, None, sum(p.count for p in item.pod_sets))
                 for n, at in enumerate(item.arrivals(rng))]
    if problems:
        raise ConfigError(where, problems)
    return runs


HISTORY_COLUMNS = ("submitted_hours", "cluster", "cluster_queue", "priority", "hours", "pods", "pool")


def history_runs(text: str, where: str, clusters: Mapping[str, ClusterObjects]) -> list[RunSpec]:
    """The past submissions of a history CSV file (see the module docstring); ConfigError on bad input, each
    problem naming the line and column."""
    reader = csv.DictReader(io.StringIO(text))
    header = reader.fieldnames or []
    missing = [c for c in HISTORY_COLUMNS if c not in header]
    if missing:
        raise ConfigError(where, [_problem("header", f"missing column{'s' if len(missing) > 1 else ''} "
                                           f"{', '.join(missing)}", "start the file with the header "
                                           + ",".join(HISTORY_COLUMNS) + ",<resource>,...")])
    resources = [c for c in header if c not in (*HISTORY_COLUMNS, "name")]
    if not resources:
        raise ConfigError(where, [_problem("header", "no resource columns", "add a column per resource a pod "
                                           "requests, e.g. nvidia.com/gpu,cpu,memory")])
    problems: list[Problem] = []
    runs: list[RunSpec] = []
    for line, row in enumerate(reader, start=2):
        at = f"line {line}"
        values: dict[str, Any] = {}
        for column, convert, fix in (("submitted_hours", float, "hours from now, e.g. -3.5"),
                                     ("priority", int, "an integer, e.g. 0"),
                                     ("hours", float, "hours it ran, more than 0"),
                                     ("pods", int, "a whole number of pods, 1 or more")):
            try:
                values[column] = convert(row[column])
                if not math.isfinite(values[column]):
                    raise ValueError
            except (TypeError, ValueError):
                problems.append(_problem(f"{at}, column {column}", f"{row[column]!r} is not a number", fix))
        if problems and problems[-1].path.startswith(f"{at},"):
            continue
        if values["hours"] <= 0 or values["pods"] < 1:
            column = "hours" if values["hours"] <= 0 else "pods"
            problems.append(_problem(f"{at}, column {column}", f"{row[column]} is not more than 0",
                                     "give a positive value"))
            continue
        requests: dict[str, int] = {}
        for resource in resources:
            if (row.get(resource) or "").strip():
                try:
                    requests[resource] = amount(resource, row[resource].strip())
                except ValueError as error:
                    problems.append(_problem(f"{at}, column {resource}", str(error), "write a Kubernetes quantity"))
        cluster = row["cluster"] or None
        try:
            cluster = _cluster_of(where, f"{at}, column cluster", cluster, clusters)
        except ConfigError as error:
            problems += error.problems
            continue
        pool = (row.get("pool") or "").strip() or None
        objects = clusters[cluster]
        problems += _check_names(f"{at}, column cluster_queue", objects, row["cluster_queue"],
                                 [(f"{at}, column pool", pool)] if pool else [], None, {})
        if problems:
            continue
        name = (row.get("name") or "").strip() or f"history/{line}"
        selector = {NODEPOOL_LABEL: pool} if pool else {}
        pod_sets = (PodSet("main", values["pods"], requests, selector, None, TOLERATE_ALL, ANY_TOPOLOGY),)
        runs.append(RunSpec(f"{cluster}/{name}", cluster, row["cluster_queue"], values["priority"],
                            values["submitted_hours"], pod_sets, values["hours"], pool, False, None, values["pods"]))
    if problems:
        raise ConfigError(where, problems)
    return runs
