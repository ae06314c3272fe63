"""An Indexed batch/v1 Job and a headless Service: distributed training with no operator installed.

The plainest option (no operator). Kubernetes gives each of the `nodes` pods a completion index
(`JOB_COMPLETION_INDEX`) and, through the headless Service named like the job (the pods'
`subdomain`), a stable DNS name `<job>-<index>.<job>`; pod 0 hosts torchrun's c10d rendezvous.
Nothing injects torchrun's variables, so the target sets them itself: PET_NNODES,
PET_NPROC_PER_NODE and PET_RDZV_ENDPOINT, which torchrun reads as the defaults of its flags.
Failures: pods restart never in place; the Job replaces a failed pod up to `backoffLimitPerIndex`
times per index, fails at once on the launcher's permanent exits (podFailurePolicy), ignores
preemption, and ends with success when pod 0 (rank 0's node) succeeds (successPolicy).
Pod hostnames are `<job>-<index>`, a DNS label; the Service name is a DNS-1035 label. A Job's spec
cannot change once created (its template is immutable): a changed job is a new object. Kueue admits
its pods as one pod set and owns `suspend`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, ClassVar

from kubetrain.apiserver.workloads import validate_job
from kubetrain.kinds.base import (
    WORKLOADS,
    IgnoredFields,
    Kind,
    Manifest,
    Run,
    RunShape,
    Sibling,
    number,
    pod_template_fields,
    run_shape,
)
from kubetrain.kinds.target import LocalPlan, LocalReplica, Target, fail_job_exit_codes, pod_failure_policy
from kubetrain.model.created import JOB_CONTROLLER_LABELS
from kubetrain.model.job_request import JobRequest
from kubetrain.model.pod_sets import count_of, pod_set
from kubetrain_runtime.problems import Problem

RENDEZVOUS_PORT = 29500
INDEX_LABEL = "batch.kubernetes.io/job-name"


class IndexedJob(Target):
    """batch/v1 Job in Indexed completion mode, with a headless Service for the pods' DNS names."""

    name: ClassVar[str] = "indexed-job"
    api_version: ClassVar[str] = "batch/v1"
    kind: ClassVar[str] = "Job"
    container_name: ClassVar[str] = "trainer"

    def injected_env(self, job: JobRequest) -> set[str]:
        return {"JOB_COMPLETION_INDEX"}  # set by the Job controller in every pod

    def launch_env(self, job: JobRequest) -> dict[str, str]:
        return {"PET_NNODES": str(job.nodes), "PET_NPROC_PER_NODE": str(job.procs_per_node),
                "PET_RDZV_ENDPOINT": f"{job.name}-0.{job.name}:{RENDEZVOUS_PORT}"}

    def rendezvous_port(self, job: JobRequest) -> int:
        return RENDEZVOUS_PORT

    def rendezvous_args(self, job: JobRequest) -> list[str]:
        return []  # all from the PET_* variables of launch_env

    def max_name_length(self, job: JobRequest) -> tuple[int, str]:
        suffix = f"-{job.nodes - 1}"
        return 63 - len(suffix), f"{job.name}{suffix}"

    def owned_pod_labels(self, job: JobRequest) -> frozenset[str]:
        return JOB_CONTROLLER_LABELS

    def check(self, job: JobRequest) -> Iterator[Problem]:
        if job.elastic:
            yield Problem("KT701", "elastic", "an Indexed Job runs a fixed number of pods",
                          "use target=PyTorchJob() for elastic jobs (TrainJob, the default, is not elastic), or "
                          "remove elastic")
        if not job.launched_by_torchrun:
            yield Problem("KT701", "workload.launcher", "the pods find each other through torchrun's rendezvous",
                          "launch the command with torchrun")

    def render(self, job: JobRequest, pod_template: dict[str, Any]) -> list[dict[str, Any]]:
        labels = job.labels
        pod = {**pod_template, "spec": {**pod_template["spec"], "restartPolicy": "Never", "subdomain": job.name}}
        batch_job = {
            "apiVersion": self.api_version, "kind": self.kind,
            "metadata": {"name": job.name, "namespace": job.namespace, "labels": job.object_labels},
            "spec": {
                "completionMode": "Indexed", "completions": job.nodes, "parallelism": job.nodes,
                "backoffLimitPerIndex": job.backoff_limit, "maxFailedIndexes": 0,
                "podFailurePolicy": pod_failure_policy(self.container_name),
                "successPolicy": {"rules": [{"succeededIndexes": "0"}]},
                "template": pod}}
        service = {
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": job.name, "namespace": job.namespace, "labels": labels},
            # Pods resolve each other before they are ready: the rendezvous is how they become ready.
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": {INDEX_LABEL: job.name},
                     "ports": [{"name": "rendezvous", "port": RENDEZVOUS_PORT}]}}
        return [batch_job, service]

    @classmethod
    def local_plan(cls, manifest: dict[str, Any], loopback_port: Callable[[], int],
                   sibling: Callable[[str, str], dict[str, Any] | None]) -> LocalPlan:
        spec = manifest["spec"]
        endpoint = f"127.0.0.1:{loopback_port()}"
        replicas = [LocalReplica(f"{manifest['metadata']['name']}-{i}", spec["template"], "Retry",
                                 {"JOB_COMPLETION_INDEX": str(i), "PET_RDZV_ENDPOINT": endpoint})
                    for i in range(spec["completions"])]
        # backoffLimitPerIndex, with maxFailedIndexes 0: any index out of retries fails the job.
        return LocalPlan(replicas, cls.container_name, spec.get("backoffLimitPerIndex", 6),
                         fail_job_exit_codes=fail_job_exit_codes(spec, cls.container_name), per_pod_backoff=True)


def _pod_sets(obj: Manifest, sibling: Sibling) -> tuple[list, int | None]:
    spec = obj.get("spec") or {}
    count = count_of(spec.get("parallelism"))
    if spec.get("completions") is not None:
        count = min(count, count_of(spec["completions"]))
    return [pod_set("main", count, spec.get("template") or {})], None


def _shape(obj: Manifest, sibling: Sibling) -> RunShape:
    spec = obj.get("spec") or {}
    return run_shape("Job", [(number(spec.get("parallelism"), 1), (spec.get("template") or {}).get("spec") or {})])


BATCH_JOB = Kind(
    IndexedJob.api_version, IndexedJob.kind, WORKLOADS, create_once=True, check=validate_job,
    ignored=IgnoredFields(("/spec/suspend",), pod_template_fields(".spec.template.spec")),
    run=Run(_pod_sets, _shape), target=IndexedJob)

KINDS = (BATCH_JOB,)
