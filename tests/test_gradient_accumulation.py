"""How FSDP2 holds gradients while micro-batches accumulate (strategy.accumulated_gradients): sharded reduce-scatters
every micro-batch, unsharded once a step; both train the same model, and `auto` is decided by the memory
estimate for the compiler and the trainer alike (training/memory.py accumulation_choice)."""

from __future__ import annotations

import socket

import pytest
from test_training import losses, train, write_config

from kubetrain_runtime.problems import ConfigError
from training.config import RunConfig, load_run_config
from training.memory import GIB, run_accumulation, run_estimate

torch = pytest.importorskip("torch", reason="the trainer needs torch: pip install -e '.[train]'")


def run_config(strategy: dict, global_size: int = 64, micro: int = 1, model: dict | None = None) -> RunConfig:
    return RunConfig.model_validate({"model": model or {"vocab_size": 32000, "dim": 4096, "n_layers": 32,
                                                        "n_heads": 32},
                                     "data": {"seq_len": 2048}, "batch": {"global_size": global_size,
                                                                          "micro_size": micro},
                                     "strategy": strategy, "precision": "bf16", "max_steps": 1})


# -- the setting ----------------------------------------------------------------------------------------------------

def test_the_setting_under_ddp_is_refused_with_the_fix(tmp_path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("batch: {global_size: 8, micro_size: 1}\nmax_steps: 1\n"
                    "strategy: {name: ddp, accumulated_gradients: sharded}\n")
    with pytest.raises(ConfigError) as raised:
        load_run_config(path)
    (problem,) = raised.value.problems
    assert problem.code == "KT242" and problem.path == "strategy.accumulated_gradients"
    assert "means nothing under DDP" in problem.message and "strategy.name: fsdp" in problem.fix
    assert run_config({"name": "ddp"}).strategy.accumulated_gradients == "auto"  # the default is fine anywhere


def test_auto_keeps_gradients_unsharded_only_where_that_fits_with_headroom() -> None:
    """7B parameters: unsharded accumulation holds 4 bytes a parameter, ~27 GiB, on every rank."""
    auto = run_config({"name": "fsdp", "activation_checkpointing": True})
    assert run_accumulation(auto, 8, 80 * GIB) == "unsharded"
    assert run_accumulation(auto, 8, 40 * GIB) == "sharded"
    assert run_accumulation(auto, 8, None) == "sharded"  # no accelerator known (a CPU): bounded by the shards
    assert run_accumulation(auto, 64, 40 * GIB) == "sharded"  # 64 ranks x micro 1 = global 64: no accumulation
    unsharded = run_estimate(auto, 8, capacity=80 * GIB)
    assert 0.9 * 40 * GIB < unsharded.total <= 0.9 * 80 * GIB
    sharded = run_estimate(run_config({"name": "fsdp", "activation_checkpointing": True,
                                       "accumulated_gradients": "sharded"}), 8)
    assert unsharded.gradients - sharded.gradients > 0.8 * 27 * GIB  # the estimate follows the choice
    assert run_estimate(auto, 8, capacity=40 * GIB).gib() == sharded.gib()


def test_written_run_config_keeps_auto_out_and_an_explicit_choice_in() -> None:
    assert "accumulated_gradients" not in run_config({"name": "fsdp"}).to_yaml()
    written = run_config({"name": "fsdp", "accumulated_gradients": "unsharded"}).to_yaml()
    assert "accumulated_gradients: unsharded" in written


# -- the trainer ----------------------------------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _two_micro_batches(rank: int, port: int, out: str) -> None:
    """Rank `rank` of 2: one step of two micro-batches in each mode, recording whether the gradients exist
    (sharded) after the first micro-batch, and the full gradients after the last."""
    import torch.distributed as dist
    import torch.nn.functional as F

    from kubetrain_runtime.distributed import World
    from training.model import GPT
    from training.parallel import gradient_sync, parallelize

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    found = {}
    for mode in ("sharded", "unsharded"):
        run = RunConfig.model_validate({"model": {"vocab_size": 128, "dim": 32, "n_layers": 2, "n_heads": 4},
                                        "data": {"seq_len": 16}, "batch": {"global_size": 8, "micro_size": 2},
                                        "strategy": {"name": "fsdp", "accumulated_gradients": mode},
                                        "max_steps": 1})
        torch.manual_seed(0)
        model = GPT(run.model)
        model.init_weights(0)
        model = parallelize(model, run, World(rank, 2, rank, torch.device("cpu")))
        batches = torch.randint(0, 128, (2, 2, 17), generator=torch.Generator().manual_seed(rank))
        after_first = None
        for micro, batch in enumerate(batches):
            with gradient_sync(model, micro == 1, mode):
                F.cross_entropy(model(batch[:, :-1]).flatten(0, 1).float(), batch[:, 1:].flatten()).div(2).backward()
            if micro == 0:
                after_first = [p.grad is not None for p in model.parameters()]
        found[mode] = (after_first, [p.grad.full_tensor() for p in model.parameters()])
    if rank == 0:
        torch.save(found, out)
    dist.destroy_process_group()


@pytest.mark.processes
def test_sharded_accumulation_reduce_scatters_every_micro_batch_to_the_same_gradients(tmp_path) -> None:
    """After the first of two micro-batches a sharded rank already holds its reduced shard of every gradient;
    an unsharded one holds none (FSDP2 keeps them unsharded, unreduced); after the last both hold the same."""
    import torch.multiprocessing as mp

    out = str(tmp_path / "grads.pt")
    mp.start_processes(_two_micro_batches, args=(_free_port(), out), nprocs=2, start_method="spawn")
    found = torch.load(out)
    assert all(found["sharded"][0]) and not any(found["unsharded"][0])
    for sharded, unsharded in zip(found["sharded"][1], found["unsharded"][1], strict=True):
        torch.testing.assert_close(sharded, unsharded, rtol=1e-5, atol=1e-7)


@pytest.mark.processes
def test_both_modes_train_alike_and_a_sharded_run_resumes_exactly(tmp_path) -> None:
    """The trainer at 2 ranks, 2 micro-batches a step (global 8, micro 2): the loss of every step agrees between
    the modes within fp32 rounding, and the sharded run stopped after step 6 resumes from step 5 to the same
    bits as the uninterrupted run."""
    runs = {}
    for name, mode in (("sharded", "sharded"), ("unsharded", "unsharded"), ("resumed", "sharded")):
        (tmp_path / name).mkdir()
        config = write_config(tmp_path / name, max_steps=8, strategy={"name": "fsdp", "accumulated_gradients": mode},
                              checkpoint={"dir": str(tmp_path / name / "ckpt"), "interval": 5, "keep": 2})
        if name == "resumed":
            assert train(config, 2, "--stop-after-step", "6")[-1]["step"] == 6
        runs[name] = train(config)
    (estimate,) = [r for r in runs["unsharded"] if r["event"] == "memory_estimate"]
    assert estimate["accumulated_gradients"] == "unsharded"
    assert losses(runs["sharded"]) == pytest.approx(losses(runs["unsharded"]), rel=1e-4)
    assert losses(runs["resumed"]) == losses(runs["sharded"])[5:]
    assert runs["resumed"][-1]["weights_sha256_per_rank"] == runs["sharded"][-1]["weights_sha256_per_rank"]
