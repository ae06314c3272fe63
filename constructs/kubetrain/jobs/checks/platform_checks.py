"""The job against what it names beside its own fields: its pod parts (probes, init containers, a PriorityClass,
a ServiceAccount), the platform objects it runs on (pool, storage, queue) and its namespace's Pod Security level.
The checks are those objects' modules' (they declare the rules); here their findings land on the job's fields."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kubetrain.jobs.containers import container_part_problems
from kubetrain.jobs.job_props import ClaimVolume
from kubetrain.jobs.pod import container_resources, metrics_ports, placement, pod_volumes
from kubetrain.jobs.spec import JobSpec
from kubetrain.model.vocabulary import EFA_RESOURCE, HUGE_PAGES_RESOURCE
from kubetrain.platform.identity import ServiceAccount, identity_problems
from kubetrain.platform.node_pools import pool_placement_problems
from kubetrain.platform.queues import OTHER_SCHEDULER
from kubetrain.platform.scheduling import OTHER_PLACE, PriorityClass
from kubetrain.platform.security import pod_security_problems
from kubetrain.platform.storage import (
    Claim,
    checkpoint_volume_problems,
    claim_namespace_problems,
    dataset_volume_problems,
)
from kubetrain.state import Level, PodCheck
from kubetrain_runtime.problems import Problem


def pod_part_problems(job: JobSpec) -> list[Problem]:
    """The pod parts the job names: probes and init containers against the pod (KT150, KT151), its priority class
    and service account against its cluster and namespace (KT153), the account's AWS role against the job's
    environment and volumes (KT155)."""
    pod = job.props.pod
    ports = [port["name"] for port in metrics_ports(job)]
    volumes = [volume["name"] for volume in pod_volumes(job)[1]]
    problems = container_part_problems(pod.init_containers, {"liveness_probe": pod.liveness_probe,
                                                             "startup_probe": pod.startup_probe},
                                       job.props.target.container_name, ports, volumes)
    if isinstance(pod.priority_class, PriorityClass) and pod.priority_class.cluster.props.name != job.cluster:
        problems.append(Problem(OTHER_PLACE.code, "pod.priority_class", f"PriorityClass {pod.priority_class.name} "
                                f"is cluster {pod.priority_class.cluster.props.name}'s, and the job runs in "
                                f"{job.cluster}", OTHER_PLACE.fix))
    account = pod.service_account
    if isinstance(account, ServiceAccount):
        where = (account.cluster.props.name, account.namespace)
        if where != (job.cluster, job.namespace):
            problems.append(Problem(OTHER_PLACE.code, "pod.service_account", f"ServiceAccount {account.name} is "
                                    f"in {'/'.join(where)}, and the job's pods in {job.cluster}/{job.namespace}",
                                    OTHER_PLACE.fix))
        problems += identity_problems(account, job.props.env, [init.env for init in pod.init_containers],
                                      [(v.name, v.mount_path) for v in job.props.volumes])
    return problems


def platform_problems(job: JobSpec) -> list[Problem]:
    """The job against the platform objects it names: its pool (KT401-KT403), its storage (KT412, KT413) and
    its queue's placement (KT421). The checks are the platform modules'; they declare the rules."""
    props, problems = job.props, []
    if props.pool is not None:
        pod = placement(job)
        problems += [_on_job_fields(job, p) for p in pool_placement_problems(
            props.pool, container_resources(job)["requests"], pod.get("tolerations", []))]
    for i, volume in enumerate(props.volumes):
        if isinstance(volume, ClaimVolume) and isinstance(volume.claim, Claim):
            problems += claim_namespace_problems(volume.claim, job.namespace, f"volumes.{i}.claim")
    checkpoint = job.volume_at(job.checkpoint_dir) if job.checkpoint_dir else None
    if isinstance(checkpoint, ClaimVolume) and isinstance(checkpoint.claim, Claim):
        field = "workload.run.checkpoint.dir" if job.trainer else "workload.checkpoint_dir"
        problems += checkpoint_volume_problems(checkpoint.claim, field)
    data = job.trainer.run.data.path if job.trainer and job.trainer.run.data.source == "tokens" else None
    dataset = job.volume_at(data) if data else None
    if isinstance(dataset, ClaimVolume) and isinstance(dataset.claim, Claim) and dataset is not checkpoint:
        problems += dataset_volume_problems(dataset.claim, f"volumes.{props.volumes.index(dataset)}")
    if props.queue is not None:
        problems += props.queue.placement_problems(props.placement)
        scheduler = props.queue.scheduler_name
        if scheduler is not None and props.pod.scheduler_name not in (None, scheduler):
            problems.append(Problem(OTHER_SCHEDULER.code, "pod.scheduler_name", f"queue {props.queue.name} gangs its "
                                    f"jobs through {scheduler}, and the pods name {props.pod.scheduler_name}",
                                    OTHER_SCHEDULER.fix))
    elif props.placement is not None:
        problems.append(Problem("KT421", "placement", "topology placement needs a queue to honour it",
                                "set queue= a Kueue LocalQueue whose flavors have a Topology, or drop placement"))
    return problems


def _on_job_fields(job: JobSpec, problem: Problem) -> Problem:
    """A pool's finding about a Kubernetes resource (resources.vpc.amazonaws.com/efa), on the field the user
    wrote (resources.efa)."""
    resource = problem.path.removeprefix("resources.")
    fields = {job.accelerator_resource: "accelerators", EFA_RESOURCE: "efa", HUGE_PAGES_RESOURCE: "hugepages_2mi"}
    return replace(problem, path=f"resources.{fields[resource]}") if resource in fields else problem


def pod_security_check(job: JobSpec, spec: dict[str, Any]) -> PodCheck:
    """KT430 for the job's pod (`spec`, its template's) at a namespace's Pod Security level, on the job's own
    fields. Jobs cannot ask for privileged containers or host paths; what can break a level is the host network,
    an explicitly mounted token (allowed: the user asked for it) and what `restricted` adds."""
    network_field = "pod.host_network" if job.props.pod.host_network else "nccl.host_network"

    def on_job_fields(problem: Problem) -> Problem:
        if problem.path == "hostNetwork":
            return Problem(problem.code, network_field, problem.message,
                           "use the pod network (AWS's reference manifests do, and EFA works on it), or run the "
                           "job in a namespace of its own that PodSecurity leaves privileged")
        if problem.path.startswith("initContainers."):  # the fields as the user wrote them
            problem = replace(problem, path="init_containers." + problem.path.removeprefix("initContainers."))
        if problem.path.endswith("runAsNonRoot"):
            return Problem(problem.code, "pod.security_context.run_as_non_root", problem.message,
                           "set pod.security_context.run_as_non_root (with an image whose user is not root)")
        return Problem(problem.code, f"pod.{problem.path}", problem.message,
                       "enforce baseline on the job's namespace (PodSecurity(level='baseline')), or add the field "
                       "with job.patch(...)")

    def check(level: Level) -> list[Problem]:
        return [on_job_fields(p) for p in pod_security_problems(
            spec, level, path="", token_allowed=job.props.pod.mount_service_account_token)]

    return check
