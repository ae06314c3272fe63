"""The training runtime, for real: two CPU ranks under torchrun, gloo, real DCP checkpoints."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml
from conftest import run

torch = pytest.importorskip("torch", reason="the training runtime needs torch: pip install -e '.[train]'")

TINY = {
    "model": {"vocab_size": 256, "dim": 32, "n_layers": 2, "n_heads": 4},
    "data": {"source": "synthetic", "seq_len": 32},
    "optimizer": {"lr": 1e-2, "min_lr": 1e-3, "warmup_steps": 3},
    "batch": {"global_size": 8, "micro_size": 2},
    "max_steps": 16,
    "seed": 7,
    "log_interval": 1,
    "metrics": {"port": 0},  # tests run side by side on one machine; the endpoint has tests of its own
}


def write_config(folder: Path, **overrides) -> Path:
    config = {**TINY, "checkpoint": {"dir": str(folder / "ckpt"), "interval": 5, "keep": 2}, **overrides}
    path = folder / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def train(config: Path, nproc: int = 2, *args: str) -> list[dict]:
    launcher = ["-m", "kubetrain_runtime.torchrun", "--standalone", f"--nproc-per-node={nproc}"] if nproc > 1 else []
    result = run([sys.executable, *launcher, "-m", "training", "--config", str(config), *args])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def losses(records: list[dict]) -> list[float]:
    return [r["loss"] for r in records if r["event"] == "step"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The module's uninterrupted 16-step runs at two ranks, one per (strategy, precision), trained the first time a
    test asks for one: the loss test reads its records and checkpoints, the resume test compares its bits, the
    reshard test loads its final checkpoint at one rank. Returns (folder, records); the folder is read, not written."""
    runs: dict[str, tuple[Path, list[dict]]] = {}

    def get(strategy: dict, precision: str = "fp32") -> tuple[Path, list[dict]]:
        key = json.dumps([strategy, precision], sort_keys=True)
        if key not in runs:
            folder = tmp_path_factory.mktemp("uninterrupted")
            runs[key] = (folder, train(write_config(folder, strategy=strategy, precision=precision)))
        return runs[key]

    return get


@pytest.mark.parametrize(("strategy", "precision"), [
    ({"name": "ddp"}, "fp32"),
    ({"name": "fsdp"}, "fp32"),
    ({"name": "fsdp", "activation_checkpointing": True}, "bf16"),
])
@pytest.mark.processes
def test_loss_falls_and_replicas_agree(uninterrupted, strategy, precision):
    folder, records = uninterrupted(strategy, precision)
    steps = [r for r in records if r["event"] == "step"]
    assert [r["step"] for r in steps] == list(range(1, 17))
    assert {"loss", "lr", "tokens_per_s", "step_time_s", "grad_norm"} <= set(steps[0])
    # Profiling is off unless asked for: no profile records, no traces.
    assert not [r for r in records if r["event"] == "profile"] and not (folder / "ckpt" / "profiles").exists()
    first, last = sum(losses(records)[:3]) / 3, sum(losses(records)[-3:]) / 3
    assert last < first - 0.4, f"loss did not fall: {first:.3f} -> {last:.3f}"  # run-to-run noise is ~0.05
    finished = records[-1]
    assert finished["event"] == "finished" and finished["step"] == 16 and finished["loss"] == steps[-1]["loss"]
    digests = finished["weights_sha256_per_rank"]
    assert len(digests) == 2 and digests[0] == digests[1]
    # Keep the newest two complete checkpoints: steps 15 and 16 (the final one).
    assert sorted(p.name for p in (folder / "ckpt").glob("step-*")) == ["step-00000015", "step-00000016"]
    assert all((p / "COMPLETE").is_file() and (p / ".metadata").is_file() for p in (folder / "ckpt").glob("step-*"))
    assert 0 < finished["ettr"] <= 1 and finished["wall_s"] >= finished["productive_s"] > 0


