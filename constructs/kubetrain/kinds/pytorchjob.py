"""Kubeflow PyTorchJob (`kubeflow.org/v1`, training operator v1.9): the operator's contract.

Fixed size: a Master and nodes - 1 Workers, container `pytorch`. The operator injects into every
container PYTHONUNBUFFERED, MASTER_ADDR/PORT and PET_MASTER_ADDR/PORT (`<job>-master-0`, port
23456), RANK = PET_NODE_RANK (the pod's index), WORLD_SIZE, PET_NPROC_PER_NODE (from nprocPerNode)
and PET_NNODES; torchrun reads the PET_* variables as its defaults.
Elastic: `nodes` Workers and an elasticPolicy; there is no Master, because ranks are assigned by
each rendezvous, not by pod index. The operator points PET_RDZV_ENDPOINT at the first worker and
sets PET_NNODES=min:max, but sets PET_NPROC_PER_NODE only when there is a Master.
Pods and Services are named `<job>-<master|worker>-<i>`, so the job's name is a DNS-1035 label and a
Service name a 63-character label. Kueue admits the Master and Worker pod sets in that order and owns
`runPolicy.suspend`. The spec cannot change once created: a changed job is a new object.
(kubeflow/trainer v1.9.4: pkg/controller.v1/pytorch, pkg/webhooks/pytorch.)

What the operator creates (`pytorchjob_objects`, for the output check): per replica, pods named
`<job>-<type>-<i>` from the replica's template, labelled `training.kubeflow.org/{job-name, operator-name,
replica-type, replica-index}` (and `job-role: master` on the Master) over the template's labels, restartPolicy
from the replica's (ExitCode becomes Never), and its defaulting adds the port `pytorchjob-port` (23456) to the
`pytorch` container when it has none of that name; a headless Service per pod, named like it (a DNS-1035
label). Its admission webhook wants a `pytorch` container in every replica and exactly one Master.
(kubeflow/trainer v1.9.4 pkg/controller.v1/common/pod.go, service.go; pkg/apis/kubeflow.org/v1/pytorch_defaults.go;
pkg/webhooks/pytorch/pytorchjob_webhook.go.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, ClassVar

from pydantic import Field

from kubetrain.kinds.base import (
    WORKLOADS,
    CrdSource,
    IgnoredFields,
    Kind,
    Manifest,
    Run,
    RunShape,
    Sibling,
    number,
    pod_template_fields,
    run_shape,
    scheduling_queue,
)
from kubetrain.kinds.target import LocalPlan, LocalReplica, Target
from kubetrain.model.created import Created, pod_from_template
from kubetrain.model.job_request import JobRequest
from kubetrain.model.names import dns_1035_label_problem
from kubetrain.model.pod_sets import count_of, replica_pod_sets
from kubetrain.rules.registry import register
from kubetrain.rules.sources import cite
from kubetrain_runtime.problems import Problem

MASTER_PORT = 23456  # the operator's default, named pytorchjob-port
PORT_NAME = "pytorchjob-port"
LABELS = "training.kubeflow.org"
OPERATOR_LABELS = frozenset(f"{LABELS}/{key}" for key in ("job-name", "operator-name", "replica-type",
                                                          "replica-index", "job-role"))

QUEUED_ON_KUEUE = register(
    "KT703", "warning", "PyTorchJob queued through Kueue",
    rationale="Kueue 0.19 turned its training operator v1 integrations (kubeflow.org/pytorchjob among them) off "
              "by default and plans to remove them: on such a Kueue the queue label is ignored, and the job starts "
              "at once, outside its queue's quota and gang admission. Kueue supports Trainer v2's TrainJob "
              "(Trainer >= 2.3).",
    fix="use the TrainJob target (the default), or make sure the cluster's Kueue enables the kubeflow.org/pytorchjob "
        "integration",
    source=cite("https://github.com/kubernetes-sigs/kueue/issues/12606",
                "https://github.com/kubernetes-sigs/kueue/issues/12620",
                "https://kueue.sigs.k8s.io/docs/tasks/run/trainjobs/"),
    targets=("pytorchjob",))


class PyTorchJob(Target):
    """Kubeflow training operator v1's PyTorchJob. Fields are its `runPolicy` options."""

    name: ClassVar[str] = "pytorchjob"
    api_version: ClassVar[str] = "kubeflow.org/v1"
    kind: ClassVar[str] = "PyTorchJob"
    container_name: ClassVar[str] = "pytorch"

    clean_pod_policy: str | None = Field(None, pattern="^(All|Running|None)$",
                                         description="Which pods to delete when the job ends. Default: the "
                                                     "operator's (None: keep them, with their logs).")
    ttl_seconds_after_finished: int | None = Field(None, ge=0, description="Delete the finished job after this.")
    active_deadline_seconds: int | None = Field(None, ge=1, description="Fail the job when it runs longer.")

    def check(self, job: JobRequest) -> Iterator[Problem]:
        if job.kueue_queue is not None:  # Kueue labels the job; Volcano gangs it another way
            yield Problem(QUEUED_ON_KUEUE.code, "target", f"a PyTorchJob queued on {job.kueue_queue}: Kueue 0.19 and "
                          "later ignore it unless their kubeflow.org/pytorchjob integration is enabled",
                          QUEUED_ON_KUEUE.fix)

    def injected_env(self, job: JobRequest) -> set[str]:
        return {"PYTHONUNBUFFERED", "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "PET_MASTER_ADDR",
                "PET_MASTER_PORT", "PET_NODE_RANK", "PET_NNODES", "PET_NPROC_PER_NODE", "PET_RDZV_ENDPOINT",
                "PET_RDZV_BACKEND", "PET_MAX_RESTARTS"}

    def rendezvous_port(self, job: JobRequest) -> int:
        return MASTER_PORT  # the master's (or, elastic, the first worker's) PET_*_PORT

    def rendezvous_args(self, job: JobRequest) -> list[str]:
        if job.elastic:
            # PET_RDZV_ENDPOINT and PET_NNODES=min:max come from the operator; nproc does not.
            return [f"--nproc-per-node={job.procs_per_node}"]
        # The master pod hosts the rendezvous store; Kubernetes expands $(VAR) from the operator's variables.
        return ["--rdzv-endpoint=$(PET_MASTER_ADDR):$(PET_MASTER_PORT)"]

    def max_name_length(self, job: JobRequest) -> tuple[int, str]:
        workers = job.max_nodes if job.elastic else job.nodes - 1
        suffix = f"-worker-{workers - 1}" if workers else "-master-0"
        return 63 - len(suffix), f"{job.name}{suffix}"

    def derived_names(self, job: JobRequest) -> list[str]:
        # One Service per replica, named like its pod: only the first few are listed; KT101
        # keeps the longest within the limit, and no job name can end in -master-0 or -worker-N.
        return []

    def owned_pod_labels(self, job: JobRequest) -> frozenset[str]:
        return OPERATOR_LABELS

    def render(self, job: JobRequest, pod_template: dict[str, Any]) -> list[dict[str, Any]]:
        run_policy: dict[str, Any] = {"backoffLimit": job.backoff_limit}
        optional = {"cleanPodPolicy": self.clean_pod_policy, "ttlSecondsAfterFinished": self.ttl_seconds_after_finished,
                    "activeDeadlineSeconds": self.active_deadline_seconds}
        run_policy |= {key: value for key, value in optional.items() if value is not None}
        if job.pod_group_policy is not None:  # Volcano: the operator's PodGroup
            run_policy["schedulingPolicy"] = job.pod_group_policy
        spec: dict[str, Any] = {"nprocPerNode": str(job.procs_per_node), "runPolicy": run_policy}
        replica = {"restartPolicy": job.restart_policy, "template": pod_template}
        if job.elastic:
            spec["elasticPolicy"] = {"rdzvBackend": "c10d", "minReplicas": job.node_range.start,
                                     "maxReplicas": job.node_range.stop - 1, "maxRestarts": job.max_restarts}
            spec["pytorchReplicaSpecs"] = {"Worker": {"replicas": job.nodes, **replica}}
        else:
            spec["pytorchReplicaSpecs"] = {"Master": {"replicas": 1, **replica}}
            if job.nodes > 1:
                spec["pytorchReplicaSpecs"]["Worker"] = {"replicas": job.nodes - 1, **replica}
        return [{"apiVersion": self.api_version, "kind": self.kind,
                 "metadata": {"name": job.name, "namespace": job.namespace,
                              "labels": job.object_labels},
                 "spec": spec}]

    @classmethod
    def local_plan(cls, manifest: dict[str, Any], loopback_port: Callable[[], int],
                   sibling: Callable[[str, str], dict[str, Any] | None]) -> LocalPlan:
        spec = manifest["spec"]
        replica_specs = spec["pytorchReplicaSpecs"]
        pods = [(kind, i, replica_specs[kind]) for kind in ("Master", "Worker") if kind in replica_specs
                for i in range(replica_specs[kind].get("replicas", 1))]
        nproc = str(spec.get("nprocPerNode", "auto"))
        env = {"PYTHONUNBUFFERED": "1"}
        elastic = spec.get("elasticPolicy")
        if "Master" in replica_specs:
            port = str(loopback_port())
            env |= {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "PET_MASTER_ADDR": "127.0.0.1",
                    "PET_MASTER_PORT": port, "PET_NPROC_PER_NODE": nproc}
            if nproc.isdigit():
                env["WORLD_SIZE"] = str(len(pods) * int(nproc))
        if elastic is None:
            env["PET_NNODES"] = str(len(pods))
        else:
            # The rendezvous lives on the first worker: another port here, as it is another pod there.
            env |= {"PET_RDZV_ENDPOINT": f"127.0.0.1:{loopback_port()}",
                    "PET_RDZV_BACKEND": elastic.get("rdzvBackend", "c10d"),
                    "PET_NNODES": f"{elastic.get('minReplicas', len(pods))}:{elastic.get('maxReplicas', len(pods))}"}
            if "maxRestarts" in elastic:
                env["PET_MAX_RESTARTS"] = str(elastic["maxRestarts"])
        replicas = []
        for node_rank, (kind, index, replica) in enumerate(pods):
            pod_env = dict(env)
            if "Master" in replica_specs:  # ranks by pod index; elastic jobs get theirs from each rendezvous
                pod_env |= {"RANK": str(node_rank), "PET_NODE_RANK": str(node_rank)}
            replicas.append(LocalReplica(f"{kind.lower()}-{index}", replica["template"],
                                         replica.get("restartPolicy", "OnFailure"), pod_env))
        return LocalPlan(replicas, cls.container_name, spec.get("runPolicy", {}).get("backoffLimit", 6))


