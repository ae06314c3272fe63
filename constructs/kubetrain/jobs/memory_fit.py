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
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from kubetrain.jobs.command_flags import megatron_flags
from kubetrain.jobs.job_props import CommandModel
from kubetrain.jobs.spec import JobSpec
from kubetrain.model.memory_annotation import MEMORY_ANNOTATION
from kubetrain.rules.registry import register
from kubetrain_runtime.problems import Problem
from training.config import RunConfig
from training.memory import (
    GIB,
    Architecture,
    Layout,
    MemoryEstimate,
    estimate,
    gpt_architecture,
    model_architecture,
    run_estimate,
    run_layout,
    state_estimate,
)

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
    capacity = job.accelerator_bytes
    if capacity is None:
        return None
    instance = job.instance
    ranks = min(job.node_range) * job.props.procs_per_node
    gpu = job.uses_gpus
    if job.trainer is not None:
        found, basis = run_estimate(job.run, ranks, gpu, capacity), f"run config at {ranks} ranks{_held(job, ranks)}"
    elif job.command is not None:
        shaped = command_shape(job, ranks)
        if shaped is None:
            return None
        arch, layout, basis = shaped
        found = estimate(arch, layout, gpu)
    else:
        return None
    return JobMemory(found, capacity, instance.accelerator or instance.name, basis)


def _held(job: JobSpec, ranks: int) -> str:
    """How an FSDP run holds its gradients while micro-batches accumulate, for the estimate's basis."""
    run = job.run
    if run.strategy.name != "fsdp" or run.grad_accum_steps(ranks) <= 1:
        return ""
    return f", {run.grad_accum_steps(ranks)} micro-batches accumulated {run.strategy.accumulated_gradients}"


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
                                f"({found.breakdown()}; {memory.basis})", _advice(job, memory)))
    elif memory.share > 1 - WARN_WITHIN:
        problems.append(Problem(NEARLY_FULL.code, field, f"the model fills {memory.share:.0%} of the accelerator: "
                                f"{over} ({found.breakdown()}; {memory.basis})",
                                _advice(job, memory)))
    return problems


def _field(job: JobSpec) -> str:
    if job.trainer is not None:
        return "workload.run"
    return "workload.model" if job.command.model is not None else "workload.command"


# Node counts the advice searches for one at which the job fits: beyond this many it names an instance type.
MAX_NODES_ADVISED = 1024


@dataclass(frozen=True)
class Remedy:
    """One change to the job, in its own terms, and the estimate with it."""

    change: str
    found: MemoryEstimate

    def __str__(self) -> str:
        return f"{self.change} ({self.found.total / GIB:.1f} GiB)"


def _advice(job: JobSpec, memory: JobMemory) -> str:
    """What to change so that the job fits with WARN_WITHIN to spare (neither KT240 nor KT241): only changes the
    same estimate says would get it there, each with its figure; the single changes that do, else all of them
    together (with the fewest nodes that then fit); and always the accelerator memory that would hold the job as
    it is."""
    budget = (1 - WARN_WITHIN) * memory.capacity
    remedies, together, state = (_trainer_remedies if job.trainer is not None else _command_remedies)(job, budget)
    steps = [str(remedy) for remedy in remedies]
    if not steps and together is not None:
        steps.append(f"together: {together}")
    if state is not None and state.total > budget:
        steps.append(f"activation checkpointing cannot help: the state alone is {state.total / GIB:.1f} GiB")
    needed = math.ceil(memory.estimate.total / (budget / memory.capacity) / GIB)
    steps.append(f"or use an instance type with at least {needed} GiB per accelerator")
    return "; ".join(steps)


def _fewest_nodes(job: JobSpec, fits: Callable[[int], Remedy | None]) -> Remedy | None:
    """The first node count above the job's (fewest) at which `fits` finds a remedy."""
    return next((found for nodes in range(job.node_range.start + 1, MAX_NODES_ADVISED + 1)
                 if (found := fits(nodes)) is not None), None)


