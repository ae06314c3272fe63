"""Compile-time rules for training jobs, declared in the registry beside their checks.

A check gets the resolved job (`JobSpec`: validated props, namespace, instance type) and yields
(field path, message) or (field path, message, fix) for each violation; the decorator turns them
into Problems carrying the rule's code (and its registered fix when none is given). Every rule of
a job runs, so all its problems are reported together. Sources: kubetrain.rules.sources.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from decimal import Decimal
from math import gcd
from typing import Any

from kubetrain.jobs.command_flags import (
    PER_POD_FLAGS,
    SHAPE_FLAGS,
    flags,
    hard_coded,
    parallel_flags,
    starts_a_launcher,
)
from kubetrain.jobs.containers import container_part_problems
from kubetrain.jobs.debugging import debugging_problems
from kubetrain.jobs.function import index_env_problems
from kubetrain.jobs.launch import stop_needs_s
from kubetrain.jobs.memory import memory_problems
from kubetrain.jobs.pod import container_resources, launcher_env, metrics_ports, placement, pod_annotations, pod_volumes
from kubetrain.jobs.props import ClaimVolume, EmptyDirVolume
from kubetrain.jobs.ranges import counts_dividing, describe, divisors, gaps
from kubetrain.jobs.spec import JOB_LABEL, LOCAL_TIER_VOLUME, RESERVED_VOLUMES, JobSpec
from kubetrain.kinds.target import JOB_CONTROLLER_LABELS
from kubetrain.names import image_digest, image_tag
from kubetrain.output.apiserver.meta import ANNOTATIONS_LIMIT, annotations_size
from kubetrain.platform.efa import environment_problems
from kubetrain.platform.identity import ServiceAccount, identity_problems
from kubetrain.platform.instances import BUILTIN_CATALOG
from kubetrain.platform.node_pools import EFA_RESOURCE, HUGE_PAGES_RESOURCE, pool_placement_problems
from kubetrain.platform.queues import OTHER_SCHEDULER
from kubetrain.platform.scheduling import OTHER_PLACE, PriorityClass
from kubetrain.platform.security import Level, PodCheck, pod_security_problems
from kubetrain.platform.storage import (
    Claim,
    checkpoint_volume_problems,
    claim_namespace_problems,
    dataset_volume_problems,
)
from kubetrain.quantity import parse_quantity
from kubetrain.rules.registry import Rule, Severity, register
from kubetrain.rules.sources import (
    DCP,
    EC2,
    EFA_ENV,
    EFA_TYPES,
    EKS_EFA,
    EMPTYDIR,
    IMAGES,
    K8S_BATCH_VALIDATION,
    K8S_CORE_VALIDATION,
    K8S_JOB_LABELS,
    K8S_NAMES,
    KARPENTER_TYPES,
    MEGATRON,
    OBJECT_META,
    PG,
    PYTORCHJOB,
    PYTORCHJOB_TYPES,
    TORCHRUN,
    TRAINER,
    TRITON,
    VOLUMES,
    cite,
)
from training.flops import checkpoint_bytes
from kubetrain_runtime.config import profile_dir
from kubetrain_runtime.problems import Problem

Violation = tuple[str, str] | tuple[str, str, str]
Check = Callable[[JobSpec], Iterator[Violation]]

_CHECKS: list[tuple[Rule, Check]] = []

# Set by torchrun in every worker process (and read from PET_* by torchrun itself).
TORCHRUN_ENV = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                "ROLE_RANK", "ROLE_NAME", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID"}
TORCHRUN_ENV_PREFIXES = ("PET_", "TORCHELASTIC_")
# Set by the NVIDIA and Neuron device plugins to the devices the kubelet allocated to the container.
DEVICE_PLUGIN_ENV = {"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "NEURON_RT_VISIBLE_CORES"}


def job_rule(code: str, severity: Severity, title: str, *, rationale: str, fix: str, source: str,
             targets: tuple[str, ...] = ()) -> Callable[[Check], Check]:
    rule = register(code, severity, title, rationale=rationale, fix=fix, source=source, targets=targets)

    def decorate(check: Check) -> Check:
        _CHECKS.append((rule, check))
        return check

    return decorate


def check_job(job: JobSpec) -> list[Problem]:
    """Every problem of the job: the generic rules that apply to its target, then the target's own."""
    problems = []
    for rule, check in _CHECKS:
        if rule.targets and job.props.target.name not in rule.targets:
            continue
        for path, message, *fix in check(job):
            problems.append(Problem(rule.code, path, message, fix[0] if fix else rule.fix))
    environment = environment_problems(job.props.env, gpus=job.uses_gpus, efa=bool(job.resources.efa),
                                       profile=job.props.nccl)  # KT106, KT115, KT116, KT126, KT127
    environment += index_env_problems(job.props.env)  # KT160
    return (problems + environment + debugging_problems(job) + batch_divides(job) + platform_problems(job) +
            pod_part_problems(job) + memory_problems(job) + list(job.props.target.check(job)))


def pod_part_problems(job: JobSpec) -> list[Problem]:
    """The pod parts the job names: probes and init containers against the pod (KT150, KT151), its priority class
    and service account against its cluster and namespace (KT153), the account's AWS role against the job's
    environment and volumes (KT155)."""
    pod = job.props.pod
    ports = [port["name"] for port in metrics_ports(job)]
    volumes = [volume["name"] for volume in pod_volumes(job)[1]]
    problems = container_part_problems(pod.init_containers, {"liveness_probe": pod.liveness_probe,
                                                             "startup_probe": pod.startup_probe},
                                       job.props.target.container_name, ports, volumes)
    if isinstance(pod.priority_class, PriorityClass) and pod.priority_class.cluster.props.name != job.cluster:
        problems.append(Problem(OTHER_PLACE.code, "pod.priority_class", f"PriorityClass {pod.priority_class.name} "
                                f"is cluster {pod.priority_class.cluster.props.name}'s, and the job runs in "
                                f"{job.cluster}", OTHER_PLACE.fix))
    account = pod.service_account
    if isinstance(account, ServiceAccount):
        where = (account.cluster.props.name, account.namespace)
        if where != (job.cluster, job.namespace):
            problems.append(Problem(OTHER_PLACE.code, "pod.service_account", f"ServiceAccount {account.name} is "
                                    f"in {'/'.join(where)}, and the job's pods in {job.cluster}/{job.namespace}",
                                    OTHER_PLACE.fix))
        problems += identity_problems(account, job.props.env, [init.env for init in pod.init_containers],
                                      [(v.name, v.mount_path) for v in job.props.volumes])
    return problems


