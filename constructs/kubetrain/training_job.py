"""TrainingJob: a typed job definition compiled into a run-config ConfigMap and a Kubeflow PyTorchJob."""

from __future__ import annotations

import hashlib
from typing import Any

import cdk8s
from cdk8s_plus_33 import k8s
from constructs import Construct

from kubetrain.cluster import Cluster
from kubetrain.job_props import TrainingJobProps
from kubetrain.job_rules import check_job
from kubetrain.pod_template import CONFIG_FILE, pod_template
from training.problems import ConfigError, validate_model

CONFIG_HASH_ANNOTATION = "kubetrain.dev/config-sha256"


class TrainingJob(Construct):
    """A distributed training job; see TrainingJobProps for every prop and its default.

    Validation happens here, when the construct is created: schema problems first, then the
    compile-time rules (job_rules). Either way a ConfigError lists every problem found, each
    with the construct path (`<cluster>/<job>`) and the field.
    """

    def __init__(self, scope: Cluster, id: str, **props: Any):
        where = f"{scope.props.name}/{id}"
        job = validate_model(TrainingJobProps, {"name": id, **props}, where)
        problems = check_job(job)
        if problems:
            raise ConfigError(where, problems)
        namespace = scope.claim("PyTorchJob", job.namespace, job.name, where)
        super().__init__(scope, id)
        self.props = job

        config_text = job.run.to_yaml()
        labels = {"kubetrain.dev/job": job.name}
        config_map = f"{job.name}-config"
        k8s.KubeConfigMap(self, "config", metadata=k8s.ObjectMeta(name=config_map, namespace=namespace, labels=labels),
                          data={CONFIG_FILE: config_text})
        # The hash makes a config change show up on the job itself in the pull request's diff.
        annotations = {CONFIG_HASH_ANNOTATION: hashlib.sha256(config_text.encode()).hexdigest()}
        template = pod_template(job, "pytorch", config_map, labels, annotations)
        pytorch_job = cdk8s.ApiObject(self, "pytorchjob", api_version="kubeflow.org/v1", kind="PyTorchJob",
                                      metadata=cdk8s.ApiObjectMetadata(name=job.name, namespace=namespace,
                                                                       labels=labels))
        pytorch_job.add_json_patch(cdk8s.JsonPatch.add("/spec", pytorch_job_spec(job, template)))


def pytorch_job_spec(job: TrainingJobProps, template: dict[str, Any]) -> dict[str, Any]:
    """The PyTorchJob spec (training operator v1.9), torchrun in every pod.

    Fixed size: a Master and nodes - 1 Workers; the operator injects PET_NNODES,
    PET_NPROC_PER_NODE (from nprocPerNode), PET_NODE_RANK and PET_MASTER_ADDR/PORT.
    Elastic: `nodes` Workers and an elasticPolicy; there is no Master, because ranks are assigned
    by each rendezvous, not by pod index, and the first worker hosts the rendezvous.
    """
    spec: dict[str, Any] = {"nprocPerNode": str(job.procs_per_node),
                            "runPolicy": {"backoffLimit": job.backoff_limit}}
    if job.elastic:
        spec["elasticPolicy"] = {"rdzvBackend": "c10d", "minReplicas": job.node_range[0],
                                 "maxReplicas": job.node_range[-1], "maxRestarts": job.max_restarts}
        replicas = {"Worker": {"replicas": job.nodes, "restartPolicy": job.restart_policy, "template": template}}
    else:
        replicas = {"Master": {"replicas": 1, "restartPolicy": job.restart_policy, "template": template}}
        if job.nodes > 1:
            replicas["Worker"] = {"replicas": job.nodes - 1, "restartPolicy": job.restart_policy,
                                  "template": template}
    spec["pytorchReplicaSpecs"] = replicas
    return spec
