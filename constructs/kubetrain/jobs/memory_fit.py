"""Will the job's model fit its GPUs: the peak memory of one rank (training/memory.py) against one accelerator of
the job's instance type, at compile time.

A trainer job's run config says everything (its GPT, strategy, precision, micro batch, sequence length,
activation checkpointing). A command job says it with `Command(model=CommandModel(...))`, or a Megatron-LM command
with its own flags (--num-layers, --tensor-model-parallel-size, --use-distributed-optimizer, --bf16, ...), or its
cost estimate's model. An elastic job is judged at its fewest nodes: FSDP2 and the distributed optimizer shard
least there. The estimate is written onto the run object (`kubetrain.dev/memory`) for `kubetrain plan` and
`kubetrain cost`, which read dist/ alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kubetrain.jobs.command_flags import megatron_flags
from kubetrain.jobs.job_props import CommandModel
from kubetrain.jobs.spec import JobSpec
from kubetrain.model.memory_annotation import MEMORY_ANNOTATION
from kubetrain.rules.registry import register
from kubetrain_runtime.problems import Problem
from training.memory import GIB, Architecture, Layout, MemoryEstimate, estimate, gpt_architecture, run_estimate

WARN_WITHIN = 0.10  # an estimate within 10 % of the accelerator's memory warns: the formula's own error is ~10 %

_SOURCE = ("training/memory.py; bench/memory_estimate.py; https://github.com/NVIDIA/Megatron-LM/blob/main/"
           "megatron/training/theoretical_memory_usage.py")
DOES_NOT_FIT = register(
    "KT240", "error", "the model does not fit in the accelerator's memory",
    rationale="A job whose rank needs more memory than one accelerator has is admitted, starts every node and dies "
              "of CUDA out-of-memory in its first step. Weights, gradients and AdamW's moments (sharded by FSDP or "
              "Megatron's distributed optimizer), the activations of one micro-batch and the framework's own "
              "memory (CUDA context, NCCL buffers, allocator fragmentation) must fit together; training/memory.py "
              "estimates them, measured against PyTorch's memory tracker by bench/memory_estimate.py.",
    fix="lower the micro batch, turn on activation checkpointing, shard with FSDP (or Megatron's distributed "
        "optimizer, tensor or pipeline parallelism), or use more nodes or an instance type with more memory",
    source=_SOURCE)
NEARLY_FULL = register(
    "KT241", "warning", "the model fills the accelerator's memory to within 10 %",
    rationale="The estimate is within about 10 % of what PyTorch measures; a rank planned within 10 % of its "
              "accelerator's memory may still run out (a longer sequence from the data, a fragmented allocator).",
    fix="leave headroom: a smaller micro batch, activation checkpointing, FSDP, or more nodes",
    source=_SOURCE)
FLAGS_DISAGREE = register(
    "KT165", "error", "the command job's declared model contradicts its Megatron-LM flags",
    rationale="The command's flags are what runs; a declared model (Command.model) that says otherwise makes the "
              "memory check, and the cost, judge another model.",
    fix="make Command.model say what the flags say (or drop the declaration: the flags are read)",
    source="https://github.com/NVIDIA/Megatron-LM/blob/main/megatron/training/arguments.py")


@dataclass(frozen=True)
class JobMemory:
    """One rank's estimate against one accelerator."""

    estimate: MemoryEstimate
    capacity: float  # bytes of one accelerator
    accelerator: str
    basis: str  # what was read: "run config at 16 ranks", "Megatron-LM flags (TP=2, PP=1, DP=8)"

    @property
    def share(self) -> float:
        return self.estimate.total / self.capacity

    def annotation(self) -> str:
        return json.dumps({"accelerator": self.accelerator, "capacity_gib": round(self.capacity / GIB, 2),
                           "basis": self.basis, "per_rank_gib": self.estimate.gib()}, sort_keys=True,
                          separators=(",", ":"))


