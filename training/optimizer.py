"""AdamW with decoupled weight decay on matrices only, and a warmup + cosine learning-rate schedule."""

from __future__ import annotations

import math

import torch
from torch import nn

from training.config import OptimizerConfig


def build_optimizer(model: nn.Module, cfg: OptimizerConfig) -> torch.optim.AdamW:
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]  # norm weights
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    # fused: one kernel for all parameters, and it honours `found_inf` on the device, which is
    # how the trainer skips a non-finite update without waiting for the host.
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas, fused=True)


def learning_rate(step: int, cfg: OptimizerConfig, max_steps: int) -> float:
    """The LR of optimizer step `step` (1-based): linear warmup, then cosine decay to min_lr at max_steps."""
    if step <= cfg.warmup_steps:
        return cfg.lr * step / cfg.warmup_steps
    progress = (step - cfg.warmup_steps) / max(1, max_steps - cfg.warmup_steps)
    return cfg.min_lr + 0.5 * (cfg.lr - cfg.min_lr) * (1 + math.cos(math.pi * min(1.0, progress)))


def set_learning_rate(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr
