"""A job as the rules and targets see it: the validated props, resolved against its cluster."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from functools import cached_property
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from kubetrain.jobs.command_flags import parallel_flags
from kubetrain.jobs.function import PACKAGES_DIR, PACKAGES_VOLUME, Function
from kubetrain.jobs.job_props import Command, NodeResources, Parallelism, Trainer, TrainingJobProps, Volume
from kubetrain.jobs.run_names import HASH_PLACEHOLDER
from kubetrain.model.efa import EFA_HUGEPAGES_DEFAULT
from kubetrain.model.job_request import JobRequest, MountedVolume
from kubetrain.model.vocabulary import GPU_RESOURCE, JOB_LABEL, RUN_CONFIG_FILE
from training.config import RunConfig
from training.memory import GIB, run_accumulation

if TYPE_CHECKING:
    from kubetrain.model.instances import InstanceType

CONFIG_MOUNT = "/etc/kubetrain"
SHM_MOUNT = "/dev/shm"
TRITON_VOLUME, TRITON_CACHE_DIR = "triton-cache", "/var/cache/triton"  # GPU jobs' node-local JIT cache
RESERVED_VOLUMES = {"kubetrain-config": CONFIG_MOUNT, "shm": SHM_MOUNT, TRITON_VOLUME: TRITON_CACHE_DIR,
                    PACKAGES_VOLUME: PACKAGES_DIR}
LOCAL_TIER_VOLUME = "kubetrain-local-ckpt"  # the trainer's fast checkpoint tier, mounted at its local_dir
DEFAULT_ACCELERATOR_RESOURCE = GPU_RESOURCE
DEFAULT_SHM = "1Gi"


@dataclass(frozen=True)
class JobSpec:
    props: TrainingJobProps
    namespace: str
    cluster: str
    instance: InstanceType | None  # None when no instance type is named, or it is unknown (KT111)
    create_once: bool = False  # the run's objects carry a hash of what is rendered in their names
    run_hash: str = HASH_PLACEHOLDER  # set once the run is rendered (kubetrain.jobs.run_names)

    @property
    def name(self) -> str:
        """The name of the run's objects: the job's name, plus the hash of its rendered objects when runs are
        create-once (a placeholder of the same length until they are rendered)."""
        return f"{self.props.name}-{self.run_hash}" if self.create_once else self.props.name

    @property
    def labels(self) -> dict[str, str]:
        """On every object of the run: the job's own name, which stays when the run's name changes."""
        return {JOB_LABEL: self.props.name}

    @property
    def object_labels(self) -> dict[str, str]:
        """On the operator's object only: the job label and the queue's (Kueue admits the job, not its pods)."""
        return {**self.labels, **(self.props.queue.job_labels() if self.props.queue else {})}

    @property
    def where(self) -> str:
        return f"{self.cluster}/{self.namespace}/{self.name}"

    @property
    def trainer(self) -> Trainer | None:
        return self.props.workload if isinstance(self.props.workload, Trainer) else None

    @property
    def command(self) -> Command | None:
        return self.props.workload if isinstance(self.props.workload, Command) else None

    @property
    def function(self) -> Function | None:
        return self.props.workload if isinstance(self.props.workload, Function) else None

    @property
    def launched_by_torchrun(self) -> bool:
        return self.command is None or self.command.launcher == "torchrun"

    def config_files(self) -> dict[str, str] | None:
        """The data of the job's ConfigMap, mounted at CONFIG_MOUNT: the trainer's run config, or the function's
        source, kwargs and requirements; None for a command job."""
        if self.trainer is not None:
            return {RUN_CONFIG_FILE: self.run.to_yaml()}
        return self.function.files() if self.function is not None else None

    @cached_property
    def run(self) -> RunConfig | None:
        """The trainer's run config as its pods read it: under FSDP, `strategy.accumulated_gradients: auto`
        resolved by the memory estimate against one of the job's accelerators at its fewest ranks
        (training/memory.py `accumulation_choice`, the function the trainer decides `auto` with), so the pods hold
        the gradients as synth judged them. None for other workloads."""
        if self.trainer is None:
            return None
        run = self.trainer.run
        if run.strategy.name != "fsdp" or run.strategy.accumulated_gradients != "auto":
            return run
        mode = run_accumulation(run, self.node_range.start * self.props.procs_per_node, self.accelerator_bytes,
                                self.uses_gpus)
        return run.model_copy(update={"strategy": run.strategy.model_copy(update={"accumulated_gradients": mode})})

    @property
    def accelerator_bytes(self) -> float | None:
        """Memory of one of the job's accelerators (its instance type's); None when it uses none or it is not
        known."""
        instance = self.instance
        if instance is None or not instance.accelerator_memory_gib or not self.resources.accelerators:
            return None
        return instance.accelerator_memory_gib * GIB

    @property
    def config_map_name(self) -> str:
        return f"{self.name}-config"

    @property
    def node_range(self) -> range:
        """Every pod count the job may train with."""
        elastic = self.props.elastic
        if elastic is None:
            return range(self.props.nodes, self.props.nodes + 1)
        return range(elastic.min_nodes, (elastic.max_nodes or self.props.nodes) + 1)

    @property
    def max_nodes(self) -> int:
        return self.request.max_nodes

    @cached_property
    def request(self) -> JobRequest:
        """What its launch target reads of it. Once per spec: a rendered run's hash makes a new spec (`replace`)."""
        props, queue = self.props, self.props.queue
        pod_group = getattr(queue, "scheduling_policy", None)  # Volcano: the operator builds the PodGroup from it
        return JobRequest(
            name=self.name, namespace=self.namespace, labels=self.labels, object_labels=self.object_labels,
            nodes=props.nodes, procs_per_node=props.procs_per_node, node_range=self.node_range,
            elastic=props.elastic is not None, max_restarts=props.max_restarts, backoff_limit=props.backoff_limit,
            restart_policy=props.restart_policy, launched_by_torchrun=self.launched_by_torchrun,
            kueue_queue=queue.name if queue is not None and queue.job_labels() else None,
            pod_group_policy=pod_group(min_available=self.node_range.start,
                                       priority_class=props.pod.priority_class_name) if pod_group else None,
            volumes=tuple(MountedVolume(v.name, v.mount_path) for v in props.volumes))

    @cached_property
    def resources(self) -> NodeResources:
        """The pod's resources with every unset count derived: accelerators and EFA interfaces from the
        instance (the pool's, if it attaches EFA, or the named type's), huge pages and /dev/shm from the pool. The rules and the
        pod template read this, never the props' own."""
        r, node, pool = self.props.resources, self.instance, self.props.pool
        accelerators = r.accelerators if r.accelerators is not None else (node.accelerators if node else 0)
        # A pool without EFA (a GpuNodePool) attaches none, whatever interfaces its instance type has.
        attached = node.efa_interfaces if node and (pool is None or pool.uses_efa) else 0
        efa = r.efa if r.efa is not None else attached
        hugepages = r.hugepages_2mi
        if hugepages is None and efa:
            hugepages = (pool.huge_pages() if pool is not None else None) or EFA_HUGEPAGES_DEFAULT
        shm = r.shm or (pool.shm_size(r.memory) if pool is not None else None) or DEFAULT_SHM
        return r.model_copy(update={"accelerators": accelerators, "efa": efa, "hugepages_2mi": hugepages, "shm": shm})

    @property
    def accelerator_resource(self) -> str:
        if self.instance is not None and self.instance.accelerator_resource:
            return self.instance.accelerator_resource
        return DEFAULT_ACCELERATOR_RESOURCE

    @property
    def uses_gpus(self) -> bool:
        return bool(self.resources.accelerators) and self.accelerator_resource == GPU_RESOURCE

    @cached_property
    def parallelism(self) -> Parallelism | None:
        """A command job's parallel layout: its `Parallelism`, else what its own Megatron-LM or NeMo flags set
        (micro_batch and global_batch None when the flags leave them out). None without either."""
        if self.command is None or self.command.parallelism is not None:
            return self.command.parallelism if self.command else None
        found = parallel_flags(self.command.command)
        if not found:
            return None
        values = {field: value for field, (value, _) in found.items()}
        return Parallelism.model_construct(**{"tensor": 1, "pipeline": 1, "context": 1, "micro_batch": None,
                                              "global_batch": None, **values})

    def parallelism_path(self, field: str = "") -> str:
        """Where a parallelism problem points: the Parallelism's field, or the command that sets it by flag."""
        if self.command is not None and self.command.parallelism is None:
            return "workload.command"
        return ".".join(filter(None, ["workload.parallelism", field]))

    @property
    def checkpoint_dir(self) -> str | None:
        if self.trainer is not None:
            return self.trainer.run.checkpoint.dir
        return self.props.workload.checkpoint_dir

    def volume_at(self, path: str) -> Volume | None:
        """The volume a path in the pod lives on: the deepest mount that holds it, as the kernel resolves it."""
        resolved = PurePosixPath(posixpath.normpath(path))  # /fsx/../etc is not on /fsx
        holding = [v for v in self.props.volumes if resolved.is_relative_to(v.mount_path)]
        return max(holding, key=lambda v: len(PurePosixPath(v.mount_path).parts), default=None)

    def lost_with_pod(self, path: str) -> str | None:
        """Why what is written at `path` would not outlive the pod ("not on a mounted volume", "on <volume>, which
        is gone with the pod"), or None when a persistent volume holds it: the checks of every folder a run
        writes for later (checkpoints, logs, profiles) say it alike."""
        volume = self.volume_at(path)
        if volume is None:
            return "not on a mounted volume"
        return None if volume.persistent else f"on {volume.name}, which is gone with the pod"
