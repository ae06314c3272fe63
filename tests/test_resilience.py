"""Failures as a normal case: crashes, crashes mid-save, NaNs and hangs, injected through KUBETRAIN_FAULT."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest
import yaml
from conftest import SOURCES_PATH, dist_file, kubetrain, run
from kubetrain.local.run_plan import free_port
from kubetrain.local.supervisor import kill_pod
from test_training import losses, train, write_config

torch = pytest.importorskip("torch", reason="the training runtime needs torch")
pytestmark = pytest.mark.processes  # every fault is injected into ranks under torchrun


def train_with_fault(config: Path, fault: str | None, nproc: int = 2) -> list[dict]:
    """Two ranks under one torchrun agent with a restart budget, as each pod runs them."""
    result = run([sys.executable, "-m", "kubetrain_runtime.torchrun", "--standalone", f"--nproc-per-node={nproc}",
                  "--max-restarts=3", "-m", "training", "--config", str(config)], env={"KUBETRAIN_FAULT": fault or ""})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def fault_free_run(tmp_path_factory) -> tuple[Path, list[dict]]:
    """The fault-free run every recovery must end like, and its checkpoints folder. It keeps 4 checkpoints, so
    those of steps 5 and 10 are still there: what a run stopped at step 12 leaves (keep doesn't change training)."""
    folder = tmp_path_factory.mktemp("fault-free")
    config = write_config(folder, checkpoint={"dir": str(folder / "ckpt"), "interval": 5, "keep": 4})
    return folder / "ckpt", train_with_fault(config, None)


@pytest.fixture
def fault_free(fault_free_run) -> list[dict]:
    return fault_free_run[1]


def copy_folders(source: Path, target: Path, *names: str) -> None:
    """What an earlier run left in `source` (the named folders), as if it had left it in `target`."""
    for name in names:
        shutil.copytree(source / name, target / name)


def test_crashed_rank_recovers_to_the_exact_fault_free_result(fault_free, tmp_path):
    records = train_with_fault(write_config(tmp_path), "crash:step=13:rank=1")
    resumed = [r for r in records if r["event"] == "resumed"]
    assert [r["step"] for r in resumed] == [10]
    finished, expected = records[-1], fault_free[-1]
    assert finished["loss"] == expected["loss"]
    assert finished["weights_sha256_per_rank"] == expected["weights_sha256_per_rank"]
    assert 0 < finished["ettr"] <= 1 and finished["lost_s"] > 0


def children(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="finds torchrun's workers through procfs")
def test_killing_what_torchrun_started_ends_its_rank_and_the_run_recovers(fault_free, tmp_path):
    """Ranks run as forks of the pod's warm process (kubetrain_runtime/warm.py); torchrun sees thin clients. Killing a
    client, as a crash of what torchrun started looks, must end its rank, and the restarted ranks resume."""
    env = {**os.environ, "PYTHONPATH": SOURCES_PATH, "KUBETRAIN_FAULT": "hang:step=13:rank=1"}
    agent = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                              "--max-restarts=1", "-m", "training", "--config", str(write_config(tmp_path))],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(agent.stdout), daemon=True)
    reader.start()
    try:
        while not any('"step": 12,' in line for line in lines):
            assert agent.poll() is None, "".join(lines[-20:])
            time.sleep(0.05)
        clients = children(agent.pid)
        (client,) = [pid for pid in clients
                     if b"LOCAL_RANK=1\0" in Path(f"/proc/{pid}/environ").read_bytes()]
        os.kill(client, signal.SIGKILL)  # rank 1 is stuck at step 13: only its client's death ends it
        assert agent.wait(timeout=240) == 0
        reader.join(timeout=10)
    finally:
        kill_pod(agent.pid)
    records = [json.loads(line) for line in lines if line.startswith("{")]
    assert [r["step"] for r in records if r["event"] == "resumed"] == [10]
    assert records[-1]["weights_sha256_per_rank"] == fault_free[-1]["weights_sha256_per_rank"]
    warm = [p for p in Path("/proc").glob("[0-9]*") if (p / "cmdline").is_file()
            and f"kubetrain_runtime.warm\0{agent.pid}\0".encode() in (p / "cmdline").read_bytes()]
    deadline = time.monotonic() + 30
    while warm and any(p.exists() for p in warm) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(p.exists() for p in warm), "the warm process outlives its torchrun agent"


