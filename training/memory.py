"""Peak accelerator memory of one training rank, from the run's shape: one formula for the compiler's fit rule
(`kubetrain synth`, `plan`, `cost`) and the runtime's own log line. Imports no torch.

The model is described by `Architecture`, a decoder-only transformer as the formula sees it; the kubetrain GPT
(`gpt_architecture`), a Hugging Face causal LM's config.json (`hf_architecture`) and a Megatron-LM command's flags
(kubetrain.jobs.megatron) all map into it. `Layout` says how the run spreads it: DDP, FSDP2 or Megatron-LM's
tensor/pipeline/data parallelism, the micro batch, the sequence length, bf16 or fp32, activation checkpointing.

`trainer_estimate` follows one training step of kubetrain's trainer (training/parallel.py, training/trainer.py)
through time and keeps its highest point, as PyTorch's memory tracker sees it: the sharded state that lives
throughout (weights, AdamW's two moments, gradients while they accumulate), the layers FSDP2 gathers, the tensors
autograd saves in the forward pass (all of them, or each layer's input under activation checkpointing), the loss's
logits, and the backward pass freeing each layer's activations as it adds that layer's gradients. bench/memory_estimate.py
and tests/test_memory.py compare it with `torch.distributed._tools.fsdp2_mem_tracker.FSDPMemTracker` (and
`mem_tracker.MemTracker` for DDP) on real CPU tensors. `megatron_estimate` is Megatron-LM's own accounting
(Megatron-LM megatron/training/theoretical_memory_usage.py; Korthikanti et al. 2022, "Reducing Activation
Recomputation in Large Transformer Models", table 2), which this repository cannot run.

On a GPU a rank also holds what no tensor shows: the CUDA context and kernels, NCCL's buffers, and the caching
allocator's fragmentation. They are the constants below; on the CPU none of them exists, so the comparisons use
`MemoryEstimate.tensors`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

GIB = 2**30

# -- what a GPU rank holds besides tensors --------------------------------------------------------------------
# The CUDA context with PyTorch's kernels loaded: 0.3-0.5 GiB on Ampere/Hopper with CUDA 12 (PyTorch's CUDA
# semantics notes, "Memory management": the context is not counted by memory_allocated; nvidia-smi shows it).
CUDA_CONTEXT_BYTES = 0.5 * GIB
# NCCL's communicator buffers: NCCL_BUFFSIZE (4 MiB default) per channel and peer, up to 32 channels with two
# directions (NCCL environment variables, NCCL_BUFFSIZE / NCCL_MAX_NCHANNELS), plus the proxy's: ~0.5 GiB for a
# communicator spanning nodes; each process group (data-, tensor-, pipeline-parallel) has its own.
NCCL_BYTES_PER_GROUP = 0.5 * GIB
# The caching allocator keeps freed blocks for reuse, and blocks of different sizes fragment its segments:
# reserved memory runs 5-15 % above allocated in long runs (PyTorch's CUDA semantics notes, "Optimizing memory
# usage with PYTORCH_CUDA_ALLOC_CONF": expandable_segments exists to cut this). 10 % of the tensors.
FRAGMENTATION = 0.10

FP32, BF16 = 4, 2
ADAM_STATE_BYTES = 8  # AdamW's exp_avg and exp_avg_sq, fp32 (torch.optim.AdamW keeps them in the param's dtype)


@dataclass(frozen=True)
class Architecture:
    """A decoder-only transformer as the memory formula sees it: sizes, not code."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int  # the MLP's hidden width
    vocab: int
    gated_mlp: bool = True  # SwiGLU (three matrices) or a plain two-matrix MLP
    tied_embeddings: bool = False
    head_dim: int | None = None  # default hidden / heads
    qkv_bias: bool = False

    @property
    def head_size(self) -> int:
        return self.head_dim or self.hidden // self.heads

    @property
    def q_width(self) -> int:
        return self.heads * self.head_size

    @property
    def kv_width(self) -> int:
        return self.kv_heads * self.head_size

    @property
    def layer_parameters(self) -> int:
        """One decoder layer: q, k, v, o projections, the MLP's matrices and two norm weights."""
        attention = self.hidden * (self.q_width + 2 * self.kv_width) + self.q_width * self.hidden
        bias = self.q_width + 2 * self.kv_width if self.qkv_bias else 0
        return attention + bias + (3 if self.gated_mlp else 2) * self.hidden * self.ffn + 2 * self.hidden

    @property
    def embedding_parameters(self) -> int:
        return self.vocab * self.hidden

    @property
    def outer_parameters(self) -> int:
        """Outside the layers: the embedding, the final norm and an untied output head (the root FSDP module)."""
        return self.embedding_parameters * (1 if self.tied_embeddings else 2) + self.hidden

    @property
    def parameters(self) -> int:
        return self.layers * self.layer_parameters + self.outer_parameters