def platform_problems(job: JobSpec) -> list[Problem]:
    """The job against the platform objects it names: its pool (KT401-KT403), its storage (KT412, KT413) and
    its queue's placement (KT421). The checks are the platform modules'; they declare the rules."""
    props, problems = job.props, []
    if props.pool is not None:
        pod = placement(job)
        problems += [_on_job_fields(job, p) for p in pool_placement_problems(
            props.pool, container_resources(job)["requests"], pod.get("tolerations", []))]
    for i, volume in enumerate(props.volumes):
        if isinstance(volume, ClaimVolume) and isinstance(volume.claim, Claim):
            problems += claim_namespace_problems(volume.claim, job.namespace, f"volumes.{i}.claim")
    checkpoint = job.volume_at(job.checkpoint_dir) if job.checkpoint_dir else None
    if isinstance(checkpoint, ClaimVolume) and isinstance(checkpoint.claim, Claim):
        field = "workload.run.checkpoint.dir" if job.trainer else "workload.checkpoint_dir"
        problems += checkpoint_volume_problems(checkpoint.claim, field)
    data = job.trainer.run.data.path if job.trainer and job.trainer.run.data.source == "tokens" else None
    dataset = job.volume_at(data) if data else None
    if isinstance(dataset, ClaimVolume) and isinstance(dataset.claim, Claim) and dataset is not checkpoint:
        problems += dataset_volume_problems(dataset.claim, f"volumes.{props.volumes.index(dataset)}")
    if props.queue is not None:
        problems += props.queue.placement_problems(props.placement)
        scheduler = props.queue.scheduler_name
        if scheduler is not None and props.pod.scheduler_name not in (None, scheduler):
            problems.append(Problem(OTHER_SCHEDULER.code, "pod.scheduler_name", f"queue {props.queue.name} gangs its "
                                    f"jobs through {scheduler}, and the pods name {props.pod.scheduler_name}",
                                    OTHER_SCHEDULER.fix))
    elif props.placement is not None:
        problems.append(Problem("KT421", "placement", "topology placement needs a queue to honour it",
                                "set queue= a Kueue LocalQueue whose flavors have a Topology, or drop placement"))
    return problems


def _on_job_fields(job: JobSpec, problem: Problem) -> Problem:
    """A pool's finding about a Kubernetes resource (resources.vpc.amazonaws.com/efa), on the field the user
    wrote (resources.efa)."""
    resource = problem.path.removeprefix("resources.")
    fields = {job.accelerator_resource: "accelerators", EFA_RESOURCE: "efa", HUGE_PAGES_RESOURCE: "hugepages_2mi"}
    return replace(problem, path=f"resources.{fields[resource]}") if resource in fields else problem


def pod_security_check(job: JobSpec, spec: dict[str, Any]) -> PodCheck:
    """KT430 for the job's pod (`spec`, its template's) at a namespace's Pod Security level, on the job's own
    fields. Jobs cannot ask for privileged containers or host paths; what can break a level is the host network,
    an explicitly mounted token (allowed: the user asked for it) and what `restricted` adds."""
    network_field = "pod.host_network" if job.props.pod.host_network else "nccl.host_network"

    def on_job_fields(problem: Problem) -> Problem:
        if problem.path == "hostNetwork":
            return Problem(problem.code, network_field, problem.message,
                           "use the pod network (AWS's reference manifests do, and EFA works on it), or run the "
                           "job in a namespace of its own that PodSecurity leaves privileged")
        if problem.path.startswith("initContainers."):  # the fields as the user wrote them
            problem = replace(problem, path="init_containers." + problem.path.removeprefix("initContainers."))
        if problem.path.endswith("runAsNonRoot"):
            return Problem(problem.code, "pod.security_context.run_as_non_root", problem.message,
                           "set pod.security_context.run_as_non_root (with an image whose user is not root)")
        return Problem(problem.code, f"pod.{problem.path}", problem.message,
                       "enforce baseline on the job's namespace (PodSecurity(level='baseline')), or add the field "
                       "with job.patch(...)")

    def check(level: Level) -> list[Problem]:
        return [on_job_fields(p) for p in pod_security_problems(
            spec, level, path="", token_allowed=job.props.pod.mount_service_account_token)]

    return check


# -- names and placement --------------------------------------------------------------------------

@job_rule("KT101", "error", "job name too long for the operator's derived names",
          rationale="Operators name pods and Services after the job (PyTorchJob: <job>-worker-<i>; TrainJob: "
                    "<job>-node-<i>-<j>); a Service name is a DNS label of at most 63 characters, so a long job "
                    "name is accepted and its pods never start.",
          fix="shorten the job name", source=cite(K8S_NAMES, PYTORCHJOB, TRAINER))
def name_fits_derived_names(job: JobSpec) -> Iterator[Violation]:
    limit, longest = job.props.target.max_name_length(job)
    if len(job.name) > limit:
        added = len(job.name) - len(job.props.name)  # the definition's hash, for create-once runs
        yield ("name", f"{len(job.props.name)} characters is too long: the operator's name '{longest}' would "
               f"exceed 63", f"shorten the name to at most {limit - added} characters")


@job_rule("KT102", "error", "more accelerators than the instance type has",
          rationale="A pod asking a node for more GPUs or Neuron devices than it has is never scheduled.",
          fix="request at most the instance's accelerators, or choose a larger instance type",
          source=EC2)
def accelerators_fit(job: JobSpec) -> Iterator[Violation]:
    node, wanted = job.instance, job.resources.accelerators
    if node is not None and wanted > node.accelerators:
        kind = node.accelerator_resource or "accelerators"
        yield ("resources.accelerators", f"{wanted} {kind} requested but {node.name} has {node.accelerators}",
               f"request at most {node.accelerators} per node, or choose an instance type with more")


@job_rule("KT103", "error", "more EFA interfaces than the instance type has",
          rationale="A pod asking for more vpc.amazonaws.com/efa than the node exposes is never scheduled.",
          fix="request exactly the instance's EFA interfaces", source=cite(EC2, EFA_TYPES))
def efa_fits(job: JobSpec) -> Iterator[Violation]:
    node, wanted = job.instance, job.resources.efa
    if node is not None and wanted > node.efa_interfaces:
        yield ("resources.efa", f"{wanted} EFA interfaces requested but {node.name} has {node.efa_interfaces}",
               f"request {node.efa_interfaces} (all of them, for full bandwidth)" if node.efa_interfaces
               else "set efa to 0, or choose an EFA instance type")


