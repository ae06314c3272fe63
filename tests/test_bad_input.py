"""Bad fleet definitions: one line per problem, exit 2, no traceback, and dist/ untouched."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from conftest import ROOT, kubetrain, read_tree, run

BAD_FLEET = '''
from kubetrain import App, Cluster, TrainingJob

def build():
    app = App()
    dev = Cluster(app, "dev", kubernetes_version="1.33", namespaces=["ml"])
    TrainingJob(dev, {name!r}, image={image!r}, nodes={nodes}, procs_per_node={procs}, instance_type="p5.48xlarge",
                resources={{"cpu": "4", "memory": "64Gi", "accelerators": {gpus}, "efa": 32}}, {extra}
                volumes=[{{"name": "ckpt", "claim": "ckpt", "mount_path": "/checkpoints"}}],
                workload={{"kind": "trainer", "run": {{"batch": {{"global_size": 64, "micro_size": 1}},
                                                      "max_steps": 10 {run_extra}}}}})
    return app
'''


def fleet(tmp_path: Path, name="job", nodes=2, procs=8, gpus=8, extra="", run_extra="", source=None,
          image="img:1") -> Path:
    package = tmp_path / "fleet"
    package.mkdir()
    (package / "__init__.py").write_text(textwrap.dedent(source or BAD_FLEET.format(
        name=name, nodes=nodes, procs=procs, gpus=gpus, extra=extra, run_extra=run_extra, image=image)))
    existing = tmp_path / "dist" / "dev" / "ml" / "ConfigMap.keep.yaml"  # a previous synth's output
    existing.parent.mkdir(parents=True)
    existing.write_text("kind: Untouched\n")
    return tmp_path


def synth_fails(project: Path, *args: str) -> list[str]:
    before = read_tree(project / "dist")
    result = kubetrain("synth", "--app", "fleet", *args, cwd=project)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert read_tree(project / "dist") == before, "dist/ changed although synth failed"
    assert not [p for p in project.iterdir() if p.name.startswith(".dist")], "a staging folder was left behind"
    return [line for line in result.stderr.splitlines() if line.startswith("error: ")]


@pytest.mark.processes
def test_valid_fleet_synthesizes(tmp_path):
    project = fleet(tmp_path)
    result = kubetrain("synth", "--app", "fleet", cwd=project)
    assert result.returncode == 0, result.stderr
    assert sorted(p for p in read_tree(project / "dist") if p.endswith(".yaml")) == [
        "dev/_cluster/Namespace.ml.yaml", "dev/ml/ConfigMap.job-config.yaml", "dev/ml/TrainJob.job.yaml",
        "dev/ml/TrainingRuntime.job-runtime.yaml"]


@pytest.mark.parametrize(("kwargs", "expected"), [
    ({"name": "Job_1"}, "error: dev/Job_1: name: 'Job_1' is not a DNS-1035 label [KT003] fix: use at most 63"),
    ({"name": "j" * 60}, f"error: dev/ml/{'j' * 60}: name: 60 characters is too long"),
    ({"nodes": 0}, "error: dev/job: nodes: Input should be greater than or equal to 1 (got 0) [KT003] "
                   "fix: use a value of at least 1"),
    ({"extra": "node=2,"}, "error: dev/job: node: unknown field [KT001] fix: did you mean 'nodes'?"),
    ({"gpus": 16, "procs": 16}, "error: dev/ml/job: resources.accelerators: 16 nvidia.com/gpu requested but "
                                "p5.48xlarge has 8 [KT102]"),
    ({"run_extra": ', "optimizer": {"lr": -1}'}, "error: dev/job: workload.run.optimizer.lr: Input should be "
                                                 "greater than 0"),
    ({"run_extra": ', "model": {"dim": 100, "n_heads": 3}'}, "error: dev/job: workload.run.model.n_heads: dim "
                                                             "100 is not divisible by n_heads 3 [KT202]"),
    ({"procs": 8, "nodes": 3}, "error: dev/ml/job: workload.run.batch.global_size: global_size 64 is not a multiple of "
                               "micro_size 1 x 24 ranks = 24"),
    ({"extra": 'env={"NCCL_ALGO": "Ring"}, '}, "error: dev/ml/job: env.NCCL_ALGO: NCCL_ALGO=Ring must not be set"),
    ({"extra": 'namespace="kube-system", '}, "error: dev/kube-system/job: namespace: namespace 'kube-system' is "
                                             "not owned"),
    ({"image": "ghcr.io/org/img:"}, "error: dev/job: image: 'ghcr.io/org/img:' is not a container image"),
    ({"extra": 'elastic={"min_nodes": 1, "max_nodes": 2**31}, '},
     "error: dev/job: elastic.max_nodes: Input should be less than or equal to 2147483647"),
])
@pytest.mark.processes
def test_each_problem_is_one_clear_line(tmp_path, kwargs, expected):
    lines = synth_fails(fleet(tmp_path, **kwargs))
    assert any(line.startswith(expected) for line in lines), lines


@pytest.mark.processes
def test_all_problems_of_a_job_are_reported_together(tmp_path):
    project = fleet(tmp_path, nodes=0, extra="colour='red',", run_extra=', "seed": -1')
    lines = synth_fails(project)
    assert [line.split(": ")[2] for line in lines] == ["nodes", "workload.run.seed", "colour"]


@pytest.mark.processes
def test_problems_of_every_job_and_rule_come_in_one_round(tmp_path):
    first = BAD_FLEET.format(name="first", nodes=3, procs=8, gpus=8, extra="", run_extra="", image="img:1")
    source = first.replace("    return app", """    TrainingJob(dev, "second", image="img:1", nodes=1, procs_per_node=2,
                resources={"cpu": "1", "memory": "1Gi", "shm": "2Gi"},
                workload={"kind": "command", "command": ["t.py"]}, env={"RANK": "0"})
    return app""")
    lines = synth_fails(fleet(tmp_path, source=source))
    codes = sorted(line.split("[")[1].split("]")[0] for line in lines)
    assert codes == ["KT105", "KT107", "KT201"], lines


@pytest.mark.processes
def test_warnings_do_not_stop_synth_unless_strict(tmp_path):
    project = fleet(tmp_path, image="ghcr.io/org/img:latest")
    result = kubetrain("synth", "--app", "fleet", cwd=project)
    assert result.returncode == 0, result.stderr
    assert "warning: dev/ml/job: image: 'ghcr.io/org/img:latest' has the tag latest [KT119]" in result.stderr
    assert (project / "dist" / "dev" / "ml" / "TrainJob.job.yaml").is_file()
    lines = synth_fails(project, "--strict")
    assert any("[KT119]" in line for line in lines)


@pytest.mark.parametrize(("source", "app", "expected"), [
    (None, "nope", "error: --app nope: no module named 'nope'"),
    ("x = 1\n", "fleet", "error: --app fleet: module 'fleet' has no build() function"),
    ("def build():\n    pass\n", "fleet", "error: --app fleet: build() returned NoneType, not a cdk8s App"),
    (None, "fleet/__init__.py", "error: --app fleet/__init__.py: --app takes a module name, not a file path "
                                "[KT020] fix: use --app fleet.__init__"),
    ("from kubetrain import App, TrainingJob\ndef build():\n    app = App()\n    TrainingJob(app, 'j')\n    return app\n",
     "fleet", "error: j: scope: a job must be created inside a Cluster, not in App"),
    ("from kubetrain import App, Cluster\ndef build():\n    app = App()\n"
     "    Cluster(app, 'c', kubernetes_version='1.33', namespaces=['a'])\n"
     "    Cluster(app, 'c', kubernetes_version='1.33', namespaces=['b'])\n    return app\n",
     "fleet", "error: c: name: another construct in the same scope already has this id [KT010]"),
    ("from kubetrain import App, Cluster\ndef build():\n    app = App()\n"
     "    Cluster(app, 'c', kubernetes_version='1.33', namespaces=['ml', 'ml'])\n    return app\n",
     "fleet", "error: c: namespaces: Value error, namespaces must be unique"),
])
@pytest.mark.processes
def test_cli_slips_are_one_line(tmp_path, source, app, expected):
    project = fleet(tmp_path, source=source or "x = 1\n")
    before = read_tree(project / "dist")
    result = kubetrain("synth", "--app", app, cwd=project)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert any(line.startswith(expected) for line in result.stderr.splitlines()), result.stderr
    assert read_tree(project / "dist") == before


@pytest.mark.processes
def test_an_exception_in_the_fleet_code_shows_its_own_traceback(tmp_path):
    project = fleet(tmp_path, source="def build():\n    return helper()\n\ndef helper():\n    return 1 / 0\n")
    result = kubetrain("synth", "--app", "fleet", cwd=project)
    assert result.returncode == 2
    first, *rest = result.stderr.splitlines()
    assert first.startswith("error: the fleet module 'fleet' raised ZeroDivisionError: division by zero")
    trace = "\n".join(rest)
    assert "fleet/__init__.py\", line 5, in helper" in trace and "kubetrain/" not in trace


@pytest.mark.processes
def test_python_m_apps_reports_the_same_way(tmp_path):
    # `python -m apps` is `kubetrain synth --app apps`; run it against the bad fleet by name.
    project = fleet(tmp_path, nodes=0)
    result = run([sys.executable, "-c", "from kubetrain.cli import run_synth; raise SystemExit(run_synth('fleet'))"],
                 cwd=project)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "error: dev/job: nodes:" in result.stderr


@pytest.mark.parametrize("target", [".", "..", "notes.txt", "mixed", "fleet"])
@pytest.mark.processes
def test_synth_never_replaces_what_it_did_not_write(tmp_path, target):
    project = fleet(tmp_path)
    (project / ".git").mkdir()
    (project / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (project / "notes.txt").write_text("mine\n")
    (project / "mixed" / "dev" / "ml").mkdir(parents=True)
    (project / "mixed" / "dev" / "ml" / "ConfigMap.a.yaml").write_text("kind: ConfigMap\n")
    (project / "mixed" / "README.md").write_text("mine\n")
    before = {str(p): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    result = kubetrain("synth", "--app", "fleet", "--outdir", target, cwd=project)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "[KT601]" in result.stderr and len(result.stderr.splitlines()) == 2
    assert {str(p): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


@pytest.mark.processes
def test_synth_replaces_its_own_output_and_names_a_file_it_did_not_write(tmp_path):
    project = fleet(tmp_path)
    assert kubetrain("synth", "--app", "fleet", cwd=project).returncode == 0
    assert (project / "dist" / ".kubetrain-synth").is_file()
    assert not (project / "dist" / "dev" / "ml" / "ConfigMap.keep.yaml").exists()
    assert kubetrain("synth", "--app", "fleet", cwd=project).returncode == 0  # its own output: replaced
    # A file synth did not write, even one shaped like a manifest, is never deleted: synth names it and stops.
    for stray in ("dev/ml/stray.txt", "dev/ml/ConfigMap.mine.yaml"):
        (project / "dist" / stray).write_text("mine\n")
        before = read_tree(project / "dist")
        result = kubetrain("synth", "--app", "fleet", cwd=project)
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert f"holds {stray}, which synth did not write" in result.stderr and "[KT601]" in result.stderr
        assert read_tree(project / "dist") == before
        (project / "dist" / stray).unlink()


@pytest.mark.processes
def test_a_file_git_tracks_is_the_repositorys_not_a_users_own(tmp_path):
    # A merge of two branches' dist/ brings files the committed marker does not list: they are in git, so synth
    # may replace them (the next synth writes them again or drops them); an untracked one is still named.
    project = fleet(tmp_path)
    assert kubetrain("synth", "--app", "fleet", cwd=project).returncode == 0
    merged = project / "dist" / "dev" / "ml" / "ConfigMap.merged.yaml"
    merged.write_text("kind: ConfigMap\n")
    git = ["git", "-C", str(project), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    for args in (["init", "-q"], ["add", "dist"], ["commit", "-q", "-m", "merge"]):
        assert run([*git, *args]).returncode == 0
    assert kubetrain("synth", "--app", "fleet", cwd=project).returncode == 0
    assert not merged.exists()


@pytest.mark.processes
def test_an_interrupted_synths_leftovers_are_removed_by_the_next(tmp_path):
    from kubetrain.output.writer import MARKER

    project = fleet(tmp_path)
    assert kubetrain("synth", "--app", "fleet", cwd=project).returncode == 0
    # What kills at each point of a synth leave beside dist/: an empty staging folder, a staging folder with
    # its marker and part of the files, and (older synths) the retired output.
    (project / ".dist.tmp-empty").mkdir()
    (project / ".dist.tmp-half" / "dev" / "ml").mkdir(parents=True)
    (project / ".dist.tmp-half" / MARKER).write_text("x\n")
    (project / ".dist.tmp-half" / "dev" / "ml" / "ConfigMap.a.yaml").write_text("kind: ConfigMap\n")
    (project / ".dist.old-abc" / "dist").mkdir(parents=True)
    (project / ".dist.old-abc" / "dist" / MARKER).write_text("x\n")
    (project / ".dist.tmp-users").mkdir()  # not synth's: kept
    (project / ".dist.tmp-users" / "notes.txt").write_text("mine\n")
    assert kubetrain("synth", "--app", "fleet", cwd=project).returncode == 0
    assert sorted(p.name for p in project.iterdir() if p.name.startswith(".dist")) == [".dist.tmp-users"]
    ignored = run(["git", "check-ignore", "--no-index", ".dist.tmp-x1", ".dist.old-x2"], cwd=ROOT)
    assert ignored.stdout.split() == [".dist.tmp-x1", ".dist.old-x2"], "leftovers beside dist/ are git-ignored"


def test_the_output_folder_is_exchanged_whole_or_filled_in_place(tmp_path):
    from kubetrain.output.writer import MARKER, _move_in, write_tree

    out = tmp_path / "dist"
    write_tree({Path("a/ns/ConfigMap.one.yaml"): "one\n", Path("a/ns/ConfigMap.two.yaml"): "two\n"}, out)
    inode = out.stat().st_ino
    write_tree({Path("a/ns/ConfigMap.one.yaml"): "ONE\n", Path("b/ns/ConfigMap.three.yaml"): "three\n"}, out)
    assert out.stat().st_ino != inode, "the staged folder took the old one's place in one step"
    # Where it cannot, the staged files are moved in one by one and the old ones deleted: same result.
    staging = tmp_path / "staging"
    files = {Path("a/ns/ConfigMap.one.yaml"): "uno\n", Path("c/ns/ConfigMap.four.yaml"): "four\n"}
    for path, text in files.items():
        (staging / path).parent.mkdir(parents=True, exist_ok=True)
        (staging / path).write_text(text)
    (staging / MARKER).write_text("marker\n")
    _move_in(staging, out, files)
    assert read_tree(out) == {"a/ns/ConfigMap.one.yaml": b"uno\n", "c/ns/ConfigMap.four.yaml": b"four\n",
                              MARKER: b"marker\n"}


TYPED_FLEET = '''
from kubetrain import (App, ArgoCd, Cluster, Command, EfaNodePool, NodeResources, PyTorchJob, RunConfig, Trainer,
                       TrainingJob, TrainingJobProps)

def build():
    app = App()
    dev = Cluster(app, "dev", kubernetes_version="1.33", namespaces=["ml"])
    pool = EfaNodePool(dev, "p5", instance_types=["p5.48xlarge"], zones=["us-west-2a"], subnet_ids=["subnet-0abc1234"],
                       securty_group_ids=["sg-00000001"], role="node-role", max_nodes=2)
    TrainingJob(dev, "a", TrainingJobProps(name="a", image="img:1", nodes=2, procs_per_node=1,
                                           resources=NodeResources(cpu="2", memroy="4Gi"),
                                           workload=Command(command=["train.py"])))
    TrainingJob(dev, "b", TrainingJobProps(name="b", image="img:1", nodes=2, procs_per_node=8, pool=pool,
                                           resources=NodeResources(cpu="2", memory="4Gi"),
                                           target=PyTorchJob(ttl_seconds_after_finshed=60),
                                           workload=Trainer(run=RunConfig(max_steps=10, batch={"global_size": 16}))))
    TrainingJob(dev, "c", TrainingJobProps(name="c", image="img:1", nodes=2, procs_per_node=8, pool=pool,
                                           resources=NodeResources(cpu="2", memory="4Gi"),
                                           workload=Command(command=["train.py"])))
    NodeResources(cpu="1", memory="1Gi", shmm="1Gi")  # built and never used: still the user's mistake
    ArgoCd(app, "argocd", repo_url="https://github.com/x/y.git", destinations={"dev": {"nam": "dev"}})
    TrainingJob(dev, "ok", image="img:1", nodes=1, procs_per_node=1, resources={"cpu": "1", "memory": "2Gi"},
                workload={"kind": "command", "command": ["train.py"]})
    return app
'''


@pytest.mark.processes
def test_typed_props_report_like_dicts_and_the_whole_fleet_in_one_round(tmp_path):
    # The README's way of writing a job: a misspelt field in TrainingJobProps(...), NodeResources(...), a target
    # or a pool is one line with code, the path as the user wrote it and a fix; every construct is reported.
    lines = synth_fails(fleet(tmp_path, source=TYPED_FLEET))
    expected = [
        "error: dev/nodepool/p5: securty_group_ids: unknown field [KT001] fix: did you mean 'security_group_ids'?",
        "error: dev/nodepool/p5: security_group_ids: required field is missing [KT002]",
        "error: dev/a: resources.memroy: unknown field [KT001] fix: did you mean 'memory'?",
        "error: dev/a: resources.memory: required field is missing [KT002]",
        "error: dev/b: workload.run.batch.micro_size: required field is missing [KT002]",
        "error: dev/c: pool: dev/nodepool/p5 has errors of its own (reported with it) [KT011]",
        "error: NodeResources built at fleet/__init__.py:20: shmm: unknown field [KT001] fix: did you mean 'shm'?",
        "error: argocd: destinations.dev.nam: unknown field [KT001] fix: did you mean 'name'?",
    ]
    for start in expected:
        assert sum(line.startswith(start) for line in lines) == 1, (start, lines)
    # The target's mistake is reported once: where it was built, as the job that took it failed validation first.
    assert [line for line in lines if "ttl_seconds_after_finshed" in line] == [
        "error: PyTorchJob built at fleet/__init__.py:15: ttl_seconds_after_finshed: unknown field [KT001] fix: did "
        "you mean 'ttl_seconds_after_finished'? rename it; fields here: active_deadline_seconds, clean_pod_policy, "
        "ttl_seconds_after_finished"]
    assert not any("/ok" in line for line in lines)


@pytest.mark.processes
def test_a_model_validated_in_fleet_code_is_bad_input_not_a_crash(tmp_path):
    source = BAD_FLEET.replace("def build():", "from kubetrain import RunConfig\n\ndef build():\n"
                               "    RunConfig.model_validate({{'max_steps': 1, 'batch': {{'global_sise': 8}}}})")
    lines = synth_fails(fleet(tmp_path, source=source.format(
        name="job", nodes=2, procs=8, gpus=8, extra="", run_extra="", image="img:1")))
    assert any(line.startswith("error: fleet/__init__.py:") and "batch.global_sise: unknown field [KT001] fix: "
               "did you mean 'global_size'?" in line for line in lines), lines