def gpt_architecture(model: Any) -> Architecture:
    """The kubetrain GPT of training/model.py (a training.config.ModelConfig): multi-head attention, SwiGLU of
    training.flops.mlp_hidden, an untied head."""
    from training.flops import mlp_hidden

    return Architecture(layers=model.n_layers, hidden=model.dim, heads=model.n_heads, kv_heads=model.n_heads,
                        ffn=mlp_hidden(model), vocab=model.vocab_size)


# Model types whose MLP is two matrices (fc1, activation, fc2) rather than a gated SwiGLU.
_PLAIN_MLP_TYPES = {"gpt2", "gpt_neox", "gptj", "opt", "bloom", "falcon", "phi", "starcoder2", "gpt_bigcode"}
_QKV_BIAS_TYPES = {"qwen2", "qwen2_moe"}  # Qwen2 adds biases to q, k and v (no config key says so)


def hf_architecture(config: Mapping[str, Any]) -> Architecture:
    """A Hugging Face causal LM's config.json (Llama, Mistral, Qwen2/3, Gemma ... key names). Raises ValueError
    naming the keys that are missing or not positive integers."""
    required = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")
    bad = [key for key in required if not isinstance(config.get(key), int) or isinstance(config.get(key), bool)
           or config[key] <= 0]
    if bad:
        raise ValueError(f"the model config lacks positive integers {', '.join(bad)} (a decoder's config.json: "
                         f"{', '.join(required)})")
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads") or heads
    model_type = str(config.get("model_type", "llama"))
    return Architecture(layers=config["num_hidden_layers"], hidden=config["hidden_size"], heads=heads,
                        kv_heads=kv_heads, ffn=config["intermediate_size"], vocab=config["vocab_size"],
                        gated_mlp=model_type not in _PLAIN_MLP_TYPES,
                        # transformers' PretrainedConfig defaults tie_word_embeddings to True; LlamaConfig to False
                        tied_embeddings=bool(config.get("tie_word_embeddings", model_type != "llama")),
                        head_dim=config.get("head_dim") or None,
                        qkv_bias=bool(config.get("attention_bias", model_type in _QKV_BIAS_TYPES)))


@dataclass(frozen=True)
class Layout:
    """How a run spreads the model over ranks, and what one rank computes at a time."""

    strategy: Literal["ddp", "fsdp", "megatron"]
    data_parallel: int  # ranks that hold the same layers: FSDP shards over them, DDP replicates
    micro_batch: int
    seq_len: int
    precision: Literal["fp32", "bf16"] = "bf16"
    recompute: Literal["none", "selective", "full"] = "none"  # activation checkpointing: "full" saves layer inputs
    accumulates: bool = False  # gradient accumulation: gradients live through the next micro-batch's forward
    # FSDP2 under accumulation: reduce-scatter every micro-batch into the sharded gradients, or keep the whole
    # model's gradients unsharded until the last one (ACCUMULATION_MODES)
    accumulation: Literal["sharded", "unsharded"] = "sharded"
    tensor: int = 1  # Megatron-LM
    pipeline: int = 1
    distributed_optimizer: bool = False  # Megatron-LM's --use-distributed-optimizer (ZeRO-1 over data_parallel)

    @property
    def tokens(self) -> int:
        return self.micro_batch * self.seq_len


@dataclass(frozen=True)
class MemoryEstimate:
    """Peak bytes on one accelerator, by category. `parameters`, `gradients` and `optimizer` are what the
    strategy leaves on the rank (FSDP2's gathered layers count as parameters, its communication buffers as
    gradients); `activations` is everything else the step allocates at its peak: saved activations, the loss's
    logits and the backward's temporaries."""

    parameters: float
    gradients: float
    optimizer: float
    activations: float
    cuda_context: float = CUDA_CONTEXT_BYTES
    nccl: float = 0.0
    fragmentation: float = 0.0

    @property
    def model_state(self) -> float:
        return self.parameters + self.gradients + self.optimizer

    @property
    def tensors(self) -> float:
        """What PyTorch's memory tracker counts: every tensor, no framework overhead."""
        return self.model_state + self.activations

    @property
    def total(self) -> float:
        return self.tensors + self.cuda_context + self.nccl + self.fragmentation

    def gib(self) -> dict[str, float]:
        """Each category and the total in GiB, rounded to 0.01 (plots, --json, annotations)."""
        parts = {"parameters": self.parameters, "gradients": self.gradients, "optimizer": self.optimizer,
                 "activations": self.activations, "cuda_context": self.cuda_context, "nccl": self.nccl,
                 "fragmentation": self.fragmentation, "total": self.total}
        return {name: round(value / GIB, 2) for name, value in parts.items()}

    def breakdown(self) -> str:
        """'parameters 8.0 + gradients 16.0 + ... = 67.1 GiB', the categories a user can change."""
        g = self.gib()
        overhead = g["cuda_context"] + g["nccl"] + g["fragmentation"]
        return (f"parameters {g['parameters']:.1f} + gradients {g['gradients']:.1f} + optimizer "
                f"{g['optimizer']:.1f} + activations {g['activations']:.1f} + CUDA/NCCL/allocator {overhead:.1f} "
                f"= {self.total / GIB:.1f} GiB")