@job_rule("KT104", "error", "processes per node differ from accelerators per node",
          rationale="Each rank drives one accelerator: fewer ranks leave devices idle, more share one device.",
          fix="set procs_per_node to resources.accelerators", source=TORCHRUN)
def one_process_per_accelerator(job: JobSpec) -> Iterator[Violation]:
    wanted = job.resources.accelerators
    if wanted and job.props.procs_per_node != wanted:
        yield ("procs_per_node", f"{job.props.procs_per_node} processes for {wanted} accelerators per node",
               f"set procs_per_node to {wanted}: each rank drives one device")


@job_rule("KT111", "error", "unknown instance type",
          rationale="The capacity rules need the instance's accelerators, EFA interfaces, CPU and memory.",
          fix="use a type of the instance catalog (kubetrain.platform.instances), or register yours with "
              "Cluster(instance_types=[InstanceType(...)])",
          source="constructs/kubetrain/platform/instances.py")
def instance_type_known(job: JobSpec) -> Iterator[Violation]:
    if job.props.instance_type and job.instance is None:
        near = BUILTIN_CATALOG.near(job.props.instance_type)
        yield ("instance_type", f"unknown instance type {job.props.instance_type!r}",
               f"{near}use a type of the instance catalog (kubetrain.platform.instances), or register yours with "
               "Cluster(instance_types=[InstanceType(...)])")


@job_rule("KT123", "error", "pod requests more CPU or memory than the node can allocate",
          rationale="The kubelet reserves CPU and memory for the system and evictions; a pod asking for the "
                    "instance's full size never schedules.",
          fix="request at most the node's allocatable CPU and memory", source=KARPENTER_TYPES)
def requests_fit_allocatable(job: JobSpec) -> Iterator[Violation]:
    node = job.instance
    if node is None or job.props.pool is not None:  # a pool's fit is KT401's, over every type of the pool
        return
    r = job.resources
    cpu, memory = Decimal(str(node.allocatable_cpu())), Decimal(str(node.allocatable_memory()))
    if parse_quantity(r.cpu) > cpu:
        yield ("resources.cpu", f"{r.cpu} CPUs requested but a {node.name} can allocate {cpu:.3f}",
               f"request at most {int(cpu * 1000)}m")
    hugepages = parse_quantity(r.hugepages_2mi or "0")
    if parse_quantity(r.memory) + hugepages > memory:
        gib = memory / 2**30
        yield ("resources.memory", f"{r.memory} of memory (plus {hugepages / 2**20:.0f}Mi huge pages) requested but "
               f"a {node.name} can allocate {gib:.1f}Gi", f"request at most {int(memory / 2**30 * 1024) - int(hugepages / 2**20)}Mi of memory")


@job_rule("KT124", "error", "accelerator instance type but no accelerators requested",
          rationale="Nothing else runs on a GPU or Trainium node (they are tainted); a job there without "
                    "accelerators pays for them and trains on CPUs.",
          fix="set resources.accelerators to the instance's count", source=EC2)
def accelerators_requested(job: JobSpec) -> Iterator[Violation]:
    node = job.instance
    if node is not None and node.accelerators and not job.resources.accelerators:
        yield ("resources.accelerators", f"{node.name} has {node.accelerators} accelerators and the job requests "
               "none", f"set resources.accelerators to {node.accelerators}")


@job_rule("KT125", "warning", "EFA instance type with fewer EFA interfaces requested than it has",
          rationale="Karpenter attaches EFA only for pods that request vpc.amazonaws.com/efa; without all of them "
                    "NCCL silently falls back to TCP sockets or runs at a fraction of the bandwidth (the guide's "
                    "'EFA not detected').",
          fix="request every EFA interface of the instance", source=cite(EKS_EFA, EFA_TYPES))
def efa_requested(job: JobSpec) -> Iterator[Violation]:
    node = job.instance
    # On a pool, KT403 already refuses any other count than the instance's.
    if node is not None and node.efa_interfaces and job.resources.efa < node.efa_interfaces \
            and job.props.nodes > 1 and job.props.pool is None:
        yield ("resources.efa", f"{job.resources.efa} of {node.name}'s {node.efa_interfaces} EFA interfaces "
               "requested", f"set resources.efa to {node.efa_interfaces}")


# -- environment ----------------------------------------------------------------------------------

@job_rule("KT105", "error", "environment variable owned by the operator, torchrun, the device plugin or kubetrain",
          rationale="The operator sets these per pod, torchrun per rank, the device plugin per container (the "
                    "devices it allocated) and kubetrain's launcher per job; a value in the job definition is "
                    "overwritten, or worse, wins: every pod the same rank, ranks on devices they were not given, "
                    "a launcher reading another run config.",
          fix="remove the variable", source=cite(PYTORCHJOB, TRAINER, TORCHRUN))
def env_not_owned_by_launcher(job: JobSpec) -> Iterator[Violation]:
    owned = job.props.target.injected_env(job)
    ours = launcher_env(job)
    for name in job.props.env:
        torchrun = job.launched_by_torchrun and (name in TORCHRUN_ENV or name.startswith(TORCHRUN_ENV_PREFIXES))
        if name in owned:
            yield (f"env.{name}", f"is set by {job.props.target.env_owner(name)} in every pod",
                   f"remove {name}: the value given here is overwritten")
        elif torchrun:
            yield (f"env.{name}", "is set by torchrun for each rank", f"remove {name}: torchrun sets it per rank")
        elif job.resources.accelerators and name in DEVICE_PLUGIN_ENV:
            yield (f"env.{name}", "is set by the device plugin to the devices the container was given",
                   f"remove {name}: each rank picks its device by LOCAL_RANK among the visible ones")
        elif name in ours or (job.trainer and name == "NODE_NAME") or (
                job.function and name in {e["name"] for e in job.function.secret_env()}):
            yield (f"env.{name}", "is set by kubetrain's launcher for this job", f"remove {name}")


# -- Function workloads -----------------------------------------------------------------------------

@job_rule("KT158", "error", "a name the function reads that nothing defines",
          rationale="The pods run the function's source alone, in a module of its own: a name it reads that it "
                    "neither defines, imports nor receives, and that is not a builtin, raises NameError on every "
                    "rank once the pods have started (the Kubeflow guide's batch snippet calls os without importing "
                    "it). Where the source can bind names unseen (exec, eval, globals(), vars()) or its module "
                    "star-imports, nothing is judged; a use under `if TYPE_CHECKING:` or in a try that catches "
                    "NameError is not reported.",
          fix="import the name inside the function (or define it there, or pass its value in kwargs)",
          source="https://docs.python.org/3/reference/executionmodel.html#resolution-of-names")
