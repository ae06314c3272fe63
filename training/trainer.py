"""The training loop: one Trainer for DDP and FSDP2, on the runtime's guarantees (kubetrain_runtime.Run): its
checkpoints, exact resume, stop signals, rollback, watchdog and metrics are the same any loop gets."""

from __future__ import annotations

import random
import time
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.distributed.tensor import DTensor

from kubetrain_runtime.distributed import World
from kubetrain_runtime.host_memory import keep_freed_memory
from kubetrain_runtime.preemption import StopRequest
from kubetrain_runtime.run import Run
from kubetrain_runtime.runtime_config import RuntimeConfig
from training import hf_export, hf_model
from training.config import RunConfig
from training.data import build_loader
from training.flops import flops_per_token
from training.memory import GIB, run_accumulation, run_estimate
from training.model import GPT
from training.optimizer import build_optimizer, learning_rate, set_learning_rate
from training.parallel import autocast, gradient_sync, parallelize


def logits(output: Any) -> torch.Tensor:
    """kubetrain's GPT returns logits; a transformers model, an output object that holds them."""
    return output if isinstance(output, torch.Tensor) else output.logits


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class Trainer:
    def __init__(self, run: RunConfig, world: World, stop: StopRequest | None = None,
                 startup: dict[str, float] | None = None):
        self.run = run
        self.world = world
        keep_freed_memory()
        seed_everything(run.seed)
        if run.model.kind == "hf":
            model = hf_model.build(run.model, world.device)  # random weights from the RNG seeded above
        else:
            with torch.device(world.device):
                model = GPT(run.model)
            model.init_weights(run.seed)
        self.n_params = sum(p.numel() for p in model.parameters())
        self.model = parallelize(model, run, world)
        self.optimizer = build_optimizer(self.model, run.optimizer)
        self.accum_steps = run.grad_accum_steps(world.world_size)
        # The GPU's memory decides `accumulated_gradients: auto` as the compiler decided it (a job's run config
        # arrives with the compiler's choice written in; a config of one's own is decided here).
        self.capacity = (torch.cuda.get_device_properties(world.device).total_memory
                         if world.device_type == "cuda" else None)
        self.accumulation = run_accumulation(run, world.world_size, self.capacity, world.device_type == "cuda")
        self.loader = build_loader(run, dp_rank=world.rank, dp_size=world.world_size)
        tokens_per_step = run.batch.global_size * run.data.seq_len
        # `stop`: the process's stop signals (its entry point installs them), or None: not watched. Either way the
        # process's entry point, not the runtime, decides how it ends (training/__main__.py).
        self.runtime = Run(
            self.model, self.optimizer, data=self.loader, max_steps=run.max_steps,
            config=RuntimeConfig(checkpoint=run.checkpoint, resilience=run.resilience, metrics=run.metrics,
                                 profiling=run.profiling, log_interval=run.log_interval),
            tokens_per_step=tokens_per_step,
            flops_per_step=flops_per_token(run.model, run.data.seq_len) * tokens_per_step,
            params=run.model_dump(mode="json"), world=world, stop=stop, owns_process=False,
            startup=startup if startup is not None else {}, on_reshard=self.reshard,
            on_finish=self.export if run.model.kind == "hf" else None)
        self.runtime.startup["trainer"] = time.time()

    # -- the loop ---------------------------------------------------------------------------------

    def train(self, stop_after_step: int | None = None) -> dict[str, Any]:
        runtime = self.runtime
        for step in runtime.steps(stop_after_step):
            if step == runtime.first_step:  # the sinks open with the loop: the estimate goes to them once
                runtime.report(self.memory_estimate())
            set_learning_rate(self.optimizer, learning_rate(step, self.run.optimizer, self.run.max_steps))
            loss, grad_norm = self.train_step(step)
            runtime.log(loss=loss, grad_norm=grad_norm)
            self.optimizer.step()  # skipped on the device when the norm is not finite (the runtime's guard)
            self.optimizer.zero_grad(set_to_none=True)
        return runtime.ended

    def export(self) -> None:
        """The weights in transformers' save_pretrained layout (at the end of a run, and on request:
        `python -m training --export`, after `runtime.restore()`)."""
        started = time.perf_counter()
        path = hf_export.save_pretrained(self.model, self.run, self.runtime.step, self.world.is_main)
        self.runtime.report({"event": "exported", "step": self.runtime.step, "path": str(path),
                             "save_s": time.perf_counter() - started})

    def memory_estimate(self) -> dict[str, Any]:
        """One rank's peak memory as training/memory.py estimates it (the figure `kubetrain synth` checked against the
        GPU), in GiB by category, beside what the device holds (torch.cuda.max_memory_allocated measures it)."""
        found = run_estimate(self.run, self.world.world_size, gpu=self.world.device_type == "cuda",
                             capacity=self.capacity)
        record: dict[str, Any] = {"event": "memory_estimate", "per_rank_gib": found.gib(),
                                  "accumulated_gradients": self.accumulation}
        if self.world.device_type == "cuda":
            record["device_gib"] = round(self.capacity / GIB, 2)
        return record

    def train_step(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Forward and backward over the step's micro-batches, and the clipped gradients' norm."""
        total = torch.zeros((), device=self.world.device)
        poison = self.runtime.faults.poisons_loss(step)
        for micro in range(self.accum_steps):
            inputs, targets = (t.to(self.world.device, non_blocking=True) for t in self.loader.next_batch())
            last = micro == self.accum_steps - 1
            with gradient_sync(self.model, last, self.accumulation), autocast(self.run, self.world):
                # The logits get no name: the backward needs only log-softmax's output, so the largest
                # activation is freed once the loss is computed instead of living through the backward.
                loss = F.cross_entropy(logits(self.model(inputs)).flatten(0, 1).float(), targets.flatten())
                if poison:
                    loss = loss * float("nan")
                (loss / self.accum_steps).backward()
            total += loss.detach()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.run.optimizer.grad_clip)
        norm = grad_norm.full_tensor() if isinstance(grad_norm, DTensor) else grad_norm
        return total / self.accum_steps, norm

    def reshard(self, step: int) -> None:
        """Resumed at another world size: RNG streams cannot carry over, but the data position can be recomputed,
        since every rank consumed an equal share of the global samples."""
        self.loader.position = step * self.run.batch.global_size // self.world.world_size

    def close(self, wait: bool = True) -> None:
        self.runtime.close(wait)
