"""`kubetrain run-local` runs committed jobs from dist/ as their operator would: pods, environment, restarts."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, SOURCES_PATH, dist_file, kubetrain
from kubetrain.jobs.launch import EXIT_RETRY
from kubetrain.local.run_plan import expand_env_refs, find_job, plan_local_run
from kubetrain.local.summary import RunSummary

from kubetrain_runtime.runtime_config import own_loop_config

pytest.importorskip("torch", reason="run-local starts torchrun, which needs torch")


def metrics(stdout: str) -> list[dict]:
    """The trainer's JSON lines, from whichever pod hosts rank 0 (c10d rendezvous picks it)."""
    return [json.loads(line.split("] ", 1)[1]) for line in stdout.splitlines()
            if line.startswith("[") and "] {" in line]


# The dev fleet's GPT job on each launch target (TrainJob, the default; PyTorchJob; indexed Job), 30 steps each, the
# indexed Job's profiled as the manual shows: run once per module and read by the tests below (each run-local start
# costs four torch imports; the training, ~1 s).
TARGET_JOBS = {"tiny-gpt": [], "tiny-gpt-pytorchjob": [],
               "tiny-gpt-indexed": ["--set", "profiling.enabled=true", "--set", "profiling.start_step=3",
                                    "--set", "profiling.active=2"]}


@pytest.fixture(scope="module")
def dev_runs(tmp_path_factory) -> dict[str, tuple[subprocess.CompletedProcess[str], Path]]:
    runs = {}
    for job, settings in TARGET_JOBS.items():
        workdir = tmp_path_factory.mktemp(job)
        runs[job] = kubetrain("run-local", f"dev/{job}", "--steps", "30", "--workdir", str(workdir), *settings), workdir
    return runs


@pytest.mark.processes
def test_dev_job_trains_from_dist(dev_runs):
    result, workdir = dev_runs["tiny-gpt"]
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    records = metrics(result.stdout)
    steps = [r for r in records if r["event"] == "step"]
    assert [r["step"] for r in steps] == list(range(1, 31))
    assert steps[-1]["loss"] < steps[0]["loss"] - 1.0
    assert records[-1]["event"] == "finished" and records[-1]["step"] == 30
    digests = records[-1]["weights_sha256_per_rank"]
    assert len(digests) == 2 and len(set(digests)) == 1  # the TrainJob's two nodes, one rank each
    checkpoints = workdir / "volumes" / "checkpoints" / "tiny-gpt"
    assert sorted(p.name for p in checkpoints.glob("step-*")) == ["step-00000020", "step-00000030"]  # keep: 2
    assert (workdir / "pods" / "node-0-1" / "kubetrain-config" / "run.yaml").is_file()
    # The last line sums the run up from rank 0's records: steps, final loss, time, checkpoints of each tier.
    saves = [r.get("tier", "durable") for r in records if r["event"] == "checkpoint"]
    assert saves.count("durable") == 3 and saves.count("local") >= 1
    summary = result.stdout.splitlines()[-1]
    assert re.fullmatch(rf"\[run-local\] dev/tiny-gpt-[0-9a-f]{{8}} succeeded after \d+\.\d s: 30 steps, final loss "
                        rf"{records[-1]['loss']:.4f}, {len(saves)} checkpoints \({saves.count('durable')} durable, "
                        rf"{saves.count('local')} local\), 0 restarts", summary), summary