def function_names_defined(job: JobSpec) -> Iterator[Violation]:
    function = job.function
    for name, where in function.undefined_names() if function else []:
        fix = (f"add `import {name}` at the top of the function's body" if name in sys.stdlib_module_names else
               f"import {name} inside the function, define it there, or pass its value in kwargs")
        yield ("workload.func", f"{function.where} reads {name!r} ({where}), which it neither defines, imports nor "
               "receives, and which is no builtin: a NameError on every rank once the pods start", fix)


@job_rule("KT159", "warning", "torch.nn.DataParallel in a function that runs as several ranks",
          rationale="torchrun starts one process per rank, and DataParallel makes each of them drive every GPU it "
                    "sees on its own: N unsynchronised copies of the model, each with its own gradients, that "
                    "never average. PyTorch recommends DistributedDataParallel, one process per GPU, over "
                    "DataParallel even on one node.",
          fix="wrap the model in torch.nn.parallel.DistributedDataParallel(model.to(device), "
              "device_ids=[local_rank]) after dist.init_process_group()",
          source="https://docs.pytorch.org/docs/stable/notes/cuda.html#cuda-nn-ddp-instead")
def function_without_data_parallel(job: JobSpec) -> Iterator[Violation]:
    function = job.function
    ranks = job.max_nodes * job.props.procs_per_node
    lines = function.data_parallel_lines() if function and ranks > 1 else []
    if lines:
        where = f"{function.file_name} line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))}"
        yield ("workload.func", f"{function.where} uses torch.nn.DataParallel ({where}) and runs as up to {ranks} "
               "ranks: each rank would drive all of its GPUs alone, with no gradient averaging between ranks")


@job_rule("KT117", "error", "Triton cache on shared storage",
          rationale="Hundreds of ranks compiling into one cache on a shared file system contend on its locks: the "
                    "guide's 512-rank hang.",
          fix="leave TRITON_CACHE_DIR to kubetrain (GPU jobs get an emptyDir on the node at /var/cache/triton) or "
              "point it at another emptyDir",
          source=cite(TRITON, EMPTYDIR))
def triton_cache_local(job: JobSpec) -> Iterator[Violation]:
    path = job.props.env.get("TRITON_CACHE_DIR")
    volume = job.volume_at(path) if path and path.startswith("/") else None
    if volume is not None and volume.shared:
        yield ("env.TRITON_CACHE_DIR", f"{path} is on shared volume {volume.name}")


@job_rule("KT118", "warning", "huge pages requested while EFA is told not to use them",
          rationale="FI_EFA_USE_HUGE_PAGE=0 makes the EFA provider ignore the huge pages the pod reserves: memory "
                    "set aside for nothing.",
          fix="drop FI_EFA_USE_HUGE_PAGE=0, or set resources.hugepages_2mi to 0Mi", source=EFA_ENV)
def hugepages_used(job: JobSpec) -> Iterator[Violation]:
    pages = job.resources.hugepages_2mi
    if job.props.env.get("FI_EFA_USE_HUGE_PAGE") == "0" and pages and parse_quantity(pages) > 0:
        yield ("env.FI_EFA_USE_HUGE_PAGE", f"{pages} of huge pages are reserved and FI_EFA_USE_HUGE_PAGE=0 "
               "leaves them unused")


@job_rule("KT119", "warning", "image without a fixed tag",
          rationale="An image with no tag or `latest` changes under the job: a restarted pod can run other code, and "
                    "no run can be reproduced.",
          fix="pin a version tag or an @sha256 digest", source=IMAGES)
def image_pinned(job: JobSpec) -> Iterator[Violation]:
    tag = image_tag(job.props.image)
    if image_digest(job.props.image) is None and tag in (None, "latest"):
        yield ("image", f"{job.props.image!r} has {'no tag' if tag is None else 'the tag latest'}")


# -- resources and volumes ----------------------------------------------------------------------

@job_rule("KT107", "error", "/dev/shm does not fit in the memory limit",
          rationale="The memory-backed /dev/shm counts against the container's memory limit.",
          fix="make resources.shm smaller than resources.memory", source=EMPTYDIR)
def shm_within_memory(job: JobSpec) -> Iterator[Violation]:
    r = job.resources
    if parse_quantity(r.shm) >= parse_quantity(r.memory):
        yield ("resources.shm", f"/dev/shm of {r.shm} does not fit in memory {r.memory}")
        return
    in_memory = parse_quantity(r.shm)
    for i, volume in enumerate(job.props.volumes):
        if isinstance(volume, EmptyDirVolume) and volume.empty_dir == "memory" and volume.size_limit:
            in_memory += parse_quantity(volume.size_limit)
            if in_memory >= parse_quantity(r.memory):
                yield (f"volumes.{i}.size_limit", f"memory-backed volumes ({volume.size_limit} here, with /dev/shm's "
                       f"{r.shm}) do not fit in memory {r.memory}", "shrink the size limits, or request more memory")


@job_rule("KT108", "error", "checkpoints or data not on a suitable volume",
          rationale="Checkpoints must outlive the pod and be writable by every rank; a token file must be in the pod.",
          fix="mount a persistent, writable volume at the checkpoint dir (and a volume holding the data)",
          source=cite(DCP, "README.md (Resilience)"))
def paths_on_volumes(job: JobSpec) -> Iterator[Violation]:
    checkpoint = job.checkpoint_dir
    field = "workload.run.checkpoint.dir" if job.trainer else "workload.checkpoint_dir"
    if checkpoint is not None:
        volume = job.volume_at(checkpoint)
        if (where := job.lost_with_pod(checkpoint)) is not None:
            yield (field, f"{checkpoint} is {where}: checkpoints would vanish with the pod",
                   "mount a PersistentVolumeClaim there (volumes) or move the dir")
        elif volume.mounted_read_only:
            yield (field, f"{checkpoint} is on read-only volume {volume.name}",
                   f"set read_only false on {volume.name}, or move the dir")
    board = job.trainer.run.metrics.tensorboard_dir if job.trainer else None
    if board and not getattr(job.volume_at(board), "persistent", False):
        yield ("workload.run.metrics.tensorboard_dir", f"{board} is not on a persistent volume: the event files "
               "would vanish with the pod", "mount a PersistentVolumeClaim there (volumes) or move the dir")
    data = job.trainer.run.data.path if job.trainer and job.trainer.run.data.source == "tokens" else None
    if data and isinstance(job.volume_at(data), EmptyDirVolume):
        yield ("workload.run.data.path", f"{data} is on emptyDir {job.volume_at(data).name}, which every pod starts "
               "with empty", "mount the claim that holds the token file (volumes)")
    elif job.trainer and job.trainer.run.data.source == "tokens" and job.volume_at(job.trainer.run.data.path) is None:
        yield ("workload.run.data.path", f"{job.trainer.run.data.path} is not on a mounted volume",
               "mount the volume holding the token file (volumes)")


