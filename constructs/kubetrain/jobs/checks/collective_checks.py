"""Job rules on the ranks' collectives: the EFA interfaces they run over, and torch's NCCL watchdog that
times them out."""

from __future__ import annotations

from collections.abc import Iterator

from kubetrain.jobs.checks.job_rules import JobRules, Violation
from kubetrain.jobs.command_flags import flags
from kubetrain.jobs.spec import JobSpec
from kubetrain.rules.sources import EFA_TYPES, EKS_EFA, PG, cite

RULES = JobRules()  # this module's rules, in the order their problems are reported
job_rule = RULES.rule


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
