"""What a command job's own words say: the launcher it starts, the per-pod values it hard-codes, and the
parallel layout its Megatron-LM or NeMo flags set.

The rules compare these with the job: a command that starts its own torchrun under kubetrain's, a node
rank written once for every pod, or a tensor-parallel size that differs from the job's `Parallelism`
all synthesize into pods that fail (or train wrong) only once they run. Values Kubernetes fills in per
pod (`$(PET_NODE_RANK)`) are not hard-coded.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath

# Programs that start the ranks themselves; under kubetrain's torchrun launcher the command is what torchrun
# runs (a Python script or -m module), so one of these there starts a launcher per rank, or fails.
LAUNCHERS = frozenset({"torchrun", "deepspeed", "accelerate", "mpirun", "mpiexec", "srun", "horovodrun"})
INTERPRETERS = frozenset({"python", "python3", "bash", "sh"})
# Programs that run another program: under torchrun they would be Python's script (`python nsys ...`).
WRAPPERS = frozenset({"nsys", "ncu", "nv-nsight-cu-cli", "compute-sanitizer", "cuda-gdb", "gdb", "numactl",
                      "taskset", "env", "time", "perf", "strace", "py-spy", "nice", "stdbuf"})
LAUNCHER_MODULES = frozenset({"torch.distributed.run", "torch.distributed.launch"})

# Flags whose value differs from pod to pod: written once, every pod gets the same one.
PER_POD_FLAGS = frozenset({"node_rank", "node-rank", "rank", "master_addr", "master-addr", "rdzv_endpoint",
                           "rdzv-endpoint", "local_rank", "local-rank"})
# Flags that must agree with the job's shape: name -> what of the job they state.
SHAPE_FLAGS = {"nnodes": "nodes", "nproc_per_node": "procs_per_node", "nproc-per-node": "procs_per_node",
               "world_size": "world_size", "world-size": "world_size"}

# Parallelism field -> the flags that set it: Megatron-LM's arguments and NeMo's Hydra overrides.
PARALLEL_FLAGS = {
    "tensor": ("--tensor-model-parallel-size", "model.tensor_model_parallel_size",
               "trainer.strategy.tensor_model_parallel_size"),
    "pipeline": ("--pipeline-model-parallel-size", "model.pipeline_model_parallel_size",
                 "trainer.strategy.pipeline_model_parallel_size"),
    "context": ("--context-parallel-size", "model.context_parallel_size", "trainer.strategy.context_parallel_size"),
    "micro_batch": ("--micro-batch-size", "model.micro_batch_size", "data.micro_batch_size"),
    "global_batch": ("--global-batch-size", "model.global_batch_size", "data.global_batch_size"),
}


@dataclass(frozen=True)
class Flag:
    name: str  # as written, without leading dashes or Hydra's +/++
    value: str | None
    index: int  # of the word that holds the flag, in the command

    @property
    def written(self) -> str:
        return self.name if self.value is None else f"{self.name}={self.value}"


def flags(command: list[str]) -> Iterator[Flag]:
    """`--name value`, `--name=value` and Hydra's `key=value` (with optional `+`/`++`) words of a command."""
    for i, word in enumerate(command):
        if word.startswith("-") and not word.startswith("---") and len(word) > 1:
            name, eq, value = word.lstrip("-").partition("=")
            if eq:
                yield Flag(name, value, i)
            else:
                follows = command[i + 1] if i + 1 < len(command) else None
                yield Flag(name, follows if follows is not None and not follows.startswith("-") else None, i)
        elif "=" in word and not word.startswith("="):
            name, _, value = word.lstrip("+").partition("=")
            yield Flag(name, value, i)


def starts_a_launcher(command: list[str]) -> str | None:
    """The launcher or interpreter the command starts with, as written; None for a script or `-m module`."""
    words = list(command)
    if words[:1] == ["-m"] and len(words) > 1:
        return f"-m {words[1]}" if words[1] in LAUNCHER_MODULES else None
    program = PurePosixPath(words[0]).name if words else ""
    if program in LAUNCHERS or program in INTERPRETERS or program in WRAPPERS or program.startswith("python3."):
        return words[0]
    return None


