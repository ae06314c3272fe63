"""The run config: everything a training run needs to know, validated twice.

The checkpoint, resilience, metrics and profiling sections are the runtime's (kubetrain_runtime/config.py), which any
training loop shares; the rest is kubetrain's trainer's. The compiler validates it when it writes the job's ConfigMap (knowing the job's world size),
and `python -m training` validates the mounted file again when the pod starts. This module
must stay importable without torch: the compiler imports it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import Field, model_validator

from kubetrain_runtime.config import CheckpointConfig, MetricsConfig, ProfilingConfig, ResilienceConfig, StrictModel
from kubetrain_runtime.problems import INVALID_VALUE, ConfigError, Problem, Text, rule_violation, validate_model
from training.yaml_text import BlockWriter

_YAML = BlockWriter(getattr(yaml, "CSafeDumper", yaml.SafeDumper))


class ModelConfig(StrictModel):
    """A GPT-style decoder: pre-norm blocks, rotary positions, tied embeddings."""

    vocab_size: int = Field(50304, gt=1, le=2**32, description="Tokens in the vocabulary (a multiple of 64 is fastest).")
    dim: int = Field(768, gt=0, description="Width of the residual stream.")
    n_layers: int = Field(12, gt=0, description="Transformer blocks.")
    n_heads: int = Field(12, gt=0, description="Attention heads; must divide dim.")
    mlp_ratio: float = Field(4.0, gt=0, description="Hidden width of the MLP as a multiple of dim.")

    @model_validator(mode="after")
    def _heads_divide_dim(self) -> ModelConfig:
        if self.dim % self.n_heads:
            raise rule_violation("KT202", f"dim {self.dim} is not divisible by n_heads {self.n_heads}",
                                 "choose n_heads that divides dim (head_dim = dim / n_heads)", field="n_heads")
        if int(2 * self.mlp_ratio * self.dim / 3) < 1:  # the SwiGLU hidden width (training/model.py)
            raise rule_violation(INVALID_VALUE, f"mlp_ratio {self.mlp_ratio} leaves the MLP no hidden units at "
                                 f"dim {self.dim}", "use an mlp_ratio around 4 (8/3 for SwiGLU's usual size)",
                                 field="mlp_ratio")
        return self


class DataConfig(StrictModel):
    """Where tokens come from. Each data-parallel rank reads its own slice of the stream."""

    source: Literal["synthetic", "tokens"] = Field(
        "synthetic", description="`synthetic`: a deterministic stream from the seed; `tokens`: a flat token file.")
    path: Text | None = Field(None, description="The token file (memory-mapped, `dtype`); required for `tokens`.")
    dtype: Literal["uint16", "uint32"] = Field(
        "uint16", description="Integer type of the token file: uint16 holds vocabularies up to 65,536 tokens.")
    seq_len: int = Field(256, gt=0, le=1_048_576, description="Tokens per training sequence.")

    @model_validator(mode="after")
    def _path_for_tokens(self) -> DataConfig:
        if self.source == "tokens" and not self.path:
            raise rule_violation("KT204", "source 'tokens' needs a token file",
                                 "set data.path to a token file, or use source 'synthetic'", field="path")
        if self.source == "synthetic" and self.path:
            raise rule_violation("KT205", f"data.path {self.path} is set but source is 'synthetic': the file "
                                 "would be ignored", "set source: tokens to train on the file, or remove path",
                                 field="path")
        return self


TOKEN_DTYPE_LIMITS = {"uint16": 2**16, "uint32": 2**32}  # token ids a file of each dtype can hold


Beta = Annotated[float, Field(ge=0, lt=1)]  # torch's AdamW refuses anything else at pod start


class OptimizerConfig(StrictModel):
    """AdamW with linear warmup and cosine decay to `min_lr`."""

    lr: float = Field(3e-4, gt=0, description="Peak learning rate, reached after warmup.")
    min_lr: float = Field(3e-5, ge=0, description="Learning rate at the end of the cosine decay.")
    warmup_steps: int = Field(100, ge=0, description="Steps of linear warmup from 0 to lr.")
    weight_decay: float = Field(0.1, ge=0, description="Decoupled weight decay on matrices (not norms or biases).")
    betas: tuple[Beta, Beta] = Field((0.9, 0.95), description="Adam's beta1, beta2, each in [0, 1).")
    grad_clip: float = Field(1.0, gt=0, description="Clip the global gradient norm to this value.")

    @model_validator(mode="after")
    def _min_below_peak(self) -> OptimizerConfig:
        if self.min_lr > self.lr:
            raise rule_violation("KT203", f"min_lr {self.min_lr} is above lr {self.lr}",
                                 "set min_lr at or below lr", field="min_lr")
        return self


class BatchConfig(StrictModel):
    """Batch sizes in sequences. Gradient accumulation is derived, never configured."""

    global_size: int = Field(..., gt=0, description="Sequences per optimizer step, summed over all ranks.")
    micro_size: int = Field(..., gt=0, description="Sequences per rank per forward/backward pass.")


class StrategyConfig(StrictModel):
    """How the model is spread over ranks."""

    name: Literal["ddp", "fsdp"] = Field("ddp", description="`ddp` replicates the model; `fsdp` shards it (FSDP2).")
    activation_checkpointing: bool = Field(False, description="Recompute each block's activations in backward.")
    compile: bool = Field(False, description="torch.compile each transformer block.")


class RunConfig(StrictModel):
    """One training run: the file that `python -m training --config` reads."""

    model: ModelConfig = Field(default_factory=ModelConfig)
    data: DataConfig = Field(default_factory=DataConfig)
    optimizer: OptimizerConfig = Field(default_factory=OptimizerConfig)
    batch: BatchConfig
    strategy: StrategyConfig = Field(default_factory=StrategyConfig)
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    resilience: ResilienceConfig = Field(default_factory=ResilienceConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    profiling: ProfilingConfig = Field(default_factory=ProfilingConfig)
    precision: Literal["fp32", "bf16"] = Field("fp32", description="`bf16`: bf16 compute, fp32 master weights.")
    max_steps: int = Field(..., gt=0, description="Optimizer steps to train for.")
    seed: int = Field(0, ge=0, lt=2**31, description="Seeds model init, data and dropout; resume restores RNG "
                                                    "states (below 2**31: numpy's and the data stream's range).")
    log_interval: int = Field(1, gt=0, description="Print a metrics line every this many steps.")

    def to_yaml(self) -> str:
        """The complete config, defaults included: what the pod reads is exactly what was validated. The text
        `yaml.dump(config, Dumper=CSafeDumper, sort_keys=False)` writes, by the faster block writer."""
        return _YAML.dump(self.model_dump(mode="json"))

    def grad_accum_steps(self, world_size: int) -> int:
        """Micro-batches each rank runs per optimizer step (assumes `check_world_size` passed)."""
        return self.batch.global_size // (self.batch.micro_size * world_size)

    @model_validator(mode="after")
    def _vocab_fits_token_dtype(self) -> RunConfig:
        # Token ids are 0..vocab_size-1; a uint16 file cannot hold ids of a larger vocabulary, so
        # the file was written for another tokenizer (or another dtype) and would be misread.
        if self.data.source == "tokens" and self.model.vocab_size > TOKEN_DTYPE_LIMITS[self.data.dtype]:
            raise rule_violation(
                "KT206", f"vocab_size {self.model.vocab_size} does not fit data.dtype {self.data.dtype} "
                f"(at most {TOKEN_DTYPE_LIMITS[self.data.dtype]:,} token ids)",
                "set data.dtype: uint32 (and write the token file as uint32), or use a smaller vocabulary",
                field="data.dtype")
        return self

    def check_world_size(self, world_size: int) -> list[Problem]:
        """Rules that need the world size: known to the compiler from the job, to the pod from torchrun."""
        per_step = self.batch.micro_size * world_size
        if self.batch.global_size % per_step:
            lower = max(per_step, self.batch.global_size // per_step * per_step)
            return [Problem(
                "KT201", "batch.global_size",
                f"global_size {self.batch.global_size} is not a multiple of micro_size {self.batch.micro_size} "
                f"x {world_size} ranks = {per_step}",
                f"use a multiple of {per_step}, such as {lower} or {lower + per_step}")]
        return []


class StrictYamlLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # libyaml's parser where it exists
    """Safe YAML in which a key given twice in one mapping is an error, not the last one silently winning."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} appears twice in one mapping (lines {seen[key].start_mark.line + 1} "
                                f"and {key_node.start_mark.line + 1})", key_node.start_mark)
            seen[key] = key_node
        return super().construct_mapping(node, deep)


