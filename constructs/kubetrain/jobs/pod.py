"""The pod every node of a training job runs: the launcher, mounted run config, accelerators, EFA, /dev/shm.

Plain data, not cdk8s objects: the target wraps this template in its operator's object and the
job construct hands the finished manifest to cdk8s in one call. What differs between operators
(container name, injected variables, rendezvous flags) comes from the job's target.
"""

from __future__ import annotations

from typing import Any

from kubetrain.jobs.function import PACKAGES_DIR, PACKAGES_ENV, PACKAGES_VOLUME, REQUIREMENTS_ENV, REQUIREMENTS_FILE
from kubetrain.jobs.launch import CONFIG_ENV, container_command, grace_period_s, launch_env
from kubetrain.jobs.spec import CONFIG_MOUNT, LOCAL_TIER_VOLUME, SHM_MOUNT, TRITON_CACHE_DIR, TRITON_VOLUME, JobSpec
from kubetrain.model.efa import efa_environment
from kubetrain.model.quantity import parse_quantity
from kubetrain.model.vocabulary import (
    EFA_RESOURCE,
    GPU_RESOURCE,
    HUGE_PAGES_RESOURCE,
    INSTANCE_TYPE_LABEL,
    NEURON_RESOURCE,
)
from kubetrain_runtime.dumps import FR_BUFFER_ENTRIES, FR_BUFFER_ENV, FR_FILE_ENV, POD_FR_FILE
from kubetrain_runtime.runtime_config import CHECKPOINT_DIR_ENV, JOB_ENV

# Hangs and collective failures (torch.distributed's ProcessGroupNCCL environment variables): a timed-out or failed NCCL collective
# aborts the process instead of hanging it, and first dumps the flight recorder's trace of the
# last collectives of every rank. The timeout itself is the run config's
# resilience.collective_timeout_s (the process group's timeout); rule KT113 keeps the training
# watchdog's floor above it, so the collective timeout and its dump come first.
NCCL_FAULT_ENV: dict[str, str] = {
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3",
    "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
    FR_BUFFER_ENV: FR_BUFFER_ENTRIES,
    # A job without a checkpoint folder keeps them in the container; otherwise the launcher and the runtime point
    # them at the checkpoint volume (kubetrain_runtime/dumps.py).
    FR_FILE_ENV: POD_FR_FILE,
}
CONFIG_HASH_ANNOTATION = "kubetrain.dev/config-sha256"
# The taint each accelerator's node pools carry, so only pods that need the accelerator land there.
ACCELERATOR_TAINTS = {GPU_RESOURCE: GPU_RESOURCE, NEURON_RESOURCE: NEURON_RESOURCE}


def launcher_env(job: JobSpec) -> dict[str, str]:
    """What kubetrain's launcher sets and reads itself (the run config's path, the metrics' job label, a command's or
    function's checkpoint folder for kubetrain_runtime.Run, torchrun's rendezvous for the target): a job's own `env`
    must not change it (KT105)."""
    env: dict[str, str] = {}
    if job.trainer:
        env |= CONFIG_ENV | {JOB_ENV: job.props.name}  # the metrics' job label
    elif job.launched_by_torchrun:  # for a loop on kubetrain_runtime.Run: where to checkpoint, the metrics' label
        env |= {JOB_ENV: job.props.name} | ({CHECKPOINT_DIR_ENV: job.checkpoint_dir} if job.checkpoint_dir else {})
    if job.function and job.function.packages:  # where the launcher installs them, and from which file
        env |= PACKAGES_ENV | {REQUIREMENTS_ENV: f"{CONFIG_MOUNT}/{REQUIREMENTS_FILE}"}
    if job.launched_by_torchrun:
        env |= launch_env(job) | job.props.target.launch_env(job.request)
    return env


def container_env(job: JobSpec) -> dict[str, str]:
    """Defaults first, the user's `env` last: a user's value always wins where the rules allow it."""
    env = launcher_env(job)
    if job.uses_gpus:
        # Triton's JIT cache on the node's disk (an emptyDir), not on shared storage or the image layer.
        env |= {"TRITON_CACHE_DIR": TRITON_CACHE_DIR} | NCCL_FAULT_ENV
    if job.resources.efa:
        env |= efa_environment(job.props.nccl)
    if job.uses_gpus and job.props.nccl is not None and job.props.nccl.debug is not None:
        env |= job.props.nccl.debug.environment()
    return env | job.props.env


