"""The Prometheus operator's kinds (monitoring.coreos.com/v1, v0.86): the DCGM exporter's ServiceMonitor and the
training pods' PodMonitor (kubetrain.platform.monitoring builds them), configuration in the platform wave.
"""

from __future__ import annotations

from kubetrain.kinds.base import PLATFORM, CrdSource, Kind


def _monitoring_crd(name: str) -> CrdSource:
    return CrdSource(f"monitoring.coreos.com_{name}.yaml", "prometheus-operator/prometheus-operator", "v0.86",
                     ("monitoring.coreos.com/v1",))


KINDS = (
    Kind("monitoring.coreos.com/v1", "ServiceMonitor", PLATFORM, crd=_monitoring_crd("servicemonitors")),
    Kind("monitoring.coreos.com/v1", "PodMonitor", PLATFORM, crd=_monitoring_crd("podmonitors")),
)