def parse_yaml(text: str) -> Any:
    return yaml.load(text, Loader=StrictYamlLoader)


def load_run_config(path: str | Path, overrides: list[str] = (), where: str | None = None) -> RunConfig:
    """Read and validate a run config file, applying `dotted.key=value` overrides (values are YAML).

    Every problem is reported at once as a ConfigError, and nothing else is raised: an unreadable or
    non-UTF-8 file, a YAML error or a duplicate key (KT004), malformed overrides (KT005), and every
    field the model rejects.
    """
    where = where or str(path)
    try:
        raw = parse_yaml(Path(path).read_bytes().decode("utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        reason = (f"not UTF-8 (byte {exc.start})" if isinstance(exc, UnicodeDecodeError)
                  else " ".join(str(exc).split()))
        raise ConfigError(where, [Problem("KT004", "", f"cannot read the config: {reason}",
                                          "pass a readable UTF-8 YAML file to --config, each key once")]) from None
    if not isinstance(raw, dict):
        raise ConfigError(where, [Problem(INVALID_VALUE, "", "the config must be a YAML mapping",
                                          "write the run config as key: value pairs")])
    problems = [problem for override in overrides for problem in apply_override(raw, override)]
    if problems:
        raise ConfigError(where, problems)
    return validate_model(RunConfig, raw, where)


def apply_override(raw: dict[str, Any], override: str) -> list[Problem]:
    """Set `a.b.c=value` in a nested mapping; the value is parsed as YAML (so 3 is an int). Returns the
    override's problems (none when it was applied)."""
    key, sep, value = override.partition("=")
    if not sep or not key or "" in key.split("."):
        return [Problem("KT005", "", f"override {override!r} is not key=value",
                        "write overrides as dotted.key=value, e.g. max_steps=30")]
    try:
        parsed = parse_yaml(value)
    except yaml.YAMLError as exc:
        return [Problem("KT005", key, f"the value {value!r} is not YAML: {' '.join(str(exc).split())}",
                        "quote strings that contain YAML syntax, e.g. data.path='/a b.bin'")]
    *parents, leaf = key.split(".")
    node = raw
    for part in parents:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            return [Problem("KT005", key, f"cannot set {key}: {part} is not a mapping",
                            "override a field inside a section, e.g. batch.micro_size=2")]
    node[leaf] = parsed
    return []
