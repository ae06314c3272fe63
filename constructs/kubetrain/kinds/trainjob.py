"""Kubeflow Trainer v2 TrainJob (`trainer.kubeflow.org/v1alpha1`, Trainer v2.3): the operator's contract.

A TrainJob names a runtime and the controller turns the pair into a JobSet of the same name: one
replicated Job `node` whose pods run container `node`. kubetrain emits a namespaced TrainingRuntime
per job (`<job>-runtime`) holding the whole pod template (volumes, tolerations, security, ...), and
the TrainJob references it, so every pod setting survives (the TrainJob's own `trainer` block only
carries container fields). The runtime syncs in the platform wave, before the workloads': the TrainJob
webhook rejects a job whose runtime does not exist yet (the TrainJob's reference to it says so).
The controller injects only PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK (the Job's completion
index), PET_MASTER_ADDR (`<job>-node-0-0.<job>`) and PET_MASTER_PORT (29500) and rejects user env
with those names, so the command is torchrun. `trainer`, `runtimeRef` and `initializer` are
immutable: a changed job is a new object (create-once). Pods are `<job>-node-0-<i>`, a DNS label, and the
JobSet's headless Service is named after the job, a DNS-1035 label. Kueue admits the runtime's replicated
jobs, the trainer's with the TrainJob's numNodes pods; the TrainJob's `suspend` and the runtime patches Kueue
records on it are Kueue's.
With the TrainJobStatus feature gate the controller also injects its status endpoint's URL, CA and token
(KUBEFLOW_TRAINER_SERVER_*, a projected volume at /var/run/secrets/kubeflow/trainer), where the trainer posts its
progress into status.trainerStatus (kubetrain_runtime/progress.py); run-local serves that endpoint too.
(kubeflow/trainer v2.3.0: pkg/runtime/framework/plugins/torch, pkg/runtime/framework/plugins/trainjobstatus,
pkg/webhooks.)

What the operators create (for the output check): the Trainer controller makes a JobSet named like the
TrainJob from the runtime's template, its torch plugin sets the `node` replicated Job's parallelism and
completions to numNodes and adds containerPort 29500 to container `node` (kubeflow/trainer v2.3.0
pkg/runtime/framework/plugins/torch/torch.go); JobSet makes one Job per replica, `<jobset>-<replicatedJob>-<j>`,
Indexed by default, labelled `jobset.sigs.k8s.io/*`, with the JobSet's name as its pods' subdomain, and its
webhook refuses a JobSet whose Job names, or pod names plus the 5-character suffix, are not DNS-1035 labels
(jobset v0.12 pkg/webhooks/jobset_webhook.go). The Job controller then makes the pods (kubetrain.apiserver).
A TrainJob's own spec.trainer (image, command, args, env, resourcesPerNode) changes container `node` of
those pods; its problems are the TrainJob's, the rest the runtime's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import PurePosixPath
from typing import Any, ClassVar

from pydantic import Field

from kubetrain.kinds.base import (
    PLATFORM,
    WORKLOADS,
    CrdSource,
    IgnoredFields,
    Kind,
    Manifest,
    Reference,
    Run,
    RunShape,
    Sibling,
    number,
    pod_template_fields,
    run_shape,
)
from kubetrain.kinds.target import LocalPlan, LocalReplica, Target, fail_job_exit_codes, pod_failure_policy
from kubetrain.model.created import JOB_CONTROLLER_LABELS, Created
from kubetrain.model.job_request import JobRequest
from kubetrain.model.names import dns_1035_label_problem
from kubetrain.model.pod_sets import count_of, pod_set
from kubetrain.rules.registry import register
from kubetrain.rules.sources import TRAINER_STATUS
from kubetrain_runtime.problems import Problem
from kubetrain_runtime.progress import ENV_CA_CERT, ENV_TOKEN, ENV_URL

GROUP = "trainer.kubeflow.org"
MASTER_PORT = 29500
INJECTED = {"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"}
# The TrainJobStatus plugin (feature gate, Trainer >= 2.2) injects its status endpoint's three as well
# (kubetrain_runtime/progress.py), upserted over whatever the container sets; the torch plugin's webhook refuses only its own.
STATUS_ENV = {ENV_URL, ENV_CA_CERT, ENV_TOKEN}
# What the TrainJobStatus plugin adds to every trainer container: upserted by volume name and by mount path, so a
# volume of the job with either is replaced without a word.
STATUS_VOLUME = "kubeflow-trainer-token"
STATUS_MOUNT = PurePosixPath("/var/run/secrets/kubeflow/trainer")
STATUS_MOUNT_TAKEN = register(
    "KT219", "error", "volume where Kubeflow Trainer mounts its status endpoint's token",
    rationale="With the TrainJobStatus feature gate (Trainer >= 2.2) the controller upserts a projected volume named "
              f"{STATUS_VOLUME} (a service account token and the endpoint's CA) at {STATUS_MOUNT} into every trainer "
              "container, matching volumes by name and mounts by path: a job's volume of that name, or mounted at that "
              "path, is silently replaced, and one mounted below it lands in a read-only projected volume.",
    fix="rename the volume, or mount it elsewhere", source=TRAINER_STATUS, targets=("trainjob",))
ANCESTOR_LABEL = f"{GROUP}/trainjob-ancestor-step"
JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"
JOBSET = "jobset.sigs.k8s.io"
JOBSET_LABELS = frozenset(f"{JOBSET}/{key}" for key in (
    "jobset-name", "jobset-uid", "replicatedjob-replicas", "global-replicas", "replicatedjob-name", "job-index",
    "job-global-index", "job-key", "restart-attempt"))
POD_NAME_SUFFIX = "-abcde"  # JobSet's webhook checks pod names with the Job controller's 5 random characters


class TrainJob(Target):
    """Kubeflow Trainer v2's TrainJob on a TrainingRuntime kubetrain emits beside it."""

    name: ClassVar[str] = "trainjob"
    api_version: ClassVar[str] = f"{GROUP}/v1alpha1"
    kind: ClassVar[str] = "TrainJob"
    container_name: ClassVar[str] = "node"

    active_deadline_seconds: int | None = Field(None, ge=1, description="Fail the job when it runs longer.")

    def runtime_name(self, job: JobRequest) -> str:
        return f"{job.name}-runtime"

    def injected_env(self, job: JobRequest) -> set[str]:
        return INJECTED | STATUS_ENV

    def env_owner(self, name: str) -> str:
        if name in STATUS_ENV:
            return "the Kubeflow Trainer controller's TrainJobStatus plugin (its status endpoint, for progress)"
        return "the Kubeflow Trainer controller's torch plugin"

    def rendezvous_port(self, job: JobRequest) -> int:
        return MASTER_PORT

    def rendezvous_args(self, job: JobRequest) -> list[str]:
        # PET_NNODES and PET_NPROC_PER_NODE are torchrun's defaults; node 0 hosts the rendezvous.
        return ["--rdzv-endpoint=$(PET_MASTER_ADDR):$(PET_MASTER_PORT)"]

    def max_name_length(self, job: JobRequest) -> tuple[int, str]:
        # The JobSet's last pod, <job>-node-0-<n-1>-<5 random characters>, is a DNS-1035 label.
        suffix = f"-node-0-{job.nodes - 1}{POD_NAME_SUFFIX}"
        return 63 - len(suffix), f"{job.name}{suffix}"

    def derived_names(self, job: JobRequest) -> list[str]:
        return [self.runtime_name(job)]

    def owned_pod_labels(self, job: JobRequest) -> frozenset[str]:
        return JOB_CONTROLLER_LABELS | JOBSET_LABELS | {ANCESTOR_LABEL}

    def check(self, job: JobRequest) -> Iterator[Problem]:
        if job.elastic:
            yield Problem("KT701", "elastic", "the TrainJob target runs a fixed number of nodes",
                          "use target=PyTorchJob() for elastic jobs (TrainJob, the default, is not elastic), or "
                          "remove elastic")
        if not job.launched_by_torchrun:
            yield Problem("KT701", "workload.launcher", "the Trainer controller only injects PET_* variables, which "
                          "only torchrun reads", "launch the command with torchrun")
        for i, volume in enumerate(job.volumes):
            if volume.name == STATUS_VOLUME:
                yield Problem(STATUS_MOUNT_TAKEN.code, f"volumes.{i}.name", f"{STATUS_VOLUME} is the name of the "
                              "Trainer's status token volume, which replaces this one", "rename the volume")
            if PurePosixPath(volume.mount_path).is_relative_to(STATUS_MOUNT):
                yield Problem(STATUS_MOUNT_TAKEN.code, f"volumes.{i}.mount_path", f"{volume.mount_path} is where the "
                              "Trainer mounts its status endpoint's token and CA", f"mount it outside {STATUS_MOUNT}")

    def render(self, job: JobRequest, pod_template: dict[str, Any]) -> list[dict[str, Any]]:
        labels = job.labels
        pod = {**pod_template, "spec": {**pod_template["spec"], "restartPolicy": "Never"}}
        runtime = {
            "apiVersion": self.api_version, "kind": "TrainingRuntime",
            "metadata": {"name": self.runtime_name(job), "namespace": job.namespace, "labels": labels},
            "spec": {
                "mlPolicy": {"numNodes": job.nodes, "torch": {}},
                "template": {"spec": {"replicatedJobs": [{
                    "name": "node",
                    "template": {
                        "metadata": {"labels": {ANCESTOR_LABEL: "trainer"}},
                        "spec": {
                            "backoffLimit": job.backoff_limit,
                            "podFailurePolicy": pod_failure_policy(self.container_name),
                            "template": pod}}}]}}}}
        spec: dict[str, Any] = {
            "runtimeRef": {"name": self.runtime_name(job), "apiGroup": GROUP, "kind": "TrainingRuntime"},
            "trainer": {"numNodes": job.nodes, "numProcPerNode": job.procs_per_node}}
        if self.active_deadline_seconds is not None:
            spec["activeDeadlineSeconds"] = self.active_deadline_seconds
        job_object = {"apiVersion": self.api_version, "kind": self.kind,
                      "metadata": {"name": job.name, "namespace": job.namespace, "labels": job.object_labels},
                      "spec": spec}
        return [job_object, runtime]

    @classmethod
    def local_plan(cls, manifest: dict[str, Any], loopback_port: Callable[[], int],
                   sibling: Callable[[str, str], dict[str, Any] | None]) -> LocalPlan:
        ref = manifest["spec"]["runtimeRef"]
        runtime = sibling(ref.get("kind", "ClusterTrainingRuntime"), ref["name"])
        if runtime is None:
            raise LookupError(f"runtime {ref['name']} is not beside the job in dist/ (run-local runs TrainJobs on "
                              "the TrainingRuntime kubetrain emits)")
        trainer = manifest["spec"].get("trainer", {})
        nodes = trainer.get("numNodes") or runtime["spec"]["mlPolicy"]["numNodes"]
        nproc = str(trainer.get("numProcPerNode", 1))
        (replicated,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
        job_spec = replicated["template"]["spec"]
        env = {"PET_NNODES": str(nodes), "PET_NPROC_PER_NODE": nproc, "PET_MASTER_ADDR": "127.0.0.1",
               "PET_MASTER_PORT": str(loopback_port())}
        replicas = [LocalReplica(f"node-0-{i}", job_spec["template"], "Retry",
                                 {**env, "PET_NODE_RANK": str(i)}) for i in range(nodes)]
        return LocalPlan(replicas, cls.container_name, job_spec.get("backoffLimit", 6),
                         fail_job_exit_codes=fail_job_exit_codes(job_spec, cls.container_name),
                         status_object=manifest)


def jobset_jobs(jobset_name: str, spec: dict[str, Any], source: str, by: str, num_nodes: int | None = None,
                describe: str | None = None, trainer_runtime: bool = False,
                overrides: dict[str, Any] | None = None) -> list[Created]:
    """The last Job of each replicated Job, as JobSet creates it. From a Trainer runtime the Trainer sets every
    Job's parallelism and completions to its pod count: numNodes for the trainer's, else the template's parallelism
    (pkg/runtime SyncPodSetsToTemplateSpec), and adds its port to container node; with a TrainJob's `overrides`
    (its spec.trainer) only the Jobs they change, reporting only what comes from them."""
    network = spec.get("network") or {}
    subdomain = network.get("subdomain") or jobset_name
    created = []
    for i, replicated in enumerate(spec.get("replicatedJobs") or ()):
        replicas = replicated.get("replicas", 1)
        if replicas < 1:
            continue
        template = replicated.get("template") or {}
        job_meta = template.get("metadata") or {}
        job_spec = {"completionMode": "Indexed", **(template.get("spec") or {})}
        trainer = trainer_runtime and (job_meta.get("labels") or {}).get(ANCESTOR_LABEL) == "trainer"
        if trainer_runtime:
            count = (num_nodes if trainer else None) or job_spec.get("parallelism") or 1
            job_spec |= {"parallelism": count, "completions": count}
        labels = {f"{JOBSET}/jobset-name": jobset_name, f"{JOBSET}/replicatedjob-name": replicated["name"],
                  f"{JOBSET}/replicatedjob-replicas": str(replicas), f"{JOBSET}/job-index": str(replicas - 1)}
        pod_template = job_spec.get("template") or {}
        pod_meta = pod_template.get("metadata") or {}
        pod_spec = dict(pod_template.get("spec") or {})
        if network.get("enableDNSHostnames", True):
            pod_spec["subdomain"] = subdomain
        paths: tuple[tuple[str, str], ...] = ()
        if trainer:
            pod_spec["containers"] = [_with_trainer_port(c) for c in pod_spec.get("containers") or ()]
            if overrides:
                pod_spec["containers"], paths = _with_overrides(pod_spec["containers"], overrides)
        elif overrides:
            continue  # the runtime's own check covers a Job the TrainJob does not change
        job_spec["template"] = {"metadata": {**pod_meta, "labels": {**(pod_meta.get("labels") or {}), **labels}},
                                "spec": pod_spec}
        job = {"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": f"{jobset_name}-{replicated['name']}-{replicas - 1}",
                            "labels": {**(job_meta.get("labels") or {}), **labels},
                            **({"annotations": job_meta["annotations"]} if job_meta.get("annotations") else {})},
               "spec": job_spec}
        ports = tuple((f"spec.template.spec.containers[{j}].ports", len(c.get("ports") or ()))
                      for j, c in enumerate((pod_template.get("spec") or {}).get("containers") or ()))
        created.append(Created(job, by, source=f"{source}.replicatedJobs[{i}].template", describe=describe,
                               template_labels=frozenset(job_meta.get("labels") or ()), appended=ports,
                               paths=paths, only_paths=bool(overrides)))
    return created


