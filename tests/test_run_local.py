"""`kubetrain run-local` trains the committed dev job from dist/, as the operator would run it."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from conftest import ROOT, kubetrain
from kubetrain.run_local import find_job, plan_pods

pytest.importorskip("torch", reason="run-local starts the training runtime, which needs torch")


def metrics(stdout: str, pod: str = "master-0") -> list[dict]:
    prefix = f"[{pod}] {{"
    return [json.loads(line[len(pod) + 3:]) for line in stdout.splitlines() if line.startswith(prefix)]


def test_dev_job_trains_from_dist(tmp_path):
    result = kubetrain("run-local", "dev/tiny-gpt", "--steps", "30", "--workdir", str(tmp_path))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    records = metrics(result.stdout)
    steps = [r for r in records if r["event"] == "step"]
    assert [r["step"] for r in steps] == list(range(1, 31))
    assert steps[-1]["loss"] < steps[0]["loss"] - 1.0
    assert records[-1]["event"] == "finished" and records[-1]["step"] == 30
    digests = records[-1]["weights_sha256_per_rank"]
    assert len(digests) == 2 and len(set(digests)) == 1  # a Master and a Worker, one rank each
    checkpoints = tmp_path / "volumes" / "checkpoints" / "tiny-gpt"
    assert sorted(p.name for p in checkpoints.glob("step-*")) == ["step-00000020", "step-00000030"]  # keep: 2
    assert len(list((checkpoints / "step-00000030").glob("*.distcp"))) == 2
    assert (tmp_path / "pods" / "worker-0" / "config" / "run.yaml").is_file()


def test_pods_get_the_operator_environment_and_the_callers(tmp_path, monkeypatch):
    monkeypatch.setenv("KUBETRAIN_CALLER_MARK", "kept")
    pods = plan_pods(find_job(ROOT / "dist", "tiny-gpt"), tmp_path, steps=5, overrides=["seed=3"])
    assert [p.name for p in pods] == ["master-0", "worker-0"]
    for rank, pod in enumerate(pods):
        assert pod.env["KUBETRAIN_CALLER_MARK"] == "kept"
        assert pod.env["PET_NODE_RANK"] == pod.env["RANK"] == str(rank)
        assert pod.env["PET_NNODES"] == "2" and pod.env["PET_NPROC_PER_NODE"] == "1" and pod.env["WORLD_SIZE"] == "2"
        assert pod.env["MASTER_PORT"] == pods[0].env["MASTER_PORT"]
        assert pod.command[:3] == [sys.executable, "-m", "torch.distributed.run"]
        config = pod.command[pod.command.index("--config") + 1]
        assert config == str((tmp_path / "pods" / pod.name / "config" / "run.yaml").resolve())
        sets = [pod.command[i + 1] for i, arg in enumerate(pod.command) if arg == "--set"]
        assert sets == [f"checkpoint.dir={(tmp_path / 'volumes' / 'checkpoints').resolve()}/tiny-gpt",
                        "max_steps=5", "seed=3"]


def test_elastic_pods_get_the_rendezvous_and_no_ranks(tmp_path):
    pods = plan_pods(find_job(ROOT / "dist", "dev/tiny-gpt-elastic"), tmp_path, steps=5, overrides=[])
    assert [p.name for p in pods] == ["worker-0", "worker-1"]
    for pod in pods:
        assert pod.env["PET_NNODES"] == "1:2" and pod.env["PET_RDZV_BACKEND"] == "c10d"
        assert pod.env["PET_RDZV_ENDPOINT"] == pods[0].env["PET_RDZV_ENDPOINT"]
        assert pod.env["PET_MAX_RESTARTS"] == "3"
        # No Master: ranks come from each rendezvous, not from the pod index.
        assert not {"RANK", "PET_NODE_RANK", "MASTER_ADDR", "WORLD_SIZE"} & set(pod.env) - set(os.environ)


def test_bad_override_fails_the_job(tmp_path):
    result = kubetrain("run-local", "dev/tiny-gpt", "--workdir", str(tmp_path), "--set", "optimizer.lr=-1")
    assert result.returncode != 0
    assert "optimizer.lr: Input should be greater than 0" in result.stdout


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has GPUs")
def test_gpu_job_is_refused_without_gpus(tmp_path):
    result = kubetrain("run-local", "prod/gpt-1b-fsdp", "--workdir", str(tmp_path))
    assert result.returncode == 2
    assert "each pod requests 8 GPUs and this machine has none" in result.stderr
    assert "Traceback" not in result.stderr


def test_unknown_job(tmp_path):
    result = kubetrain("run-local", "dev/nope", "--workdir", str(tmp_path), cwd=Path(ROOT))
    assert result.returncode == 2 and "no PyTorchJob named 'nope'" in result.stderr


def test_kubernetes_variable_references_are_expanded():
    from kubetrain.run_local import expand_env_refs

    env = {"PET_MASTER_ADDR": "127.0.0.1", "PET_MASTER_PORT": "2345"}
    assert expand_env_refs("$(PET_MASTER_ADDR):$(PET_MASTER_PORT)", env) == "127.0.0.1:2345"
    assert expand_env_refs("$(UNDEFINED) $$(PET_MASTER_PORT)", env) == "$(UNDEFINED) $(PET_MASTER_PORT)"