def with_overheads(parameters: float, gradients: float, optimizer: float, activations: float,
                   process_groups: int, gpu: bool = True) -> MemoryEstimate:
    tensors = parameters + gradients + optimizer + activations
    if not gpu:
        return MemoryEstimate(parameters, gradients, optimizer, activations, cuda_context=0.0)
    return MemoryEstimate(parameters, gradients, optimizer, activations, CUDA_CONTEXT_BYTES,
                          NCCL_BYTES_PER_GROUP * process_groups, FRAGMENTATION * tensors)


# -- kubetrain's trainer (DDP, FSDP2) ----------------------------------------------------------------------------

def layer_activation_bytes(arch: Architecture, layout: Layout) -> float:
    """Bytes one decoder layer saves for its backward pass, per token, without recomputation: what autograd keeps
    of the two RMSNorms (input, normalized input and output), the attention (q, k, v, the rotated q and k, the
    attention output, the output projection's input; flash attention keeps no seq x seq matrix) and the MLP
    (gate, its activation, up and their product for SwiGLU; fc1 and its activation otherwise). In bf16 the norms'
    statistics and rotary's products stay in fp32: a third of the norm and rotary tensors."""
    h, kv, f = arch.hidden, arch.kv_width, arch.ffn
    norms = 2 * 2.5 * h
    attention = 4 * arch.q_width + 3 * kv
    mlp = (4 if arch.gated_mlp else 2) * f
    if layout.precision == "fp32":
        return FP32 * (norms + attention + mlp)
    # bf16: FSDP2 computes in bf16 (its mixed-precision policy casts the weights); DDP under autocast keeps the
    # residual stream and the norms in fp32.
    fp32_part = norms if layout.strategy == "ddp" else norms / 3
    return FP32 * fp32_part + BF16 * (norms - fp32_part + attention + mlp)


def _logit_bytes(arch: Architecture) -> tuple[float, float]:
    """(kept through the backward's start, transient at it), per token. The trainer takes cross-entropy of
    `logits.float()` (training/trainer.py): autograd keeps only log-softmax's fp32 output, since the cast's
    backward needs nothing saved and log-softmax's needs only its output; the logits and, in bf16, their fp32
    copy are freed once the loss is computed. The backward adds two fp32 gradients of the same size (the loss's
    and log-softmax's)."""
    v = arch.vocab
    return FP32 * v, 2 * FP32 * v


