"""Job rules on how a job survives a hang or a stop: the watchdog after the collective timeout, a grace
period that holds the stop checkpoint. (That an elastic range holds the
starting node count is checked on the props: KT114, kubetrain.jobs.job_props.)"""

from __future__ import annotations

from collections.abc import Iterator

from kubetrain.jobs.checks.job_rules import JobRules, Violation
from kubetrain.jobs.launch import stop_needs_s
from kubetrain.jobs.spec import JobSpec
from kubetrain.rules.sources import PG, cite
from training.flops import checkpoint_bytes

RULES = JobRules()  # this module's rules, in the order their problems are reported
job_rule = RULES.rule


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
