"""TrainingJob: a typed job definition compiled into its launch target's objects (and a run-config ConfigMap).

    TrainingJob(cluster, "gpt", TrainingJobProps(image=..., nodes=2, procs_per_node=8, ...,
                                                 workload=Trainer(run=RunConfig(...))))

Validation happens here, when the construct is created: the props' schema, the cluster's
namespaces and names, the generic job rules and the target's own. Every problem of the job is
recorded at once in the app's diagnostics (see kubetrain.model.diagnostics); a job with an error emits
nothing, and synth reports every problem of the fleet together.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import cdk8s

from kubetrain.cluster import Cluster, NodeOnDemand
from kubetrain.cost import annotations
from kubetrain.jobs.checks.job_checks import check_job
from kubetrain.jobs.checks.platform_checks import pod_security_check
from kubetrain.jobs.job_props import TrainingJobProps
from kubetrain.jobs.memory_fit import memory_annotations
from kubetrain.jobs.pod import pod_template
from kubetrain.jobs.run_names import rename_in_place, run_hash
from kubetrain.jobs.spec import JobSpec
from kubetrain.kinds.base import CHECKPOINT_DIR_ANNOTATION, pod_specs
from kubetrain.model.instances import BUILTIN_CATALOG
from kubetrain.model.strict import as_fields
from kubetrain.output.render import as_written, patch_object
from kubetrain.platform.kueue_queues import queued_job_problems
from kubetrain.platform.node_pools import patched_pod_problems
from kubetrain.platform.platform_construct import rejected_references
from kubetrain.platform.security import check_pod_security, namespace_level
from kubetrain.state import Emitted
from kubetrain_runtime.problems import INVALID_VALUE, ConfigError, Problem, validate_model


class TrainingJob(NodeOnDemand):
    """A distributed training job; see TrainingJobProps for every prop and its default.

    `props` is a TrainingJobProps or a plain dict; keywords are merged over it. The job's name
    defaults to the construct id.
    """

    def __init__(self, scope: Cluster, id: str, props: TrainingJobProps | Mapping[str, Any] | None = None,
                 **kwargs: Any):
        if not isinstance(scope, Cluster):
            raise ConfigError(id, [Problem(INVALID_VALUE, "scope", f"a job must be created inside a Cluster, not in "
                                           f"{type(scope).__name__}", "pass the Cluster as the first argument")])
        where = f"{scope.props.name}/{id}"
        self.cluster = scope
        self._emitted: list[Emitted] = []
        self._patch_problems: set[Problem] = set()  # what the patches so far broke (KT402, KT422), reported once
        self.spec: JobSpec | None = None
        report = scope.diagnostics
        try:
            validated = validate_model(TrainingJobProps, {"name": id, **as_fields(props), **kwargs}, where)
        except ConfigError as error:
            problems = [replace(p, path=_without_union_tags(p.path)) for p in error.problems]
            report.report(where, problems + scope.attach(self, scope.default_namespace, id))
            return
        namespace, problems = scope.check_namespace(validated.namespace)
        where = f"{scope.props.name}/{namespace}/{validated.name}"
        problems += rejected_references(validated)  # a pool or queue that could not be read: nothing to check against
        if not problems:
            instance_type = validated.instance_type or (validated.pool.instance_type.name
                                                        if validated.pool and validated.pool.instance_type else None)
            spec = JobSpec(validated, namespace, scope.props.name, scope.instance_type(instance_type),
                           create_once=scope.props.run_names == "content-hash")
            config = spec.config_files()
            # The hash makes a config change show up on the job itself in the pull request's diff.
            config_text = "".join(config.values()) if config else None
            template = pod_template(spec, hashlib.sha256(config_text.encode()).hexdigest() if config_text else None)
            problems = check_job(spec) + check_pod_security(scope, namespace, where,
                                                            pod_security_check(spec, template["spec"]))
            names = {spec.name: "name", **{n: "name" for n in validated.target.derived_names(spec.request)}}
            if config:
                names[spec.config_map_name] = "name"
            problems += scope.claim(namespace, names, f"job {validated.name}")
        problems += scope.attach(self, namespace, id)
        if report.report(where, problems):
            return
        self.spec = spec
        self.props = validated
        self.where = where
        emitted = self._emit(spec, config, template)
        self._name_run()
        upstream = [c for c in (validated.pool, validated.queue) if c is not None]
        if upstream:  # whether its queue admits it, and its pool holds it, is judged on the whole fleet (patched)
            scope.state.admission.add_job(where, emitted, upstream)

    def _emit(self, job: JobSpec, config: dict[str, str] | None, template: dict[str, Any]) -> list[Emitted]:
        """Emit the job's objects into its cluster; returns the entries of the target's objects."""
        # The target renders the operator's object first, then what it needs beside it (Services, ...).
        manifests = job.props.target.render(job.request, template)
        if manifests and (extra := {**cost_annotations(job), **run_annotations(job), **memory_annotations(job)}):
            manifests[0]["metadata"]["annotations"] = {**manifests[0]["metadata"].get("annotations", {}), **extra}
        if config is not None:
            self._emitted.append(self.cluster.add_object({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": job.config_map_name, "namespace": job.namespace, "labels": job.labels},
                "data": config}))
        emitted = [self.cluster.add_object(manifest) for manifest in manifests]
        self._main = emitted[0] if emitted else None
        self._emitted += emitted
        return emitted

    _main: Emitted | None = None

    def _name_run(self) -> None:
        """Name a create-once run by its rendered objects (kubetrain.jobs.run_names): rendered under a placeholder
        hash, then renamed everywhere its name appears; again after each patch, which changes what is rendered."""
        job = self.spec
        if job is None or not job.create_once:
            return
        labels = self.cluster.labels_of_objects
        named = replace(job, run_hash=run_hash([as_written(e, labels) for e in self._emitted], job.name))
        if named.name != job.name:
            for emitted in self._emitted:
                rename_in_place(emitted.manifest, job.name, named.name)
        self.spec = named

    @property
    def manifests(self) -> list[dict[str, Any]]:
        """The job's objects as plain data, as synth will write them (its run config's ConfigMap first)."""
        return [e.manifest for e in self._emitted]

    @property
    def main_object(self) -> dict[str, Any] | None:
        """The operator's object (the PyTorchJob, TrainJob, ...) as plain data: what `patch` changes."""
        return self._main.manifest if self._main is not None else None

    def patch(self, *patches: cdk8s.JsonPatch) -> None:
        """The escape hatch: JSON patches applied to the operator's object after kubetrain rendered it,
        for a field kubetrain does not model. The result is still validated against the operator's schema
        at synth, and admission (whether its queue admits it, its pool holds it) judges the patched object, as
        `kubetrain plan` does; the job rules do not see it, except that a job Kueue queues must leave `suspend`
        to Kueue (KT422), the pods of a job on a pool must still tolerate its taints (KT402), and the pod
        templates it holds must keep to the namespace's Pod Security level as it stands (KT430).

            job.patch(JsonPatch.add("/spec/runPolicy/schedulingPolicy", {"minAvailable": 2}))
        """
        if self._main is None:  # the job has errors and emitted nothing; synth reports them
            return
        patch_object(self._main, self.cluster.labels_of_objects, patches)
        self._name_run()
        patched, pool = self._main.manifest, self.props.pool
        found = queued_job_problems(patched) + (patched_pod_problems(pool, patched) if pool is not None else [])
        level = namespace_level(self.cluster, self.spec.namespace)  # the pods it now has, at its namespace's level
        found += list(dict.fromkeys(problem for spec in pod_specs(patched)
                                    for problem in pod_security_check(self.spec, spec)(level)))
        self.cluster.diagnostics.report(self.where, [p for p in found if p not in self._patch_problems])
        self._patch_problems.update(found)


