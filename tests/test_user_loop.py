"""A loop of the user's own on kubetrain_runtime.Run (examples/ddp_minimal.py, a tutorial-style DDP script) gets the
trainer's guarantees: the fault drills of test_resilience.py and test_fault_drills.py, on two real torchrun ranks, end
bit-identical to an uninterrupted run; and run-local runs the committed command and Function jobs, killed and
resumed."""

from __future__ import annotations

import ast
import json
import signal
import sys
from pathlib import Path

import pytest
from conftest import ROOT, kubetrain, run

from kubetrain_runtime.failures import stopped_exit

pytest.importorskip("torch", reason="the training runtime needs torch")

EXAMPLE = ROOT / "examples" / "ddp_minimal.py"
STEPS = 40  # 16 batches an epoch per rank: resumes land inside an epoch and across its end
# The ranks agree on a stop within two rounds of about half a second of steps each, at most 100 steps a round
# (kubetrain_runtime/preemption.py): a run that is stopped needs room for that.
LONG = 250
# As a pod's launcher sets it: a restarted rank must not read a dead peer's address from torchrun's shared store.
POD_ENV = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}


def torchrun(folder: Path, fault: str = "", steps: int = STEPS, restarts: int = 2,
             expect: int = 0) -> list[dict]:
    """The example on two ranks under one torchrun agent (a pod's), its checkpoints in `folder`; rank 0's records."""
    result = run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                  f"--max-restarts={restarts}", "--monitor-interval=0.1", str(EXAMPLE), "--steps", str(steps),
                  "--checkpoint-dir", str(folder)], cwd=folder.parent,
                 env={**POD_ENV, "KUBETRAIN_FAULT": fault})
    assert result.returncode == expect, result.stdout[-3000:] + result.stderr[-3000:]
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def digests(records: list[dict]) -> list[str]:
    finished = [r for r in records if r["event"] == "finished"]
    assert finished, records[-3:]
    return finished[-1]["weights_sha256_per_rank"]