@pytest.mark.processes
def test_the_dev_job_trains_the_same_on_every_target(dev_runs):
    digests = {}
    for job, (result, _) in dev_runs.items():
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        finished = [r for r in metrics(result.stdout) if r["event"] == "finished"]
        assert finished and finished[0]["step"] == 30
        digests[job] = finished[0]["weights_sha256_per_rank"]
        # Kubeflow Trainer's status endpoint, served by run-local for the TrainJob alone: rank 0's last post
        # arrives, accepted, with the run's end in it.
        statuses = [line for line in result.stdout.splitlines() if line.startswith("[status] ")]
        if job == "tiny-gpt":
            assert "status endpoint of TrainJob tiny-gpt-" in result.stdout and "refused" not in result.stdout
            assert statuses[-1].startswith("[status] 100 %, 0 s left: loss ") and "current_step 30," in statuses[-1]
        else:
            assert statuses == []
    # Same run config, same world size, same seed: the targets differ only in how the pods meet (and profiling
    # changes no result).
    assert digests["tiny-gpt"] == digests["tiny-gpt-pytorchjob"] == digests["tiny-gpt-indexed"]


@pytest.mark.processes
def test_a_profiled_dev_job_writes_its_trace_on_the_jobs_volume(dev_runs):
    """The manual's walk-through: the committed job, profiled by --set, leaves a Chrome trace on its checkpoint
    claim (the default folder without TensorBoard), where `tensorboard --logdir` finds it; the weights are those of
    the unprofiled targets' runs (test_the_dev_job_trains_the_same_on_every_target)."""
    result, workdir = dev_runs["tiny-gpt-indexed"]
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    profiles = workdir / "volumes" / "checkpoints" / "tiny-gpt-indexed" / "profiles"
    written = [r for r in metrics(result.stdout) if r["event"] == "profile" and r["phase"] == "written"]
    assert len(written) == 1 and written[0]["steps"] == [3, 4] and written[0]["ranks"] == [0]
    (trace,) = profiles.iterdir()  # rank 0 only, the default
    assert written[0]["traces"] == [str(trace.resolve())] and re.fullmatch(
        r"tiny-gpt-indexed-rank0\.\d+\.pt\.trace\.json", trace.name), trace.name
    assert any(e.get("name") == "ProfilerStep#1" for e in json.loads(trace.read_text())["traceEvents"])


@pytest.mark.processes
def test_dev_command_job_trains_from_dist(tmp_path):
    result = kubetrain("run-local", "dev/ddp-minimal", "--workdir", str(tmp_path))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    # The script's kubetrain_runtime.Run writes rank 0's records and checkpoints where the job says (checkpoint_dir).
    losses = [r["loss"] for r in metrics(result.stdout) if r["event"] == "step"]
    assert len(losses) == 20 and losses[-1] < losses[0] / 2
    assert (tmp_path / "volumes" / "checkpoints" / "ddp-minimal" / "step-00000020" / "COMPLETE").is_file()
    assert "Address already in use" not in result.stdout  # each pod's runtime serves metrics on a port of its own
    # A command job's output is its own: the summary says how it ended, its pods and their restarts.
    summary = result.stdout.splitlines()[-1]
    assert re.fullmatch(r"\[run-local\] dev/ddp-minimal-[0-9a-f]{8} succeeded after \d+\.\d s: 2 pods, 0 restarts",
                        summary), summary


def test_pods_get_the_operator_environment_and_the_callers(tmp_path, monkeypatch):
    monkeypatch.setenv("KUBETRAIN_CALLER_MARK", "kept")
    job = plan_local_run(find_job(ROOT / "dist", "tiny-gpt-pytorchjob"), tmp_path, steps=5, overrides=["seed=3"])
    assert [p.name for p in job.pods] == ["master-0", "worker-0"] and job.backoff_limit == 3
    for rank, pod in enumerate(job.pods):
        assert pod.env["KUBETRAIN_CALLER_MARK"] == "kept" and pod.restart_policy == "ExitCode"
        assert pod.env["PET_NODE_RANK"] == pod.env["RANK"] == str(rank)
        assert pod.env["PET_NNODES"] == "2" and pod.env["PET_NPROC_PER_NODE"] == "1" and pod.env["WORLD_SIZE"] == "2"
        assert pod.env["MASTER_PORT"] == job.pods[0].env["MASTER_PORT"]
        assert pod.env["KUBETRAIN_RUN_CONFIG"] == str(tmp_path.resolve() / "pods" / pod.name / "kubetrain-config" /
                                                      "run.yaml")
        assert pod.command[:2] == ["/bin/sh", "-c"]
        assert f"--rdzv-endpoint=127.0.0.1:{pod.env['MASTER_PORT']}" in pod.command
        sets = [pod.command[i + 1] for i, arg in enumerate(pod.command) if arg == "--set"]
        assert sets[:3] == ["seed=3", "max_steps=5",
                            f"checkpoint.dir={(tmp_path / 'volumes' / 'checkpoints').resolve()}/tiny-gpt-pytorchjob"]
        # The fast tier on the pod's own emptyDir, and a metrics port of its own on this shared machine.
        assert sets[3] == f"checkpoint.local_dir={(tmp_path / 'pods' / pod.name / 'kubetrain-local-ckpt').resolve()}"
        assert sets[4].startswith("metrics.port=") and len(sets) == 5