def _with_overrides(containers: list[dict[str, Any]], trainer: dict[str, Any]) -> tuple[
        list[dict[str, Any]], tuple[tuple[str, str], ...]]:
    """Container node as the Trainer changes it from a TrainJob's spec.trainer (kubeflow/trainer v2.3.0 pkg/runtime
    framework plugins jobset: image, command and args replaced, env upserted by name, resourcesPerNode as its
    resources), and (its field in the Job, the TrainJob's field) for each value that comes from the TrainJob."""
    out, paths = [], []
    for k, container in enumerate(containers):
        if container.get("name") != TrainJob.container_name:
            out.append(container)
            continue
        at = f"spec.template.spec.containers[{k}]"
        container = dict(container)
        for field, override in (("image", "image"), ("command", "command"), ("args", "args"),
                                ("resources", "resourcesPerNode")):
            if trainer.get(override) is not None:
                container[field] = trainer[override]
                paths.append((f"{at}.{field}", f"spec.trainer.{override}"))
        if trainer.get("env"):
            env = list(container.get("env") or ())
            names = [variable.get("name") for variable in env]
            for j, variable in enumerate(trainer["env"]):
                name = variable.get("name")
                index = names.index(name) if name in names else len(env)
                if index == len(env):
                    env.append(variable)
                    names.append(name)
                else:
                    env[index] = variable
                paths.append((f"{at}.env[{index}]", f"spec.trainer.env[{j}]"))
            container["env"] = env
        out.append(container)
    return out, tuple(paths)


