"""Kubeflow MPIJob (`kubeflow.org/v2beta1`, mpi-operator v0.8): the NCCL tests' kind, and what the operator makes of it.

An NcclTest (kubetrain.jobs.nccl_test) renders here: a Launcher that runs `mpirun` and `workers` Workers
that run the image's sshd (the operator's default), one rank per GPU. Kueue admits the Launcher and Worker
pod sets in that order; `runPolicy.suspend` is Kueue's to set.

What the operator creates, for the output check:
- a launcher batch/v1 Job `<job>-launcher` from the Launcher template, its pod's hostname `<job>-launcher`,
  labelled `training.kubeflow.org/{operator-name: mpi-operator, job-name, job-role: launcher}`;
- worker pods `<job>-worker-<i>` (also their hostnames) from the Worker template, the same labels with
  `job-role: worker` and `replica-index`;
- the pods' subdomain, a headless Service `<job>`, a ConfigMap `<job>-config` mounted at /etc/mpi on the
  launcher (volume `mpi-job-config`), an SSH Secret `<job>-ssh` mounted at sshAuthMountPath (volume `ssh-auth`)
  on the first container of every pod;
- restartPolicy from each replica (ExitCode becomes Never; default OnFailure for the launcher, Never for workers).
The operator refuses a job whose longest worker hostname is not a DNS-1035 label.
(mpi-operator pkg/controller/mpi_job_controller.go: newLauncherJob, newLauncherPodTemplate, newWorker,
setupSSHOnPod; pkg/apis/kubeflow/v2beta1/default.go; pkg/apis/kubeflow/validation/validation.go.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

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
from kubetrain.model.created import Created, pod_from_template
from kubetrain.model.efa import EFA_HUGEPAGES_DEFAULT, efa_environment
from kubetrain.model.names import dns_1035_label_problem, label_value_problem
from kubetrain.model.pod_sets import replica_pod_sets
from kubetrain.model.vocabulary import EFA_RESOURCE, GPU_RESOURCE, HUGE_PAGES_RESOURCE, INSTANCE_TYPE_LABEL

if TYPE_CHECKING:
    from kubetrain.model.instances import InstanceType


class NcclTestRun(Protocol):
    """What an NCCL test's MPIJob is rendered from (the NcclTest construct's validated props)."""

    name: str
    image: str
    nodes: int
    collective: str
    max_bytes: str
    binary_dir: str
    shm: str
    launcher: Any  # its cpu and memory requests


API_VERSION = "kubeflow.org/v2beta1"
LAUNCHER_SUFFIX, WORKER_SUFFIX = "-launcher", "-worker"
LABELS = "training.kubeflow.org"
SSH_VOLUME, CONFIG_VOLUME, CONFIG_MOUNT = "ssh-auth", "mpi-job-config", "/etc/mpi"
DEFAULT_SSH_MOUNT = "/root/.ssh"
BY = "the MPI operator"
EXPECTED_BUSBW_ANNOTATION = "kubetrain.dev/expected-busbw-gbytes"


def render(spec: NcclTestRun, namespace: str, instance: InstanceType, queue_labels: dict[str, str]) -> dict[str, Any]:
    """The MPIJob of an NCCL test on `instance` (a GPU type with EFA), carrying its queue's labels."""
    gpus = instance.accelerators
    labels = {"kubetrain.dev/nccl-test": spec.name}
    resources = {GPU_RESOURCE: str(gpus), EFA_RESOURCE: str(instance.efa_interfaces),
                 HUGE_PAGES_RESOURCE: EFA_HUGEPAGES_DEFAULT}
    env = {**efa_environment(None), "NCCL_DEBUG": "INFO"}  # INFO prints the transport NCCL chose: NET/OFI means EFA
    launcher = ["mpirun", "--allow-run-as-root", "-np", str(spec.nodes * gpus), "-npernode", str(gpus),
                "--bind-to", "none", *[arg for name in env for arg in ("-x", name)],
                f"{spec.binary_dir}/{spec.collective}", "-b", "8", "-e", spec.max_bytes, "-f", "2", "-g", "1"]
    worker_pod = {
        "containers": [{"name": "worker", "image": spec.image,
                        "env": [{"name": k, "value": v} for k, v in env.items()],
                        "resources": {"requests": {"memory": "32Gi", **resources},
                                      "limits": {"memory": "32Gi", **resources}},
                        "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}]}],
        "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": spec.shm}}],
        "nodeSelector": {INSTANCE_TYPE_LABEL: instance.name},
        "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
    }
    annotations = {}
    if instance.nccl_allreduce_busbw_gbs is not None:  # the catalog's pass mark (see its source)
        annotations[EXPECTED_BUSBW_ANNOTATION] = f"{instance.nccl_allreduce_busbw_gbs:g}"
    return {
        "apiVersion": API_VERSION, "kind": "MPIJob",
        "metadata": {"name": spec.name, "namespace": namespace, "labels": {**labels, **queue_labels},
                     "annotations": annotations},
        "spec": {
            "slotsPerWorker": gpus,
            "mpiImplementation": "OpenMPI",
            "launcherCreationPolicy": "WaitForWorkersReady",
            "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 0},
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": {"metadata": {"labels": labels}, "spec": {
                    "containers": [{"name": "launcher", "image": spec.image, "command": launcher,
                                    "resources": {"requests": {"cpu": spec.launcher.cpu,
                                                               "memory": spec.launcher.memory},
                                                  "limits": {"memory": spec.launcher.memory}}}]}}},
                "Worker": {"replicas": spec.nodes, "template": {"metadata": {"labels": labels}, "spec": worker_pod}},
            },
        },
    }


