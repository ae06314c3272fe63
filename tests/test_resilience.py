"""Failures as a normal case: crashes, crashes mid-save, NaNs and hangs, injected through KUBETRAIN_FAULT."""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import pytest

from conftest import run
from test_training import losses, train, write_config

torch = pytest.importorskip("torch", reason="the training runtime needs torch")


def train_with_fault(config: Path, fault: str | None, nproc: int = 2) -> list[dict]:
    """Two ranks under one torchrun agent with a restart budget, as each pod runs them."""
    result = run([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
                  "--max-restarts=3", "-m", "training", "--config", str(config)], env={"KUBETRAIN_FAULT": fault or ""})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def fault_free(tmp_path_factory) -> list[dict]:
    return train_with_fault(write_config(tmp_path_factory.mktemp("fault-free")), None)


def test_crashed_rank_recovers_to_the_exact_fault_free_result(fault_free, tmp_path):
    records = train_with_fault(write_config(tmp_path), "crash:step=13:rank=1")
    resumed = [r for r in records if r["event"] == "resumed"]
    assert [r["step"] for r in resumed] == [10]
    finished, expected = records[-1], fault_free[-1]
    assert finished["loss"] == expected["loss"]
    assert finished["weights_sha256_per_rank"] == expected["weights_sha256_per_rank"]
    assert 0 < finished["ettr"] <= 1 and finished["lost_s"] > 0


def test_crash_while_saving_falls_back_to_the_previous_checkpoint(fault_free, tmp_path):
    records = train_with_fault(write_config(tmp_path), "crash-in-save:step=10:rank=1")
    # The step-10 checkpoint of the first attempt had data but no metadata and no marker.
    assert [r["step"] for r in records if r["event"] == "resumed"] == [5]
    assert records[-1]["loss"] == fault_free[-1]["loss"]
    assert records[-1]["weights_sha256_per_rank"] == fault_free[-1]["weights_sha256_per_rank"]


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
    assert "Thread 0x" in result.stderr and "training/faults.py" in result.stderr  # the hung thread's stack
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
    assert saves == [5, *range((5 // interval + 1) * interval, 16, interval), 16]
    assert losses(records)