def _with_trainer_port(container: dict[str, Any]) -> dict[str, Any]:
    ports = container.get("ports") or []
    if container.get("name") != TrainJob.container_name or any(p.get("containerPort") == MASTER_PORT for p in ports):
        return container
    return {**container, "ports": [*ports, {"containerPort": MASTER_PORT, "protocol": "TCP"}]}


def jobset_names(name: str, spec: dict[str, Any], num_nodes: int | None = None,
                 trainer_runtime: bool = False) -> list[tuple[str, str]]:
    """JobSet's webhook: the last Job of each replicated Job, and its last pod with the Job controller's
    5-character suffix, are DNS-1035 labels (with the pod counts the Trainer sets, from a Trainer runtime)."""
    where = "metadata.name"
    problems = []
    for replicated in spec.get("replicatedJobs") or ():
        job_name = f"{name}-{replicated.get('name')}-{replicated.get('replicas', 1) - 1}"
        problem = dns_1035_label_problem(job_name)
        if problem:
            problems.append((where, f"JobSet names a Job {job_name!r} ({len(job_name)} characters): {problem}"))
            continue
        job_spec = (replicated.get("template") or {}).get("spec") or {}
        trainer = trainer_runtime and ((replicated.get("template") or {}).get("metadata") or {}).get(
            "labels", {}).get(ANCESTOR_LABEL) == "trainer"
        completions = job_spec.get("completions")
        if trainer_runtime:
            completions = (num_nodes if trainer else None) or job_spec.get("parallelism") or 1
        if job_spec.get("completionMode", "Indexed") == "Indexed" and isinstance(completions, int) and completions:
            pod_name = f"{job_name}-{completions - 1}{POD_NAME_SUFFIX}"
            problem = dns_1035_label_problem(pod_name)
            if problem:
                problems.append((where, (f"JobSet names a pod {pod_name!r} ({len(pod_name)} characters, with the "
                                 f"Job controller's 5 random characters): {problem}")))
    return problems