def test_the_pods_of_a_loop_of_ones_own_get_a_metrics_port_each(tmp_path, monkeypatch):
    """A loop on the runtime serves Prometheus on port 9400 in a job; two local pods on one machine would collide:
    each gets a runtime config of its own, the job's (here the caller's) with only the port replaced."""
    job = plan_local_run(find_job(ROOT / "dist", "dev/ddp-minimal"), tmp_path / "a", steps=None, overrides=[])
    configs = [yaml.safe_load(Path(pod.env["KUBETRAIN_RUNTIME_CONFIG"]).read_text()) for pod in job.pods]
    ports = [config["metrics"]["port"] for config in configs]
    assert len(job.pods) == 2 and len(set(ports)) == 2 and 9400 not in ports
    assert configs[0] == {"metrics": {"port": ports[0]}}
    (tmp_path / "runtime.yaml").write_text("checkpoint: {keep: 3}\nmetrics: {mlflow_experiment: nlp}\n")
    monkeypatch.setenv("KUBETRAIN_RUNTIME_CONFIG", str(tmp_path / "runtime.yaml"))
    job = plan_local_run(find_job(ROOT / "dist", "dev/ddp-minimal"), tmp_path / "b", steps=None, overrides=[])
    written = job.pods[0].env["KUBETRAIN_RUNTIME_CONFIG"]
    config = own_loop_config(written, in_job=True)  # what the pod's runtime reads
    assert (config.checkpoint.keep, config.metrics.mlflow_experiment) == (3, "nlp")
    assert config.metrics.port == yaml.safe_load(Path(written).read_text())["metrics"]["port"] != 9400
    # No endpoint asked for, none given.
    (tmp_path / "runtime.yaml").write_text("metrics: {port: 0}\n")
    job = plan_local_run(find_job(ROOT / "dist", "dev/ddp-minimal"), tmp_path / "c", steps=None, overrides=[])
    assert {pod.env["KUBETRAIN_RUNTIME_CONFIG"] for pod in job.pods} == {str(tmp_path / "runtime.yaml")}


def test_elastic_pods_get_the_rendezvous_and_no_ranks(tmp_path):
    job = plan_local_run(find_job(ROOT / "dist", "dev/tiny-gpt-elastic"), tmp_path, steps=5, overrides=[])
    assert [p.name for p in job.pods] == ["worker-0", "worker-1"]
    for pod in job.pods:
        assert pod.env["PET_NNODES"] == "1:2" and pod.env["PET_RDZV_BACKEND"] == "c10d"
        assert pod.env["PET_RDZV_ENDPOINT"] == job.pods[0].env["PET_RDZV_ENDPOINT"]
        assert pod.env["PET_MAX_RESTARTS"] == "3"
        # No Master: ranks come from each rendezvous, not from the pod index.
        assert not {"RANK", "PET_NODE_RANK", "MASTER_ADDR", "WORLD_SIZE"} & set(pod.env) - set(os.environ)


