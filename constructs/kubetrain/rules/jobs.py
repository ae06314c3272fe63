"""Compile-time rules for training jobs, declared in the registry beside their checks.

A check gets the resolved job (`JobSpec`: validated props, namespace, instance type) and yields
(field path, message) or (field path, message, fix) for each violation; the decorator turns them
into Problems carrying the rule's code (and its registered fix when none is given). Every rule of
a job runs, so all its problems are reported together. Facts: shared/domain-facts.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from decimal import Decimal
from math import gcd
from typing import Any

from kubetrain.jobs.launch import stop_needs_s
from kubetrain.jobs.pod import container_resources, placement
from kubetrain.jobs.props import ClaimVolume
from kubetrain.jobs.spec import LOCAL_TIER_VOLUME, RESERVED_VOLUMES, JobSpec
from kubetrain.names import image_digest, image_tag
from kubetrain.platform.efa import SEED_GUIDE, environment_problems
from kubetrain.platform.node_pools import pool_placement_problems
from kubetrain.platform.security import Level, PodCheck, pod_security_problems
from kubetrain.platform.storage import Claim, checkpoint_volume_problems, dataset_volume_problems
from kubetrain.quantity import parse_quantity
from kubetrain.rules.ranges import counts_dividing, describe, divisors, gaps
from kubetrain.rules.registry import Rule, Severity, register
from training.problems import Problem

Violation = tuple[str, str] | tuple[str, str, str]
Check = Callable[[JobSpec], Iterator[Violation]]

_CHECKS: list[tuple[Rule, Check]] = []

# Set by torchrun in every worker process (and read from PET_* by torchrun itself).
TORCHRUN_ENV = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                "ROLE_RANK", "ROLE_NAME", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID"}
TORCHRUN_ENV_PREFIXES = ("PET_", "TORCHELASTIC_")


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
    return problems + environment + batch_divides(job) + platform_problems(job) + list(job.props.target.check(job))


def platform_problems(job: JobSpec) -> list[Problem]:
    """The job against the platform objects it names: its pool (KT401-KT403), its storage (KT412, KT413) and
    its queue's placement (KT421). The checks are the platform modules'; they declare the rules."""
    props, problems = job.props, []
    if props.pool is not None:
        pod = placement(job)
        problems += pool_placement_problems(props.pool, container_resources(job)["requests"],
                                            pod.get("tolerations", []))
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
    elif props.placement is not None:
        problems.append(Problem("KT421", "placement", "topology placement needs a queue to honour it",
                                "set queue= a Kueue LocalQueue whose flavors have a Topology, or drop placement"))
    return problems


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
          fix="shorten the job name", source="domain-facts 11 (name lengths)")
def name_fits_derived_names(job: JobSpec) -> Iterator[Violation]:
    limit, longest = job.props.target.max_name_length(job)
    if len(job.name) > limit:
        added = len(job.name) - len(job.props.name)  # the definition's hash, for create-once runs
        yield ("name", f"{len(job.props.name)} characters is too long: the operator's name '{longest}' would "
               f"exceed 63", f"shorten the name to at most {limit - added} characters")


@job_rule("KT102", "error", "more accelerators than the instance type has",
          rationale="A pod asking a node for more GPUs or Neuron devices than it has is never scheduled.",
          fix="request at most the instance's accelerators, or choose a larger instance type",
          source="domain-facts 6 (AWS instances)")
def accelerators_fit(job: JobSpec) -> Iterator[Violation]:
    node, wanted = job.instance, job.resources.accelerators
    if node is not None and wanted > node.accelerators:
        kind = node.accelerator_resource or "accelerators"
        yield ("resources.accelerators", f"{wanted} {kind} requested but {node.name} has {node.accelerators}",
               f"request at most {node.accelerators} per node, or choose an instance type with more")


@job_rule("KT103", "error", "more EFA interfaces than the instance type has",
          rationale="A pod asking for more vpc.amazonaws.com/efa than the node exposes is never scheduled.",
          fix="request exactly the instance's EFA interfaces", source="domain-facts 6 (AWS instances)")
def efa_fits(job: JobSpec) -> Iterator[Violation]:
    node, wanted = job.instance, job.resources.efa
    if node is not None and wanted > node.efa_interfaces:
        yield ("resources.efa", f"{wanted} EFA interfaces requested but {node.name} has {node.efa_interfaces}",
               f"request {node.efa_interfaces} (all of them, for full bandwidth)" if node.efa_interfaces
               else "set efa to 0, or choose an EFA instance type")


@job_rule("KT104", "error", "processes per node differ from accelerators per node",
          rationale="Each rank drives one accelerator: fewer ranks leave devices idle, more share one device.",
          fix="set procs_per_node to resources.accelerators", source="torchrun; domain-facts 1")
def one_process_per_accelerator(job: JobSpec) -> Iterator[Violation]:
    wanted = job.resources.accelerators
    if wanted and job.props.procs_per_node != wanted:
        yield ("procs_per_node", f"{job.props.procs_per_node} processes for {wanted} accelerators per node",
               f"set procs_per_node to {wanted}: each rank drives one device")


@job_rule("KT111", "error", "unknown instance type",
          rationale="The capacity rules need the instance's accelerators, EFA interfaces, CPU and memory.",
          fix="use a type of the instance catalog (kubetrain.platform.instances), or register yours with "
              "Cluster(instance_types=[InstanceType(...)])",
          source="kubetrain instance catalog")
def instance_type_known(job: JobSpec) -> Iterator[Violation]:
    if job.props.instance_type and job.instance is None:
        yield ("instance_type", f"unknown instance type {job.props.instance_type!r}")


@job_rule("KT123", "error", "pod requests more CPU or memory than the node can allocate",
          rationale="The kubelet reserves CPU and memory for the system and evictions; a pod asking for the "
                    "instance's full size never schedules.",
          fix="request at most the node's allocatable CPU and memory", source="Karpenter (kube-reserved, eviction)")
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
          fix="set resources.accelerators to the instance's count", source="domain-facts 6")
def accelerators_requested(job: JobSpec) -> Iterator[Violation]:
    node = job.instance
    if node is not None and node.accelerators and not job.resources.accelerators:
        yield ("resources.accelerators", f"{node.name} has {node.accelerators} accelerators and the job requests "
               "none", f"set resources.accelerators to {node.accelerators}")


@job_rule("KT125", "warning", "EFA instance type with fewer EFA interfaces requested than it has",
          rationale="Karpenter attaches EFA only for pods that request vpc.amazonaws.com/efa; without all of them "
                    "NCCL silently falls back to TCP sockets or runs at a fraction of the bandwidth (the guide's "
                    "'EFA not detected').",
          fix="request every EFA interface of the instance", source=f"{SEED_GUIDE}; domain-facts 7")
def efa_requested(job: JobSpec) -> Iterator[Violation]:
    node = job.instance
    if node is not None and node.efa_interfaces and job.resources.efa < node.efa_interfaces \
            and job.props.nodes > 1:
        yield ("resources.efa", f"{job.resources.efa} of {node.name}'s {node.efa_interfaces} EFA interfaces "
               "requested", f"set resources.efa to {node.efa_interfaces}")


# -- environment ----------------------------------------------------------------------------------

@job_rule("KT105", "error", "environment variable owned by the operator or torchrun",
          rationale="The operator sets these per pod and torchrun per rank; a value in the job definition is "
                    "overwritten, or worse, wins and gives every pod the same rank.",
          fix="remove the variable", source="domain-facts 1, 2 and 11")
def env_not_owned_by_launcher(job: JobSpec) -> Iterator[Violation]:
    owned = job.props.target.injected_env(job)
    for name in job.props.env:
        torchrun = job.launched_by_torchrun and (name in TORCHRUN_ENV or name.startswith(TORCHRUN_ENV_PREFIXES))
        if name in owned or torchrun:
            yield (f"env.{name}", "is set by the training operator or torchrun",
                   f"remove {name}: the launcher sets it per pod and per rank")


@job_rule("KT117", "error", "Triton cache on shared storage",
          rationale="Hundreds of ranks compiling into one cache on a shared file system contend on its locks: the "
                    "guide's 512-rank hang.",
          fix="leave TRITON_CACHE_DIR to kubetrain (node-local /tmp) or point it at an emptyDir",
          source=SEED_GUIDE)
def triton_cache_local(job: JobSpec) -> Iterator[Violation]:
    path = job.props.env.get("TRITON_CACHE_DIR")
    volume = job.volume_at(path) if path and path.startswith("/") else None
    if volume is not None and volume.shared:
        yield ("env.TRITON_CACHE_DIR", f"{path} is on shared volume {volume.name}")


@job_rule("KT118", "warning", "huge pages requested while EFA is told not to use them",
          rationale="FI_EFA_USE_HUGE_PAGE=0 makes the EFA provider ignore the huge pages the pod reserves: memory "
                    "set aside for nothing.",
          fix="drop FI_EFA_USE_HUGE_PAGE=0, or set resources.hugepages_2mi to 0Mi", source=f"{SEED_GUIDE}; domain-facts 8")
def hugepages_used(job: JobSpec) -> Iterator[Violation]:
    pages = job.resources.hugepages_2mi
    if job.props.env.get("FI_EFA_USE_HUGE_PAGE") == "0" and pages and parse_quantity(pages) > 0:
        yield ("env.FI_EFA_USE_HUGE_PAGE", f"{pages} of huge pages are reserved and FI_EFA_USE_HUGE_PAGE=0 "
               "leaves them unused")


@job_rule("KT119", "warning", "image without a fixed tag",
          rationale="An image with no tag or `latest` changes under the job: a restarted pod can run other code, and "
                    "no run can be reproduced.",
          fix="pin a version tag or an @sha256 digest", source="Kubernetes configuration best practices")
def image_pinned(job: JobSpec) -> Iterator[Violation]:
    tag = image_tag(job.props.image)
    if image_digest(job.props.image) is None and tag in (None, "latest"):
        yield ("image", f"{job.props.image!r} has {'no tag' if tag is None else 'the tag latest'}")


# -- resources and volumes ----------------------------------------------------------------------

@job_rule("KT107", "error", "/dev/shm does not fit in the memory limit",
          rationale="The memory-backed /dev/shm counts against the container's memory limit.",
          fix="make resources.shm smaller than resources.memory", source="domain-facts 8 (/dev/shm)")
def shm_within_memory(job: JobSpec) -> Iterator[Violation]:
    r = job.resources
    if parse_quantity(r.shm) >= parse_quantity(r.memory):
        yield ("resources.shm", f"/dev/shm of {r.shm} does not fit in memory {r.memory}")


@job_rule("KT108", "error", "checkpoints or data not on a suitable volume",
          rationale="Checkpoints must outlive the pod and be writable by every rank; a token file must be in the pod.",
          fix="mount a persistent, writable volume at the checkpoint dir (and a volume holding the data)",
          source="domain-facts 9 and 10")
def paths_on_volumes(job: JobSpec) -> Iterator[Violation]:
    checkpoint = job.checkpoint_dir
    field = "workload.run.checkpoint.dir" if job.trainer else "workload.checkpoint_dir"
    if checkpoint is not None:
        volume = job.volume_at(checkpoint)
        if volume is None or not volume.persistent:
            where = "not on a mounted volume" if volume is None else f"on {volume.name}, which is gone with the pod"
            yield (field, f"{checkpoint} is {where}: checkpoints would vanish with the pod",
                   "mount a PersistentVolumeClaim there (volumes) or move the dir")
        elif volume.mounted_read_only:
            yield (field, f"{checkpoint} is on read-only volume {volume.name}",
                   f"set read_only false on {volume.name}, or move the dir")
    if job.trainer and job.trainer.run.data.source == "tokens" and job.volume_at(job.trainer.run.data.path) is None:
        yield ("workload.run.data.path", f"{job.trainer.run.data.path} is not on a mounted volume",
               "mount the volume holding the token file (volumes)")


@job_rule("KT112", "error", "volume name or mount path used twice or reserved",
          rationale="Two volumes with one name or one path make the pod invalid; kubetrain's own volumes hold the "
                    "run config and /dev/shm.",
          fix="rename the volume or choose another path", source="Kubernetes PodSpec")
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


# -- resilience and sizes ---------------------------------------------------------------------------

@job_rule("KT113", "error", "watchdog would fire before the collective timeout",
          rationale="The NCCL collective timeout dumps the flight recorder's trace of every rank; a watchdog that "
                    "kills the process first loses it.",
          fix="set run.resilience.watchdog_floor_s above collective_timeout_s", source="domain-facts 10 (hangs)")
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
          source="constructs/kubetrain/jobs/launch.py; Kubernetes 1.33 docs: Pod Lifecycle, Termination of Pods")
def grace_period_holds_the_stop(job: JobSpec) -> Iterator[Violation]:
    grace = job.props.pod.termination_grace_period_s
    if job.trainer is None or grace is None:
        return
    needed = stop_needs_s(job.trainer.run, job.node_range.start)
    if grace < needed:
        yield ("pod.termination_grace_period_s",
               f"{grace} s may end before the stop checkpoint is written (expected to need {needed} s: "
               f"{job.trainer.run.model.checkpoint_bytes() / 1e9:.1f} GB on {job.node_range.start} node(s))",
               f"set termination_grace_period_s to at least {needed}, or leave it unset")


@job_rule("KT114", "error", "elastic range does not hold the starting node count",
          rationale="The job starts `nodes` pods; the operator rejects a start outside min..max.",
          fix="set elastic.min_nodes <= nodes <= elastic.max_nodes", source="domain-facts 1 (elasticPolicy)")
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
          source="Megatron-LM arguments; domain-facts 8")
def model_parallel_divides(job: JobSpec) -> Iterator[Violation]:
    parallel = job.command.parallelism if job.command else None
    if parallel is None:
        return
    m, p = parallel.model_parallel, job.props.procs_per_node
    step = m // gcd(m, p)  # node counts must be multiples of this
    bad = [n for n in (job.node_range.start, job.node_range.stop - 1) if n % step]
    if bad:
        yield ("workload.parallelism", f"tensor x pipeline x context = {m} does not divide the world size at "
               f"{_over(job)} (at {bad[0]} nodes: {bad[0] * p} ranks); node counts must be multiples of {step}")


@job_rule("KT121", "error", "tensor parallelism crosses nodes",
          rationale="Tensor-parallel ranks exchange activations every layer; over EFA instead of NVLink that is "
                    "several times slower, so Megatron-LM keeps TP inside a node.",
          fix="make parallelism.tensor divide procs_per_node", source="Megatron-LM; domain-facts 8")
def tensor_parallel_in_node(job: JobSpec) -> Iterator[Violation]:
    parallel = job.command.parallelism if job.command else None
    if parallel is not None and job.props.procs_per_node % parallel.tensor:
        yield ("workload.parallelism.tensor", f"tensor-parallel size {parallel.tensor} does not divide the "
               f"{job.props.procs_per_node} ranks of a node")


@job_rule("KT122", "error", "global batch not divisible by micro batch x data-parallel size",
          rationale="Each optimizer step runs global / (micro x data-parallel) micro-batches per rank; Megatron-LM "
                    "refuses to start when that is not a whole number (the guide's 'batch size error').",
          fix="make global_batch a multiple of micro_batch x data-parallel size",
          source=f"{SEED_GUIDE}; Megatron-LM arguments")
def command_batch_divides(job: JobSpec) -> Iterator[Violation]:
    parallel = job.command.parallelism if job.command else None
    if parallel is None:
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
    yield ("workload.parallelism.global_batch",
           f"global_batch {parallel.global_batch} is not a multiple of micro_batch {parallel.micro_batch} x "
           f"data-parallel size {dp} (at {n} nodes: {n * p} ranks / model-parallel {m}){works}",
           f"use a multiple of {parallel.micro_batch * dp} for global_batch")
