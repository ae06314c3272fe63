"""Typed pod parts: probes, init containers, PriorityClass, ServiceAccount (IRSA, EKS Pod Identity), CPU limits."""

from __future__ import annotations

from typing import Any

from kubetrain import (
    App,
    Cluster,
    HttpGet,
    InitContainer,
    NodeResources,
    PodSecurity,
    PodSettings,
    PriorityClass,
    Probe,
    PyTorchJob,
    ServiceAccount,
    TcpSocket,
    TrainingJob,
    TrainJob,
    VolumeMount,
)
from kubetrain.pipeline import fleet_findings
from platform_support import emitted

ROLE = "arn:aws:iam::111122223333:role/training/checkpoints"
RUN = {"batch": {"global_size": 4, "micro_size": 1}, "max_steps": 100, "optimizer": {"warmup_steps": 10},
       "checkpoint": {"dir": "/ckpt/run"}}
JOB = {"image": "img:1", "nodes": 2, "procs_per_node": 1, "resources": {"cpu": "2", "memory": "4Gi"},
       "volumes": [{"name": "ckpt", "claim": "ckpt", "mount_path": "/ckpt"}],
       "workload": {"kind": "trainer", "run": RUN}}


def the_seed_guides_parts(c: Cluster) -> dict[str, Any]:
    """The parts the seed guides add with patches, written as typed props."""
    high = PriorityClass(c, "training-high", value=100000, preemption_policy="Never",
                         description="production pretraining")
    account = ServiceAccount(c, "trainer", namespace="ml", iam_role_arn=ROLE)
    return {"priority_class": high, "service_account": account,
            "startup_probe": Probe(http_get=HttpGet(port="metrics", path="/metrics"), period_s=10,
                                   failure_threshold=60),
            "liveness_probe": Probe(tcp_socket=TcpSocket(port="metrics"), period_s=30, failure_threshold=4),
            "init_containers": [InitContainer(name="fetch-tokenizer", command=["python", "-m", "fetch", "/ckpt/tok"],
                                              volume_mounts=[VolumeMount(name="ckpt", mount_path="/ckpt")],
                                              cpu="500m", memory="512Mi")]}


