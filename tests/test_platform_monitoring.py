"""DCGM exporter, the training PodMonitor, and Pod Security by default."""

from __future__ import annotations

from kubetrain.platform.gpu_monitoring import DcgmExporter, TrainingPodMonitor
from kubetrain.platform.security import PodSecurity, namespace_level, pod_security_problems
from platform_support import cluster, codes, emitted, pools, rejected

TRAINING_POD = {"automountServiceAccountToken": False, "containers": [{"name": "pytorch", "image": "x:1"}],
                "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory"}}]}


def test_dcgm_exporter_runs_on_gpu_pools_in_a_privileged_namespace_of_its_own(crds):
    c = cluster()
    PodSecurity(c)
    gpu, _ = pools(c)
    DcgmExporter(c, "dcgm-exporter", pools=[gpu], prometheus_labels={"release": "prom"})
    TrainingPodMonitor(c, "training")
    objects = emitted(c, crds)
    labels = objects["Namespace/gpu-monitoring"]["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "privileged"
    assert "hostPath" in objects["Namespace/gpu-monitoring"]["metadata"]["annotations"][
        "kubetrain.dev/privileged-because"]
    assert objects["Namespace/ml"]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    pod = objects["DaemonSet/dcgm-exporter"]["spec"]["template"]["spec"]
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert pod["automountServiceAccountToken"] is False
    assert objects["ServiceMonitor/dcgm-exporter"]["metadata"]["labels"]["release"] == "prom"
    monitor = objects["PodMonitor/training"]["spec"]
    assert monitor["selector"] == {"matchExpressions": [{"key": "kubetrain.dev/job", "operator": "Exists"}]}
    (endpoint,) = monitor["podMetricsEndpoints"]  # every rank's port (tests/test_scrape_targets.py)
    assert [r["regex"] for r in endpoint["relabelings"] if r["action"] == "keep"] == ["metrics(-[1-9][0-9]*)?"]
    assert "port" not in endpoint
    assert (namespace_level(c, "ml"), namespace_level(c, "gpu-monitoring")) == ("baseline", "privileged")
    assert codes(c) == []


def test_dcgm_exporter_in_a_baseline_namespace_or_on_a_cpu_pool_is_refused(crds):
    c = cluster()
    PodSecurity(c)
    _, cpu = pools(c)
    DcgmExporter(c, "dcgm-exporter", pools=[cpu], namespace="ml")
    found = codes(c)
    assert [(code, path) for code, path, _ in found] == [
        ("KT432", "pools.0"), ("KT430", "volumes.0.hostPath"),
        ("KT430", "containers.0.securityContext.capabilities.add")]
    assert "privileged" in found[1][2]
    assert "DaemonSet/dcgm-exporter" not in emitted(c, crds)


def test_pod_security_rule_judges_pods_by_level():
    assert pod_security_problems(TRAINING_POD, "baseline") == []
    risky = {**TRAINING_POD, "hostNetwork": True, "automountServiceAccountToken": True,
             "containers": [{"name": "pytorch", "image": "x:1", "securityContext": {"privileged": True}}],
             "volumes": [{"name": "ib", "hostPath": {"path": "/dev/infiniband"}}]}
    found = pod_security_problems(risky, "baseline")
    assert [p.path for p in found] == ["spec.automountServiceAccountToken", "spec.hostNetwork",
                                       "spec.volumes.0.hostPath", "spec.containers.0.securityContext.privileged"]
    assert all(p.code == "KT430" and p.fix for p in found)
    # hostNetwork (the NCCL profile's explicit choice) is fine in a privileged namespace, the token never is
    assert [p.path for p in pod_security_problems(risky, "privileged")] == ["spec.automountServiceAccountToken"]
    restricted = [p.path for p in pod_security_problems(TRAINING_POD, "restricted")]
    assert "spec.containers.0.securityContext.runAsNonRoot" in restricted


def test_names_and_labels_the_api_server_refuses_are_refused_at_the_props():
    c = cluster()
    gpu, _ = pools(c)
    for i, (props, path) in enumerate((({"name": "9dcgm"}, "name"),  # its Service's name is a DNS-1035 label
                                       ({"prometheus_labels": {"release": "kube prometheus"}},
                                        "prometheus_labels.release"))):
        problems = rejected(c, lambda: DcgmExporter(c, f"dcgm-{i}", pools=[gpu], **props))
        assert [(p.code, p.path) for p in problems] == [("KT003", path)]
    assert [p.path for p in rejected(c, lambda: TrainingPodMonitor(c, "training", prometheus_labels={"a/b/c": "x"}))] \
        == ["prometheus_labels.a/b/c"]
    before = len(codes(c))
    DcgmExporter(c, "dcgm", pools=[gpu], prometheus_labels={"release": "kube-prometheus"})
    assert len(codes(c)) == before
