"""The output check: the API server's own validation (Kubernetes 1.33) of every emitted object, and of the
pods, Jobs and Services operators create from custom resources, each class with a breaking and a passing case.

Each case takes a committed object of the example fleet, changes fields (as a `job.patch` or a raw object
would), and expects the code and the field path the check names; the passing variant has no finding at all.
The input side of the same classes (refused at the construct, KT130-KT135) is in test_rules.py.
"""

from __future__ import annotations

import base64
import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT, dist_file, kubetrain
from kubetrain.model.manifests import Manifest
from kubetrain.pipeline import fleet_errors
from kubetrain.validation.validate import Schemas, validate_objects

DELETE = object()


def committed(path: str) -> dict[str, Any]:
    return yaml.safe_load((ROOT / "dist" / path).read_text())


def job(cluster: str, kind: str, name: str) -> dict[str, Any]:
    return yaml.safe_load(dist_file(cluster, kind, name).read_text())


def gpu_pytorchjob() -> dict[str, Any]:
    """A PyTorchJob on prod's p5 pool as kubetrain renders it: GPUs, EFA, huge pages, the pool's tolerations and
    affinity (the example fleet runs its GPU jobs as TrainJobs)."""
    from kubetrain import App, Cluster, EfaNodePool, NodeResources, PyTorchJob, RunConfig, Trainer, TrainingJob
    from kubetrain.pipeline import render_objects

    app = App()
    cluster = Cluster(app, "prod", kubernetes_version="1.33", namespaces=["ml-prod"])
    p5 = EfaNodePool(cluster, "p5", instance_types=["p5.48xlarge"], zones=["us-west-2a"],
                     subnet_ids=["subnet-0abc1234"], security_group_ids=["sg-0efa1234"], role="KarpenterNodeRole-prod",
                     max_nodes=16)
    run = RunConfig.model_validate({"batch": {"global_size": 64, "micro_size": 4}, "max_steps": 10,
                                    "checkpoint": {"dir": "/ckpt/run"}})
    TrainingJob(cluster, "gpt-1b-fsdp", name="gpt-1b-fsdp", image="ghcr.io/kubetrain/kubetrain:0.1.0", pool=p5,
                resources=NodeResources(cpu="184", memory="1800Gi"), nodes=2, procs_per_node=8, target=PyTorchJob(),
                volumes=[{"name": "ckpt", "claim": "ckpt", "mount_path": "/ckpt"}], workload=Trainer(run=run))
    (pytorchjob,) = [obj for obj in render_objects(app).values() if obj["kind"] == "PyTorchJob"]
    return pytorchjob


PYTORCHJOB = gpu_pytorchjob()
TINY = job("dev", "PyTorchJob", "tiny-gpt-pytorchjob")
INDEXED = job("dev", "Job", "tiny-gpt-indexed")
SERVICE = job("dev", "Service", "tiny-gpt-indexed")
TRAINJOB = job("dev", "TrainJob", "tiny-gpt")
RUNTIME = yaml.safe_load(min((ROOT / "dist/dev/ml-dev").glob("TrainingRuntime.tiny-gpt-*.yaml")).read_text())
CONFIG_MAP = yaml.safe_load(min((ROOT / "dist/dev/ml-dev").glob("ConfigMap.tiny-gpt-[0-9a-f]*-config.yaml"))
                            .read_text())
MPIJOB = committed("prod/ml-prod/MPIJob.nccl-allreduce-p5.yaml")
DAEMONSET = committed("prod/gpu-monitoring/DaemonSet.dcgm-exporter.yaml")
PV = committed("prod/_cluster/PersistentVolume.ml-prod-fsx.yaml")
PVC = committed("prod/ml-prod/PersistentVolumeClaim.fsx.yaml")
NAMESPACE = committed("dev/_cluster/Namespace.ml-dev.yaml")
STORAGE_CLASS = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fsx"},
                 "provisioner": "fsx.csi.aws.com", "reclaimPolicy": "Retain", "volumeBindingMode": "Immediate"}
SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "registry", "namespace": "ml-dev"},
          "type": "kubernetes.io/dockerconfigjson",
          "data": {".dockerconfigjson": base64.b64encode(b'{"auths": {"ghcr.io": {"auth": "eDp5"}}}').decode()}}
PRIORITY_CLASS = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "training"},
                  "value": 1000}

