"""TrainingJob compiles into what its target's operator expects (kubeflow/trainer v1.9.4's PyTorchJob contract)."""

from __future__ import annotations

import math
from typing import Any

import pytest
import yaml
from kubetrain import (
    App,
    ClaimVolume,
    Cluster,
    Command,
    ConfigError,
    JsonPatch,
    NodeResources,
    PodSettings,
    PyTorchJob,
    SecurityContext,
    Toleration,
    Trainer,
    TrainingJob,
    TrainingJobProps,
)
from kubetrain.pipeline import check_definitions, fleet_warnings, render
from kubetrain.validation.validate import Schemas, validate_manifests

from training.config import RunConfig, load_run_config
from training.flops import checkpoint_bytes

RUN = {"batch": {"global_size": 16, "micro_size": 1}, "max_steps": 10, "checkpoint": {"dir": "/ckpt/run"}}
VOLUMES = [{"name": "ckpt", "claim": "ckpt", "mount_path": "/ckpt"}]
# The PyTorchJob target's contract is what most tests here read; the TrainJob default is tested with the others.
GPU_JOB = {"image": "img:1", "nodes": 2, "procs_per_node": 8, "instance_type": "p5.48xlarge", "target": PyTorchJob(),
           "resources": {"cpu": "96", "memory": "1000Gi", "accelerators": 8, "efa": 32}, "volumes": VOLUMES,
           "workload": {"kind": "trainer", "run": RUN}}
CPU_JOB = {"image": "img:1", "nodes": 2, "procs_per_node": 1, "resources": {"cpu": "2", "memory": "4Gi"},
           "target": PyTorchJob(),
           "volumes": VOLUMES, "workload": {"kind": "trainer", "run": {**RUN, "batch": {"global_size": 4,
                                                                                       "micro_size": 1}}}}


def synth(*jobs: dict[str, Any], namespaces=("ml", "other")) -> dict[str, dict]:
    """Render jobs (each a props dict with a `name`) in one cluster; raise every error like synth does."""
    app = App()
    cluster = Cluster(app, "c", kubernetes_version="1.33", namespaces=list(namespaces))
    for job in jobs:
        TrainingJob(cluster, job.get("name", "job"), {k: v for k, v in job.items() if k != "name"})
    check_definitions(app)
    return {str(path): yaml.safe_load(text) for path, text in render(app).items()}


def compile_job(**overrides: Any) -> dict[str, dict]:
    return synth({**GPU_JOB, **overrides})


