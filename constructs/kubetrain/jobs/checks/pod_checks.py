"""Job rules on the pod kubetrain renders: memory-backed volumes within its memory, checkpoints, data and
profiles on volumes that suit them, distinct volumes, metrics ports in range, and labels and annotations the
API server and the operators accept."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import PurePosixPath

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
    HF_DOWNLOAD,
    HF_OFFLINE,
    K8S_BATCH_VALIDATION,
    K8S_CORE_VALIDATION,
    K8S_JOB_LABELS,
    OBJECT_META,
    PYTORCHJOB,
    VOLUMES,
    cite,
)
from kubetrain_runtime.config_paths import config_paths
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
          rationale="Checkpoints must outlive the pod and be writable by every rank; a token file must be in the pod. "
                    "(A run config's folder on no volume, or written on a read-only one, is KT237 or KT238.)",
          fix="mount a persistent, writable volume at the checkpoint dir (and a volume holding the data)",
          source=cite(DCP, "README.md (Resilience)"))
def paths_on_volumes(job: JobSpec) -> Iterator[Violation]:
    checkpoint = job.checkpoint_dir
    field = "workload.run.checkpoint.dir" if job.trainer else "workload.checkpoint_dir"
    volume = job.volume_at(checkpoint) if checkpoint is not None else None
    if checkpoint is not None and (volume is not None or not job.trainer):  # the trainer's: KT237 says where
        if (where := job.lost_with_pod(checkpoint)) is not None:
            yield (field, f"{checkpoint} is {where}: checkpoints would vanish with the pod",
                   "mount a PersistentVolumeClaim there (volumes) or move the dir")
        elif volume.mounted_read_only and not job.trainer:  # the trainer's: KT238
            yield (field, f"{checkpoint} is on read-only volume {volume.name}",
                   f"set read_only false on {volume.name}, or move the dir")
    board = job.trainer.run.metrics.tensorboard_dir if job.trainer else None
    if board and job.volume_at(board) is not None and not job.volume_at(board).persistent:
        yield ("workload.run.metrics.tensorboard_dir", f"{board} is not on a persistent volume: the event files "
               "would vanish with the pod", "mount a PersistentVolumeClaim there (volumes) or move the dir")
    data = job.trainer.run.data.path if job.trainer and job.trainer.run.data.source == "tokens" else None
    if data and isinstance(job.volume_at(data), EmptyDirVolume):
        yield ("workload.run.data.path", f"{data} is on emptyDir {job.volume_at(data).name}, which every pod starts "
               "with empty", "mount the claim that holds the token file (volumes)")


# The fast checkpoint tier's folder gets an emptyDir of kubetrain's own when no volume holds it (jobs/pod.py).
MOUNTED_BY_KUBETRAIN = ("checkpoint.local_dir",)
# A Hugging Face Hub repository id (`meta-llama/Llama-3.1-8B`): an owner and a name, nothing a path starts with.
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


@job_rule("KT237", "error", "run config path outside the pod's volumes",
          rationale="Every file and folder a run reads or writes (model.pretrained_path, model.config_path, "
                    "model.export_dir, data.path, data.tokenizer, checkpoint.dir, metrics.tensorboard_dir, "
                    "profiling.dir, ... every path field of the run config) is opened inside the pod: it must be an "
                    "absolute path under the mount_path of a volume the job mounts (/fsxdata is not under /fsx). A "
                    "laptop's ~/.cache/huggingface, a relative path or a Hugging Face Hub id is not there, and the "
                    "pods never download (HF_HUB_OFFLINE): the job would fail on its nodes, or write into the "
                    "container's own layer and lose it.",
          fix="give the absolute path under a volume's mount_path; for a hub model, download it once to the job's "
              "storage (hf download ORG/NAME --local-dir /fsx/models/NAME) and point at that folder",
          source=cite(VOLUMES, HF_OFFLINE, HF_DOWNLOAD))
def run_paths_mounted(job: JobSpec) -> Iterator[Violation]:
    if job.trainer is None:
        return
    mounts = ", ".join(f"{v.name} at {v.mount_path}" for v in job.props.volumes) or "none"
    for item in config_paths(job.trainer.run):
        field, path = f"workload.run.{item.field}", item.path
        if path.startswith("~"):
            yield (field, f"{path} is a home folder: ~ is not expanded, and the pod's home is not the machine that "
                   "has the files", f"copy the files to a volume of the job and give their absolute path there "
                   f"(volumes: {mounts})")
        elif not path.startswith("/") and not item.writes and _HUB_ID.match(path):
            folder = f"{_download_root(job)}/models/{path.rsplit('/', 1)[1]}"
            yield (field, f"{path} is a Hugging Face Hub id (or a relative path): the pods never download "
                   "(HF_HUB_OFFLINE), they read files from their volumes", f"download it once where the job's storage is mounted (hf download "
                   f"{path} --local-dir {folder}) and set {item.field}: {folder}")
        elif not path.startswith("/"):
            yield (field, f"{path} is relative: the pod would resolve it in the container's working folder, on no "
                   "volume", f"give the absolute path under a volume's mount_path (volumes: {mounts})")
        elif job.volume_at(path) is None and item.field not in MOUNTED_BY_KUBETRAIN:
            yield (field, f"{path} is not under any volume the pod mounts (volumes: {mounts})", _remount_fix(job, path))


@job_rule("KT238", "error", "run config output on a read-only volume",
          rationale="What a run writes (checkpoints, the save_pretrained export, TensorBoard events, profiles) must "
                    "be on a volume the pod mounts read-write: on a read-only mount (read_only: true, or a storage "
                    "class that is read-only, such as a data set's S3 bucket) the first save fails on the nodes, "
                    "after the job was admitted and the model loaded.",
          fix="write under a writable volume's mount_path, or mount the volume read-write",
          source=cite(VOLUMES, "kubetrain_runtime/config_paths.py"))
def run_outputs_writable(job: JobSpec) -> Iterator[Violation]:
    if job.trainer is None:
        return
    writable = ", ".join(v.mount_path for v in job.props.volumes if not v.mounted_read_only) or "none"
    for item in config_paths(job.trainer.run):
        volume = job.volume_at(item.path) if item.writes and item.path.startswith("/") else None
        if volume is not None and volume.mounted_read_only:
            yield (f"workload.run.{item.field}", f"{item.path} is on read-only volume {volume.name} (at "
                   f"{volume.mount_path})", f"write under a writable volume (mounted at: {writable}), or mount "
                   f"{volume.name} read-write")


def _download_root(job: JobSpec) -> str:
    """Where a downloaded model would go: the job's first writable persistent volume, else its first."""
    volumes = sorted(job.props.volumes, key=lambda v: (not v.persistent, v.mounted_read_only))
    return volumes[0].mount_path if volumes else "/fsx"


def _remount_fix(job: JobSpec, path: str) -> str:
    """A path written for another mount point (/mnt/fsx/... where the volume is at /fsx): the same folder under
    the job's mount of that name, else the general fix."""
    parts = PurePosixPath(path).parts[1:]
    for volume in job.props.volumes:
        last = PurePosixPath(volume.mount_path).name
        if last in parts:
            rest = parts[parts.index(last) + 1:]
            return f"did you mean {PurePosixPath(volume.mount_path, *rest)}? ({volume.name} is mounted at " \
                   f"{volume.mount_path})"
    return "mount the volume that holds it (volumes), or give the path under one's mount_path"


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
    if profiling.dir and (volume is None or volume.mounted_read_only):
        where = None  # the folder named: KT237 or KT238 says where it is
    elif where is None and volume.mounted_read_only:
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
