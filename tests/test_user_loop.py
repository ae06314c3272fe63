"""A loop of the user's own on kubetrain_runtime.Run gets the trainer's guarantees: the fault drills of
test_resilience.py and test_fault_drills.py, on two real ranks under plain torchrun (its defaults: the agent's store
shared with the ranks), end bit-identical to an uninterrupted run, for the README's adoption recipes of each loop shape:
examples/ddp_minimal.py (a DDP tutorial's epoch/batch loop) and examples/nanogpt_style.py (nanoGPT's `while True:`
counting its own iterations from 0, its batch fetched a step ahead, gradient accumulation, an evaluation at iteration
0 and `eval_only`); run-local runs the committed command and Function jobs, killed and resumed."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, SOURCES_PATH, kubetrain, run

from kubetrain.local.run_plan import free_port
from kubetrain_runtime.failures import stopped_exit

pytest.importorskip("torch", reason="the training runtime needs torch")

EXAMPLE = ROOT / "examples" / "ddp_minimal.py"
STEPS = 40  # 16 batches an epoch per rank: resumes land inside an epoch and across its end
# The ranks agree on a stop within two rounds of about half a second of steps each, at most 100 steps a round
# (kubetrain_runtime/preemption.py): a run that is stopped needs room for that.
LONG = 250
NANO = ROOT / "examples" / "nanogpt_style.py"
NANO_ITERS = 150  # long enough for a stop's agreement: every drill of it runs to the same end


# The drills run a user's script on both starts its ranks can have: cold, under plain torchrun (`torchrun train.py`, as
# a command job's pods run it), and warm, as forks of the pod's warm process (`python -m kubetrain_runtime train.py`
# under the pods' torchrun, as a Function job's are, and any script that opts in). The uninterrupted runs they are
# held to are cold: a warm drill that ends with their weights also shows a warm rank trains bit for bit as a cold one.
# Cold ranks are killed and resumed by run-local's command job below, and stopped by SIGTERM here.
WARM = ["-m", "kubetrain_runtime.torchrun"]
COLD = ["-m", "torch.distributed.run"]


def torchrun_script(args: list[str], cwd: Path, fault: str = "", restarts: int = 2, expect: int = 0,
                    timeout: float = 300, warm: bool = False) -> list[dict]:
    """A script on two ranks under one torchrun agent (its defaults), cold or warm; rank 0's records."""
    flags = ["--standalone", "--nproc-per-node=2", f"--max-restarts={restarts}", "--monitor-interval=0.1"]
    launcher = [*WARM, *flags, "-m", "kubetrain_runtime"] if warm else [*COLD, *flags]
    result = run([sys.executable, *launcher, *args], cwd=cwd,
                 env={"KUBETRAIN_FAULT": fault}, timeout=timeout)
    assert result.returncode == expect, result.stdout[-3000:] + result.stderr[-3000:]
    # A survivor of a crash may fail in its collective (torchrun then stops it); nothing else may: no rank aborts.
    assert "terminate called" not in result.stderr and ("Traceback" not in result.stderr or fault), result.stderr[-3000:]
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def torchrun(folder: Path, fault: str = "", steps: int = STEPS, restarts: int = 2,
             expect: int = 0, warm: bool = False) -> list[dict]:
    """The tutorial example, its checkpoints in `folder`; rank 0's records."""
    return torchrun_script([str(EXAMPLE), "--steps", str(steps), "--checkpoint-dir", str(folder)], folder.parent,
                           fault, restarts, expect, warm=warm)


def nanogpt(folder: Path, fault: str = "", restarts: int = 2, expect: int = 0, *more: str,
            warm: bool = False) -> list[dict]:
    """The nanoGPT-style example, its checkpoints in `folder`, its own out_dir beside; rank 0's records."""
    return torchrun_script([str(NANO), f"--max_iters={NANO_ITERS}", f"--checkpoint_dir={folder}",
                            f"--out_dir={folder.parent / 'out'}", *more], folder.parent, fault, restarts, expect,
                           warm=warm)


def digests(records: list[dict]) -> list[str]:
    finished = [r for r in records if r["event"] == "finished"]
    assert finished, records[-3:]
    return finished[-1]["weights_sha256_per_rank"]


def resumed_steps(records: list[dict]) -> list[int]:
    return [r["step"] for r in records if r["event"] == "resumed"]


