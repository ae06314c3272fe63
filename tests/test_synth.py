"""The fleet synthesizes into dist/ the same way from every entry point, byte for byte."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from conftest import ROOT, kubetrain, read_tree, run
from kubetrain.node_runtime import wheel_node


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("synth") / "dist"
    result = kubetrain("synth", "--outdir", str(out))
    assert result.returncode == 0, result.stderr
    # A fresh interpreter started with no JSII_NODE must pick the wheel's Node and print nothing.
    assert result.stderr == ""
    return read_tree(out)


def test_committed_dist_is_what_synth_produces(synthesized):
    assert read_tree(ROOT / "dist") == synthesized, "dist/ is stale: run `kubetrain synth` and commit it"


def test_python_m_apps_and_cdk8s_outdir_write_the_same(synthesized, tmp_path):
    out = tmp_path / "viaenv"
    result = run([sys.executable, "-m", "apps"], env={"CDK8S_OUTDIR": str(out)})
    assert result.returncode == 0, result.stderr
    assert read_tree(out) == synthesized


def test_synth_is_byte_identical_across_runs(synthesized, tmp_path):
    out = tmp_path / "again"
    assert kubetrain("synth", "--outdir", str(out)).returncode == 0
    assert read_tree(out) == synthesized


def test_one_file_per_object_under_cluster_and_namespace(synthesized):
    assert "dev/ml-dev/PyTorchJob.tiny-gpt.yaml" in synthesized
    assert "dev/ml-dev/ConfigMap.tiny-gpt-config.yaml" in synthesized
    assert "dev/_cluster/Namespace.ml-dev.yaml" in synthesized
    assert "prod/ml-prod/PyTorchJob.gpt-1b-fsdp.yaml" in synthesized
    for path, text in synthesized.items():
        if path == ".kubetrain-synth":
            continue
        assert text.count(b"\nkind: ") + text.startswith(b"kind: ") == 1, f"{path} holds more than one object"


def _cdk8s_cli() -> str | None:
    local = ROOT / "node_modules" / ".bin" / "cdk8s"
    return str(local) if local.exists() else shutil.which("cdk8s")


@pytest.mark.skipif(_cdk8s_cli() is None, reason="cdk8s CLI not installed (npm ci installs it from package.json)")
def test_cdk8s_cli_synth_writes_the_same(synthesized, tmp_path):
    work = tmp_path / "project"
    shutil.copytree(ROOT, work, ignore=shutil.ignore_patterns("dist", "node_modules", ".venv", ".git", "*.egg-info"))
    node_bin = str(Path(wheel_node()).parent)
    python_bin = str(Path(sys.executable).parent)
    # cdk8s.yaml runs `python -m apps` through a shell: put this interpreter and a node first on PATH.
    path = os.pathsep.join([python_bin, node_bin, os.environ["PATH"]])
    result = run([_cdk8s_cli(), "synth"], cwd=work, env={"PATH": path})
    assert result.returncode == 0, result.stdout + result.stderr
    assert read_tree(work / "dist") == synthesized
