"""Job rules on the job's environment variables: none of those the operator, torchrun, the device plugin or
kubetrain's launcher sets."""

from __future__ import annotations

from collections.abc import Iterator

from kubetrain.jobs.checks.job_rules import JobRules, Violation
from kubetrain.jobs.pod import launcher_env
from kubetrain.jobs.spec import JobSpec
from kubetrain.rules.sources import PYTORCHJOB, TORCHRUN, TRAINER, cite

RULES = JobRules()  # this module's rules, in the order their problems are reported
job_rule = RULES.rule


# Set by torchrun in every worker process (and read from PET_* by torchrun itself).
TORCHRUN_ENV = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                "ROLE_RANK", "ROLE_NAME", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID"}
TORCHRUN_ENV_PREFIXES = ("PET_", "TORCHELASTIC_")
# Set by the NVIDIA and Neuron device plugins to the devices the kubelet allocated to the container.
DEVICE_PLUGIN_ENV = {"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "NEURON_RT_VISIBLE_CORES"}


@job_rule("KT105", "error", "environment variable owned by the operator, torchrun, the device plugin or kubetrain",
          rationale="The operator sets these per pod, torchrun per rank, the device plugin per container (the "
                    "devices it allocated) and kubetrain's launcher per job; a value in the job definition is "
                    "overwritten, or worse, wins: every pod the same rank, ranks on devices they were not given, "
                    "a launcher reading another run config.",
          fix="remove the variable", source=cite(PYTORCHJOB, TRAINER, TORCHRUN))
def env_not_owned_by_launcher(job: JobSpec) -> Iterator[Violation]:
    owned = job.props.target.injected_env(job.request)
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
