"""Metrics leave the pod: every rank's Prometheus endpoint scraped during a real two-rank run, and
the optional TensorBoard and MLflow sinks read back from what they wrote."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import ROOT, SOURCES_PATH
from test_training import TINY, train, write_config

from kubetrain_runtime.metric_names import RUNTIME_METRICS
from training.config import ModelConfig
from training.flops import flops_per_token

torch = pytest.importorskip("torch", reason="the training runtime needs torch")


def two_free_ports() -> int:
    """A port p with p and p + 1 free: the endpoints of local ranks 0 and 1."""
    for _ in range(50):
        with socket.socket() as first:
            first.bind(("127.0.0.1", 0))
            port = first.getsockname()[1]
            with socket.socket() as second:
                try:
                    second.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
        return port
    raise RuntimeError("no two adjacent free ports")


# What a scrape of an endpoint that does not serve yet can meet: a refused connection, or (the port being in the
# ephemeral range, as a free port from the kernel is) a TCP connection to itself, which reads its own request
# back as the reply.
NOT_SERVING = (OSError, http.client.HTTPException)


def scrape(port: int) -> dict[str, list]:
    from prometheus_client.parser import text_string_to_metric_families

    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


@pytest.mark.processes
def test_every_rank_serves_prometheus_metrics_during_a_run(tmp_path):
    pytest.importorskip("prometheus_client")
    port = two_free_ports()
    config = write_config(tmp_path, max_steps=200, metrics={"port": port}, log_interval=2,
                          resilience={"ettr_target": 0.8},
                          checkpoint={"dir": str(tmp_path / "ckpt"), "interval": 3, "keep": 2,
                                      "local_dir": str(tmp_path / "local"), "local_interval": 1})
    (tmp_path / "ckpt").mkdir()
    first_start = time.time() - 3600  # 4 starts before, the first an hour ago, paused 20 minutes in all
    (tmp_path / "ckpt" / "ettr.json").write_text(json.dumps({"first_start": first_start, "starts": 4,
                                                             "paused_s": 1200.0}))
    env = {**os.environ, "PYTHONPATH": SOURCES_PATH, "KUBETRAIN_JOB": "scraped"}
    env.pop("NODE_NAME", None)
    agent = subprocess.Popen([sys.executable, "-m", "kubetrain_runtime.torchrun", "--standalone", "--nproc-per-node=2",
                              "-m", "training", "--config", str(config)], cwd=ROOT, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        scraped: dict[int, dict] = {}
        deadline = time.monotonic() + 120
        while len(scraped) < 2 and time.monotonic() < deadline and agent.poll() is None:
            for rank in (0, 1):
                try:
                    samples = scrape(port + rank)
                except NOT_SERVING:
                    continue
                checkpoints = {s.labels["tier"]: s.value for s in samples.get("kubetrain_checkpoints", [])
                               if s.name.endswith("_total")}
                if samples.get("kubetrain_step") and samples["kubetrain_step"][0].value >= 4 and len(checkpoints) == 2:
                    scraped[rank] = samples
            time.sleep(0.2)
    finally:
        agent.terminate()  # torchrun passes SIGTERM on to its ranks (a SIGKILL would orphan them)
        stderr = agent.communicate(timeout=60)[1]
    assert len(scraped) == 2, stderr[-3000:]
    for rank, samples in scraped.items():
        step = samples["kubetrain_step"][0]
        assert step.labels == {"job": "scraped", "rank": str(rank), "node": socket.gethostname()}
        assert samples["kubetrain_loss"][0].value > 0
        assert samples["kubetrain_tokens_per_second"][0].value > 0
        assert 0 < samples["kubetrain_ettr"][0].value <= 1
        assert samples["kubetrain_restarts"][0].value == 0
        assert {s.labels["tier"] for s in samples["kubetrain_checkpoint_blocked_seconds"]} == {"local", "durable"}
        assert "kubetrain_skipped_steps" in samples and "kubetrain_rollbacks" in samples
        # MFU's basis, the cost estimate's formula: FLOPs per token; a CPU has no peak, so no peak and no MFU.
        assert samples["kubetrain_flops_per_token"][0].value == flops_per_token(
            ModelConfig(**TINY["model"]), TINY["data"]["seq_len"])
        assert not samples.get("kubetrain_peak_flops") and not samples.get("kubetrain_mfu")
        # Exactly the series kubetrain_runtime/metric_names.py lists, which the alerts read.
        assert set(samples) == {name.removesuffix("_total") for name in RUNTIME_METRICS}
        value = {name: family[0].value for name, family in samples.items() if len(family) == 1}
        assert value["kubetrain_profiling"] == 0  # the profiler is off
        assert value["kubetrain_log_interval_steps"] == 2 and value["kubetrain_ettr_target"] == 0.8
        assert value["kubetrain_job_starts"] == 5  # this start counted once, by rank 0, beside the checkpoints
        assert time.time() - 60 < value["kubetrain_last_step_timestamp_seconds"] <= time.time()
        last_checkpoint = {s.labels["tier"]: s.value for s in samples["kubetrain_last_checkpoint_timestamp_seconds"]}
        assert set(last_checkpoint) == {"local", "durable"}
        assert all(time.time() - 60 < stamp <= time.time() for stamp in last_checkpoint.values())
        interval = {s.labels["tier"]: s.value for s in samples["kubetrain_checkpoint_interval_seconds"]}
        # Three steps a durable save, one a local one, at the recent step time.
        assert interval["durable"] == pytest.approx(3 * value["kubetrain_step_time_seconds"])
        assert interval["local"] == pytest.approx(value["kubetrain_step_time_seconds"])
        assert not samples["kubetrain_permanent_failure_timestamp_seconds"]  # declared, not set: nothing failed
        assert value["kubetrain_job_crashes"] == 1  # the start before recorded no clean end: this start is a crash
        # The ETTR alert's clock: the job's first start, later by its pauses (time() minus it is ETTR's wall time).
        assert value["kubetrain_ettr_clock_start_timestamp_seconds"] == pytest.approx(first_start + 1200)
        assert time.time() - 600 < value["kubetrain_run_start_timestamp_seconds"] <= value[
            "kubetrain_last_step_timestamp_seconds"]


@pytest.mark.processes
def test_a_rank_that_fails_for_good_says_why_on_its_endpoint_before_it_exits(tmp_path):
    """A run that keeps diverging (exit 4) sets kubetrain_permanent_failure_timestamp_seconds{reason="diverged"} and holds its endpoint
    open for metrics.failure_linger_s, so Prometheus scrapes the failure the alert reads."""
    pytest.importorskip("prometheus_client")
    port = two_free_ports()
    # The linger is the window the scrapes below must land in (they poll every 0.2 s from the start); the test
    # waits it out, so it is no longer than a loaded machine needs.
    config = write_config(tmp_path, max_steps=200, metrics={"port": port, "failure_linger_s": 15},
                          resilience={"max_bad_steps": 1, "max_rollbacks": 0})
    env = {**os.environ, "PYTHONPATH": SOURCES_PATH, "KUBETRAIN_JOB": "diverged", "KUBETRAIN_FAULT": "nan:step=3"}
    # A session of its own: if the test fails early, the agent and its ranks are killed together (a rank left
    # behind would keep stderr open, and the test would wait on it).
    agent = subprocess.Popen([sys.executable, "-m", "kubetrain_runtime.torchrun", "--standalone", "--nproc-per-node=2",
                              "-m", "training", "--config", str(config)], cwd=ROOT, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    failed: dict[int, list] = {}
    try:
        deadline = time.monotonic() + 120
        while len(failed) < 2 and time.monotonic() < deadline and agent.poll() is None:
            for rank in (0, 1):
                try:
                    samples = scrape(port + rank).get("kubetrain_permanent_failure_timestamp_seconds")
                except NOT_SERVING:
                    continue
                if samples:
                    failed[rank] = samples
            time.sleep(0.2)
        code = agent.wait(timeout=120)
    finally:
        if agent.poll() is None:
            os.killpg(agent.pid, signal.SIGKILL)
        stderr = agent.communicate(timeout=60)[1]
    assert code != 0, stderr[-3000:]
    assert sorted(failed) == [0, 1], stderr[-3000:]
    for rank, samples in failed.items():
        assert [(s.labels["reason"], s.labels["rank"]) for s in samples] == [("diverged", str(rank))]
        assert time.time() - 300 < samples[0].value < time.time()  # when it failed
    # Each rank's failure note, kept on the checkpoint volume (kubetrain_runtime/dumps.py).
    notes = sorted((tmp_path / "ckpt" / "failures" / "diverged").glob("run-*.restart-0.rank-*.txt"))
    assert [note.name.rsplit(".", 2)[1] for note in notes] == ["rank-0", "rank-1"]
    assert all(note.read_text().startswith("4 ") and "KT210" in note.read_text() for note in notes)


@pytest.mark.processes
def test_the_launchers_check_that_finds_no_data_says_so_on_the_pods_first_port_before_it_exits(tmp_path):
    """The launcher's check (`python -m training --check`, before torchrun) finds the token file missing: exit 2,
    and, since no run's endpoint will ever open, an endpoint of its own on the pod's first port serves
    kubetrain_permanent_failure_timestamp_seconds{reason="bad_input"} for metrics.failure_linger_s, so the
    failed-run alert pages for a job that never started."""
    pytest.importorskip("prometheus_client")
    port = two_free_ports()
    config = write_config(tmp_path, metrics={"port": port, "failure_linger_s": 8},
                          data={"source": "tokens", "path": str(tmp_path / "missing.bin"), "seq_len": 32})
    env = {**os.environ, "PYTHONPATH": SOURCES_PATH, "KUBETRAIN_JOB": "no-data"}
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):  # the launcher's shell, before torchrun
        env.pop(name, None)
    check = subprocess.Popen([sys.executable, "-m", "training", "--check", "--config", str(config)], cwd=ROOT,
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    samples: list = []
    try:
        deadline = time.monotonic() + 60
        while not samples and time.monotonic() < deadline and check.poll() is None:
            try:
                samples = scrape(port).get("kubetrain_permanent_failure_timestamp_seconds", [])
            except NOT_SERVING:
                time.sleep(0.2)
        code = check.wait(timeout=60)
    finally:
        if check.poll() is None:
            check.kill()
        stderr = check.communicate(timeout=60)[1]
    assert code == 2 and "KT208" in stderr, stderr[-2000:]
    assert [(s.labels["reason"], s.labels["job"]) for s in samples] == [("bad_input", "no-data")], stderr[-2000:]


def read_tensorboard_scalars(logdir: Path) -> dict[str, list[tuple[int, float]]]:
    """Event files are TFRecords: length, its CRC, an Event protobuf, its CRC."""
    from tensorboardX.proto.event_pb2 import Event

    scalars: dict[str, list[tuple[int, float]]] = {}
    for path in sorted(logdir.glob("events.out.tfevents.*")):
        data, at = path.read_bytes(), 0
        while at < len(data):
            (length,) = struct.unpack("<Q", data[at:at + 8])
            event = Event.FromString(data[at + 12:at + 12 + length])
            at += 12 + length + 4
            for value in event.summary.value:
                scalars.setdefault(value.tag, []).append((event.step, value.simple_value))
    return scalars


@pytest.mark.processes
def test_tensorboard_and_mlflow_sinks_keep_one_run_across_a_restart(tmp_path, monkeypatch):
    pytest.importorskip("tensorboardX")
    mlflow = pytest.importorskip("mlflow")
    # A local file store: MLflow 3 keeps it behind this switch (sqlite needs SQLAlchemy, which the
    # skinny package leaves out); a pod would point at a tracking server.
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    uri = (tmp_path / "mlruns").as_uri()
    config = write_config(tmp_path, max_steps=8, metrics={"port": 0, "tensorboard_dir": str(tmp_path / "tb"),
                                                          "mlflow_tracking_uri": uri, "mlflow_experiment": "kt"})
    first = train(config, 1, "--stop-after-step", "5")
    rest = train(config, 1)  # the restarted pod
    assert [r["step"] for r in rest if r["event"] == "resumed"] == [5]

    scalars = read_tensorboard_scalars(tmp_path / "tb")
    logged = [r for r in first + rest if r["event"] == "step"]
    assert [step for step, _ in scalars["train/loss"]] == [r["step"] for r in logged]
    assert [value for _, value in scalars["train/loss"]] == pytest.approx([r["loss"] for r in logged], rel=1e-6)

    client = mlflow.tracking.MlflowClient(uri)
    [run] = client.search_runs([client.get_experiment_by_name("kt").experiment_id])
    assert (tmp_path / "ckpt" / "mlflow_run_id").read_text().strip() == run.info.run_id
    assert run.info.status == "FINISHED"
    assert run.data.params["model.dim"] == str(TINY["model"]["dim"])
    assert run.data.params["checkpoint.interval"] == "5"
    history = client.get_metric_history(run.info.run_id, "loss")
    assert sorted(m.step for m in history) == [r["step"] for r in logged]  # steps 1-5, then 6-8 after resume
    assert run.data.tags["kubetrain.job"] == "local"


# A loop of the user's own, profiled through the runtime API: steps 3-4 and 6-7 (warmup 2 and 5), both ranks.
PROFILED_LOOP = """
import torch
from kubetrain_runtime import ProfilingConfig, Run

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
run = Run(model, optimizer, max_steps=8, checkpoint_dir={ckpt!r},
          profile=ProfilingConfig(enabled=True, start_step=3, warmup=1, active=2, repeat=2, ranks="all",
                                  record_shapes=True, profile_memory=True))
