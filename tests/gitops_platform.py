"""Objects of the kinds kubetrain is about to emit (platform, queues, other run kinds), strictly valid
against their schemas, for the GitOps tests: they put every wave and every reference on the page."""

from __future__ import annotations

from typing import Any

NAMESPACE = "ml-dev"
LABELS = {"app.kubernetes.io/managed-by": "kubetrain", "kubetrain.dev/cluster": "dev"}


def _meta(name: str, namespace: str | None = None, **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {**LABELS, **labels}}
    if namespace:
        meta["namespace"] = namespace
    return meta


def _pod(image: str = "ghcr.io/kubetrain/kubetrain:0.1.0") -> dict[str, Any]:
    return {"containers": [{"name": "node", "image": image}], "restartPolicy": "Never"}


def platform_objects() -> list[dict[str, Any]]:
    queue = {"kueue.x-k8s.io/queue-name": "training"}
    return [
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": _meta("fsx"),
         "provisioner": "fsx.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer"},
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": _meta("fsx-static"),
         "spec": {"capacity": {"storage": "1200Gi"}, "accessModes": ["ReadWriteMany"], "storageClassName": "fsx",
                  "csi": {"driver": "fsx.csi.aws.com", "volumeHandle": "fs-0123456789abcdef0",
                          "volumeAttributes": {"dnsname": "fs-01234567.fsx.us-east-1.amazonaws.com",
                                               "mountname": "abcdefgh"}}}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": _meta("fsx-static", NAMESPACE),
         "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "fsx", "volumeName": "fsx-static",
                  "resources": {"requests": {"storage": "1200Gi"}}}},
        {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": _meta("gpu"),
         "spec": {"role": "KarpenterNodeRole", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                  "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "dev"}}],
                  "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "dev"}}]}},
        {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": _meta("gpu"),
         "spec": {"template": {"spec": {
             "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"},
             "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                               "values": ["p5.48xlarge"]}]}},
                  "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "10m"}}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": _meta("efa"),
         "spec": {"levels": [{"nodeLabel": "topology.k8s.aws/network-node-layer-1"},
                             {"nodeLabel": "kubernetes.io/hostname"}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": _meta("p5"),
         "spec": {"nodeLabels": {"node.kubernetes.io/instance-type": "p5.48xlarge"}, "topologyName": "efa"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": _meta("training"),
         "spec": {"namespaceSelector": {}, "resourceGroups": [{
             "coveredResources": ["nvidia.com/gpu"],
             "flavors": [{"name": "p5", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 16}]}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": _meta("training", NAMESPACE),
         "spec": {"clusterQueue": "training"}},
        {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
         "metadata": _meta("torch-distributed"),
         "spec": {"mlPolicy": {"numNodes": 1, "torch": {}},
                  "template": {"spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {
                      "template": {"spec": _pod()}}}}]}}}},
        {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
         "metadata": _meta("llama", NAMESPACE, **{"kubetrain.dev/job": "llama"}, **queue),
         "spec": {"runtimeRef": {"name": "torch-distributed"},
                  "trainer": {"image": "ghcr.io/kubetrain/kubetrain:0.1.0", "numNodes": 2,
                              "resourcesPerNode": {"limits": {"nvidia.com/gpu": "8"}}}}},
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": _meta("nccl-tests", NAMESPACE, **queue),
         "spec": {"completionMode": "Indexed", "completions": 2, "parallelism": 2,
                  "template": {"spec": {**_pod(), "volumes": [
                      {"name": "fsx", "persistentVolumeClaim": {"claimName": "fsx-static"}}]}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": _meta("nccl-tests", NAMESPACE),
         "spec": {"clusterIP": "None", "selector": {"job-name": "nccl-tests"}}},
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": _meta("research"),
         "spec": {"weight": 1}},
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": _meta("sweep", NAMESPACE),
         "spec": {"minMember": 2, "queue": "research"}},
        {"apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor", "metadata": _meta("training", NAMESPACE),
         "spec": {"selector": {"matchLabels": {"app.kubernetes.io/managed-by": "kubetrain"}},
                  "podMetricsEndpoints": [{"port": "metrics"}]}},
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": _meta("dcgm-exporter", NAMESPACE),
         "spec": {"selector": {"matchLabels": {"app": "dcgm-exporter"}},
                  "template": {"metadata": {"labels": {"app": "dcgm-exporter"}},
                               "spec": {"containers": [{"name": "exporter",
                                                        "image": "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3"}]}}}},
    ]