def container_resources(job: JobSpec) -> dict[str, dict[str, str]]:
    r = job.resources
    # No CPU limit unless asked for: CFS throttling stalls data loading and collectives; CPU is still requested.
    requests = {"cpu": r.cpu, "memory": r.memory}
    limits = {"cpu": r.cpu_limit, "memory": r.memory} if r.cpu_limit else {"memory": r.memory}
    extended = {}
    if r.accelerators:
        extended[job.accelerator_resource] = str(r.accelerators)
    if r.efa:
        extended[EFA_RESOURCE] = str(r.efa)
    if r.hugepages_2mi and parse_quantity(r.hugepages_2mi) > 0:
        extended[HUGE_PAGES_RESOURCE] = r.hugepages_2mi
    # Extended resources and huge pages must be requested and limited alike.
    return {"requests": requests | extended, "limits": limits | extended}


METRICS_PORT_NAME = "metrics"  # what the PodMonitor of kubetrain.platform.gpu_monitoring scrapes


def metrics_ports(job: JobSpec) -> list[dict[str, Any]]:
    """The trainer's Prometheus endpoints: one port per local rank, from run.metrics.port; the first is
    named `metrics`, so a PodMonitor finds every pod."""
    port = job.trainer.run.metrics.port if job.trainer else 0
    if not port:
        return []
    return [{"name": METRICS_PORT_NAME if i == 0 else f"{METRICS_PORT_NAME}-{i}", "containerPort": port + i,
             "protocol": "TCP"} for i in range(job.props.procs_per_node)]


def local_checkpoint_volume(job: JobSpec) -> dict[str, Any] | None:
    """The fast checkpoint tier's folder, when the run config names one no volume of the job holds: an
    emptyDir on the node's disk (the instance store, on pools that RAID0 it), gone with the pod as it should be."""
    local_dir = job.trainer.run.checkpoint.local_dir if job.trainer else None
    if not local_dir or job.volume_at(local_dir) is not None:
        return None
    return {"name": LOCAL_TIER_VOLUME, "emptyDir": {}}


def placement(job: JobSpec) -> dict[str, Any]:
    """Node selector and tolerations: the pool's when the job names one, else the instance type's and the
    accelerator's taint; the pod settings' own are added."""
    props, pool = job.props, job.props.pool
    if pool is not None:
        node_selector, tolerations = pool.node_selector(), pool.tolerations()
    else:
        node_selector = {INSTANCE_TYPE_LABEL: props.instance_type} if props.instance_type else {}
        tolerations = []
        if job.resources.accelerators:
            taint = ACCELERATOR_TAINTS.get(job.accelerator_resource, job.accelerator_resource)
            tolerations.append({"key": taint, "operator": "Exists", "effect": "NoSchedule"})
    node_selector = node_selector | props.pod.node_selector
    tolerations = tolerations + [t.manifest() for t in props.pod.tolerations]
    return {**({"nodeSelector": node_selector} if node_selector else {}),
            **({"tolerations": tolerations} if tolerations else {})}


def pod_annotations(job: JobSpec, config_hash: str | None) -> dict[str, str]:
    """The pod's annotations: the job's own, the queue's placement and the run config's hash."""
    annotations = dict(job.props.pod.annotations)
    if job.props.queue:
        annotations |= job.props.queue.pod_annotations(job.props.placement)  # Kueue's topology-aware placement
    if config_hash:
        annotations[CONFIG_HASH_ANNOTATION] = config_hash
    return annotations