def resumed_steps(records: list[dict]) -> list[int]:
    return [r["step"] for r in records if r["event"] == "resumed"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> dict[int, list[str]]:
    """The weights an uninterrupted run ends with, after 20 steps (the dev jobs'), STEPS and LONG."""
    ends = {}
    for steps in (20, STEPS, LONG):
        records = torchrun(tmp_path_factory.mktemp(f"uninterrupted-{steps}") / "ckpt", steps=steps)
        assert resumed_steps(records) == []
        ends[steps] = digests(records)
        assert len(set(ends[steps])) == 1  # the replicas agree
    return ends


def test_the_example_adopts_the_api_in_a_few_lines():
    """The lines that hand the tutorial's loop to the runtime are marked; there are few of them."""
    marked = [line for line in EXAMPLE.read_text().splitlines() if "# runtime" in line]
    assert 4 <= len(marked) <= 8, marked
    ast.parse(EXAMPLE.read_text())


@pytest.mark.processes
def test_kill_9_mid_step_resumes_bit_identical(uninterrupted, tmp_path):
    records = torchrun(tmp_path / "ckpt", "crash:step=23:rank=1")
    assert resumed_steps(records) == [10]  # saves at 5 and 10 (interval auto), then Daly's interval
    assert digests(records) == uninterrupted[STEPS]


@pytest.mark.processes
def test_kill_9_mid_save_falls_back_to_the_previous_checkpoint(uninterrupted, tmp_path):
    records = torchrun(tmp_path / "ckpt", "crash-in-save:step=10:rank=1")
    assert resumed_steps(records) == [5]  # the save of step 10 never completed: never loaded
    assert digests(records) == uninterrupted[STEPS]


@pytest.mark.processes
def test_sigterm_saves_the_step_reached_and_the_restart_resumes_there(uninterrupted, tmp_path):
    """SIGTERM to one rank right after a background save started: every rank agrees on a step, finishes the save in
    flight, saves the step reached and exits 128 + SIGTERM; torchrun's restart resumes from that step."""
    records = torchrun(tmp_path / "ckpt", "sigterm:step=11:rank=1", steps=LONG)
    [stopped] = [r for r in records if r["event"] == "stopped"]
    # Rank 0 was not told (its record's signal is None): it stopped at the step it agreed on with rank 1.
    assert stopped["signal"] is None and stopped["checkpoint_step"] == stopped["step"] >= 11
    assert resumed_steps(records) == [stopped["step"]]
    assert digests(records) == uninterrupted[LONG]
    assert stopped_exit(signal.SIGTERM) == 143


@pytest.mark.processes
def test_a_corrupt_newest_checkpoint_is_skipped_for_the_next_that_verifies(uninterrupted, tmp_path):
    folder = tmp_path / "ckpt"
    torchrun(folder, "crash:step=23:rank=1", restarts=0, expect=1)  # the run dies after saving steps 5 and 10
    newest = folder / "step-00000010"
    data = sorted(newest.glob("*.distcp"))[0]
    data.write_bytes(data.read_bytes()[:-7] + b"garbage")  # same size, other bytes: only the checksum tells
    records = torchrun(folder)
    [skipped] = [r for r in records if r["event"] == "checkpoint_skipped"]
    assert skipped["step"] == 10 and "checksum" in skipped["reason"]
    assert resumed_steps(records) == [5]
    assert digests(records) == uninterrupted[STEPS]


@pytest.mark.processes
def test_nan_steps_are_skipped_then_rolled_back(tmp_path):
    records = torchrun(tmp_path / "ckpt", "nan:step=3;nan:step=12;nan:step=13;nan:step=14")
    steps = {r["step"]: r for r in records if r["event"] == "step"}
    assert steps[3]["skipped_steps"] == 1  # one bad step: skipped, the run goes on
    [rollback] = [r for r in records if r["event"] == "rollback"]
    assert rollback["from_step"] == 14 and rollback["to_step"] == 10  # three in a row: back to the newest checkpoint
    assert records[-1]["event"] == "finished" and records[-1]["step"] == STEPS
    assert all(len(d) == 64 for d in digests(records))


def run_local(job: str, workdir: Path, fault: str) -> list[dict]:
    result = kubetrain("run-local", f"dev/{job}", "--workdir", str(workdir), env={"KUBETRAIN_FAULT": fault})
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    return [json.loads(line.split("] ", 1)[1]) for line in result.stdout.splitlines()
            if line.split("] ", 1)[-1].startswith("{")]


@pytest.mark.parametrize("job", ["ddp-minimal", "ddp-function"])
@pytest.mark.processes
def test_run_local_kills_and_resumes_the_committed_jobs(uninterrupted, tmp_path, job):
    """The command job (the script finds its checkpoint folder in KUBETRAIN_CHECKPOINT_DIR) and the Function job (its
    `run` parameter is the runtime), as the operator runs them: a rank killed at step 13 resumes from step 10 and ends
    where an uninterrupted run does."""
    records = run_local(job, tmp_path, "crash:step=13:rank=1")
    assert resumed_steps(records) == [10]
    assert digests(records) == uninterrupted[20]
    assert sorted(p.name for p in (tmp_path / "volumes" / "checkpoints" / job).glob("step-*"))[-1] == "step-00000020"


@pytest.mark.processes
def test_a_users_own_training_package_cannot_shadow_the_runtime(tmp_path):
    """A script beside its own package named `training` (first on sys.path) runs on the runtime alone, as
    `python script.py` with no torchrun: a world of one, checkpoints in ./checkpoints, exact resume of its steps."""
    (tmp_path / "training").mkdir()
    (tmp_path / "train.py").write_text(
        "import torch\n"
        "import training  # noqa: F401 - theirs, first on the path\n"
        "from kubetrain_runtime import Run\n"
        "torch.manual_seed(0)\n"
        "model = torch.nn.Linear(4, 1)\n"
        "optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)\n"
        "run = Run(model, optimizer, max_steps=12)\n"
        "for step in run.steps():\n"
        "    x = torch.randn(8, 4)\n"
        "    loss = (model(x).squeeze(-1) - x.sum(-1)).square().mean()\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
        "    optimizer.zero_grad()\n"
        "    run.log(loss=loss)\n")
    (tmp_path / "training" / "__init__.py").write_text("")  # importable, empty: the user's
    first = run([sys.executable, "train.py"], cwd=tmp_path, env={"KUBETRAIN_FAULT": "crash:step=8"})
    assert first.returncode == -9, first.stderr[-2000:]
    second = run([sys.executable, "train.py"], cwd=tmp_path, env={"TORCHELASTIC_RESTART_COUNT": "1"})
    assert second.returncode == 0, second.stderr[-2000:]
    records = [json.loads(line) for line in second.stdout.splitlines() if line.startswith("{")]
    assert resumed_steps(records) == [5] and records[-1]["event"] == "finished"
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "train.py").write_text((tmp_path / "train.py").read_text())
    (fresh / "training").mkdir()
    (fresh / "training" / "__init__.py").write_text("")
    straight = run([sys.executable, "train.py"], cwd=fresh)
    assert straight.returncode == 0, straight.stderr[-2000:]
    assert digests(records) == digests([json.loads(line) for line in straight.stdout.splitlines()
                                        if line.startswith("{")])
    assert (tmp_path / "checkpoints" / "step-00000012" / "COMPLETE").is_file()


