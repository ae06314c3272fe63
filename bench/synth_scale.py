"""Synth and validation at fleet scale: kubetrain against the raw cdk8s floor, how synth grows, what it holds.

    python bench/synth_scale.py [--compare 1000] [--rounds 3] [--jobs 250 500 1000 2000 4000]

In this process, after jsii has started, with fleets of one cluster of N dev-sized trainer jobs (Kubeflow
Trainer's default: a ConfigMap, a TrainJob and a TrainingRuntime each):
  (a) kubetrain: build the fleet, validate every object strictly (schemas and the CRDs' CEL rules) and write
      dist/ (what `kubetrain synth` does). kubetrain's objects stay plain Python data from the construct to
      the file: no object crosses into cdk8s's Node.js process;
  (b) the raw cdk8s floor: the same objects as one ApiObject plus one JSON patch each, written by cdk8s's own
      `app.synth()`;
and prints (a)/(b) at `--compare` jobs for `--rounds` rounds, a then b each round, so both see the same load:
the ratio of each one's best time (target <= 0.5), and each round's; then (a) at each of `--jobs`, per job and against the smallest fleet's rate (linear growth
stays near 1.0), with the process's peak memory (and the Node.js process's, which holds no objects); then
where (a)'s time went at `--compare` jobs; then
  (c) `kubetrain validate` of (a)'s output read back from disk, and (d) that fleet's objects validated in
      memory as synth does, in objects per second (target >= 4,000 on a quiet 2-core machine).
The machine's load is printed with the figures: they are wall-clock, and only ratios of one run compare.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path

from kubetrain import App, ClaimVolume, Cluster, NodeResources, RunConfig, Trainer, TrainingJob, TrainingJobProps
from kubetrain.model.manifests import Manifest
from kubetrain.pipeline import render_objects, synth
from kubetrain.validation.validate import Schemas, validate_manifests, validate_objects

RUN = RunConfig.model_validate({"model": {"vocab_size": 512, "dim": 64, "n_layers": 2, "n_heads": 4},
                                "batch": {"global_size": 16, "micro_size": 4}, "max_steps": 100,
                                "checkpoint": {"dir": "/checkpoints/run"}})


def fleet(jobs: int) -> App:
    """One cluster of `jobs` dev-sized trainer jobs, each with a run config of its own (as a real fleet has)."""
    app = App()
    cluster = Cluster(app, "bench", kubernetes_version="1.33", namespaces=["ml"])
    for i in range(jobs):
        run = RUN.model_copy(update={"seed": i})
        TrainingJob(cluster, f"job-{i}", TrainingJobProps(
            name=f"job-{i}", image="ghcr.io/kubetrain/kubetrain:0.1.0", nodes=2, procs_per_node=1,
            resources=NodeResources(cpu="2", memory="4Gi"),
            volumes=[ClaimVolume(name="checkpoints", claim="checkpoints", mount_path="/checkpoints")],
            workload=Trainer(run=run)))
    return app


class PhaseTimes:
    """A kubetrain.model.phases.Progress that records when each phase of synth starts."""

    def __init__(self) -> None:
        self.starts: list[tuple[str, float]] = [("building", time.perf_counter())]

    def phase(self, name: str, total: int | None = None):
        self.starts.append((name, time.perf_counter()))
        return lambda count: None

    def durations(self, end: float) -> dict[str, float]:
        ends = [start for _, start in self.starts[1:]] + [end]
        return {name: stop - start for (name, start), stop in zip(self.starts, ends)}


def kubetrain_synth(jobs: int, out: Path, times: PhaseTimes | None = None) -> int:
    return len(synth(fleet(jobs), out, validate=True, progress=times))


def cdk8s_floor(objects: list[dict], out: Path) -> None:
    import cdk8s  # after kubetrain, which points jsii at the wheel's Node

    app = cdk8s.App(outdir=str(out), yaml_output_type=cdk8s.YamlOutputType.FILE_PER_RESOURCE)
    chart = cdk8s.Chart(app, "bench", disable_resource_name_hashes=True)
    for i, obj in enumerate(objects):
        api = cdk8s.ApiObject(chart, f"o{i}", api_version=obj["apiVersion"], kind=obj["kind"],
                              metadata=cdk8s.ApiObjectMetadata(name=obj["metadata"]["name"],
                                                               namespace=obj["metadata"].get("namespace")))
        api.add_json_patch(*[cdk8s.JsonPatch.add(f"/{k}", v) for k, v in obj.items()
                             if k not in ("apiVersion", "kind", "metadata")])
    app.synth()


def timed(action) -> tuple[float, object]:
    started = time.perf_counter()
    result = action()
    return time.perf_counter() - started, result


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} cores"


def peak_mib(pid: int | str = "self") -> float | None:
    """A process's peak resident memory (VmHWM), in MiB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def node_pid() -> int | None:
    """The jsii kernel's Node.js process: a child of this one."""
    me = os.getpid()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:
            return int(stat.parent.name)
    return None


