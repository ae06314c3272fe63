"""What each way of holding accumulated gradients costs per optimizer step under FSDP2: `sharded` (reduce-scatter
every micro-batch into the sharded gradients) against `unsharded` (the whole model's gradients on every rank, one
reduce-scatter after the last micro-batch), on kubetrain's GPT through training/parallel.py as the trainer runs it.

    python bench/grad_accumulation.py                 (2 CPU ranks under torchrun, gloo)
    python bench/grad_accumulation.py --micro-batches 4 --steps 6

Prints each mode's median step time, the ratio sharded / unsharded (above 1: sharded is slower by that factor),
and the formula's per-rank gradient memory for each (training/memory.py), so the time is seen beside what it buys.
On 2 CPU ranks the reduce-scatter is a gloo copy through shared memory; on GPUs over NCCL and EFA it is a
network collective per micro-batch, and the ratio is the one to measure there.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

MODEL = {"vocab_size": 4096, "dim": 384, "n_layers": 4, "n_heads": 6}
SEQ_LEN, MICRO = 128, 2


def _worker(args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    from kubetrain_runtime.distributed import World
    from training.config import RunConfig
    from training.memory import GIB, run_estimate
    from training.model import GPT
    from training.optimizer import build_optimizer
    from training.parallel import gradient_sync, parallelize

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    times: dict[str, list[float]] = {}
    gradients: dict[str, float] = {}
    for mode in ("sharded", "unsharded"):
        run = RunConfig.model_validate({
            "model": MODEL, "data": {"seq_len": SEQ_LEN},
            "batch": {"global_size": MICRO * world * args.micro_batches, "micro_size": MICRO},
            "strategy": {"name": "fsdp", "accumulated_gradients": mode}, "max_steps": args.steps})
        torch.manual_seed(0)
        model = GPT(run.model)
        model.init_weights(0)
        model = parallelize(model, run, World(rank, world, rank, torch.device("cpu")))
        optimizer = build_optimizer(model, run.optimizer)
        generator = torch.Generator().manual_seed(rank)
        batches = [torch.randint(0, MODEL["vocab_size"], (MICRO, SEQ_LEN + 1), generator=generator)
                   for _ in range(args.micro_batches)]
        times[mode] = []
        for step in range(args.steps + 1):  # the first step warms up and is not timed
            dist.barrier()
            started = time.perf_counter()
            for micro, batch in enumerate(batches):
                with gradient_sync(model, micro == len(batches) - 1, mode):
                    loss = F.cross_entropy(model(batch[:, :-1]).flatten(0, 1).float(), batch[:, 1:].flatten())
                    (loss / len(batches)).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            dist.barrier()
            if step:
                times[mode].append(time.perf_counter() - started)
        gradients[mode] = run_estimate(run, world, gpu=False).gradients / GIB * 1024
        del model, optimizer
    if rank == 0:
        sharded, unsharded = (statistics.median(times[m]) for m in ("sharded", "unsharded"))
        print(f"GPT {MODEL}, seq {SEQ_LEN}, micro batch {MICRO}, {args.micro_batches} micro-batches a step, "
              f"{world} CPU ranks (gloo), median of {args.steps} steps")
        print(f"{'accumulated gradients':24} {'step s':>8} {'gradients MiB (formula)':>24}")
        for mode, value in (("sharded", sharded), ("unsharded", unsharded)):
            print(f"{mode:24} {value:8.3f} {gradients[mode]:24.1f}")
        print(f"sharded / unsharded step time: {sharded / unsharded:.3f}")
    dist.destroy_process_group()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--micro-batches", type=int, default=8, help="micro-batches accumulated per step")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per mode")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(args)
        return 0
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                           __file__, "--worker", "--micro-batches", str(args.micro_batches), "--steps",
                           str(args.steps)], env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