@pytest.fixture(scope="module")
def uninterrupted_runs(tmp_path_factory) -> dict[int, tuple[Path, list[str]]]:
    """Uninterrupted runs of 20 steps (the dev jobs'), STEPS and LONG: the checkpoint folder each leaves (steps 5,
    10 and its last) and the weights it ends with."""
    ends = {}
    for steps in (20, STEPS, LONG):
        folder = tmp_path_factory.mktemp(f"uninterrupted-{steps}") / "ckpt"
        records = torchrun(folder, steps=steps)
        assert resumed_steps(records) == []
        ends[steps] = folder, digests(records)
        assert len(set(ends[steps][1])) == 1  # the replicas agree
    return ends


@pytest.fixture(scope="module")
def uninterrupted(uninterrupted_runs) -> dict[int, list[str]]:
    """The weights an uninterrupted run ends with, after 20 steps, STEPS and LONG."""
    return {steps: ends for steps, (_, ends) in uninterrupted_runs.items()}


def corrupt_newest(folder: Path) -> tuple[int, int]:
    """Garble the newest checkpoint's first data file (same size, other bytes: only the checksum tells); its step
    and the step of the checkpoint before it."""
    *_, before, newest = sorted(folder.glob("step-*"))
    data = sorted(newest.glob("*.distcp"))[0]
    data.write_bytes(data.read_bytes()[:-7] + b"garbage")
    return int(newest.name.removeprefix("step-")), int(before.name.removeprefix("step-"))


@pytest.mark.parametrize("example", [EXAMPLE, NANO])
def test_the_examples_adopt_the_api_in_a_few_lines(example):
    """The lines that hand the tutorial's and nanoGPT's loops to the runtime are marked; there are few of them."""
    marked = [line for line in example.read_text().splitlines() if "# runtime" in line]
    assert 4 <= len(marked) <= 8, marked
    ast.parse(example.read_text())


@pytest.mark.processes
def test_kill_9_mid_step_resumes_bit_identical(uninterrupted, tmp_path):
    records = torchrun(tmp_path / "ckpt", "crash:step=23:rank=1", warm=True)
    assert resumed_steps(records) == [10]  # saves at 5 and 10 (interval auto), then Daly's interval
    assert digests(records) == uninterrupted[STEPS]


@pytest.mark.processes
def test_kill_9_mid_save_falls_back_to_the_previous_checkpoint(uninterrupted, tmp_path):
    records = torchrun(tmp_path / "ckpt", "crash-in-save:step=10:rank=1", warm=True)
    assert resumed_steps(records) == [5]  # the save of step 10 never completed: never loaded
    assert digests(records) == uninterrupted[STEPS]


@pytest.mark.processes
def test_a_run_that_ended_with_an_epoch_continues_as_if_it_never_stopped(uninterrupted, tmp_path):
    """A run whose last checkpoint falls between two epochs (32 steps: two epochs of 16 batches), started again with
    more steps: the next epoch's loader draws its seed from the step's RNG streams, as it did in the uninterrupted
    run (it used to start the epoch before restoring them: one draw apart, other weights)."""
    torchrun(tmp_path / "ckpt", steps=32, warm=True)
    records = torchrun(tmp_path / "ckpt", warm=True)
    assert resumed_steps(records) == [32]
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
def test_a_corrupt_newest_checkpoint_is_skipped_for_the_next_that_verifies(uninterrupted_runs, uninterrupted,
                                                                           tmp_path):
    """The uninterrupted run's checkpoints (steps 5, 10 and its last), the newest corrupted: the run started again
    verifies it, skips it, resumes from the one before and ends where the uninterrupted run does."""
    folder = tmp_path / "ckpt"
    shutil.copytree(uninterrupted_runs[STEPS][0], folder)
    newest, before = corrupt_newest(folder)
    records = torchrun(folder, warm=True)
    [skipped] = [r for r in records if r["event"] == "checkpoint_skipped"]
    assert skipped["step"] == newest == STEPS and "checksum" in skipped["reason"]
    assert resumed_steps(records) == [before] == [10]
    assert digests(records) == uninterrupted[STEPS]


