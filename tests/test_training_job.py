"""TrainingJob compiles into what the training operator expects (shared/domain-facts.md section 1)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from kubetrain import App, Cluster, ConfigError, TrainingJob
from kubetrain.manifests import render
from kubetrain.validate import CrdSchemas, validate_manifests
from training.config import RunConfig, load_run_config

RUN = {"batch": {"global_size": 16, "micro_size": 1}, "max_steps": 10, "checkpoint": {"dir": "/ckpt/run"}}
VOLUMES = [{"name": "ckpt", "claim": "ckpt", "mount_path": "/ckpt"}]


def compile_job(**overrides: Any) -> dict[str, dict]:
    app = App()
    cluster = Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml", "other"])
    props = {"image": "img:1", "nodes": 2, "procs_per_node": 8, "instance_type": "p5.48xlarge",
             "resources": {"cpu": "96", "memory": "1000Gi", "gpus": 8, "efa": 32}, "volumes": VOLUMES, "run": RUN}
    TrainingJob(cluster, overrides.pop("name", "job"), **{**props, **overrides})
    return {str(path): yaml.safe_load(text) for path, text in render(app).items()}


def problems(**overrides: Any) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        compile_job(**overrides)
    return [(p.code, p.path) for p in info.value.problems]


def test_pytorchjob_honours_the_operator_contract():
    objects = compile_job()
    job = objects["c/ml/PyTorchJob.job.yaml"]
    assert job["apiVersion"] == "kubeflow.org/v1"
    spec = job["spec"]
    assert spec["nprocPerNode"] == "8"
    assert set(spec["pytorchReplicaSpecs"]) == {"Master", "Worker"}
    assert spec["pytorchReplicaSpecs"]["Master"]["replicas"] == 1
    assert spec["pytorchReplicaSpecs"]["Worker"]["replicas"] == 1
    for replica in spec["pytorchReplicaSpecs"].values():
        pod = replica["template"]["spec"]
        (container,) = pod["containers"]
        assert container["name"] == "pytorch" and container["image"] == "img:1"
        assert container["command"] == [
            "torchrun", "--max-restarts=3", "--rdzv-backend=c10d", "--rdzv-endpoint=$(PET_MASTER_ADDR):$(PET_MASTER_PORT)",
            "--rdzv-id=job", "-m", "training", "--config", "/etc/kubetrain/run.yaml"]
        env = {e["name"]: e["value"] for e in container["env"]}
        assert not {"MASTER_ADDR", "RANK", "WORLD_SIZE"} & set(env), "the operator owns these"
        assert env["NCCL_SOCKET_IFNAME"].startswith("^")
        assert env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "3" and env["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1"
        assert container["resources"]["limits"]["nvidia.com/gpu"] == "8"
        assert container["resources"]["limits"]["vpc.amazonaws.com/efa"] == "32"
        assert container["resources"]["limits"]["hugepages-2Mi"] == "5120Mi"
        assert "cpu" not in container["resources"]["limits"]
        shm = next(v for v in pod["volumes"] if v["name"] == "shm")
        assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": "1Gi"}
        assert pod["nodeSelector"] == {"node.kubernetes.io/instance-type": "p5.48xlarge"}
        assert pod["tolerations"][0]["key"] == "nvidia.com/gpu"


def test_single_node_job_has_no_workers_and_cpu_job_no_gpu_extras():
    objects = compile_job(nodes=1, procs_per_node=2, instance_type=None, resources={"cpu": "2", "memory": "4Gi"},
                          run={**RUN, "batch": {"global_size": 4, "micro_size": 1}})
    spec = objects["c/ml/PyTorchJob.job.yaml"]["spec"]
    assert set(spec["pytorchReplicaSpecs"]) == {"Master"}
    pod = spec["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert "tolerations" not in pod and "nodeSelector" not in pod
    assert pod["containers"][0]["env"] == [{"name": "TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "value": "1"}]


def test_config_map_round_trips_through_the_runtime_loader(tmp_path):
    objects = compile_job()
    config_map = objects["c/ml/ConfigMap.job-config.yaml"]
    (tmp_path / "run.yaml").write_text(config_map["data"]["run.yaml"])
    assert load_run_config(tmp_path / "run.yaml") == RunConfig.model_validate(RUN)


def test_config_change_changes_the_pod_template_hash():
    def digest(run: dict) -> str:
        template = compile_job(run=run)["c/ml/PyTorchJob.job.yaml"]["spec"]["pytorchReplicaSpecs"]["Master"]
        return template["template"]["metadata"]["annotations"]["kubetrain.dev/config-sha256"]

    assert digest(RUN) == digest(dict(RUN))
    assert digest(RUN) != digest({**RUN, "max_steps": 11})


@pytest.mark.parametrize(("overrides", "expected"), [
    ({"env": {"NCCL_ALGO": "Ring"}}, ("KT106", "env.NCCL_ALGO")),
    ({"env": {"NCCL_SOCKET_IFNAME": "eth0"}}, ("KT106", "env.NCCL_SOCKET_IFNAME")),
    ({"env": {"WORLD_SIZE": "16"}}, ("KT105", "env.WORLD_SIZE")),
    ({"env": {"PET_NNODES": "2"}}, ("KT105", "env.PET_NNODES")),
    ({"resources": {"cpu": "1", "memory": "1Gi", "gpus": 8, "efa": 33}}, ("KT103", "resources.efa")),
    ({"resources": {"cpu": "1", "memory": "1Gi", "gpus": 8, "shm": "2Gi"}}, ("KT107", "resources.shm")),
    ({"procs_per_node": 4, "run": {**RUN, "batch": {"global_size": 8, "micro_size": 1}}}, ("KT104", "procs_per_node")),
    ({"instance_type": "p9.huge"}, ("KT111", "instance_type")),
    ({"volumes": []}, ("KT108", "run.checkpoint.dir")),
    ({"volumes": [{**VOLUMES[0], "read_only": True}]}, ("KT108", "run.checkpoint.dir")),
    ({"volumes": [*VOLUMES, {"name": "shm", "claim": "x", "mount_path": "/x"}]}, ("KT112", "volumes.1.name")),
    ({"run": {**RUN, "data": {"source": "tokens"}}}, ("KT204", "run.data.path")),
    ({"run": {**RUN, "data": {"source": "tokens", "path": "/elsewhere/t.bin"}}}, ("KT108", "run.data.path")),
    ({"namespace": "nope"}, ("KT109", "namespace")),
    ({"run": {**RUN, "resilience": {"watchdog_floor_s": 300}}}, ("KT113", "run.resilience.watchdog_floor_s")),
    ({"elastic": {"min_nodes": 3}}, ("KT114", "elastic.min_nodes")),
    ({"elastic": {"min_nodes": 1, "max_nodes": 1}}, ("KT114", "elastic.max_nodes")),
    # 16 / (1 x 8 x 3) does not divide: a world size inside the elastic range.
    ({"elastic": {"min_nodes": 1, "max_nodes": 4}}, ("KT201", "run.batch.global_size")),
])
def test_compile_time_rules(overrides, expected):
    assert expected in problems(**overrides)


def test_duplicate_job_in_a_namespace_is_rejected():
    app = App()
    cluster = Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"])
    props = {"image": "i", "nodes": 1, "procs_per_node": 1, "resources": {"cpu": "1", "memory": "2Gi"},
             "volumes": VOLUMES, "run": {**RUN, "batch": {"global_size": 1, "micro_size": 1}}}
    TrainingJob(cluster, "a", **props)
    with pytest.raises(ConfigError) as info:
        TrainingJob(cluster, "a", **props)
    assert info.value.problems[0].code == "KT110"


def test_cluster_props_are_validated():
    with pytest.raises(ConfigError) as info:
        Cluster(App(), "c", kubernetes_version="v1.33", namespaces=[])
    assert [p.path for p in info.value.problems] == ["kubernetes_version", "namespaces"]


def test_restart_budget_is_rendered():
    spec = compile_job(max_restarts=7)["c/ml/PyTorchJob.job.yaml"]["spec"]
    assert "--max-restarts=7" in spec["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["command"]


def test_elastic_job_has_workers_only_and_an_elastic_policy(crds, tmp_path):
    objects = compile_job(nodes=2, elastic={"min_nodes": 1, "max_nodes": 4}, max_restarts=5,
                          run={**RUN, "batch": {"global_size": 96, "micro_size": 1}})
    job = objects["c/ml/PyTorchJob.job.yaml"]
    spec = job["spec"]
    assert spec["elasticPolicy"] == {"rdzvBackend": "c10d", "minReplicas": 1, "maxReplicas": 4, "maxRestarts": 5}
    assert set(spec["pytorchReplicaSpecs"]) == {"Worker"} and spec["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2
    command = spec["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["command"]
    # The operator sets PET_RDZV_ENDPOINT and PET_NNODES=1:4 but, without a Master, no PET_NPROC_PER_NODE.
    assert "--nproc-per-node=8" in command and not any(arg.startswith("--rdzv-endpoint") for arg in command)
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(job))
    assert validate_manifests([tmp_path / "job.yaml"], CrdSchemas(crds), "1.33") == (1, [])