def _num_nodes(manifest: dict[str, Any], runtime: dict[str, Any] | None) -> int | None:
    trainer = manifest.get("spec", {}).get("trainer") or {}
    return trainer.get("numNodes") or ((runtime or {}).get("spec", {}).get("mlPolicy") or {}).get("numNodes")


def trainjob_names(manifest: dict[str, Any], sibling: Sibling) -> list[tuple[str, str]]:
    """The JobSet the controller makes is named like the TrainJob: its Job and pod names come from both. A runtime
    not beside the job (one installed with the Trainer) is taken to have the `node` Job of the default runtimes."""
    runtime = _runtime(manifest, sibling)
    spec = ((runtime or {}).get("spec", {}).get("template") or {}).get("spec") or {
        "replicatedJobs": [{"name": "node", "template": {"metadata": {"labels": {ANCESTOR_LABEL: "trainer"}}}}]}
    return jobset_names(manifest["metadata"]["name"], spec, _num_nodes(manifest, runtime), trainer_runtime=True)


_OVERRIDES = ("image", "command", "args", "env", "resourcesPerNode")


def trainjob_objects(manifest: dict[str, Any], sibling: Sibling) -> list[Created]:
    """What the TrainJob itself changes in its runtime's pods (spec.trainer's image, command, args, env and
    resourcesPerNode), checked in the Jobs JobSet makes: the runtime's own check covers the rest, so a TrainJob
    without such overrides (kubetrain's own) costs nothing here."""
    trainer = manifest.get("spec", {}).get("trainer") or {}
    if not any(trainer.get(field) is not None for field in _OVERRIDES):
        return []
    runtime = _runtime(manifest, sibling)
    template = ((runtime or {}).get("spec", {}).get("template") or {}).get("spec")
    if template is None:
        return []  # a runtime installed with the Trainer: its template is not in the fleet
    return jobset_jobs(manifest["metadata"]["name"], template, "spec", "JobSet", _num_nodes(manifest, runtime),
                       trainer_runtime=True, overrides=trainer)