@pytest.mark.processes
def test_nan_steps_are_skipped_then_rolled_back(tmp_path):
    records = torchrun(tmp_path / "ckpt", "nan:step=3;nan:step=12;nan:step=13;nan:step=14", warm=True)
    steps = {r["step"]: r for r in records if r["event"] == "step"}
    assert steps[3]["skipped_steps"] == 1  # one bad step: skipped, the run goes on
    [rollback] = [r for r in records if r["event"] == "rollback"]
    assert rollback["from_step"] == 14 and rollback["to_step"] == 10  # three in a row: back to the newest checkpoint
    assert records[-1]["event"] == "finished" and records[-1]["step"] == STEPS
    assert all(len(d) == 64 for d in digests(records))


def run_local(job: str, workdir: Path, fault: str) -> tuple[list[dict], str]:
    """rank 0's records, and run-local's summary line."""
    result = kubetrain("run-local", f"dev/{job}", "--workdir", str(workdir), env={"KUBETRAIN_FAULT": fault})
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "terminate called" not in result.stdout + result.stderr, result.stdout[-4000:]
    return ([json.loads(line.split("] ", 1)[1]) for line in result.stdout.splitlines()
             if line.split("] ", 1)[-1].startswith("{")], result.stdout.splitlines()[-1])


@pytest.mark.parametrize("job", ["ddp-minimal", "ddp-function"])
@pytest.mark.processes
def test_run_local_kills_and_resumes_the_committed_jobs(uninterrupted, tmp_path, job):
    """The command job (the script finds its checkpoint folder in KUBETRAIN_CHECKPOINT_DIR) and the Function job (its
    `run` parameter is the runtime), as the operator runs them: a rank killed at step 13 resumes from step 10 and ends
    where an uninterrupted run does."""
    records, summary = run_local(job, tmp_path, "crash:step=13:rank=1")
    assert resumed_steps(records) == [10]
    assert summary.endswith("1 restart"), summary  # torchrun's, inside the pod
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
        "    run.log(loss=loss)\n"
        "    print(f'trained step {step}')\n")  # not flushed, to a pipe: kept through the SIGKILL at step 8
    (tmp_path / "training" / "__init__.py").write_text("")  # importable, empty: the user's
    first = run([sys.executable, "train.py"], cwd=tmp_path, env={"KUBETRAIN_FAULT": "crash:step=8", "PYTHONUNBUFFERED": ""})
    assert first.returncode == -9, first.stderr[-2000:]
    assert "trained step 7" in first.stdout.splitlines(), first.stdout[-2000:]
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


# -- nanoGPT's loop shape: prefetched batch, its own count from 0, gradient accumulation, eval at iteration 0 -------

@pytest.fixture(scope="module")
def nano_finished(tmp_path_factory) -> tuple[Path, list[dict]]:
    """An uninterrupted run's folder (its checkpoints, its own out_dir beside) and rank 0's records."""
    folder = tmp_path_factory.mktemp("nano-uninterrupted")
    records = nanogpt(folder / "ckpt")
    assert resumed_steps(records) == [] and not [r for r in records if r["event"] == "warning"]
    assert records[-1]["step"] == NANO_ITERS + 1  # iterations 0..max_iters, as nanoGPT runs them
    assert len(set(digests(records))) == 1
    return folder, records


@pytest.fixture(scope="module")
def nano_uninterrupted(nano_finished) -> list[str]:
    return digests(nano_finished[1])


@pytest.mark.processes
def test_nanogpt_killed_mid_step_resumes_with_the_batch_it_had_fetched(nano_uninterrupted, tmp_path):
    """kill -9 of one rank at step 23: the restart resumes from step 10 with the batch in hand at that checkpoint
    (fetched a step ahead, handed over with run.batch) and ends with the uninterrupted run's weights."""
    records = nanogpt(tmp_path / "ckpt", "crash:step=23:rank=1", warm=True)
    assert resumed_steps(records) == [10]
    assert digests(records) == nano_uninterrupted


@pytest.mark.processes
def test_nanogpt_sigterm_saves_the_step_reached_and_resumes_there(nano_uninterrupted, tmp_path):
    records = nanogpt(tmp_path / "ckpt", "sigterm:step=11:rank=1", warm=True)
    [stopped] = [r for r in records if r["event"] == "stopped"]
    assert stopped["checkpoint_step"] == stopped["step"] >= 11
    assert resumed_steps(records) == [stopped["step"]]
    assert digests(records) == nano_uninterrupted


