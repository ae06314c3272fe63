"""When each run starts and ends, with its spread: the simulation (kubetrain.schedule.simulation) run over
replicas whose durations are drawn around the estimates.

A duration estimate is uncertain (the cost model's MFU, a dataset's real length, a restart more or less), so
each replica multiplies every workload's duration by its own lognormal factor of median 1 and shape `spread`
(0.25: a run's P90 is about 1.4 times its estimate). The factors are drawn per (seed, replica, workload key):
the same run gets the same factor on both sides of a change (common random numbers), so `kubetrain diff`
compares like with like and a difference is the change's, not the dice's. Per run the replicas give P50 and
P90 of its admission, wait, start, finish and preemptions; a run never admitted in a replica counts as later
than any time. One more replica at the estimates themselves is kept whole for the timeline picture.

Workloads are ordered by submission time, then key, and take their Kueue UID (the last tie-break) in that
order: adding a run leaves the order of the others as it was.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kubetrain.admission.cluster_objects import ClusterObjects
from kubetrain.schedule.fleet_runs import HOUR, RunSpec
from kubetrain.schedule.simulation import Outcome, Simulation
from kubetrain.schedule.workload_state import SimWorkload

REPLICAS = 20
SPREAD = 0.25


def percentile(values: Sequence[float | None], q: float) -> float | None:
    """The q-quantile (nearest rank) of `values`, None standing for never (later than any time)."""
    ranked = sorted(math.inf if v is None else v for v in values)
    if not ranked:
        return None
    value = ranked[min(len(ranked) - 1, max(0, math.ceil(q * len(ranked)) - 1))]
    return None if value == math.inf else value


@dataclass
class RunForecast:
    spec: RunSpec
    admitted: list[float | None] = field(default_factory=list)  # hours from now, per replica
    started: list[float | None] = field(default_factory=list)
    finished: list[float | None] = field(default_factory=list)
    preemptions: list[int] = field(default_factory=list)
    preempted_by: Counter[str] = field(default_factory=Counter)

    @property
    def waits(self) -> list[float | None]:
        return [None if a is None else a - self.spec.submitted_hours for a in self.admitted]

    def p(self, measure: str, q: float) -> float | None:
        values = getattr(self, measure)
        return percentile([float(v) for v in values] if measure == "preemptions" else values, q)

    def to_json(self) -> dict[str, object]:
        spec = self.spec
        row: dict[str, object] = {"job": spec.key, "cluster_queue": spec.cluster_queue, "priority": spec.priority,
                                  "gpus": spec.gpus, "submitted_hours": spec.submitted_hours, "hours": spec.hours}
        for measure in ("admitted", "waits", "started", "finished", "preemptions"):
            name = {"waits": "wait", "admitted": "admitted_at", "started": "started_at",
                    "finished": "finished_at"}.get(measure, measure)
            row[name] = {"p50": self.p(measure, 0.5), "p90": self.p(measure, 0.9)}
        row["never_admitted"] = sum(a is None for a in self.admitted) / max(1, len(self.admitted))
        row["preempted_by"] = dict(self.preempted_by.most_common())
        return row


@dataclass
class ClusterForecast:
    cluster: str
    runs: dict[str, RunForecast]  # the declared runs, by key
    nominal: Outcome  # the replica at the estimated durations, segments recorded
    background: int  # workloads of background load in each replica
    cycles: int = 0


def duration_factor(seed: int, replica: int, key: str, spread: float) -> float:
    if spread <= 0:
        return 1.0
    return random.Random(f"{seed}:{replica}:{key}").lognormvariate(0.0, spread)


def _workloads(specs: Sequence[RunSpec], factor: Callable[[RunSpec], float]) -> list[SimWorkload]:
    ordered = sorted(specs, key=lambda s: (s.submitted_hours, s.key))
    found = []
    for uid, spec in enumerate(ordered, start=1):
        w = SimWorkload(spec.key, spec.cluster_queue, spec.priority, spec.submitted_hours * HOUR, spec.pod_sets,
                        spec.hours * HOUR * factor(spec), uid=uid, pool=spec.pool, declared=spec.declared)
        found.append(w)
    return found


def _hours(seconds: float | None) -> float | None:
    return None if seconds is None else seconds / HOUR


def forecast_cluster(objects: ClusterObjects, specs: Sequence[RunSpec], replicas: int = REPLICAS, seed: int = 0,
                     spread: float = SPREAD, **options: object) -> ClusterForecast:
    """Simulate one cluster `replicas` times (and once at the estimates) and gather each declared run's
    spread. `options` go to the Simulation (provisioning_seconds, fair_sharing, cycle_seconds, ...)."""
    declared = {s.key: RunForecast(s) for s in specs if s.declared}
    nominal = Simulation(objects, _workloads(specs, lambda s: 1.0), **options).run()  # type: ignore[arg-type]
    cycles = nominal.cycles
    for replica in range(replicas):
        workloads = _workloads(specs, lambda s: duration_factor(seed, replica, s.key, spread))
        outcome = Simulation(objects, workloads, record=False, **options).run()  # type: ignore[arg-type]
        cycles += outcome.cycles
        for w in outcome.workloads:
            run = declared.get(w.key)
            if run is None:
                continue
            run.admitted.append(_hours(w.admitted_at))
            run.started.append(_hours(w.started_at))
            run.finished.append(_hours(w.finished_at))
            run.preemptions.append(len(w.preempted_at))
            run.preempted_by.update(w.preempted_by)
    return ClusterForecast(objects.name, declared, nominal, sum(not s.declared for s in specs), cycles)


# -- what `kubetrain simulate` prints --------------------------------------------------------------------------

def hours_text(value: float | None) -> str:
    if value is None:
        return "never"
    return f"{value:.1f}" if abs(value) < 100 else f"{value:.0f}"


def spread_text(run: RunForecast, measure: str) -> str:
    p50, p90 = run.p(measure, 0.5), run.p(measure, 0.9)
    if measure == "preemptions":
        return f"{p50:.0f}/{p90:.0f}" if p50 is not None and p90 is not None else "-"
    return f"{hours_text(p50)}/{hours_text(p90)}"


HEADER = ["JOB", "QUEUE", "PRIORITY", "GPUS", "SUBMIT", "HOURS", "ADMIT", "WAIT", "START", "FINISH", "PREEMPTED"]


def render_text(forecasts: Sequence[ClusterForecast], notes: Sequence[str], replicas: int, seed: int,
                spread: float) -> str:
    rows = [HEADER]
    details: dict[int, list[str]] = {}
    for cluster in forecasts:
        for run in sorted(cluster.runs.values(), key=lambda r: r.spec.key):
            s = run.spec
            rows.append([s.key, s.cluster_queue, str(s.priority), str(s.gpus), hours_text(s.submitted_hours),
                         hours_text(s.hours), spread_text(run, "admitted"), spread_text(run, "waits"),
                         spread_text(run, "started"), spread_text(run, "finished"), spread_text(run, "preemptions")])
            if run.preempted_by:
                by = ", ".join(f"{k} ({n}/{replicas} replicas)" for k, n in run.preempted_by.most_common(3))
                details[len(rows) - 1] = [f"    preempted by {by}"]
            never = sum(a is None for a in run.admitted)
            if never:
                details.setdefault(len(rows) - 1, []).append(
                    f"    never admitted in {never} of {replicas} replicas (kubetrain plan says whether it ever can)")
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]
    if len(rows) == 1:
        return "\n".join(["kubetrain simulate: no queued runs to simulate (a run is Kueue's when its queue label "
                          "names a LocalQueue)", *(f"note: {note}" for note in notes)]) + "\n"
    lines = [f"kubetrain simulate: Kueue v0.19.2's scheduler over time; hours from now; P50/P90 over {replicas} "
             f"replicas (durations x lognormal spread {spread:g}, seed {seed})", ""]
    for i, row in enumerate(rows):
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
        lines += details.get(i, [])
    for cluster in forecasts:
        if cluster.background:
            lines.append(f"\n{cluster.cluster}: {cluster.background} background workloads in each replica")
    lines += [f"note: {note}" for note in notes]
    return "\n".join(lines) + "\n"


def render_json(forecasts: Sequence[ClusterForecast], notes: Sequence[str], replicas: int, seed: int,
                spread: float) -> dict[str, object]:
    return {"kueue_version": "v0.19.2", "replicas": replicas, "seed": seed, "spread": spread, "unit": "hours from now",
            "jobs": [run.to_json() for c in forecasts for run in sorted(c.runs.values(), key=lambda r: r.spec.key)],
            "background": {c.cluster: c.background for c in forecasts}, "notes": list(notes)}
