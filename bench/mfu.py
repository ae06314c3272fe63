"""Model FLOPs utilization of the training loop on one GPU: ~1B GPT, bf16, FSDP2 + torch.compile.

    python bench/mfu.py [--steps 40] [--micro 4] [--layers 18]

Runs the real Trainer (world size 1) on synthetic data and prints the median MFU and tokens/s
of the steps after compilation has warmed up. MFU uses the PaLM FLOPs definition and the peak
from training/metrics.py (H100: 989 TFLOP/s bf16 dense). Target: >= 40 % on one H100.
Needs CUDA; on a machine without it, it says so and exits 1.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import sys
import tempfile

import torch
import torch.distributed as dist

from training.config import RunConfig
from training.distributed import init_world
from training.trainer import Trainer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=10, help="steps left out of the figures (compilation)")
    parser.add_argument("--micro", type=int, default=4, help="sequences per micro-batch")
    parser.add_argument("--layers", type=int, default=18)
    parser.add_argument("--dim", type=int, default=2048)
    parser.add_argument("--no-compile", action="store_true")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("bench/mfu.py needs a CUDA GPU; none is visible here", file=sys.stderr)
        return 1
    world = init_world()
    with tempfile.TemporaryDirectory() as tmp:
        run = RunConfig.model_validate({
            "model": {"vocab_size": 50304, "dim": args.dim, "n_layers": args.layers, "n_heads": args.dim // 128},
            "data": {"seq_len": 2048},
            "batch": {"global_size": args.micro, "micro_size": args.micro},
            "strategy": {"name": "fsdp", "compile": not args.no_compile},
            "precision": "bf16",
            "max_steps": 1_000_000,
            "checkpoint": {"dir": tmp, "interval": 1_000_000},
            "metrics": {"port": 0},
        })
        trainer = Trainer(run, world)
        output = io.StringIO()
        with contextlib.redirect_stdout(output):
            trainer.train(stop_after_step=args.steps)
        trainer.close()
    steps = [json.loads(line) for line in output.getvalue().splitlines() if '"event": "step"' in line]
    measured = steps[args.warmup:]
    mfu = statistics.median(s["mfu"] for s in measured) if "mfu" in measured[0] else None
    tps = statistics.median(s["tokens_per_s"] for s in measured)
    print(f"device: {torch.cuda.get_device_name()}; model: {trainer.n_params / 1e9:.2f}B parameters; "
          f"compile: {run.strategy.compile}; micro-batch {args.micro} x 2048 tokens")
    print(f"tokens/s: {tps:,.0f}; peak memory: {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB")
    print(f"MFU: {mfu:.3f}  (target >= 0.40)" if mfu is not None else "MFU: unknown peak for this device")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
