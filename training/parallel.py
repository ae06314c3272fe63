"""Spreading the model over ranks: DDP (replicate) or FSDP2 (shard each block, then the rest)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.nn.parallel import DistributedDataParallel

from training.config import RunConfig
from kubetrain_runtime.distributed import World


def parallelize(model: nn.Module, run: RunConfig, world: World) -> nn.Module:
    """Apply activation checkpointing, compilation and the data-parallel strategy, in that order. The unit
    of each is a block: kubetrain's GPT's, or a Hugging Face model's decoder layers."""
    if run.model.kind == "hf":
        from training import hf_model

        blocks = hf_model.decoder_layers(model)
        if run.strategy.activation_checkpointing:
            hf_model.enable_activation_checkpointing(model)
    else:
        blocks = list(model.blocks)
        model.activation_checkpointing = run.strategy.activation_checkpointing
    if run.strategy.compile:
        for block in blocks:
            block.compile()
    if run.strategy.name == "fsdp":
        mesh = init_device_mesh(world.device_type, (world.world_size,))
        # bf16 compute with fp32 gradient reduction: the sum of many bf16 shards loses precision.
        mp = (MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
              if run.precision == "bf16" else MixedPrecisionPolicy())
        for i, block in enumerate(blocks):
            # The last block's parameters are needed again at once by backward: keep them gathered.
            fully_shard(block, mesh=mesh, mp_policy=mp, reshard_after_forward=i < len(blocks) - 1)
        fully_shard(model, mesh=mesh, mp_policy=mp)
        return model
    if world.world_size > 1:
        return DistributedDataParallel(model, device_ids=[world.local_rank] if world.device_type == "cuda" else None)
    return model


@contextlib.contextmanager
def gradient_sync(model: nn.Module, last_micro_batch: bool, accumulation: str) -> Iterator[None]:
    """The gradient communication of one micro-batch's backward. DDP all-reduces only after the last micro-batch
    of an accumulation. FSDP2 with `accumulation` "sharded" reduce-scatters every micro-batch, adding to the
    sharded gradients (a rank never holds more than its shard); "unsharded" skips it until the last micro-batch,
    keeping the whole model's gradients on every rank meanwhile (training/memory.py `accumulation_choice`)."""
    if isinstance(model, DistributedDataParallel) and not last_micro_batch:
        with model.no_sync():
            yield
        return
    if hasattr(model, "set_requires_gradient_sync"):  # FSDP2
        model.set_requires_gradient_sync(last_micro_batch or accumulation == "sharded")
    yield


def autocast(run: RunConfig, world: World) -> contextlib.AbstractContextManager:
    """bf16 autocast for DDP; FSDP2 casts parameters itself through its mixed-precision policy."""
    if run.precision == "bf16" and run.strategy.name == "ddp":
        return torch.autocast(world.device_type, dtype=torch.bfloat16)
    return contextlib.nullcontext()