def test_the_seed_guides_pod_parts_without_a_patch(crds):
    for target in (PyTorchJob(), TrainJob()):
        c = Cluster(App(), "prod", kubernetes_version="1.33", namespaces=["ml"])
        PodSecurity(c)
        TrainingJob(c, "gpt", {**JOB, "target": target,
                               "resources": NodeResources(cpu="2", memory="4Gi", cpu_limit="2"),
                               "pod": PodSettings(**the_seed_guides_parts(c))})
        assert fleet_findings(c) == []
        objects = emitted(c, crds)  # strict schemas of Kubernetes 1.33 and the operators' CRDs
        assert objects["PriorityClass/training-high"] == {
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": "training-high", "labels": {"app.kubernetes.io/managed-by": "kubetrain",
                                                             "kubetrain.dev/cluster": "prod"}},
            "value": 100000, "preemptionPolicy": "Never", "globalDefault": False,
            "description": "production pretraining"}
        account = objects["ServiceAccount/trainer"]
        assert account["metadata"]["annotations"] == {"eks.amazonaws.com/role-arn": ROLE}
        assert account["automountServiceAccountToken"] is False
        if isinstance(target, PyTorchJob):
            spec = objects["PyTorchJob/gpt"]["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
        else:
            spec = objects["TrainingRuntime/gpt-runtime"]["spec"]["template"]["spec"]["replicatedJobs"][0][
                "template"]["spec"]["template"]["spec"]
        assert (spec["priorityClassName"], spec["serviceAccountName"]) == ("training-high", "trainer")
        # IRSA's webhook brings its own projected token: the API token stays off.
        assert spec["automountServiceAccountToken"] is False
        [container] = spec["containers"]
        assert container["startupProbe"] == {"httpGet": {"path": "/metrics", "port": "metrics", "scheme": "HTTP"},
                                             "initialDelaySeconds": 0, "periodSeconds": 10, "timeoutSeconds": 1,
                                             "failureThreshold": 60, "successThreshold": 1}
        assert container["livenessProbe"]["tcpSocket"] == {"port": "metrics"}
        assert container["resources"]["limits"] == {"cpu": "2", "memory": "4Gi"}
        [init] = spec["initContainers"]
        assert init == {"name": "fetch-tokenizer", "image": "img:1", "command": ["python", "-m", "fetch", "/ckpt/tok"],
                        "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "512Mi"}},
                        "volumeMounts": [{"name": "ckpt", "mountPath": "/ckpt"}],
                        "securityContext": {"allowPrivilegeEscalation": False}}


def test_pod_identity_and_the_defaults():
    c = Cluster(App(), "prod", kubernetes_version="1.33", namespaces=["ml"])
    ServiceAccount(c, "loader", pod_identity_role_arn="arn:aws:iam::111122223333:role/loader")
    TrainingJob(c, "plain", {**JOB, "target": PyTorchJob()})
    from kubetrain.pipeline import render_objects
    objects = {f"{o['kind']}/{o['metadata']['name']}": o for o in render_objects(c.node.root).values()}
    assert objects["ServiceAccount/loader"]["metadata"]["annotations"] == {
        "kubetrain.dev/eks-pod-identity-role-arn": "arn:aws:iam::111122223333:role/loader"}
    spec = objects["PyTorchJob/plain"]["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    [container] = spec["containers"]
    assert "cpu" not in container["resources"]["limits"], "no CPU limit unless asked for"
    assert not {"initContainers", "priorityClassName", "serviceAccountName"} & set(spec)
    assert not {"livenessProbe", "startupProbe"} & set(container)


def test_platform_objects_are_checked_like_every_input():
    c = Cluster(App(), "prod", kubernetes_version="1.33", namespaces=["ml"])
    PriorityClass(c, "too-high", value=2_000_000_000)
    PriorityClass(c, "system-training", value=10)
    PriorityClass(c, "first", value=10, global_default=True)
    PriorityClass(c, "second", value=20, global_default=True)
    PriorityClass(c, "typo", value=1, preemtion_policy="Never")
    ServiceAccount(c, "by-name", iam_role_arn="training-role")
    ServiceAccount(c, "both", iam_role_arn=ROLE, pod_identity_role_arn=ROLE)
    ServiceAccount(c, "short-account", iam_role_arn="arn:aws:iam::1111:role/x")
    ServiceAccount(c, "elsewhere", namespace="other")
    found = [(f.where, f.problem.code, f.problem.path, f.problem.fix) for f in fleet_findings(c)]
    assert [row[:3] for row in found] == [
        ("prod/priorityclass/too-high", "KT152", "value"),
        ("prod/priorityclass/system-training", "KT152", "name"),
        ("prod/priorityclass/second", "KT152", "global_default"),
        ("prod/priorityclass/typo", "KT001", "preemtion_policy"),
        ("prod/serviceaccount/by-name", "KT154", "iam_role_arn"),
        ("prod/serviceaccount/both", "KT154", "pod_identity_role_arn"),
        ("prod/serviceaccount/short-account", "KT154", "iam_role_arn"),
        ("prod/serviceaccount/elsewhere", "KT109", "namespace")]
    assert "did you mean 'preemption_policy'" in found[3][3]
    assert "that is a role's name" in [f.problem.message for f in fleet_findings(c)][4]


def test_typed_parts_report_mistakes_with_their_paths():
    c = Cluster(App(), "prod", kubernetes_version="1.33", namespaces=["ml"])
    TrainingJob(c, "j", {**JOB, "resources": NodeResources(cpu="2", memory="4Gi", cpu_limt="4"),
                         "pod": PodSettings(liveness_probe=Probe(period_s=0, http_get=HttpGet(port="metrics")),
                                            startup_probe=Probe(),
                                            init_containers=[InitContainer(name="Fetch", command=[])])})
    found = [(f.problem.code, f.problem.path) for f in fleet_findings(c)]
    assert ("KT001", "resources.cpu_limt") in found
    assert ("KT003", "pod.liveness_probe.period_s") in found
    assert ("KT150", "pod.startup_probe") in found
    assert ("KT003", "pod.init_containers.0.name") in found and ("KT003", "pod.init_containers.0.command") in found


def test_init_containers_count_for_pod_security(crds):
    c = Cluster(App(), "prod", kubernetes_version="1.33", namespaces=["ml"])
    PodSecurity(c, level="restricted")
    TrainingJob(c, "j", {**JOB, "pod": {"security_context": {"run_as_non_root": True, "run_as_user": 1000},
                                        "init_containers": [{"name": "fetch", "command": ["true"]}]}})
    paths = {f.problem.path for f in fleet_findings(c) if f.problem.code == "KT430"}
    assert "pod.init_containers.0.securityContext.capabilities.drop" in paths
    assert "pod.containers.0.securityContext.capabilities.drop" in paths