def pytorchjob_objects(manifest: dict[str, Any], sibling: Sibling) -> list[Created]:
    """The pod of each replica type with the longest name (its last index), and its Service."""
    name = manifest["metadata"]["name"]
    created = []
    for kind, replica in (manifest.get("spec", {}).get("pytorchReplicaSpecs") or {}).items():
        replicas = replica.get("replicas", 1)
        if replicas < 1:
            continue
        kind_label, index = kind.lower(), replicas - 1
        pod_name = f"{name}-{kind_label}-{index}"
        template = replica.get("template") or {}
        labels = {f"{LABELS}/operator-name": "pytorchjob-controller", f"{LABELS}/job-name": name,
                  f"{LABELS}/replica-type": kind_label, f"{LABELS}/replica-index": str(index)}
        if kind == "Master":
            labels[f"{LABELS}/job-role"] = "master"
        containers = (template.get("spec") or {}).get("containers") or []
        restart = replica.get("restartPolicy", "OnFailure")
        pod = pod_from_template(template, name=pod_name, labels=labels, spec={
            "restartPolicy": "Never" if restart == "ExitCode" else restart,
            "containers": _with_default_port(containers)})
        ports = tuple((f"spec.containers[{i}].ports", len(c.get("ports") or ())) for i, c in enumerate(containers))
        created.append(Created(pod, "the training operator", source=f"spec.pytorchReplicaSpecs.{kind}.template",
                               template_labels=frozenset((template.get("metadata") or {}).get("labels") or ()),
                               appended=ports))
    return created


