"""`kubetrain validate`: strict, offline, and it catches what the API server would drop."""

from __future__ import annotations

from pathlib import Path

import yaml

from conftest import ROOT, kubetrain

JOB = ROOT / "dist" / "dev" / "ml-dev" / "PyTorchJob.tiny-gpt.yaml"


def write(tmp_path: Path, name: str, obj: dict) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(obj))
    return path


def test_committed_dist_is_valid(crds):
    result = kubetrain("validate", "dist", "--crds", str(crds))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 problems" in result.stdout


def test_unknown_field_in_custom_resource_is_an_error(crds, tmp_path):
    job = yaml.safe_load(JOB.read_text())
    container = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    container["imagePullPolice"] = "Always"  # a typo the API server would silently prune
    job["spec"]["runPolicy"]["backofLimit"] = 3
    path = write(tmp_path, "job.yaml", job)
    result = kubetrain("validate", str(path), "--crds", str(crds))
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert any(line.startswith(f"{path}: PyTorchJob/tiny-gpt: spec.pytorchReplicaSpecs.Master.template.spec."
                               "containers[0]: ") and "'imagePullPolice' was unexpected" in line for line in lines)
    assert any("spec.runPolicy: " in line and "'backofLimit' was unexpected" in line for line in lines)
    assert "2 problems" in result.stderr


def test_wrong_type_and_metadata_typo_in_custom_resource(crds, tmp_path):
    job = yaml.safe_load(JOB.read_text())
    job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = "one"
    job["metadata"]["label"] = {"a": "b"}
    result = kubetrain("validate", str(write(tmp_path, "job.yaml", job)), "--crds", str(crds))
    assert result.returncode == 1
    assert "spec.pytorchReplicaSpecs.Master.replicas: 'one' is not of type 'integer'" in result.stdout
    assert "metadata: " in result.stdout and "'label' was unexpected" in result.stdout


def test_builtin_kinds_are_checked_strictly(tmp_path):
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "b"},
                  "dataa": {"c": "d"}}
    result = kubetrain("validate", str(write(tmp_path, "cm.yaml", config_map)), "--kubernetes-version", "1.33")
    assert result.returncode == 1
    assert "ConfigMap/x: (object): Additional properties are not allowed ('dataa' was unexpected)" in result.stdout


def test_custom_resource_without_crds_is_unknown_kind():
    result = kubetrain("validate", str(JOB))
    assert result.returncode == 1
    assert "unknown kind kubeflow.org/v1 PyTorchJob" in result.stdout and "--crds" in result.stdout


def test_unknown_kind_is_an_error(crds, tmp_path):
    obj = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    result = kubetrain("validate", str(write(tmp_path, "w.yaml", obj)), "--crds", str(crds))
    assert result.returncode == 1
    assert "Widget/w: (object): unknown kind example.com/v1 Widget" in result.stdout


def test_unsupported_kubernetes_version_is_bad_input():
    result = kubetrain("validate", "dist", "--kubernetes-version", "1.9")
    assert result.returncode == 2
    assert "is not one of" in result.stderr and "Traceback" not in result.stderr
