"""The Prometheus operator's kinds (monitoring.coreos.com/v1, v0.93.0): the DCGM exporter's ServiceMonitor, the
training pods' PodMonitor (kubetrain.platform.gpu_monitoring builds them) and the training alerts' PrometheusRule
(kubetrain.platform.alerts), configuration in the platform wave. The PodMonitor and ServiceMonitor CRDs are the
project's example/prometheus-operator-crd/ files at v0.93.0; the PrometheusRule CRD is the same folder's at the
same tag.
"""

from __future__ import annotations

from kubetrain.kinds.base import PLATFORM, CrdSource, Kind


def _monitoring_crd(name: str) -> CrdSource:
    return CrdSource(f"monitoring.coreos.com_{name}.yaml", "prometheus-operator/prometheus-operator", "v0.93.0",
                     (API_VERSION,))


API_VERSION = "monitoring.coreos.com/v1"


KINDS = (
    Kind(API_VERSION, "ServiceMonitor", PLATFORM, crd=_monitoring_crd("servicemonitors")),
    Kind(API_VERSION, "PodMonitor", PLATFORM, crd=_monitoring_crd("podmonitors")),
    Kind(API_VERSION, "PrometheusRule", PLATFORM, crd=_monitoring_crd("prometheusrules")),
)
