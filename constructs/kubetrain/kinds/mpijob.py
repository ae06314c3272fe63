"""Kubeflow MPIJob (`kubeflow.org/v2beta1`, mpi-operator v0.8): the NCCL tests' kind.

An NcclTest (kubetrain.jobs.nccl_test) renders here: a Launcher that runs `mpirun` and `workers` Workers
that run the image's sshd (the operator's default), one rank per GPU. The operator names the launcher's
Job and the workers' pods and headless Service after the MPIJob, so its name is a DNS-1035 label. Kueue
admits the Launcher and Worker pod sets in that order; `runPolicy.suspend` is Kueue's to set.
(kubeflow/mpi-operator v0.8: pkg/apis/kubeflow/v2beta1/types.go, pkg/controller/mpi_job_controller.go.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubetrain.admission.requests import replica_pod_sets
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
from kubetrain.platform.efa import EFA_HUGEPAGES_DEFAULT, efa_environment

if TYPE_CHECKING:
    from kubetrain.jobs.nccl_test import NcclTestProps
    from kubetrain.platform.instances import InstanceType

API_VERSION = "kubeflow.org/v2beta1"
EXPECTED_BUSBW_ANNOTATION = "kubetrain.dev/expected-busbw-gbytes"


def render(spec: NcclTestProps, namespace: str, instance: InstanceType) -> dict[str, Any]:
    """The MPIJob of an NCCL test on `instance` (a GPU type with EFA)."""
    gpus = instance.accelerators
    labels = {"kubetrain.dev/nccl-test": spec.name}
    resources = {"nvidia.com/gpu": str(gpus), "vpc.amazonaws.com/efa": str(instance.efa_interfaces),
                 "hugepages-2Mi": EFA_HUGEPAGES_DEFAULT}
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
        "nodeSelector": {"node.kubernetes.io/instance-type": instance.name},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    annotations = {}
    if instance.nccl_allreduce_busbw_gbs is not None:  # the catalog's pass mark (see its source)
        annotations[EXPECTED_BUSBW_ANNOTATION] = f"{instance.nccl_allreduce_busbw_gbs:g}"
    return {
        "apiVersion": API_VERSION, "kind": "MPIJob",
        "metadata": {"name": spec.name, "namespace": namespace, "labels": labels, "annotations": annotations},
        "spec": {
            "slotsPerWorker": gpus,
            "mpiImplementation": "OpenMPI",
            "launcherCreationPolicy": "WaitForWorkersReady",
            "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 0},
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": {"metadata": {"labels": labels}, "spec": {
                    "containers": [{"name": "launcher", "image": spec.image, "command": launcher,
                                    "resources": {"requests": {"cpu": "1", "memory": "2Gi"},
                                                  "limits": {"memory": "2Gi"}}}]}}},
                "Worker": {"replicas": spec.nodes, "template": {"metadata": {"labels": labels}, "spec": worker_pod}},
            },
        },
    }


def _pod_sets(obj: Manifest, sibling: Sibling) -> tuple[list, int | None]:
    return replica_pod_sets((obj.get("spec") or {}).get("mpiReplicaSpecs") or {}, ("Launcher", "Worker")), None


def _shape(obj: Manifest, sibling: Sibling) -> RunShape:
    """The workers' pods and ranks (slotsPerWorker each); the launcher trains nothing."""
    spec = obj.get("spec") or {}
    pods = [(number(r.get("replicas"), 1), (r.get("template") or {}).get("spec") or {})
            for role, r in (spec.get("mpiReplicaSpecs") or {}).items() if role != "Launcher"]
    return run_shape("MPIJob", pods, spec.get("slotsPerWorker", 1), queue=scheduling_queue(spec))


MPIJOB = Kind(
    API_VERSION, "MPIJob", WORKLOADS, name_format="DNS-1035 label",
    crd=CrdSource("kubeflow.org_mpijobs.v2beta1.yaml", "kubeflow/mpi-operator", "v0.8.0", (API_VERSION,)),
    create_once=True, health="training_job.lua",
    ignored=IgnoredFields(("/spec/runPolicy/suspend",), pod_template_fields(".spec.mpiReplicaSpecs[].template.spec")),
    run=Run(_pod_sets, _shape, suspend=(("spec", "runPolicy", "suspend"),)))

KINDS = (MPIJOB,)
