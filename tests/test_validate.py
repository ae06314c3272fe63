"""`kubetrain validate`: strict, offline, and it catches what the API server would drop."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import dist_file, kubetrain

JOB = dist_file("dev", "PyTorchJob", "tiny-gpt-pytorchjob")


def write(tmp_path: Path, name: str, obj: dict) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(obj))
    return path


@pytest.mark.processes
def test_committed_dist_is_valid_with_the_shipped_schemas_and_the_upstream_crds(crds):
    for extra in ([], ["--crds", str(crds)]):
        result = kubetrain("validate", "dist", *extra)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "0 problems" in result.stdout


def test_shipped_schemas_are_what_the_generator_writes(crds, tmp_path):
    from kubetrain.validation.schemas import PROVENANCE, SHIPPED, generate

    # A kind whose CRD the upstream folder lacks keeps its shipped schema; every other one is regenerated.
    for path in SHIPPED.iterdir():
        (tmp_path / path.name).write_bytes(path.read_bytes())
    written = generate(crds, tmp_path)
    shipped = sorted(p.name for p in SHIPPED.iterdir() if p.name.endswith(".json"))
    assert sorted(p.name for p in tmp_path.iterdir()) == shipped, "run scripts/generate_schemas.py and commit"
    assert len(written) > 10, written
    for name in shipped:
        assert (tmp_path / name).read_text() == (SHIPPED / name).read_text(), f"{name} is stale"
    assert "sha256" in (SHIPPED / PROVENANCE).read_text()


@pytest.mark.processes
def test_unknown_field_in_custom_resource_is_an_error(crds, tmp_path):
    job = yaml.safe_load(JOB.read_text())
    container = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    container["imagePullPolice"] = "Always"  # a typo the API server would silently prune
    job["spec"]["runPolicy"]["backofLimit"] = 3
    path = write(tmp_path, "job.yaml", job)
    result = kubetrain("validate", str(path), "--crds", str(crds))
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    name = JOB.name.split(".")[1]
    assert any(line.startswith(f"{path}: PyTorchJob/{name}: spec.pytorchReplicaSpecs.Master.template.spec."
                               "containers[0]: ") and "'imagePullPolice' was unexpected" in line for line in lines)
    assert any("spec.runPolicy: " in line and "'backofLimit' was unexpected" in line for line in lines)
    assert "2 problems" in result.stderr


@pytest.mark.processes
def test_wrong_type_and_metadata_typo_in_custom_resource(crds, tmp_path):
    job = yaml.safe_load(JOB.read_text())
    job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = "one"
    job["metadata"]["label"] = {"a": "b"}
    result = kubetrain("validate", str(write(tmp_path, "job.yaml", job)), "--crds", str(crds))
    assert result.returncode == 1
    assert "spec.pytorchReplicaSpecs.Master.replicas: 'one' is not of type 'integer'" in result.stdout
    assert "metadata: " in result.stdout and "'label' was unexpected" in result.stdout


@pytest.mark.processes
def test_builtin_kinds_are_checked_strictly(tmp_path):
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "b"},
                  "dataa": {"c": "d"}}
    result = kubetrain("validate", str(write(tmp_path, "cm.yaml", config_map)), "--kubernetes-version", "1.33")
    assert result.returncode == 1
    assert "ConfigMap/x: (object): Additional properties are not allowed ('dataa' was unexpected)" in result.stdout


@pytest.mark.processes
def test_custom_resources_validate_without_any_crd_folder(tmp_path):
    job = yaml.safe_load(JOB.read_text())
    job["spec"]["runPolicy"]["backofLimit"] = 3
    result = kubetrain("validate", str(write(tmp_path, "job.yaml", job)))
    assert result.returncode == 1 and "'backofLimit' was unexpected" in result.stdout


@pytest.mark.processes
def test_unknown_kind_is_an_error(tmp_path):
    obj = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    result = kubetrain("validate", str(write(tmp_path, "w.yaml", obj)))
    assert result.returncode == 1
    assert "Widget/w: (object): unknown kind example.com/v1 Widget" in result.stdout and "--crds" in result.stdout


@pytest.mark.processes
def test_names_are_checked_per_kind(tmp_path):
    job = yaml.safe_load(JOB.read_text())
    job["metadata"]["name"] = "tiny.gpt"  # a fine ConfigMap name, but PyTorchJob names become Service names
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "tiny.gpt"}}
    result = kubetrain("validate", str(write(tmp_path, "job.yaml", job)), str(write(tmp_path, "cm.yaml", config_map)))
    assert result.returncode == 1
    assert "PyTorchJob/tiny.gpt: metadata.name: 'tiny.gpt' is not a DNS-1035 label" in result.stdout
    assert "ConfigMap" not in result.stdout


@pytest.mark.processes
def test_bad_files_are_findings_not_crashes(tmp_path):
    (tmp_path / "latin1.yaml").write_bytes(b"kind: ConfigMap\n# caf\xe9\n")
    (tmp_path / "conflict.yaml").write_text("<<<<<<< HEAD\nkind: A\n=======\nkind: B\n>>>>>>> x\n")
    old = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml", "annotations": {
        "kubetrain.dev/kubernetes-version": "1.2"}}}
    (tmp_path / "c" / "_cluster").mkdir(parents=True)
    write(tmp_path / "c" / "_cluster", "Namespace.ml.yaml", old)
    result = kubetrain("validate", str(tmp_path))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "latin1.yaml: ?: (object): line 2: byte 0xe9 is not UTF-8 text" in result.stdout
    assert "conflict.yaml: ?: (object): line 1: a git merge conflict marker (<<<<<<<) is left in the file; fix: " \
           "never resolve conflicts in dist/ by hand" in result.stdout
    assert "Kubernetes 1.2 is older than every schema kubetrain ships" in result.stdout


@pytest.mark.processes
def test_a_crd_folder_with_a_template_is_bad_input(tmp_path):
    (tmp_path / "crds").mkdir()
    (tmp_path / "crds" / "chart.yaml").write_text("apiVersion: {{ .Values.api }}\nkind: {{ .Values.kind }\n")
    result = kubetrain("validate", "dist", "--crds", str(tmp_path / "crds"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "chart.yaml: not a CRD kubetrain can read" in result.stderr


@pytest.mark.processes
def test_unsupported_kubernetes_version_is_bad_input():
    result = kubetrain("validate", "dist", "--kubernetes-version", "1.9")
    assert result.returncode == 2
    assert "is not one of" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.processes
def test_output_is_plain_lines_when_not_a_terminal():
    result = kubetrain("validate", "dist")
    assert result.returncode == 0 and "\x1b[" not in result.stdout + result.stderr
    assert result.stdout.splitlines() == ["valid: 15 objects checked, 0 invalid, 0 problems"] or \
        result.stdout.startswith("valid: ")


@pytest.mark.processes
def test_a_bad_flag_is_one_line_and_exit_2():
    result = kubetrain("validate", "--bogus")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.splitlines() == ["error: kubetrain validate: no option --bogus fix: the options of "
                                          "`kubetrain validate` are --crds, --kubernetes-version"]