def cost_annotations(job: JobSpec) -> dict[str, str]:
    """What `kubetrain cost` needs from the job beyond its manifests: its estimate, and its accelerators' peak
    when the instance type is a fleet's own (the built-in catalog has the others)."""
    found = {annotations.ESTIMATE: annotations.encode(job.props.estimate)} if job.props.estimate else {}
    peak = job.instance.peak_bf16_flops if job.instance else None
    builtin = BUILTIN_CATALOG.get(job.instance.name) if job.instance else None
    if peak and (builtin is None or builtin.peak_bf16_flops != peak):
        found[annotations.PEAK_FLOPS] = repr(peak)
    return found


def run_annotations(job: JobSpec) -> dict[str, str]:
    """What `kubetrain diff` tells a reviewer about a replaced run: where the run resumes from."""
    return {CHECKPOINT_DIR_ANNOTATION: job.checkpoint_dir} if job.checkpoint_dir else {}


_UNION_TAGS = {"trainer", "command", "function", "ClaimVolume", "EmptyDirVolume", "ConfigMapVolume", "SecretVolume",
               "IndexUrl", "PipIndexSecret"}


def _without_union_tags(path: str) -> str:
    """pydantic puts a tagged union's tag in the error path (workload.trainer.run...); users wrote workload.run...
    Only the tag right after a union field goes: a field named like a tag (an init container's command) stays."""
    parts = path.split(".")
    return ".".join(part for i, part in enumerate(parts) if not (
        part in _UNION_TAGS and i > 0 and (parts[i - 1] == "workload" or (
            i > 1 and parts[i - 2] in ("volumes", "pip_index_urls") and parts[i - 1].isdigit()))))
