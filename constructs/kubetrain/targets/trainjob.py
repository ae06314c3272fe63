"""Kubeflow Trainer v2 TrainJob (`trainer.kubeflow.org/v1alpha1`, Trainer v2.3): the operator's contract.

A TrainJob names a runtime and the controller turns the pair into a JobSet of the same name: one
replicated Job `node` whose pods run container `node`. kubetrain emits a namespaced TrainingRuntime
per job (`<job>-runtime`) holding the whole pod template (volumes, tolerations, security, ...), and
the TrainJob references it, so every pod setting survives (the TrainJob's own `trainer` block only
carries container fields). The runtime syncs in an earlier Argo CD wave: the TrainJob webhook
rejects a job whose runtime does not exist yet.
The controller injects only PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK (the Job's completion
index), PET_MASTER_ADDR (`<job>-node-0-0.<job>`) and PET_MASTER_PORT (29500) and rejects user env
with those names, so the command is torchrun. `trainer`, `runtimeRef` and `initializer` are
immutable: a changed job is a new object (create-once). Pods are `<job>-node-0-<i>`, a DNS label.
With the TrainJobStatus feature gate the controller also injects its status endpoint's URL, CA and token
(KUBEFLOW_TRAINER_SERVER_*, a projected volume at /var/run/secrets/kubeflow/trainer), where the trainer posts its
progress into status.trainerStatus (training/progress.py); run-local serves that endpoint too.
(kubeflow/trainer v2.3.0: pkg/runtime/framework/plugins/torch, pkg/runtime/framework/plugins/trainjobstatus,
pkg/webhooks.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from kubetrain.rules.registry import register
from kubetrain.rules.sources import TRAINER_STATUS
from kubetrain.targets.base import LocalPlan, LocalReplica, Target, fail_job_exit_codes
from training.problems import Problem
from training.progress import ENV_CA_CERT, ENV_TOKEN, ENV_URL

if TYPE_CHECKING:
    from kubetrain.jobs.spec import JobSpec

GROUP = "trainer.kubeflow.org"
MASTER_PORT = 29500
# With the TrainJobStatus feature gate (Trainer >= 2.2) also its status endpoint's three (training/progress.py),
# upserted over whatever the container sets.
INJECTED = {"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT",
            ENV_URL, ENV_CA_CERT, ENV_TOKEN}
# What the TrainJobStatus plugin adds to every trainer container: upserted by volume name and by mount path, so a
# volume of the job with either is replaced without a word.
STATUS_VOLUME = "kubeflow-trainer-token"
STATUS_MOUNT = PurePosixPath("/var/run/secrets/kubeflow/trainer")
STATUS_MOUNT_TAKEN = register(
    "KT219", "error", "volume where Kubeflow Trainer mounts its status endpoint's token",
    rationale="With the TrainJobStatus feature gate (Trainer >= 2.2) the controller upserts a projected volume named "
              f"{STATUS_VOLUME} (a service account token and the endpoint's CA) at {STATUS_MOUNT} into every trainer "
              "container, matching volumes by name and mounts by path: a job's volume of that name, or mounted at that "
              "path, is silently replaced, and one mounted below it lands in a read-only projected volume.",
    fix="rename the volume, or mount it elsewhere", source=TRAINER_STATUS, targets=("trainjob",))
# Argo CD applies lower waves first and waits for them: the runtime must exist when the job is admitted.
RUNTIME_WAVE = {"argocd.argoproj.io/sync-wave": "-1"}
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
        for i, volume in enumerate(job.props.volumes):
            if volume.name == STATUS_VOLUME:
                yield Problem(STATUS_MOUNT_TAKEN.code, f"volumes.{i}.name", f"{STATUS_VOLUME} is the name of the "
                              "Trainer's status token volume, which replaces this one", "rename the volume")
            if PurePosixPath(volume.mount_path).is_relative_to(STATUS_MOUNT):
                yield Problem(STATUS_MOUNT_TAKEN.code, f"volumes.{i}.mount_path", f"{volume.mount_path} is where the "
                              "Trainer mounts its status endpoint's token and CA", f"mount it outside {STATUS_MOUNT}")

    def render(self, job: JobSpec, pod_template: dict[str, Any]) -> list[dict[str, Any]]:
        props, labels = job.props, job.labels
        pod = {**pod_template, "spec": {**pod_template["spec"], "restartPolicy": "Never"}}
        runtime = {
            "apiVersion": self.api_version, "kind": "TrainingRuntime",
            "metadata": {"name": self.runtime_name(job), "namespace": job.namespace, "labels": labels,
                         "annotations": RUNTIME_WAVE},
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
                         fail_job_exit_codes=fail_job_exit_codes(job_spec, cls.container_name),
                         status_object=manifest)