def trainjob_admission(manifest: dict[str, Any], sibling: Sibling) -> list[tuple[str, str]]:
    """The Trainer's torch plugin refuses spec.trainer.env setting what it injects itself."""
    env = (manifest.get("spec", {}).get("trainer") or {}).get("env") or ()
    return [(f"spec.trainer.env[{j}].name", f"{variable.get('name')} is set by the Trainer (torch plugin): a "
             "TrainJob may not set it") for j, variable in enumerate(env) if variable.get("name") in INJECTED]


def runtime_jobs(manifest: dict[str, Any], sibling: Sibling) -> list[Created]:
    """The Jobs of any TrainJob on this runtime (named after each TrainJob, whose names the TrainJob's check
    covers): JobSet's Jobs of the runtime's template."""
    template = (manifest.get("spec", {}).get("template") or {}).get("spec") or {}
    return jobset_jobs("x", template, "spec.template.spec", "JobSet", (manifest["spec"].get("mlPolicy") or {}).get(
        "numNodes"), describe="Jobs JobSet creates from this runtime for each TrainJob", trainer_runtime=True)


def jobset_objects(manifest: dict[str, Any], sibling: Sibling) -> list[Created]:
    return jobset_jobs(manifest["metadata"]["name"], manifest.get("spec") or {}, "spec", "JobSet")


