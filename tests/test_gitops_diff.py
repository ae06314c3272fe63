"""`kubetrain diff`: a real synth into a real git repository, one field of one job changed, then the
semantic diff as text and Markdown; a run replaced under a new name; bad input as one line, exit 2."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml
from kubetrain import (
    App,
    ClaimVolume,
    Cluster,
    NodeResources,
    PyTorchJob,
    Trainer,
    TrainingJob,
    TrainingJobProps,
)
from kubetrain.cli import app as cli
from kubetrain.gitops.diff import COMMENT_MARKER, FieldChange, Key, ObjectChange, Report, render_markdown
from kubetrain.pipeline import synth
from typer.testing import CliRunner

from apps.dev import tiny_gpt_run

IMAGE = "ghcr.io/kubetrain/kubetrain:0.1.0"


def _fleet(nodes: int) -> App:
    app = App()
    cluster = Cluster(app, "dev", kubernetes_version="1.33", namespaces=["ml"])
    TrainingJob(cluster, "gpt", TrainingJobProps(
        name="gpt", image=IMAGE, nodes=nodes, procs_per_node=1, resources=NodeResources(cpu="2", memory="4Gi"),
        volumes=[ClaimVolume(name="checkpoints", claim="checkpoints", mount_path="/checkpoints")], target=PyTorchJob(),
        workload=Trainer(run=tiny_gpt_run("/checkpoints/gpt"))))
    return app


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                          check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository whose HEAD holds the fleet with a 2-node job, and whose working tree holds it with 4."""
    root = tmp_path_factory.mktemp("repo")
    _git(root, "init", "-q", "-b", "main")
    synth(_fleet(nodes=2), root / "dist")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "fleet")
    synth(_fleet(nodes=4), root / "dist")
    return root


def _run(repo: Path, *args: str) -> tuple[int, str, str]:
    before = os.getcwd()
    os.chdir(repo)
    try:
        result = CliRunner().invoke(cli, ["diff", *args])
    finally:
        os.chdir(before)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.processes
def test_one_changed_field_shows_the_object_the_paths_and_the_training_meaning(repo: Path) -> None:
    status_before = _git(repo, "status", "--porcelain")
    code, out, _ = _run(repo)
    assert code == 0, out
    assert out.splitlines()[0] == "kubetrain diff HEAD..working tree: 1 changed, 0 replaced, 0 added, 0 removed"
    assert "  dev/ml/gpt: world size 2 -> 4, pods 2 -> 4" in out
    assert "~ changed dev: PyTorchJob ml/gpt" in out
    assert "    spec.pytorchReplicaSpecs.Worker.replicas: 1 -> 3" in out
    assert _git(repo, "status", "--porcelain") == status_before  # git was only read


@pytest.mark.processes
def test_no_change_against_the_working_tree_itself(repo: Path) -> None:
    _git(repo, "stash", "-q")
    try:
        code, out, _ = _run(repo)
    finally:
        _git(repo, "stash", "pop", "-q")
    assert (code, out) == (0, "kubetrain diff HEAD..working tree: no changes\n")


