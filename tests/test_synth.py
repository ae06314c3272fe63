"""The fleet synthesizes into dist/ the same way from every entry point, byte for byte."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from conftest import ROOT, dist_file, kubetrain, read_tree, run


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("synth") / "dist"
    result = kubetrain("synth", "--outdir", str(out))
    assert result.returncode == 0, result.stderr
    # A fresh interpreter started with no JSII_NODE must pick the wheel's Node and print nothing but the fleet's
    # one warning: prod's learning-rate ablation runs only on quota its research queue borrows (KT442).
    assert [line.split(" [")[0].split(": ")[:3] for line in result.stderr.splitlines()] == [
        ["warning", "prod/ml-prod/gpt-1b-lr-ablation", "queue"]], result.stderr
    return read_tree(out)


@pytest.mark.processes
def test_committed_dist_is_what_synth_produces(synthesized):
    assert read_tree(ROOT / "dist") == synthesized, "dist/ is stale: run `kubetrain synth` and commit it"


@pytest.mark.processes
def test_python_m_apps_and_cdk8s_outdir_write_the_same(synthesized, tmp_path):
    out = tmp_path / "viaenv"
    result = run([sys.executable, "-m", "apps"], env={"CDK8S_OUTDIR": str(out)})
    assert result.returncode == 0, result.stderr
    assert read_tree(out) == synthesized


@pytest.mark.processes
def test_synth_is_byte_identical_across_runs(synthesized, tmp_path):
    out = tmp_path / "again"
    assert kubetrain("synth", "--outdir", str(out)).returncode == 0
    assert read_tree(out) == synthesized


@pytest.mark.processes
def test_one_file_per_object_under_cluster_and_namespace(synthesized):
    job = dist_file("dev", "PyTorchJob", "tiny-gpt-pytorchjob")
    assert str(job.relative_to(ROOT / "dist")) in synthesized
    assert f"dev/ml-dev/ConfigMap.{job.name.split('.')[1]}-config.yaml" in synthesized
    assert "dev/_cluster/Namespace.ml-dev.yaml" in synthesized
    assert str(dist_file("prod", "TrainJob", "gpt-1b-fsdp").relative_to(ROOT / "dist")) in synthesized
    for path, text in synthesized.items():
        if path == ".kubetrain-synth":
            continue
        assert text.count(b"\nkind: ") + text.startswith(b"kind: ") == 1, f"{path} holds more than one object"


@pytest.mark.skipif(not (ROOT / "node_modules" / "cdk8s-cli").is_dir(),
                    reason="cdk8s CLI not installed (npm ci installs it from package.json)")
@pytest.mark.processes
def test_cdk8s_cli_synth_writes_the_same_without_a_system_node(synthesized, tmp_path):
    work = tmp_path / "project"
    shutil.copytree(ROOT, work, ignore=shutil.ignore_patterns("dist", "node_modules", ".venv", ".git", "*.egg-info"))
    (work / "node_modules").symlink_to(ROOT / "node_modules")
    # Nothing on PATH, so no system node: `kubetrain cdk8s` brings the wheel's (and this python).
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    result = run([sys.executable, "-m", "kubetrain", "cdk8s", "synth"], cwd=work, env={"PATH": str(empty)})
    assert result.returncode == 0, result.stdout + result.stderr
    assert read_tree(work / "dist") == synthesized
    # Quiet on a machine without internet: the CLI's upgrade check is off, so no stack trace of a failed fetch.
    assert "Error" not in result.stderr and "at " not in result.stderr, result.stderr


@pytest.mark.processes
def test_validate_never_starts_jsii():
    # `kubetrain validate` and its module import no cdk8s (so no Node process starts): -X importtime names
    # every module a run imports.
    result = run([sys.executable, "-X", "importtime", "-m", "kubetrain", "validate", "dist"])
    assert result.returncode == 0, result.stdout + result.stderr
    imported = result.stderr
    assert "kubetrain.validation.validate" in imported
    assert " cdk8s" not in imported and " jsii" not in imported and "kubetrain.pipeline" not in imported


def test_render_steps_run_after_every_chart_and_their_objects_are_validated(tmp_path):
    from kubetrain.output.writer import manifest_path
    from kubetrain.pipeline import synth
    from kubetrain.state import add_render_step

    from apps import build
    from kubetrain_runtime.problems import ConfigError

    def annotate(objects):
        for obj in objects.values():
            obj["metadata"].setdefault("annotations", {})["argocd.argoproj.io/sync-wave"] = "1"
        extra = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "added", "namespace": "ml-dev"},
                 "data": {"a": "b"}}
        objects[manifest_path("dev", extra)] = extra

    app = build()
    add_render_step(app, annotate)
    written = synth(app, tmp_path / "out")
    assert Path("dev/ml-dev/ConfigMap.added.yaml") in written
    assert all("argocd.argoproj.io/sync-wave: '1'" in text
               for path, text in written.items() if path.name != "ConfigMap.added.yaml")

    broken = build()
    job = dist_file("dev", "PyTorchJob", "tiny-gpt-pytorchjob").relative_to(ROOT / "dist")
    add_render_step(broken, lambda objects: objects[job]["spec"].update({"runPolicyy": {}}))
    with pytest.raises(ConfigError) as raised:
        synth(broken, tmp_path / "never")
    assert "[KT602]" in "\n".join(raised.value.lines()) and "'runPolicyy' was unexpected" in "\n".join(
        raised.value.lines())
    assert not (tmp_path / "never").exists()


@pytest.mark.processes
def test_an_outdir_below_a_file_is_refused_before_the_fleet_is_built(tmp_path):
    (tmp_path / "notes.txt").write_text("mine\n")
    result = kubetrain("synth", "--outdir", str(tmp_path / "notes.txt" / "dist"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"{tmp_path / 'notes.txt'} is not a folder" in result.stderr and "[KT601]" in result.stderr
    assert (tmp_path / "notes.txt").read_text() == "mine\n"
