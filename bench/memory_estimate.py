"""The memory formula (training/memory.py) against PyTorch's own memory tracker, on real small models.

    python bench/memory_estimate.py            (the whole grid: every shape of SHAPES, GPT and Llama, DDP and FSDP2,
                                                1 and 2 ranks, with and without activation checkpointing, fp32 and
                                                bf16, without gradient accumulation and with it, FSDP2 holding the
                                                accumulated gradients sharded and unsharded)
    python bench/memory_estimate.py --quick    (fp32 only)
    python bench/memory_estimate.py --shape wide   (one shape)

Each configuration runs two real training steps (forward, cross-entropy, backward, gradient clipping, fused AdamW,
zero_grad) on CPU tensors in gloo process groups under `torch.distributed._tools.fsdp2_mem_tracker.FSDPMemTracker`
(FSDP2) or `torch.distributed._tools.mem_tracker.MemTracker` (DDP, built inside the tracker so that its gradient
buckets count), and prints rank 0's peak beside the formula's tensors (model state + activations: a CPU has no
CUDA context, NCCL buffers or caching allocator, so those terms are left out) and their ratio. Target: every
ratio within 1 +/- 0.15.

The kubetrain GPT goes through training/parallel.py as the trainer runs it; the Llama is transformers'
LlamaForCausalLM from a tiny LlamaConfig built here (nothing downloaded), sharded per decoder layer with FSDP2
like the GPT, checkpointed with transformers' own gradient checkpointing.
"""

from __future__ import annotations

import argparse
import itertools
import os
import socket
import sys
import tempfile
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

from training.memory import Architecture, Layout, gpt_architecture, hf_architecture, trainer_estimate

# Model shapes by name: (GPT run config model, LlamaConfig keywords, sequence length, micro batch). `wide` changes
# every ratio the formula depends on (vocabulary to width, MLP to width, heads, tied embeddings, tokens per
# micro-batch); `vocab8` has a vocabulary 8x the width (the logits outweigh a layer's activations) and grouped-query
# attention of 4 query heads per key/value head, untied.
SHAPES: dict[str, tuple[dict[str, Any], dict[str, Any], int, int]] = {
    "small": ({"vocab_size": 512, "dim": 128, "n_layers": 4, "n_heads": 4},
              {"vocab_size": 512, "hidden_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4,
               "num_key_value_heads": 2, "intermediate_size": 352, "tie_word_embeddings": False}, 128, 4),
    "wide": ({"vocab_size": 2048, "dim": 256, "n_layers": 2, "n_heads": 8, "mlp_ratio": 3.0},
             {"vocab_size": 2048, "hidden_size": 192, "num_hidden_layers": 3, "num_attention_heads": 6,
              "num_key_value_heads": 1, "intermediate_size": 640, "tie_word_embeddings": True}, 64, 6),
    "vocab8": ({"vocab_size": 1536, "dim": 192, "n_layers": 3, "n_heads": 6, "mlp_ratio": 4.0},
               {"vocab_size": 2048, "hidden_size": 256, "num_hidden_layers": 3, "num_attention_heads": 8,
                "num_key_value_heads": 2, "intermediate_size": 688, "tie_word_embeddings": False}, 96, 4),
}
ACCUMULATED = 2  # micro-batches a step runs with gradient accumulation


