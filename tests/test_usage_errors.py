"""Every usage error says what is wrong and how to fix it: flags and commands, files in dist/ that cannot be read,
hand-edited annotations, CRD folders, and messages that used to point the wrong way. Exit 2, no traceback, nothing
written."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, kubetrain, read_tree
from kubetrain import App, Cluster, TrainingJob
from kubetrain.jobs.job_props import TrainingJobProps
from kubetrain.kinds.pytorchjob import PyTorchJob
from kubetrain.kinds.trainjob import TrainJob
from kubetrain.pipeline import fleet_errors, fleet_findings
from kubetrain.platform.kueue_queues import ClusterQueue, Cohort, ResourceFlavor
from kubetrain.platform.node_pools import EfaNodePool
from kubetrain.platform.volcano_queues import VolcanoQueue
from platform_support import P5, cluster, codes
from pydantic import ValidationError

from kubetrain_runtime.problems import problems_from_validation_error


def fails(*args: str, cwd: Path = ROOT) -> str:
    result = kubetrain(*args, cwd=cwd)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1, result.stderr
    return result.stderr


@pytest.mark.parametrize(("args", "expected"), [
    (["synth", "--stirct"], "error: kubetrain synth: no option --stirct fix: did you mean --strict?"),
    (["plna"], "error: kubetrain: no command 'plna' fix: did you mean `kubetrain plan`?"),
    (["plan", "extra"], "error: kubetrain plan: unexpected argument 'extra' fix: kubetrain plan takes no arguments, "
                        "and a value goes right after its option (--dist DIST); usage: kubetrain plan [--dist DIST] "
                        "[--json]"),
    (["plan", "--steps", "3"], "error: kubetrain plan: no option --steps fix: --steps is an option of "
                               "`kubetrain run-local`, not of `kubetrain plan`, whose options are --dist, --json"),
    (["--dist", "dist", "plan"], "fix: --dist is an option of cost, diff, plan, run-local, simulate: put it after the "
                                 "command, `kubetrain plan --dist ...`"),
    (["--plan"], "fix: plan is a command, not an option: `kubetrain plan`"),
    (["explain", "KT001", "KT002"], "unexpected argument 'KT002' fix: kubetrain explain takes 1 argument(s); usage: "
                                    "kubetrain explain CODE"),
    (["run-local"], "Missing argument 'job'. fix: usage: kubetrain run-local JOB [--steps STEPS]"),
    (["cost", "--dist"], "error: Option '--dist' requires an argument. fix: give it a value, --dist DIST"),
    (["run-local", "dev/x", "--steps", "x"], "fix: give a valid value, --steps STEPS; usage: kubetrain run-local"),
    (["diff", "--format", "xml"], "fix: --format text, or --format markdown"),
    (["validate", "--kubernetes-version", "1.3"], "fix: give a minor version of that range, e.g."),
])
@pytest.mark.processes
def test_a_usage_error_says_how_to_fix_it(args, expected):
    assert expected in fails(*args)


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """A repository with the committed dist/ at HEAD."""
    root = tmp_path_factory.mktemp("repo")
    shutil.copytree(ROOT / "dist", root / "dist")
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "dist"], cwd=root, check=True)
    return root


CONFLICT = "<<<<<<< HEAD\n  name: a\n=======\n  name: b\n>>>>>>> theirs\n"
NODE_POOL = "dist/prod/_cluster/NodePool.p5.yaml"


@pytest.mark.parametrize(("edit", "line", "what"), [
    (lambda text: text.replace("  name: p5\n", CONFLICT), None, "a git merge conflict marker (<<<<<<<) is left"),
    (lambda text: text.replace("kind: NodePool", "kind: NodePool\n# caf\xe9"), 3, "byte 0xe9 is not UTF-8 text"),
    (lambda text: text.replace("kind: NodePool", "kind: [NodePool"), None, "not valid YAML"),
    (lambda text: f"{text}---\n- a list\n", None, "document 2 is a list, not a Kubernetes object"),
])
@pytest.mark.parametrize("command", ["plan", "cost", "diff", "simulate"])
@pytest.mark.processes
def test_an_unreadable_file_in_dist_names_the_file_the_line_and_the_fix(repo, edit, line, what, command):
    path = repo / NODE_POOL
    original = path.read_bytes()
    text = edit(original.decode())
    path.write_bytes(text.encode("latin-1") if "\xe9" in text else text.encode())
    try:
        before = read_tree(repo / "dist")
        message = fails(command, cwd=repo)
        assert message.startswith(f"error: {NODE_POOL}:{line or ''}") and what in message and "fix: " in message
        assert read_tree(repo / "dist") == before
    finally:
        path.write_bytes(original)


@pytest.mark.processes
def test_validate_reports_a_conflicted_file_with_its_line_and_fix(repo):
    path = repo / NODE_POOL
    original = path.read_text()
    path.write_text(original.replace("  name: p5\n", CONFLICT))
    try:
        result = kubetrain("validate", "dist", cwd=repo)
        assert result.returncode == 1 and "Traceback" not in result.stderr
        line = original.splitlines().index("  name: p5") + 1
        assert f"{NODE_POOL}: ?: (object): line {line}: a git merge conflict marker (<<<<<<<) is left in the file; " \
               "fix: never resolve conflicts in dist/ by hand" in result.stdout
    finally:
        path.write_text(original)


@pytest.mark.parametrize(("command", "old", "new", "expected"), [
    ("cost", "kubetrain.dev/pricing: '{\"reserved_nodes\":16}'", "kubetrain.dev/pricing: '{\"reserved_nodes\":\"x\"}'",
     "NodePool p5: annotation kubetrain.dev/pricing: reserved_nodes: Input should be a valid integer"),
    ("cost", "kubetrain.dev/pricing: '{\"reserved_nodes\":16}'", "kubetrain.dev/pricing: '{reserved: 16}'",
     "NodePool p5: annotation kubetrain.dev/pricing: '{reserved: 16}' is not JSON"),
    ("plan", "kubetrain.dev/node-allocatable: '{", "kubetrain.dev/node-allocatable: '[{",
     "NodePool p5 is malformed: annotation kubetrain.dev/node-allocatable is not JSON"),
    ("plan", "nominalQuota: 3063200m", "nominalQuota: lots",
     "dist/prod: ClusterQueue research is malformed: 'lots' is not a Kubernetes quantity"),
])
@pytest.mark.processes
def test_a_hand_edited_annotation_names_the_object_the_annotation_and_the_fix(repo, command, old, new, expected):
    path = repo / (NODE_POOL if "kubetrain.dev" in old else "dist/prod/_cluster/ClusterQueue.research.yaml")
    original = path.read_text()
    assert old in original
    path.write_text(original.replace(old, new))
    try:
        message = fails(command, cwd=repo)
        assert expected in message and "fix: dist/ is written by `kubetrain synth` from the fleet's code" in message
        assert "validation error for" not in message and "errors.pydantic.dev" not in message
    finally:
        path.write_text(original)


@pytest.mark.processes
def test_a_crd_folder_holding_another_object_is_kt605(tmp_path):
    (tmp_path / "crds").mkdir()
    (tmp_path / "crds" / "config.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    message = fails("validate", "dist", "--crds", str(tmp_path / "crds"))
    assert "config.yaml: not a CRD kubetrain can read (holds a ConfigMap object, not a CustomResourceDefinition) " \
           "[KT605] fix: name a folder that holds only CustomResourceDefinition YAML files" in message


def test_a_fleet_cohort_given_by_name_is_told_to_pass_the_object():
    c = cluster()
    flavor = ResourceFlavor(c, "p5", pool=EfaNodePool(c, "p5", **P5, static_nodes=16))
    Cohort(c, "org", flavors=[flavor], quotas={"p5": {"nvidia.com/gpu": 16}})
    Cohort(c, "team", parent="org")
    ClusterQueue(c, "training", flavors=[flavor], cohort="elsewhere")
    (code, path, fix), (other, other_path, other_fix) = codes(c)
    assert (code, path) == ("KT450", "parent") and "pass the Cohort object itself (parent=<the Cohort 'org'>)" in fix
    assert (other, other_path) == ("KT450", "cohort") and "Cohort(cluster" in other_fix
    messages = [f.problem.message for f in fleet_findings(c)]
    assert "is a Cohort of this fleet given by its name" in messages[0] and "is not a Cohort" in messages[1]


JOB = {"image": "img:1", "nodes": 2, "procs_per_node": 8, "instance_type": "p5.48xlarge",
       "resources": {"cpu": "96", "memory": "1000Gi", "accelerators": 8, "efa": 32},
       "volumes": [{"name": "ckpt", "claim": "ckpt", "mount_path": "/ckpt"}],
       "workload": {"kind": "trainer", "run": {"batch": {"global_size": 64, "micro_size": 1}, "max_steps": 10,
                                               "checkpoint": {"dir": "/ckpt/run"}}}}


def errors(**overrides) -> dict[tuple[str, str], tuple[str, str]]:
    app = App()
    TrainingJob(Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"]), "job", {**JOB, **overrides})
    return {(f.problem.code, f.problem.path): (f.problem.message, f.problem.fix) for f in fleet_errors(app)}


def test_the_trainers_status_variables_are_the_trainers_not_torchruns():
    message, fix = errors(target=TrainJob(), env={"KUBEFLOW_TRAINER_SERVER_TOKEN": "/t"})[
        ("KT105", "env.KUBEFLOW_TRAINER_SERVER_TOKEN")]
    assert "TrainJobStatus plugin" in message and "torchrun" not in message + fix
    message, _ = errors(target=PyTorchJob(), env={"LOCAL_RANK": "0"})[("KT105", "env.LOCAL_RANK")]
    assert message == "is set by torchrun for each rank"


def test_kt701_names_trainjob_as_the_default_target():
    _, fix = errors(target=TrainJob(), elastic={"min_nodes": 1})[("KT701", "elastic")]
    assert "target=PyTorchJob()" in fix and "TrainJob, the default" in fix


def test_an_instance_type_typo_gets_did_you_mean_and_nothing_else():
    found = errors(instance_type="p5.48xlarg")
    assert list(found) == [("KT111", "instance_type")]
    assert found[("KT111", "instance_type")][1].startswith("did you mean 'p5.48xlarge'?")


@pytest.mark.parametrize(("field", "near"), [("optimiser", "optimizer"), ("chekpoint", "checkpoint"),
                                              ("max_step", "max_steps")])
def test_an_unknown_field_under_a_tagged_union_gets_did_you_mean(field, near):
    run = {"batch": {"global_size": 64, "micro_size": 1}, "max_steps": 10, field: {}}
    with pytest.raises(ValidationError) as error:
        TrainingJobProps.model_validate({**JOB, "name": "job", "workload": {"kind": "trainer", "run": run}})
    (problem,) = [p for p in problems_from_validation_error(error.value, TrainingJobProps) if p.code == "KT001"]
    assert problem.path == f"workload.trainer.run.{field}"
    assert problem.fix.startswith(f"did you mean '{near}'? rename it")


@pytest.mark.parametrize(("url", "clone"), [
    ("https://github.com/org/fleet/tree/main/dist", "https://github.com/org/fleet.git"),
    ("https://gitlab.com/org/fleet/-/blob/main/dist/a.yaml", "https://gitlab.com/org/fleet.git")])
def test_a_browser_link_as_argo_cds_repository_gets_the_clone_url(url, clone):
    from kubetrain.gitops.argocd_props import ArgoCdProps

    with pytest.raises(ValidationError) as error:
        ArgoCdProps.model_validate({"repo_url": url})
    (problem,) = [p for p in problems_from_validation_error(error.value, ArgoCdProps) if p.path == "repo_url"]
    assert "web view, not a URL Argo CD can clone" in problem.message and f"use the clone URL {clone};" in problem.fix


SMALL_JOB = {"image": "ghcr.io/kubetrain/kubetrain:0.1.0", "nodes": 2, "procs_per_node": 1,
             "resources": {"cpu": "2", "memory": "4Gi"},
             "volumes": [{"name": "ckpt", "claim": "ckpt", "mount_path": "/ckpt"}],
             "workload": {"kind": "trainer", "run": {"batch": {"global_size": 128, "micro_size": 4}, "max_steps": 100,
                                                     "checkpoint": {"dir": "/ckpt/run"}}}}


def delivered(tmp_path: Path, destination: dict, **job) -> list[tuple[str, str, str]]:
    """The problems synth reports for one cluster delivered by Argo CD; nothing is written."""
    from kubetrain import ArgoCd, ArgoCdProps
    from kubetrain.pipeline import synth

    from kubetrain_runtime.problems import ConfigError

    app = App()
    TrainingJob(Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"]), "job", {**SMALL_JOB, **job})
    ArgoCd(app, "argocd", ArgoCdProps(repo_url="https://github.com/example/fleet.git", destinations={"c": destination}))
    with pytest.raises(ConfigError) as caught:
        synth(app, tmp_path / "dist", validate=False)
    assert not (tmp_path / "dist").exists()
    return [(p.code, p.path, p.message) for p in caught.value.problems]


def test_a_destination_namespace_outside_the_appproject_is_kt510(tmp_path):
    [(code, path, message)] = delivered(tmp_path, {"name": "c", "namespace": "default"})
    assert (code, path) == ("KT510", "destinations.c.namespace") and "the AppProject's destinations (ml)" in message


def test_a_ttl_on_a_run_argo_cd_manages_is_kt511(tmp_path):
    [(code, path, message)] = delivered(tmp_path, {"name": "c"}, target=PyTorchJob(ttl_seconds_after_finished=600))
    assert code == "KT511" and path.startswith("c/PyTorchJob/job") and \
        path.endswith("spec.runPolicy.ttlSecondsAfterFinished") and "self-heal creates it again" in message


@pytest.mark.processes
def test_run_local_refuses_a_workdir_inside_dist():
    before = read_tree(ROOT / "dist")
    message = fails("run-local", "dev/tiny-gpt", "--workdir", "dist/dev/run")
    assert "--workdir dist/dev/run is inside dist/, which `kubetrain synth` writes [KT301] fix: choose a folder " \
           "outside dist/" in message
    assert read_tree(ROOT / "dist") == before


def test_a_hang_timeout_the_deadline_cuts_short_is_kt022():
    run = {**JOB["workload"]["run"], "resilience": {"watchdog_floor_s": 900, "collective_timeout_s": 600}}
    found = errors(target=TrainJob(active_deadline_seconds=900), workload={"kind": "trainer", "run": run})
    message, fix = found[("KT022", "workload.run.resilience.watchdog_floor_s")]
    assert "900 s is not shorter than the target's active_deadline_seconds 900" in message and "raise" in fix
    assert ("KT022", "workload.run.resilience.collective_timeout_s") not in found
    assert not [key for key in errors(target=TrainJob(active_deadline_seconds=86400),
                                      workload={"kind": "trainer", "run": run}) if key[0] == "KT022"]


@pytest.mark.processes
def test_run_local_holds_an_override_to_the_checkpoint_tiers():
    message = fails("run-local", "dev/tiny-gpt", "--set", "checkpoint.local_interval=50")
    assert "checkpoint.local_interval: local_interval 50 is not below interval 10" in message and "[KT217]" in message


@pytest.mark.parametrize(("overrides", "expected"), [
    ({"workload": {"kind": "functon", "func": "os.getcwd"}},
     ("KT003", "workload.kind", "did you mean 'function'? use one of trainer, command, function")),
    ({"workload": {"command": ["x"]}}, ("KT002", "workload.kind", "add 'kind': one of trainer, command, function")),
    ({"resources": {"cpu": "2", "memory": "4Gi", "gpus": 8}}, ("KT001", "resources.gpus", "did you mean "
                                                                "'accelerators'? rename it")),
    ({"nproc_per_node": 8}, ("KT001", "nproc_per_node", "did you mean 'procs_per_node'? rename it")),
    ({"pod": {"service_account": "My_SA"}}, ("KT003", "pod.service_account", "use at most 253 lowercase letters")),
    ({"target": "pytorchjob"}, ("KT003", "target", "pass the Target object itself: kubetrain takes objects, not "
                                                   "their names")),
])
def test_union_and_alias_mistakes_read_as_the_users_fields(overrides, expected):
    with pytest.raises(ValidationError) as error:
        TrainingJobProps.model_validate({**SMALL_JOB, "name": "job", **overrides})
    found = [(p.code, p.path, p.fix) for p in problems_from_validation_error(error.value, TrainingJobProps)]
    assert [(code, path) for code, path, _ in found] == [expected[:2]], found
    assert expected[2] in found[0][2]


def test_a_value_no_member_of_a_union_takes_is_one_problem_naming_every_form():
    from training.config import RunConfig

    run = {"batch": {"global_size": 64, "micro_size": 1}, "max_steps": 10, "checkpoint": {"interval": 0}}
    with pytest.raises(ValidationError) as error:
        RunConfig.model_validate(run)
    [problem] = problems_from_validation_error(error.value, RunConfig)
    assert (problem.code, problem.path) == ("KT003", "checkpoint.interval")
    assert problem.fix == "use a value above 0, or use one of 'auto'"


@pytest.mark.processes
def test_validate_names_the_field_an_unknown_one_was_meant_to_be(tmp_path):
    (tmp_path / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, lables: {a: b}}\n"
                                      "dataa: {k: v}\n")
    result = kubetrain("validate", str(tmp_path / "cm.yaml"))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "(object): Additional properties are not allowed ('dataa' was unexpected) (did you mean 'data' for " \
           "'dataa'?)" in result.stdout
    assert "metadata: Additional properties are not allowed ('lables' was unexpected) (did you mean 'labels' for " \
           "'lables'?)" in result.stdout


def test_an_affinity_key_gets_the_kubernetes_name_it_was_meant_to_be():
    found = errors(pod={"affinity": {"nodeAffinity": {"requiredDuringScheduling": {}}}})
    _, fix = found[("KT003", "pod.affinity")]
    assert fix.startswith("did you mean 'requiredDuringSchedulingIgnoredDuringExecution' for "
                          "'requiredDuringScheduling'?")


@pytest.mark.processes
def test_validate_reads_kubetrains_annotations_as_plan_and_cost_do(repo):
    path = repo / NODE_POOL
    original = path.read_text()
    path.write_text(original.replace("kubetrain.dev/pricing: '{\"reserved_nodes\":16}'",
                                     "kubetrain.dev/pricing: '{\"reserved_nodes\":\"x\"}'"))
    try:
        result = kubetrain("validate", "dist", cwd=repo)
        assert result.returncode == 1 and "Traceback" not in result.stderr
        assert f"{NODE_POOL}: NodePool/p5: metadata.annotations: NodePool p5: annotation kubetrain.dev/pricing: " \
               "reserved_nodes: Input should be a valid integer" in result.stdout
        assert "fix: dist/ is written by `kubetrain synth`" in result.stdout
    finally:
        path.write_text(original)


@pytest.mark.parametrize(("target", "path", "fix"), [
    (lambda: PyTorchJob(clean_pod_policy="all"), "target.clean_pod_policy", "did you mean 'All'? use one of All, "
                                                                           "Running, None"),
    (lambda: PyTorchJob(ttl_seconds_after_finshed=5), "target.ttl_seconds_after_finshed",
     "did you mean 'ttl_seconds_after_finished'? rename it"),
])
def test_a_value_of_a_list_gets_the_near_one(target, path, fix):
    found = {path: fix for (_, path), (_, fix) in errors(target=target()).items()}
    assert found[path].startswith(fix)


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory) -> dict[str, Path]:
    """Places a command can be run in by mistake: outside any git repository, in a repository without commits."""
    outside = tmp_path_factory.mktemp("outside")
    shutil.copytree(ROOT / "dist", outside / "dist")
    fresh = tmp_path_factory.mktemp("fresh")
    shutil.copytree(ROOT / "dist", fresh / "dist")
    subprocess.run(["git", "init", "-q"], cwd=fresh, check=True)
    return {"outside": outside, "fresh": fresh}


# Every command, run where its input is not: (args, where it runs: the repo fixture, `elsewhere`'s, or the
# project; what the one line must say). Each also says how to fix it (`fails` checks the one line).
WRONG_PLACES = [
    (["validate", "nope.yaml"], None, "nope.yaml does not exist fix: give files or folders of manifests"),
    (["validate", "dist", "--crds", "nope"], None, "--crds nope is not a folder fix: "),
    (["plan", "--dist", "nope"], None, "nope is not a folder; fix: run `kubetrain synth` to write dist"),
    (["cost", "--dist", "nope"], None, "nope is not a folder; fix: run `kubetrain synth` to write dist"),
    (["simulate", "--dist", "nope"], None, "nope is not a folder fix: give --dist the folder synth writes"),
    (["simulate", "--load", "nope.yaml"], None, "nope.yaml"),
    (["diff", "--dist", "nope"], "repo", "nope is not a folder here nor at HEAD; fix: give --dist the folder"),
    (["diff"], "outside", "is not inside a git repository: kubetrain diff compares dist/ with a git revision; fix: "
                          "run it in the repository that holds dist/"),
    (["diff"], "fresh", "has no commits yet, so there is no revision 'HEAD' to compare with; fix: commit dist/ first"),
    (["diff", "--base", "v0.0"], "repo", "unknown revision 'v0.0'; fix: give --base a branch, tag or commit"),
    (["run-local", "dev/tiny_gpt"], None, "no job named 'tiny_gpt' in dist/dev [KT301] fix: did you mean "
                                          "'dev/tiny-gpt'? name a job that `kubetrain synth` wrote"),
    (["run-local", "tiny-gtp"], None, "fix: did you mean 'tiny-gpt'?"),
    (["run-local", "dev/tiny-gpt", "--dist", "nope"], None, "nope is not a folder [KT301] fix: run `kubetrain synth`"),
    (["explain", "KT1O6"], None, "no rule 'KT1O6' fix: did you mean KT106? `kubetrain rules` lists them all"),
    (["explain", "kt2l7"], None, "fix: did you mean KT217?"),
    (["cdk8s", "synth"], "outside", "node_modules/cdk8s-cli/bin/cdk8s not found; fix: run it from the project root"),
]


@pytest.mark.processes
@pytest.mark.parametrize(("args", "where", "expected"), WRONG_PLACES, ids=[" ".join(a) for a, *_ in WRONG_PLACES])
def test_a_command_run_where_its_input_is_not_says_how_to_fix_it(args, where, expected, repo, elsewhere):
    cwd = repo if where == "repo" else elsewhere[where] if where else ROOT
    message = fails(*args, cwd=cwd)
    assert expected in message and " fix: " in message.replace("; fix: ", " fix: "), message


def test_every_command_that_reads_input_is_run_where_it_is_not():
    from kubetrain.cli import app
    from typer.main import get_command

    commands = set(get_command(app).commands) - {"rules"}  # `rules` reads nothing
    assert commands - {args[0] for args, *_ in WRONG_PLACES} == {"synth"}  # synth's own test follows


@pytest.mark.processes
def test_synth_of_a_misspelt_fleet_module_suggests_the_one_beside_it(tmp_path):
    result = kubetrain("synth", "--app", "aps", "--outdir", str(tmp_path / "out"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "error: --app aps: no module named 'aps'" in result.stderr
    assert "[KT020] fix: did you mean 'apps'? run synth from the project root" in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("name", "choices", "expected"), [
    ("KT1O6", ["KT106", "KT216", "KT160"], "KT106"),  # O for 0: not the nearer KT216 of plain difflib
    ("kt106", ["KT106", "KT216"], "KT106"),
    ("KTl06", ["KT106", "KT216"], "KT106"),  # l for 1
    ("KTI06", ["KT106", "KT216"], "KT106"),  # I for 1
    ("dev/tiny_gpt", ["dev/tiny-gpt", "dev/tiny-gpt-elastic", "prod/gpt-1b-fsdp"], "dev/tiny-gpt"),
    ("tiny-gtp", ["tiny-gpt", "tiny-llama-sft"], "tiny-gpt"),
    ("nvidia.com/gpus", ["cpu", "memory", "nvidia.com/gpu", "vpc.amazonaws.com/efa"], "nvidia.com/gpu"),
    ("--stirct", ["--strict", "--outdir"], "--strict"),
    ("zzz", ["KT106", "KT216"], None),
    ("KT106", ["KT106"], None),  # a name is never its own suggestion
])
def test_one_suggestion_for_every_misspelt_name(name, choices, expected):
    from kubetrain_runtime.spelling import closest

    assert closest(name, choices) == expected


ELASTIC_JOB = {**JOB, "name": "job", "nodes": 4, "target": PyTorchJob()}


@pytest.mark.parametrize(("elastic", "path", "message"), [
    ({"min_nodes": 8, "max_nodes": 2}, "elastic.min_nodes", "min_nodes 8 is above max_nodes 2: no node count is in "
                                                            "the range"),
    ({"min_nodes": 8}, "elastic.min_nodes", "the job starts 4 pods, outside its elastic range 8..4"),
    ({"min_nodes": 1, "max_nodes": 2}, "elastic.max_nodes", "the job starts 4 pods, outside its elastic range 1..2"),
])
def test_an_elastic_range_without_the_starting_count_is_a_field_error(elastic, path, message):
    with pytest.raises(ValidationError) as error:
        TrainingJobProps.model_validate({**ELASTIC_JOB, "elastic": elastic})
    [problem] = problems_from_validation_error(error.value, TrainingJobProps)
    assert (problem.code, problem.path, problem.message) == ("KT114", path, message)
    assert "elastic.min_nodes <=" in problem.fix or "min_nodes at most max_nodes" in problem.fix


def test_an_empty_elastic_range_stops_synth_at_the_field_not_in_a_later_check():
    app = App()
    TrainingJob(Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"]), "job",
                {**ELASTIC_JOB, "elastic": {"min_nodes": 8, "max_nodes": 2}})
    assert [(f.problem.code, f.problem.path) for f in fleet_errors(app)] == [("KT114", "elastic.min_nodes")]


@pytest.mark.parametrize(("make", "path"), [
    (lambda c, f: ClusterQueue(c, "q", flavors=[f], quotas={"p5": {"nvidia.com/gpus": "8"}}),
     "quotas.p5.nvidia.com/gpus"),
    (lambda c, f: Cohort(c, "org", flavors=[f], quotas={"p5": {"nvidia.com/gpus": "8"}}), "quotas.p5.nvidia.com/gpus"),
    (lambda c, f: ClusterQueue(c, "q", resource_groups=[{"resources": ["nvidia.com/gpus"], "flavors": [f]}]),
     "resource_groups.0.resources.0"),
    (lambda c, f: VolcanoQueue(c, "v", capability={"nvidia.com/gpus": "8"}), "capability.nvidia.com/gpus"),
])
def test_a_resource_no_node_offers_is_refused_with_the_one_meant(make, path):
    c = cluster()
    flavor = ResourceFlavor(c, "p5", pool=EfaNodePool(c, "p5", **P5, static_nodes=16))
    make(c, flavor)
    [(code, found, fix)] = [(code, found, fix) for code, found, fix in codes(c) if code == "KT003"]
    assert found == path and fix.startswith("did you mean 'nvidia.com/gpu'? use one of cpu, ephemeral-storage")