@pytest.mark.processes
def test_the_runtime_never_imports_the_training_package():
    """Statically: no module of kubetrain_runtime imports `training` (a user's package of that name would shadow it),
    and its config imports no torch (the compiler validates it)."""
    for path in (ROOT / "kubetrain_runtime").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not [n for n in names if n.split(".")[0] == "training"], path
    probe = run([sys.executable, "-c", "import sys, kubetrain_runtime.runtime_config, kubetrain_runtime.problems, "
                 "kubetrain_runtime; assert 'torch' not in sys.modules"])
    assert probe.returncode == 0, probe.stderr


@pytest.mark.processes
def test_run_local_names_where_a_hang_left_its_dumps(uninterrupted, tmp_path):
    """The command job hangs on rank 1 at step 7: its watchdog writes the rank's stacks and flight recorder on the
    checkpoint volume, the restarted ranks finish the run, and the launcher's last lines name the folder."""
    config = tmp_path / "runtime.yaml"
    config.write_text("resilience: {watchdog_floor_s: 3}\nmetrics: {port: 0}\ncheckpoint: {interval: 5}\n")
    workdir = tmp_path / "work"
    result = kubetrain("run-local", "dev/ddp-minimal", "--workdir", str(workdir),
                       env={"KUBETRAIN_FAULT": "hang:step=7:rank=1", "KUBETRAIN_RUNTIME_CONFIG": str(config)})
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    hangs = workdir.resolve() / "volumes" / "checkpoints" / "ddp-minimal" / "hangs" / "ddp-minimal"
    [stacks] = hangs.glob("attempt-*/restart-0/rank-1.stacks.txt")
    assert "kubetrain_runtime/faults.py" in stacks.read_text()  # where rank 1 hung
    assert (stacks.parent / "flight_recorder_rank_1").is_file()
    output = result.stdout + result.stderr
    assert f"kubetrain: the ranks left dumps (stacks, flight recorder, failure note) in {stacks.parent}" in output
    assert f"its stacks are in {stacks}" in output  # the watchdog's message
    assert digests([json.loads(line.split("] ", 1)[1]) for line in result.stdout.splitlines()
                    if line.split("] ", 1)[-1].startswith("{")]) == uninterrupted[20]