for step in run.steps():
    loss = model(torch.randn(4, 8)).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    run.log(loss=loss)
"""


@pytest.mark.processes
def test_a_profiled_two_rank_run_writes_a_chrome_trace_per_rank_and_window(tmp_path):
    script = tmp_path / "loop.py"
    script.write_text(PROFILED_LOOP.format(ckpt=str(tmp_path / "ckpt")))
    env = {**os.environ, "PYTHONPATH": SOURCES_PATH, "KUBETRAIN_JOB": "profiled"}
    # Warm (python -m kubetrain_runtime under the pods' torchrun): the profiler starts in a forked rank.
    result = subprocess.run([sys.executable, "-m", "kubetrain_runtime.torchrun", "--standalone", "--nproc-per-node=2",
                             "-m", "kubetrain_runtime", str(script)], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    records = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    profiles = [r for r in records if r["event"] == "profile"]
    assert [(r["phase"], r["steps"]) for r in profiles] == [
        ("start", [3, 4]), ("written", [3, 4]), ("start", [6, 7]), ("written", [6, 7])]
    assert profiles[0]["ranks"] == [0, 1] and profiles[0]["dir"] == str(tmp_path / "ckpt" / "profiles")
    traces = [Path(path) for r in profiles if r["phase"] == "written" for path in r["traces"]]
    assert len(traces) == 4 and set(traces) == set((tmp_path / "ckpt" / "profiles").iterdir())
    assert sorted(t.name.split(".")[0] for t in traces) == ["profiled-rank0", "profiled-rank0",
                                                             "profiled-rank1", "profiled-rank1"]
    for trace in traces:  # what TensorBoard's profiler plugin (and Perfetto) open: Chrome trace JSON
        events = json.loads(trace.read_text())["traceEvents"]
        steps = {e["name"] for e in events if e.get("name", "").startswith("ProfilerStep#")}
        assert len(steps) == 2, steps  # the active steps only, not the warmup's
        assert any(e.get("name") == "aten::addmm" and "Input Dims" in e.get("args", {}) for e in events)


def test_the_profiling_gauge_follows_the_profile_events():
    pytest.importorskip("prometheus_client")
    from prometheus_client import generate_latest

    from kubetrain_runtime.telemetry import PrometheusEndpoint

    endpoint = PrometheusEndpoint(0, {"job": "j", "node": "n", "rank": "1"})
    try:
        def gauge() -> str:
            return [line for line in generate_latest(endpoint.registry).decode().splitlines()
                    if line.startswith("kubetrain_profiling{")][0].rsplit(" ", 1)[1]

        assert gauge() == "0.0"
        endpoint.observe({"event": "profile", "phase": "start", "steps": [3, 4], "ranks": [0], "dir": "/p"})
        assert gauge() == "0.0"  # another rank is profiled
        endpoint.observe({"event": "profile", "phase": "start", "steps": [3, 4], "ranks": [0, 1], "dir": "/p"})
        assert gauge() == "1.0"
        endpoint.observe({"event": "profile", "phase": "written", "steps": [3, 4], "ranks": [0, 1], "traces": []})
        assert gauge() == "0.0"
    finally:
        endpoint.close()
