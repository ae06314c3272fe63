"""Kubeflow Trainer v2 TrainJob (`trainer.kubeflow.org/v1alpha1`, Trainer v2.3): the operator's contract.

A TrainJob names a runtime and the controller turns the pair into a JobSet of the same name: one
replicated Job `node` whose pods run container `node`. kubetrain emits a namespaced TrainingRuntime
per job (`<job>-runtime`) holding the whole pod template (volumes, tolerations, security, ...), and
the TrainJob references it, so every pod setting survives (the TrainJob's own `trainer` block only
carries container fields). The runtime syncs in the platform wave, before the workloads': the TrainJob
webhook rejects a job whose runtime does not exist yet (the TrainJob's reference to it says so).
The controller injects only PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK (the Job's completion
index), PET_MASTER_ADDR (`<job>-node-0-0.<job>`) and PET_MASTER_PORT (29500) and rejects user env
with those names, so the command is torchrun. `trainer`, `runtimeRef` and `initializer` are
immutable: a changed job is a new object (create-once). Pods are `<job>-node-0-<i>`, a DNS label, and the
JobSet's headless Service is named after the job, a DNS-1035 label. Kueue admits the runtime's replicated
jobs, the trainer's with the TrainJob's numNodes pods; the TrainJob's `suspend` and the runtime patches Kueue
records on it are Kueue's.
(kubeflow/trainer v2.3.0: pkg/runtime/framework/plugins/torch, pkg/webhooks.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from kubetrain.admission.requests import count_of, pod_set
from kubetrain.kinds.base import (
    PLATFORM,
    WORKLOADS,
    CrdSource,
    IgnoredFields,
    Kind,
    Manifest,
    Reference,
    Run,
    RunShape,
    Sibling,
    number,
    pod_template_fields,
    run_shape,
)
from kubetrain.kinds.target import LocalPlan, LocalReplica, Target, fail_job_exit_codes
from training.problems import Problem

if TYPE_CHECKING:
    from kubetrain.jobs.spec import JobSpec

GROUP = "trainer.kubeflow.org"
MASTER_PORT = 29500
INJECTED = {"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"}
# The launcher exits 2 for a bad run config: fail the whole job at once; other failures are retried.
BAD_CONFIG_EXIT = 2


class TrainJob(Target):
    """Kubeflow Trainer v2's TrainJob on a TrainingRuntime kubetrain emits beside it."""

    name: ClassVar[str] = "trainjob"
    api_version: ClassVar[str] = f"{GROUP}/v1alpha1"
    kind: ClassVar[str] = "TrainJob"
    container_name: ClassVar[str] = "node"

    active_deadline_seconds: int | None = Field(None, ge=1, description="Fail the job when it runs longer.")

    def runtime_name(self, job: JobSpec) -> str:
        return f"{job.name}-runtime"

    def injected_env(self, job: JobSpec) -> set[str]:
        return set(INJECTED)

    def rendezvous_port(self, job: JobSpec) -> int:
        return MASTER_PORT

    def rendezvous_args(self, job: JobSpec) -> list[str]:
        # PET_NNODES and PET_NPROC_PER_NODE are torchrun's defaults; node 0 hosts the rendezvous.
        return ["--rdzv-endpoint=$(PET_MASTER_ADDR):$(PET_MASTER_PORT)"]

    def max_name_length(self, job: JobSpec) -> tuple[int, str]:
        suffix = f"-node-0-{job.props.nodes - 1}"
        return 63 - len(suffix), f"{job.name}{suffix}"

    def derived_names(self, job: JobSpec) -> list[str]:
        return [self.runtime_name(job)]

    def check(self, job: JobSpec) -> Iterator[Problem]:
        if job.props.elastic is not None:
            yield Problem("KT701", "elastic", "the TrainJob target runs a fixed number of nodes",
                          "use the PyTorchJob target (the default) for elastic jobs, or remove elastic")
        if not job.launched_by_torchrun:
            yield Problem("KT701", "workload.launcher", "the Trainer controller only injects PET_* variables, which "
                          "only torchrun reads", "launch the command with torchrun")

    def render(self, job: JobSpec, pod_template: dict[str, Any]) -> list[dict[str, Any]]:
        props, labels = job.props, job.labels
        pod = {**pod_template, "spec": {**pod_template["spec"], "restartPolicy": "Never"}}
        runtime = {
            "apiVersion": self.api_version, "kind": "TrainingRuntime",
            "metadata": {"name": self.runtime_name(job), "namespace": job.namespace, "labels": labels},
            "spec": {
                "mlPolicy": {"numNodes": props.nodes, "torch": {}},
                "template": {"spec": {"replicatedJobs": [{
                    "name": "node",
                    "template": {
                        "metadata": {"labels": {f"{GROUP}/trainjob-ancestor-step": "trainer"}},
                        "spec": {
                            "backoffLimit": props.backoff_limit,
                            # A bad config fails the job at once; preemption is no failure of the job.
                            "podFailurePolicy": {"rules": [
                                {"action": "FailJob", "onExitCodes": {"containerName": self.container_name,
                                                                      "operator": "In", "values": [BAD_CONFIG_EXIT]}},
                                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]},
                            "template": pod}}}]}}}}
        spec: dict[str, Any] = {
            "runtimeRef": {"name": self.runtime_name(job), "apiGroup": GROUP, "kind": "TrainingRuntime"},
            "trainer": {"numNodes": props.nodes, "numProcPerNode": props.procs_per_node}}
        if self.active_deadline_seconds is not None:
            spec["activeDeadlineSeconds"] = self.active_deadline_seconds
        job_object = {"apiVersion": self.api_version, "kind": self.kind,
                      "metadata": {"name": job.name, "namespace": job.namespace, "labels": job.object_labels},
                      "spec": spec}
        return [job_object, runtime]

    @classmethod
    def local_plan(cls, manifest: dict[str, Any], loopback_port: Callable[[], int],
                   sibling: Callable[[str, str], dict[str, Any] | None]) -> LocalPlan:
        ref = manifest["spec"]["runtimeRef"]
        runtime = sibling(ref.get("kind", "ClusterTrainingRuntime"), ref["name"])
        if runtime is None:
            raise LookupError(f"runtime {ref['name']} is not beside the job in dist/ (run-local runs TrainJobs on "
                              "the TrainingRuntime kubetrain emits)")
        trainer = manifest["spec"].get("trainer", {})
        nodes = trainer.get("numNodes") or runtime["spec"]["mlPolicy"]["numNodes"]
        nproc = str(trainer.get("numProcPerNode", 1))
        (replicated,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
        job_spec = replicated["template"]["spec"]
        env = {"PET_NNODES": str(nodes), "PET_NPROC_PER_NODE": nproc, "PET_MASTER_ADDR": "127.0.0.1",
               "PET_MASTER_PORT": str(loopback_port())}
        replicas = [LocalReplica(f"node-0-{i}", job_spec["template"], "Retry",
                                 {**env, "PET_NODE_RANK": str(i)}) for i in range(nodes)]
        return LocalPlan(replicas, cls.container_name, job_spec.get("backoffLimit", 6),
                         fail_job_exit_codes=fail_job_exit_codes(job_spec, cls.container_name))


def _runtime(obj: Manifest, sibling: Sibling) -> Manifest | None:
    """The runtime the TrainJob names, when it is at hand."""
    ref = (obj.get("spec") or {}).get("runtimeRef") or {}
    return sibling(ref.get("kind", "ClusterTrainingRuntime"), ref.get("name", ""))


def _is_trainer(replicated: Manifest) -> bool:
    """The runtime's replicated job that runs the trainer's nodes."""
    labels = ((replicated.get("template") or {}).get("metadata") or {}).get("labels") or {}
    return labels.get(f"{GROUP}/trainjob-ancestor-step") == "trainer" or replicated.get("name") == "node"


def _replicated_jobs(runtime: Manifest) -> list[dict[str, Any]]:
    return (((runtime.get("spec") or {}).get("template") or {}).get("spec") or {}).get("replicatedJobs") or []


def _trainer_pod(runtime: Manifest) -> dict[str, Any]:
    job = next((r.get("template") or {} for r in _replicated_jobs(runtime) if _is_trainer(r)), {})
    return ((job.get("spec") or {}).get("template") or {}).get("spec") or {}


def _pod_sets(obj: Manifest, sibling: Sibling) -> tuple[list, int | None]:
    """The runtime's replicated jobs; the trainer's node job runs numNodes pods (the TrainJob's, else the
    runtime's mlPolicy)."""
    runtime = _runtime(obj, sibling)
    if runtime is None:
        return [], None
    runtime_spec = runtime.get("spec") or {}
    nodes = ((obj.get("spec") or {}).get("trainer") or {}).get("numNodes") or \
        (runtime_spec.get("mlPolicy") or {}).get("numNodes")
    pod_sets = []
    for replicated in _replicated_jobs(runtime):
        job_spec = (replicated.get("template") or {}).get("spec") or {}
        count = count_of(nodes) if _is_trainer(replicated) and nodes else \
            count_of(replicated.get("replicas")) * count_of(job_spec.get("parallelism"))
        pod_sets.append(pod_set(str(replicated.get("name", "node")), count, job_spec.get("template") or {}))
    return pod_sets, None


def _shape(obj: Manifest, sibling: Sibling) -> RunShape:
    """The node job's numNodes pods, as the runtime's template makes them and the TrainJob's trainer overrides
    them (image, resourcesPerNode); kubetrain's TrainJobs keep the whole pod in the runtime. Without the runtime
    at hand, only the trainer's own fields."""
    spec = obj.get("spec") or {}
    trainer = spec.get("trainer") or {}
    ref = spec.get("runtimeRef") or {}
    runtime = _runtime(obj, sibling)
    own = {"image": trainer.get("image"), "resources": {"limits": (trainer.get("resourcesPerNode") or {}).get("limits")
                                                                  or {}}}
    pod = {"containers": [own]}
    if runtime is not None:
        template = _trainer_pod(runtime)
        container = (template.get("containers") or [{}])[0]
        pod = {**template, "containers": [{**container, "image": own["image"] or container.get("image"),
                                           "resources": own["resources"] if own["resources"]["limits"] else
                                           container.get("resources") or {}},
                                          *(template.get("containers") or [{}])[1:]]}
    return run_shape("TrainJob", [(number(trainer.get("numNodes"), 1), pod)], trainer.get("numProcPerNode"),
                     reads=((ref.get("kind", "ClusterTrainingRuntime"), ref["name"]),) if ref.get("name") else ())


def _references(obj: Manifest) -> list[Reference]:
    ref = (obj.get("spec") or {}).get("runtimeRef") or {}
    kind = ref.get("kind", "ClusterTrainingRuntime")
    namespace = None if kind == "ClusterTrainingRuntime" else (obj.get("metadata") or {}).get("namespace")
    return [Reference(GROUP, kind, namespace, ref.get("name", ""), admission=True)]


TRAINJOB = Kind(
    TrainJob.api_version, TrainJob.kind, WORKLOADS, name_format="DNS-1035 label",
    crd=CrdSource("trainer.kubeflow.org_trainjobs.yaml", "kubeflow/trainer", "v2.3.0", (f"{GROUP}/v1alpha1",)),
    create_once=True, health="training_job.lua",
    ignored=IgnoredFields(("/spec/suspend",), ('.spec.runtimePatches[] | select(.manager == "kueue.x-k8s.io/manager")',)),
    references=_references,
    run=Run(_pod_sets, _shape, reads=("TrainingRuntime", "ClusterTrainingRuntime")),
    target=TrainJob)
TRAINING_RUNTIME = Kind(
    f"{GROUP}/v1alpha1", "TrainingRuntime", PLATFORM, holds_pod_templates=True,
    crd=CrdSource("trainer.kubeflow.org_trainingruntimes.yaml", "kubeflow/trainer", "v2.3.0", (f"{GROUP}/v1alpha1",)))
CLUSTER_TRAINING_RUNTIME = Kind(
    f"{GROUP}/v1alpha1", "ClusterTrainingRuntime", PLATFORM, holds_pod_templates=True,
    crd=CrdSource("trainer.kubeflow.org_clustertrainingruntimes.yaml", "kubeflow/trainer", "v2.3.0",
                  (f"{GROUP}/v1alpha1",)))


# What the Trainer controller turns a TrainJob into: kubetrain emits none, but a cluster's JobSets are judged
# and delivered like the other runs.
def _jobset_shape(obj: Manifest, sibling: Sibling) -> RunShape:
    pods = []
    for replicated in (obj.get("spec") or {}).get("replicatedJobs") or []:
        job_spec = (replicated.get("template") or {}).get("spec") or {}
        pods.append((number(replicated.get("replicas"), 1) * number(job_spec.get("parallelism"), 1),
                     (job_spec.get("template") or {}).get("spec") or {}))
    return run_shape("JobSet", pods)


JOBSET = Kind(
    "jobset.x-k8s.io/v1alpha2", "JobSet", WORKLOADS, name_format="DNS-1035 label", create_once=True,
    health="training_job.lua",
    ignored=IgnoredFields(("/spec/suspend",), pod_template_fields(".spec.replicatedJobs[].template.spec.template.spec")),
    run=Run(None, _jobset_shape))

KINDS = (TRAINJOB, TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME, JOBSET)