def test_pytorchjob_honours_the_operator_contract():
    job = compile_job()["c/ml/PyTorchJob.job.yaml"]
    assert job["apiVersion"] == "kubeflow.org/v1"
    spec = job["spec"]
    assert spec["nprocPerNode"] == "8"
    assert spec["pytorchReplicaSpecs"]["Master"]["replicas"] == 1
    assert spec["pytorchReplicaSpecs"]["Worker"]["replicas"] == 1
    for replica in spec["pytorchReplicaSpecs"].values():
        pod = replica["template"]["spec"]
        (container,) = pod["containers"]
        assert container["name"] == "pytorch" and container["image"] == "img:1"
        command = container["command"]
        assert command[:2] == ["/bin/sh", "-c"] and 'torchrun "$@"' in command[2]
        assert command[3:] == ["kubetrain-launch", "--max-restarts=3", "--rdzv-backend=c10d",
                               "--rdzv-endpoint=$(PET_MASTER_ADDR):$(PET_MASTER_PORT)", "--rdzv-id=job",
                               "-m", "training", "--config", "/etc/kubetrain/run.yaml"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert not {"MASTER_ADDR", "RANK", "WORLD_SIZE"} & set(env), "the operator owns these"
        assert env["NCCL_SOCKET_IFNAME"].startswith("^")
        assert env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "3" and env["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1"
        assert container["resources"]["limits"]["nvidia.com/gpu"] == "8"
        assert container["resources"]["limits"]["vpc.amazonaws.com/efa"] == "32"
        assert container["resources"]["limits"]["hugepages-2Mi"] == "5120Mi"
        assert "cpu" not in container["resources"]["limits"]
        assert container["securityContext"] == {"allowPrivilegeEscalation": False}
        shm = next(v for v in pod["volumes"] if v["name"] == "shm")
        assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": "1Gi"}
        assert pod["nodeSelector"] == {"node.kubernetes.io/instance-type": "p5.48xlarge"}
        assert pod["tolerations"][0]["key"] == "nvidia.com/gpu"
        assert pod["automountServiceAccountToken"] is False


def test_single_node_cpu_job_has_no_workers_and_no_gpu_extras():
    objects = synth({**CPU_JOB, "nodes": 1})
    spec = objects["c/ml/PyTorchJob.job.yaml"]["spec"]
    assert set(spec["pytorchReplicaSpecs"]) == {"Master"}
    pod = spec["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert "tolerations" not in pod and "nodeSelector" not in pod
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    # The run config's path, the metrics' job label and node (from the downward API), torchrun's store and its
    # shutdown timeout: the grace period (31 s for the default model's checkpoint on one node) less 5 s.
    assert env == {"KUBETRAIN_RUN_CONFIG": "/etc/kubetrain/run.yaml", "KUBETRAIN_JOB": "job", "NODE_NAME": None,
                   "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1", "TORCH_ELASTIC_SHUTDOWN_TIMEOUT": "26"}
    assert pod["terminationGracePeriodSeconds"] == 31


def test_config_map_round_trips_through_the_runtime_loader(tmp_path):
    config_map = compile_job()["c/ml/ConfigMap.job-config.yaml"]
    (tmp_path / "run.yaml").write_text(config_map["data"]["run.yaml"])
    assert load_run_config(tmp_path / "run.yaml") == RunConfig.model_validate(RUN)


def test_config_change_changes_the_pod_template_hash():
    def digest(run: dict) -> str:
        template = compile_job(workload={"kind": "trainer", "run": run})["c/ml/PyTorchJob.job.yaml"]
        return template["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["metadata"]["annotations"][
            "kubetrain.dev/config-sha256"]

    assert digest(RUN) == digest(dict(RUN))
    assert digest(RUN) != digest({**RUN, "max_steps": 11})


def test_typed_props_and_dicts_build_the_same_job():
    typed = TrainingJobProps(
        name="job", image="img:1", nodes=2, procs_per_node=1, resources=NodeResources(cpu="2", memory="4Gi"),
        volumes=[ClaimVolume(name="ckpt", claim="ckpt", mount_path="/ckpt")], target=PyTorchJob(),
        workload=Trainer(run=RunConfig.model_validate(CPU_JOB["workload"]["run"])))
    assert _render(typed) == _render(CPU_JOB)


def _render(props: TrainingJobProps | dict) -> dict:
    app = App()
    TrainingJob(Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"]), "job", props)
    check_definitions(app)
    return render(app)


def test_same_job_name_in_two_namespaces():
    objects = synth({**CPU_JOB, "name": "a"}, {**CPU_JOB, "name": "a", "namespace": "other"})
    assert {"c/ml/PyTorchJob.a.yaml", "c/other/PyTorchJob.a.yaml", "c/ml/ConfigMap.a-config.yaml",
            "c/other/ConfigMap.a-config.yaml"} <= set(objects)


def test_a_name_is_claimed_once_per_namespace_across_kinds():
    # Job "a" owns ConfigMap "a-config": a job named "a-config" in the same namespace clashes with it.
    with pytest.raises(ConfigError) as info:
        synth({**CPU_JOB, "name": "a"}, {**CPU_JOB, "name": "a-config"})
    assert [(p.code, p.path) for p in info.value.problems] == [("KT110", "name")]
    with pytest.raises(ConfigError) as info:
        synth({**CPU_JOB, "name": "a"}, {**CPU_JOB, "name": "a"})
    assert {p.code for p in info.value.problems} == {"KT110", "KT010"}


def test_cluster_props_are_validated():
    with pytest.raises(ConfigError) as info:
        Cluster(App(), "c", kubernetes_version="v1.33", namespaces=[])
    assert [p.path for p in info.value.problems] == ["kubernetes_version", "namespaces"]
    with pytest.raises(ConfigError) as info:
        Cluster(App(), "c", kubernetes_version="1.23", namespaces=["kube-system"])
    assert [p.path for p in info.value.problems] == ["kubernetes_version", "namespaces"]


def test_two_clusters_with_one_name_is_a_problem_not_a_crash():
    app = App()
    Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"])
    with pytest.raises(ConfigError) as info:
        Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"])
    assert info.value.problems[0].code == "KT010"


def test_restart_budget_and_policy_are_rendered():
    spec = compile_job(max_restarts=7, backoff_limit=5)["c/ml/PyTorchJob.job.yaml"]["spec"]
    worker = spec["pytorchReplicaSpecs"]["Worker"]
    assert "--max-restarts=7" in worker["template"]["spec"]["containers"][0]["command"]
    assert worker["restartPolicy"] == "ExitCode" and spec["runPolicy"] == {"backoffLimit": 5}


def test_command_job_runs_the_users_program_under_torchrun(tmp_path):
    objects = synth({**CPU_JOB, "image": "nvcr.io/nvidia/pytorch:25.04-py3",
                     "workload": Command(command=["train.py", "--lr", "3e-4"], working_dir="/workspace",
                                         checkpoint_dir="/ckpt/run")})
    assert "c/ml/ConfigMap.job-config.yaml" not in objects, "a command job has no run config"
    job = objects["c/ml/PyTorchJob.job.yaml"]
    container = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    assert container["command"][-3:] == ["train.py", "--lr", "3e-4"]
    assert "python -m training" not in container["command"][2], "no trainer config check for a command"
    assert container["workingDir"] == "/workspace"
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(job))
    assert validate_manifests([tmp_path / "job.yaml"], Schemas(), "1.33") == (1, [])


def test_command_without_launcher_runs_as_given():
    objects = synth({**CPU_JOB, "workload": Command(command=["bash", "-c", "echo $RANK"], launcher="none")})
    container = objects["c/ml/PyTorchJob.job.yaml"]["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"][
        "containers"][0]
    assert container["command"] == ["bash", "-c", "echo $RANK"]
    assert "env" not in container  # no torchrun, so none of its settings


def test_pod_settings_reach_the_pod(tmp_path):
    settings = PodSettings(
        labels={"team": "research"}, annotations={"example.com/owner": "ml"}, node_selector={"pool": "gpu"},
        affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In",
                                   "values": ["us-east-1a"]}]}]}}},
        tolerations=[Toleration(key="dedicated", operator="Equal", value="training", effect="NoSchedule")],
        priority_class="training-high", scheduler_name="volcano", service_account="trainer",
        security_context=SecurityContext(run_as_user=1000, fs_group=1000), host_network=True,
        termination_grace_period_s=120, image_pull_policy="IfNotPresent", image_pull_secrets=["registry"])
    job = compile_job(pod=settings, volumes=[*VOLUMES, {"name": "cache", "empty_dir": "disk", "mount_path": "/cache",
                                                        "size_limit": "50Gi"},
                                             {"name": "tokens", "secret": "hf-token", "mount_path": "/secrets"}])
    manifest = job["c/ml/PyTorchJob.job.yaml"]
    template = manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]
    pod = template["spec"]
    assert template["metadata"]["labels"] == {"team": "research", "kubetrain.dev/job": "job"}
    assert template["metadata"]["annotations"]["example.com/owner"] == "ml"
    assert pod["nodeSelector"] == {"node.kubernetes.io/instance-type": "p5.48xlarge", "pool": "gpu"}
    assert pod["tolerations"][1] == {"key": "dedicated", "operator": "Equal", "value": "training",
                                     "effect": "NoSchedule"}
    assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert pod["priorityClassName"] == "training-high" and pod["schedulerName"] == "volcano"
    assert pod["serviceAccountName"] == "trainer" and pod["automountServiceAccountToken"] is False
    assert pod["securityContext"] == {"runAsUser": 1000, "fsGroup": 1000}
    assert pod["terminationGracePeriodSeconds"] == 120 and pod["imagePullSecrets"] == [{"name": "registry"}]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["cache"] == {"name": "cache", "emptyDir": {"sizeLimit": "50Gi"}}
    assert volumes["tokens"] == {"name": "tokens", "secret": {"secretName": "hf-token"}}
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(manifest))
    assert validate_manifests([tmp_path / "job.yaml"], Schemas(), "1.33") == (1, [])


