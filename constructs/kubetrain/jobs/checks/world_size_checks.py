"""The job's sizes against its world size at every node count it can run at: the run config's batch (KT201)
and a command's model-parallel sizes and batch (KT120-KT122)."""

from __future__ import annotations

from collections.abc import Iterator
from math import gcd

from kubetrain.jobs.checks.job_rules import JobRules, Violation
from kubetrain.jobs.ranges import counts_dividing, describe, divisors, gaps
from kubetrain.jobs.spec import JobSpec
from kubetrain.rules.sources import MEGATRON
from kubetrain_runtime.problems import Problem

RULES = JobRules()  # this module's rules, in the order their problems are reported
job_rule = RULES.rule


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
          source=MEGATRON)
def model_parallel_divides(job: JobSpec) -> Iterator[Violation]:
    parallel = job.parallelism
    if parallel is None:
        return
    m, p = parallel.model_parallel, job.props.procs_per_node
    step = m // gcd(m, p)  # node counts must be multiples of this
    bad = [n for n in (job.node_range.start, job.node_range.stop - 1) if n % step]
    if bad:
        yield (job.parallelism_path(), f"tensor x pipeline x context = {m} does not divide the world size at "
               f"{_over(job)} (at {bad[0]} nodes: {bad[0] * p} ranks); node counts must be multiples of {step}")


@job_rule("KT121", "error", "tensor parallelism crosses nodes",
          rationale="Tensor-parallel ranks exchange activations every layer; over EFA instead of NVLink that is "
                    "several times slower, so Megatron-LM keeps TP inside a node.",
          fix="make parallelism.tensor divide procs_per_node", source=MEGATRON)
def tensor_parallel_in_node(job: JobSpec) -> Iterator[Violation]:
    parallel = job.parallelism
    if parallel is not None and job.props.procs_per_node % parallel.tensor:
        yield (job.parallelism_path("tensor"), f"tensor-parallel size {parallel.tensor} does not divide the "
               f"{job.props.procs_per_node} ranks of a node")


@job_rule("KT122", "error", "global batch not divisible by micro batch x data-parallel size",
          rationale="Each optimizer step runs global / (micro x data-parallel) micro-batches per rank; Megatron-LM "
                    "refuses to start when that is not a whole number (the guide's 'batch size error').",
          fix="make global_batch a multiple of micro_batch x data-parallel size",
          source=MEGATRON)
def command_batch_divides(job: JobSpec) -> Iterator[Violation]:
    parallel = job.parallelism
    if parallel is None or parallel.micro_batch is None or parallel.global_batch is None:
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
    yield (job.parallelism_path("global_batch"),
           f"global_batch {parallel.global_batch} is not a multiple of micro_batch {parallel.micro_batch} x "
           f"data-parallel size {dp} (at {n} nodes: {n * p} ranks / model-parallel {m}){works}",
           f"use a multiple of {parallel.micro_batch * dp} for global_batch")
