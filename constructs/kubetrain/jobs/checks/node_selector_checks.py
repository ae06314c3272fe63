"""Job rules on the pod's node selector: it must agree with the pool or instance type the job runs on."""

from __future__ import annotations

from collections.abc import Iterator

from kubetrain.jobs.checks.job_rules import JobRules, Violation
from kubetrain.jobs.spec import JobSpec
from kubetrain.model.vocabulary import INSTANCE_TYPE_LABEL
from kubetrain.rules.sources import KARPENTER_TYPES, cite

RULES = JobRules()  # this module's rules, in the order their problems are reported
job_rule = RULES.rule


@job_rule("KT144", "error", "node selector contradicts the pool or instance type",
          rationale="The pod's node selector must match a node of the job's pool (or instance type); a key the pool "
                    "sets with another value leaves the pod Pending, and Karpenter creates no node for it.",
          fix="drop the key from pod.node_selector (the pool or instance type sets it)",
          source=cite("https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/", KARPENTER_TYPES))
def node_selector_agrees(job: JobSpec) -> Iterator[Violation]:
    props = job.props
    base = props.pool.node_selector() if props.pool is not None else (
        {INSTANCE_TYPE_LABEL: props.instance_type} if props.instance_type else {})
    for key, value in props.pod.node_selector.items():
        if key in base and base[key] != value:
            yield (f"pod.node_selector.{key}", f"{key}={value} contradicts {base[key]} of the job's "
                   f"{'pool' if props.pool is not None else 'instance type'}")
