"""A GPT-style decoder: pre-norm blocks, rotary positions, SwiGLU MLP, untied output head.

Sized by ModelConfig from a few thousand parameters (tests) to ~1B (GPU benchmarks). Blocks are
the unit of sharding (FSDP2), activation checkpointing and compilation.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from training.config import ModelConfig


def rotary_tables(seq_len: int, head_dim: int, device: torch.device, base: float = 10000.0) -> tuple[torch.Tensor, ...]:
    inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(seq_len, device=device, dtype=torch.float32), inv_freq)
    return angles.cos(), angles.sin()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs (x[..., :d/2], x[..., d/2:]) by position-dependent angles; x is (B, H, T, D)."""
    x1, x2 = x.float().chunk(2, dim=-1)
    rotated = torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
    return rotated.type_as(x)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.head_dim = cfg.dim // cfg.n_heads
        self.qkv = nn.Linear(cfg.dim, 3 * cfg.dim, bias=False)
        self.out = nn.Linear(cfg.dim, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, t, d))


class FeedForward(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        hidden = cfg.mlp_hidden
        self.gate = nn.Linear(cfg.dim, hidden, bias=False)
        self.up = nn.Linear(cfg.dim, hidden, bias=False)
        self.down = nn.Linear(hidden, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.attn_norm = nn.RMSNorm(cfg.dim)
        self.attn = Attention(cfg)
        self.mlp_norm = nn.RMSNorm(cfg.dim)
        self.mlp = FeedForward(cfg)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.mlp_norm(x))


class GPT(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = nn.RMSNorm(cfg.dim)
        self.head = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        self.activation_checkpointing = False

    @torch.no_grad()
    def init_weights(self, seed: int) -> None:
        """Deterministic init from the seed, so every rank (and every resumed run) starts alike."""
        generator = torch.Generator().manual_seed(seed)
        depth_scale = 1.0 / math.sqrt(2 * self.cfg.n_layers)  # residual projections, as GPT-2
        for name, param in self.named_parameters():
            if param.dim() == 1:
                param.fill_(1.0)  # RMSNorm weights
                continue
            std = 0.02 * (depth_scale if name.endswith(("out.weight", "down.weight")) else 1.0)
            param.copy_(torch.randn(param.shape, generator=generator) * std)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        cos, sin = rotary_tables(tokens.shape[1], self.cfg.dim // self.cfg.n_heads, tokens.device)
        x = self.embed(tokens)
        for block in self.blocks:
            if self.activation_checkpointing and self.training:
                x = checkpoint(block, x, cos, sin, use_reentrant=False)
            else:
                x = block(x, cos, sin)
        return self.head(self.norm(x))


def flops_per_token(cfg: ModelConfig, seq_len: int, n_params: int) -> int:
    """Training FLOPs per token, PaLM's definition as torchtitan uses it (domain-facts section 10)."""
    non_embedding = n_params - cfg.vocab_size * cfg.dim
    return 6 * non_embedding + 12 * cfg.n_layers * cfg.n_heads * (cfg.dim // cfg.n_heads) * seq_len
