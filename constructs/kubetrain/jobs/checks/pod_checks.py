"""Job rules on the pod kubetrain renders: memory-backed volumes within its memory, checkpoints, data and
profiles on volumes that suit them, distinct volumes, metrics ports in range, and labels and annotations the
API server and the operators accept."""

from __future__ import annotations

from collections.abc import Iterator

from kubetrain.apiserver.meta import ANNOTATIONS_LIMIT, annotations_size
from kubetrain.jobs.checks.job_rules import JobRules, Violation
from kubetrain.jobs.job_props import EmptyDirVolume
from kubetrain.jobs.pod import metrics_ports, pod_annotations
from kubetrain.jobs.spec import LOCAL_TIER_VOLUME, RESERVED_VOLUMES, JobSpec
from kubetrain.model.created import JOB_CONTROLLER_LABELS
from kubetrain.model.quantity import parse_quantity
from kubetrain.model.vocabulary import JOB_LABEL
from kubetrain.rules.sources import (
    DCP,
    EMPTYDIR,
    K8S_BATCH_VALIDATION,
    K8S_CORE_VALIDATION,
    K8S_JOB_LABELS,
    OBJECT_META,
    PYTORCHJOB,
    VOLUMES,
    cite,
)
from kubetrain_runtime.runtime_config import profile_dir

RULES = JobRules()  # this module's rules, in the order their problems are reported
job_rule = RULES.rule


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
    owned = job.props.target.owned_pod_labels(job.request)
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