@pytest.mark.parametrize("async_save", [False, True])
@pytest.mark.processes
def test_resume_is_bit_identical_to_an_uninterrupted_run(tmp_path, uninterrupted, async_save):
    """Stopped after step 12 and resumed from its step-10 checkpoint (saved in the background or not), the run ends
    on the bits of the module's uninterrupted DDP run (which saved in the foreground and kept two checkpoints: how a
    checkpoint is saved and how many are kept changes no bit of the training)."""
    _, straight = uninterrupted({"name": "ddp"})
    (tmp_path / "b").mkdir()
    checkpoint = {"interval": 5, "keep": 3, "async_save": async_save}
    config_b = write_config(tmp_path / "b", checkpoint={**checkpoint, "dir": str(tmp_path / "b" / "ckpt")})
    first = train(config_b, 2, "--stop-after-step", "12")
    assert first[-1]["step"] == 12
    resumed = train(config_b)
    startup = resumed[0].pop("startup")
    assert resumed[0] == {"event": "resumed", "step": 10, "from": str(tmp_path / "b" / "ckpt" / "step-00000010"),
                          "tier": "durable", "saved_world_size": 2, "world_size": 2}
    # When each part of the restart was done: torchrun's process, the rank, its process group, the trainer, the load.
    assert list(startup) == ["client", "rank", "process_group", "trainer", "resumed"]
    assert sorted(startup.values()) == list(startup.values())
    # Steps 11..16 of the resumed run repeat the uninterrupted run's exactly, to the last bit.
    assert losses(resumed) == losses(straight)[10:]
    assert resumed[-1]["weights_sha256_per_rank"] == straight[-1]["weights_sha256_per_rank"]


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
@pytest.mark.processes
def test_checkpoint_saved_at_two_ranks_loads_at_one(tmp_path, uninterrupted, strategy):
    folder, two = uninterrupted({"name": strategy})
    shutil.copytree(folder / "ckpt", tmp_path / "ckpt")  # the two-rank run's checkpoints, in a folder of this test's
    config = write_config(tmp_path, strategy={"name": strategy})
    one = train(config, 1)  # max_steps already reached: it only loads the final checkpoint
    assert one[0]["event"] == "resumed" and one[0]["saved_world_size"] == 2 and one[0]["world_size"] == 1
    assert one[-1]["weights_sha256_per_rank"] == two[-1]["weights_sha256_per_rank"][:1]


@pytest.mark.processes
def test_config_error_exits_2_with_the_field_path(tmp_path):
    config = write_config(tmp_path, batch={"global_size": 8, "micro_size": 0}, optimiser={})
    result = run([sys.executable, "-m", "training", "--config", str(config)])
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"error: {config}: batch.micro_size: Input should be greater than 0 (got 0) [KT003]" in result.stderr
    assert "optimiser: unknown field [KT001] fix: did you mean 'optimizer'?" in result.stderr


@pytest.mark.processes
def test_world_size_rule_is_checked_again_at_start(tmp_path):
    config = write_config(tmp_path, batch={"global_size": 6, "micro_size": 4})
    result = run([sys.executable, "-m", "training", "--config", str(config)])
    assert result.returncode == 2
    assert "batch.global_size: global_size 6 is not a multiple of micro_size 4 x 1 ranks = 4 [KT201]" in result.stderr


@pytest.mark.processes
def test_token_file_source(tmp_path):
    import numpy as np

    tokens = (np.arange(20_000) * 7 % 256).astype(np.uint16)  # a learnable cycle
    tokens.tofile(tmp_path / "tokens.bin")
    config = write_config(tmp_path, data={"source": "tokens", "path": str(tmp_path / "tokens.bin"), "seq_len": 32})
    records = train(config, 1)
    assert losses(records)[-1] < losses(records)[0] - 1.0


@pytest.mark.processes
def test_trains_on_the_projects_own_text_tokenized_bytewise(tmp_path):
    from conftest import ROOT

    tokens = tmp_path / "readme.u32"
    made = run([sys.executable, "-m", "training.tokens", str(ROOT / "README.md"), str(tokens), "--dtype", "uint32"])
    assert made.returncode == 0, made.stderr
    config = write_config(tmp_path, data={"source": "tokens", "path": str(tokens), "dtype": "uint32", "seq_len": 32},
                          max_steps=24)
    records = train(config, 1)
    # Byte-level English: from ln(256) = 5.5 towards the bytes' unigram entropy (~3): 24 steps learn
    # which bytes are frequent (measured: 5.55 -> 4.31).
    assert losses(records)[0] > 5 and losses(records)[-1] < losses(records)[0] - 1


@pytest.mark.parametrize(("tokens", "dtype", "expected"), [
    ([7, 300] * 100, "uint16", "token id 300 is beyond vocab_size 256"),  # another tokenizer's file
    ([1, 2, 3] * 101, "uint8", "no whole number of uint32 tokens"),  # 303 bytes
    ([1, 2] * 10, "uint16", "fewer than one sequence of 32"),
])
@pytest.mark.processes
def test_unusable_token_file_is_one_line_at_start(tmp_path, tokens, dtype, expected):
    import numpy as np

    np.array(tokens, dtype=dtype).tofile(tmp_path / "tokens.bin")
    data_dtype = "uint32" if dtype == "uint8" else dtype
    config = write_config(tmp_path, data={"source": "tokens", "path": str(tmp_path / "tokens.bin"),
                                          "dtype": data_dtype, "seq_len": 32})
    result = run([sys.executable, "-m", "training", "--config", str(config), "--check"])
    assert result.returncode == 2 and "Traceback" not in result.stderr
    [line] = result.stderr.splitlines()
    assert "[KT208]" in line and expected in line


def test_learning_rate_schedule():
    from training.config import OptimizerConfig
    from training.optimizer import learning_rate

    cfg = OptimizerConfig(lr=1.0, min_lr=0.1, warmup_steps=10)
    assert [learning_rate(s, cfg, 110) for s in (1, 5, 10)] == [0.1, 0.5, 1.0]
    assert learning_rate(60, cfg, 110) == pytest.approx(0.55)
    assert learning_rate(110, cfg, 110) == pytest.approx(0.1)
    assert learning_rate(500, cfg, 110) == pytest.approx(0.1)