def test_grace_period_leaves_room_for_the_stop_checkpoint():
    """A trainer's pods get a grace period from the expected save time of their model's checkpoint, and torchrun
    (whose shutdown timeout its ranks read too) stops the ranks 5 s before Kubernetes kills the pod."""
    def pod_and_env(**overrides: Any) -> tuple[dict, dict]:
        manifest = compile_job(**overrides)["c/ml/PyTorchJob.job.yaml"]
        pod = manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
        return pod, {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}

    pod, env = pod_and_env()  # the default model: 162M parameters, 1.9 GB with AdamW, on 2 nodes
    assert pod["terminationGracePeriodSeconds"] == 30 and env["TORCH_ELASTIC_SHUTDOWN_TIMEOUT"] == "25"
    # 6.9B parameters, 82 GB with AdamW: sharded, bf16 and checkpointed so that it fits its GPUs (KT240)
    big = {**RUN, "model": {"dim": 4096, "n_layers": 32, "n_heads": 32}, "precision": "bf16",
           "strategy": {"name": "fsdp", "activation_checkpointing": True}}
    pod, env = pod_and_env(workload={"kind": "trainer", "run": big})
    seconds = checkpoint_bytes(RunConfig.model_validate(big).model) / (2 * 250e6)
    assert pod["terminationGracePeriodSeconds"] == math.ceil(15 + 2 * seconds) == 345
    assert env["TORCH_ELASTIC_SHUTDOWN_TIMEOUT"] == "340"
    pod, env = pod_and_env(workload={"kind": "trainer", "run": big}, pod=PodSettings(termination_grace_period_s=90))
    assert pod["terminationGracePeriodSeconds"] == 90 and env["TORCH_ELASTIC_SHUTDOWN_TIMEOUT"] == "85"
    pod, env = pod_and_env(workload={"kind": "command", "command": ["train.py"]})
    assert "terminationGracePeriodSeconds" not in pod and env["TORCH_ELASTIC_SHUTDOWN_TIMEOUT"] == "25"
    # A grace period set below what the stop checkpoint needs is a warning (KT211), with the figure to use.
    app = App()
    TrainingJob(Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"]), "job",
                {**GPU_JOB, "workload": {"kind": "trainer", "run": big}, "pod": {"termination_grace_period_s": 90}})
    (warning,) = [f.problem for f in fleet_warnings(app) if f.problem.code == "KT211"]
    assert warning.path == "pod.termination_grace_period_s"
    assert "set termination_grace_period_s to at least 345" in warning.fix