@pytest.mark.processes
def test_nanogpt_skips_a_corrupt_newest_checkpoint(nano_finished, nano_uninterrupted, tmp_path):
    """The uninterrupted run's folders (checkpoints of steps 5, 10 and its last; its own out_dir beside), the newest
    checkpoint's data corrupted: the run started again verifies it, skips it and resumes from step 10, with step
    10's batch in hand, to the uninterrupted run's weights. Its own ckpt.pt (nanoGPT's torch.save at each
    evaluation) stays beside, untouched by the runtime."""
    shutil.copytree(nano_finished[0], tmp_path, dirs_exist_ok=True)
    folder = tmp_path / "ckpt"
    newest, before = corrupt_newest(folder)
    records = nanogpt(folder, warm=True)
    [skipped] = [r for r in records if r["event"] == "checkpoint_skipped"]
    assert skipped["step"] == newest == NANO_ITERS + 1 and resumed_steps(records) == [before] == [10]
    assert digests(records) == nano_uninterrupted
    assert (tmp_path / "out" / "ckpt.pt").is_file()


@pytest.mark.processes
def test_nanogpt_restarted_after_it_finished_ends_at_once_with_its_loss(nano_finished, nano_uninterrupted, tmp_path):
    """A run started again once it reached max_steps resumes there, trains nothing and says so with the last
    step's loss; eval_only evaluates at iteration 0 and leaves the loop, saving nothing."""
    finished, first = nano_finished
    shutil.copytree(finished, tmp_path, dirs_exist_ok=True)  # the uninterrupted run's folders, as it left them
    again = nanogpt(tmp_path / "ckpt", warm=True)
    assert resumed_steps(again) == [NANO_ITERS + 1]
    assert again[-1]["event"] == "finished" and again[-1]["loss"] == first[-1]["loss"]
    assert digests(again) == nano_uninterrupted
    only = tmp_path / "eval-only" / "ckpt"
    only.parent.mkdir()
    result = run([sys.executable, str(NANO), "--eval_only=true", f"--checkpoint_dir={only}",
                  f"--out_dir={only.parent / 'out'}"], cwd=only.parent)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "step 0: train loss" in result.stderr and not list(only.glob("step-*"))