def trainer_estimate(arch: Architecture, layout: Layout, gpu: bool = True) -> MemoryEstimate:
    """Peak memory of one rank of kubetrain's trainer (training/parallel.py): DDP replicates fp32 weights, fp32
    gradients and AdamW's fp32 moments (plus its fp32 gradient buckets with more than one rank); FSDP2 shards all
    three over the data-parallel ranks and gathers one layer at a time in the compute dtype, keeping the root
    module (embedding, final norm, head) and the last layer gathered between forward and backward. Activations as
    `layer_activation_bytes`, or with checkpointing each layer's input plus one layer recomputed."""
    n, world = arch.parameters, layout.data_parallel
    fsdp = layout.strategy == "fsdp"
    shard = world if fsdp else 1
    compute = BF16 if layout.precision == "bf16" else FP32
    weights = FP32 * n / shard
    optimizer = ADAM_STATE_BYTES * n / shard
    grads_full = FP32 * n / shard
    tokens = layout.tokens
    per_layer = layer_activation_bytes(arch, layout) * tokens
    kept, transient = (b * tokens for b in _logit_bytes(arch))
    layer_p, outer_p = arch.layer_parameters, arch.outer_parameters

    # Lives through the whole step.
    gathered = compute * (outer_p + layer_p) if fsdp else 0.0  # root module + the layer being computed
    buckets = FP32 * n if (not fsdp and world > 1) else 0.0  # DDP's reducer buckets (gradient_as_bucket_view off)
    # Gradient accumulation: the previous micro-batches' gradients, sharded (reduce-scattered every micro-batch)
    # or, FSDP2 without gradient sync, the whole model's in fp32 on every rank.
    unsharded = fsdp and layout.accumulation == "unsharded"
    carried = (FP32 * n if unsharded else grads_full) if layout.accumulates else 0.0
    residual = (FP32 if layout.strategy == "ddp" or layout.precision == "fp32" else BF16) * arch.hidden * tokens

    full = layout.recompute == "none"
    saved = arch.layers * (per_layer if full else residual)
    # Backward, layer by layer from the last: a checkpointed layer first recomputes its activations; each layer
    # then trades its activations for its gradients (and their temporaries). Each moment is (gradients, other).
    grad_temp = compute * (2 * arch.ffn + 2 * arch.hidden) * tokens  # grads of the MLP's widest tensors
    reduce_buffer = FP32 * layer_p if fsdp else 0.0  # FSDP2's unsharded fp32 gradient before reduce-scatter
    moments = [(0.0, saved + kept + transient)]  # the loss's backward starts
    # Then the head's gradients: unsharded (in the compute dtype under FSDP2) until the root's reduce-scatter.
    grads = (compute if fsdp else FP32) * outer_p
    live = saved
    for _ in range(arch.layers):
        recomputed = 0.0 if full else per_layer
        moments.append((grads, live + recomputed + grad_temp + reduce_buffer))
        live -= per_layer if full else residual
        grads += FP32 * layer_p / shard
    if layout.accumulates:  # every gradient exists from the first micro-batch on
        moments = [(carried, other) for _, other in moments]
    moments.append((max(grads_full, carried), 0.0))  # the optimizer step: every gradient, AdamW in place (fused)
    gradients, activations = max(moments, key=sum)
    gradients += buckets
    groups = 1 if world > 1 else 0
    return with_overheads(weights + gathered, gradients, optimizer, activations, groups, gpu)


# -- Megatron-LM ----------------------------------------------------------------------------------------------

def megatron_estimate(arch: Architecture, layout: Layout, gpu: bool = True) -> MemoryEstimate:
    """Megatron-LM's accounting (megatron/training/theoretical_memory_usage.py): the most loaded shard holds
    1/pipeline of the layers and the embedding (and an untied output layer without pipelining), divided by
    the tensor-parallel size. Mixed precision keeps bf16 weights (2 bytes), fp32 main gradients (4), fp32 master
    weights (4) and Adam's moments (8): 18 bytes per parameter, or 6 + 12/data-parallel with the distributed
    optimizer; fp32 training keeps 4 + 4 + 8. Activations per layer (Korthikanti et al. 2022, table 2, sequence
    parallel): s·b·h·(18 + 4·ffn/h) bytes / tensor (SwiGLU's fc1 is twice as wide: 6·ffn/h), the pipeline's first
    stage holding `pipeline` micro-batches in flight; full recomputation keeps each layer's 2·s·b·h input plus one
    layer recomputed."""
    t, p, d = layout.tensor, layout.pipeline, layout.data_parallel
    transformer = arch.layers * arch.layer_parameters
    embedding = arch.embedding_parameters
    shard = (transformer / p + embedding + (embedding if not arch.tied_embeddings and p == 1 else 0)) / t
    if layout.precision == "bf16":
        weights, grads = 2 * shard, 4 * shard
        master_and_adam = (4 + ADAM_STATE_BYTES) * shard / (d if layout.distributed_optimizer else 1)
    else:
        weights, grads = 4 * shard, 4 * shard
        master_and_adam = ADAM_STATE_BYTES * shard / (d if layout.distributed_optimizer else 1)
    s, b, h = layout.seq_len, layout.micro_batch, arch.hidden
    per_layer = s * b * h * (18 + (6 if arch.gated_mlp else 4) * arch.ffn / h) / t
    layers_on_stage = math.ceil(arch.layers / p)
    in_flight = p  # 1F1B: the first stage holds `pipeline` micro-batches' activations
    if layout.recompute == "full":
        activations = (2 * s * b * h / t) * layers_on_stage * in_flight + per_layer
    else:  # none or selective: with flash attention no seq x seq matrix is kept either way
        activations = per_layer * layers_on_stage * in_flight
    activations += 8 * s * b * p + s * b * h * p  # embedding input and its dropout mask, per micro-batch in flight
    if p == 1:
        activations += 4 * s * b * h * (1 + arch.vocab / h) / t  # the output layer's input and the loss's logits
    groups = sum(1 for size in (t, p, d) if size > 1)
    return with_overheads(weights, grads, master_and_adam, activations, groups, gpu)