def test_pod_settings_refuse_privilege_and_bad_affinity():
    with pytest.raises(ConfigError) as info:
        compile_job(pod={"security_context": {"privileged": True}, "affinity": {"nodeAffinity": {"bogus": 1}}})
    problems = {(p.code, p.path) for p in info.value.problems}
    assert ("KT001", "pod.security_context.privileged") in problems
    assert ("KT003", "pod.affinity") in problems


def test_escape_hatch_patches_the_operator_object(tmp_path):
    app = App()
    cluster = Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"])
    job = TrainingJob(cluster, "job", GPU_JOB)
    job.patch(JsonPatch.add("/spec/runPolicy/schedulingPolicy", {"minAvailable": 2, "queue": "training"}))
    manifest = yaml.safe_load(render(app)[next(p for p in render(app) if p.name == "PyTorchJob.job.yaml")])
    assert manifest["spec"]["runPolicy"]["schedulingPolicy"] == {"minAvailable": 2, "queue": "training"}
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(manifest))
    assert validate_manifests([tmp_path / "job.yaml"], Schemas(), "1.33") == (1, [])


def test_elastic_job_has_workers_only_and_an_elastic_policy(tmp_path):
    objects = compile_job(nodes=2, elastic={"min_nodes": 1, "max_nodes": 4}, max_restarts=5,
                          workload={"kind": "trainer", "run": {**RUN, "batch": {"global_size": 96, "micro_size": 1}}})
    job = objects["c/ml/PyTorchJob.job.yaml"]
    spec = job["spec"]
    assert spec["elasticPolicy"] == {"rdzvBackend": "c10d", "minReplicas": 1, "maxReplicas": 4, "maxRestarts": 5}
    assert set(spec["pytorchReplicaSpecs"]) == {"Worker"} and spec["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2
    command = spec["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["command"]
    # The operator sets PET_RDZV_ENDPOINT and PET_NNODES=1:4 but, without a Master, no PET_NPROC_PER_NODE.
    assert "--nproc-per-node=8" in command and not any(arg.startswith("--rdzv-endpoint") for arg in command)
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(job))
    assert validate_manifests([tmp_path / "job.yaml"], Schemas(), "1.33") == (1, [])
