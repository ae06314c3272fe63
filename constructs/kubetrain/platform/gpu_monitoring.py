"""Monitoring: NVIDIA's DCGM exporter on the GPU pools, and a PodMonitor for the training pods.

    DcgmExporter(cluster, "dcgm-exporter", pools=[p5])   # namespace gpu-monitoring, labelled privileged
    TrainingPodMonitor(cluster, "training", namespace="ml")

The DCGM exporter maps GPU metrics to pods by reading the kubelet's pod-resources socket from the host
(a hostPath) and needs SYS_ADMIN for DCGM's profiling metrics: Pod Security `baseline` forbids both, so
it runs in a namespace of its own labelled `privileged`, and nothing else runs there. Its
service-account token is not mounted (it never calls the API).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import Field, InstanceOf

from kubetrain.cluster import Cluster
from kubetrain.kinds.kubernetes import APPS_API_VERSION
from kubetrain.kinds.monitoring import API_VERSION as MONITORING_API_VERSION
from kubetrain.model.names import (
    Dns1035Label,
    Dns1123Label,
    ImageRef,
    LabelKey,
    LabelValue,
    PortName,
    PrometheusDuration,
)
from kubetrain.model.strict import StrictProps
from kubetrain.model.vocabulary import GPU_RESOURCE, JOB_LABEL, KUBERNETES_VERSION_ANNOTATION, NODEPOOL_LABEL
from kubetrain.platform.node_pools import NodePool
from kubetrain.platform.platform_construct import PlatformConstruct
from kubetrain.platform.security import (
    check_pod_security,
    pod_security_labels,
    pod_security_problems,
)
from kubetrain.rules.registry import register
from kubetrain.rules.sources import DCGM
from kubetrain_runtime.problems import Problem

METRICS_PORT = 9400
COLLECTORS_PATH = "/etc/dcgm-exporter/kubetrain-counters.csv"

# The fields the exporter collects (its `-f` CSV: field, Prometheus type, help): the image's default set
# (dcgm-exporter 3.3.9-3.6.1, etc/default-counters.csv) plus what the GPU alerts read and the default leaves
# commented out: double-bit ECC errors and the thermal and power throttling time. kubetrain.platform.alerts
# may name only these.
DCGM_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "counter", "Total number of bytes transmitted through PCIe TX via NVML."),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "counter", "Total number of bytes received through PCIe RX via NVML."),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_POWER_VIOLATION", "counter", "Throttling duration due to power constraints (in ns)."),
    ("DCGM_FI_DEV_THERMAL_VIOLATION", "counter", "Throttling duration due to thermal constraints (in ns)."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Frame buffer memory free (in MB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Frame buffer memory used (in MB)."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors."),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for uncorrectable errors"),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors"),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
    ("DCGM_FI_DRIVER_VERSION", "label", "Driver Version"),
)
PRIVILEGED_REASON = ("DCGM exporter: reads the kubelet's pod-resources socket through a hostPath and needs "
                     "SYS_ADMIN for profiling metrics; nothing else runs in this namespace")

NOT_A_GPU_POOL = register(
    "KT432", "error", "DCGM exporter on a pool without NVIDIA GPUs",
    rationale="The DCGM exporter only runs where NVIDIA GPUs and their driver are; on other nodes its pods crash "
              "in a loop.", fix="list only pools of NVIDIA GPU instance types", source=DCGM)


class DcgmExporterProps(StrictProps):
    name: Dns1035Label = Field(..., description="DaemonSet, Service and ServiceMonitor name (a Service's name is a "
                                                "DNS-1035 label); default the id.")
    namespace: Dns1123Label = Field("gpu-monitoring", description="A namespace of its own, created here and "
                                                                  "labelled privileged (see the module's note).")
    pools: list[InstanceOf[NodePool]] = Field(..., min_length=1, description="The GPU pools to run on.")
    image: ImageRef = Field("nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04",
                            description="Pin the release that supports your nodes' GPU driver.")
    interval: PrometheusDuration = Field("30s", description="Scrape interval.")
    prometheus_labels: dict[LabelKey, LabelValue] = Field(default_factory=dict, description="Labels your "
                                                          "Prometheus selects monitors by, e.g. {'release': "
                                                          "'kube-prometheus-stack'}.")


class DcgmExporter(PlatformConstruct):
    """Namespace (privileged), DaemonSet, Service and ServiceMonitor of the DCGM exporter."""

    Props = DcgmExporterProps
    kind = "dcgm"

    def __init__(self, scope: Cluster, id: str, props: DcgmExporterProps | Mapping[str, Any] | None = None,
                 **kwargs: Any):
        super().__init__(scope, id, props, kwargs)
        p = self.props
        self.namespace = p.namespace
        problems = [Problem(NOT_A_GPU_POOL.code, f"pools.{i}", f"pool {pool.name} has no NVIDIA GPUs",
                            NOT_A_GPU_POOL.fix) for i, pool in enumerate(p.pools)
                    if pool.instance_type is None or pool.instance_type.accelerator_resource != GPU_RESOURCE]
        own_namespace = p.namespace not in scope.props.namespaces
        if not own_namespace:
            spec = self.pod_spec()
            problems += check_pod_security(scope, p.namespace, self.where,
                                           lambda level: pod_security_problems(spec, level, path=""))
        manifests = [self._namespace()] if own_namespace else []
        manifests += [self._collectors(), self._daemon_set(), self._service(), self._service_monitor()]
        if self._emit(problems, manifests) and own_namespace:
            scope.state.pod_security[p.namespace] = "privileged"

    @property
    def labels(self) -> dict[str, str]:
        return {"app.kubernetes.io/name": "dcgm-exporter", "app.kubernetes.io/instance": self.props.name}

    def pod_spec(self) -> dict[str, Any]:
        p = self.props
        tolerations = {(t["key"], t["effect"]): t for pool in p.pools for t in pool.tolerations()}
        return {
            "automountServiceAccountToken": False,
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": NODEPOOL_LABEL, "operator": "In",
                                       "values": sorted(pool.name for pool in p.pools)}]}]}}},
            "tolerations": list(tolerations.values()),
            "containers": [{
                "name": "dcgm-exporter", "image": p.image,
                "env": [{"name": "DCGM_EXPORTER_KUBERNETES", "value": "true"},
                        {"name": "DCGM_EXPORTER_LISTEN", "value": f":{METRICS_PORT}"},
                        {"name": "DCGM_EXPORTER_COLLECTORS", "value": COLLECTORS_PATH}],
                "ports": [{"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}],
                "securityContext": {"runAsUser": 0, "runAsNonRoot": False, "capabilities": {"add": ["SYS_ADMIN"]}},
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
                "readinessProbe": {"httpGet": {"path": "/health", "port": METRICS_PORT}, "initialDelaySeconds": 15},
                "livenessProbe": {"httpGet": {"path": "/health", "port": METRICS_PORT}, "initialDelaySeconds": 30},
                "volumeMounts": [{"name": "pod-resources", "mountPath": "/var/lib/kubelet/pod-resources",
                                  "readOnly": True},
                                 {"name": "collectors", "mountPath": COLLECTORS_PATH,
                                  "subPath": COLLECTORS_PATH.rsplit("/", 1)[1], "readOnly": True}]}],
            "volumes": [{"name": "pod-resources", "hostPath": {"path": "/var/lib/kubelet/pod-resources",
                                                               "type": "Directory"}},
                        {"name": "collectors", "configMap": {"name": f"{p.name}-collectors"}}]}

    def _namespace(self) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": self.namespace, "labels": pod_security_labels("privileged", "privileged"),
            "annotations": {"kubetrain.dev/privileged-because": PRIVILEGED_REASON,
                            KUBERNETES_VERSION_ANNOTATION: self.cluster.props.kubernetes_version}}}

    def _meta(self) -> dict[str, Any]:
        return {"name": self.props.name, "namespace": self.namespace, "labels": dict(self.labels)}

    def _collectors(self) -> dict[str, Any]:
        csv = "".join(f"{field}, {kind}, {doc}\n" for field, kind, doc in DCGM_FIELDS)
        meta = {**self._meta(), "name": f"{self.props.name}-collectors"}
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
                "data": {COLLECTORS_PATH.rsplit("/", 1)[1]: csv}}

    def _daemon_set(self) -> dict[str, Any]:
        return {"apiVersion": APPS_API_VERSION, "kind": "DaemonSet", "metadata": self._meta(), "spec": {
            "selector": {"matchLabels": self.labels},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {"metadata": {"labels": self.labels}, "spec": self.pod_spec()}}}

    def _service(self) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Service", "metadata": self._meta(), "spec": {
            "selector": self.labels, "ports": [{"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics"}]}}

    def _service_monitor(self) -> dict[str, Any]:
        meta = self._meta()
        meta["labels"] = {**meta["labels"], **self.props.prometheus_labels}
        # honorLabels: the exporter labels each GPU's series with the `pod` and `namespace` using it, which
        # Prometheus would otherwise rename to exported_pod/exported_namespace (the exporter pod's own win).
        # The node's name comes from the target: an operator cordons by it.
        return {"apiVersion": MONITORING_API_VERSION, "kind": "ServiceMonitor", "metadata": meta, "spec": {
            "selector": {"matchLabels": self.labels},
            "endpoints": [{"port": "metrics", "interval": self.props.interval, "honorLabels": True,
                           "relabelings": [{"sourceLabels": ["__meta_kubernetes_pod_node_name"],
                                            "targetLabel": "node", "action": "replace"}]}]}}


class TrainingPodMonitorProps(StrictProps):
    name: Dns1123Label = Field(..., description="PodMonitor name; default the id.")
    namespace: Dns1123Label | None = Field(None, description="The training namespace; default the cluster's first.")
    port: PortName = Field("metrics", description="Name of the training container's metrics port.")
    path: str = Field("/metrics", pattern=r"^/", description="HTTP path of the metrics, from '/'.")
    interval: PrometheusDuration = Field("30s", description="Scrape interval.")
    prometheus_labels: dict[LabelKey, LabelValue] = Field(default_factory=dict,
                                                          description="Labels your Prometheus selects monitors by.")


class TrainingPodMonitor(PlatformConstruct):
    """A PodMonitor scraping every training pod (label kubetrain.dev/job) of a namespace on every rank's port.

    Each local rank serves its own endpoint (kubetrain_runtime/telemetry.py) on a port named `metrics`, `metrics-1`,
    ... `metrics-<N-1>` (kubetrain.jobs.pod.metrics_ports): the endpoint names no single port (the operator would
    keep only that one) but keeps, by relabelling, every container port whose name is `port` or `port-<i>`: one
    target per rank, whatever the pod's procs_per_node. `jobLabel` makes the target's `job` (and so `up`'s) the
    kubetrain job, as the runtime's own series say it; the `endpoint` label names the rank's port.
    """

    Props = TrainingPodMonitorProps
    kind = "podmonitor"

    def __init__(self, scope: Cluster, id: str, props: TrainingPodMonitorProps | Mapping[str, Any] | None = None,
                 **kwargs: Any):
        super().__init__(scope, id, props, kwargs)
        p = self.props
        self.namespace, problems = scope.check_namespace(p.namespace)
        self._emit(problems, [{
            "apiVersion": MONITORING_API_VERSION, "kind": "PodMonitor",
            "metadata": {"name": p.name, "namespace": self.namespace, "labels": dict(p.prometheus_labels)},
            "spec": {"selector": {"matchExpressions": [{"key": JOB_LABEL, "operator": "Exists"}]},
                     "jobLabel": JOB_LABEL,
                     "podTargetLabels": [JOB_LABEL],
                     # honorLabels: the runtime's own `job` label (the kubetrain job) must not become
                     # exported_job under Prometheus's scrape-job name; the alerts group by it.
                     "podMetricsEndpoints": [{"path": p.path, "interval": p.interval, "honorLabels": True,
                                              "relabelings": rank_port_relabelings(p.port)}]}}])


def rank_port_relabelings(port: str) -> list[dict[str, Any]]:
    """Keep the targets of the ports named `port` (local rank 0) and `port-<i>` (local rank i) of a running pod,
    and label each with its port's name (`endpoint`, as the operator does for a named port). A Pending pod (its
    image still pulling, its init containers running: a resumed job on a fresh node can take many minutes) has no
    rank to answer yet, and is no target: its `up` of 0 would page as a stuck rank. The operator itself drops only
    Failed and Succeeded pods (filterRunning)."""
    name = "__meta_kubernetes_pod_container_port_name"
    return [{"action": "drop", "sourceLabels": ["__meta_kubernetes_pod_phase"], "regex": "Pending"},
            {"action": "keep", "sourceLabels": [name], "regex": f"{re.escape(port)}(-[1-9][0-9]*)?"},
            {"action": "replace", "sourceLabels": [name], "targetLabel": "endpoint"}]