@job_rule("KT255", "error", "profiling that cannot leave a trace",
          rationale="The profiler's traces are written at the end of each window into the profile folder; on a volume "
                    "that goes with the pod (or none) they vanish before anyone opens them, a window that ends past "
                    "max_steps is never written, and a rank the job does not have is never profiled.",
          fix="put profiling.dir (or the tensorboard or checkpoint folder it defaults to) on a persistent volume, "
              "end the window by max_steps, and list ranks below the job's world size",
          source=cite("https://pytorch.org/docs/stable/profiler.html", "kubetrain_runtime/profiling.py"))
def profiling_leaves_a_trace(job: JobSpec) -> Iterator[Violation]:
    run = job.trainer.run if job.trainer else None
    if run is None or not run.profiling.enabled:
        return
    profiling, field = run.profiling, "workload.run.profiling"
    folder = profile_dir(profiling, run.metrics, run.checkpoint)
    where, volume = job.lost_with_pod(folder), job.volume_at(folder)
    if where is None and volume.mounted_read_only:
        where = f"on read-only volume {volume.name}"
    if where is not None:
        yield (f"{field}.dir", f"the profile folder {folder} is {where}: the traces would be lost",
               "set profiling.dir to a folder on a writable PersistentVolumeClaim of the job (volumes)")
    if profiling.last_step > run.max_steps:
        yield (f"{field}.start_step", f"the profiling windows end at step {profiling.last_step}, past max_steps "
               f"{run.max_steps}: the last window is never written",
               f"start by step {run.max_steps - profiling.last_step + profiling.start_step}, or shorten active or "
               "repeat")
    world = job.max_nodes * job.props.procs_per_node
    missing = [rank for rank in profiling.ranks if rank >= world] if profiling.ranks != "all" else []
    if missing:
        yield (f"{field}.ranks", f"ranks {missing} are not in the job's {world} ranks",
               f"list ranks from 0 to {world - 1}, or `all`")


@job_rule("KT112", "error", "volume name or mount path used twice or reserved",
          rationale="Two volumes with one name or one path make the pod invalid; kubetrain's own volumes hold the "
                    "run config and /dev/shm.",
          fix="rename the volume or choose another path", source=VOLUMES)
def volumes_distinct(job: JobSpec) -> Iterator[Violation]:
    names, paths = {*RESERVED_VOLUMES, LOCAL_TIER_VOLUME}, set(RESERVED_VOLUMES.values())
    reserved = ", ".join([*(f"{n} ({p})" for n, p in RESERVED_VOLUMES.items()), LOCAL_TIER_VOLUME])
    for i, volume in enumerate(job.props.volumes):
        if volume.name in names:
            yield (f"volumes.{i}.name", f"volume name {volume.name!r} is already used",
                   f"rename it; kubetrain's own are {reserved}")
        if volume.mount_path in paths:
            yield (f"volumes.{i}.mount_path", f"{volume.mount_path} is already mounted",
                   f"choose another path; kubetrain's own are {reserved}")
        names.add(volume.name)
        paths.add(volume.mount_path)


@job_rule("KT133", "error", "metrics ports past 65535",
          rationale="The trainer serves metrics on run.metrics.port + the local rank, one container port per rank; "
                    "the API server refuses a container port above 65535, so the pod is never created.",
          fix="lower run.metrics.port so that port + procs_per_node - 1 stays within 65535",
          source=cite(K8S_CORE_VALIDATION, "kubetrain_runtime/telemetry.py"))
def ports_in_range(job: JobSpec) -> Iterator[Violation]:
    ports = [port["containerPort"] for port in metrics_ports(job)]
    if ports and ports[-1] > 65535:
        yield ("workload.run.metrics.port", f"{job.props.procs_per_node} ranks serve metrics on ports {ports[0]}.."
               f"{ports[-1]}, beyond 65535", f"use a port of at most {65536 - len(ports)}")


@job_rule("KT134", "error", "pod label that the operator or the Job controller sets",
          rationale="Operators label the pods they create (training.kubeflow.org/*, jobset.sigs.k8s.io/*) and the "
                    "Job controller labels a Job's pods with its generated selector (batch.kubernetes.io/job-name, "
                    "job-name and controller-uid): the API server refuses a Job whose template carries another value, "
                    "and operators overwrite theirs. kubetrain sets kubetrain.dev/job itself.",
          fix="choose another label key (e.g. under your own domain)",
          source=cite(K8S_BATCH_VALIDATION, K8S_JOB_LABELS, PYTORCHJOB))
def pod_labels_not_owned(job: JobSpec) -> Iterator[Violation]:
    owned = job.props.target.owned_pod_labels(job)
    for key in job.props.pod.labels:
        if key == JOB_LABEL:
            yield (f"pod.labels.{key}", f"kubetrain sets {key} to the job's name on every object of the run")
        elif key in owned:
            who = "the Job controller" if key in JOB_CONTROLLER_LABELS else "the operator"
            yield (f"pod.labels.{key}", f"{who} sets {key} on the pods it creates (its selector): a job's own value "
                   "is refused or overwritten")


@job_rule("KT135", "error", "pod annotations larger than the API server takes",
          rationale="The API server refuses an object whose annotations (keys and values) total more than 256 KiB; "
                    "kubetrain adds its own to the job's (the run config's hash, the queue's placement).",
          fix="keep large data out of annotations: a ConfigMap mounted as a volume holds up to 1 MiB",
          source=OBJECT_META)
def annotations_fit(job: JobSpec) -> Iterator[Violation]:
    size = annotations_size(pod_annotations(job, "0" * 64 if job.trainer else None))
    if size > ANNOTATIONS_LIMIT:
        yield ("pod.annotations", f"the pods' annotations total {size} bytes with kubetrain's own; the API server "
               f"takes at most {ANNOTATIONS_LIMIT} (256 KiB) per object")


