"""Time training is blocked by an async checkpoint against a synchronous save of the same state.

    python bench/checkpoint.py [--dim 768] [--layers 12] [--rounds 3]

One process (world size 1), a GPT of ~160M parameters by default: weights plus AdamW state is
about 1.8 GiB. Each round saves the same state synchronously and asynchronously through the
trainer's own save path, then trains a step: the async save copies the state on a background
thread while that step's forward and backward run, and blocks only if the copy is not done when
the optimizer is about to change the weights. Prints the medians of the time the training thread
was blocked and their ratio (target <= 2 %), and what the overlap costs the step.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import tempfile
import time

import torch.distributed as dist

from training.config import RunConfig
from kubetrain_runtime.distributed import init_world
from training.trainer import Trainer


def make_trainer(dim: int, layers: int, folder: str, async_save: bool, world) -> Trainer:
    run = RunConfig.model_validate({
        "model": {"vocab_size": 50304, "dim": dim, "n_layers": layers, "n_heads": dim // 64},
        "data": {"seq_len": 64}, "batch": {"global_size": 1, "micro_size": 1}, "max_steps": 1000,
        "checkpoint": {"dir": folder, "interval": 1000, "keep": 1, "async_save": async_save},
        "metrics": {"port": 0},  # two trainers live at once here; neither needs an endpoint
    })
    trainer = Trainer(run, world)
    with contextlib.redirect_stdout(io.StringIO()):
        trainer.train(stop_after_step=1)  # one step, so AdamW's state exists and is saved too
    return trainer


def train_step(trainer: Trainer) -> float:
    """One step as the trainer's loop runs it (forward, backward, the runtime's guarded optimizer step, which waits
    for a background save's copy of the weights); returns its time."""
    runtime = trainer.runtime
    runtime.step += 1
    started = time.perf_counter()
    _, grad_norm = trainer.train_step(runtime.step)
    runtime.log(grad_norm=grad_norm)
    trainer.optimizer.step()
    trainer.optimizer.zero_grad(set_to_none=True)
    runtime.logged = {}
    return time.perf_counter() - started


def save_then_step(trainer: Trainer) -> tuple[dict, float]:
    """Save, then train one step (a background save overlaps it); returns the save's report and
    the step's time."""
    runtime = trainer.runtime
    with contextlib.redirect_stdout(io.StringIO()):
        # The runtime's save path without its reporting: the checkpoint manager returns the report.
        report = runtime.checkpoints.save(runtime.step + 1, runtime.state)
        step_s = train_step(trainer)
        while report is None:  # training would go on here; the save finishes in the background
            time.sleep(0.05)
            report = runtime.checkpoints.poll()
    return report, step_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    world = init_world()
    with tempfile.TemporaryDirectory() as tmp:
        sync = make_trainer(args.dim, args.layers, f"{tmp}/sync", False, world)
        background = make_trainer(args.dim, args.layers, f"{tmp}/async", True, world)
        state_bytes = sum(p.numel() * p.element_size() for p in sync.model.parameters()) * 3  # + exp_avg(_sq)
        sync_blocked, async_blocked, async_total, plain_steps, overlapped_steps = [], [], [], [], []
        for i in range(args.rounds + 1):  # round 0 warms up (first-touch allocations, page cache)
            sync_report, _ = save_then_step(sync)
            async_report, overlapped = save_then_step(background)
            plain = train_step(background)
            if i:
                sync_blocked.append(sync_report["blocked_s"])
                async_blocked.append(async_report["blocked_s"])
                async_total.append(async_report["complete_after_s"])
                overlapped_steps.append(overlapped)
                plain_steps.append(plain)
    s, a = statistics.median(sync_blocked), statistics.median(async_blocked)
    print(f"state: {sync.n_params / 1e6:.0f}M parameters, {state_bytes / 2**30:.2f} GiB with AdamW state")
    print(f"sync save, blocked:   {s:.3f} s  (rounds: {', '.join(f'{x:.3f}' for x in sync_blocked)})")
    print(f"async save, blocked:  {a:.3f} s  (rounds: {', '.join(f'{x:.3f}' for x in async_blocked)}); "
          f"complete after {statistics.median(async_total):.3f} s")
    print(f"a training step: {statistics.median(plain_steps):.3f} s alone, "
          f"{statistics.median(overlapped_steps):.3f} s while the background save copies and writes")
    print(f"ratio async/sync blocked: {a / s:.3f}  (target <= 0.02)")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