def compare(jobs: int, rounds: int) -> None:
    print(f"(a) kubetrain synth against (b) the raw cdk8s floor at {jobs} jobs, {rounds} rounds; {load()}")
    print(f"{'round':>6} {'objects':>8} {'(a) s':>8} {'(b) s':>8} {'(a)/(b)':>8}")
    objects = list(render_objects(fleet(jobs)).values())
    rounds_ab = []
    for i in range(rounds):
        work = Path(tempfile.mkdtemp(prefix="synth-scale-"))
        a, count = timed(lambda: kubetrain_synth(jobs, work / "dist"))
        b, _ = timed(lambda: cdk8s_floor(objects, work / "floor"))
        rounds_ab.append((a, b))
        print(f"{i + 1:>6} {count:>8} {a:>8.2f} {b:>8.2f} {a / b:>8.2f}")
    best_a, best_b = min(a for a, _ in rounds_ab), min(b for _, b in rounds_ab)
    ratios = [a / b for a, b in rounds_ab]
    print(f"(a)/(b) of the best times {best_a / best_b:.2f} ({best_a:.2f} s / {best_b:.2f} s), per round median "
          f"{statistics.median(ratios):.2f} (range {min(ratios):.2f}-{max(ratios):.2f}); target <= 0.5; {load()}\n")


def scaling(sizes: list[int]) -> None:
    print(f"(a) kubetrain synth by fleet size; {load()}")
    print(f"{'jobs':>6} {'objects':>8} {'(a) s':>8} {'ms/job':>8} {'vs first':>9} {'peak MiB':>9} {'Node MiB':>9}")
    node, first = node_pid(), None
    for jobs in sizes:
        work = Path(tempfile.mkdtemp(prefix="synth-scale-"))
        seconds, count = timed(lambda: kubetrain_synth(jobs, work / "dist"))
        per_job = seconds / jobs * 1000
        first = first or per_job
        node_peak = peak_mib(node) if node else None
        print(f"{jobs:>6} {count:>8} {seconds:>8.2f} {per_job:>8.2f} {per_job / first:>9.2f} "
              f"{peak_mib() or 0:>9.0f} {node_peak or 0:>9.0f}")
    ru = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak resident memory of this process: {ru:.0f} MiB; {load()}\n")


def breakdown_and_validation(jobs: int) -> None:
    work = Path(tempfile.mkdtemp(prefix="synth-scale-"))
    times = PhaseTimes()
    a, count = timed(lambda: kubetrain_synth(jobs, work / "dist", times))
    phases = times.durations(times.starts[0][1] + a)
    print(f"(a) at {jobs} jobs: " + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in phases.items()))
    c, (checked, findings) = timed(lambda: validate_manifests([work / "dist"]))
    assert not findings and checked == count
    objects = render_objects(fleet(jobs))
    manifests = [Manifest(str(path), obj, Path("/", *path.parts[:-1])) for path, obj in objects.items()]
    d, findings = timed(lambda: validate_objects(manifests, Schemas()))
    assert not findings
    print(f"(c) kubetrain validate of {checked} objects from disk: {c:.2f} s, {checked / c:.0f} objects/s")
    print(f"(d) the same objects in memory, as synth validates them: {d:.2f} s, {len(manifests) / d:.0f} objects/s")
    print(f"{load()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare", type=int, default=1000, help="fleet size of (a)/(b)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, nargs="+", default=[250, 500, 1000, 2000, 4000])
    args = parser.parse_args()
    kubetrain_synth(2, Path(tempfile.mkdtemp()) / "warm")  # start jsii and load the schemas once
    compare(args.compare, args.rounds)
    scaling(sorted(args.jobs))
    breakdown_and_validation(args.compare)


if __name__ == "__main__":
    main()
