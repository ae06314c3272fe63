"""Every problem of a resolved job: its rules, module by module, then the checks other modules make on it.

The order is the order problems are reported in: SECTIONS lists the modules of job rules as they run, and within
each, its rules run in the order they are declared.
"""

from __future__ import annotations

from kubetrain.jobs.checks import (
    collective_checks,
    command_checks,
    container_checks,
    environment_checks,
    function_checks,
    hf_model_checks,
    node_selector_checks,
    placement_checks,
    pod_checks,
    resilience_checks,
    run_config_checks,
    world_size_checks,
)
from kubetrain.jobs.checks.platform_checks import platform_problems, pod_part_problems
from kubetrain.jobs.checks.world_size_checks import batch_divides
from kubetrain.jobs.debugging import debugging_problems
from kubetrain.jobs.function import index_env_problems
from kubetrain.jobs.memory_fit import memory_problems
from kubetrain.jobs.spec import JobSpec
from kubetrain.model.efa import environment_problems
from kubetrain_runtime.problems import Problem

SECTIONS = (placement_checks, environment_checks, function_checks, container_checks, pod_checks, resilience_checks,
            world_size_checks, command_checks, collective_checks, run_config_checks, hf_model_checks,
            node_selector_checks)


def check_job(job: JobSpec) -> list[Problem]:
    """Every problem of the job: the generic rules, then the target's own."""
    problems = [problem for section in SECTIONS for problem in section.RULES.problems(job)]
    environment = environment_problems(job.props.env, gpus=job.uses_gpus, efa=bool(job.resources.efa),
                                       profile=job.props.nccl)  # KT106, KT115, KT116, KT126, KT127
    environment += index_env_problems(job.props.env)  # KT160
    return (problems + environment + debugging_problems(job) + batch_divides(job) + platform_problems(job) +
            pod_part_problems(job) + memory_problems(job) + list(job.props.target.check(job.request)))
