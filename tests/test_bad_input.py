"""Bad fleet definitions: one line per problem, exit 2, no traceback, and dist/ untouched."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from conftest import kubetrain, read_tree, run

BAD_FLEET = '''
from kubetrain import App, Cluster, TrainingJob

def build():
    app = App()
    dev = Cluster(app, "dev", kubernetes_version="1.33", namespaces=["ml"])
    TrainingJob(dev, {name!r}, image="img", nodes={nodes}, procs_per_node={procs}, instance_type="p5.48xlarge",
                resources={{"cpu": "4", "memory": "64Gi", "gpus": {gpus}}}, {extra}
                volumes=[{{"name": "ckpt", "claim": "ckpt", "mount_path": "/checkpoints"}}],
                run={{"batch": {{"global_size": 64, "micro_size": 1}}, "max_steps": 10 {run_extra}}})
    return app
'''


def fleet(tmp_path: Path, name="job", nodes=2, procs=8, gpus=8, extra="", run_extra="") -> Path:
    package = tmp_path / "fleet"
    package.mkdir()
    (package / "__init__.py").write_text(textwrap.dedent(BAD_FLEET.format(
        name=name, nodes=nodes, procs=procs, gpus=gpus, extra=extra, run_extra=run_extra)))
    existing = tmp_path / "dist" / "dev" / "keep.yaml"
    existing.parent.mkdir(parents=True)
    existing.write_text("kind: Untouched\n")
    return tmp_path


def synth_fails(project: Path) -> list[str]:
    before = read_tree(project / "dist")
    result = kubetrain("synth", "--app", "fleet", cwd=project)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert read_tree(project / "dist") == before, "dist/ changed although synth failed"
    assert not [p for p in project.iterdir() if p.name.startswith(".dist")], "a staging folder was left behind"
    return [line for line in result.stderr.splitlines() if line.startswith("error: ")]


def test_valid_fleet_synthesizes(tmp_path):
    project = fleet(tmp_path)
    result = kubetrain("synth", "--app", "fleet", cwd=project)
    assert result.returncode == 0, result.stderr
    assert sorted(read_tree(project / "dist")) == [
        "dev/_cluster/Namespace.ml.yaml", "dev/ml/ConfigMap.job-config.yaml", "dev/ml/PyTorchJob.job.yaml"]


@pytest.mark.parametrize(("kwargs", "expected"), [
    ({"name": "Job_1"}, "error: dev/Job_1: name: 'Job_1' is not a DNS-1035 label [KT003] fix: use at most 63"),
    ({"name": "j" * 60}, f"error: dev/{'j' * 60}: name: 60 characters is too long"),
    ({"nodes": 0}, "error: dev/job: nodes: Input should be greater than or equal to 1 (got 0) [KT003] "
                   "fix: use a value of at least 1"),
    ({"extra": "node=2,"}, "error: dev/job: node: unknown field [KT001] fix: did you mean 'nodes'?"),
    ({"gpus": 16, "procs": 16}, "error: dev/job: resources.gpus: 16 GPUs requested but p5.48xlarge has 8 [KT102] "
                                "fix: request at most 8 GPUs per node"),
    ({"run_extra": ', "optimizer": {"lr": -1}'}, "error: dev/job: run.optimizer.lr: Input should be greater than 0"),
    ({"run_extra": ', "model": {"dim": 100, "n_heads": 3}'}, "error: dev/job: run.model.n_heads: dim 100 is not "
                                                             "divisible by n_heads 3 [KT202]"),
    ({"procs": 8, "nodes": 3}, "error: dev/job: run.batch.global_size: global_size 64 is not a multiple of "
                               "micro_size 1 x 24 ranks = 24"),
    ({"extra": 'env={"NCCL_ALGO": "Ring"}, '}, None),  # no EFA requested: allowed
])
def test_each_problem_is_one_clear_line(tmp_path, kwargs, expected):
    project = fleet(tmp_path, **kwargs)
    if expected is None:
        assert kubetrain("synth", "--app", "fleet", cwd=project).returncode == 0
        return
    lines = synth_fails(project)
    assert any(line.startswith(expected) for line in lines), lines


def test_all_problems_of_a_job_are_reported_together(tmp_path):
    project = fleet(tmp_path, nodes=0, extra="colour='red',", run_extra=', "seed": -1')
    lines = synth_fails(project)
    assert [line.split(": ")[2] for line in lines] == ["nodes", "run.seed", "colour"]


def test_python_m_apps_reports_the_same_way(tmp_path):
    # `python -m apps` is `kubetrain synth --app apps`; run it against the bad fleet by name.
    project = fleet(tmp_path, nodes=0)
    result = run([sys.executable, "-c", "from kubetrain.cli import run_synth; raise SystemExit(run_synth('fleet'))"],
                 cwd=project)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "error: dev/job: nodes:" in result.stderr