@dataclass(frozen=True)
class Case:
    model: str  # "gpt" or "llama"
    strategy: str  # "ddp" or "fsdp"
    world: int
    checkpointing: bool
    precision: str = "fp32"
    shape: str = "small"
    accumulation: str = "none"  # "none" (one micro-batch a step), or ACCUMULATED held "sharded" or "unsharded"

    def __str__(self) -> str:
        held = {"none": "--", "sharded": f"x{ACCUMULATED} sharded", "unsharded": f"x{ACCUMULATED} unsharded"}
        return (f"{self.shape:6} {self.model:5} {self.strategy:4} {self.world} rank{'s' if self.world > 1 else ' '} "
                f"{'AC' if self.checkpointing else '--'} {self.precision} {held[self.accumulation]:13}")

    @property
    def micro_batches(self) -> int:
        return 1 if self.accumulation == "none" else ACCUMULATED

    @property
    def gpt(self) -> dict[str, Any]:
        return SHAPES[self.shape][0]

    @property
    def llama(self) -> dict[str, Any]:
        return {**SHAPES[self.shape][1], "max_position_embeddings": self.seq_len}

    @property
    def seq_len(self) -> int:
        return SHAPES[self.shape][2]

    @property
    def micro(self) -> int:
        return SHAPES[self.shape][3]

    def architecture(self) -> Architecture:
        if self.model == "gpt":
            from training.config import ModelConfig
            return gpt_architecture(ModelConfig(**self.gpt))
        return hf_architecture({**self.llama, "model_type": "llama"})

    def layout(self) -> Layout:
        return Layout(strategy=self.strategy, data_parallel=self.world, micro_batch=self.micro, seq_len=self.seq_len,
                      precision=self.precision, recompute="full" if self.checkpointing else "none",
                      accumulates=self.micro_batches > 1,
                      accumulation="unsharded" if self.accumulation == "unsharded" else "sharded")

    def estimate_bytes(self) -> float:
        return trainer_estimate(self.architecture(), self.layout(), gpu=False).tensors


def _model(case: Case) -> torch.nn.Module:
    torch.manual_seed(0)
    if case.model == "gpt":
        from training.config import ModelConfig
        from training.model import GPT
        model = GPT(ModelConfig(**case.gpt))
        model.init_weights(0)
        return model
    from transformers import LlamaConfig, LlamaForCausalLM
    model = LlamaForCausalLM(LlamaConfig(**case.llama))
    if case.checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model.train()


def _parallelize(case: Case, model: torch.nn.Module) -> torch.nn.Module:
    from kubetrain_runtime.distributed import World
    from training.parallel import parallelize
    if case.model == "gpt":
        from training.config import RunConfig
        run = RunConfig.model_validate({"model": case.gpt, "data": {"seq_len": case.seq_len},
                                        "batch": {"global_size": case.micro * case.world * case.micro_batches,
                                                  "micro_size": case.micro},
                                        "strategy": {"name": case.strategy,
                                                     "activation_checkpointing": case.checkpointing},
                                        "precision": case.precision, "max_steps": 2})
        return parallelize(model, run, World(dist.get_rank(), case.world, dist.get_rank(), torch.device("cpu")))
    if case.strategy == "ddp":
        return torch.nn.parallel.DistributedDataParallel(model) if case.world > 1 else model
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    mesh = init_device_mesh("cpu", (case.world,))
    policy = (MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
              if case.precision == "bf16" else MixedPrecisionPolicy())
    layers = model.model.layers
    for i, layer in enumerate(layers):
        fully_shard(layer, mesh=mesh, mp_policy=policy, reshard_after_forward=i < len(layers) - 1)
    return fully_shard(model, mesh=mesh, mp_policy=policy)


def measure(case: Case) -> int:
    """Rank-local peak bytes of two training steps under PyTorch's tracker (the process group must exist)."""
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed._tools.mem_tracker import MemTracker

    from training.optimizer import build_optimizer
    from training.config import OptimizerConfig

    from training.parallel import gradient_sync

    model = _model(case)
    vocab = case.gpt["vocab_size"] if case.model == "gpt" else case.llama["vocab_size"]
    tokens = [torch.randint(0, vocab, (case.micro, case.seq_len + 1),
                            generator=torch.Generator().manual_seed(dist.get_rank() * 7 + i))
              for i in range(case.micro_batches)]
    autocast = case.precision == "bf16" and case.strategy == "ddp"
    if case.strategy == "fsdp":
        model = _parallelize(case, model)
        optimizer = build_optimizer(model, OptimizerConfig())
        tracker = FSDPMemTracker(model, optimizer)
        tracker.track_inputs(tuple(tokens))
    else:
        tracker = MemTracker()
        tracker.track_external(model)
    with tracker:
        if case.strategy == "ddp":  # inside the tracker: DDP's gradient buckets are allocated here
            model = _parallelize(case, model)
            optimizer = build_optimizer(model, OptimizerConfig())
            tracker.track_external(optimizer)
        for _ in range(2):
            for micro, batch in enumerate(tokens):  # the trainer's step (training/trainer.py train_step)
                last = micro == len(tokens) - 1
                with gradient_sync(model, last, case.accumulation), \
                        torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                    out = model(batch[:, :-1])
                    logits = out if isinstance(out, torch.Tensor) else out.logits
                    del out
                    loss = F.cross_entropy(logits.flatten(0, 1).float(), batch[:, 1:].flatten())
                    del logits
                    (loss / len(tokens)).backward()
                tracker.reset_mod_stats()  # per forward/backward: the tracker's modules count one call each
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    snapshot = tracker.get_tracker_snapshot("peak")
    return max(stats["Total"] for stats in snapshot.values())