def longest_names(name: str, workers: int) -> dict[str, str]:
    """What the operator names after an MPIJob: its launcher Job (a label value too) and its last worker's
    hostname, each at most 63 characters."""
    return {"launcher Job": f"{name}{LAUNCHER_SUFFIX}",
            "worker hostname": f"{name}{WORKER_SUFFIX}-{max(workers, 1) - 1}"}


def max_name_length(workers: int) -> int:
    """The longest MPIJob name whose derived names stay within 63 characters."""
    return 63 - max(len(suffix) for suffix in longest_names("", workers).values())


def _labels(name: str, role: str) -> dict[str, str]:
    return {f"{LABELS}/operator-name": "mpi-operator", f"{LABELS}/job-name": name, f"{LABELS}/job-role": role}


def _restart(replica: dict[str, Any], default: str) -> str:
    policy = replica.get("restartPolicy", default)
    return "Never" if policy == "ExitCode" else policy


def _with_mounts(spec: dict[str, Any], volumes: list[dict[str, Any]], mounts: list[dict[str, Any]]) -> dict[str, Any]:
    """The operator's volumes on the pod and their mounts on its first container."""
    containers = list(spec.get("containers") or ())
    if containers:
        first = containers[0]
        containers[0] = {**first, "volumeMounts": [*(first.get("volumeMounts") or ()), *mounts]}
    return {"volumes": [*(spec.get("volumes") or ()), *volumes], "containers": containers}


def mpijob_objects(manifest: dict[str, Any], sibling: Sibling) -> list[Created]:
    name, spec = manifest["metadata"]["name"], manifest.get("spec") or {}
    replicas = spec.get("mpiReplicaSpecs") or {}
    ssh = {"name": SSH_VOLUME, "secret": {"secretName": f"{name}-ssh"}}
    ssh_mount = {"name": SSH_VOLUME, "mountPath": spec.get("sshAuthMountPath", DEFAULT_SSH_MOUNT)}
    created = []
    launcher = replicas.get("Launcher")
    if launcher:
        template = launcher.get("template") or {}
        launcher_name = f"{name}{LAUNCHER_SUFFIX}"
        config = {"name": CONFIG_VOLUME, "configMap": {"name": f"{name}-config"}}
        pod_spec = {"hostname": launcher_name, "subdomain": name, "restartPolicy": _restart(launcher, "OnFailure"),
                    **_with_mounts(template.get("spec") or {}, [config, ssh],
                                   [{"name": CONFIG_VOLUME, "mountPath": CONFIG_MOUNT}, ssh_mount])}
        pod = pod_from_template(template, labels=_labels(name, "launcher"), spec=pod_spec)
        run = spec.get("runPolicy") or {}
        job_spec = {key: run[key] for key in ("ttlSecondsAfterFinished", "activeDeadlineSeconds", "backoffLimit")
                    if run.get(key) is not None}
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": launcher_name, "labels": {"app": name}},
               "spec": {**job_spec, "template": {"metadata": pod["metadata"], "spec": pod["spec"]}}}
        where = "spec.mpiReplicaSpecs.Launcher"
        created.append(Created(job, BY, paths=(("spec.template", f"{where}.template"), ("spec", "spec.runPolicy")),
                               derived=frozenset(("spec.template.spec.hostname", "spec.template.spec.subdomain")),
                               template_labels=frozenset(("app",)),
                               appended=_appended(template.get("spec") or {}, "spec.template.")))
    worker = replicas.get("Worker")
    count = (worker or {}).get("replicas", 0)
    if worker and count > 0:
        template = worker.get("template") or {}
        worker_name = f"{name}{WORKER_SUFFIX}-{count - 1}"
        pod_spec = {"hostname": worker_name, "subdomain": name, "restartPolicy": _restart(worker, "Never"),
                    **_with_mounts(template.get("spec") or {}, [ssh], [ssh_mount])}
        pod = pod_from_template(template, name=worker_name, spec=pod_spec,
                                labels={**_labels(name, "worker"), f"{LABELS}/replica-index": str(count - 1)})
        created.append(Created(pod, BY, source="spec.mpiReplicaSpecs.Worker.template",
                               derived=frozenset(("spec.hostname", "spec.subdomain")),
                               template_labels=frozenset((template.get("metadata") or {}).get("labels") or ()),
                               appended=_appended(template.get("spec") or {})))
    return created