def _trainer_remedies(job: JobSpec, budget: float) -> tuple[list[Remedy], Remedy | None, MemoryEstimate | None]:
    """The trainer's single changes that fit (accumulated gradients sharded, a smaller micro batch, activation
    checkpointing, FSDP, bf16, more nodes), all of them together when none does alone, and the state alone when
    checkpointing is off."""
    run, procs, capacity, gpu = job.trainer.run, job.props.procs_per_node, job.accelerator_bytes, job.uses_gpus
    nodes_field = "elastic.min_nodes" if job.props.elastic is not None else "nodes"

    def tried(change: str, changed: RunConfig, nodes: int = job.node_range.start) -> Remedy | None:
        found = run_estimate(changed, nodes * procs, gpu, capacity)
        return Remedy(change, found) if found.total <= budget else None

    def with_(changed: RunConfig, strategy: dict | None = None, batch: dict | None = None, **fields) -> RunConfig:
        return changed.model_copy(update={
            **fields, **({"strategy": changed.strategy.model_copy(update=strategy)} if strategy else {}),
            **({"batch": changed.batch.model_copy(update=batch)} if batch else {})})

    def more_nodes(changed: RunConfig, said: str = "") -> Remedy | None:
        if changed.strategy.name != "fsdp":  # DDP replicates the state: more ranks never shrink it
            return None

        def at(nodes: int, keep_batch: bool) -> Remedy | None:
            per_step = changed.batch.micro_size * nodes * procs
            if keep_batch:
                if changed.batch.global_size % per_step:
                    return None
                return tried(f"{said}{nodes_field}: {nodes}", changed, nodes)
            size = max(per_step, math.ceil(changed.batch.global_size / per_step) * per_step)
            return tried(f"{said}{nodes_field}: {nodes} and batch.global_size: {size}",
                         with_(changed, batch={"global_size": size}), nodes)
        # A node count the global batch divides, else the fewest nodes with the next global batch they divide.
        return _fewest_nodes(job, lambda n: at(n, True)) or _fewest_nodes(job, lambda n: at(n, False))

    ranks = job.node_range.start * procs
    per_rank = run.batch.global_size // ranks  # sequences a rank runs per step (KT201 keeps it whole)
    fsdp, checkpointed = run.strategy.name == "fsdp", run.strategy.activation_checkpointing
    found = [
        fsdp and run.strategy.accumulated_gradients == "unsharded" and run.grad_accum_steps(ranks) > 1 and tried(
            "set strategy.accumulated_gradients: sharded", with_(run, strategy={"accumulated_gradients": "sharded"})),
        next((remedy for micro in range(run.batch.micro_size - 1, 0, -1) if per_rank % micro == 0
              and (remedy := tried(f"lower batch.micro_size to {micro}", with_(run, batch={"micro_size": micro})))),
             None),
        not checkpointed and tried("set strategy.activation_checkpointing: true",
                                   with_(run, strategy={"activation_checkpointing": True})),
        not fsdp and tried("shard with strategy.name: fsdp",
                           with_(run, strategy={"name": "fsdp", "accumulated_gradients": "auto"})),
        run.precision == "fp32" and tried("train in precision: bf16", with_(run, precision="bf16")),
        more_nodes(run, "set "),
    ]
    remedies = [remedy for remedy in found if remedy]
    together = None
    if not remedies:
        best = with_(run, strategy={"name": "fsdp", "activation_checkpointing": True,
                                    "accumulated_gradients": "sharded" if fsdp else "auto"},
                     batch={"micro_size": 1}, precision="bf16")
        said = ", ".join(change for change, differs in (
            ("strategy.name: fsdp", not fsdp), ("strategy.activation_checkpointing: true", not checkpointed),
            ("strategy.accumulated_gradients: sharded", run.strategy.accumulated_gradients == "unsharded"),
            ("batch.micro_size: 1", run.batch.micro_size > 1), ("precision: bf16", run.precision == "fp32"))
            if differs)
        together = (tried(f"set {said}", best) if said else None) or more_nodes(best, f"set {said}, " if said
                                                                                  else "set ")
    state = None
    if not checkpointed:
        state = state_estimate(model_architecture(run.model), run_layout(job.run, ranks, capacity, gpu), gpu)
    return remedies, together, state


def _command_remedies(job: JobSpec, budget: float) -> tuple[list[Remedy], Remedy | None, MemoryEstimate | None]:
    """A command job's single changes that fit, in its flags' terms (or its declared model's): a smaller micro
    batch, full recomputation, the distributed optimizer or FSDP, a larger tensor-parallel size, more nodes."""
    arch, layout, _ = command_shape(job, min(job.node_range) * job.props.procs_per_node)
    gpu, flags = job.uses_gpus, bool(megatron_flags(job.command.command))
    megatron, nodes = layout.strategy == "megatron", job.node_range.start

    def tried(change: str, changed: Layout) -> Remedy | None:
        found = estimate(arch, changed, gpu)
        return Remedy(change, found) if found.total <= budget else None

    def say(flag: str, declared: str) -> str:
        return flag if flags else declared

    def more_nodes(changed: Layout, said: str = "") -> Remedy | None:
        if not (changed.strategy == "fsdp" or changed.distributed_optimizer):  # the state does not shrink
            return None
        return _fewest_nodes(job, lambda n: tried(f"{said}{n} nodes",
                                                  replace(changed, data_parallel=changed.data_parallel * n // nodes)))

    sharded = replace(layout, strategy="fsdp") if layout.strategy == "ddp" else replace(layout,
                                                                                        distributed_optimizer=True)
    tensor_sizes = [t for t in (2, 4, 8) if megatron and t > layout.tensor and job.props.procs_per_node % t == 0
                    and layout.data_parallel * layout.tensor % t == 0]
    found = [
        next((remedy for micro in range(layout.micro_batch - 1, 0, -1) if (remedy := tried(
            f"lower the micro batch to {micro}" + (f" (--micro-batch-size {micro})" if flags else ""),
            replace(layout, micro_batch=micro)))), None),
        layout.recompute != "full" and tried(say("recompute activations (--recompute-granularity full)",
                                                 "recompute activations (CommandModel.recompute 'full')"),
                                             replace(layout, recompute="full")),
        layout.strategy != "fsdp" and not layout.distributed_optimizer and tried(
            say("shard the optimizer (--use-distributed-optimizer)", "shard the optimizer (distributed_optimizer=True)"
                if megatron else "shard with FSDP"), sharded),
        next((remedy for t in tensor_sizes if (remedy := tried(
            f"tensor-parallel size {t} (--tensor-model-parallel-size {t})",
            replace(layout, tensor=t, data_parallel=layout.data_parallel * layout.tensor // t)))), None),
        more_nodes(layout, "use "),
    ]
    remedies = [remedy for remedy in found if remedy]
    together = None
    if not remedies:
        best = replace(sharded, micro_batch=1, recompute="full")
        together = tried("shard the state, recompute activations and a micro batch of 1", best) or more_nodes(
            best, "shard the state, recompute activations, a micro batch of 1 and ")
    state = state_estimate(arch, layout, gpu) if layout.recompute == "none" else None
    return remedies, together, state


def memory_annotations(job: JobSpec) -> dict[str, str]:
    memory = job_memory(job)
    return {MEMORY_ANNOTATION: memory.annotation()} if memory is not None else {}