def _ranks(rank: int, world: int, port: int, cases: list[dict[str, Any]], out: str) -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        peaks = [measure(Case(**case)) for case in cases]
        if rank == 0:
            with open(out, "w") as f:
                f.write(" ".join(map(str, peaks)))
    finally:
        dist.destroy_process_group()
        torch.set_num_threads(threads)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure_all(cases: list[Case]) -> dict[Case, int]:
    """Peaks of every case: the cases of each world size in one group of processes."""
    peaks: dict[Case, int] = {}
    for world in sorted({c.world for c in cases}):
        group = [c for c in cases if c.world == world]
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "peaks")
            if world == 1 and not dist.is_initialized():  # no process to start: a group of one in this one
                _ranks(0, 1, _free_port(), [asdict(c) for c in group], out)
            else:
                mp.start_processes(_ranks, args=(world, _free_port(), [asdict(c) for c in group], out),
                                   nprocs=world, start_method="spawn")
            with open(out) as f:
                peaks.update(zip(group, map(int, f.read().split())))
    return peaks


# (strategy, ranks, accumulation) of the grid: accumulation over 2 ranks, where FSDP2 shards what it holds.
LAYOUTS = [("ddp", 1, "none"), ("ddp", 2, "none"), ("ddp", 2, "unsharded"), ("fsdp", 1, "none"), ("fsdp", 2, "none"),
           ("fsdp", 2, "sharded"), ("fsdp", 2, "unsharded")]


def all_cases(precisions: tuple[str, ...] = ("fp32", "bf16"), shapes: tuple[str, ...] = tuple(SHAPES)) -> list[Case]:
    return [Case(model, strategy, world, ac, precision, shape, accumulation)
            for shape, model, (strategy, world, accumulation), ac, precision in
            itertools.product(shapes, ("gpt", "llama"), LAYOUTS, (False, True), precisions)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fp32 only")
    parser.add_argument("--shape", choices=sorted(SHAPES), help="one shape of SHAPES (default: every one)")
    args = parser.parse_args()
    cases = all_cases(("fp32",) if args.quick else ("fp32", "bf16"), (args.shape,) if args.shape else tuple(SHAPES))
    peaks = measure_all(cases)
    ratios = {case: case.estimate_bytes() / peaks[case] for case in cases}
    print(f"{'configuration':48} {'tracker MiB':>12} {'formula MiB':>12} {'ratio':>6}")
    for case in cases:
        print(f"{str(case):48} {peaks[case] / 2**20:12.2f} {case.estimate_bytes() / 2**20:12.2f} {ratios[case]:6.3f}")
    low, high = min(ratios, key=ratios.get), max(ratios, key=ratios.get)
    worst = max(abs(ratios[low] - 1), abs(ratios[high] - 1))
    print(f"{len(cases)} configurations; lowest ratio {ratios[low]:.3f} ({str(low).strip()}), highest "
          f"{ratios[high]:.3f} ({str(high).strip()})")
    print(f"worst |ratio - 1|: {worst:.3f} (target 0.15); formula: training/memory.py, tensors only (no CUDA "
          "context, NCCL or allocator on a CPU)")
    return 0 if worst <= 0.15 else 1


if __name__ == "__main__":
    sys.exit(main())
