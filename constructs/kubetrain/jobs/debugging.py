"""What a job sets to debug itself, checked at synth: NCCL's log files, fault drills and Nsight Systems.

A debugging setting that cannot work costs a whole run to find out: the job is restarted with NCCL_DEBUG_FILE
to read a hang's log, and the file went with the pod; a drill is committed to prove recovery, and its fault
names a rank the job does not have. These are refused before the pull request merges.
"""

from __future__ import annotations

from kubetrain.jobs.spec import JobSpec
from kubetrain.rules.registry import register
from kubetrain.rules.sources import NCCL_ENV, cite
from kubetrain_runtime.faults import parse_faults
from kubetrain_runtime.problems import Problem

FAULT_ENV = "KUBETRAIN_FAULT"

NCCL_LOG_LOST = register(
    "KT171", "warning", "NCCL log file that the pod takes with it, or that its ranks share",
    rationale="NCCL_DEBUG_FILE is for reading a failed run's log afterwards: on the container's own disk or an "
              "emptyDir it is deleted with the pod that failed, and without %h and %p in its name every rank "
              "(and every pod on a shared volume) opens the same file and overwrites the others' lines.",
    fix="use NcclProfile(debug=NcclDebug(log_dir=...)) with a folder on one of the job's persistent volumes "
        "(it names each rank's file nccl.%h.%p.log), or put the file there with %h and %p in its name",
    source=cite(NCCL_ENV, "https://github.com/NVIDIA/nccl/blob/v2.26.2-1/src/debug.cc"))
DRILL_CANNOT_RUN = register(
    "KT172", "error", "fault drill that cannot run on this job",
    rationale="KUBETRAIN_FAULT is a drill committed to prove that the job recovers; a fault the runtime cannot "
              "parse stops every pod at start (KT006), and one at a rank the job never has or a step it never "
              "reaches passes silently without testing anything.",
    fix="write faults as KIND:step=N[:rank=R] (kubetrain_runtime/faults.py) with a rank below the job's world size and a "
        "step within max_steps",
    source="kubetrain_runtime/faults.py")
PROFILE_CANNOT_RUN = register(
    "KT173", "error", "Nsight Systems profile whose reports would be lost or never written",
    rationale="A profile is read after the run: reports written to the container's disk or an emptyDir go with "
              "the pod, a rank the job does not have is never profiled, and without torchrun kubetrain cannot "
              "start nsys per rank.",
    fix="put profile.output_dir on one of the job's persistent volumes, list ranks below the world size, and keep "
        "launcher torchrun",
    source="https://docs.nvidia.com/nsight-systems/UserGuide/index.html")


def debugging_problems(job: JobSpec) -> list[Problem]:
    """KT171 for NCCL's log file, KT006/KT172 for a fault drill in the job's environment, KT173 for a profile."""
    return nccl_log_problems(job) + fault_drill_problems(job) + profile_problems(job)


def profile_problems(job: JobSpec) -> list[Problem]:
    profile = job.command.profile if job.command is not None else None
    if profile is None:
        return []
    problems = []
    if job.command.launcher != "torchrun":
        problems.append(Problem(PROFILE_CANNOT_RUN.code, "workload.launcher", "a profile needs launcher torchrun: "
                                "kubetrain starts nsys on each rank through it", "set launcher='torchrun', or put "
                                "nsys in your own command (launcher='none')"))
    if (where := job.lost_with_pod(profile.output_dir)) is not None:
        problems.append(Problem(PROFILE_CANNOT_RUN.code, "workload.profile.output_dir", f"{profile.output_dir} is "
                                f"{where}: the reports would be lost", "mount a PersistentVolumeClaim there "
                                                                       "(volumes) or move the folder"))
    world = job.max_nodes * job.props.procs_per_node
    for i, rank in enumerate(profile.ranks or []):
        if not 0 <= rank < world:
            problems.append(Problem(PROFILE_CANNOT_RUN.code, f"workload.profile.ranks.{i}", f"rank {rank} is not a "
                                    f"rank of the job (0-{world - 1})", f"choose ranks below {world}"))
    return problems


def nccl_log_problems(job: JobSpec) -> list[Problem]:
    debug = job.props.nccl.debug if job.props.nccl is not None else None
    path = job.props.env.get("NCCL_DEBUG_FILE")
    field = "env.NCCL_DEBUG_FILE"
    if path is None and debug is not None and debug.log_dir:
        path, field = debug.environment()["NCCL_DEBUG_FILE"], "nccl.debug.log_dir"
    if path is None:
        return []
    if (where := job.lost_with_pod(path.rsplit("/", 1)[0] or "/")) is not None:
        return [Problem(NCCL_LOG_LOST.code, field, f"NCCL's log {path} is {where}: the log of a failed pod goes "
                        "with it", NCCL_LOG_LOST.fix)]
    shared_by = [what for token, what, many in (("%p", "the ranks of a pod", job.props.procs_per_node > 1),
                                                 ("%h", "the pods of the job", job.max_nodes > 1))
                 if many and token not in path]
    if shared_by:
        return [Problem(NCCL_LOG_LOST.code, field, f"NCCL's log {path} is one file for {' and '.join(shared_by)}: "
                        "each overwrites the others' lines", "put %h (the pod) and %p (the rank's process) in the "
                                                             "file's name")]
    return []


def fault_drill_problems(job: JobSpec) -> list[Problem]:
    """The runtime's own parser (kubetrain_runtime/faults.py) on the job's KUBETRAIN_FAULT, then what it can reach."""
    text = job.props.env.get(FAULT_ENV)
    if text is None:
        return []
    path = f"env.{FAULT_ENV}"
    try:
        faults = parse_faults(text)
    except ValueError as error:
        return [Problem("KT006", path, str(error), "write faults as KIND:step=N[:rank=R], separated by ';' "
                                                   "(kubetrain_runtime/faults.py)")]
    world = job.max_nodes * job.props.procs_per_node
    max_steps = job.trainer.run.max_steps if job.trainer is not None else None
    problems = []
    for fault in faults:
        if fault.rank is not None and not 0 <= fault.rank < world:
            problems.append(Problem(DRILL_CANNOT_RUN.code, path, f"{fault.kind} at rank {fault.rank}: the job has "
                                    f"ranks 0-{world - 1}", f"choose a rank below {world}, or leave rank out (every "
                                                            "rank)"))
        if fault.step < 1 or (max_steps is not None and fault.step > max_steps):
            reach = f"1-{max_steps}" if max_steps is not None else "from 1"
            problems.append(Problem(DRILL_CANNOT_RUN.code, path, f"{fault.kind} at step {fault.step}: the run's "
                                    f"steps are {reach}, so the drill never fires",
                                    "choose a step the run reaches"))
    return problems
