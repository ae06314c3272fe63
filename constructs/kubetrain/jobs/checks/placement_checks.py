"""Job rules on the job's name and placement: the names the operator derives from it, and what the job asks of
its instance type (accelerators, EFA interfaces, CPU and memory)."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

from kubetrain.jobs.checks.job_rules import JobRules, Violation
from kubetrain.jobs.spec import JobSpec
from kubetrain.model.instances import BUILTIN_CATALOG
from kubetrain.model.quantity import parse_quantity
from kubetrain.rules.sources import (
    EC2,
    EFA_TYPES,
    EKS_EFA,
    K8S_NAMES,
    KARPENTER_TYPES,
    PYTORCHJOB,
    TORCHRUN,
    TRAINER,
    cite,
)

RULES = JobRules()  # this module's rules, in the order their problems are reported
job_rule = RULES.rule


@job_rule("KT101", "error", "job name too long for the operator's derived names",
          rationale="Operators name pods and Services after the job (PyTorchJob: <job>-worker-<i>; TrainJob: "
                    "<job>-node-<i>-<j>); a Service name is a DNS label of at most 63 characters, so a long job "
                    "name is accepted and its pods never start.",
          fix="shorten the job name", source=cite(K8S_NAMES, PYTORCHJOB, TRAINER))
def name_fits_derived_names(job: JobSpec) -> Iterator[Violation]:
    limit, longest = job.props.target.max_name_length(job.request)
    if len(job.name) > limit:
        added = len(job.name) - len(job.props.name)  # the definition's hash, for create-once runs
        yield ("name", f"{len(job.props.name)} characters is too long: the operator's name '{longest}' would "
               f"exceed 63", f"shorten the name to at most {limit - added} characters")


@job_rule("KT102", "error", "more accelerators than the instance type has",
          rationale="A pod asking a node for more GPUs or Neuron devices than it has is never scheduled.",
          fix="request at most the instance's accelerators, or choose a larger instance type",
          source=EC2)
def accelerators_fit(job: JobSpec) -> Iterator[Violation]:
    node, wanted = job.instance, job.resources.accelerators
    if node is not None and wanted > node.accelerators:
        kind = node.accelerator_resource or "accelerators"
        yield ("resources.accelerators", f"{wanted} {kind} requested but {node.name} has {node.accelerators}",
               f"request at most {node.accelerators} per node, or choose an instance type with more")


@job_rule("KT103", "error", "more EFA interfaces than the instance type has",
          rationale="A pod asking for more vpc.amazonaws.com/efa than the node exposes is never scheduled.",
          fix="request exactly the instance's EFA interfaces", source=cite(EC2, EFA_TYPES))
def efa_fits(job: JobSpec) -> Iterator[Violation]:
    node, wanted = job.instance, job.resources.efa
    if node is not None and wanted > node.efa_interfaces:
        yield ("resources.efa", f"{wanted} EFA interfaces requested but {node.name} has {node.efa_interfaces}",
               f"request {node.efa_interfaces} (all of them, for full bandwidth)" if node.efa_interfaces
               else "set efa to 0, or choose an EFA instance type")


@job_rule("KT104", "error", "processes per node differ from accelerators per node",
          rationale="Each rank drives one accelerator: fewer ranks leave devices idle, more share one device.",
          fix="set procs_per_node to resources.accelerators", source=TORCHRUN)
def one_process_per_accelerator(job: JobSpec) -> Iterator[Violation]:
    wanted = job.resources.accelerators
    if wanted and job.props.procs_per_node != wanted:
        yield ("procs_per_node", f"{job.props.procs_per_node} processes for {wanted} accelerators per node",
               f"set procs_per_node to {wanted}: each rank drives one device")


@job_rule("KT111", "error", "unknown instance type",
          rationale="The capacity rules need the instance's accelerators, EFA interfaces, CPU and memory.",
          fix="use a type of the instance catalog (kubetrain.model.instances), or register yours with "
              "Cluster(instance_types=[InstanceType(...)])",
          source="constructs/kubetrain/model/instances.py")
def instance_type_known(job: JobSpec) -> Iterator[Violation]:
    if job.props.instance_type and job.instance is None:
        near = BUILTIN_CATALOG.near(job.props.instance_type)
        yield ("instance_type", f"unknown instance type {job.props.instance_type!r}",
               f"{near}use a type of the instance catalog (kubetrain.model.instances), or register yours with "
               "Cluster(instance_types=[InstanceType(...)])")


@job_rule("KT123", "error", "pod requests more CPU or memory than the node can allocate",
          rationale="The kubelet reserves CPU and memory for the system and evictions; a pod asking for the "
                    "instance's full size never schedules.",
          fix="request at most the node's allocatable CPU and memory", source=KARPENTER_TYPES)
def requests_fit_allocatable(job: JobSpec) -> Iterator[Violation]:
    node = job.instance
    if node is None or job.props.pool is not None:  # a pool's fit is KT401's, over every type of the pool
        return
    r = job.resources
    cpu, memory = Decimal(str(node.allocatable_cpu())), Decimal(str(node.allocatable_memory()))
    if parse_quantity(r.cpu) > cpu:
        yield ("resources.cpu", f"{r.cpu} CPUs requested but a {node.name} can allocate {cpu:.3f}",
               f"request at most {int(cpu * 1000)}m")
    hugepages = parse_quantity(r.hugepages_2mi or "0")
    if parse_quantity(r.memory) + hugepages > memory:
        gib = memory / 2**30
        yield ("resources.memory", f"{r.memory} of memory (plus {hugepages / 2**20:.0f}Mi huge pages) requested but "
               f"a {node.name} can allocate {gib:.1f}Gi", f"request at most {int(memory / 2**30 * 1024) - int(hugepages / 2**20)}Mi of memory")


@job_rule("KT124", "error", "accelerator instance type but no accelerators requested",
          rationale="Nothing else runs on a GPU or Trainium node (they are tainted); a job there without "
                    "accelerators pays for them and trains on CPUs.",
          fix="set resources.accelerators to the instance's count", source=EC2)
def accelerators_requested(job: JobSpec) -> Iterator[Violation]:
    node = job.instance
    if node is not None and node.accelerators and not job.resources.accelerators:
        yield ("resources.accelerators", f"{node.name} has {node.accelerators} accelerators and the job requests "
               "none", f"set resources.accelerators to {node.accelerators}")


@job_rule("KT125", "warning", "EFA instance type with fewer EFA interfaces requested than it has",
          rationale="Karpenter attaches EFA only for pods that request vpc.amazonaws.com/efa; without all of them "
                    "NCCL silently falls back to TCP sockets or runs at a fraction of the bandwidth (the guide's "
                    "'EFA not detected').",
          fix="request every EFA interface of the instance", source=cite(EKS_EFA, EFA_TYPES))
def efa_requested(job: JobSpec) -> Iterator[Violation]:
    node = job.instance
    # On a pool, KT403 already refuses any other count than the instance's.
    if node is not None and node.efa_interfaces and job.resources.efa < node.efa_interfaces \
            and job.props.nodes > 1 and job.props.pool is None:
        yield ("resources.efa", f"{job.resources.efa} of {node.name}'s {node.efa_interfaces} EFA interfaces "
               "requested", f"set resources.efa to {node.efa_interfaces}")