@pytest.mark.processes
def test_a_run_replaced_under_a_new_name_is_one_change(repo: Path, tmp_path: Path) -> None:
    """Create-once run names: the changed job comes back as a new object; the diff pairs it with the old
    one by its kubetrain.dev/job label."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    old = clone / "dist/dev/ml/PyTorchJob.gpt.yaml"
    job = yaml.safe_load(old.read_text())
    job["metadata"]["name"] = "gpt-7f3a2c"
    job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["image"] = \
        "ghcr.io/kubetrain/kubetrain:0.2.0"
    old.unlink()
    (old.parent / "PyTorchJob.gpt-7f3a2c.yaml").write_text(yaml.safe_dump(job))
    code, out, _ = _run(clone)
    assert code == 0, out
    assert "0 changed, 1 replaced, 0 added, 0 removed" in out
    assert "~ replaced dev: PyTorchJob ml/gpt-7f3a2c (was gpt)" in out
    assert "    metadata.name: gpt -> gpt-7f3a2c" in out
    assert "spec.pytorchReplicaSpecs.Master.template.spec.containers[pytorch].image: " \
           "ghcr.io/kubetrain/kubetrain:0.1.0 -> ghcr.io/kubetrain/kubetrain:0.2.0" in out
    assert "image ghcr.io/kubetrain/kubetrain:0.1.0 -> ghcr.io/kubetrain/kubetrain:0.1.0, " \
           "ghcr.io/kubetrain/kubetrain:0.2.0" in out


@pytest.mark.processes
def test_markdown_for_a_pull_request(repo: Path) -> None:
    code, out, _ = _run(repo, "--format", "markdown")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == COMMENT_MARKER  # the workflow finds and updates its own comment by it
    assert "- `dev/ml/gpt: world size 2 -> 4, pods 2 -> 4`" in lines
    assert "| changed | dev | `PyTorchJob ml/gpt` | 1 |" in lines
    assert "| `spec.pytorchReplicaSpecs.Worker.replicas` | `1` | `3` |" in lines
    assert "<details><summary>Field changes</summary>" in lines and lines[-1] == "</details>"


def test_markdown_keeps_tables_intact() -> None:
    """Pipes and backticks in values cannot break a table row; nothing is HTML-escaped in code spans."""
    key = Key("dev", "", "ConfigMap", "ml", "cfg")
    report = Report("main", [ObjectChange("changed", key, fields=[
        FieldChange('data["cmd"]', "a | b", "echo `date` <x>"), FieldChange("data.empty", "", None)])], [])
    text = render_markdown(report)
    assert '| `data["cmd"]` | `a \\| b` | `echo \'date\' <x>` |' in text
    assert "| `data.empty` | `(empty)` | `(none)` |" in text
    assert all(line.count("|") - line.count("\\|") == 4 for line in text.splitlines() if line.startswith("| `"))


def test_no_changes_in_markdown() -> None:
    assert "No changes to the manifests." in render_markdown(Report("HEAD", [], []))


@pytest.mark.parametrize(("where", "args", "message"), [
    ("repo", ["--base", "no-such-branch"], "unknown revision 'no-such-branch'"),
    ("repo", ["--format", "html"], "--format 'html' is not text or markdown"),
    ("plain", [], "is not inside a git repository"),
])
@pytest.mark.processes
def test_bad_input_is_one_line_and_exit_2(repo: Path, tmp_path: Path, where: str, args: list[str],
                                          message: str) -> None:
    code, out, err = _run(repo if where == "repo" else tmp_path, *args)
    assert code == 2
    assert out == ""
    assert len(err.splitlines()) == 1 and message in err and "Traceback" not in err


@pytest.mark.processes
def test_unreadable_manifest_is_one_line(repo: Path, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    (clone / "dist/dev/ml/ConfigMap.broken.yaml").write_text("metadata: [unclosed\n")
    code, out, err = _run(clone)
    assert code == 2 and out == ""
    assert err.startswith("error: dist/dev/ml/ConfigMap.broken.yaml:2: not valid YAML: did not find expected "
                          "',' or ']' (while parsing a flow sequence at line 1)") and "fix: " in err and \
        len(err.splitlines()) == 1


@pytest.mark.processes
def test_a_create_once_fleet_shows_the_new_run_and_the_old_ones_removal(tmp_path: Path) -> None:
    """With run_names='content-hash', changing one field of one job renames its run: the diff pairs the old
    and new objects by the job's label and names the changed field paths."""
    def fleet(nodes: int) -> App:
        app = App()
        cluster = Cluster(app, "dev", kubernetes_version="1.33", namespaces=["ml"], run_names="content-hash")
        TrainingJob(cluster, "gpt", TrainingJobProps(
            name="gpt", image=IMAGE, nodes=nodes, procs_per_node=1, resources=NodeResources(cpu="2", memory="4Gi"),
            volumes=[ClaimVolume(name="checkpoints", claim="checkpoints", mount_path="/checkpoints")],
            target=PyTorchJob(), workload=Trainer(run=tiny_gpt_run("/checkpoints/gpt"))))
        return app

    _git(tmp_path, "init", "-q", "-b", "main")
    before = {p.name for p in synth(fleet(nodes=2), tmp_path / "dist")}
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "fleet")
    after = {p.name for p in synth(fleet(nodes=4), tmp_path / "dist")}
    (old_job,) = [n for n in before - after if n.startswith("PyTorchJob.gpt-")]
    (new_job,) = [n for n in after - before if n.startswith("PyTorchJob.gpt-")]
    old_name, new_name = old_job.split(".")[1], new_job.split(".")[1]
    code, out, _ = _run(tmp_path)
    assert code == 0, out
    assert f"~ replaced dev: PyTorchJob ml/{new_name} (was {old_name})" in out
    assert f"    metadata.name: {old_name} -> {new_name}" in out
    assert "    spec.pytorchReplicaSpecs.Worker.replicas: 1 -> 3" in out
    assert "  dev/ml/gpt: world size 2 -> 4, pods 2 -> 4" in out