def _appended(spec: dict[str, Any], prefix: str = "") -> tuple[tuple[str, int], ...]:
    """The lists the operator appends to (volumes, the first container's mounts), with their template lengths."""
    containers = spec.get("containers") or [{}]
    return ((f"{prefix}spec.volumes", len(spec.get("volumes") or ())),
            (f"{prefix}spec.containers[0].volumeMounts", len(containers[0].get("volumeMounts") or ())))


def mpijob_names(manifest: dict[str, Any], sibling: Sibling) -> list[tuple[str, str]]:
    """The launcher Job's name (also a label value of its pods) and the last worker's hostname (a DNS-1035 label,
    the operator's own check) are at most 63 characters."""
    name = manifest["metadata"]["name"]
    workers = ((manifest.get("spec") or {}).get("mpiReplicaSpecs", {}).get("Worker") or {}).get("replicas", 1)
    too_long = [f"{what} {derived!r} ({len(derived)} characters)"
                for what, derived in longest_names(name, workers).items()
                if (dns_1035_label_problem if what == "worker hostname" else label_value_problem)(derived)]
    if not too_long:
        return []
    return [("metadata.name", f"the MPI operator names after it its {' and its '.join(too_long)}: hostnames and label "
             "values are at most 63 lowercase letters, digits and '-'")]


def _pod_sets(obj: Manifest, sibling: Sibling) -> tuple[list, int | None]:
    return replica_pod_sets((obj.get("spec") or {}).get("mpiReplicaSpecs") or {}, ("Launcher", "Worker")), None


def _shape(obj: Manifest, sibling: Sibling) -> RunShape:
    """The workers' pods and ranks (slotsPerWorker each); the launcher trains nothing."""
    spec = obj.get("spec") or {}
    pods = [(number(r.get("replicas"), 1), (r.get("template") or {}).get("spec") or {})
            for role, r in (spec.get("mpiReplicaSpecs") or {}).items() if role != "Launcher"]
    return run_shape("MPIJob", pods, spec.get("slotsPerWorker", 1), queue=scheduling_queue(spec))


# --8<-- [start:kind] (docs/guides/adding-a-kind.md shows it)
MPIJOB = Kind(
    API_VERSION, "MPIJob", WORKLOADS, name_problem=dns_1035_label_problem, derived_names=mpijob_names,
    created=mpijob_objects,
    crd=CrdSource("kubeflow.org_mpijobs.v2beta1.yaml", "kubeflow/mpi-operator", "v0.8.0", (API_VERSION,)),
    create_once=True, health="training_job.lua",
    ignored=IgnoredFields(("/spec/runPolicy/suspend",), pod_template_fields(".spec.mpiReplicaSpecs[].template.spec")),
    run=Run(_pod_sets, _shape, suspend=(("spec", "runPolicy", "suspend"),)))

KINDS = (MPIJOB,)
# --8<-- [end:kind]