def estimate(arch: Architecture, layout: Layout, gpu: bool = True) -> MemoryEstimate:
    return megatron_estimate(arch, layout, gpu) if layout.strategy == "megatron" else \
        trainer_estimate(arch, layout, gpu)


# strategy.accumulated_gradients (training/config.py): how FSDP2 holds the gradients while micro-batches accumulate.
ACCUMULATION_MODES = ("auto", "sharded", "unsharded")
# `auto` keeps them unsharded (one reduce-scatter a step instead of one a micro-batch) only when the whole rank
# then stays this far below its accelerator: the band in which KT241 warns, the formula's own error.
UNSHARDED_HEADROOM = 0.10


def accumulation_choice(arch: Architecture, layout: Layout, setting: str, capacity: float | None,
                        gpu: bool = True) -> Literal["sharded", "unsharded"]:
    """What the trainer does for `strategy.accumulated_gradients: setting` on one accelerator of `capacity` bytes
    (None: unknown, a CPU): an explicit setting as it says; `auto` unsharded (faster: no reduce-scatter until the
    last micro-batch) only under FSDP with accumulation, on a known accelerator, when the estimate with the
    unsharded gradients leaves UNSHARDED_HEADROOM of it free; otherwise sharded (memory bounded by the shards).
    The compiler (writing the job's run config) and the trainer (meeting `auto` in a config of its own) both
    decide here."""
    if setting != "auto":
        return "unsharded" if setting == "unsharded" else "sharded"
    if layout.strategy != "fsdp" or not layout.accumulates or not capacity:
        return "sharded"
    unsharded = trainer_estimate(arch, replace(layout, accumulation="unsharded"), gpu)
    return "unsharded" if unsharded.total <= (1 - UNSHARDED_HEADROOM) * capacity else "sharded"


def run_layout(run: Any, world_size: int, capacity: float | None = None, gpu: bool = True) -> Layout:
    """The layout of a kubetrain run config (training.config.RunConfig) at `world_size` ranks, its gradient
    accumulation as `accumulation_choice` resolves it on an accelerator of `capacity` bytes."""
    strategy = run.strategy
    layout = Layout(strategy=strategy.name, data_parallel=world_size, micro_batch=run.batch.micro_size,
                    seq_len=run.data.seq_len, precision=run.precision,
                    recompute="full" if strategy.activation_checkpointing else "none",
                    accumulates=run.grad_accum_steps(world_size) > 1)
    mode = accumulation_choice(model_architecture(run.model), layout, strategy.accumulated_gradients, capacity, gpu)
    return replace(layout, accumulation=mode)


def run_accumulation(run: Any, world_size: int, capacity: float | None = None,
                     gpu: bool = True) -> Literal["sharded", "unsharded"]:
    """How the run holds its gradients while micro-batches accumulate, at `world_size` ranks on accelerators of
    `capacity` bytes (`accumulation_choice`)."""
    return run_layout(run, world_size, capacity, gpu).accumulation


def model_architecture(model: Any) -> Architecture:
    """The architecture of a run config's model section: the kubetrain GPT, or a Hugging Face causal LM whose
    shape the run config states (training.config.HFModelConfig; its other transformers fields in `config`)."""
    if getattr(model, "kind", "gpt") != "hf":
        return gpt_architecture(model)
    shape = {"model_type": model.model_type, "hidden_size": model.hidden_size,
             "num_hidden_layers": model.num_hidden_layers, "num_attention_heads": model.num_attention_heads,
             "num_key_value_heads": model.kv_heads, "intermediate_size": model.intermediate_size,
             "vocab_size": model.vocab_size, "tie_word_embeddings": model.tie_word_embeddings}
    return hf_architecture({**model.config, **shape})


def run_estimate(run: Any, world_size: int, gpu: bool = True, capacity: float | None = None) -> MemoryEstimate:
    """Peak memory per accelerator of a kubetrain run config (its GPT or Hugging Face model) at `world_size`
    ranks, holding accumulated gradients as it would on accelerators of `capacity` bytes."""
    return trainer_estimate(model_architecture(run.model), run_layout(run, world_size, capacity, gpu), gpu)


def state_estimate(arch: Architecture, layout: Layout, gpu: bool = True) -> MemoryEstimate:
    """What no micro batch, sequence length or activation checkpointing changes: weights, every gradient and
    AdamW's moments as the layout holds them (the optimizer step's moment), with the framework's overheads."""
    return estimate(arch, replace(layout, micro_batch=0), gpu)
