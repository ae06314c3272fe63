"""`kubetrain simulate`: when each declared run is admitted, starts and finishes, from dist/ and the load beside it.

    kubetrain simulate [--dist dist] [--load load.yaml] [--history past.csv] [--submit JOB=HOURS]...
                       [--duration JOB=HOURS]... [--replicas 20] [--seed 0] [--spread 0.25]
                       [--picture timeline.png] [--json]

Every cluster of dist/ with queued runs is simulated on its own objects (kubetrain.schedule.fleet_runs), with
the background load of `--load` (recurring classes) and `--history` (past submissions) added
(kubetrain.schedule.background), over replicas (kubetrain.schedule.forecast). A JOB names a run by its
cluster/namespace/job, or by any tail of it that names one run (namespace/job, job).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubetrain.admission.cluster_objects import ClusterObjects
from kubetrain.cost.annotations import CostInputError
from kubetrain.model.manifests import UnreadableManifest, read_manifest, yaml_files
from kubetrain.schedule.background import history_runs, load_runs
from kubetrain.schedule.fleet_runs import RunSpec, declared_runs, job_key, priority_classes
from kubetrain.schedule.forecast import REPLICAS, SPREAD, ClusterForecast, forecast_cluster
from kubetrain_runtime.problems import ConfigError


class SimulateInputError(Exception):
    """The input cannot be simulated: one line (or several, one per problem) for the user."""


@dataclass
class SimulationInputs:
    """What a user gives besides dist/."""

    durations: Mapping[str, float] = field(default_factory=dict)  # JOB -> hours, as the user wrote JOB
    submissions: Mapping[str, float] = field(default_factory=dict)
    load: tuple[str, str] | None = None  # (text, where)
    history: tuple[str, str] | None = None
    replicas: int = REPLICAS
    seed: int = 0
    spread: float = SPREAD


def read_inputs(load: Path | None = None, history: Path | None = None, durations: Sequence[str] = (),
                submissions: Sequence[str] = (), replicas: int = REPLICAS, seed: int = 0,
                spread: float = SPREAD) -> SimulationInputs:
    """The command line's inputs: the files read, JOB=HOURS parsed; SimulateInputError naming the option."""
    files = {}
    for option, path in (("--load", load), ("--history", history)):
        if path is not None:
            if not path.is_file():
                raise SimulateInputError(f"{option} {path}: no such file fix: give the path of the file")
            files[option] = (path.read_text(encoding="utf-8", errors="replace"), str(path))
    return SimulationInputs(dict(parse_assignment(t, "--duration") for t in durations),
                            dict(parse_assignment(t, "--submit") for t in submissions),
                            files.get("--load"), files.get("--history"), replicas, seed, spread)


def cluster_manifests(files: Mapping[str, bytes], folder: str) -> dict[str, list[dict[str, Any]]]:
    """Every manifest among `files` (dist/-relative path -> contents), by cluster folder."""
    found: dict[str, list[dict[str, Any]]] = {}
    for path, data in sorted(files.items()):
        parts = Path(path).parts
        if len(parts) < 2:
            continue
        try:
            found.setdefault(parts[0], []).extend(read_manifest(f"{folder}/{path}", data))
        except UnreadableManifest as error:
            raise SimulateInputError(str(error)) from None
    return found


def parse_assignment(text: str, option: str) -> tuple[str, float]:
    """'JOB=HOURS' -> (JOB, hours); SimulateInputError naming the option and the fix."""
    job, equals, hours = text.partition("=")
    try:
        value = float(hours)
    except ValueError:
        value = float("nan")
    if not equals or not job or value != value or value in (float("inf"), float("-inf")):
        raise SimulateInputError(f"{option} {text!r} is not JOB=HOURS fix: e.g. {option} prod/ml-prod/gpt=12.5")
    if option == "--duration" and value <= 0:
        raise SimulateInputError(f"{option} {text!r}: a duration must be more than 0 hours fix: e.g. {option} "
                                 f"{job}=12.5")
    return job, value


def resolve(given: Mapping[str, float], keys: Sequence[str], option: str) -> dict[str, float]:
    """The user's JOB names as run keys: a whole key, or a tail that names one run."""
    resolved = {}
    for name, hours in given.items():
        matches = [k for k in keys if k == name or k.endswith("/" + name)]
        if len(matches) != 1:
            what = "names no queued run" if not matches else f"names {len(matches)} runs ({', '.join(matches)})"
            raise SimulateInputError(f"{option} {name}={hours:g}: {name} {what} fix: use one of "
                                     f"{', '.join(keys) or 'none (no queued runs in dist/)'}")
        resolved[matches[0]] = hours
    return resolved


def _objects(cluster: str, manifests: list[dict[str, Any]]) -> ClusterObjects:
    try:
        return ClusterObjects.from_manifests(cluster, manifests)
    except (ValueError, TypeError, AttributeError, KeyError) as error:
        raise SimulateInputError(f"{cluster}: an object admission reads is malformed: {error} fix: run kubetrain "
                                 "synth, or undo the hand edit (git checkout -- dist/)") from None


def simulate_manifests(manifests: Mapping[str, list[dict[str, Any]]], inputs: SimulationInputs
                       ) -> tuple[list[ClusterForecast], list[str]]:
    """Forecasts of every cluster with queued runs or background load, and notes on runs left out."""
    clusters = {name: _objects(name, found) for name, found in manifests.items()}
    keys = sorted(job_key(name, w.namespace, w.job) for name, objects in clusters.items()
                  for w in objects.workloads if w.queue is not None)
    durations = resolve(inputs.durations, keys, "--duration")
    submissions = resolve(inputs.submissions, keys, "--submit")
    specs: dict[str, list[RunSpec]] = {}
    notes: list[str] = []
    for name, objects in clusters.items():
        try:
            runs = declared_runs(name, manifests[name], objects, durations, submissions)
        except CostInputError as error:
            raise SimulateInputError(str(error)) from None
        specs[name] = runs.runs
        notes += runs.notes
    try:
        background: list[RunSpec] = []
        if inputs.load is not None:
            workload_classes = {name: priority_classes(found)[0] for name, found in manifests.items()}
            background += load_runs(*inputs.load, clusters, workload_classes, inputs.seed)
        if inputs.history is not None:
            background += history_runs(*inputs.history, clusters)
    except ConfigError as error:
        raise SimulateInputError("\n".join(error.lines())) from None
    for spec in background:
        specs.setdefault(spec.cluster, []).append(spec)
    forecasts = [forecast_cluster(clusters[name], found, inputs.replicas, inputs.seed, inputs.spread)
                 for name, found in sorted(specs.items()) if any(s.declared for s in found)]
    return forecasts, notes


def simulate_dist(dist: Path, inputs: SimulationInputs) -> tuple[list[ClusterForecast], list[str]]:
    if not dist.is_dir():
        raise SimulateInputError(f"{dist} is not a folder fix: give --dist the folder synth writes (dist)")
    return simulate_manifests(cluster_manifests(yaml_files(dist), str(dist)), inputs)