def job_memory(job: JobSpec) -> JobMemory | None:
    """The job's estimate against its instance type's accelerator; None when there is nothing to judge: no
    instance type, no accelerators, or a command job that says nothing of its model."""
    instance = job.instance
    if instance is None or not instance.accelerator_memory_gib or not job.resources.accelerators:
        return None
    ranks = min(job.node_range) * job.props.procs_per_node
    gpu = job.uses_gpus
    if job.trainer is not None:
        found, basis = run_estimate(job.trainer.run, ranks, gpu), f"run config at {ranks} ranks"
    elif job.command is not None:
        shaped = command_shape(job, ranks)
        if shaped is None:
            return None
        arch, layout, basis = shaped
        found = estimate(arch, layout, gpu)
    else:
        return None
    return JobMemory(found, instance.accelerator_memory_gib * GIB, instance.accelerator or instance.name, basis)


def _declared(job: JobSpec) -> CommandModel | None:
    """Command.model, else the cost estimate's GPT shape (training/model.py's: SwiGLU, untied, bf16) with the
    estimate's sequence length."""
    if job.command.model is not None:
        return job.command.model
    estimate_ = job.props.estimate
    if estimate_ is None or estimate_.model is None or estimate_.seq_len is None:
        return None
    arch = gpt_architecture(estimate_.model)
    return CommandModel(layers=arch.layers, hidden=arch.hidden, heads=arch.heads, ffn=arch.ffn, vocab=arch.vocab,
                        seq_len=estimate_.seq_len)


