"""Faults the way a cluster has them, through the pod's own launcher: a stop signal, a full, read-only or missing
checkpoint volume, a run that diverges, a config only the ranks can judge. Each ends with the exit code the
targets' failure policies expect (kubetrain_runtime/failures.py) and one line that names the cause and the fix."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from conftest import SOURCES_PATH, dist_file, kubetrain
from test_resilience import train_with_fault
from test_training import write_config

from kubetrain_runtime.failures import EXIT_BAD_INPUT, EXIT_DIVERGED, EXIT_STORAGE, stopped_exit

pytest.importorskip("torch", reason="the training runtime needs torch")
pytestmark = pytest.mark.processes  # every drill runs the launcher, torchrun or run-local

LONG = 120  # steps of the preemption drills: long enough to be stopped from outside while training


def launcher_command() -> list[str]:
    """The committed launcher script of dev's tiny-gpt-pytorchjob: `/bin/sh -c SCRIPT kubetrain-launch`."""
    job = yaml.safe_load(dist_file("dev", "PyTorchJob", "tiny-gpt-pytorchjob").read_text())
    return job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"][:4]


def start_pod(tmp_path: Path, config: Path, *torchrun: str, fault: str = "") -> subprocess.Popen:
    """The launcher as a pod's first process: `python` and `torchrun` on PATH, two ranks on this machine."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "torchrun").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m torch.distributed.run "$@"\n')
    (bin_dir / "torchrun").chmod(0o755)
    # (A script, not a link: a link's python would not find this virtual environment's pyvenv.cfg, nor torch.)
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bin_dir / "python").chmod(0o755)
    (tmp_path / "pod-tmp").mkdir(exist_ok=True)
    env = {**os.environ, "KUBETRAIN_RUN_CONFIG": str(config), "KUBETRAIN_FAULT": fault, "TMPDIR": str(tmp_path / "pod-tmp"),
           "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": SOURCES_PATH}
    args = torchrun or ("--standalone", "--nproc-per-node=2", "--max-restarts=2")
    return subprocess.Popen([*launcher_command(), *args, "-m", "training", "--config", str(config)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(pod: subprocess.Popen, timeout: float = 300) -> tuple[int, list[dict], str]:
    out, err = pod.communicate(timeout=timeout)
    return pod.returncode, [json.loads(line) for line in out.splitlines() if line.startswith("{")], err


@contextlib.contextmanager
def tmpfs(path: Path, *options: str):
    """A small tmpfs at `path` (root in a container can usually mount one); the test skips where it cannot."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(options), "tmpfs", str(path)],
                             capture_output=True, text=True)
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip() or 'mount failed'}): the storage drills "
                    "need a volume that fills up or refuses writes for real")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


# -- failures retrying cannot fix -------------------------------------------------------------------------

def assert_fails_for_good(code: int, records: list[dict], err: str, exit_code: int, rule: str, cause: str) -> None:
    assert code == exit_code, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"kubetrain: a rank failed for good; exiting {exit_code}"), err[-3000:]
    assert f"[{rule}]" in last and cause in last and " fix: " in last
    # torchrun's restarts were spent at once: no rank started training again after the failure.
    assert not [r for r in records if r["event"] == "resumed"]


def test_a_full_checkpoint_volume_fails_the_job_with_one_line(tmp_path):
    with tmpfs(tmp_path / "ckpt", "size=256k"):  # room for the probe, not for a checkpoint of both ranks
        code, records, err = finish(start_pod(tmp_path, write_config(tmp_path)))
    assert_fails_for_good(code, records, err, EXIT_STORAGE, "KT209", "no space left on the volume")
    assert "while saving step 5" in err.strip().splitlines()[-1]
    assert "unexpected pos" not in err  # the errno, not the serializer's garbled echo of it


def test_a_read_only_checkpoint_volume_fails_the_job_at_start(tmp_path):
    with tmpfs(tmp_path / "ckpt", "size=1m", "ro"):
        code, records, err = finish(start_pod(tmp_path, write_config(tmp_path)))
    assert_fails_for_good(code, records, err, EXIT_STORAGE, "KT209", "the volume is read-only")
    assert "at start" in err.strip().splitlines()[-1] and not [r for r in records if r["event"] == "step"]


def test_a_missing_checkpoint_volume_fails_the_job_at_start(tmp_path):
    (tmp_path / "volume").write_text("not a folder\n")  # where the mount should be, something else
    config = write_config(tmp_path, checkpoint={"dir": str(tmp_path / "volume" / "ckpt"), "interval": 5})
    code, records, err = finish(start_pod(tmp_path, config))
    assert_fails_for_good(code, records, err, EXIT_STORAGE, "KT209", "a file stands where a folder should be")


def test_a_run_that_keeps_diverging_fails_the_job(tmp_path):
    config = write_config(tmp_path, resilience={"max_bad_steps": 2, "max_rollbacks": 1})
    code, records, err = finish(start_pod(tmp_path, config, fault="nan:step=6;nan:step=7;nan:step=8;nan:step=9"))
    assert [(r["from_step"], r["to_step"]) for r in records if r["event"] == "rollback"] == [(7, 5)]
    assert_fails_for_good(code, records, err, EXIT_DIVERGED, "KT210", "after 1 rollbacks: the run diverges")


