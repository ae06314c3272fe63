"""Which training ranks Prometheus scrapes: the synthesized PodMonitor turned into the scrape job prometheus-operator
generates (its relabelling, ported below from pkg/prometheus/promcfg.go, generatePodMonitorConfig, v0.93), applied
with Prometheus's relabelling semantics to the targets Kubernetes service discovery makes of the synthesized pod
(one per container port, role `pod`). Every rank serves its own endpoint, so every rank must be a target.
"""

from __future__ import annotations

import re
from typing import Any

from kubetrain import App, Cluster, EfaNodePool, NodeResources, PyTorchJob, RunConfig, Trainer, TrainingJob
from kubetrain.pipeline import render_objects
from kubetrain.platform.gpu_monitoring import TrainingPodMonitor

NAMESPACE = "ml-prod"


def sanitize(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def operator_relabelings(monitor: dict[str, Any], endpoint: dict[str, Any]) -> list[dict[str, Any]]:
    """The relabel_configs prometheus-operator writes for one podMetricsEndpoint (the subset kubetrain's monitor
    uses: selector, port or portNumber, podTargetLabels, jobLabel, the endpoint's own relabelings)."""
    spec, meta = monitor["spec"], monitor["metadata"]
    rules: list[dict[str, Any]] = [{"source_labels": ["job"], "target_label": "__tmp_prometheus_job_name"}]
    if endpoint.get("filterRunning", True):
        rules.append({"action": "drop", "source_labels": ["__meta_kubernetes_pod_phase"], "regex": "(Failed|Succeeded)"})
    for key, value in sorted(spec["selector"].get("matchLabels", {}).items()):
        rules.append({"action": "keep", "source_labels": [f"__meta_kubernetes_pod_label_{sanitize(key)}",
                                                          f"__meta_kubernetes_pod_labelpresent_{sanitize(key)}"],
                      "regex": f"({value});true"})
    for expression in spec["selector"].get("matchExpressions", []):
        label = sanitize(expression["key"])
        operator = expression["operator"]
        if operator in ("In", "NotIn"):
            rules.append({"action": "keep" if operator == "In" else "drop",
                          "source_labels": [f"__meta_kubernetes_pod_label_{label}",
                                            f"__meta_kubernetes_pod_labelpresent_{label}"],
                          "regex": f"({'|'.join(expression['values'])});true"})
        else:
            rules.append({"action": "keep" if operator == "Exists" else "drop",
                          "source_labels": [f"__meta_kubernetes_pod_labelpresent_{label}"], "regex": "true"})
    if endpoint.get("port"):
        rules.append({"action": "keep", "source_labels": ["__meta_kubernetes_pod_container_port_name"],
                      "regex": endpoint["port"]})
    elif endpoint.get("portNumber"):
        rules.append({"action": "keep", "source_labels": ["__meta_kubernetes_pod_container_port_number"],
                      "regex": str(endpoint["portNumber"])})
    rules += [{"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
              {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
              {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"}]
    for label in spec.get("podTargetLabels", []):
        rules.append({"source_labels": [f"__meta_kubernetes_pod_label_{sanitize(label)}"],
                      "target_label": sanitize(label), "regex": "(.+)", "replacement": "${1}"})
    rules.append({"target_label": "job", "replacement": f"{meta['namespace']}/{meta['name']}"})
    if spec.get("jobLabel"):
        rules.append({"source_labels": [f"__meta_kubernetes_pod_label_{sanitize(spec['jobLabel'])}"],
                      "target_label": "job", "regex": "(.+)", "replacement": "${1}"})
    if endpoint.get("port"):
        rules.append({"target_label": "endpoint", "replacement": endpoint["port"]})
    for own in endpoint.get("relabelings", []):
        rules.append({re.sub(r"[A-Z]", lambda m: "_" + m.group().lower(), key): value for key, value in own.items()})
    return rules


def relabel(labels: dict[str, str], rules: list[dict[str, Any]]) -> dict[str, str] | None:
    """Prometheus's relabelling (model/relabel): the labels after `rules`, or None when the target is dropped."""
    labels = dict(labels)
    for rule in rules:
        value = rule.get("separator", ";").join(labels.get(name, "") for name in rule.get("source_labels", []))
        match = re.fullmatch(rule.get("regex", "(.*)"), value)
        action = rule.get("action", "replace").lower()
        if action == "keep" and match is None or action == "drop" and match is not None:
            return None
        if action == "replace" and match is not None:
            template = re.sub(r"\$\{?(\d+)\}?", r"\\g<\1>", rule.get("replacement", "$1"))
            result = match.expand(template)
            if result:
                labels[rule["target_label"]] = result
            else:
                labels.pop(rule["target_label"], None)
    return labels


def discovered(pod: dict[str, Any], name: str, phase: str = "Running") -> list[dict[str, str]]:
    """Kubernetes service discovery, role pod: one target per container port, with the pod's meta labels."""
    common = {"__meta_kubernetes_namespace": NAMESPACE, "__meta_kubernetes_pod_name": name,
              "__meta_kubernetes_pod_phase": phase, "__meta_kubernetes_pod_ip": "10.0.0.7"}
    for key, value in pod["metadata"]["labels"].items():
        common |= {f"__meta_kubernetes_pod_label_{sanitize(key)}": value,
                   f"__meta_kubernetes_pod_labelpresent_{sanitize(key)}": "true"}
    targets = []
    for container in pod["spec"]["containers"]:
        for port in container.get("ports", []):
            targets.append({**common, "__meta_kubernetes_pod_container_name": container["name"],
                            "__meta_kubernetes_pod_container_port_name": port.get("name", ""),
                            "__meta_kubernetes_pod_container_port_number": str(port["containerPort"]),
                            "__address__": f"10.0.0.7:{port['containerPort']}"})
    return targets


def scraped(monitor: dict[str, Any], pod: dict[str, Any], name: str, phase: str = "Running") -> list[dict[str, str]]:
    """The targets Prometheus scrapes of `pod`, with their labels as `up` carries them."""
    targets = []
    for index, endpoint in enumerate(monitor["spec"]["podMetricsEndpoints"]):
        job = f"podMonitor/{monitor['metadata']['namespace']}/{monitor['metadata']['name']}/{index}"
        for target in discovered(pod, name, phase):
            labels = relabel({**target, "job": job}, operator_relabelings(monitor, endpoint))
            if labels is not None:
                labels.setdefault("instance", labels["__address__"])
                targets.append({k: v for k, v in labels.items() if not k.startswith("__")})
    return targets


def synthesized(procs_per_node: int, sidecar_port: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """The PodMonitor and the master pod's template of a trainer job on a p5 pool."""
    app = App()
    cluster = Cluster(app, "prod", kubernetes_version="1.33", namespaces=[NAMESPACE])
    p5 = EfaNodePool(cluster, "p5", instance_types=["p5.48xlarge"], zones=["us-west-2a"],
                     subnet_ids=["subnet-0abc1234"], security_group_ids=["sg-0efa1234"], role="KarpenterNodeRole-prod",
                     max_nodes=16)
    run = RunConfig.model_validate({"batch": {"global_size": 64, "micro_size": 4}, "max_steps": 10,
                                    "checkpoint": {"dir": "/ckpt/run"}})
    TrainingJob(cluster, "gpt", name="gpt", image="ghcr.io/kubetrain/kubetrain:0.1.0", pool=p5,
                resources=NodeResources(cpu="184", memory="1800Gi"), nodes=2, procs_per_node=procs_per_node,
                target=PyTorchJob(), volumes=[{"name": "ckpt", "claim": "ckpt", "mount_path": "/ckpt"}],
                workload=Trainer(run=run))
    TrainingPodMonitor(cluster, "training", namespace=NAMESPACE)
    objects = list(render_objects(app).values())
    (monitor,) = [obj for obj in objects if obj["kind"] == "PodMonitor"]
    (job,) = [obj for obj in objects if obj["kind"] == "PyTorchJob"]
    pod = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]
    if sidecar_port:  # a port of another container that is not a rank's: never scraped
        pod["spec"]["containers"].append({"name": "proxy", "ports": [{"name": "http", "containerPort": 8080},
                                                                     {"name": "metrics-x", "containerPort": 8081}]})
    return monitor, pod


def test_every_rank_of_an_8_gpu_pod_is_a_target_labelled_with_its_job_pod_and_port():
    ranks = 8
    monitor, pod = synthesized(ranks, sidecar_port=True)
    targets = scraped(monitor, pod, "gpt-master-0")
    assert sorted((t["endpoint"], t["instance"]) for t in targets) == sorted(
        ("metrics" if i == 0 else f"metrics-{i}", f"10.0.0.7:{9400 + i}") for i in range(ranks))
    for target in targets:
        # `job` is the kubetrain job (jobLabel), as the runtime's own series say: `up` of a rank joins its series.
        assert {k: target[k] for k in ("job", "namespace", "pod", "container")} == {
            "job": "gpt", "namespace": NAMESPACE, "pod": "gpt-master-0", "container": "pytorch"}


def test_only_a_running_pod_is_a_target():
    """A finished pod (the operator's filterRunning) and a Pending one (pulling its image, running its init
    containers: no rank can answer yet, and its `up` of 0 would page as a stuck rank) are no targets."""
    monitor, pod = synthesized(8)
    assert {phase: len(scraped(monitor, pod, "gpt-master-0", phase=phase))
            for phase in ("Pending", "Running", "Failed", "Succeeded")} == {
        "Pending": 0, "Running": 8, "Failed": 0, "Succeeded": 0}
