"""Synth and validation at fleet scale: kubetrain against the raw cdk8s floor, in one run.

    python bench/synth_scale.py [--jobs 100 1000]

For each fleet size it times, in this process after jsii has started:
  (a) kubetrain: build the fleet (one cluster, N dev-sized trainer jobs: a ConfigMap and a PyTorchJob
      each), validate every object strictly and write dist/ (what `kubetrain synth` does);
  (b) the raw cdk8s floor: the same objects as one ApiObject plus one JSON patch each, written by
      cdk8s's own `app.synth()`;
  (c) `kubetrain validate` of (a)'s output folder, read back from disk: schemas and the CRDs' CEL rules
      (a PyTorchJob's only rule is a transition rule, skipped on create);
  (d) the same for a fleet whose jobs run on Kubeflow Trainer (a TrainJob and a TrainingRuntime each, whose
      CEL rules are all evaluated), and that fleet's objects validated in memory as synth does;
and prints (a)/(b) (target <= 1.0 at 1,000 jobs), (c) and (d) in objects per second (target >= 4,000,
validation including CEL), then where (a)'s time went: building the fleet (the job constructs' jsii calls),
rendering (`chart.to_json()`), validating, and writing (YAML text and files). Run it on a quiet machine: the
figures are wall-clock.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from kubetrain import (
    App,
    ClaimVolume,
    Cluster,
    NodeResources,
    RunConfig,
    Trainer,
    TrainingJob,
    TrainingJobProps,
    TrainJob,
)
from kubetrain.output.manifests import render_objects, synth
from kubetrain.output.validate import Manifest, Schemas, validate_manifests, validate_objects

RUN = RunConfig.model_validate({"model": {"vocab_size": 512, "dim": 64, "n_layers": 2, "n_heads": 4},
                                "batch": {"global_size": 16, "micro_size": 4}, "max_steps": 100,
                                "checkpoint": {"dir": "/checkpoints/run"}})


def fleet(jobs: int, trainer: bool = False) -> App:
    """One cluster of `jobs` dev-sized jobs: PyTorchJobs, or with `trainer` TrainJobs (Kubeflow Trainer v2)."""
    app = App()
    cluster = Cluster(app, "bench", kubernetes_version="1.33", namespaces=["ml"])
    target = {"target": TrainJob()} if trainer else {}
    for i in range(jobs):
        TrainingJob(cluster, f"job-{i}", TrainingJobProps(
            name=f"job-{i}", image="ghcr.io/kubetrain/kubetrain:0.1.0", nodes=2, procs_per_node=1,
            resources=NodeResources(cpu="2", memory="4Gi"),
            volumes=[ClaimVolume(name="checkpoints", claim="checkpoints", mount_path="/checkpoints")],
            workload=Trainer(run=RUN), **target))
    return app


class PhaseTimes:
    """A kubetrain.output.progress.Progress that records when each phase of synth starts."""

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


def trainer_validation(jobs: int, out: Path) -> tuple[int, float, float]:
    """(objects, seconds for `kubetrain validate`, seconds for synth's in-memory check) of a TrainJob fleet."""
    objects = render_objects(fleet(jobs, trainer=True))
    synth(fleet(jobs, trainer=True), out, validate=False)
    d, (checked, findings) = timed(lambda: validate_manifests([out]))
    assert not findings and checked == len(objects)
    manifests = [Manifest(str(path), obj, Path("/", *path.parts[:-1])) for path, obj in objects.items()]
    memory, findings = timed(lambda: validate_objects(manifests, Schemas()))
    assert not findings
    return checked, d, memory


def timed(action) -> tuple[float, object]:
    started = time.perf_counter()
    result = action()
    return time.perf_counter() - started, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[100, 1000])
    args = parser.parse_args()
    kubetrain_synth(2, Path(tempfile.mkdtemp()) / "warm")  # start jsii and load the schemas once
    print(f"{'jobs':>6} {'objects':>8} {'(a) kubetrain s':>16} {'(b) cdk8s s':>12} {'(a)/(b)':>8} "
          f"{'(c) validate s':>15} {'(c) objects/s':>14}")
    breakdown, trainer = [], []
    for jobs in args.jobs:
        work = Path(tempfile.mkdtemp(prefix="synth-scale-"))
        times = PhaseTimes()
        a, count = timed(lambda: kubetrain_synth(jobs, work / "dist", times))
        breakdown.append((jobs, times.durations(times.starts[0][1] + a)))
        objects = list(render_objects(fleet(jobs)).values())
        b, _ = timed(lambda: cdk8s_floor(objects, work / "floor"))
        c, (checked, findings) = timed(lambda: validate_manifests([work / "dist"]))
        assert not findings and checked == count
        print(f"{jobs:>6} {count:>8} {a:>16.2f} {b:>12.2f} {a / b:>8.2f} {c:>15.2f} {checked / c:>14.0f}")
        trainer.append((jobs, *trainer_validation(jobs, work / "trainer")))
    print(f"\n{'jobs':>6} {'objects':>8} {'(d) validate s':>15} {'(d) objects/s':>14} {'(d) in memory objects/s':>24}")
    for jobs, count, d, memory in trainer:
        print(f"{jobs:>6} {count:>8} {d:>15.2f} {count / d:>14.0f} {count / memory:>24.0f}")
    for jobs, durations in breakdown:
        print(f"(a) at {jobs} jobs: " + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in durations.items()))


if __name__ == "__main__":
    main()
