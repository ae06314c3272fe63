"""Rules whose checks are tested on their own elsewhere, met where a user meets them: reported by synth for a fleet.

Each case builds a fleet with one mistake and synthesizes it; the rule must be in what synth reports, with its
field path as the user wrote it. (tests/rules_fired/rules_reached.py fails the full run for any rule no test sees synth report.)
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from kubetrain import App, ArgoCd, ArgoCdProps, Cluster, EfaNodePool, FsxLustre, JsonPatch, PyTorchJob, TrainingJob
from kubetrain.pipeline import fleet_findings, synth

from kubetrain_runtime.problems import ConfigError

RUN = {"batch": {"global_size": 128, "micro_size": 4}, "max_steps": 1000, "checkpoint": {"dir": "/ckpt/run"}}
JOB = {"image": "ghcr.io/kubetrain/kubetrain:0.1.0", "nodes": 2, "procs_per_node": 1,
       "resources": {"cpu": "2", "memory": "4Gi"}, "volumes": [{"name": "ckpt", "claim": "ckpt", "mount_path": "/ckpt"}],
       "workload": {"kind": "trainer", "run": RUN}}
FSX = {"file_system_id": "fs-0abc1230", "dns_name": "fs-0abc1230.fsx.us-west-2.amazonaws.com",
       "mount_name": "abcdefgh", "capacity_gib": 1200}
P5 = {"instance_types": ["p5.48xlarge"], "zones": ["us-west-2a"], "subnet_ids": ["subnet-0abc1234"],
      "security_group_ids": ["sg-0efa1234"], "role": "KarpenterNodeRole-prod", "max_nodes": 4}


def fleet() -> tuple[App, Cluster]:
    app = App()
    return app, Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"])


def reported(app: App) -> list[tuple[str, str]]:
    return [(f.problem.code, f.problem.path) for f in fleet_findings(app)]


@pytest.mark.parametrize(("run", "code", "path"), [
    ({**RUN, "optimizer": {"lr": 1e-4, "min_lr": 1e-3}}, "KT203", "workload.run.optimizer.min_lr"),
    ({**RUN, "data": {"source": "tokens"}}, "KT204", "workload.run.data.path"),
    ({**RUN, "data": {"source": "synthetic", "path": "/ckpt/tokens.bin"}}, "KT205", "workload.run.data.path"),
    ({**RUN, "model": {"vocab_size": 70_000}, "data": {"source": "tokens", "path": "/ckpt/tokens.bin"}}, "KT206",
     "workload.run.data.dtype"),
    ({**RUN, "checkpoint": {"dir": "/ckpt/run", "local_dir": "/tmp/fast"}}, "KT207",
     "workload.run.checkpoint.local_interval"),
    ({**RUN, "model": {"kind": "hf", "model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
                       "num_attention_heads": 8, "num_key_value_heads": 3, "intermediate_size": 128,
                       "vocab_size": 256}}, "KT232", "workload.run.model.num_key_value_heads"),
    ({**RUN, "data": {"source": "parquet", "path": "/ckpt/data"}}, "KT236", "workload.run.data.tokenizer"),
])
def test_a_run_config_mistake_is_reported_on_the_job(run: dict, code: str, path: str) -> None:
    app, cluster = fleet()
    TrainingJob(cluster, "job", {**JOB, "workload": {"kind": "trainer", "run": run}})
    assert (code, path) in reported(app)


def test_a_dataset_on_a_writable_claim_is_a_warning() -> None:
    app, cluster = fleet()
    data = FsxLustre(cluster, "data", **FSX)
    run = {**RUN, "data": {"source": "tokens", "path": "/data/tokens.bin"}}
    TrainingJob(cluster, "job", {**JOB, "volumes": [*JOB["volumes"], {"name": "data", "claim": data,
                                                                      "mount_path": "/data"}],
                                 "workload": {"kind": "trainer", "run": run}})
    assert reported(app) == [("KT413", "volumes.1")]


def test_a_patch_that_drops_the_pools_toleration() -> None:
    """A job on a pool gets the pool's tolerations; a patch that replaces them leaves the pods unschedulable."""
    app, cluster = fleet()
    pool = EfaNodePool(cluster, "p5", **P5)
    job = TrainingJob(cluster, "job", {**JOB, "procs_per_node": 8, "pool": pool, "target": PyTorchJob(),
                                       "resources": {"cpu": "96", "memory": "1000Gi"}})
    assert reported(app) == []
    for replica in ("Master", "Worker"):
        job.patch(JsonPatch.replace(f"/spec/pytorchReplicaSpecs/{replica}/template/spec/tolerations", []))
    assert reported(app) == [("KT402", "tolerations")]


def test_synth_refuses_argo_cd_objects_it_cannot_deliver(tmp_path: Path) -> None:
    """Argo CD delivery's problems come out of synth's render step: a cluster without a destination (and a
    destination without a cluster), a cluster named like the Argo CD folder, a kind without a sync wave."""
    app, cluster = fleet()
    argocd = Cluster(app, "argocd", kubernetes_version="1.33", namespaces=["ops"])
    import cdk8s
    cdk8s.ApiObject(argocd, "widget", api_version="example.com/v1", kind="Widget",
                    metadata=cdk8s.ApiObjectMetadata(name="w", namespace="ops"))
    ArgoCd(app, "argocd-delivery", ArgoCdProps(repo_url="https://github.com/example/fleet.git",
                                               destinations={"prod": {"name": "prod"}, "argocd": {"name": "in"}}))
    with pytest.raises(ConfigError) as caught:
        synth(app, tmp_path / "dist", validate=False)
    assert sorted(p.code for p in caught.value.problems) == ["KT501", "KT501", "KT502", "KT503"]


def test_synth_refuses_an_output_folder_it_did_not_write(tmp_path: Path) -> None:
    app, cluster = fleet()
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError) as caught:
        synth(app, tmp_path)
    assert [p.code for p in caught.value.problems] == ["KT601"]
    assert (tmp_path / "notes.txt").read_text() == "mine"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc, where nothing can be created")
def test_synth_reports_an_output_folder_it_cannot_write() -> None:
    """Even root cannot create a folder in /proc: the OSError is KT603, one line, nothing written."""
    app, cluster = fleet()
    with pytest.raises(ConfigError) as caught:
        synth(app, "/proc/kubetrain-synth/dist")
    assert [p.code for p in caught.value.problems] == ["KT603"]
