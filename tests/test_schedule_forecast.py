"""When the fleet's runs start (kubetrain.schedule's inputs and outputs): the declared runs of a real synth with
their priorities and `kubetrain cost` durations, background load and history as typed inputs with errors
naming the field, P50/P90 over replicas, the pull request's waits (a large high-priority run added to the
example prod fleet preempts and delays the runs it displaces), and the timeline picture."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from kubetrain import App, PodSettings, PriorityClass, Trainer, TrainingJob
from kubetrain.admission.cluster_objects import ClusterObjects
from kubetrain.cli import app as cli
from kubetrain.gitops.diff import Key, ObjectChange, Report, render_markdown, render_text
from kubetrain.model.manifests import yaml_files
from kubetrain.pipeline import synth
from kubetrain.schedule.background import history_runs, load_runs
from kubetrain.schedule.simulate_command import SimulateInputError, SimulationInputs, cluster_manifests, simulate_dist
from kubetrain.schedule.wait_change import wait_change
from kubetrain_runtime.problems import ConfigError
from typer.testing import CliRunner

from apps import prod

TRAINING = ("prod/ml-prod/gpt-1b-fsdp", "prod/ml-prod/llama-3-2-1b-sft", "prod/ml-prod/megatron-gpt")


def _prod(urgent_nodes: int = 0) -> App:
    """The example prod fleet; with `urgent_nodes`, a run of that many p5 nodes at a high priority added to the
    training queue (gpt-1b-fsdp's settings, its own checkpoints)."""
    made: dict[str, TrainingJob] = {}

    class Kept(TrainingJob):  # apps/prod keeps no handle on its jobs: keep one to copy gpt-1b-fsdp's settings
        def __init__(self, scope, id, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003
            super().__init__(scope, id, *args, **kwargs)
            made[id] = self

    app = App()
    prod.TrainingJob, original = Kept, prod.TrainingJob
    try:
        cluster = prod.define(app)
    finally:
        prod.TrainingJob = original
    if urgent_nodes:
        urgent = PriorityClass(cluster, "urgent", name="urgent", value=1000)
        props = made["gpt-1b-fsdp"].spec.props
        run = props.workload.run
        run = run.model_copy(update={"checkpoint": run.checkpoint.model_copy(update={"dir": "/fsx/checkpoints/urgent"}),
                                     "batch": run.batch.model_copy(update={"global_size": 768})})
        TrainingJob(cluster, "gpt-7b-urgent", props.model_copy(update={
            "name": "gpt-7b-urgent", "nodes": urgent_nodes, "workload": Trainer(run=run),
            "pod": PodSettings(priority_class=urgent)}))
    return app


@pytest.fixture(scope="module")
def fleets(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("fleets")
    synth(_prod(), root / "base")
    synth(_prod(urgent_nodes=12), root / "head")
    return root / "base", root / "head"


def test_declared_runs_take_their_queue_priority_and_cost_duration(fleets):
    base, head = fleets
    [cluster] = [c for c in simulate_dist(head, SimulationInputs(replicas=3))[0] if c.cluster == "prod"]
    urgent = cluster.runs["prod/ml-prod/gpt-7b-urgent"]
    assert (urgent.spec.cluster_queue, urgent.spec.priority, urgent.spec.gpus) == ("training", 1000, 96)
    fsdp = cluster.runs["prod/ml-prod/gpt-1b-fsdp"]
    assert (fsdp.spec.priority, fsdp.spec.gpus) == (0, 16)
    assert 1 < fsdp.spec.hours < 1000  # kubetrain cost's estimate: FLOPs over the GPUs' peak x MFU x ETTR
    assert "prod/ml-prod/gpt-1b-lr-ablation" in cluster.runs  # research queue, borrowing from the cohort
    assert not any(key.startswith("dev/") for c in simulate_dist(head, SimulationInputs(replicas=1))[0]
                   for key in c.runs)  # the dev fleet's runs name no queue: not Kueue's to schedule


def test_a_pr_adding_a_large_high_priority_run_shows_whom_it_preempts_and_how_much_longer_they_wait(fleets):
    base, head = fleets
    change = wait_change(yaml_files(base), yaml_files(head), "base", "head", SimulationInputs(replicas=8))
    later = {r.key: r for r in change.later}
    # 96 GPUs in training (112 nominal; research borrows 16 of the cohort's 128): only evicting every
    # lower-priority run of its own queue (withinClusterQueue: LowerPriority) frees them.
    assert set(later) == set(TRAINING)
    for run in later.values():
        assert run.preempted_more and run.new_preemptors == ["prod/ml-prod/gpt-7b-urgent"]
        assert run.delta("finished", 0.5) > 1.0  # it resumes only after the urgent run's hours
        assert run.delta("finished", 0.9) >= run.delta("finished", 0.5)
    assert "prod/ml-prod/gpt-1b-lr-ablation" not in later  # research's borrowed 16 are not reclaimable (Never)
    [added] = change.added
    assert added.spec.key == "prod/ml-prod/gpt-7b-urgent" and added.spec.submitted_hours == 0.05  # at the sync
    assert added.p("waits", 0.9) == 0.0  # admitted at once, by preemption
    assert change.gpu_hours == sum(r.waiting_gpu_hours for r in later.values())
    text = render_text(Report("main", [_added_run()], [], waits=change))
    assert "waits: this change makes 3 existing runs wait longer" in text and ", 3 of them preempted" in text
    assert "  prod/ml-prod/gpt-1b-fsdp: finishes +" in text and "by prod/ml-prod/gpt-7b-urgent" in text
    markdown = render_markdown(Report("main", [_added_run()], [], waits=change))
    assert "#### Waits (`kubetrain simulate`)" in markdown
    [row] = [line for line in markdown.splitlines() if line.startswith("| `prod/ml-prod/gpt-1b-fsdp` |")]
    assert row.split(" | ")[5:7] == ["0.0 → 1.0", "`prod/ml-prod/gpt-7b-urgent`"]  # preempted once a replica
    assert "- prod/ml-prod/gpt-7b-urgent (new): admitted after 0.0 h P50" in markdown


def _added_run() -> ObjectChange:
    return ObjectChange("added", Key("prod", "trainer.kubeflow.org", "TrainJob", "ml-prod", "gpt-7b-urgent"))


def test_no_change_to_what_the_schedule_reads_simulates_nothing(fleets):
    base, _ = fleets
    files = yaml_files(base)
    assert not wait_change(files, files, "base", "head")


LOAD = """
classes:
  - name: nightly-eval
    cluster_queue: training
    count: 4
    every_hours: 0
    priority: 500
    hours: 3
    pod_sets: [{count: 2, pool: p5, requests: {nvidia.com/gpu: 8}}]
"""


def test_background_load_at_a_higher_priority_delays_the_declared_runs(fleets):
    base, _ = fleets
    alone = {r.spec.key: r for c in simulate_dist(base, SimulationInputs(replicas=4))[0] for r in c.runs.values()}
    loaded_forecasts, _ = simulate_dist(base, SimulationInputs(replicas=4, load=(LOAD, "load.yaml")))
    loaded = {r.spec.key: r for c in loaded_forecasts for r in c.runs.values()}
    [prod_forecast] = [c for c in loaded_forecasts if c.cluster == "prod"]
    assert prod_forecast.background == 4
    # 4 x 16 GPUs at priority 500 arrive with the runs: the training queue's 112 hold 64 of them and 40 of the runs
    # only after the evaluations, whose 8 nodes leave 4 of the pool's 16 to the ablation's 4.
    assert any((loaded[k].p("finished", 0.5) or 0) > (alone[k].p("finished", 0.5) or 0) + 1 for k in TRAINING)


@pytest.mark.parametrize("text, where", [
    ("classes: [{name: x, cluster_queue: training, count: 1, hours: 1, pod_sets: [{requests: {cpu: 1}}], "
     "colour: red}]", "classes.0.colour"),
    ("classes: [{name: x, cluster_queue: nope, count: 1, hours: 1, pod_sets: [{requests: {cpu: 1}}]}]",
     "classes[0].cluster_queue: ClusterQueue nope is not in cluster prod"),
    ("classes: [{name: x, cluster_queue: training, count: 1, hours: 0, pod_sets: [{requests: {cpu: 1}}]}]",
     "classes.0.hours"),
    ("classes: [{name: x, cluster_queue: training, count: 1, hours: 1, every_hours: 1, rate_per_hour: 2, "
     "pod_sets: [{requests: {cpu: 1}}]}]", "rate_per_hour"),
    ("classes: [{name: x, cluster_queue: training, count: 1, hours: 1, pod_sets: [{requests: {cpu: lots}}]}]",
     "requests"),
    ("classes: [{name: x, cluster_queue: training, count: 1, hours: 1, priority_class: vip, "
     "pod_sets: [{requests: {cpu: 1}}]}]", "classes[0].priority_class: WorkloadPriorityClass vip is not in"),
    ("classes: [{name: x, cluster_queue: training, count: 1, hours: 1, pod_sets: [{pool: gpu, requests: {cpu: 1}}]}]",
     "classes[0].pod_sets[0].pool: pool gpu is not in cluster prod"),
])
def test_a_bad_load_file_names_the_field_and_the_fix(fleets, text, where):
    base, _ = fleets
    clusters = {name: ClusterObjects.from_manifests(name, found)
                for name, found in cluster_manifests(yaml_files(base), "dist").items()}
    with pytest.raises(ConfigError) as error:
        load_runs(text, "load.yaml", clusters, {})
    lines = error.value.lines()
    assert any(where in line for line in lines), lines
    assert all(line.startswith("load.yaml: ") and " fix: " in line for line in lines)


def test_history_replays_past_submissions_and_bad_rows_name_line_and_column(fleets):
    base, _ = fleets
    clusters = {name: ClusterObjects.from_manifests(name, found)
                for name, found in cluster_manifests(yaml_files(base), "dist").items()}
    good = "submitted_hours,cluster,cluster_queue,priority,hours,pods,pool,nvidia.com/gpu,cpu\n" \
           "-2,prod,training,0,5,4,p5,8,96\n"
    [run] = history_runs(good, "past.csv", clusters)
    assert (run.submitted_hours, run.gpus, run.pool, run.pod_sets[0].requests["cpu"]) == (-2.0, 32, "p5", 96000)
    with pytest.raises(ConfigError) as error:
        history_runs(good + "soon,prod,training,0,5,4,p5,8,96\n-1,prod,nope,0,1,1,,1,\n", "past.csv", clusters)
    assert [line.split(" fix: ")[0] for line in error.value.lines()] == [
        "past.csv: line 3, column submitted_hours: 'soon' is not a number [KT003]",
        "past.csv: line 4, column cluster_queue: ClusterQueue nope is not in cluster prod [KT003]"]


def test_simulate_prints_p50_p90_of_each_run_and_json_for_tools(fleets):
    base, _ = fleets
    runner = CliRunner()
    text = runner.invoke(cli, ["simulate", "--dist", str(base), "--replicas", "3", "--submit",
                               "gpt-1b-lr-ablation=2", "--duration", "prod/ml-prod/megatron-gpt=10"])
    assert text.exit_code == 0, text.output
    [row] = [line for line in text.stdout.splitlines() if line.startswith("prod/ml-prod/megatron-gpt ")]
    assert row.split()[4:6] == ["0.0", "10.0"]  # submitted now, the duration given
    [row] = [line for line in text.stdout.splitlines() if line.startswith("prod/ml-prod/gpt-1b-lr-ablation ")]
    assert row.split()[4] == "2.0" and row.split()[6].split("/")[0] == "2.0"  # admitted when submitted: room
    result = runner.invoke(cli, ["simulate", "--dist", str(base), "--replicas", "3", "--json"])
    document = json.loads(result.stdout)
    ablation = next(j for j in document["jobs"] if j["job"] == "prod/ml-prod/gpt-1b-lr-ablation")
    assert set(ablation["wait"]) == {"p50", "p90"} and ablation["cluster_queue"] == "research"
    assert (document["replicas"], document["kueue_version"]) == (3, "v0.19.2")


@pytest.mark.processes  # matplotlib's font cache runs fc-list the first time it is built
def test_the_timeline_picture_is_a_png_or_an_svg_with_lanes_runs_and_preemptions(fleets, tmp_path):
    _, head = fleets
    for name in ("t.png", "t.svg"):
        result = CliRunner().invoke(cli, ["simulate", "--dist", str(head), "--replicas", "2", "--submit",
                                          "gpt-7b-urgent=1", "--picture", str(tmp_path / name)])
        assert result.exit_code == 0, result.output
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = (tmp_path / "t.svg").read_text()
    for text in ("hours from now", "ml-prod/gpt-7b-urgent", "ClusterQueue training", "ClusterQueue research",
                 "preempted", "P90 finish", "admitted, waiting for nodes"):
        assert text in svg, text


@pytest.mark.parametrize("args, message", [
    (["--submit", "nope=1"], "--submit nope=1: nope names no queued run fix: use one of prod/ml-prod/"),
    (["--duration", "gpt-1b-fsdp=-1"], "a duration must be more than 0 hours"),
    (["--duration", "gpt-1b-fsdp"], "is not JOB=HOURS"),
    (["--picture", "t.gif"], "not a .png or .svg file"),
    (["--load", "missing.yaml"], "--load missing.yaml: no such file"),
])
def test_simulate_bad_input_is_one_line_and_exit_2(fleets, args, message):
    base, _ = fleets
    result = CliRunner().invoke(cli, ["simulate", "--dist", str(base), "--replicas", "1", *args])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("error: ") and message in result.stderr and "fix:" in result.stderr


def test_simulate_input_error_for_a_missing_dist(tmp_path):
    with pytest.raises(SimulateInputError, match="is not a folder"):
        simulate_dist(tmp_path / "nope", SimulationInputs())


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                   check=True, capture_output=True)


@pytest.mark.processes  # git
def test_kubetrain_diff_shows_the_waits_with_background_load_and_refuses_a_bad_load_file(fleets, tmp_path):
    base, head = fleets
    shutil.copytree(base, tmp_path / "dist")
    _git(tmp_path, "init", "-q", "-b", "main")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "base")
    shutil.rmtree(tmp_path / "dist")
    shutil.copytree(head, tmp_path / "dist")
    (tmp_path / "load.yaml").write_text(LOAD)
    (tmp_path / "bad.yaml").write_text(LOAD.replace("count: 4", "count: four"))
    before = os.getcwd()
    os.chdir(tmp_path)
    try:
        good = CliRunner().invoke(cli, ["diff", "--format", "markdown", "--load", "load.yaml"])
        bad = CliRunner().invoke(cli, ["diff", "--load", "bad.yaml"])
    finally:
        os.chdir(before)
    assert good.exit_code == 0, good.output
    assert "#### Waits (`kubetrain simulate`)" in good.stdout and "| `prod/ml-prod/gpt-1b-fsdp` |" in good.stdout
    assert bad.exit_code == 2 and bad.stdout == "" and len(bad.stderr.splitlines()) == 1
    assert bad.stderr.startswith("error: bad.yaml: classes.0.count: ") and "fix: " in bad.stderr