def command_shape(job: JobSpec, ranks: int) -> tuple[Architecture, Layout, str] | None:
    """A command job's architecture and layout. A Megatron-LM command's flags are what runs: they win, switches
    included (--bf16 absent is fp32); the declaration fills in what they leave out."""
    flags = megatron_flags(job.command.command)
    declared = _declared(job)
    reads_flags = {"layers", "hidden", "heads"} <= flags.keys()
    if declared is None and not (reads_flags and "seq_len" in flags):
        return None
    megatron = declared is None or declared.strategy == "megatron"

    def value(field: str, default: Any = None) -> Any:
        if field in flags:
            return int(flags[field])
        return getattr(declared, field) if declared is not None and getattr(declared, field) is not None else default

    parallel = job.parallelism
    size = {name: int(flags.get(name) or (getattr(parallel, name) if parallel else 1) or 1)
            for name in ("tensor", "pipeline", "context")}
    micro = int(flags.get("micro_batch") or (parallel.micro_batch if parallel and parallel.micro_batch else 1))
    layers, hidden, heads, seq_len = value("layers"), value("hidden"), value("heads"), value("seq_len")
    if reads_flags:
        gated = bool(flags.get("swiglu"))
        tied = not flags.get("untie-embeddings-and-output-weights")
        kv_heads = int(flags.get("kv_heads") or heads) if flags.get("group-query-attention") else heads
        precision = "bf16" if flags.get("bf16") or flags.get("fp16") else "fp32"
        recompute = str(flags.get("recompute", "none"))
        distributed = bool(flags.get("use-distributed-optimizer"))
    else:
        gated, tied, kv_heads = declared.gated_mlp, declared.tied_embeddings, declared.kv_heads or heads
        precision, recompute, distributed = declared.precision, declared.recompute, declared.distributed_optimizer
    # Megatron's default MLP width: 4 x hidden, or for SwiGLU 2/3 of it rounded down to a multiple of 64. A
    # Megatron command takes that default, not the declaration's; a declaration fills in only what has none.
    megatron_ffn = int(4 * hidden * 2 / 3) // 64 * 64 if gated else 4 * hidden
    ffn = int(flags.get("ffn") or megatron_ffn) if reads_flags else value("ffn")
    vocab = value("vocab", 0)  # unknown: the embedding is not counted (a lower bound)
    model_parallel = size["tensor"] * size["pipeline"] * size["context"] if megatron else 1
    data_parallel = max(1, ranks // model_parallel)
    arch = Architecture(layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads, ffn=ffn, vocab=vocab,
                        gated_mlp=gated, tied_embeddings=tied,
                        head_dim=int(flags["kv_channels"]) if flags.get("kv_channels") else None)
    strategy = "megatron" if megatron else declared.strategy
    layout = Layout(strategy=strategy, data_parallel=data_parallel, micro_batch=micro,
                    seq_len=seq_len // size["context"] if megatron else seq_len, precision=precision,
                    recompute=recompute if megatron else ("none" if recompute == "none" else "full"),
                    tensor=size["tensor"] if megatron else 1, pipeline=size["pipeline"] if megatron else 1,
                    distributed_optimizer=distributed)
    source = ("Megatron-LM flags" if reads_flags else "") + (
        (" and " if reads_flags else "") + ("the declared model" if job.command.model is not None
                                            else "the estimate's model") if declared is not None else "")
    shape = (f"TP={size['tensor']}, PP={size['pipeline']}, DP={data_parallel}" if megatron
             else f"{strategy} over {ranks} ranks")
    unknown = "; vocabulary unknown, embedding not counted" if not vocab else ""
    return arch, layout, f"{source}, {shape}, micro batch {micro}{unknown}"


def _disagreements(job: JobSpec) -> Iterator[str]:
    declared, flags = job.command.model, megatron_flags(job.command.command)
    for field in ("layers", "hidden", "heads", "ffn", "seq_len", "vocab"):
        if field in flags and flags[field] != getattr(declared, field):
            yield f"{field} {getattr(declared, field)} (the flags say {flags[field]})"
    if "kv_heads" in flags and flags.get("group-query-attention") and flags["kv_heads"] != (declared.kv_heads or
                                                                                            declared.heads):
        yield f"kv_heads {declared.kv_heads or declared.heads} (--num-query-groups says {flags['kv_heads']})"
    if flags and declared.strategy == "megatron":
        checks = {"distributed_optimizer": bool(flags.get("use-distributed-optimizer")),
                  "precision": "bf16" if flags.get("bf16") or flags.get("fp16") else "fp32"}
        for field, said in checks.items():
            if "layers" in flags and getattr(declared, field) != said:
                yield f"{field} {getattr(declared, field)} (the flags say {said})"


def memory_problems(job: JobSpec) -> list[Problem]:
    """KT165 (a declared model against the command's flags), KT240 and KT241 (the estimate against the GPU)."""
    problems = []
    if job.command is not None and job.command.model is not None:
        problems += [Problem(FLAGS_DISAGREE.code, "workload.model", f"Command.model says {said}", FLAGS_DISAGREE.fix)
                     for said in _disagreements(job)]
    memory = job_memory(job)
    if memory is None:
        return problems
    field = _field(job)
    found = memory.estimate
    over = f"{found.total / GIB:.1f} GiB per {memory.accelerator} against its {memory.capacity / GIB:g} GiB"
    if memory.share > 1:
        problems.append(Problem(DOES_NOT_FIT.code, field, f"the model does not fit: {over} "
                                f"({found.breakdown()}; {memory.basis})", _advice(job)))
    elif memory.share > 1 - WARN_WITHIN:
        problems.append(Problem(NEARLY_FULL.code, field, f"the model fills {memory.share:.0%} of the accelerator: "
                                f"{over} ({found.breakdown()}; {memory.basis})", _advice(job)))
    return problems


def _field(job: JobSpec) -> str:
    if job.trainer is not None:
        return "workload.run"
    return "workload.model" if job.command.model is not None else "workload.command"


def _advice(job: JobSpec) -> str:
    """What to change, in the job's own terms: only what it does not do already."""
    steps = []
    if job.trainer is not None:
        run = job.trainer.run
        if run.batch.micro_size > 1:
            steps.append(f"lower batch.micro_size ({run.batch.micro_size})")
        if not run.strategy.activation_checkpointing:
            steps.append("set strategy.activation_checkpointing: true")
        if run.strategy.name == "ddp":
            steps.append("shard with strategy.name: fsdp")
        else:
            steps.append("add nodes (FSDP shards the state over more ranks)")
        if run.precision == "fp32":
            steps.append("train in precision: bf16")
    else:
        steps += ["lower the micro batch", "recompute activations (--recompute-granularity full)",
                  "shard the optimizer (--use-distributed-optimizer), raise the tensor or pipeline size",
                  "or add nodes"]
    return "; ".join(steps) + "; or use an instance type with more accelerator memory"


def memory_annotations(job: JobSpec) -> dict[str, str]:
    memory = job_memory(job)
    return {MEMORY_ANNOTATION: memory.annotation()} if memory is not None else {}