def hard_coded(flag: Flag) -> bool:
    """A literal value: not one Kubernetes ($(VAR)) or a shell ($VAR, ${VAR}) fills in per pod."""
    return flag.value is not None and "$" not in flag.value


def parallel_flags(command: list[str]) -> dict[str, tuple[int, str]]:
    """Parallelism field -> (value, the flag as written) for every parallel-layout flag with an integer value."""
    found: dict[str, tuple[int, str]] = {}
    by_name = {flag.lstrip("-"): field for field, names in PARALLEL_FLAGS.items() for flag in names}
    for flag in flags(command):
        field = by_name.get(flag.name)
        if field is not None and flag.value is not None and flag.value.isdigit():
            found[field] = (int(flag.value), flag.written)
    return found


# Megatron-LM's arguments that change a rank's memory (megatron/training/arguments.py), by the name the memory
# formula gives them. Integers:
MEGATRON_SIZE_FLAGS = {
    "layers": "num-layers", "hidden": "hidden-size", "ffn": "ffn-hidden-size", "heads": "num-attention-heads",
    "kv_heads": "num-query-groups", "seq_len": "seq-length", "micro_batch": "micro-batch-size",
    "tensor": "tensor-model-parallel-size", "pipeline": "pipeline-model-parallel-size",
    "context": "context-parallel-size", "vocab": "padded-vocab-size", "kv_channels": "kv-channels",
}
# Switches (present or not).
MEGATRON_SWITCHES = {"bf16", "fp16", "use-distributed-optimizer", "recompute-activations", "swiglu",
                     "untie-embeddings-and-output-weights", "group-query-attention"}
# Vocabularies of Megatron's built-in tokenizers, before padding (GPT-2's BPE: 50,257 tokens).
MEGATRON_TOKENIZER_VOCAB = {"GPT2BPETokenizer": 50257}


def megatron_flags(command: list[str]) -> dict[str, int | str | bool]:
    """What a Megatron-LM command says about its memory: MEGATRON_SIZE_FLAGS' names -> their integer values,
    `vocab` from --padded-vocab-size, else --vocab-size padded as Megatron pads it (to a multiple of
    --make-vocab-size-divisible-by, 128 by default, times the tensor-parallel size), else a built-in tokenizer's;
    each switch present -> True; `recompute` -> 'selective' or 'full'. Empty for a command with none of them."""
    words = {flag.name: flag for flag in flags(command) if flag.name in _MEGATRON_NAMES}
    found: dict[str, int | str | bool] = {}
    for field, name in MEGATRON_SIZE_FLAGS.items():
        flag = words.get(name)
        if flag is not None and flag.value is not None and flag.value.isdigit():
            found[field] = int(flag.value)
    found.update({name: True for name in MEGATRON_SWITCHES if name in words})
    granularity = words.get("recompute-granularity")
    if granularity is not None and granularity.value in ("full", "selective"):
        found["recompute"] = granularity.value
    elif "recompute-activations" in words:  # the older switch: selective recomputation
        found["recompute"] = "selective"
    if "vocab" not in found:
        raw = _int_value(words.get("vocab-size"))
        tokenizer = words.get("tokenizer-type")
        raw = raw or MEGATRON_TOKENIZER_VOCAB.get(tokenizer.value if tokenizer and tokenizer.value else "")
        if raw:
            multiple = (_int_value(words.get("make-vocab-size-divisible-by")) or 128) * int(found.get("tensor", 1))
            found["vocab"] = -(-raw // multiple) * multiple
    return found


def _int_value(flag: Flag | None) -> int | None:
    return int(flag.value) if flag is not None and flag.value is not None and flag.value.isdigit() else None


_MEGATRON_NAMES = {*MEGATRON_SIZE_FLAGS.values(), *MEGATRON_SWITCHES, "recompute-granularity", "vocab-size",
                   "tokenizer-type", "make-vocab-size-divisible-by"}
