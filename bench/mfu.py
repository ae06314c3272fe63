"""Model FLOPs utilization of the training loop on one GPU: ~1B GPT, bf16, FSDP2 + torch.compile.

    python bench/mfu.py [--steps 40] [--micro 4] [--layers 18]
    python bench/mfu.py --cpu        (a small model on the CPU: the same code path, no MFU)

Runs the real Trainer (world size 1) on synthetic data and prints the median MFU and tokens/s of the steps
after compilation has warmed up, beside the MFU that `kubetrain cost` assumes (kubetrain/cost/cost_props.py).
MFU uses training/flops.py's PaLM FLOPs per token (the estimate's formula) and the device's dense bf16
peak (H100: 989 TFLOP/s). Target: >= 40 % on one H100. Without CUDA (and without --cpu) it says so and exits 1.
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
from kubetrain.cost.cost_props import DEFAULT_MFU

from kubetrain_runtime.distributed import init_world
from training.config import RunConfig
from training.trainer import Trainer


def run_config(args: argparse.Namespace, checkpoints: str) -> RunConfig:
    return RunConfig.model_validate({
        "model": {"vocab_size": 50304 if not args.cpu else 1024, "dim": args.dim, "n_layers": args.layers,
                  "n_heads": max(1, args.dim // 128)},
        "data": {"seq_len": args.seq_len},
        "batch": {"global_size": args.micro, "micro_size": args.micro},
        "strategy": {"name": "fsdp", "compile": not (args.no_compile or args.cpu)},
        "precision": "bf16",
        "max_steps": 1_000_000,
        "checkpoint": {"dir": checkpoints, "interval": 1_000_000},
        "metrics": {"port": 0},
    })


def report(records: list[dict], warmup: int) -> list[str]:
    """The measured MFU (or why there is none) beside the estimate's assumption."""
    (basis,) = [r for r in records if r["event"] == "mfu_basis"]
    measured = [r for r in records if r["event"] == "step"][warmup:]
    tps = statistics.median(r["tokens_per_s"] for r in measured)
    lines = [(f"tokens/s: {tps:,.0f}; FLOPs per token {basis['flops_per_token']:,} (training/flops.py); "
              f"achieved {tps * basis['flops_per_token'] / 1e9:,.1f} GFLOP/s")]
    if basis["peak_flops"]:
        mfu = statistics.median(r["mfu"] for r in measured)
        lines.append(f"MFU: {mfu:.3f} measured on {basis['device']} (peak {basis['peak_flops'] / 1e12:,.0f} TFLOP/s); "
                     f"`kubetrain cost` assumes {DEFAULT_MFU:.2f}; target >= 0.40")
    else:
        lines.append(f"{basis['note']}; `kubetrain cost` assumes MFU {DEFAULT_MFU:.2f} on accelerators")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=10, help="steps left out of the figures (compilation)")
    parser.add_argument("--micro", type=int, default=4, help="sequences per micro-batch")
    parser.add_argument("--layers", type=int, default=18)
    parser.add_argument("--dim", type=int, default=2048)
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--no-compile", action="store_true")
    parser.add_argument("--cpu", action="store_true", help="a small model on the CPU (defaults: 6 steps, 2 layers, "
                                                           "dim 128, 128 tokens): checks the code path")
    args = parser.parse_args()
    if args.cpu:
        cpu_defaults = {"steps": 6, "warmup": 2, "layers": 2, "dim": 128, "seq_len": 128, "micro": 2}
        for name, value in cpu_defaults.items():
            if getattr(args, name) == parser.get_default(name):
                setattr(args, name, value)
    elif not torch.cuda.is_available():
        print("bench/mfu.py needs a CUDA GPU; none is visible here (--cpu runs the code path on the CPU)",
              file=sys.stderr)
        return 1
    world = init_world()
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(run_config(args, tmp), world)
        output = io.StringIO()
        with contextlib.redirect_stdout(output):
            trainer.train(stop_after_step=args.steps)
        trainer.close()
    records = [json.loads(line) for line in output.getvalue().splitlines() if line.startswith("{")]
    device = torch.cuda.get_device_name() if world.device.type == "cuda" else "cpu"
    memory = f"; peak memory: {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB" if world.device.type == "cuda" else ""
    print(f"device: {device}; model: {trainer.n_params / 1e9:.3f}B parameters; compile: "
          f"{trainer.run.strategy.compile}; micro-batch {args.micro} x {args.seq_len} tokens{memory}")
    print("\n".join(report(records, args.warmup)))
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
