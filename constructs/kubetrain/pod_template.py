"""The pod every node of a training job runs: torchrun, the mounted run config, GPUs, EFA, /dev/shm.

Plain data, not cdk8s objects: the job construct hands the finished manifest to cdk8s in one call.
The launch contract (which variables torchrun reads) is the target operator's; this module only
renders what every target shares.
"""

from __future__ import annotations

from typing import Any

from kubetrain.job_props import TrainingJobProps
from kubetrain.nccl import EFA_ENV, GPU_ENV, NCCL_FAULT_ENV

CONFIG_MOUNT = "/etc/kubetrain"
CONFIG_FILE = "run.yaml"
SHM_MOUNT = "/dev/shm"
EFA_HUGEPAGES_DEFAULT = "5120Mi"

# torchrun's agents otherwise hand their workers one TCPStore that outlives every restart: keys
# left by the attempt before (a dead peer's address) are read by the next one, and agents that
# restarted for different reasons (a failure, or a peer's re-rendezvous) disagree on the attempt
# number that could tell them apart. With sharing off, rank 0 of every attempt hosts a fresh store
# on a port its agent picks.
LAUNCH_ENV: dict[str, str] = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}


def torchrun_command(job: TrainingJobProps) -> list[str]:
    """torchrun reads what the operator injects, PET_<OPTION>, as the default of --<option>.

    A restart budget needs c10d rendezvous: when a rank dies, its node's agent restarts its
    workers and re-rendezvouses, and c10d makes the agents of the other nodes notice and restart
    theirs (static rendezvous cannot).

    Fixed-size jobs: the master pod hosts the rendezvous store (Kubernetes expands $(VAR) from the
    operator's variables); PET_NNODES and PET_NPROC_PER_NODE come from the operator.
    Elastic jobs: the operator sets PET_RDZV_ENDPOINT (the first worker), PET_RDZV_BACKEND and
    PET_NNODES=min:max, but PET_NPROC_PER_NODE only when there is a Master, so it is given here.
    """
    launch = (f"--nproc-per-node={job.procs_per_node}" if job.elastic
              else "--rdzv-endpoint=$(PET_MASTER_ADDR):$(PET_MASTER_PORT)")
    return ["torchrun", f"--max-restarts={job.max_restarts}", "--rdzv-backend=c10d", launch, f"--rdzv-id={job.name}",
            "-m", "training", "--config", f"{CONFIG_MOUNT}/{CONFIG_FILE}"]


def container_env(job: TrainingJobProps) -> list[dict[str, str]]:
    env = dict(LAUNCH_ENV)
    if job.resources.gpus:
        env |= GPU_ENV | NCCL_FAULT_ENV
    if job.resources.efa:
        env |= EFA_ENV
    env |= job.env
    return [{"name": name, "value": value} for name, value in env.items()]


def container_resources(job: TrainingJobProps) -> dict[str, dict[str, str]]:
    r = job.resources
    # No CPU limit: CFS throttling stalls data loading and collectives; CPU is still requested.
    requests = {"cpu": r.cpu, "memory": r.memory}
    limits = {"memory": r.memory}
    extended = {}
    if r.gpus:
        extended["nvidia.com/gpu"] = str(r.gpus)
    if r.efa:
        extended["vpc.amazonaws.com/efa"] = str(r.efa)
    hugepages = r.hugepages_2mi or (EFA_HUGEPAGES_DEFAULT if r.efa else None)
    if hugepages:
        extended["hugepages-2Mi"] = hugepages
    # Extended resources and huge pages must be requested and limited alike.
    return {"requests": requests | extended, "limits": limits | extended}


def pod_template(job: TrainingJobProps, container_name: str, config_map: str,
                 labels: dict[str, str], annotations: dict[str, str]) -> dict[str, Any]:
    mounts = [{"name": "config", "mountPath": CONFIG_MOUNT, "readOnly": True},
              {"name": "shm", "mountPath": SHM_MOUNT}]
    volumes: list[dict[str, Any]] = [
        {"name": "config", "configMap": {"name": config_map}},
        # The container runtime's 64 MB /dev/shm breaks PyTorch's shared-memory tensors.
        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": job.resources.shm}},
    ]
    for v in job.volumes:
        mounts.append({"name": v.name, "mountPath": v.mount_path, **({"readOnly": True} if v.read_only else {})})
        volumes.append({"name": v.name, "persistentVolumeClaim": {"claimName": v.claim,
                                                                  **({"readOnly": True} if v.read_only else {})}})
    container: dict[str, Any] = {
        "name": container_name,
        "image": job.image,
        "command": torchrun_command(job),
        "resources": container_resources(job),
        "volumeMounts": mounts,
    }
    env = container_env(job)
    if env:
        container["env"] = env
    spec: dict[str, Any] = {"containers": [container], "volumes": volumes}
    if job.instance_type:
        spec["nodeSelector"] = {"node.kubernetes.io/instance-type": job.instance_type}
    if job.resources.gpus:
        # GPU node pools are tainted so that only pods asking for GPUs land there.
        spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    return {"metadata": {"labels": labels, "annotations": annotations}, "spec": spec}