def pod_volumes(job: JobSpec) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The training container's volume mounts and the pod's volumes: kubetrain's own, then the job's."""
    props = job.props
    mounts: list[dict[str, Any]] = [{"name": "shm", "mountPath": SHM_MOUNT}]
    # The container runtime's 64 MB /dev/shm breaks PyTorch's shared-memory tensors.
    volumes: list[dict[str, Any]] = [{"name": "shm", "emptyDir": {"medium": "Memory",
                                                                  "sizeLimit": job.resources.shm}}]
    if job.trainer or job.function:
        mounts.insert(0, {"name": "kubetrain-config", "mountPath": CONFIG_MOUNT, "readOnly": True})
        volumes.insert(0, {"name": "kubetrain-config", "configMap": {"name": job.config_map_name}})
    if job.function and job.function.packages:  # pip installs them here at pod start, on the node's disk
        mounts.append({"name": PACKAGES_VOLUME, "mountPath": PACKAGES_DIR})
        volumes.append({"name": PACKAGES_VOLUME, "emptyDir": {}})
    if job.uses_gpus:
        mounts.append({"name": TRITON_VOLUME, "mountPath": TRITON_CACHE_DIR})
        volumes.append({"name": TRITON_VOLUME, "emptyDir": {}})
    local_tier = local_checkpoint_volume(job)
    if local_tier:
        mounts.append({"name": local_tier["name"], "mountPath": job.trainer.run.checkpoint.local_dir})
        volumes.append(local_tier)
    for v in props.volumes:
        mounts.append({"name": v.name, "mountPath": v.mount_path, **({"readOnly": True} if v.mounted_read_only else {})})
        volumes.append({"name": v.name, **v.pod_volume()})
    return mounts, volumes


def pod_template(job: JobSpec, config_hash: str | None) -> dict[str, Any]:
    props, pod = job.props, job.props.pod
    mounts, volumes = pod_volumes(job)
    container: dict[str, Any] = {"name": props.target.container_name, "image": props.image}
    if pod.image_pull_policy:
        container["imagePullPolicy"] = pod.image_pull_policy
    container["command"] = container_command(job)
    if job.command and job.command.working_dir:
        container["workingDir"] = job.command.working_dir
    env = container_env(job)
    if env:
        container["env"] = [{"name": name, "value": value} for name, value in env.items()]
    if job.function and job.function.secret_env():  # the package indexes Secrets hold, read when the pod starts
        container.setdefault("env", []).extend(job.function.secret_env())
    if job.trainer:  # the metrics' node label
        container.setdefault("env", []).append({"name": "NODE_NAME",
                                                "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}})
    container["resources"] = container_resources(job)
    ports = metrics_ports(job)
    if ports:
        container["ports"] = ports
    if pod.startup_probe:
        container["startupProbe"] = pod.startup_probe.manifest()
    if pod.liveness_probe:
        container["livenessProbe"] = pod.liveness_probe.manifest()
    container["volumeMounts"] = mounts
    container["securityContext"] = {"allowPrivilegeEscalation": False}

    spec: dict[str, Any] = {"containers": [container], "volumes": volumes,
                            # Training pods do not call the API server: no token unless asked for.
                            "automountServiceAccountToken": pod.mount_service_account_token}
    if pod.init_containers:
        spec["initContainers"] = [init.manifest(props.image, pod.image_pull_policy) for init in pod.init_containers]
    spec |= placement(job)
    if pod.affinity:
        spec["affinity"] = pod.affinity
    scheduler = pod.scheduler_name or (props.queue.scheduler_name if props.queue else None)
    optional = {"priorityClassName": pod.priority_class_name, "schedulerName": scheduler,
                "serviceAccountName": pod.service_account_name,
                "terminationGracePeriodSeconds": grace_period_s(job)}
    spec |= {key: value for key, value in optional.items() if value is not None}
    if pod.security_context:
        context = {"runAsUser": pod.security_context.run_as_user, "runAsGroup": pod.security_context.run_as_group,
                   "fsGroup": pod.security_context.fs_group, "runAsNonRoot": pod.security_context.run_as_non_root}
        spec["securityContext"] = {key: value for key, value in context.items() if value is not None}
    if props.nccl and props.nccl.host_network and not pod.host_network:
        spec |= props.nccl.pod_fields()
    if pod.host_network:
        # The pod keeps resolving cluster names (Services, the master pod) on the node's network.
        spec |= {"hostNetwork": True, "dnsPolicy": "ClusterFirstWithHostNet"}
    if pod.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": name} for name in pod.image_pull_secrets]

    annotations = pod_annotations(job, config_hash)
    metadata: dict[str, Any] = {"labels": {**pod.labels, **job.labels}}
    if annotations:
        metadata["annotations"] = annotations
    return {"metadata": metadata, "spec": spec}
