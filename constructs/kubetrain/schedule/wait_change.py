"""What a change does to everyone else's wait: `kubetrain diff` simulates the base and the changed fleet.

Every cluster whose objects the schedule reads changed (runs, their run configs, queues, cohorts, flavors,
pools, priority classes) is simulated on both sides with the same replicas (kubetrain.schedule.forecast: the
same run draws the same duration factor on both sides, so per replica the two sides differ by the change
alone). Per run present on both sides: the change of its wait to admission and of its finish, per replica,
and their P50 and P90; the preemptions it suffers on each side, and by which runs. The base's runs are taken as queued now, and
the runs the change adds as submitted when Argo CD syncs the merge (SYNC_HOURS later), so a run of a higher
priority preempts what is already admitted, as it would after the merge. A run waits longer when its
P50 or P90 wait grows by more than a minute, or it is preempted more often. The waiting it adds is priced like
the rest of the comment: P50 extra wait x the run's GPUs (GPU-hours) and x its nodes x its node's hourly price
(dollars: what the held-up capacity is worth at the price table's rates). Runs only the change adds are listed
with their own predicted wait.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kubetrain.admission.cluster_objects import admission_kinds, workloads
from kubetrain.cost.cost_report import number, usd
from kubetrain.schedule.fleet_runs import job_key
from kubetrain.schedule.forecast import REPLICAS, SPREAD, RunForecast, hours_text
from kubetrain.schedule.simulate_command import SimulationInputs, cluster_manifests, simulate_manifests

MINUTE = 1 / 60  # hours: a wait that grows by less is the same wait
# The change's new runs arrive when Argo CD syncs the merge: its default reconciliation period is 180 s
# (argo-cd docs, operator-manual/argocd-cm.yaml, timeout.reconciliation). The base's runs are queued already.
SYNC_HOURS = 180 / 3600
SCHEDULE_KINDS = ("WorkloadPriorityClass", "PriorityClass", "ConfigMap")  # besides admission's kinds


@dataclass
class RunWaitChange:
    key: str
    base: RunForecast
    head: RunForecast

    def _paired(self, measure: str) -> list[float]:
        deltas = []
        for before, after in zip(getattr(self.base, measure), getattr(self.head, measure)):
            if before is None and after is None:
                deltas.append(0.0)
            elif after is None:
                deltas.append(math.inf)
            elif before is None:
                deltas.append(-math.inf)
            else:
                deltas.append(after - before)
        return deltas

    def delta(self, measure: str, q: float) -> float:
        """The q-quantile (nearest rank) of the per-replica change (hours; inf: never admitted now)."""
        ranked = sorted(self._paired(measure))
        return ranked[min(len(ranked) - 1, max(0, math.ceil(q * len(ranked)) - 1))] if ranked else 0.0

    @property
    def new_preemptors(self) -> list[str]:
        return [k for k, n in self.head.preempted_by.most_common() if n > self.base.preempted_by.get(k, 0)]

    @property
    def preempted_more(self) -> bool:
        return sum(self.head.preemptions) > sum(self.base.preemptions)

    @property
    def later(self) -> bool:
        return any(self.delta(m, q) > MINUTE for m in ("waits", "finished") for q in (0.5, 0.9)) or self.preempted_more

    @property
    def earlier(self) -> bool:
        return self.delta("finished", 0.5) < -MINUTE and not self.preempted_more

    @property
    def waiting_gpu_hours(self) -> float:
        """The run's durations are the same on both sides of a replica: all it finishes later, it waits longer
        (queued, or requeued after a preemption)."""
        return max(0.0, _finite(self.delta("finished", 0.5))) * self.head.spec.gpus

    @property
    def waiting_usd(self) -> float | None:
        spec = self.head.spec
        if spec.node_usd is None:
            return None
        return max(0.0, _finite(self.delta("finished", 0.5))) * spec.nodes * spec.node_usd


def _finite(value: float) -> float:
    return value if math.isfinite(value) else 0.0


@dataclass
class WaitChange:
    replicas: int = REPLICAS
    spread: float = SPREAD
    later: list[RunWaitChange] = field(default_factory=list)
    earlier: list[RunWaitChange] = field(default_factory=list)
    added: list[RunForecast] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.later or self.earlier or self.added)

    @property
    def gpu_hours(self) -> float:
        return sum(r.waiting_gpu_hours for r in self.later)

    @property
    def dollars(self) -> tuple[float, list[str]]:
        known = [r.waiting_usd for r in self.later if r.waiting_usd is not None and r.waiting_gpu_hours]
        unpriced = [r.key for r in self.later if r.waiting_usd is None and r.waiting_gpu_hours]
        return sum(known), unpriced

    def headline(self) -> str:
        if not self.later:
            text = "this change delays no existing run"
        else:
            preempted = sum(r.preempted_more for r in self.later)
            worst = max(self.later, key=lambda r: r.delta("finished", 0.9))
            text = (f"this change makes {len(self.later)} existing run{'s' if len(self.later) > 1 else ''} wait "
                    f"longer (finishing at most {_signed(worst.delta('finished', 0.5))} P50, "
                    f"{_signed(worst.delta('finished', 0.9))} P90 later: {worst.key})" +
                    (f", {preempted} of them preempted" if preempted else "") +
                    f"; adds {number(self.gpu_hours)} GPU-hours of waiting")
            dollars, unpriced = self.dollars
            if dollars:
                text += f" ({usd(dollars)} at the runs' node prices" + \
                        (f"; {len(unpriced)} run(s) without a price" if unpriced else "") + ")"
        if self.earlier:
            text += f"; {len(self.earlier)} run{'s' if len(self.earlier) > 1 else ''} start earlier"
        return text


def _signed(hours: float) -> str:
    if hours == math.inf:
        return "never admitted"
    return f"{hours:+.1f} h"


def _relevant(path: str, kinds: set[str]) -> bool:
    return Path(path).name.split(".", 1)[0] in kinds


def changed_clusters(old_files: Mapping[str, bytes], new_files: Mapping[str, bytes]) -> set[str]:
    """Clusters where a file the schedule reads differs between the two sides."""
    kinds = admission_kinds() | set(SCHEDULE_KINDS)
    return {Path(path).parts[0] for path in old_files.keys() | new_files.keys()
            if len(Path(path).parts) > 1 and _relevant(path, kinds) and old_files.get(path) != new_files.get(path)}


def wait_change(old_files: Mapping[str, bytes], new_files: Mapping[str, bytes], old_folder: str, new_folder: str,
                inputs: SimulationInputs | None = None) -> WaitChange:
    """Simulate both sides of every changed cluster; SimulateInputError on input that cannot be read."""
    inputs = inputs or SimulationInputs()
    clusters = changed_clusters(old_files, new_files)
    change = WaitChange(inputs.replicas, inputs.spread)
    if not clusters:
        return change

    def side(files: Mapping[str, bytes], folder: str) -> dict[str, RunForecast]:
        wanted = {p: data for p, data in files.items() if Path(p).parts[0] in clusters}
        manifests: dict[str, list[dict[str, Any]]] = cluster_manifests(wanted, folder)
        forecasts, notes = simulate_manifests(manifests, inputs)
        change.notes.extend(n for n in notes if n not in change.notes)
        return {key: run for c in forecasts for key, run in c.runs.items()}

    before = side(old_files, old_folder)
    head_keys = {job_key(name, w.namespace, w.job)
                 for name, found in cluster_manifests({p: d for p, d in new_files.items() if Path(p).parts[0] in clusters},
                                                      new_folder).items()
                 for w in workloads(found) if w.queue is not None}
    arriving = {key: inputs.submissions.get(key, SYNC_HOURS) for key in head_keys - before.keys()}
    inputs = replace(inputs, submissions={**inputs.submissions, **arriving})
    after = side(new_files, new_folder)
    for key in sorted(before.keys() & after.keys()):
        run = RunWaitChange(key, before[key], after[key])
        if run.later:
            change.later.append(run)
        elif run.earlier:
            change.earlier.append(run)
    change.later.sort(key=lambda r: (-_finite(r.delta("finished", 0.5)), r.key))
    change.added = [after[key] for key in sorted(after.keys() - before.keys())]
    return change


def _run_line(run: RunWaitChange) -> str:
    line = (f"{run.key}: finishes {_signed(run.delta('finished', 0.5))} P50 / {_signed(run.delta('finished', 0.9))} "
            f"P90 later, first admitted {_signed(run.delta('waits', 0.5))} P50 / {_signed(run.delta('waits', 0.9))} "
            f"P90 (was after {hours_text(run.base.p('waits', 0.5))} h)")
    if run.preempted_more:
        line += f"; preempted {_mean(run.base.preemptions):.1f} -> {_mean(run.head.preemptions):.1f} times a replica"
        if run.new_preemptors:
            line += f" by {', '.join(run.new_preemptors[:3])}"
    return line


def _mean(values: Sequence[int]) -> float:
    return sum(values) / max(1, len(values))


def _added_line(run: RunForecast) -> str:
    return (f"{run.spec.key} (new): admitted after {hours_text(run.p('waits', 0.5))} h P50 / "
            f"{hours_text(run.p('waits', 0.9))} h P90, finishes at {hours_text(run.p('finished', 0.5))} h P50")


def text_lines(change: WaitChange) -> list[str]:
    if not change:
        return []
    lines = [f"waits: {change.headline()}"]
    lines += [f"  {_run_line(r)}" for r in change.later]
    lines += [f"  {_added_line(r)}" for r in change.added]
    lines += [f"  {r.key}: finishes {_signed(r.delta('finished', 0.5))} P50 (earlier)" for r in change.earlier]
    return lines


def markdown_lines(change: WaitChange) -> list[str]:
    if not change:
        return []
    lines = ["#### Waits (`kubetrain simulate`)", "", f"**{change.headline()}.**", ""]
    if change.later or change.earlier:
        lines += ["| run | Δ finish P50 | Δ finish P90 | Δ admission P50 | Δ admission P90 | preempted (before → "
                  "after, a replica) | by | GPU-hours waiting | $ |", "|---|---|---|---|---|---|---|---|---|"]
        for r in [*change.later, *change.earlier]:
            by = ", ".join(f"`{k}`" for k in r.new_preemptors[:3]) or "-"
            lines.append(f"| `{r.key}` | {_signed(r.delta('finished', 0.5))} | {_signed(r.delta('finished', 0.9))} | "
                         f"{_signed(r.delta('waits', 0.5))} | {_signed(r.delta('waits', 0.9))} | "
                         f"{_mean(r.base.preemptions):.1f} → {_mean(r.head.preemptions):.1f} | {by} | "
                         f"{number(r.waiting_gpu_hours)} | {usd(r.waiting_usd)} |")
        lines.append("")
    lines += [f"- {_added_line(r)}" for r in change.added]
    lines += ["" if change.added else "", f"_Kueue v0.19.2's scheduler simulated on both sides over {change.replicas} "
              f"replicas (durations from `kubetrain cost`, lognormal spread {change.spread:g}); the base's runs queued "
              "now, the change's new runs at the next Argo CD sync; `kubetrain simulate --picture` draws the "
              "timeline._", ""]
    return lines