def test_a_config_only_the_ranks_can_judge_fails_the_job(tmp_path):
    # 6 sequences cannot be split over 4 ranks; the launcher's check, before torchrun, knows no world size.
    config = write_config(tmp_path, batch={"global_size": 6, "micro_size": 1})
    code, records, err = finish(start_pod(tmp_path, config, "--standalone", "--nproc-per-node=4",
                                          "--max-restarts=2"))
    assert_fails_for_good(code, records, err, EXIT_BAD_INPUT, "KT201", "x 4 ranks")


def test_run_local_fails_the_job_as_the_operator_would(tmp_path):
    with tmpfs(tmp_path / "volumes" / "checkpoints", "size=256k"):
        result = kubetrain("run-local", "dev/tiny-gpt-pytorchjob", "--steps", "12", "--workdir", str(tmp_path),
                           "--set", "checkpoint.interval=5", "--set", "checkpoint.local_interval=2")
    assert result.returncode == EXIT_STORAGE, result.stdout[-3000:]
    assert f"exited {EXIT_STORAGE} and restartPolicy ExitCode does not retry it: the job failed" in result.stdout
    assert "restarts it" not in result.stdout and "[KT209]" in result.stdout


# -- stopping on a signal -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def long_reference(tmp_path_factory) -> list[dict]:
    return train_with_fault(write_config(tmp_path_factory.mktemp("long"), max_steps=LONG), None)


def test_one_rank_told_to_stop_stops_every_rank_at_the_same_step(long_reference, tmp_path):
    """torchrun passes a pod's stop signal to its ranks one by one, and on a preemption only one pod's ranks get it:
    here only rank 1, at step 7. The ranks agree (kubetrain_runtime/preemption.py) on a step, save it together (a
    collective: it completes only if both ranks save the same step) and exit 143; torchrun restarts them, they
    resume from that step and end where the reference run does."""
    config = write_config(tmp_path, max_steps=LONG)
    records = train_with_fault(config, "sigterm:step=7:rank=1")
    (stopped,) = [r for r in records if r["event"] == "stopped"]
    assert stopped["signal"] is None and stopped["checkpoint_step"] == stopped["step"] >= 7  # rank 0 was not told
    assert [r["step"] for r in records if r["event"] == "resumed"] == [stopped["step"]]
    assert records[-1]["weights_sha256_per_rank"] == long_reference[-1]["weights_sha256_per_rank"]


def test_sigterm_to_the_pod_saves_the_step_reached_and_asks_for_a_restart(long_reference, tmp_path):
    config = write_config(tmp_path, max_steps=LONG, checkpoint={"dir": str(tmp_path / "ckpt"), "interval": 50,
                                                               "async_save": True, "keep": 2})
    pod = start_pod(tmp_path, config)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(pod.stdout), daemon=True)
    reader.start()
    while not any('"step": 10,' in line for line in lines) and pod.poll() is None:
        time.sleep(0.05)
    pod.send_signal(signal.SIGTERM)  # the kubelet's: to the container's first process only
    code = pod.wait(timeout=120)
    reader.join(timeout=10)
    err = pod.stderr.read()
    records = [json.loads(line) for line in lines if line.startswith("{")]
    (stopped,) = [r for r in records if r["event"] == "stopped"]
    assert code == stopped_exit(signal.SIGTERM) and "exiting 143 so the pod is restarted" in err, err[-3000:]
    # The image has kubetrain_runtime: the launcher ran its torchrun, which ends a stop with one line, no traceback.
    assert "kubetrain: torchrun stopped by SIGTERM" in err and "Traceback" not in err, err[-3000:]
    assert stopped["signal"] == "SIGTERM" and stopped["checkpoint_step"] == stopped["step"] < LONG
    assert stopped["budget_left_s"] > 0
    step = stopped["step"]
    assert (tmp_path / "ckpt" / f"step-{step:08d}" / "COMPLETE").is_file()
    resumed = train_with_fault(config, None)
    assert resumed[0]["event"] == "resumed" and resumed[0]["step"] == step
    assert resumed[-1]["weights_sha256_per_rank"] == long_reference[-1]["weights_sha256_per_rank"]


def stuck_rank(tmp_path: Path) -> subprocess.Popen:
    """A rank alone (no torchrun) told to stop at step 5 whose main thread then hangs, as one blocked in a
    collective with a dead peer would; returned once it has said that it is stopping."""
    config = write_config(tmp_path, resilience={"watchdog_floor_s": 600})
    env = {**os.environ, "KUBETRAIN_FAULT": "sigterm:step=5;hang:step=5",
           "PYTHONPATH": SOURCES_PATH}
    rank = subprocess.Popen([sys.executable, "-m", "training", "--config", str(config)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in rank.stderr:
        if line.startswith("kubetrain: rank 0: SIGTERM: stopping with a checkpoint of the step reached"):
            return rank
    raise AssertionError(f"the rank ended with {rank.wait()} before it was told to stop")


def test_a_second_signal_ends_the_rank_at_once(tmp_path):
    rank = stuck_rank(tmp_path)
    rank.send_signal(signal.SIGINT)
    assert rank.wait(timeout=60) == stopped_exit(signal.SIGINT)
    assert "rank 0: a second stop signal (SIGINT); exiting 130" in rank.stderr.read()


def test_a_rank_that_cannot_reach_the_stop_exits_with_nothing_to_save(tmp_path):
    rank = stuck_rank(tmp_path)
    assert rank.wait(timeout=60) == stopped_exit(signal.SIGTERM)
    # The limit is at least 5 s, longer where steps or saves take longer (3 steps, 2 saves).
    assert re.search(r"rank 0: no step for \d+ s after SIGTERM \(a peer is gone or a collective hangs\): nothing to "
                     r"save; exiting 143", rank.stderr.read())