MASTER = "spec.pytorchReplicaSpecs.Master.template"
WORKER = "spec.pytorchReplicaSpecs.Worker.template"
CONTAINER = f"{MASTER}.spec.containers[0]"
JOB_POD = "spec.template.spec"
JOB_CONTAINER = f"{JOB_POD}.containers[0]"
REQUIRED_NODES = f"{MASTER}.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
TERM = {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-west-2a"]}]}


def at(obj: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of `obj` with each `path: value` of `changes` set (DELETE removes the field); paths are dotted,
    with `[i]` for list items and `[key]` for map keys that hold dots."""
    result = copy.deepcopy(obj)
    for path, value in changes.items():
        parts = [part for part in re.split(r"\.(?![^\[]*\])|(?=\[)", path) if part]
        parent: Any = result
        for part in parts[:-1]:
            parent = parent[_key(part)]
        last = _key(parts[-1])
        if value is DELETE:
            del parent[last]
        elif isinstance(parent, list) and last == len(parent):
            parent.append(copy.deepcopy(value))
        else:
            parent[last] = copy.deepcopy(value)
    return result


def _key(part: str) -> Any:
    if part.startswith("["):
        inner = part[1:-1]
        return int(inner) if inner.isdigit() else inner
    return part


def findings(*objects: dict[str, Any], version: str = "1.33") -> list[tuple[str, str, str]]:
    """(code, path, message) of every problem of `objects`, validated together as one cluster's folder."""
    manifests = [Manifest(f"{o['kind']}.yaml", o, Path("/c", (o.get("metadata") or {}).get("namespace") or "_cluster"))
                 for o in objects]
    return [(f.code, f.path, f.message) for f in validate_objects(manifests, Schemas(), kubernetes_version=version)]


def codes_and_paths(*objects: dict[str, Any], version: str = "1.33") -> set[tuple[str, str]]:
    return {(code, path) for code, path, _ in findings(*objects, version=version)}


NEW_VOLUME = f"{JOB_POD}.volumes[{len(INDEXED['spec']['template']['spec']['volumes'])}]"
SCRATCH_CLAIM = {"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "100Gi"}}}}
APPARMOR_ANNOTATION = "spec.template.metadata.annotations[container.apparmor.security.beta.kubernetes.io/trainer]"

HOST_NETWORK_METRICS = {f"{MASTER}.spec.hostNetwork": True, f"{MASTER}.spec.dnsPolicy": "ClusterFirstWithHostNet",
                        f"{CONTAINER}.ports": [{"name": "metrics", "containerPort": 23456, "protocol": "TCP"}]}

# (code, committed object, changes that break it, the path named, changes that pass)
CASES = [
    # -- KT610 names, labels, annotations
    ("KT610", CONFIG_MAP, {"metadata.name": "Run_Config"}, "metadata.name", {"metadata.name": "run-config"}),
    ("KT610", SERVICE, {"metadata.name": "1-rendezvous"}, "metadata.name", {"metadata.name": "rendezvous-1"}),
    ("KT610", NAMESPACE, {"metadata.name": "ml.dev"}, "metadata.name", {"metadata.name": "ml-dev2"}),
    ("KT610", CONFIG_MAP, {"metadata.labels[team]": "x" * 64}, "metadata.labels[team]",
     {"metadata.labels[team]": "x" * 63}),
    ("KT610", CONFIG_MAP, {"metadata.labels[my team]": "x"}, "metadata.labels[my team]",
     {"metadata.labels[example.com/team]": "x"}),
    ("KT610", CONFIG_MAP, {"metadata.annotations": {"example.com/blob": "x" * 262_200}}, "metadata.annotations",
     {"metadata.annotations": {"example.com/blob": "x" * 262_000}}),
    ("KT610", CONFIG_MAP, {"metadata.name": DELETE, "metadata.generateName": "run-"}, "metadata.generateName", {}),
    ("KT610", PYTORCHJOB, {f"{MASTER}.metadata.labels[team]": "a b"}, f"{MASTER}.metadata.labels[team]",
     {f"{MASTER}.metadata.labels[team]": "a-b"}),
    ("KT610", PYTORCHJOB, {f"{MASTER}.metadata.annotations[example.com/blob]": "x" * 262_200},
     f"{MASTER}.metadata.annotations", {f"{MASTER}.metadata.annotations[example.com/blob]": "x" * 1000}),
    # -- KT611 tolerations
    ("KT611", PYTORCHJOB, {f"{MASTER}.spec.tolerations[0].value": "present"}, f"{MASTER}.spec.tolerations[0].operator",
     {f"{MASTER}.spec.tolerations[0].operator": "Exists"}),
    ("KT611", PYTORCHJOB, {f"{MASTER}.spec.tolerations[0]": {"operator": "Equal", "value": "x"}},
     f"{MASTER}.spec.tolerations[0].operator", {f"{MASTER}.spec.tolerations[0]": {"operator": "Exists"}}),
    ("KT611", PYTORCHJOB, {f"{MASTER}.spec.tolerations[0].tolerationSeconds": 60},
     f"{MASTER}.spec.tolerations[0].effect",
     {f"{MASTER}.spec.tolerations[0].tolerationSeconds": 60, f"{MASTER}.spec.tolerations[0].effect": "NoExecute"}),
    ("KT611", INDEXED, {f"{JOB_POD}.tolerations": [{"key": "a b", "operator": "Exists"}]},
     f"{JOB_POD}.tolerations[0].key", {f"{JOB_POD}.tolerations": [{"key": "example.com/a", "operator": "Exists"}]}),
    # -- KT612 affinity, node selector, topology spread
    ("KT612", PYTORCHJOB, {f"{MASTER}.spec.affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}},
     f"{REQUIRED_NODES}.nodeSelectorTerms", {f"{MASTER}.spec.affinity": {"nodeAffinity": {
         "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [TERM]}}}}),
    ("KT612", PYTORCHJOB, {f"{MASTER}.spec.affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "zone", "operator": "NotIn"}]}]}}}},
     f"{REQUIRED_NODES}.nodeSelectorTerms[0].matchExpressions[0].values", {}),
    ("KT612", PYTORCHJOB, {f"{MASTER}.spec.affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "zone", "operator": "Exists", "values": ["a"]}]}]}}}},
     f"{REQUIRED_NODES}.nodeSelectorTerms[0].matchExpressions[0].values", {}),
    ("KT612", PYTORCHJOB, {f"{MASTER}.spec.affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "gpu-generation", "operator": "Gt", "values": ["8", "9"]}]}]}}}},
     f"{REQUIRED_NODES}.nodeSelectorTerms[0].matchExpressions[0].values", {f"{MASTER}.spec.affinity": {
         "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
             {"matchExpressions": [{"key": "gpu-generation", "operator": "Gt", "values": ["8"]}]}]}}}}),
    ("KT612", PYTORCHJOB, {f"{MASTER}.spec.affinity": {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0, "preference": TERM}]}}},
     f"{MASTER}.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
     {f"{MASTER}.spec.affinity": {"nodeAffinity": {
         "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "preference": TERM}]}}}),
    ("KT612", PYTORCHJOB, {f"{MASTER}.spec.affinity": {"podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "podAffinityTerm": {
            "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In"}]},
            "topologyKey": "kubernetes.io/hostname"}}]}}},
     f"{MASTER}.spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm"
     ".labelSelector.matchExpressions[0].values", {}),
    ("KT612", PYTORCHJOB, {f"{MASTER}.spec.nodeSelector[karpenter.sh/nodepool]": "p5 pool"},
     f"{MASTER}.spec.nodeSelector[karpenter.sh/nodepool]", {}),
    ("KT612", INDEXED, {f"{JOB_POD}.topologySpreadConstraints": [
        {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]},
     f"{JOB_POD}.topologySpreadConstraints[0].maxSkew", {f"{JOB_POD}.topologySpreadConstraints": [
         {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]}),
    # -- KT613 resources
    ("KT613", PYTORCHJOB, {f"{CONTAINER}.resources.requests[hugepages-2Mi]": "5121Mi",
                           f"{CONTAINER}.resources.limits[hugepages-2Mi]": "5121Mi"},
     f"{CONTAINER}.resources.limits[hugepages-2Mi]", {f"{CONTAINER}.resources.requests[hugepages-2Mi]": "5122Mi",
                                                      f"{CONTAINER}.resources.limits[hugepages-2Mi]": "5122Mi"}),
    ("KT613", PYTORCHJOB, {f"{CONTAINER}.resources.requests[nvidia.com/gpu]": "4"},
     f"{CONTAINER}.resources.requests[nvidia.com/gpu]", {}),
    ("KT613", PYTORCHJOB, {f"{CONTAINER}.resources.limits[vpc.amazonaws.com/efa]": DELETE},
     f"{CONTAINER}.resources.limits[vpc.amazonaws.com/efa]", {}),
    ("KT613", PYTORCHJOB, {f"{CONTAINER}.resources.requests[nvidia.com/gpu]": "7.5",
                           f"{CONTAINER}.resources.limits[nvidia.com/gpu]": "7.5"},
     f"{CONTAINER}.resources.requests[nvidia.com/gpu]", {}),
    ("KT613", TINY, {f"{CONTAINER}.resources.limits[cpu]": "1"}, f"{CONTAINER}.resources.requests[cpu]",
     {f"{CONTAINER}.resources.limits[cpu]": "2"}),
    ("KT613", TINY, {f"{CONTAINER}.resources": {"limits": {"hugepages-2Mi": "2Mi"}}}, f"{CONTAINER}.resources",
     {f"{CONTAINER}.resources": {"limits": {"hugepages-2Mi": "2Mi", "memory": "1Gi"}}}),
    ("KT613", TINY, {f"{CONTAINER}.resources.limits[gpu]": "1"}, f"{CONTAINER}.resources.limits[gpu]",
     {f"{CONTAINER}.resources.limits[example.com/gpu]": "1", f"{CONTAINER}.resources.requests[example.com/gpu]": "1"}),
    # -- KT614 ports
    ("KT614", PYTORCHJOB, HOST_NETWORK_METRICS, f"{CONTAINER}.ports",
     {**HOST_NETWORK_METRICS, f"{CONTAINER}.ports[0].containerPort": 9400}),
    ("KT614", TINY, {f"{CONTAINER}.ports[0].name": "prometheus-metrics"}, f"{CONTAINER}.ports[0].name",
     {f"{CONTAINER}.ports[0].name": "prom-metrics"}),
    ("KT614", TINY, {f"{CONTAINER}.ports": [{"name": "metrics", "containerPort": 9400},
                                             {"name": "metrics", "containerPort": 9401}]},
     f"{CONTAINER}.ports[1].name", {f"{CONTAINER}.ports": [{"name": "metrics", "containerPort": 9400},
                                                         {"name": "metrics-1", "containerPort": 9401}]}),
    ("KT614", TINY, {f"{CONTAINER}.ports[0].containerPort": 70000}, f"{CONTAINER}.ports[0].containerPort", {}),
    ("KT614", INDEXED, {f"{JOB_POD}.hostNetwork": True, f"{JOB_CONTAINER}.ports": [
        {"name": "metrics", "containerPort": 9400, "hostPort": 9500}]}, f"{JOB_CONTAINER}.ports[0].hostPort",
     {f"{JOB_POD}.hostNetwork": True, f"{JOB_CONTAINER}.ports": [
         {"name": "metrics", "containerPort": 9400, "hostPort": 9400}]}),
    ("KT614", INDEXED, {f"{JOB_POD}.containers[1]": {"name": "sidecar", "image": "busybox:1", "ports": [
        {"containerPort": 80, "hostPort": 8080}]}, f"{JOB_CONTAINER}.ports": [{"containerPort": 81, "hostPort": 8080}]},
     f"{JOB_POD}.containers[1].ports[0].hostPort",
     {f"{JOB_POD}.containers[1]": {"name": "sidecar", "image": "busybox:1", "ports": [
         {"containerPort": 80, "hostPort": 8080, "protocol": "UDP"}]},
      f"{JOB_CONTAINER}.ports": [{"containerPort": 81, "hostPort": 8080}]}),
    # -- KT615 volumes and mounts
    ("KT615", TINY, {f"{CONTAINER}.volumeMounts[0].name": "no-such-volume"}, f"{CONTAINER}.volumeMounts[0].name", {}),
    ("KT615", TINY, {f"{CONTAINER}.volumeMounts[1].mountPath": "/etc/kubetrain"},
     f"{CONTAINER}.volumeMounts[1].mountPath", {f"{CONTAINER}.volumeMounts[1].mountPath": "/etc/kubetrain/shm"}),
    ("KT615", TINY, {f"{MASTER}.spec.volumes[1].name": "kubetrain-config"}, f"{MASTER}.spec.volumes[1].name", {}),
    ("KT615", TINY, {f"{MASTER}.spec.volumes[1].configMap": {"name": "x"}}, f"{MASTER}.spec.volumes[1].configMap",
     {}),
    ("KT615", TINY, {f"{CONTAINER}.volumeMounts[2].subPath": "../other-run"}, f"{CONTAINER}.volumeMounts[2].subPath",
     {f"{CONTAINER}.volumeMounts[2].subPath": "runs/tiny"}),
    ("KT615", TINY, {f"{CONTAINER}.volumeMounts[2].subPath": "/abs"}, f"{CONTAINER}.volumeMounts[2].subPath", {}),
    # -- KT616 environment
    ("KT616", TINY, {f"{CONTAINER}.env[0].name": "A=B"}, f"{CONTAINER}.env[0].name",
     {f"{CONTAINER}.env[0].name": "A B"}),
    ("KT616", TINY, {f"{CONTAINER}.env[0].valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
     f"{CONTAINER}.env[0].valueFrom", {f"{CONTAINER}.env[0]": {"name": "X", "valueFrom": {
         "fieldRef": {"fieldPath": "spec.nodeName"}}}}),
    ("KT616", TINY, {f"{CONTAINER}.env[0]": {"name": "X", "valueFrom": {
        "fieldRef": {"fieldPath": "spec.nodeName"}, "secretKeyRef": {"name": "s", "key": "k"}}}},
     f"{CONTAINER}.env[0].valueFrom", {}),
    ("KT616", TINY, {f"{CONTAINER}.env[0]": {"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "spec.node"}}}},
     f"{CONTAINER}.env[0].valueFrom.fieldRef.fieldPath",
     {f"{CONTAINER}.env[0]": {"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['team']"}}}}),
    ("KT616", TINY, {f"{CONTAINER}.env[0]": {"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "a/b"}}}},
     f"{CONTAINER}.env[0].valueFrom.secretKeyRef.key", {}),
    # -- KT617 containers and pod fields
    ("KT617", INDEXED, {f"{JOB_POD}.containers[1]": {"name": "trainer", "image": "busybox:1"}},
     f"{JOB_POD}.containers[1].name", {f"{JOB_POD}.containers[1]": {"name": "sidecar", "image": "busybox:1"}}),
    ("KT617", INDEXED, {f"{JOB_CONTAINER}.livenessProbe": {"tcpSocket": {"port": 29500}, "successThreshold": 2}},
     f"{JOB_CONTAINER}.livenessProbe.successThreshold",
     {f"{JOB_CONTAINER}.livenessProbe": {"tcpSocket": {"port": 29500}}}),
    ("KT617", INDEXED, {f"{JOB_CONTAINER}.readinessProbe": {"tcpSocket": {"port": "rendezvous-port-0"}}},
     f"{JOB_CONTAINER}.readinessProbe.tcpSocket.port",
     {f"{JOB_CONTAINER}.readinessProbe": {"tcpSocket": {"port": "rendezvous"}}}),
    ("KT617", INDEXED, {f"{JOB_CONTAINER}.readinessProbe": {"tcpSocket": {"port": 80}, "exec": {"command": ["x"]}}},
     f"{JOB_CONTAINER}.readinessProbe.tcpSocket", {}),
    ("KT617", INDEXED, {f"{JOB_POD}.dnsPolicy": "None"}, f"{JOB_POD}.dnsConfig.nameservers",
     {f"{JOB_POD}.dnsPolicy": "None", f"{JOB_POD}.dnsConfig": {"nameservers": ["10.0.0.10"]}}),
    ("KT617", INDEXED, {f"{JOB_POD}.priorityClassName": "Training"}, f"{JOB_POD}.priorityClassName",
     {f"{JOB_POD}.priorityClassName": "training"}),
    ("KT617", INDEXED, {f"{JOB_CONTAINER}.securityContext": {"allowPrivilegeEscalation": False, "privileged": True}},
     f"{JOB_CONTAINER}.securityContext", {}),
    # -- KT618 batch Jobs
    ("KT618", INDEXED, {"spec.template.metadata.labels[batch.kubernetes.io/job-name]": "other"},
     "spec.template.metadata.labels[batch.kubernetes.io/job-name]",
     {"spec.template.metadata.labels[batch.kubernetes.io/job-name]": INDEXED["metadata"]["name"]}),
    ("KT618", INDEXED, {"spec.template.metadata.labels[job-name]": "tiny-gpt-indexed"},
     "spec.template.metadata.labels[job-name]", {}),
    ("KT618", INDEXED, {"spec.template.metadata.labels[controller-uid]": "1234"},
     "spec.template.metadata.labels[controller-uid]", {}),
    ("KT618", INDEXED, {"spec.selector": {"matchLabels": {"kubetrain.dev/job": "tiny-gpt-indexed"}}},
     "spec.selector", {"spec.selector": {"matchLabels": {"kubetrain.dev/job": "tiny-gpt-indexed"}},
                       "spec.manualSelector": True}),
    ("KT618", INDEXED, {"spec.completions": DELETE}, "spec.completions", {}),
    ("KT618", INDEXED, {"spec.completionMode": "NonIndexed", "spec.successPolicy": DELETE},
     "spec.backoffLimitPerIndex", {"spec.completionMode": "NonIndexed", "spec.successPolicy": DELETE,
                                   "spec.backoffLimitPerIndex": DELETE, "spec.maxFailedIndexes": DELETE}),
    ("KT618", INDEXED, {"spec.podFailurePolicy.rules[0].onExitCodes.values": [3, 2]},
     "spec.podFailurePolicy.rules[0].onExitCodes.values",
     {"spec.podFailurePolicy.rules[0].onExitCodes.values": [2, 3]}),
    ("KT618", INDEXED, {"spec.podFailurePolicy.rules[0].onExitCodes.values": [0, 2]},
     "spec.podFailurePolicy.rules[0].onExitCodes.values[0]", {}),
    ("KT618", INDEXED, {"spec.podFailurePolicy.rules[0].onExitCodes.containerName": "pytorch"},
     "spec.podFailurePolicy.rules[0].onExitCodes.containerName", {}),
    ("KT618", INDEXED, {f"{JOB_POD}.restartPolicy": "OnFailure"}, f"{JOB_POD}.restartPolicy",
     {f"{JOB_POD}.restartPolicy": "OnFailure", "spec.podFailurePolicy": DELETE}),
    ("KT618", INDEXED, {f"{JOB_POD}.restartPolicy": DELETE}, f"{JOB_POD}.restartPolicy", {}),
    ("KT618", INDEXED, {"spec.successPolicy.rules[0].succeededIndexes": "2"},
     "spec.successPolicy.rules[0].succeededIndexes", {"spec.successPolicy.rules[0].succeededIndexes": "0-1"}),
    ("KT618", INDEXED, {"spec.maxFailedIndexes": 3}, "spec.maxFailedIndexes", {"spec.maxFailedIndexes": 2}),
    # -- KT619 Services
    ("KT619", SERVICE, {"spec.ports[1]": {"port": 9400}}, "spec.ports[1].name",
     {"spec.ports[1]": {"name": "metrics", "port": 9400}}),
    ("KT619", SERVICE, {"spec.ports[1]": {"name": "rendezvous", "port": 9400}}, "spec.ports[1].name", {}),
    ("KT619", SERVICE, {"spec.ports[0].targetPort": "rendezvous-port-0"}, "spec.ports[0].targetPort",
     {"spec.ports[0].targetPort": "rendezvous"}),
    ("KT619", SERVICE, {"spec.ports[1]": {"name": "again", "port": 29500}}, "spec.ports[1]", {}),
    ("KT619", SERVICE, {"spec.selector[batch.kubernetes.io/job-name]": "-bad-"},
     "spec.selector[batch.kubernetes.io/job-name]", {}),
    ("KT619", SERVICE, {"spec.type": "LoadBalancer"}, "spec.clusterIP",
     {"spec.type": "LoadBalancer", "spec.clusterIP": DELETE, "spec.allocateLoadBalancerNodePorts": True}),
    # -- KT620 names operators and controllers derive
    ("KT620", {**TINY, "metadata": {**TINY["metadata"], "name": "j" * 55}}, {}, "metadata.name",
     {"metadata.name": "j" * 54}),
    ("KT620", MPIJOB, {"metadata.name": "n" * 55}, "metadata.name", {"metadata.name": "n" * 54}),
    ("KT620", INDEXED, {"metadata.name": "i" * 62}, "metadata.name", {"metadata.name": "i" * 61}),
    ("KT620", {**INDEXED, "spec": {**INDEXED["spec"], "completionMode": "NonIndexed", "successPolicy": None}},
     {"metadata.name": "i" * 64, "spec.successPolicy": DELETE, "spec.backoffLimitPerIndex": DELETE,
      "spec.maxFailedIndexes": DELETE}, "metadata.name",
     {"metadata.name": "i" * 63, "spec.successPolicy": DELETE, "spec.backoffLimitPerIndex": DELETE,
      "spec.maxFailedIndexes": DELETE}),
    # -- KT621 DaemonSet (and the other pod controllers)
    ("KT621", DAEMONSET, {"spec.selector.matchLabels[app.kubernetes.io/name]": "other"},
     "spec.template.metadata.labels", {}),
    ("KT621", DAEMONSET, {"spec.selector": {}}, "spec.selector", {}),
    ("KT621", DAEMONSET, {"spec.template.spec.restartPolicy": "Never"}, "spec.template.spec.restartPolicy",
     {"spec.template.spec.restartPolicy": "Always"}),
    ("KT621", DAEMONSET, {"spec.updateStrategy.rollingUpdate": {"maxUnavailable": 0, "maxSurge": 0}},
     "spec.updateStrategy.rollingUpdate.maxUnavailable",
     {"spec.updateStrategy.rollingUpdate": {"maxUnavailable": "10%", "maxSurge": 0}}),
    # -- KT622 storage
    ("KT622", PV, {"spec.capacity[storage]": "0"}, "spec.capacity[storage]", {"spec.capacity[storage]": "1200Gi"}),
    ("KT622", PV, {"spec.accessModes": ["ReadWriteOncePod", "ReadWriteMany"]}, "spec.accessModes",
     {"spec.accessModes": ["ReadWriteOncePod"]}),
    ("KT622", PV, {"spec.csi.driver": "fsx." + "x" * 64 + ".com"}, "spec.csi.driver", {}),
    ("KT622", PV, {"spec.nfs": {"server": "a", "path": "/x"}}, "spec.nfs", {}),
    ("KT622", PVC, {"spec.resources.requests[storage]": "0"}, "spec.resources.requests[storage]", {}),
    ("KT622", STORAGE_CLASS, {"reclaimPolicy": "Recycle"}, "reclaimPolicy", {"reclaimPolicy": "Delete"}),
    ("KT622", STORAGE_CLASS, {"provisioner": "fsx csi"}, "provisioner", {}),
    # -- KT623 ConfigMap data
    ("KT623", CONFIG_MAP, {"data[run/yaml]": "x"}, "data[run/yaml]", {"data[run.yaml2]": "x"}),
    ("KT623", CONFIG_MAP, {"data[big]": "x" * (1024 * 1024)}, "data", {"data[big]": "x" * (1000 * 1024)}),
    ("KT623", CONFIG_MAP, {"binaryData": {"run.yaml": "eA=="}}, "binaryData[run.yaml]",
     {"binaryData": {"run.bin": "eA=="}}),
    # -- KT624 PriorityClass, Namespace
    ("KT624", PRIORITY_CLASS, {"value": 2_000_000_000}, "value", {"value": 1_000_000_000}),
    ("KT624", PRIORITY_CLASS, {"metadata.name": "system-training"}, "metadata.name", {}),
    ("KT624", NAMESPACE, {"spec": {"finalizers": ["cleanup"]}}, "spec.finalizers[0]",
     {"spec": {"finalizers": ["example.com/cleanup"]}}),
    # -- KT625 operators' admission webhooks
    ("KT625", TINY, {f"{CONTAINER}.name": "trainer"}, f"{MASTER}.spec.containers", {}),
    ("KT625", TINY, {"spec.pytorchReplicaSpecs.Master.replicas": 2}, "spec.pytorchReplicaSpecs.Master.replicas", {}),
    # -- KT626-KT632: what Kubernetes' own validation tests found missing
    ("KT626", INDEXED, {f"{JOB_CONTAINER}.readinessProbe": {"httpGet": {"port": 29500, "httpHeaders": [
        {"name": "X_Token", "value": "x"}]}}}, f"{JOB_CONTAINER}.readinessProbe.httpGet.httpHeaders[0].name",
     {f"{JOB_CONTAINER}.readinessProbe": {"httpGet": {"port": 29500, "httpHeaders": [
         {"name": "X-Token", "value": "x"}]}}}),
    ("KT626", INDEXED, {f"{JOB_CONTAINER}.lifecycle": {"preStop": {"httpGet": {"port": 29500, "httpHeaders": [
        {"name": "", "value": "x"}]}}}}, f"{JOB_CONTAINER}.lifecycle.preStop.httpGet.httpHeaders[0].name", {}),
    ("KT627", INDEXED, {f"{JOB_POD}.shareProcessNamespace": True, f"{JOB_POD}.hostPID": True},
     f"{JOB_POD}.shareProcessNamespace", {f"{JOB_POD}.shareProcessNamespace": True}),
    ("KT628", INDEXED, {NEW_VOLUME: {"name": "secrets", "csi": {"driver": "secrets-store.csi.k8s.io",
                                                                "nodePublishSecretRef": {}}}},
     f"{NEW_VOLUME}.csi.nodePublishSecretRef.name",
     {NEW_VOLUME: {"name": "secrets", "csi": {"driver": "secrets-store.csi.k8s.io",
                                              "nodePublishSecretRef": {"name": "vault-creds"}}}}),
    ("KT629", SECRET, {"data[.dockerconfigjson]": base64.b64encode(b"auths: {}").decode()}, "data[.dockerconfigjson]",
     {"data": {}, "stringData": {".dockerconfigjson": '{"auths": {}}'}}),
    ("KT629", SECRET, {"type": "kubernetes.io/tls"}, "data[tls.crt]",
     {"type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}}),
    ("KT630", INDEXED, {NEW_VOLUME: {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {
        "spec": {"resources": {"requests": {"storage": "100Gi"}}}}}}},
     f"{NEW_VOLUME}.ephemeral.volumeClaimTemplate.spec.accessModes",
     {NEW_VOLUME: {"name": "scratch", "ephemeral": {"volumeClaimTemplate": SCRATCH_CLAIM}}}),
    ("KT630", INDEXED, {NEW_VOLUME: {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {
        "spec": {"accessModes": ["ReadWriteOnce"]}}}}},
     f"{NEW_VOLUME}.ephemeral.volumeClaimTemplate.spec.resources.requests[storage]", {}),
    ("KT631", TINY, {f"{CONTAINER}.env[0]": {"name": "MEMORY_KIB", "valueFrom": {
        "resourceFieldRef": {"resource": "limits.memory", "divisor": "1024"}}}},
     f"{CONTAINER}.env[0].valueFrom.resourceFieldRef.divisor",
     {f"{CONTAINER}.env[0]": {"name": "MEMORY_KIB", "valueFrom": {
         "resourceFieldRef": {"resource": "limits.memory", "divisor": "1Ki"}}}}),
    ("KT632", INDEXED, {f"{JOB_CONTAINER}.securityContext": {"appArmorProfile": {"type": "Localhost"}}},
     f"{JOB_CONTAINER}.securityContext.appArmorProfile.localhostProfile",
     {f"{JOB_CONTAINER}.securityContext": {"appArmorProfile": {"type": "Localhost", "localhostProfile": "train"}}}),
    ("KT632", INDEXED, {APPARMOR_ANNOTATION: "localhost/"}, APPARMOR_ANNOTATION,
     {APPARMOR_ANNOTATION: "localhost/train"}),
]


@pytest.mark.parametrize(("code", "base", "breaking", "path", "passing"), CASES,
                         ids=[f"{case[0]}-{i}" for i, case in enumerate(CASES)])
def test_output_check_breaks_and_passes(code, base, breaking, path, passing):
    broken = at(base, breaking)
    assert (code, path) in codes_and_paths(broken), findings(broken)
    fixed = at(base, passing) if passing else base
    assert findings(fixed) == []


def test_every_output_rule_has_a_case():
    from kubetrain.rules.catalog import every_rule

    rules = {rule.code for rule in every_rule() if "KT610" <= rule.code <= "KT649"}
    assert rules == {case[0] for case in CASES}


def test_every_object_of_the_example_fleet_passes():
    manifests = [Manifest(str(p), yaml.safe_load(p.read_text()), p.parent)
                 for p in sorted((ROOT / "dist").rglob("*.yaml"))]
    assert [f.format() for f in validate_objects(manifests, Schemas())] == []


# -- what operators create, with their names and labels --------------------------------------------------

def test_trainjob_names_come_from_the_jobset_and_its_runtime():
    name = "t" * 45  # <name>-node-0-1-<5 characters> is 60: within a DNS-1035 label
    assert findings(at(TRAINJOB, {"metadata.name": name}), RUNTIME) == []
    too_long = "t" * 50
    (problem,) = findings(at(TRAINJOB, {"metadata.name": too_long}), RUNTIME)
    assert problem[:2] == ("KT620", "metadata.name") and f"{too_long}-node-0-1-abcde" in problem[2]
    # More nodes, more digits: the runtime is read beside the job; numNodes comes from the TrainJob.
    assert findings(at(TRAINJOB, {"metadata.name": "t" * 48}), RUNTIME) == []
    more = at(TRAINJOB, {"metadata.name": "t" * 48, "spec.trainer.numNodes": 100})
    assert [p[:2] for p in findings(more, RUNTIME)] == [("KT620", "metadata.name")]


def test_a_trainingruntime_pod_is_checked_as_the_pod_of_each_trainjob():
    pod = "spec.template.spec.replicatedJobs[0].template.spec.template"
    broken = at(RUNTIME, {f"{pod}.spec.tolerations": [{"operator": "Equal"}],
                          f"{pod}.metadata.labels[batch.kubernetes.io/job-name]": "x"})
    found = findings(broken)
    assert ("KT611", f"{pod}.spec.tolerations[0].operator") in {f[:2] for f in found}
    assert ("KT618", f"{pod}.metadata.labels[batch.kubernetes.io/job-name]") in {f[:2] for f in found}
    # The Trainer adds containerPort 29500 to container node: with hostNetwork another container's 29500 collides.
    clash = at(RUNTIME, {f"{pod}.spec.hostNetwork": True, f"{pod}.spec.dnsPolicy": "ClusterFirstWithHostNet",
                         f"{pod}.spec.containers[1]": {"name": "sidecar", "image": "busybox:1",
                                                       "ports": [{"containerPort": 29500}]}})
    assert ("KT614", f"{pod}.spec.containers[1].ports[0].hostPort") in {f[:2] for f in findings(clash)}


def test_a_trainjobs_own_overrides_are_checked_in_the_pods_of_its_runtime():
    # spec.trainer's env, resourcesPerNode, image, command and args change container node of the runtime's pods:
    # a problem they bring is the TrainJob's, at its own field; the runtime's fields stay the runtime's.
    env = [{"name": "NCCL_DEBUG", "value": "INFO"}, {"name": "A=B", "value": "1"}]
    broken = at(TRAINJOB, {"spec.trainer.env": env,
                           "spec.trainer.resourcesPerNode": {"limits": {"nvidia.com/gpu": "1.5"}}})
    found = {f[:2] for f in findings(broken, RUNTIME)}
    assert found == {("KT616", "spec.trainer.env[1].name"),
                     ("KT613", "spec.trainer.resourcesPerNode.limits[nvidia.com/gpu]")}, found
    fixed = at(TRAINJOB, {"spec.trainer.env": env[:1], "spec.trainer.resourcesPerNode": {"limits": {
        "nvidia.com/gpu": "1", "cpu": "2", "memory": "4Gi"}}, "spec.trainer.image": "ghcr.io/org/img:2"})
    assert findings(fixed, RUNTIME) == []
    # The Trainer's torch plugin injects PET_* itself and refuses a TrainJob setting them.
    reserved = at(TRAINJOB, {"spec.trainer.env": [{"name": "PET_NNODES", "value": "4"}]})
    assert ("KT625", "spec.trainer.env[0].name") in {f[:2] for f in findings(reserved, RUNTIME)}


def test_mpijob_launcher_and_workers_are_checked_with_the_operators_volumes_and_names():
    launcher, worker = "spec.mpiReplicaSpecs.Launcher.template", "spec.mpiReplicaSpecs.Worker.template"
    # The operator mounts its SSH Secret as volume ssh-auth: a volume of that name in the template is a duplicate.
    clash = at(MPIJOB, {f"{worker}.spec.volumes[1]": {"name": "ssh-auth", "emptyDir": {}}})
    (problem,) = findings(clash)
    assert problem[:2] == ("KT615", f"{worker}.spec.volumes") and "the MPI operator adds [2]" in problem[2]
    clash = at(MPIJOB, {f"{launcher}.spec.volumes": [{"name": "mpi-job-config", "emptyDir": {}}]})
    assert ("KT615", f"{launcher}.spec.volumes") in {f[:2] for f in findings(clash)}
    mounts = at(MPIJOB, {f"{worker}.spec.containers[0].volumeMounts[1]": {"name": "shm", "mountPath": "/root/.ssh"}})
    assert ("KT615", f"{worker}.spec.containers[0].volumeMounts") in {f[:2] for f in findings(mounts)}
    # The launcher is a batch Job named <job>-launcher: a job-name label of its pods must be that name.
    (problem,) = findings(at(MPIJOB, {"metadata.name": "m" * 55}))
    assert problem[:2] == ("KT620", "metadata.name") and "m" * 55 + "-launcher" in problem[2]


def test_operator_pod_messages_name_the_pod_the_operator_creates():
    (problem,) = findings(at(PYTORCHJOB, HOST_NETWORK_METRICS))
    assert problem[0] == "KT614"
    assert f"Pod {PYTORCHJOB['metadata']['name']}-master-0 that the training operator creates" in problem[2]
    assert "TCP//23456" in problem[2]


def test_environment_names_follow_the_clusters_version():
    relaxed = at(TINY, {f"{CONTAINER}.env[0].name": "1 RUN CONFIG"})
    assert findings(relaxed, version="1.33") == []
    assert ("KT616", f"{CONTAINER}.env[0].name") in codes_and_paths(relaxed, version="1.31")


def test_a_malformed_object_is_left_to_the_schema_check():
    broken = at(TINY, {f"{MASTER}.spec.containers": "not a list"})
    assert {code for code, _, _ in findings(broken)} == {"KT602"}


# -- the backstop on the synth path and in `kubetrain validate`, and the input in front of it -----------

def broken_cases() -> list[tuple[str, str, dict[str, Any]]]:
    """(code, path, broken object) of every case, each object with a name of its own (unless the case is its name)."""
    cases = []
    for i, (code, base, breaking, path, _) in enumerate(CASES):
        broken = at(base, breaking)
        if "name" not in broken["metadata"]:
            continue  # a file needs a name (the generateName case is in the table)
        if "metadata.name" not in breaking and code != "KT620":
            broken["metadata"]["name"] = f"{broken['metadata']['name'][:40]}-{i}"
        cases.append((code, path, broken))
    return cases


def test_synth_refuses_every_broken_object_with_its_code_and_path(tmp_path):
    from kubetrain import App, Cluster
    from kubetrain.pipeline import synth

    from kubetrain_runtime.problems import ConfigError

    app = App()
    cluster = Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"])
    for i, (_, _, broken) in enumerate(broken_cases()):
        cluster.add_object(broken)  # a raw object of the fleet, as plain data
    with pytest.raises(ConfigError) as raised:
        synth(app, tmp_path / "dist")
    problems = {(p.code, p.message.split(": ")[1], p.message.split(": ")[2]) for p in raised.value.problems}
    for code, path, broken in broken_cases():
        assert (code, f"{broken['kind']}/{broken['metadata']['name']}", path) in problems, (code, path)
    assert all(p.fix for p in raised.value.problems) and not (tmp_path / "dist").exists()


@pytest.mark.processes
def test_kubetrain_validate_reports_every_broken_object_with_its_code_and_path(tmp_path):
    for i, (_, _, broken) in enumerate(broken_cases()):
        (tmp_path / f"{i}.yaml").write_text(yaml.safe_dump(broken))
    result = kubetrain("validate", str(tmp_path), "--kubernetes-version", "1.33")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    lines = result.stdout.splitlines()
    for i, (code, path, broken) in enumerate(broken_cases()):
        start = f"{tmp_path / f'{i}.yaml'}: {broken['kind']}/{broken['metadata']['name']}: {path}: "
        assert any(line.startswith(start) and line.endswith(f"[{code}]") for line in lines), (start, code)


def test_a_job_patch_is_checked_as_the_pods_the_operator_creates(tmp_path):
    from cdk8s import JsonPatch
    from kubetrain import (
        App,
        Cluster,
        NodeResources,
        PyTorchJob,
        RunConfig,
        Trainer,
        TrainingJob,
        TrainingJobProps,
    )
    from kubetrain.pipeline import synth

    from kubetrain_runtime.problems import ConfigError

    app = App()
    cluster = Cluster(app, "dev", kubernetes_version="1.33", namespaces=["ml"])
    run = RunConfig.model_validate({"batch": {"global_size": 4, "micro_size": 1}, "max_steps": 1,
                                    "checkpoint": {"dir": "/ckpt/run"}})
    job = TrainingJob(cluster, "tiny", TrainingJobProps(
        name="tiny", image="img:1", nodes=2, procs_per_node=1, resources=NodeResources(cpu="1", memory="2Gi"),
        volumes=[{"name": "ckpt", "claim": "ckpt", "mount_path": "/ckpt"}], workload=Trainer(run=run),
        target=PyTorchJob()))
    job.patch(JsonPatch.add("/spec/pytorchReplicaSpecs/Worker/template/spec/tolerations",
                            [{"key": "nvidia.com/gpu", "operator": "Exists", "value": "true"}]))
    with pytest.raises(ConfigError) as raised:
        synth(app, tmp_path / "dist")
    (line,) = raised.value.lines()
    assert line.startswith("synth: dev/ml/PyTorchJob.tiny.yaml: PyTorchJob/tiny: spec.pytorchReplicaSpecs.Worker."
                           "template.spec.tolerations[0].operator: value 'true' must be empty when operator is Exists "
                           "(in the Pod tiny-worker-0 that the training operator creates) [KT611] fix: ")


def test_a_job_patch_of_a_trainjob_is_checked_in_the_pods_of_its_runtime(tmp_path):
    from cdk8s import JsonPatch
    from kubetrain import App, Cluster, NodeResources, RunConfig, Trainer, TrainingJob
    from kubetrain.pipeline import synth

    from kubetrain_runtime.problems import ConfigError

    app = App()
    cluster = Cluster(app, "dev", kubernetes_version="1.33", namespaces=["ml"])
    run = RunConfig.model_validate({"batch": {"global_size": 4, "micro_size": 1}, "max_steps": 1,
                                    "checkpoint": {"dir": "/ckpt/run"}})
    job = TrainingJob(cluster, "tiny", name="tiny", image="img:1", nodes=2, procs_per_node=1,  # the TrainJob target
                      resources=NodeResources(cpu="1", memory="2Gi"), workload=Trainer(run=run),
                      volumes=[{"name": "ckpt", "claim": "ckpt", "mount_path": "/ckpt"}])
    job.patch(JsonPatch.add("/spec/trainer/resourcesPerNode", {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}))
    with pytest.raises(ConfigError) as raised:
        synth(app, tmp_path / "dist")
    (line,) = raised.value.lines()
    assert line.startswith("synth: dev/ml/TrainJob.tiny.yaml: TrainJob/tiny: spec.trainer.resourcesPerNode.requests"
                           "[cpu]: "), line
    assert "(in the Job tiny-node-0 that JobSet creates) [KT613]" in line


def test_input_the_api_server_would_refuse_emits_nothing():
    from kubetrain import App, Cluster, RunConfig, Trainer, TrainingJob
    from kubetrain.pipeline import render_objects

    app = App()
    cluster = Cluster(app, "dev", kubernetes_version="1.33", namespaces=["ml"])
    run = RunConfig.model_validate({"batch": {"global_size": 4, "micro_size": 1}, "max_steps": 1,
                                    "checkpoint": {"dir": "/ckpt/run"}})
    common = {"image": "img:1", "nodes": 2, "procs_per_node": 1, "workload": Trainer(run=run),
              "volumes": [{"name": "ckpt", "claim": "ckpt", "mount_path": "/ckpt"}]}
    resources = {"cpu": "1", "memory": "8Gi"}
    TrainingJob(cluster, "tolerates", **common, resources=resources,
                pod={"tolerations": [{"key": "a", "operator": "Exists", "value": "x"}]})
    TrainingJob(cluster, "pages", **common, resources={**resources, "hugepages_2mi": "3Mi"})
    TrainingJob(cluster, "labelled", **common, resources=resources, pod={"labels": {"kubetrain.dev/job": "x"}})
    assert sorted(f.problem.code for f in fleet_errors(app)) == ["KT130", "KT132", "KT134"]
    assert [path.name for path in render_objects(app)] == ["Namespace.ml.yaml"]


@pytest.mark.parametrize(("resource", "divisor", "accepted"), [
    ("limits.cpu", "1m", True), ("limits.cpu", "1000m", True), ("requests.cpu", "0.001", True),
    ("limits.cpu", "1k", False), ("limits.memory", "1Mi", True), ("limits.memory", "1024Ki", True),
    ("limits.memory", "1000", True), ("limits.memory", "1024", False), ("limits.memory", "1e3", False),
    ("requests.ephemeral-storage", "1Gi", True), ("limits.hugepages-2Mi", "1m", False), ("limits.memory", "0", True)])
def test_a_resource_field_divisor_is_compared_in_its_canonical_form(resource, divisor, accepted):
    """The API server compares the divisor's canonical text with the resource's units: 1000m is 1 and 1024Ki is 1Mi,
    but 1024 stays 1024 and 1e3 stays 1e3 (an exponent quantity keeps its form)."""
    broken = at(TINY, {f"{CONTAINER}.env[0]": {"name": "AMOUNT", "valueFrom": {
        "resourceFieldRef": {"resource": resource, "divisor": divisor}}}})
    found = ("KT631", f"{CONTAINER}.env[0].valueFrom.resourceFieldRef.divisor") in codes_and_paths(broken)
    assert found is not accepted
