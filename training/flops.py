"""Training FLOPs of the GPT in training/model.py, and accelerators' peak FLOP/s: one definition for the
runtime's measured MFU and the compiler's cost estimate (`kubetrain cost`). Imports no torch.

FLOPs per token follow PaLM's definition (Chowdhery et al. 2022, appendix B), as torchtitan computes MFU
(torchtitan, torchtitan/tools/utils.py `get_num_flop_per_token`): 6 x N for the matrix multiplications of
the forward and backward pass, N the parameters less the input embedding (a lookup, not a matmul; the
output head is counted), plus 12 x layers x seq_len x dim for attention's scores and weighted values.
"""

from __future__ import annotations

import math
import re

from training.config import HFModelConfig, ModelConfig

# Dense bf16 peak of one accelerator in FLOP/s, without sparsity, by chip. Sources: NVIDIA's datasheets (H100
# SXM 989, H100 NVL 835, H100 PCIe 756 TFLOP/s; H200 989, the H100's compute; A100 312, SXM and PCIe alike; HGX B200
# 2,250; L40S 362; L40 181; L4 121, where the datasheet's 242 is with sparsity; T4 65, its mixed-precision FP16 peak:
# Turing has no bf16, so an fp16 run is what it trains); the A10G, AWS's variant of the A10 in G5 instances, 70 (the
# A10's datasheet says 125; the A10G trades tensor throughput for CUDA-core clocks: Baseten, "NVIDIA A10 vs A10G for
# ML model inference"); AWS Neuron's architecture pages (Trainium 190 per chip, "Trn1/Trn1n Architecture": 3,040 for
# 16 chips of a trn1.32xlarge; Trainium2 667 per chip, "Trainium2 Architecture"). torchtitan uses 989 for the H100.
PEAK_BF16_FLOPS: dict[str, float] = {
    "H100 SXM": 989e12, "H100 NVL": 835e12, "H100 PCIe": 756e12, "H200": 989e12, "A100": 312e12, "B200": 2250e12,
    "L40S": 362e12, "L40": 181e12, "L4": 121e12, "A10G": 70e12, "T4": 65e12, "Trainium": 190e12,
    "Trainium2": 667e12}

# A chip name's model word -> the chip; H100 is told apart by its form factor (see device_chip).
_MODELS = {chip.split()[0].upper(): chip for chip in PEAK_BF16_FLOPS if " " not in chip}
_H100 = {"NVL": "H100 NVL", "PCIE": "H100 PCIe"}  # anything else (SXM5, "80GB HBM3") is the SXM part


def device_chip(name: str) -> str | None:
    """The chip of PEAK_BF16_FLOPS a device is, from its full name as torch.cuda.get_device_name() gives it
    ("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA L40S", "Tesla T4", "NVIDIA A100-SXM4-80GB") or as the
    instance catalog spells it ("H100", "Trainium2"); None for any other. The model is the whole first word after
    the vendor, never a prefix, so an L40 is no L4 and an A10 no A10G; an H100's form factor is a word of its own
    (NVL, PCIe), and a variant this table does not know (an H200 NVL) is None rather than another part's peak."""
    words = [word for word in re.split(r"[\s_-]+", name.strip()) if word]
    if words and words[0].upper() in ("NVIDIA", "TESLA"):
        words = words[1:]
    if not words:
        return None
    model, rest = words[0].upper(), {word.upper() for word in words[1:]}
    if model == "H100":
        return next((chip for word, chip in _H100.items() if word in rest), "H100 SXM")
    if "NVL" in rest or ("PCIE" in rest and model != "A100"):
        return None  # a form factor with another peak than the table's part
    return _MODELS.get(model)


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


def chip_peak_flops(name: str) -> float | None:
    """The dense bf16 peak of a chip named `name` (a catalog chip or a CUDA device name), or None."""
    chip = device_chip(name)
    return PEAK_BF16_FLOPS[chip] if chip else None
