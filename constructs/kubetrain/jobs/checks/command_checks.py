"""Job rules on what a command job's own words say: no launcher under kubetrain's torchrun, nothing that
differs between pods hard-coded, flags that agree with its Parallelism."""

from __future__ import annotations

from collections.abc import Iterator

from kubetrain.jobs.checks.job_rules import JobRules, Violation
from kubetrain.jobs.command_flags import (
    PER_POD_FLAGS,
    SHAPE_FLAGS,
    flags,
    hard_coded,
    parallel_flags,
    starts_a_launcher,
)
from kubetrain.jobs.spec import JobSpec
from kubetrain.rules.sources import MEGATRON, PYTORCHJOB, TORCHRUN, cite

RULES = JobRules()  # this module's rules, in the order their problems are reported
job_rule = RULES.rule


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