@pytest.mark.processes
def test_a_loop_that_fetches_ahead_without_handing_the_batch_over_is_told_at_the_first_save(tmp_path):
    """The nanoGPT shape adopted without run.batch: its first batch is drawn between Run(...) and the loop, which
    no resume can replay; the runtime says so, once, at the first save, with the fix."""
    script = tmp_path / "train.py"
    script.write_text(NANO.read_text().replace("run.batch(*get_batch(\"train\"))", "get_batch(\"train\")"))
    result = run([sys.executable, str(script), "--max_iters=6", f"--checkpoint_dir={tmp_path / 'ckpt'}",
                  f"--out_dir={tmp_path / 'out'}"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    [warning] = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert "run.batch" in warning and "not bit-identical" in warning


# -- the runtime's configuration: a file layered on a loop's own defaults -------------------------------------

OWN_DEFAULTS = {"dir": "checkpoints", "interval": "auto", "async_save": True, "port": 0, "keep": 3}


@pytest.mark.parametrize("text, changed", [
    (None, {}),
    ("", {}),
    ("checkpoint:\n", {}),
    ("checkpoint: {interval: 7}\n", {"interval": 7}),
    ("checkpoint: {dir: /mnt/ckpt}\n", {"dir": "/mnt/ckpt"}),
    ("checkpoint: {keep: 5, async_save: false}\nmetrics: {port: 9500}\n", {"keep": 5, "async_save": False,
                                                                         "port": 9500}),
    ("resilience: {watchdog_floor_s: 3}\n", {}),
])
def test_a_runtime_config_file_sets_only_what_it_names(tmp_path, text, changed):
    """The same defaults with a file as without one: a file that sets only the interval keeps ./checkpoints, the
    background saves and the closed port (no folder at the filesystem's root, no port on 0.0.0.0)."""
    from kubetrain_runtime.runtime_config import own_loop_config

    path = None
    if text is not None:
        path = tmp_path / "runtime.yaml"
        path.write_text(text)
    config = own_loop_config(str(path) if path else None, in_job=False)
    got = {"dir": config.checkpoint.dir, "interval": config.checkpoint.interval,
           "async_save": config.checkpoint.async_save, "port": config.metrics.port, "keep": config.checkpoint.keep}
    assert got == {**OWN_DEFAULTS, **changed}
    assert own_loop_config(str(path) if path else None, in_job=True).metrics.port == changed.get("port", 9400)


@pytest.mark.parametrize("text, field, words", [
    ("checkpoint: {keep: -1}\n", "checkpoint.keep", "greater than or equal to 1"),
    ("checkpoint: {interval: 30m}\n", "checkpoint.interval", "30m"),
    ("profiling: {activities: [gpu]}\n", "profiling.activities", "gpu"),
    ("checkpoint: {local_interval: 5}\n", "checkpoint.local_interval", "local_dir is not"),
    ("checkpoint: {intervals: 5}\n", "checkpoint.intervals", "unknown field"),
    ("checkpoint: 5\n", "checkpoint", "mapping"),
])
def test_an_invalid_runtime_config_names_the_field_and_the_fix(tmp_path, text, field, words):
    from kubetrain_runtime.problems import ConfigError
    from kubetrain_runtime.runtime_config import own_loop_config

    path = tmp_path / "runtime.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as raised:
        own_loop_config(str(path), in_job=False)
    line = raised.value.lines()[0]  # (a tuple's bad item also reports the tuple's length: a second line)
    assert str(path) in line and field in line and words in line and "fix:" in line, line


@pytest.mark.processes
def test_an_invalid_runtime_config_fails_for_good_before_anything_is_written(tmp_path):
    """Exit 2 (the code no target's failure policy retries), one line on stderr, no traceback, the launcher's note,
    and no checkpoint folder."""
    (tmp_path / "runtime.yaml").write_text("checkpoint: {keep: -1, interval: 30m}\n")
    (tmp_path / "train.py").write_text(
        "import torch\nfrom kubetrain_runtime import Run\n"
        "model = torch.nn.Linear(2, 1)\nrun = Run(model, torch.optim.SGD(model.parameters(), lr=0.1), max_steps=3)\n"
        "raise SystemExit('Run(...) should not have returned')\n")
    result = run([sys.executable, "train.py"], cwd=tmp_path,
                 env={"KUBETRAIN_RUNTIME_CONFIG": str(tmp_path / "runtime.yaml"),
                      "KUBETRAIN_FAILURE_FILE": str(tmp_path / "failure")})
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2 and all(line.startswith("error: ") for line in lines), lines
    assert {"checkpoint.keep", "checkpoint.interval"} == {line.split(": ")[2] for line in lines}, lines
    assert (tmp_path / "failure").read_text().startswith("2 ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["failure", "runtime.yaml", "train.py"]


# -- restarts under plain torchrun: the agent's shared store, scoped per attempt -------------------------------

RESTARTING = """
import datetime, os, pathlib, signal, time
import torch, torch.distributed as dist
from kubetrain_runtime import Run  # noqa: F401 - a script on the runtime imports it before making its group
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
attempt, rank = int(os.environ["TORCHELASTIC_RESTART_COUNT"]), dist.get_rank()
met = torch.tensor([attempt])
dist.all_reduce(met)
assert met.item() == 2 * attempt, met
print(f"attempt {attempt}: rank {rank} met its peer")  # not flushed: a rank's streams are torchrun's `python -u`
printed = pathlib.Path(f"printed-{attempt}")
if attempt < RESTARTS:
    if rank == attempt % 2:
        while not printed.exists():  # the peer's line is out before this rank dies (and torchrun stops the peer)
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGKILL)
    printed.touch()
    time.sleep(60)  # torchrun stops the survivor
dist.destroy_process_group()
"""


@pytest.mark.processes
def test_two_ranks_restarted_twenty_times_in_a_row_never_hang_and_keep_their_last_lines(tmp_path):
    """Under plain torchrun (its agent's store shared with the ranks, kept from attempt to attempt), the script's own
    init_process_group meets its peer after each of twenty restarts in a row: no rank reads the attempt before's
    addresses (gloo's connectFullMesh would fail or hang on them). Every rank's line is there, the SIGKILLed one's
    too, though never flushed: torchrun starts ranks with `python -u`, and a warm rank (kubetrain_runtime/warm.py)
    writes through as its client does (its warm process's streams were buffered)."""
    restarts = 20
    (tmp_path / "restarting.py").write_text(RESTARTING.replace("RESTARTS", str(restarts)))
    result = run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                  f"--max-restarts={restarts}", "--monitor-interval=0.1", "-m", "kubetrain_runtime",
                  "restarting.py"], cwd=tmp_path, env={"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "", "PYTHONUNBUFFERED": ""},
                 timeout=500)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    # The warm launcher's client died of its rank's SIGKILL, as torchrun's own process for the rank (no OSError
    # traceback from restoring SIGKILL's handler).
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    # (Unbuffered, a print's line and its newline are two writes: the ranks' lines may interleave between them.)
    said = sorted(re.findall(r"attempt \d+: rank \d met its peer", result.stdout))
    assert said == sorted(f"attempt {attempt}: rank {rank} met its peer" for attempt in range(restarts + 1)
                          for rank in (0, 1)), result.stdout


# -- a stop signal: each launcher's exit code after the ranks' agreed save --------------------------------------

STOPPING = """
import torch
from kubetrain_runtime import Run
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
run = Run(model, optimizer, max_steps=10**6, checkpoint_dir="ckpt")
for step in run.steps():
    model(torch.randn(8, 4)).square().mean().backward()
    optimizer.step()
    optimizer.zero_grad()
    if step == 3:
        print("training", flush=True)
"""
STOP_LAUNCHERS = {  # name -> the command before the script, and its exit code after the ranks' agreed save
    # torch's agent re-raises SignalException (its traceback, exit 1) whatever its ranks did: nothing in a rank
    # changes that (docs/guides/resilience.md).
    "plain torchrun": (["-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"], 1),
    "kubetrain_runtime.torchrun": (["-m", "kubetrain_runtime.torchrun", "--standalone", "--nproc-per-node=2"],
                                   stopped_exit(signal.SIGTERM)),
    "alone, warm entry": (["-m", "kubetrain_runtime"], stopped_exit(signal.SIGTERM)),  # no torchrun: the rank itself
}


@pytest.mark.processes
def test_sigterm_to_each_launcher_saves_and_ends_with_its_documented_code(tmp_path):
    """SIGTERM to the launcher's process, as the kubelet sends it to a container's first process (the pods' own
    launcher script is tested with the trainer in test_fault_drills.py, run-local's end above): the ranks agree on a
    step and save it under every launcher; plain torchrun then ends with torch's SignalException and exit 1, which is
    why kubetrain_runtime.torchrun exists (143, one line, no traceback), and a script run alone exits 143 itself."""
    launched = {}
    for name, (launcher, _) in STOP_LAUNCHERS.items():
        folder = tmp_path / name.replace(" ", "-").replace(",", "")
        folder.mkdir()
        (folder / "train.py").write_text(STOPPING)
        with open(folder / "stderr", "w") as stderr:
            launched[name] = (folder, subprocess.Popen(
                [sys.executable, *launcher, "train.py"], cwd=folder, stdout=subprocess.PIPE, stderr=stderr, text=True,
                env={**os.environ, "PYTHONPATH": SOURCES_PATH, "KUBETRAIN_FAULT": ""}))
    for name, (folder, process) in launched.items():
        assert any(line.startswith("training") for line in process.stdout), (folder / "stderr").read_text()[-3000:]
    for _, process in launched.values():
        process.send_signal(signal.SIGTERM)
    for name, (folder, process) in launched.items():
        out = process.communicate(timeout=120)[0]
        err = (folder / "stderr").read_text()
        [stopped] = [json.loads(line) for line in out.splitlines() if '"event": "stopped"' in line]
        assert stopped["checkpoint_step"] == stopped["step"] > 0, (name, stopped)
        assert (folder / "ckpt" / f"step-{stopped['step']:08d}" / "COMPLETE").is_file(), name
        assert process.returncode == STOP_LAUNCHERS[name][1], (name, err[-3000:])
        assert "terminate called" not in err, (name, err[-3000:])
        if name == "plain torchrun":
            assert "SignalException" in err, err[-3000:]
        else:
            assert "Traceback" not in err, (name, err[-3000:])
    assert launched["kubetrain_runtime.torchrun"][0].joinpath("stderr").read_text().strip().splitlines()[-1] == (
        "kubetrain: torchrun stopped by SIGTERM (its ranks were told first: a run on kubetrain_runtime saves the step "
        "they agree on); exiting 143")


# -- run-local: an agreed stop is a clean end -------------------------------------------------------------------

POD = """
import json, os, signal, time
def stop(number, frame):
    if SAVES:
        os.write(1, (json.dumps({"event": "stopped", "signal": "SIGTERM", "step": 7, "checkpoint_step": 7})
                     + "\\n").encode())
    os._exit(143)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
time.sleep(60)
"""
SUPERVISE = """
import sys
from kubetrain.local.run_plan import LocalJob, LocalPod
from kubetrain.local.supervisor import run_job
pod = LocalPod("master-0", [sys.executable, "-c", sys.argv[1]], {}, "OnFailure", grace_s=20)
sys.exit(run_job(LocalJob([pod], backoff_limit=3, name="dev/job")))
"""


@pytest.mark.parametrize("saves, code, says", [
    (True, 0, "dev/job was stopped after"),
    (False, 130, "dev/job was interrupted after"),
])
@pytest.mark.processes
def test_run_local_ends_well_after_a_stop_the_ranks_answered_with_a_checkpoint(saves, code, says):
    """SIGTERM to run-local: it stops the pods as the kubelet would; pods that end within their grace period after
    the ranks saved the step they agreed on (their `stopped` record) make it exit 0, anything else 130."""
    supervisor = subprocess.Popen([sys.executable, "-c", SUPERVISE, POD.replace("SAVES", str(saves))],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  env={**os.environ, "PYTHONPATH": SOURCES_PATH})
    before = []
    for line in supervisor.stdout:
        before.append(line)
        if "ready" in line:
            break
    supervisor.send_signal(signal.SIGTERM)
    output = "".join(before) + supervisor.communicate(timeout=60)[0]
    assert supervisor.returncode == code, output
    last = output.splitlines()[-1]
    assert says in last and (("stopped with a checkpoint of step 7" in last) == saves), last


# -- a clean end: no abort at the interpreter's exit -------------------------------------------------------------

FINISHED = """
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from kubetrain_runtime import Run
dist.init_process_group("gloo")
torch.manual_seed(0)
model = DistributedDataParallel(torch.nn.Linear(4, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
run = Run(model, optimizer, max_steps=2, checkpoint_dir="ckpt")
for step in run.steps():
    model(torch.randn(8, 4)).square().mean().backward()
    optimizer.step()
    optimizer.zero_grad()
dist.destroy_process_group()
"""


# Thirty starts of the finished run's two ranks, each a process ending as `python train.py` does (the interpreter's
# own finalization, C++ destructors included), forked from one that imported torch once: thirty fresh interpreters
# would spend most of the test importing it. torch._dynamo too, which DDP's constructor imports (about as long as
# torch itself): each fork would import it again. Importing starts no thread, so the forks are whole processes.
STARTED_AGAIN = """
import os, runpy, socket, sys
import torch, torch._dynamo, torch.distributed  # noqa: F401 - once, for every fork below
import kubetrain_runtime.run  # noqa: F401
assert len(os.listdir("/proc/self/task")) == 1, "a thread before forking"
for attempt in range(int(sys.argv[1])):
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    ranks = []
    for rank in (0, 1):
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            for fd, stream in ((1, "out"), (2, "err")):
                os.dup2(os.open(f"rank{rank}-{attempt}.{stream}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
            os.environ.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                              MASTER_PORT=str(port))
            sys.argv = ["train.py"]
            runpy.run_path("train.py", run_name="__main__")
            raise SystemExit(0)  # the interpreter ends as `python train.py` would
        ranks.append(pid)
    print(attempt, *(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in ranks), flush=True)
"""


@pytest.mark.processes
def test_a_run_started_again_after_it_finished_exits_cleanly_thirty_times(tmp_path):
    """Two ranks of a script that finished, started again and again: each resumes at max_steps, finishes at once and
    exits 0, with no `terminate called without an active exception` at the interpreter's exit (the runtime's own
    process groups are destroyed, and its threads stopped, before it: not by its finalization)."""
    (tmp_path / "train.py").write_text(FINISHED)
    (tmp_path / "again.py").write_text(STARTED_AGAIN)
    # The first finishes; thirty start again after it. One intra-op thread, as torchrun gives each of several ranks
    # (more, and importing torch starts OpenMP's pool, which a fork would not have).
    result = run([sys.executable, "again.py", "31"], cwd=tmp_path, env={"OMP_NUM_THREADS": "1"}, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split("\n")[:-1] == [f"{attempt} 0 0" for attempt in range(31)], result.stdout
    aborted = [path.name for path in tmp_path.glob("rank*.err") if "terminate called" in path.read_text()]
    assert not aborted, aborted
    records = [json.loads(line) for line in (tmp_path / "rank0-30.out").read_text().splitlines()
               if line.startswith("{")]
    assert resumed_steps(records) == [2] and records[-1]["event"] == "finished"