# -- resilience and sizes ---------------------------------------------------------------------------

@job_rule("KT113", "error", "watchdog would fire before the collective timeout",
          rationale="The NCCL collective timeout dumps the flight recorder's trace of every rank; a watchdog that "
                    "kills the process first loses it.",
          fix="set run.resilience.watchdog_floor_s above collective_timeout_s",
          source=cite(PG, "README.md (Resilience)"))
def timeouts_consistent(job: JobSpec) -> Iterator[Violation]:
    if job.trainer is None or not job.uses_gpus:
        return
    resilience = job.trainer.run.resilience
    if resilience.watchdog_floor_s <= resilience.collective_timeout_s:
        yield ("workload.run.resilience.watchdog_floor_s",
               f"the watchdog ({resilience.watchdog_floor_s:g} s) would fire before the collective timeout "
               f"({resilience.collective_timeout_s:g} s) and its NCCL flight-recorder dump",
               f"set watchdog_floor_s above {resilience.collective_timeout_s:g}, or lower collective_timeout_s")


@job_rule("KT211", "warning", "grace period too short for the stop checkpoint",
          rationale="On a stop signal (preemption, a drained node, a deleted pod) the ranks save the step they "
                    "reached before Kubernetes kills the pod terminationGracePeriodSeconds later; a grace period "
                    "shorter than twice the expected save (its size at an assumed 250 MB/s per node, see "
                    "kubetrain/jobs/launch.py) loses the steps since the last checkpoint.",
          fix="raise pod.termination_grace_period_s, or leave it unset: trainer jobs then derive it",
          source=cite("constructs/kubetrain/jobs/launch.py",
                      "https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-termination"))
def grace_period_holds_the_stop(job: JobSpec) -> Iterator[Violation]:
    grace = job.props.pod.termination_grace_period_s
    if job.trainer is None or grace is None:
        return
    needed = stop_needs_s(job.trainer.run, job.node_range.start)
    if grace < needed:
        yield ("pod.termination_grace_period_s",
               f"{grace} s may end before the stop checkpoint is written (expected to need {needed} s: "
               f"{checkpoint_bytes(job.trainer.run.model) / 1e9:.1f} GB on {job.node_range.start} node(s))",
               f"set termination_grace_period_s to at least {needed}, or leave it unset")


@job_rule("KT114", "error", "elastic range does not hold the starting node count",
          rationale="The job starts `nodes` pods; the operator rejects a start outside min..max.",
          fix="set elastic.min_nodes <= nodes <= elastic.max_nodes", source=PYTORCHJOB_TYPES)
def elastic_range_holds_nodes(job: JobSpec) -> Iterator[Violation]:
    elastic = job.props.elastic
    if elastic is not None and job.props.nodes not in job.node_range:
        field = "min_nodes" if elastic.min_nodes > job.props.nodes else "max_nodes"
        yield (f"elastic.{field}", f"the job starts {job.props.nodes} pods, outside its elastic range "
               f"{job.node_range.start}..{job.node_range.stop - 1}",
               f"set elastic.min_nodes <= nodes ({job.props.nodes}) <= elastic.max_nodes")


def _over(job: JobSpec) -> str:
    counts = job.node_range
    if len(counts) == 1:
        return f"{counts.start} nodes x {job.props.procs_per_node}"
    return f"{counts.start}..{counts.stop - 1} nodes x {job.props.procs_per_node}"


def batch_divides(job: JobSpec) -> list[Problem]:
    """KT201 over every node count of the job (the run config's rule, with the job's world sizes)."""
    if job.trainer is None or not job.node_range:
        return []
    run, p = job.trainer.run, job.props.procs_per_node
    if len(job.node_range) == 1:
        return [Problem(problem.code, f"workload.run.{problem.path}",
                        f"{problem.message} (world size = {_over(job)})", problem.fix)
                for problem in run.check_world_size(job.props.nodes * p)]
    passing = counts_dividing(job.node_range, run.batch.global_size, run.batch.micro_size * p)
    failing = gaps(job.node_range, passing)
    if not failing:
        return []
    fits = ", ".join(map(str, passing)) or "none"
    return [Problem("KT201", "workload.run.batch.global_size",
                    f"global_size {run.batch.global_size} must be a multiple of micro_size {run.batch.micro_size} x "
                    f"the world size at every node count of {_over(job)}; it is not at {describe(failing)} nodes",
                    f"narrow the elastic range to node counts that divide it ({fits}), or change global_size")]


@job_rule("KT120", "error", "model-parallel sizes do not divide the world size",
          rationale="Megatron-LM and NeMo split the world into tensor x pipeline x context groups; the rest is data "
                    "parallel, so the product must divide the world size.",
          fix="choose tensor, pipeline and context sizes whose product divides nodes x procs_per_node",
          source=MEGATRON)
def model_parallel_divides(job: JobSpec) -> Iterator[Violation]:
    parallel = job.parallelism
    if parallel is None:
        return
    m, p = parallel.model_parallel, job.props.procs_per_node
    step = m // gcd(m, p)  # node counts must be multiples of this
    bad = [n for n in (job.node_range.start, job.node_range.stop - 1) if n % step]
    if bad:
        yield (job.parallelism_path(), f"tensor x pipeline x context = {m} does not divide the world size at "
               f"{_over(job)} (at {bad[0]} nodes: {bad[0] * p} ranks); node counts must be multiples of {step}")


@job_rule("KT121", "error", "tensor parallelism crosses nodes",
          rationale="Tensor-parallel ranks exchange activations every layer; over EFA instead of NVLink that is "
                    "several times slower, so Megatron-LM keeps TP inside a node.",
          fix="make parallelism.tensor divide procs_per_node", source=MEGATRON)
def tensor_parallel_in_node(job: JobSpec) -> Iterator[Violation]:
    parallel = job.parallelism
    if parallel is not None and job.props.procs_per_node % parallel.tensor:
        yield (job.parallelism_path("tensor"), f"tensor-parallel size {parallel.tensor} does not divide the "
               f"{job.props.procs_per_node} ranks of a node")


@job_rule("KT122", "error", "global batch not divisible by micro batch x data-parallel size",
          rationale="Each optimizer step runs global / (micro x data-parallel) micro-batches per rank; Megatron-LM "
                    "refuses to start when that is not a whole number (the guide's 'batch size error').",
          fix="make global_batch a multiple of micro_batch x data-parallel size",
          source=MEGATRON)