def jobset_admission_names(manifest: dict[str, Any], sibling: Sibling) -> list[tuple[str, str]]:
    return jobset_names(manifest["metadata"]["name"], manifest.get("spec") or {})


def _runtime(obj: Manifest, sibling: Sibling) -> Manifest | None:
    """The runtime the TrainJob names, when it is at hand."""
    ref = (obj.get("spec") or {}).get("runtimeRef") or {}
    return sibling(ref.get("kind", "ClusterTrainingRuntime"), ref.get("name", ""))


def _is_trainer(replicated: Manifest) -> bool:
    """The runtime's replicated job that runs the trainer's nodes."""
    labels = ((replicated.get("template") or {}).get("metadata") or {}).get("labels") or {}
    return labels.get(ANCESTOR_LABEL) == "trainer" or replicated.get("name") == "node"


def _replicated_jobs(runtime: Manifest) -> list[dict[str, Any]]:
    return (((runtime.get("spec") or {}).get("template") or {}).get("spec") or {}).get("replicatedJobs") or []


def _trainer_pod(runtime: Manifest) -> dict[str, Any]:
    job = next((r.get("template") or {} for r in _replicated_jobs(runtime) if _is_trainer(r)), {})
    return ((job.get("spec") or {}).get("template") or {}).get("spec") or {}


def _pod_sets(obj: Manifest, sibling: Sibling) -> tuple[list, int | None]:
    """The runtime's replicated jobs; the trainer's node job runs numNodes pods (the TrainJob's, else the
    runtime's mlPolicy)."""
    runtime = _runtime(obj, sibling)
    if runtime is None:
        return [], None
    runtime_spec = runtime.get("spec") or {}
    nodes = ((obj.get("spec") or {}).get("trainer") or {}).get("numNodes") or \
        (runtime_spec.get("mlPolicy") or {}).get("numNodes")
    pod_sets = []
    for replicated in _replicated_jobs(runtime):
        job_spec = (replicated.get("template") or {}).get("spec") or {}
        count = count_of(nodes) if _is_trainer(replicated) and nodes else \
            count_of(replicated.get("replicas")) * count_of(job_spec.get("parallelism"))
        pod_sets.append(pod_set(str(replicated.get("name", "node")), count, job_spec.get("template") or {}))
    return pod_sets, None


