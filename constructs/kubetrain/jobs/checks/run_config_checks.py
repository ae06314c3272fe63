"""Job rules on the run config against itself, as a job runs it: warmup within the run, hang timeouts within
the job's deadline, the fast checkpoint tier on the node, metrics ports clear of the rendezvous port.

Checked here, not by the run config's model: `--set max_steps=...` and run-local's `--steps` shorten runs on
purpose, and the pod must still start."""

from __future__ import annotations

from collections.abc import Iterator

from kubetrain.jobs.checks.job_rules import JobRules, Violation
from kubetrain.jobs.spec import JobSpec
from kubetrain.rules.sources import TORCHRUN, cite

RULES = JobRules()  # this module's rules, in the order their problems are reported
job_rule = RULES.rule


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
    rendezvous = job.props.target.rendezvous_port(job.request)
    if port and port <= rendezvous < port + job.props.procs_per_node:
        yield ("workload.run.metrics.port", f"ports {port}-{port + job.props.procs_per_node - 1} include "
               f"{job.props.target.name}'s rendezvous port {rendezvous}")
