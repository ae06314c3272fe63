"""Training FLOPs of the GPT in training/model.py (accelerators' peak FLOP/s: kubetrain_runtime/accelerators.py):
one definition for the runtime's measured MFU and the compiler's cost estimate (`kubetrain cost`). Imports no torch.

FLOPs per token follow PaLM's definition (Chowdhery et al. 2022, appendix B), as torchtitan computes MFU
(torchtitan, torchtitan/tools/utils.py `get_num_flop_per_token`): 6 x N for the matrix multiplications of
the forward and backward pass, N the parameters less the input embedding (a lookup, not a matmul; the
output head is counted), plus 12 x layers x seq_len x dim for attention's scores and weighted values.
"""

from __future__ import annotations

import math

from training.config import HFModelConfig, ModelConfig


def mlp_hidden(cfg: ModelConfig) -> int:
    """SwiGLU's hidden width: 2/3 of mlp_ratio x dim (three matrices instead of two), rounded up to 64."""
    return 64 * math.ceil(int(2 * cfg.mlp_ratio * cfg.dim / 3) / 64)


def parameter_count(cfg: ModelConfig | HFModelConfig) -> int:
    """Every parameter of training.model.GPT: embedding, blocks (attention, SwiGLU, two RMSNorm weights),
    final norm and the untied output head. Of a Hugging Face Llama-style model: the same parts, with
    grouped-query attention's smaller key/value projections and the head tied or not (attention biases,
    as Qwen2's, are left out: under 0.1 % of a layer)."""
    if isinstance(cfg, HFModelConfig):
        h, kv_width = cfg.hidden_size, cfg.kv_heads * (cfg.hidden_size // cfg.num_attention_heads)
        block = 2 * h * h + 2 * h * kv_width + 3 * h * cfg.intermediate_size + 2 * h
        heads = 1 if cfg.tie_word_embeddings else 2
        return heads * cfg.vocab_size * h + cfg.num_hidden_layers * block + h
    block = 4 * cfg.dim * cfg.dim + 3 * cfg.dim * mlp_hidden(cfg) + 2 * cfg.dim
    return 2 * cfg.vocab_size * cfg.dim + cfg.n_layers * block + cfg.dim


def shape(cfg: ModelConfig | HFModelConfig) -> tuple[int, int, int]:
    """(layers, width, vocabulary) of either kind of model."""
    if isinstance(cfg, HFModelConfig):
        return cfg.num_hidden_layers, cfg.hidden_size, cfg.vocab_size
    return cfg.n_layers, cfg.dim, cfg.vocab_size


def checkpoint_bytes(cfg: ModelConfig) -> int:
    """A trainer checkpoint's size: fp32 weights and AdamW's two fp32 moments per parameter (the compiler sizes a
    job's stop checkpoint, and so its grace period, from this)."""
    return 12 * parameter_count(cfg)


def flops_per_token(cfg: ModelConfig | HFModelConfig, seq_len: int, parameters: int | None = None) -> int:
    """Training FLOPs per token. `parameters`: the model's count if it is not this GPT (a command job's
    declared size, which then counts as N without its embedding). A tied head is one matrix but still a
    matmul: it counts."""
    layers, width, vocab = shape(cfg)
    tied = isinstance(cfg, HFModelConfig) and cfg.tie_word_embeddings
    n = parameter_count(cfg) - (0 if tied else vocab * width) if parameters is None else parameters
    return 6 * n + attention_flops_per_token(layers, width, seq_len)


def attention_flops_per_token(n_layers: int, dim: int, seq_len: int) -> int:
    """Attention's FLOPs per token that the parameter count does not see: 12 x layers x seq_len x dim."""
    return 12 * n_layers * seq_len * dim