def _shape(obj: Manifest, sibling: Sibling) -> RunShape:
    """The node job's numNodes pods, as the runtime's template makes them and the TrainJob's trainer overrides
    them (image, resourcesPerNode); kubetrain's TrainJobs keep the whole pod in the runtime. Without the runtime
    at hand, only the trainer's own fields."""
    spec = obj.get("spec") or {}
    trainer = spec.get("trainer") or {}
    ref = spec.get("runtimeRef") or {}
    runtime = _runtime(obj, sibling)
    own = {"image": trainer.get("image"), "resources": {"limits": (trainer.get("resourcesPerNode") or {}).get("limits")
                                                                  or {}}}
    pod = {"containers": [own]}
    if runtime is not None:
        template = _trainer_pod(runtime)
        container = (template.get("containers") or [{}])[0]
        pod = {**template, "containers": [{**container, "image": own["image"] or container.get("image"),
                                           "resources": own["resources"] if own["resources"]["limits"] else
                                           container.get("resources") or {}},
                                          *(template.get("containers") or [{}])[1:]]}
    return run_shape("TrainJob", [(number(trainer.get("numNodes"), 1), pod)], trainer.get("numProcPerNode"),
                     reads=((ref.get("kind", "ClusterTrainingRuntime"), ref["name"]),) if ref.get("name") else ())


def _references(obj: Manifest) -> list[Reference]:
    ref = (obj.get("spec") or {}).get("runtimeRef") or {}
    kind = ref.get("kind", "ClusterTrainingRuntime")
    namespace = None if kind == "ClusterTrainingRuntime" else (obj.get("metadata") or {}).get("namespace")
    return [Reference(GROUP, kind, namespace, ref.get("name", ""), admission=True)]


TRAINJOB = Kind(
    TrainJob.api_version, TrainJob.kind, WORKLOADS,
    name_problem=dns_1035_label_problem, derived_names=trainjob_names, admission=trainjob_admission,
    created=trainjob_objects,
    crd=CrdSource("trainer.kubeflow.org_trainjobs.yaml", "kubeflow/trainer", "v2.3.0", (f"{GROUP}/v1alpha1",)),
    create_once=True, health="training_job.lua",
    ignored=IgnoredFields(("/spec/suspend",), ('.spec.runtimePatches[] | select(.manager == "kueue.x-k8s.io/manager")',)),
    references=_references,
    run=Run(_pod_sets, _shape, reads=("TrainingRuntime", "ClusterTrainingRuntime")),
    target=TrainJob)
TRAINING_RUNTIME = Kind(
    f"{GROUP}/v1alpha1", "TrainingRuntime", PLATFORM, holds_pod_templates=True, created=runtime_jobs,
    crd=CrdSource("trainer.kubeflow.org_trainingruntimes.yaml", "kubeflow/trainer", "v2.3.0", (f"{GROUP}/v1alpha1",)))
CLUSTER_TRAINING_RUNTIME = Kind(
    f"{GROUP}/v1alpha1", "ClusterTrainingRuntime", PLATFORM, holds_pod_templates=True, created=runtime_jobs,
    crd=CrdSource("trainer.kubeflow.org_clustertrainingruntimes.yaml", "kubeflow/trainer", "v2.3.0",
                  (f"{GROUP}/v1alpha1",)))


# What the Trainer controller turns a TrainJob into: kubetrain emits none, but a cluster's JobSets are judged
# and delivered like the other runs.
def _jobset_shape(obj: Manifest, sibling: Sibling) -> RunShape:
    pods = []
    for replicated in (obj.get("spec") or {}).get("replicatedJobs") or []:
        job_spec = (replicated.get("template") or {}).get("spec") or {}
        pods.append((number(replicated.get("replicas"), 1) * number(job_spec.get("parallelism"), 1),
                     (job_spec.get("template") or {}).get("spec") or {}))
    return run_shape("JobSet", pods)


JOBSET_KIND = Kind(
    JOBSET_API_VERSION, "JobSet", WORKLOADS, create_once=True, name_problem=dns_1035_label_problem,
    derived_names=jobset_admission_names, created=jobset_objects,
    health="training_job.lua",
    ignored=IgnoredFields(("/spec/suspend",), pod_template_fields(".spec.replicatedJobs[].template.spec.template.spec")),
    run=Run(None, _jobset_shape))

KINDS = (TRAINJOB, TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME, JOBSET_KIND)
