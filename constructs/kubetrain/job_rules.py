"""Compile-time rules for training jobs: each has a code, a message and a fix.

They run after the props have passed schema validation, so they can rely on types. A rule
yields Problems; all of them are reported together. The codes are listed in the README.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import PurePosixPath

from kubetrain.instance_types import INSTANCE_TYPES
from kubetrain.job_props import TrainingJobProps
from kubetrain.nccl import FORBIDDEN_EFA_ENV, FORBIDDEN_SOCKET_IFNAMES
from kubetrain.pod_template import CONFIG_MOUNT, SHM_MOUNT
from kubetrain.quantity import parse_quantity
from training.problems import Problem

Rule = Callable[[TrainingJobProps], Iterator[Problem]]

# Set by the training operator in every container, or by torchrun in every worker process.
OPERATOR_ENV = {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "PYTHONUNBUFFERED",
                "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK", "ROLE_WORLD_SIZE"}
OPERATOR_ENV_PREFIXES = ("PET_", "TORCHELASTIC_")


def name_fits_pod_names(job: TrainingJobProps) -> Iterator[Problem]:
    # The operator names pods and Services "<job>-worker-<i>"; a Service name is a 63-char label.
    # Elastic jobs have only Workers, as many as max_nodes (KT114 checks the range itself).
    workers = max(job.nodes, job.elastic.max_nodes or 0) if job.elastic else job.nodes - 1
    suffix = f"-worker-{workers - 1}" if workers else "-master-0"
    limit = 63 - len(suffix)
    if len(job.name) > limit:
        yield Problem("KT101", "name", f"{len(job.name)} characters is too long: the operator's pod and Service "
                      f"name '{job.name}{suffix}' would exceed 63", f"shorten the name to at most {limit} characters")


def fits_instance_type(job: TrainingJobProps) -> Iterator[Problem]:
    if job.instance_type is None:
        return
    node = INSTANCE_TYPES.get(job.instance_type)
    if node is None:
        yield Problem("KT111", "instance_type", f"unknown instance type {job.instance_type!r}",
                      f"use one of: {', '.join(sorted(INSTANCE_TYPES))}, or add it to kubetrain.instance_types")
        return
    gpus = node.accelerators if node.accelerator_resource == "nvidia.com/gpu" else 0
    if job.resources.gpus > gpus:
        yield Problem("KT102", "resources.gpus", f"{job.resources.gpus} GPUs requested but {node.name} has {gpus}",
                      f"request at most {gpus} GPUs per node, or choose an instance type with more")
    if job.resources.efa > node.efa_interfaces:
        yield Problem("KT103", "resources.efa",
                      f"{job.resources.efa} EFA interfaces requested but {node.name} has {node.efa_interfaces}",
                      f"request at most {node.efa_interfaces} (all of them, for full bandwidth)"
                      if node.efa_interfaces else "set efa to 0, or choose an EFA instance type")


def one_process_per_gpu(job: TrainingJobProps) -> Iterator[Problem]:
    gpus = job.resources.gpus
    if gpus and job.procs_per_node != gpus:
        yield Problem("KT104", "procs_per_node", f"{job.procs_per_node} processes for {gpus} GPUs per node",
                      f"set procs_per_node to {gpus}: each rank drives one GPU")


def env_not_owned_by_launcher(job: TrainingJobProps) -> Iterator[Problem]:
    for name in job.env:
        if name in OPERATOR_ENV or name.startswith(OPERATOR_ENV_PREFIXES):
            yield Problem("KT105", f"env.{name}", "is set by the training operator or torchrun",
                          f"remove {name}: the launcher sets it per pod and per rank")


def env_safe_for_efa(job: TrainingJobProps) -> Iterator[Problem]:
    if not job.resources.efa:
        return
    for name, value in job.env.items():
        if name in FORBIDDEN_EFA_ENV:
            yield Problem("KT106", f"env.{name}", f"must not be set on an EFA job: {FORBIDDEN_EFA_ENV[name]}",
                          f"remove {name}")
        elif name == "NCCL_SOCKET_IFNAME" and value in FORBIDDEN_SOCKET_IFNAMES:
            yield Problem("KT106", f"env.{name}", f"pinning {value} breaks EFA instances, where it is not the EFA path",
                          "remove it (kubetrain sets an exclusion list) or use an exclusion list such as ^lo,docker")


def shm_within_memory(job: TrainingJobProps) -> Iterator[Problem]:
    if parse_quantity(job.resources.shm) >= parse_quantity(job.resources.memory):
        yield Problem("KT107", "resources.shm",
                      f"/dev/shm of {job.resources.shm} does not fit in memory {job.resources.memory}",
                      "make shm smaller than memory: the memory-backed /dev/shm counts against the pod's limit")


def paths_on_volumes(job: TrainingJobProps) -> Iterator[Problem]:
    mounts = [(PurePosixPath(v.mount_path), v) for v in job.volumes]

    def volume_for(path: str):
        return next((v for mount, v in mounts if PurePosixPath(path).is_relative_to(mount)), None)

    checkpoint = volume_for(job.run.checkpoint.dir)
    if checkpoint is None:
        yield Problem("KT108", "run.checkpoint.dir", f"{job.run.checkpoint.dir} is not on a mounted volume: "
                      "checkpoints would vanish with the pod", "mount a shared volume there (volumes) or move the dir")
    elif checkpoint.read_only:
        yield Problem("KT108", "run.checkpoint.dir", f"{job.run.checkpoint.dir} is on read-only volume "
                      f"{checkpoint.name}", f"set read_only false on {checkpoint.name}, or move the dir")
    if job.run.data.source == "tokens" and volume_for(job.run.data.path) is None:
        yield Problem("KT108", "run.data.path", f"{job.run.data.path} is not on a mounted volume",
                      "mount the volume holding the token file (volumes)")


def volumes_distinct(job: TrainingJobProps) -> Iterator[Problem]:
    reserved = {"config", "shm"}
    seen_names, seen_paths = set(), {CONFIG_MOUNT, SHM_MOUNT}
    for i, volume in enumerate(job.volumes):
        if volume.name in seen_names | reserved:
            yield Problem("KT112", f"volumes.{i}.name", f"volume name {volume.name!r} is already used",
                          f"rename it; {', '.join(sorted(reserved))} are kubetrain's own")
        if volume.mount_path in seen_paths:
            yield Problem("KT112", f"volumes.{i}.mount_path", f"{volume.mount_path} is already mounted",
                          f"choose another path; {CONFIG_MOUNT} and {SHM_MOUNT} are kubetrain's own")
        seen_names.add(volume.name)
        seen_paths.add(volume.mount_path)


def timeouts_consistent(job: TrainingJobProps) -> Iterator[Problem]:
    resilience = job.run.resilience
    if job.resources.gpus and resilience.watchdog_floor_s <= resilience.collective_timeout_s:
        yield Problem("KT113", "run.resilience.watchdog_floor_s",
                      f"the watchdog ({resilience.watchdog_floor_s:g} s) would fire before the collective timeout "
                      f"({resilience.collective_timeout_s:g} s) and its NCCL flight-recorder dump",
                      f"set watchdog_floor_s above {resilience.collective_timeout_s:g}, or lower collective_timeout_s")


def elastic_range_holds_nodes(job: TrainingJobProps) -> Iterator[Problem]:
    if job.elastic is None:
        return
    if job.nodes not in job.node_range:
        field = "min_nodes" if job.elastic.min_nodes > job.nodes else "max_nodes"
        yield Problem("KT114", f"elastic.{field}", f"the job starts {job.nodes} pods, outside its elastic range "
                      f"{job.node_range.start}..{job.node_range.stop - 1}",
                      f"set elastic.min_nodes <= nodes ({job.nodes}) <= elastic.max_nodes")


def batch_divides(job: TrainingJobProps) -> Iterator[Problem]:
    # An elastic job may train at any size in its range: every one of them must divide the batch.
    for nodes in job.node_range:
        for problem in job.run.check_world_size(nodes * job.procs_per_node):
            yield replace(problem, path=f"run.{problem.path}",
                          message=f"{problem.message} (world size = {nodes} nodes x {job.procs_per_node})")


RULES: list[Rule] = [
    name_fits_pod_names, fits_instance_type, one_process_per_gpu, env_not_owned_by_launcher,
    env_safe_for_efa, shm_within_memory, paths_on_volumes, volumes_distinct, timeouts_consistent,
    elastic_range_holds_nodes, batch_divides,
]


def check_job(job: TrainingJobProps) -> list[Problem]:
    return [problem for rule in RULES for problem in rule(job)]
