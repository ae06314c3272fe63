"""What a run object in dist/ asks for, whatever its operator: pods, ranks, accelerators, where the pods go.

Read from the manifests alone (no fleet code), so `kubetrain diff` and `kubetrain cost` see any git revision of
dist/ the same way. PyTorchJob and MPIJob (replica specs; an MPIJob's Launcher runs no ranks), TrainJob
(numNodes and resourcesPerNode; its pod template is in the TrainingRuntime it names), JobSet and batch Job.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from kubetrain.gitops import waves

ACCELERATORS = ("nvidia.com/gpu", "aws.amazon.com/neuron")


def _int(value: Any, default: int = 0) -> int:
    text = str(value if value is not None else default)
    return int(text) if text.isdigit() else default


@dataclass
class RunShape:
    kind: str
    pods: int = 0
    procs_per_pod: int | None = None
    elastic: tuple[int, int] | None = None  # min and max pods of an elastic job
    accelerators_per_pod: int = 0  # GPUs or Neuron devices of one (rank-running) pod
    accelerator_resource: str | None = None
    pod_specs: list[dict[str, Any]] = field(default_factory=list)  # the rank-running pods' specs
    runtime: str | None = None  # a TrainJob's TrainingRuntime, which holds its pod template
    queue: str | None = None
    images: list[str] = field(default_factory=list)

    @property
    def accelerators(self) -> int:
        return self.pods * self.accelerators_per_pod

    @property
    def node_selector(self) -> dict[str, str]:
        """The pods' node selector (every rank-running pod of a kubetrain run has the same)."""
        return dict((self.pod_specs[0] if self.pod_specs else {}).get("nodeSelector") or {})


def _accelerators(limits: dict[str, Any]) -> tuple[int, str | None]:
    for resource in ACCELERATORS:
        if _int(limits.get(resource)):
            return _int(limits.get(resource)), resource
    return 0, None


def _container_limits(pod_spec: dict[str, Any]) -> dict[str, Any]:
    containers = pod_spec.get("containers") or [{}]
    return (containers[0].get("resources") or {}).get("limits") or {}


def run_shape(obj: dict[str, Any]) -> RunShape:
    """The shape of a run object (one of waves.IMMUTABLE_RUNS)."""
    kind = waves.group_kind(obj)[1]
    spec = obj.get("spec") or {}
    shape = RunShape(kind)
    pods: list[tuple[int, dict[str, Any]]] = []  # (replicas, pod spec)
    if kind in ("PyTorchJob", "MPIJob"):
        replicas = spec.get("pytorchReplicaSpecs") or spec.get("mpiReplicaSpecs") or {}
        pods = [(_int(r.get("replicas"), 1), (r.get("template") or {}).get("spec") or {})
                for role, r in replicas.items() if not (kind == "MPIJob" and role == "Launcher")]
        per_pod = spec.get("nprocPerNode") if kind == "PyTorchJob" else spec.get("slotsPerWorker", 1)
        shape.procs_per_pod = _int(per_pod) or None
        elastic = spec.get("elasticPolicy")
        if elastic:
            shape.elastic = (_int(elastic.get("minReplicas"), 1), _int(elastic.get("maxReplicas"), 1))
        shape.queue = ((spec.get("runPolicy") or {}).get("schedulingPolicy") or {}).get("queue")
    elif kind == "TrainJob":
        trainer = spec.get("trainer") or {}
        shape.runtime = (spec.get("runtimeRef") or {}).get("name")
        shape.procs_per_pod = _int(trainer.get("numProcPerNode")) or None
        pod = {"containers": [{"image": trainer.get("image"),
                               "resources": {"limits": (trainer.get("resourcesPerNode") or {}).get("limits") or {}}}]}
        pods = [(_int(trainer.get("numNodes"), 1), pod)]
    elif kind == "Job":
        pods = [(_int(spec.get("parallelism"), 1), (spec.get("template") or {}).get("spec") or {})]
    elif kind == "JobSet":
        for replicated in spec.get("replicatedJobs") or []:
            job_spec = (replicated.get("template") or {}).get("spec") or {}
            pods.append((_int(replicated.get("replicas"), 1) * _int(job_spec.get("parallelism"), 1),
                         (job_spec.get("template") or {}).get("spec") or {}))
    shape.pods = sum(n for n, _ in pods)
    shape.pod_specs = [pod for _, pod in pods]
    if pods:
        shape.accelerators_per_pod, shape.accelerator_resource = _accelerators(_container_limits(pods[0][1]))
    shape.images = sorted({image for _, pod in pods if (image := (pod.get("containers") or [{}])[0].get("image"))})
    shape.queue = ((obj.get("metadata") or {}).get("labels") or {}).get("kueue.x-k8s.io/queue-name") or shape.queue
    return shape


def runtime_pod_spec(runtime: dict[str, Any]) -> dict[str, Any]:
    """The pod spec of a TrainingRuntime's (single) replicated job."""
    replicated = (((runtime.get("spec") or {}).get("template") or {}).get("spec") or {}).get("replicatedJobs") or [{}]
    job = ((replicated[0].get("template") or {}).get("spec") or {})
    return (job.get("template") or {}).get("spec") or {}


def with_runtime(shape: RunShape, runtime: dict[str, Any] | None) -> RunShape:
    """A TrainJob's shape with its TrainingRuntime's pod: the runtime's template holds what the TrainJob's
    `trainer` does not override (kubetrain's TrainJobs keep the whole pod there, image and resources included)."""
    if runtime is None or not shape.runtime:
        return shape
    pod = runtime_pod_spec(runtime)
    container = (pod.get("containers") or [{}])[0]
    own = shape.pod_specs[0]["containers"][0] if shape.pod_specs else {}
    image = own.get("image") or container.get("image")
    limits = (own.get("resources") or {}).get("limits") or _container_limits(pod)
    accelerators, resource = _accelerators(limits)
    return replace(shape, pod_specs=[pod] * (1 if shape.pod_specs else 0), accelerators_per_pod=accelerators,
                   accelerator_resource=resource, images=[image] if image else [])