# A rank's account of where it runs: its warm process (its parent), that process's parent, and torch's threads.
WHERE_A_RANK_RUNS = """
import json, os, sys, torch
def parent(pid):
    return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
warm = os.getppid()
print(json.dumps({"rank": int(os.environ["RANK"]), "warm": warm, "warm_parent": parent(warm),
                  "warm_cmdline": open(f"/proc/{warm}/cmdline").read(), "threads": torch.get_num_threads()}))
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="finds the warm process through procfs")
def test_the_pods_torchrun_forks_the_warm_process_its_ranks_share(tmp_path):
    """The pods' torchrun (kubetrain_runtime.torchrun) forks the warm process itself, with torch imported: both ranks
    are forks of that one process, a child of the agent started by no second interpreter, which ends with the agent;
    each rank runs torch on one thread, as torchrun's OMP_NUM_THREADS=1 for several ranks gives a rank it starts."""
    script = tmp_path / "where.py"
    script.write_text(WHERE_A_RANK_RUNS)
    env = {**os.environ, "PYTHONPATH": SOURCES_PATH}
    env.pop("OMP_NUM_THREADS", None)
    agent = subprocess.Popen([sys.executable, "-m", "kubetrain_runtime.torchrun", "--standalone", "--nproc-per-node=2",
                              "-m", "kubetrain_runtime", str(script)], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = agent.communicate(timeout=120)
    finally:
        kill_pod(agent.pid)
    assert agent.returncode == 0, stderr[-3000:]
    ranks = sorted((json.loads(line) for line in stdout.splitlines() if line.startswith("{")), key=lambda r: r["rank"])
    assert [r["rank"] for r in ranks] == [0, 1]
    assert ranks[0]["warm"] == ranks[1]["warm"] and ranks[0]["warm_parent"] == agent.pid
    assert ranks[0]["warm_cmdline"].split("\0")[1:3] == ["-m", "kubetrain_runtime.torchrun"]  # the agent's own
    assert [r["threads"] for r in ranks] == [1, 1]
    assert "ranks start cold" not in stderr
    deadline = time.monotonic() + 30
    while Path(f"/proc/{ranks[0]['warm']}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{ranks[0]['warm']}").exists(), "the warm process outlives its torchrun agent"


def two_tiers(folder: Path) -> dict:
    """Durable checkpoints every 8 steps, node-local ones every 2."""
    return {"dir": str(folder / "ckpt"), "interval": 8, "keep": 2,
            "local_dir": str(folder / "node-local"), "local_interval": 2}


def test_crash_between_durable_saves_resumes_from_the_local_tier(fault_free, tmp_path):
    records = train_with_fault(write_config(tmp_path, checkpoint=two_tiers(tmp_path)), "crash:step=13:rank=1")
    resumed = [r for r in records if r["event"] == "resumed"]
    # The durable tier has only step 8. Local saves run in the background, so the one of step 12 may still
    # be writing when the rank dies before step 13: then step 10 is the newest every rank has whole.
    [(step, tier)] = [(r["step"], r["tier"]) for r in resumed]
    assert tier == "local" and step in (10, 12)
    assert records[-1]["loss"] == fault_free[-1]["loss"]
    assert records[-1]["weights_sha256_per_rank"] == fault_free[-1]["weights_sha256_per_rank"]


@pytest.fixture(scope="module")
def stopped_with_two_tiers(tmp_path_factory) -> tuple[Path, list[dict]]:
    """A run with both tiers stopped after step 13, and its records: what the tests of its leftovers start from."""
    folder = tmp_path_factory.mktemp("two-tiers")
    return folder, train(write_config(folder, checkpoint=two_tiers(folder)), 2, "--stop-after-step", "13")


def test_local_tier_missing_a_rank_falls_back_to_the_durable_tier(fault_free, stopped_with_two_tiers, tmp_path):
    stopped, first = stopped_with_two_tiers
    assert {(r["tier"], r["step"]) for r in first if r["event"] == "checkpoint"} >= {("local", 12), ("durable", 8)}
    copy_folders(stopped, tmp_path, "ckpt", "node-local")
    config = write_config(tmp_path, checkpoint=two_tiers(tmp_path))
    # Rank 1's pod came back on another node: its node-local folder is gone.
    shutil.rmtree(tmp_path / "node-local" / "world-2" / "rank-00001")
    records = train(config, 2)
    assert [(r["step"], r["tier"]) for r in records if r["event"] == "resumed"] == [(8, "durable")]
    assert records[-1]["weights_sha256_per_rank"] == fault_free[-1]["weights_sha256_per_rank"]


def test_crash_while_saving_falls_back_to_the_previous_checkpoint(fault_free, tmp_path):
    records = train_with_fault(write_config(tmp_path), "crash-in-save:step=10:rank=1")
    # The step-10 checkpoint of the first attempt had data but no metadata and no marker.
    assert [r["step"] for r in records if r["event"] == "resumed"] == [5]
    assert records[-1]["loss"] == fault_free[-1]["loss"]
    assert records[-1]["weights_sha256_per_rank"] == fault_free[-1]["weights_sha256_per_rank"]


def flip_bytes(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


DAMAGE = {
    "flipped byte in a shard": (lambda folder: flip_bytes(folder / "__1_0.distcp"),
                                "__1_0.distcp does not match its checksum (corrupted)"),
    "truncated shard": (lambda folder: os.truncate(folder / "__0_0.distcp", 100), "__0_0.distcp is 100 bytes"),
    "missing metadata": (lambda folder: (folder / ".metadata").unlink(), ".metadata is missing"),
    "damaged metadata": (lambda folder: flip_bytes(folder / ".metadata"), ".metadata does not match its checksum"),
    "damaged marker": (lambda folder: (folder / "COMPLETE").write_text("10\n"),
                       "its COMPLETE marker is damaged or lists no checksums"),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_checkpoint_is_skipped_for_the_newest_that_verifies(fault_free_run, tmp_path, damage):
    reference, fault_free = fault_free_run
    config = write_config(tmp_path)
    copy_folders(reference, tmp_path / "ckpt", "step-00000005", "step-00000010")  # a run stopped at step 12
    harm, reason = DAMAGE[damage]
    harm(tmp_path / "ckpt" / "step-00000010")
    result = run([sys.executable, "-m", "kubetrain_runtime.torchrun", "--standalone", "--nproc-per-node=2", "-m",
                  "training", "--config", str(config)])
    assert result.returncode == 0, result.stderr[-3000:]
    records = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    (skipped,) = [r for r in records if r["event"] == "checkpoint_skipped"]
    assert (skipped["tier"], skipped["step"]) == ("durable", 10) and reason in skipped["reason"]
    assert f"warning: skipping the durable checkpoint {tmp_path / 'ckpt' / 'step-00000010'}: {reason}" in result.stderr
    assert [r["step"] for r in records if r["event"] == "resumed"] == [5]
    assert records[-1]["weights_sha256_per_rank"] == fault_free[-1]["weights_sha256_per_rank"]
    # Saves of 10, 15 and 16 followed, keep is 2: the checkpoint resumed from, the newest that was read back
    # and verified, is kept as well (the damaged 10 went with the history the resume left, and was saved anew).
    assert sorted(p.name for p in (tmp_path / "ckpt").glob("step-*")) == [
        "step-00000005", "step-00000015", "step-00000016"]


def test_a_damaged_local_copy_on_one_rank_is_skipped(fault_free, stopped_with_two_tiers, tmp_path):
    copy_folders(stopped_with_two_tiers[0], tmp_path, "ckpt", "node-local")  # local 10 and 12 on each rank, durable 8
    config = write_config(tmp_path, checkpoint=two_tiers(tmp_path))
    flip_bytes(next((tmp_path / "node-local" / "world-2" / "rank-00001" / "step-00000012").glob("*.distcp")))
    records = train(config)
    (skipped,) = [r for r in records if r["event"] == "checkpoint_skipped"]
    assert (skipped["tier"], skipped["step"]) == ("local", 12) and skipped["reason"].startswith("rank 1's copy: ")
    assert [(r["step"], r["tier"]) for r in records if r["event"] == "resumed"] == [(10, "local")]
    assert records[-1]["weights_sha256_per_rank"] == fault_free[-1]["weights_sha256_per_rank"]


def test_a_checkpoint_marker_lists_every_file_with_its_checksum(fault_free_run):
    folder = fault_free_run[0] / "step-00000005"
    marker = json.loads((folder / "COMPLETE").read_text())
    assert marker["step"] == 5 and sorted(marker["files"]) == [".metadata", "__0_0.distcp", "__1_0.distcp"]
    for name, (size, crc) in marker["files"].items():
        data = (folder / name).read_bytes()
        assert (len(data), zlib.crc32(data)) == (size, crc)


def test_rollback_is_the_same_in_every_run_with_the_same_faults(tmp_path):
    """NaN steps while an async save is in flight: the save counts once its marker is written, which happens
    before `wait` returns, so every run rolls back to the same step and ends with the same weights."""
    ends = []
    for attempt in ("a", "b"):
        (tmp_path / attempt).mkdir()
        config = write_config(tmp_path / attempt, resilience={"max_bad_steps": 3},
                              checkpoint={"dir": str(tmp_path / attempt / "ckpt"), "interval": 5, "keep": 2,
                                          "async_save": True})
        records = train_with_fault(config, "nan:step=6;nan:step=7;nan:step=8")
        ends.append(([(r["from_step"], r["to_step"]) for r in records if r["event"] == "rollback"],
                     records[-1]["weights_sha256_per_rank"]))
    assert ends[0] == ends[1] and ends[0][0] == [(8, 5)]


def saved_tensors(checkpoint: Path, tmp_path: Path) -> dict:
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    dcp_to_torch_save(checkpoint, tmp_path / "flat.pt")
    flat = torch.load(tmp_path / "flat.pt", weights_only=False)
    found = {}

    def walk(prefix, value):
        if isinstance(value, torch.Tensor):
            found[prefix] = value
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(f"{prefix}.{key}", item)

    walk("", flat)
    return found


def test_nan_step_is_skipped_and_checkpoints_stay_finite(tmp_path):
    config = write_config(tmp_path)
    records = train_with_fault(config, "nan:step=7")
    steps = {r["step"]: r for r in records if r["event"] == "step"}
    assert math.isnan(steps[7]["loss"]) and steps[7]["skipped_steps"] == 1 and steps[16]["skipped_steps"] == 1
    assert all(math.isfinite(steps[s]["loss"]) for s in steps if s != 7)
    assert records[-1]["event"] == "finished" and records[-1]["step"] == 16
    for checkpoint in sorted((tmp_path / "ckpt").glob("step-*")):
        tensors = saved_tensors(checkpoint, tmp_path)
        assert tensors and all(torch.isfinite(t.float()).all() for t in tensors.values() if t.is_floating_point())


def test_repeated_bad_steps_roll_back_and_skip_the_batches(tmp_path):
    config = write_config(tmp_path, resilience={"max_bad_steps": 3})
    records = train_with_fault(config, "nan:step=7;nan:step=8;nan:step=9")
    (rollback,) = [r for r in records if r["event"] == "rollback"]
    assert rollback["from_step"] == 9 and rollback["to_step"] == 5
    # Steps 6..9 are trained again on new batches: 4 ranks' worth of micro-batches further on.
    assert rollback["data_position"] == 9 * 2 * 2
    assert records[-1]["step"] == 16 and math.isfinite(records[-1]["loss"])


def test_hang_is_ended_by_the_watchdog_with_stacks(tmp_path):
    config = write_config(tmp_path, resilience={"watchdog_floor_s": 3})
    started = time.monotonic()
    result = run([sys.executable, "-m", "training", "--config", str(config)], env={"KUBETRAIN_FAULT": "hang:step=9"},
                 timeout=120)
    assert result.returncode != 0
    assert time.monotonic() - started < 60
    assert "kubetrain watchdog: rank 0 made no progress" in result.stderr
    assert "Thread 0x" in result.stderr and "kubetrain_runtime/faults.py" in result.stderr  # the hung thread's stack
    assert max(r["step"] for r in map(json.loads, result.stdout.splitlines()) if r["event"] == "step") == 8


def test_bad_fault_spec_is_a_clear_error(tmp_path):
    result = run([sys.executable, "-m", "training", "--config", str(write_config(tmp_path))],
                 env={"KUBETRAIN_FAULT": "explode:step=3"})
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "bad fault 'explode:step=3'" in result.stderr


def test_auto_interval_is_chosen_and_announced(tmp_path):
    config = write_config(tmp_path, checkpoint={"dir": str(tmp_path / "ckpt"), "interval": "auto"},
                          resilience={"mtbf_s": 2})
    records = train(config)
    (chosen,) = [r for r in records if r["event"] == "checkpoint_interval"]
    assert chosen["method"] == "daly" and chosen["mtbf_s"] == 2 and chosen["steps"] >= 1
    saves = [r["step"] for r in records if r["event"] == "checkpoint"]
    interval = chosen["steps"]
    # Saves at 5 (setup) and 10 (measured), then every `interval` steps from the next multiple, and at the end.
    assert saves == [5, 10, *range((10 // interval + 1) * interval, 16, interval), 16]
    assert losses(records)


DEV_SETS = ("checkpoint.interval=5", "checkpoint.local_interval=2")  # what the dev jobs run with here, 20 steps


def run_local(job: str, workdir: Path, fault: str) -> list[dict]:
    result = kubetrain("run-local", f"dev/{job}", "--steps", "20", "--workdir", str(workdir),
                       *(arg for setting in DEV_SETS for arg in ("--set", setting)), env={"KUBETRAIN_FAULT": fault})
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    # Rank 0 writes the metrics, from whichever pod it landed in.
    return [json.loads(line.split("] ", 1)[1]) for line in result.stdout.splitlines()
            if line.split("] ", 1)[-1].startswith("{")]


@pytest.fixture(scope="module")
def dev_fault_free(tmp_path_factory) -> list[dict]:
    """The dev jobs' committed run config (both jobs have the same), 20 steps with DEV_SETS, trained without faults
    by one torchrun agent with both ranks: the fixed-size run a crashed dev job must end exactly like."""
    folder = tmp_path_factory.mktemp("dev-fault-free")
    config_map = yaml.safe_load(dist_file("dev", "ConfigMap", "tiny-gpt", "-config").read_text())
    (folder / "run.yaml").write_text(config_map["data"]["run.yaml"])
    sets = ("max_steps=20", *DEV_SETS, f"checkpoint.dir={folder / 'ckpt'}",
            f"checkpoint.local_dir={folder / 'node-local'}", "metrics.port=0")
    return train(folder / "run.yaml", 2, *(arg for setting in sets for arg in ("--set", setting)))


@pytest.mark.parametrize("job", ["tiny-gpt", "tiny-gpt-elastic"])
def test_dev_job_survives_a_crash_through_run_local(dev_fault_free, tmp_path, job):
    """A committed dev job, two pods with one torchrun agent each, as the operator would run it:
    a TrainJob's two nodes, or two elastic Workers whose ranks each rendezvous assigns. Both jobs
    have the same run config, so both must end exactly where the fault-free fixed-size run of it does."""
    records = run_local(job, tmp_path, "crash:step=13:rank=1")
    assert [r["step"] for r in records if r["event"] == "resumed"] == [10]
    assert records[-1]["loss"] == dev_fault_free[-1]["loss"]
    assert records[-1]["weights_sha256_per_rank"] == dev_fault_free[-1]["weights_sha256_per_rank"]


def test_elastic_job_loses_a_node_and_finishes_on_the_rest(tmp_path):
    """Two agents with --nnodes=1:2, as an elastic job's pods run them. The pod that does not host
    the rendezvous (in a cluster: any but the first worker) stalls at step 12 and is then lost for
    good. The survivor re-rendezvouses alone and resumes the 2-rank checkpoint at world size 1. The rendezvous's
    last call (how long it waits for more nodes once it has the fewest it may start with) is 10 s, not torchrun's
    30: long enough for both agents to join the first round on a loaded machine, no longer for the survivor."""
    config = write_config(tmp_path, max_steps=24, resilience={"watchdog_floor_s": 600})
    port = str(free_port())
    env = {**os.environ, "PYTHONPATH": SOURCES_PATH,
           "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
    survivor, lost = (subprocess.Popen(
        [sys.executable, "-m", "kubetrain_runtime.torchrun", "--nnodes=1:2", "--nproc-per-node=1",
         "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}",
         f"--rdzv-conf=is_host={is_host},last_call_timeout=10", "--rdzv-id=elastic", "--max-restarts=3",
         "-m", "training", "--config", str(config)],
        env={**env, "KUBETRAIN_FAULT": fault}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for is_host, fault in (("true", ""), ("false", "hang:step=12")))
    records: list[dict] = []
    output: list[str] = []
    stalled = threading.Event()

    def read(agent: subprocess.Popen) -> None:  # rank 0, in either pod, prints the metrics
        for line in agent.stdout:
            output.append(line)
            if line.startswith("{"):
                records.append(json.loads(line))
                stalled.set() if records[-1].get("step") == 11 else None

    readers = [threading.Thread(target=read, args=(agent,), daemon=True) for agent in (survivor, lost)]
    for reader in readers:
        reader.start()
    try:
        assert stalled.wait(timeout=120), "".join(output[-50:])
        kill_pod(lost.pid)
        assert survivor.wait(timeout=240) == 0, "".join(output[-50:])
        readers[0].join(timeout=10)
    finally:
        for agent in (survivor, lost):
            kill_pod(agent.pid)
    (resumed,) = [r for r in records if r["event"] == "resumed"]
    assert (resumed["step"], resumed["saved_world_size"], resumed["world_size"]) == (10, 2, 1)
    assert records[-1]["event"] == "finished" and records[-1]["step"] == 24
    assert len(records[-1]["weights_sha256_per_rank"]) == 1 and math.isfinite(records[-1]["loss"])


def test_a_hung_run_leaves_every_ranks_stacks_and_flight_recorder_that_fr_trace_reads_to_name_the_hung_rank(tmp_path):
    """Two pods (one torchrun agent each, each with its own start): rank 1 hangs, rank 0 waits in its next
    collective. With the defaults' order (the collective timeout first, the watchdog's later: KT113) rank 0's
    collective fails, but first each rank's watchdog, at 3/4 of the collective timeout, writes its threads' stacks
    and the flight recorder (gloo records one in torch 2.13) into one folder, rank 0's
    checkpoint.dir/hangs/<job>/<attempt>/restart-<N>/, whatever pod a rank runs in; torch's fr_trace, run on that
    folder as the manual says, names rank 1 as the rank that never joined rank 0's all_reduce."""
    config = write_config(tmp_path, resilience={"collective_timeout_s": 8, "watchdog_floor_s": 12})
    port = str(free_port())
    env = {**os.environ, "PYTHONPATH": SOURCES_PATH, "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
           "KUBETRAIN_FAULT": "hang:step=7:rank=1", "KUBETRAIN_JOB": "hung"}
    pods = [subprocess.Popen(
        [sys.executable, "-m", "kubetrain_runtime.torchrun", "--nnodes=2", "--nproc-per-node=1",
         "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", f"--rdzv-conf=is_host={is_host}", "--rdzv-id=hung",
         "--max-restarts=0",
         "-m", "training", "--config", str(config)], env={**env, "KUBETRAIN_ATTEMPT": attempt},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for is_host, attempt in (("true", "attempt-a"), ("false", "attempt-b"))]
    try:
        # Rank 0's pod fails once its collective times out; the hung pod is then deleted, as its job would be.
        stderr = pods[0].communicate(timeout=180)[1]
    finally:
        for pod in pods:
            kill_pod(pod.pid)
    stderr += pods[1].communicate(timeout=60)[1]
    assert pods[0].returncode != 0, stderr[-3000:]
    hangs = tmp_path / "ckpt" / "hangs" / "hung"
    (folder,) = [f for f in hangs.glob("attempt-*/restart-0") if any(f.iterdir())]  # one folder: rank 0's pod's
    for rank in (0, 1):
        stacks = (folder / f"rank-{rank}.stacks.txt").read_text()
        assert "Thread 0x" in stacks and "Current thread" in stacks
        assert f"kubetrain watchdog: rank {rank} made no progress" in stderr
    assert "kubetrain_runtime/faults.py" in (folder / "rank-1.stacks.txt").read_text()  # where rank 1 hangs
    verdict = run([sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace", str(folder)])
    said = verdict.stdout + verdict.stderr
    assert verdict.returncode == 0, said
    assert "Not all ranks joining collective" in said and "missing ranks: {1}" in said, said
    assert "collective: gloo:all_reduce" in said and "missing ranks: {0}" not in said, said


def run_processes(marker: str) -> dict[int, dict[str, str]]:
    """pid -> environment of every process of ours whose environment carries `marker` (KUBETRAIN_JOB)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = dict(item.split("=", 1) for item in (entry / "environ").read_text().split("\0") if "=" in item)
        except OSError:
            continue
        if env.get("KUBETRAIN_JOB") == marker:
            found[int(entry.name)] = env
    return found


def listener(port: int) -> int:
    """The pid of the process listening on TCP `port` (procfs: the socket's inode among its file descriptors)."""
    inodes = {line.split()[9] for line in Path("/proc/net/tcp").read_text().splitlines()[1:]
              if line.split()[1].endswith(f":{port:04X}") and line.split()[3] == "0A"}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if any(os.readlink(fd).removeprefix("socket:[").removesuffix("]") in inodes
                       for fd in (entry / "fd").iterdir()):
                    return int(entry.name)
            except OSError:
                continue
    raise AssertionError(f"nothing listens on port {port}")


def port_free(port: int) -> bool:
    import socket

    with socket.socket() as probe:
        try:
            probe.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="finds the run's processes through procfs")
def test_a_stopped_rank_dies_with_its_run_and_frees_its_port(tmp_path):
    """Rank 1 is stopped (SIGSTOP: no thread of it runs); rank 0's collective times out and torchrun ends the run.
    Its SIGTERM reaches the stopped rank too: the client passes it on with SIGCONT, so torchrun does not wait out
    the 30 s it gives a process before its SIGKILL (had it, the warm process SIGKILLs a rank whose client ended).
    Nothing of the run outlives it, and the rank's metrics port is free again."""
    from test_runtime_metrics import two_free_ports

    port, marker = two_free_ports(), f"orphan-{os.getpid()}"
    config = write_config(tmp_path, max_steps=500, metrics={"port": port},
                          resilience={"collective_timeout_s": 8, "watchdog_floor_s": 60})
    env = {**os.environ, "PYTHONPATH": SOURCES_PATH, "KUBETRAIN_JOB": marker, "TORCH_ELASTIC_SHUTDOWN_TIMEOUT": "3"}
    agent = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                              "--max-restarts=0", "-m", "training", "--config", str(config)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(agent.stdout), daemon=True).start()
    try:
        while not any('"step": 4,' in line for line in lines):
            assert agent.poll() is None, "".join(lines[-20:])
            time.sleep(0.05)
        rank = listener(port + 1)  # local rank 1 itself (a fork of the warm process), not its client
        os.kill(rank, signal.SIGSTOP)
        stopped = time.monotonic()
        assert agent.wait(timeout=120) != 0
        # The collective's 8 s, then the end; a rank deaf to SIGTERM would hold torchrun 30 s longer.
        assert time.monotonic() - stopped < 8 + 30, "torchrun waited out its SIGKILL: the stopped rank never ended"
        deadline = time.monotonic() + 20
        while run_processes(marker) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert run_processes(marker) == {}, "processes of the run outlived it"
        assert port_free(port) and port_free(port + 1)
    finally:
        for pid in run_processes(marker):
            os.kill(pid, signal.SIGKILL)
        if agent.poll() is None:
            os.killpg(agent.pid, signal.SIGKILL)
