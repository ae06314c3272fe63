"""Create-once runs are named by what is rendered, so a kubetrain upgrade (or a patch) that changes how a run renders
is a new run Argo CD can create, never a sync that fails on a running run's immutable spec; `kubetrain diff` says
which running runs a change replaces, that their pods stop, and where the new run resumes from."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import cdk8s
import pytest
import yaml
from kubetrain import (
    App,
    ClaimVolume,
    Cluster,
    Command,
    NodeResources,
    PyTorchJob,
    Trainer,
    TrainingJob,
    TrainingJobProps,
)
from kubetrain.cli import app as cli
from kubetrain.cost.cost_props import Estimate
from kubetrain.gitops.argocd_construct import ArgoCd
from kubetrain.jobs.run_names import HASH_PLACEHOLDER
from kubetrain.pipeline import fleet_findings, fleet_warnings, render_objects, synth
from typer.testing import CliRunner

from apps.dev import tiny_gpt_run

IMAGE = "ghcr.io/kubetrain/kubetrain:0.1.0"


def _job(cluster: Cluster, checkpoints: str = "/checkpoints/gpt", **props: Any) -> TrainingJob:
    return TrainingJob(cluster, "gpt", TrainingJobProps(**{
        "name": "gpt", "image": IMAGE, "nodes": 2, "procs_per_node": 1,
        "resources": NodeResources(cpu="2", memory="4Gi"),
        "volumes": [ClaimVolume(name="checkpoints", claim="checkpoints", mount_path="/checkpoints")],
        "target": PyTorchJob(), "workload": Trainer(run=tiny_gpt_run(checkpoints)), **props}))


def _fleet(*patches: cdk8s.JsonPatch, run_names: str = "content-hash", **props: Any) -> App:
    app = App()
    cluster = Cluster(app, "dev", kubernetes_version="1.33", namespaces=["ml"], run_names=run_names)
    job = _job(cluster, **props)
    if patches:
        job.patch(*patches)
    return app


def _run_name(app: App) -> str:
    (name,) = [obj["metadata"]["name"] for obj in render_objects(app).values() if obj["kind"] == "PyTorchJob"]
    return name


def test_the_name_hashes_what_is_rendered_not_the_props() -> None:
    plain = _run_name(_fleet())
    assert plain == _run_name(_fleet()) and plain.startswith("gpt-") and HASH_PLACEHOLDER not in plain
    # Same props, rendered differently (what a kubetrain upgrade or a patch does to the spec): another run.
    patched = _run_name(_fleet(cdk8s.JsonPatch.add("/spec/runPolicy/backoffLimit", 7)))
    assert patched != plain
    # What Argo CD patches in place does not rename: an annotation, a new cost estimate.
    assert _run_name(_fleet(cdk8s.JsonPatch.add("/metadata/annotations/team", "nlp"))) == plain
    assert _run_name(_fleet(estimate=Estimate(mfu=0.5))) == plain


def test_every_name_derived_from_the_run_follows_it() -> None:
    objects = render_objects(_fleet(cdk8s.JsonPatch.add("/spec/runPolicy/backoffLimit", 7)))
    name = next(obj["metadata"]["name"] for obj in objects.values() if obj["kind"] == "PyTorchJob")
    text = yaml.safe_dump(list(objects.values()))
    assert HASH_PLACEHOLDER not in text
    config = next(obj for obj in objects.values() if obj["kind"] == "ConfigMap" and obj["metadata"]["name"] ==
                  f"{name}-config")  # the ConfigMap the pods mount carries the final name
    assert config["metadata"]["labels"]["kubetrain.dev/job"] == "gpt"
    job = next(obj for obj in objects.values() if obj["kind"] == "PyTorchJob")
    volumes = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["volumes"]
    assert any((volume.get("configMap") or {}).get("name") == f"{name}-config" for volume in volumes)
    assert job["spec"]["runPolicy"]["backoffLimit"] == 7


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                          check=True, capture_output=True, text=True).stdout


def _diff(repo: Path, before: App, after: App) -> str:
    _git(repo, "init", "-q", "-b", "main")
    synth(before, repo / "dist")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "fleet")
    synth(after, repo / "dist")
    cwd = os.getcwd()
    os.chdir(repo)
    try:
        result = CliRunner().invoke(cli, ["diff"])
    finally:
        os.chdir(cwd)
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.processes
def test_the_diff_names_the_running_run_a_change_replaces_and_where_it_resumes(tmp_path: Path) -> None:
    before, after = _fleet(), _fleet(cdk8s.JsonPatch.add("/spec/runPolicy/backoffLimit", 7))
    old, new = _run_name(before), _run_name(after)
    text = _diff(tmp_path, before, after)
    assert "running runs:" in text
    assert (f"  dev/ml/gpt: replaces run {old} with {new}: if {old} is running, Argo CD prunes it and its pods stop "
            f"(work since its last checkpoint is lost); {new} resumes from the newest verified checkpoint in "
            "/checkpoints/gpt") in text
    run = yaml.safe_load((tmp_path / f"dist/dev/ml/PyTorchJob.{new}.yaml").read_text())
    assert run["metadata"]["annotations"]["kubetrain.dev/checkpoint-dir"] == "/checkpoints/gpt"


@pytest.mark.processes
def test_a_replacement_that_moves_the_checkpoints_starts_over_and_says_so(tmp_path: Path) -> None:
    before, after = _fleet(), _fleet(checkpoints="/checkpoints/gpt-v2")
    text = _diff(tmp_path, before, after)
    assert f"{_run_name(after)} starts from step 0: it checkpoints to /checkpoints/gpt-v2, not the old run's " \
           "/checkpoints/gpt" in text


@pytest.mark.processes
def test_a_command_job_resumes_only_if_its_program_loads_its_checkpoint(tmp_path: Path) -> None:
    def fleet(steps: int) -> App:
        app = App()
        cluster = Cluster(app, "dev", kubernetes_version="1.33", namespaces=["ml"], run_names="content-hash")
        _job(cluster, workload=Command(command=["train.py", f"--steps={steps}"], checkpoint_dir="/checkpoints/own"))
        return app
    text = _diff(tmp_path, fleet(10), fleet(20))
    assert "resumes from /checkpoints/own if the program loads its newest checkpoint there" in text


@pytest.mark.processes
def test_a_run_changed_under_its_own_name_is_one_argo_cd_cannot_sync(tmp_path: Path) -> None:
    text = _diff(tmp_path, _fleet(run_names="fixed"), _fleet(cdk8s.JsonPatch.add("/spec/runPolicy/backoffLimit", 7),
                                                             run_names="fixed"))
    assert "  dev/ml/gpt: run gpt changes under its own name: while it exists Argo CD cannot sync it" in text
    assert 'Cluster(run_names="content-hash")' in text


def test_argo_cd_delivering_runs_under_fixed_names_is_a_warning_at_synth(tmp_path: Path) -> None:
    def fleet(run_names: str) -> App:
        app = _fleet(run_names=run_names)
        ArgoCd(app, "argocd", repo_url="https://github.com/example/fleet.git", destinations={"dev": {"name": "dev"}})
        return app
    fixed = fleet("fixed")
    synth(fixed, tmp_path / "fixed")  # a warning: synth writes
    (warning,) = [f for f in fleet_warnings(fixed) if f.problem.code == "KT504"]
    assert warning.where == "dev" and warning.problem.path == "run_names" and "(gpt)" in warning.problem.message
    assert "content-hash" in warning.problem.fix
    hashed = fleet("content-hash")
    synth(hashed, tmp_path / "hashed")
    assert not [f for f in fleet_findings(hashed) if f.problem.code == "KT504"]