@pytest.mark.processes
def test_bad_override_is_reported_before_any_pod_starts(tmp_path):
    result = kubetrain("run-local", "dev/tiny-gpt", "--workdir", str(tmp_path), "--set", "optimizer.lr=-1",
                       "--set", "batch.micro_size=abc")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "optimizer.lr: Input should be greater than 0" in result.stderr
    assert "batch.micro_size" in result.stderr
    assert result.stdout == "" and not (tmp_path / "pods").exists() or not any((tmp_path / "pods").iterdir()), \
        "no pod may start"


@pytest.mark.processes
def test_a_workdir_that_is_a_file_is_bad_input(tmp_path):
    (tmp_path / "file").write_text("mine")
    result = kubetrain("run-local", "dev/tiny-gpt", "--workdir", str(tmp_path / "file"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "cannot use --workdir" in result.stderr and "[KT301]" in result.stderr
    assert (tmp_path / "file").read_text() == "mine"


@pytest.mark.processes
def test_set_is_refused_for_command_jobs(tmp_path):
    result = kubetrain("run-local", "dev/ddp-minimal", "--workdir", str(tmp_path), "--set", "max_steps=3")
    assert result.returncode == 2 and "this job runs its own command" in result.stderr


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has GPUs")
@pytest.mark.processes
def test_gpu_job_is_refused_without_gpus(tmp_path):
    result = kubetrain("run-local", "prod/gpt-1b-fsdp", "--workdir", str(tmp_path))
    assert result.returncode == 2
    assert "each pod requests 8 nvidia.com/gpu and this machine has none" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.processes
def test_unknown_job_and_broken_manifest(tmp_path):
    result = kubetrain("run-local", "dev/nope", "--workdir", str(tmp_path))
    assert result.returncode == 2 and "no job named 'nope'" in result.stderr
    dist = tmp_path / "dist"
    shutil.copytree(ROOT / "dist" / "dev", dist / "dev")
    job = dist / "dev" / "ml-dev" / dist_file("dev", "PyTorchJob", "tiny-gpt-pytorchjob").name
    job.write_text("<<<<<<< HEAD\n" + job.read_text() + "=======\n>>>>>>> branch\n")
    result = kubetrain("run-local", "dev/tiny-gpt-pytorchjob", "--workdir", str(tmp_path / "w"), "--dist", str(dist))
    assert result.returncode == 2 and "Traceback" not in result.stderr and "cannot read" in result.stderr


def test_kubernetes_variable_references_are_expanded():
    env = {"PET_MASTER_ADDR": "127.0.0.1", "PET_MASTER_PORT": "2345"}
    assert expand_env_refs("$(PET_MASTER_ADDR):$(PET_MASTER_PORT)", env) == "127.0.0.1:2345"
    assert expand_env_refs("$(UNDEFINED) $$(PET_MASTER_PORT)", env) == "$(UNDEFINED) $(PET_MASTER_PORT)"


RESTART_FLEET = '''
from kubetrain import App, Cluster, PyTorchJob, TrainingJob

def build():
    app = App()
    cluster = Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"])
    TrainingJob(cluster, "crashy", image="img:1", nodes=1, procs_per_node=1, max_restarts=0, backoff_limit=1,
                target=PyTorchJob(),
                resources={"cpu": "1", "memory": "2Gi", "shm": "256Mi"},
                volumes=[{"name": "ckpt", "claim": "ckpt", "mount_path": "/ckpt"}],
                workload={"kind": "trainer", "run": {
                    "model": {"vocab_size": 64, "dim": 16, "n_layers": 1, "n_heads": 2},
                    "data": {"seq_len": 16}, "batch": {"global_size": 2, "micro_size": 2},
                    "checkpoint": {"dir": "/ckpt/crashy", "interval": 100}, "max_steps": 6}})
    return app
'''


@pytest.mark.processes
def test_restarts_follow_the_operator(tmp_path):
    """Ranks that keep dying exhaust torchrun's budget, the pod exits EXIT_RETRY and is restarted up to
    backoffLimit; without the fault the same job succeeds at once."""
    (tmp_path / "fleet").mkdir()
    (tmp_path / "fleet" / "__init__.py").write_text(textwrap.dedent(RESTART_FLEET))
    assert kubetrain("synth", "--app", "fleet", cwd=tmp_path).returncode == 0
    dist = str(tmp_path / "dist")
    result = kubetrain("run-local", "c/crashy", "--workdir", str(tmp_path / "w1"), "--dist", dist,
                       env={"KUBETRAIN_FAULT": "crash:step=3"})
    assert result.returncode == EXIT_RETRY, result.stdout[-3000:]
    assert f"pod master-0 exited {EXIT_RETRY}; restartPolicy ExitCode restarts it (1 of backoffLimit 1)" \
        in result.stdout
    assert "the backoff limit is spent: the job failed" in result.stdout
    # Two starts of the trainer, one per pod attempt, each crashing at step 3 after logging steps 1 and 2.
    summary = result.stdout.splitlines()[-1]
    assert re.fullmatch(rf"\[run-local\] c/crashy(-[0-9a-f]{{8}})? failed \(exit {EXIT_RETRY}\) after \d+\.\d s: "
                        r"stopped at step 2, final loss \d+\.\d{4}, 0 checkpoints, 1 restart \(1 of a pod\)",
                        summary), summary
    result = kubetrain("run-local", "c/crashy", "--workdir", str(tmp_path / "w2"), "--dist", dist)
    assert result.returncode == 0 and "restarts it" not in result.stdout
    finished = metrics(result.stdout)[-1]
    assert result.stdout.splitlines()[-1].endswith(f": 6 steps, final loss {finished['loss']:.4f}, 1 checkpoint "
                                                   "(1 durable), 0 restarts")


@pytest.mark.processes
def test_launcher_fails_a_bad_config_at_once_without_torchrun(tmp_path):
    """The pod's launcher script checks the run config before torchrun: exit 2, which ExitCode never retries."""
    job = yaml.safe_load(dist_file("dev", "PyTorchJob", "tiny-gpt-pytorchjob").read_text())
    command = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"]
    (tmp_path / "run.yaml").write_text("batch: {global_size: 4, micro_size: 1}\nmax_steps: 1\noptimiser: {}\n")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").symlink_to(sys.executable)
    env = {**os.environ, "KUBETRAIN_RUN_CONFIG": str(tmp_path / "run.yaml"),
           "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": SOURCES_PATH}
    result = subprocess.run(command[:4], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "optimiser: unknown field [KT001]" in result.stderr and "torchrun" not in result.stderr


def test_the_summary_of_a_resumed_an_interrupted_and_an_unstarted_run():
    resumed = RunSummary("c/job", trainer=True, pods=2)
    for record in ({"event": "mfu_basis"}, {"event": "resumed", "step": 20},
                   {"event": "step", "step": 21, "loss": 2.5}, {"event": "checkpoint", "tier": "local", "step": 25},
                   {"event": "finished", "step": 30, "loss": 2.25}):
        resumed.observe(json.dumps(record))
    resumed.observe("not a record")
    assert resumed.line(0, 12.34, 0) == ("c/job succeeded after 12.3 s: 30 steps (resumed from step 20), final loss "
                                         "2.2500, 1 checkpoint (1 local), 0 restarts")
    assert resumed.line(130, 5, 0).startswith("c/job was interrupted after 5.0 s: stopped at step 30")
    unstarted = RunSummary("c/job", trainer=True, pods=1)
    assert unstarted.line(2, 1.0, 0) == "c/job failed (exit 2) after 1.0 s before its first step, 0 restarts"
    assert RunSummary("c/cmd", trainer=False, pods=3).line(0, 2.0, 2) == \
        "c/cmd succeeded after 2.0 s: 3 pods, 2 restarts (2 of pods)"