def command_batch_divides(job: JobSpec) -> Iterator[Violation]:
    parallel = job.parallelism
    if parallel is None or parallel.micro_batch is None or parallel.global_batch is None:
        return
    m, p, counts = parallel.model_parallel, job.props.procs_per_node, job.node_range
    step = m // gcd(m, p)  # node counts that pass KT120 are the multiples of this
    dp_per_step = step * p // m  # data-parallel ranks per `step` nodes
    # At n = step * k nodes the data-parallel size is k * dp_per_step: k must divide what is left.
    unit = parallel.micro_batch * dp_per_step
    passing = set() if parallel.global_batch % unit else {
        step * k for k in divisors(parallel.global_batch // unit) if step * k in counts}
    multiples = (counts.stop - 1) // step - (counts.start - 1) // step
    if len(passing) == multiples:
        return
    n = next(n for n in range(counts.start + (-counts.start) % step, counts.stop, step) if n not in passing)
    dp = n * p // m
    works = f"; node counts that work: {', '.join(map(str, sorted(passing))) or 'none'}" if len(counts) > 1 else ""
    yield (job.parallelism_path("global_batch"),
           f"global_batch {parallel.global_batch} is not a multiple of micro_batch {parallel.micro_batch} x "
           f"data-parallel size {dp} (at {n} nodes: {n * p} ranks / model-parallel {m}){works}",
           f"use a multiple of {parallel.micro_batch * dp} for global_batch")


# -- what a command job's own words say ---------------------------------------------------------------

@job_rule("KT140", "error", "the command starts a launcher under kubetrain's torchrun",
          rationale="With launcher 'torchrun' kubetrain starts torchrun with the operator's rendezvous and appends "
                    "the command as the script torchrun runs with Python, once per rank: a command that is "
                    "itself torchrun (or python, bash, deepspeed, mpirun) would start a launcher per rank, and one that "
                    "wraps a program (nsys, ncu, numactl, env) would make Python run a binary.",
          fix="give only the script and its arguments (train.py --lr 3e-4, or -m package.module); profile with "
              "Command(profile=NsysProfile(...)), which starts nsys on each rank; or set launcher='none' to run "
              "the command as written, once per pod",
          source=TORCHRUN)
def no_launcher_in_command(job: JobSpec) -> Iterator[Violation]:
    command = job.command
    if command is not None and command.launcher == "torchrun":
        launcher = starts_a_launcher(command.command)
        if launcher is not None:
            yield ("workload.command.0", f"the command starts with {launcher!r}, which kubetrain's torchrun would "
                   "run as its script on every rank")


@job_rule("KT141", "error", "the command hard-codes what differs between pods",
          rationale="Every pod of the job runs the same command: a node rank, master address or rendezvous "
                    "endpoint written into it is the same on every pod, so all pods claim one rank (the "
                    "rendezvous hangs) or reach the wrong peer; a node or process count that differs from the "
                    "job's makes torchrun wait for pods that never come.",
          fix="leave these to the launcher (launcher='torchrun' sets them from the operator's variables), or "
              "refer to the operator's variables, e.g. --node_rank=$(PET_NODE_RANK)",
          source=cite(TORCHRUN, PYTORCHJOB))
def no_per_pod_values_in_command(job: JobSpec) -> Iterator[Violation]:
    if job.command is None:
        return
    shape = {"nodes": job.props.nodes, "procs_per_node": job.props.procs_per_node,
             "world_size": job.props.nodes * job.props.procs_per_node}
    for flag in flags(job.command.command):
        path = f"workload.command.{flag.index}"
        if flag.name in PER_POD_FLAGS and hard_coded(flag):
            yield (path, f"--{flag.written} gives every pod the same {flag.name.replace('-', '_')}")
        elif flag.name in SHAPE_FLAGS and hard_coded(flag) and flag.value.isdigit() and \
                int(flag.value) != shape[SHAPE_FLAGS[flag.name]] and job.props.elastic is None:
            what = SHAPE_FLAGS[flag.name]
            yield (path, f"--{flag.written} disagrees with the job's {what} ({shape[what]})",
                   f"remove --{flag.name} or set it to {shape[what]}")


@job_rule("KT142", "error", "Parallelism contradicts the command's own flags",
          rationale="The rules check the job's Parallelism against its world size, but the program reads its "
                    "own flags: when the two disagree the checks prove nothing and the program fails (or trains a "
                    "different layout) at start.",
          fix="make parallelism and the command's flags say the same, or drop parallelism (the rules then read "
              "the flags)",
          source=MEGATRON)
def parallelism_matches_flags(job: JobSpec) -> Iterator[Violation]:
    command = job.command
    if command is None or command.parallelism is None:
        return
    for field, (value, written) in parallel_flags(command.command).items():
        declared = getattr(command.parallelism, field)
        if declared != value:
            yield (f"workload.parallelism.{field}", f"parallelism.{field} is {declared} but the command says "
                   f"{written}", f"set parallelism.{field} to {value}, or change {written}")


@job_rule("KT128", "error", "EFA turned off on a multi-node job of an EFA instance type",
          rationale="Karpenter attaches EFA interfaces only to pods that request them: with resources.efa 0 the "
                    "nodes talk over TCP sockets at a fraction of the instance's bandwidth, silently.",
          fix="leave resources.efa unset (every interface of the instance), or run on one node",
          source=cite(EKS_EFA, EFA_TYPES))
def efa_not_off(job: JobSpec) -> Iterator[Violation]:
    node = job.instance
    # On a pool, KT403 already refuses any other count than the instance's.
    if node is not None and node.efa_interfaces and job.props.resources.efa == 0 and job.max_nodes > 1 \
            and job.props.pool is None:
        yield ("resources.efa", f"{node.name} has {node.efa_interfaces} EFA interfaces and the job asks for none")


_NCCL_TIMEOUT_FLAGS = ("distributed-timeout-minutes", "distributed_timeout_minutes")


@job_rule("KT129", "error", "torch NCCL settings that defeat the collective timeout",
          rationale="torch's NCCL watchdog aborts a collective that outlives the process group's timeout and dumps "
                    "the flight recorder: TORCH_NCCL_ASYNC_ERROR_HANDLING=0 turns the abort off (a hung collective "
                    "hangs the job for good), and a heartbeat timeout below the collective timeout kills the "
                    "process before the timeout and its dump.",
          fix="remove the variable (kubetrain sets TORCH_NCCL_ASYNC_ERROR_HANDLING=3), or keep "
              "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC above the collective timeout",
          source=cite(PG, "https://github.com/pytorch/pytorch/blob/v2.9.0/torch/csrc/distributed/c10d/"
                          "ProcessGroupNCCL.hpp"))
def nccl_watchdog_consistent(job: JobSpec) -> Iterator[Violation]:
    if not job.uses_gpus:
        return
    env = job.props.env
    if env.get("TORCH_NCCL_ASYNC_ERROR_HANDLING", "").strip() == "0":
        yield ("env.TORCH_NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ASYNC_ERROR_HANDLING=0: a collective that times "
               "out is never aborted, so the job hangs instead of restarting")
    heartbeat = env.get("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", "").strip()
    if heartbeat.isdigit():
        timeout, said = 600.0, "torch's default collective timeout"
        if job.trainer is not None:
            timeout, said = job.trainer.run.resilience.collective_timeout_s, "run.resilience.collective_timeout_s"
        elif job.command is not None:
            minutes = next((f for f in flags(job.command.command) if f.name in _NCCL_TIMEOUT_FLAGS), None)
            if minutes is not None and minutes.value and minutes.value.isdigit():
                timeout, said = int(minutes.value) * 60.0, f"--{minutes.written}"
        if int(heartbeat) <= timeout:
            yield ("env.TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", f"the heartbeat monitor fires after {heartbeat} s, before "
                   f"the collective timeout of {timeout:g} s ({said})")


# -- the run config against itself, as a job runs it ----------------------------------------------------------
# Checked here, not by the run config's model: `--set max_steps=...` and run-local's `--steps` shorten runs on
# purpose, and the pod must still start.

@job_rule("KT216", "warning", "warmup as long as the run",
          rationale="The learning rate rises linearly over warmup_steps and decays after; a run no longer than its "
                    "warmup never trains at the learning rate it names, and never decays.",
          fix="make optimizer.warmup_steps smaller than max_steps (a few percent of it is usual)",
          source="training/optimizer.py")
def warmup_within_run(job: JobSpec) -> Iterator[Violation]:
    run = job.trainer.run if job.trainer else None
    if run is not None and run.optimizer.warmup_steps >= run.max_steps:
        yield ("workload.run.optimizer.warmup_steps", f"warmup_steps {run.optimizer.warmup_steps} is not below "
               f"max_steps {run.max_steps}")


@job_rule("KT022", "error", "a hang timeout the job's deadline always cuts short",
          rationale="The trainer's hang watchdog (resilience.watchdog_floor_s) and the collective timeout "
                    "(resilience.collective_timeout_s) stop a hung run so the operator restarts it from its last "
                    "checkpoint; when either is as long as the job's activeDeadlineSeconds, the deadline fails the "
                    "whole job first, so a hang is never detected and the job is never restarted.",
          fix="make resilience.watchdog_floor_s and collective_timeout_s much shorter than the target's "
              "active_deadline_seconds, or raise the deadline",
          source="https://kubernetes.io/docs/concepts/workloads/controllers/job/#job-termination-and-cleanup")
def hang_timeouts_within_deadline(job: JobSpec) -> Iterator[Violation]:
    deadline = getattr(job.props.target, "active_deadline_seconds", None)
    if job.trainer is None or deadline is None:
        return
    resilience = job.trainer.run.resilience
    for name in ("watchdog_floor_s", "collective_timeout_s"):
        if getattr(resilience, name) >= deadline:
            yield (f"workload.run.resilience.{name}", f"{name} {getattr(resilience, name):g} s is not shorter than "
                   f"the target's active_deadline_seconds {deadline}: the deadline ends the job before a hang is "
                   "ever detected", f"set {name} well below {deadline} s, or raise target.active_deadline_seconds")


@job_rule("KT218", "error", "fast checkpoint tier on shared storage",
          rationale="The local tier is each rank's own state, saved often without fsync because the node's disk "
                    "only has to outlive the process; on a shared volume those saves cost network bandwidth every "
                    "few steps, and a pod rescheduled to another node would resume from a rank folder written "
                    "without the guarantees of the durable tier.",
          fix="point checkpoint.local_dir at a node-local path (kubetrain mounts an emptyDir there when no volume "
              "holds it)", source="README.md (Resilience)")
def local_tier_on_node(job: JobSpec) -> Iterator[Violation]:
    local = job.trainer.run.checkpoint.local_dir if job.trainer else None
    volume = job.volume_at(local) if local else None
    if volume is not None and volume.shared:
        yield ("workload.run.checkpoint.local_dir", f"{local} is on shared volume {volume.name}")


@job_rule("KT143", "error", "metrics ports include the rendezvous port",
          rationale="Every rank serves Prometheus on metrics.port + its local rank; the first pod's torchrun "
                    "listens for its peers on the target's rendezvous port. In one pod both cannot bind it: the "
                    "rendezvous or the metrics endpoint fails at start.",
          fix="move metrics.port so that port .. port + procs_per_node - 1 leaves the rendezvous port free",
          source=cite(TORCHRUN, "kubetrain_runtime/telemetry.py"))
def metrics_ports_free(job: JobSpec) -> Iterator[Violation]:
    port = job.trainer.run.metrics.port if job.trainer else 0
    rendezvous = job.props.target.rendezvous_port(job)
    if port and port <= rendezvous < port + job.props.procs_per_node:
        yield ("workload.run.metrics.port", f"ports {port}-{port + job.props.procs_per_node - 1} include "
               f"{job.props.target.name}'s rendezvous port {rendezvous}")


@job_rule("KT144", "error", "node selector contradicts the pool or instance type",
          rationale="The pod's node selector must match a node of the job's pool (or instance type); a key the pool "
                    "sets with another value leaves the pod Pending, and Karpenter creates no node for it.",
          fix="drop the key from pod.node_selector (the pool or instance type sets it)",
          source=cite("https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/", KARPENTER_TYPES))
def node_selector_agrees(job: JobSpec) -> Iterator[Violation]:
    props = job.props
    base = props.pool.node_selector() if props.pool is not None else (
        {"node.kubernetes.io/instance-type": props.instance_type} if props.instance_type else {})
    for key, value in props.pod.node_selector.items():
        if key in base and base[key] != value:
            yield (f"pod.node_selector.{key}", f"{key}={value} contradicts {base[key]} of the job's "
                   f"{'pool' if props.pool is not None else 'instance type'}")