def pytorchjob_names(manifest: dict[str, Any], sibling: Sibling) -> list[tuple[str, str]]:
    """Every pod has a headless Service of its name, and a Service's name is a DNS-1035 label."""
    name = manifest["metadata"]["name"]
    problems = []
    for kind, replica in (manifest.get("spec", {}).get("pytorchReplicaSpecs") or {}).items():
        longest = f"{name}-{kind.lower()}-{replica.get('replicas', 1) - 1}"
        problem = dns_1035_label_problem(longest)
        if replica.get("replicas", 1) > 0 and problem:
            problems.append(("metadata.name", (f"the training operator names a pod and its Service {longest!r} "
                             f"({len(longest)} characters): {problem}")))
    return problems


def _with_default_port(containers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The operator's defaulting: the `pytorch` container (else the first) gets pytorchjob-port unless it has a
    port of that name."""
    names = [c.get("name") for c in containers]
    index = names.index(PyTorchJob.container_name) if PyTorchJob.container_name in names else 0
    if not containers or PORT_NAME in [p.get("name") for p in containers[index].get("ports") or ()]:
        return containers
    container = containers[index]
    default = {"name": PORT_NAME, "containerPort": MASTER_PORT, "protocol": "TCP"}
    return [*containers[:index], {**container, "ports": [*(container.get("ports") or ()), default]},
            *containers[index + 1:]]


def pytorchjob_admission(manifest: dict[str, Any], sibling: Sibling) -> list[tuple[str, str]]:
    problems = []
    for kind, replica in (manifest.get("spec", {}).get("pytorchReplicaSpecs") or {}).items():
        containers = ((replica.get("template") or {}).get("spec") or {}).get("containers") or ()
        if PyTorchJob.container_name not in [c.get("name") for c in containers]:
            problems.append((f"spec.pytorchReplicaSpecs.{kind}.template.spec.containers",
                             (f"must have a container named {PyTorchJob.container_name!r}: the operator injects its "
                             "variables and ports there")))
        if kind == "Master" and replica.get("replicas", 1) != 1:
            problems.append((f"spec.pytorchReplicaSpecs.{kind}.replicas", "must be 1: a PyTorchJob has one Master"))
    return problems


def _pod_sets(obj: Manifest, sibling: Sibling) -> tuple[list, int | None]:
    spec = obj.get("spec") or {}
    elastic = spec.get("elasticPolicy") or {}
    return (replica_pod_sets(spec.get("pytorchReplicaSpecs") or {}, ("Master", "Worker")),
            count_of(elastic["minReplicas"]) if "minReplicas" in elastic else None)


def _shape(obj: Manifest, sibling: Sibling) -> RunShape:
    spec = obj.get("spec") or {}
    pods = [(number(r.get("replicas"), 1), (r.get("template") or {}).get("spec") or {})
            for r in (spec.get("pytorchReplicaSpecs") or {}).values()]
    elastic = spec.get("elasticPolicy")
    return run_shape("PyTorchJob", pods, spec.get("nprocPerNode"), queue=scheduling_queue(spec),
                     elastic=(number(elastic.get("minReplicas"), 1), number(elastic.get("maxReplicas"), 1))
                     if elastic else None)


PYTORCHJOB = Kind(
    PyTorchJob.api_version, PyTorchJob.kind, WORKLOADS,
    name_problem=dns_1035_label_problem, derived_names=pytorchjob_names, admission=pytorchjob_admission,
    created=pytorchjob_objects,
    crd=CrdSource("kubeflow.org_pytorchjobs.yaml", "kubeflow/trainer", "v1.9.4", ("kubeflow.org/v1",)),
    create_once=True, health="training_job.lua",
    ignored=IgnoredFields(("/spec/runPolicy/suspend",), pod_template_fields(".spec.pytorchReplicaSpecs[].template.spec")),
    run=Run(_pod_sets, _shape, suspend=(("spec", "runPolicy", "suspend"),)),
    target=PyTorchJob)

KINDS = (PYTORCHJOB,)
