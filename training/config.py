"""The run config: everything a training run needs to know, validated twice.

The checkpoint, resilience, metrics and profiling sections are the runtime's (kubetrain_runtime/runtime_config.py), which any
training loop shares; the rest is kubetrain's trainer's. The compiler validates it when it writes the job's ConfigMap (knowing the job's world size),
and `python -m training` validates the mounted file again when the pod starts. This module
must stay importable without torch: the compiler imports it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import Discriminator, Field, Tag, field_validator, model_serializer, model_validator

from kubetrain_runtime.config_paths import READS, WRITES
from kubetrain_runtime.problems import (
    INVALID_VALUE,
    UNION_TAG,
    ConfigError,
    Problem,
    Text,
    rule_violation,
    validate_model,
)
from kubetrain_runtime.runtime_config import (
    CheckpointConfig,
    MetricsConfig,
    ProfilingConfig,
    ResilienceConfig,
    StrictModel,
)
from training.yaml_text import BlockWriter

_YAML = BlockWriter(getattr(yaml, "CSafeDumper", yaml.SafeDumper))


class ModelConfig(StrictModel):
    """kubetrain's own GPT-style decoder (training/model.py): pre-norm blocks, rotary positions, SwiGLU."""

    # Left out of the written config, where it is the default: the run configs (and content-hashed run names) of
    # GPT jobs stay what they were before models had a kind.
    kind: Literal["gpt"] = Field("gpt", exclude=True, description="`gpt`: this decoder (the default); `hf`: a "
                                                                   "Hugging Face causal LM (HFModelConfig).")
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


# The shape fields of HFModelConfig, by their transformers config names: given once, in the run config.
HF_SHAPE_FIELDS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                   "intermediate_size", "vocab_size", "tie_word_embeddings")
# Config fields the trainer decides, not the model: a KV cache is no use in training; remote code is never run.
HF_TRAINER_FIELDS = ("use_cache", "trust_remote_code", "torch_dtype", "dtype")


class HFModelConfig(StrictModel):
    """A Hugging Face `transformers` causal LM (Llama, Qwen2, Mistral, ... any model_type that
    AutoModelForCausalLM builds), trained from random weights or fine-tuned from local safetensors.

    The shape is written here in plain fields, under transformers' names, so that the compiler can
    estimate cost and memory without reading a volume; the pod checks it against `config_path` or
    `pretrained_path` (KT231). Nothing is downloaded: paths are local (an FSx or S3 Mountpoint volume)."""

    kind: Literal["hf"] = Field(description="`hf`: a Hugging Face causal LM.")
    model_type: Text = Field(..., min_length=1, description="transformers' model_type: llama, qwen2, mistral, ...")
    hidden_size: int = Field(..., gt=0, description="Width of the residual stream.")
    num_hidden_layers: int = Field(..., gt=0, description="Decoder layers (each one FSDP2 unit).")
    num_attention_heads: int = Field(..., gt=0, description="Query heads; must divide hidden_size.")
    num_key_value_heads: int | None = Field(None, gt=0, description="Key/value heads (grouped-query attention); "
                                                                     "unset: num_attention_heads.")
    intermediate_size: int = Field(..., gt=0, description="Hidden width of the gated MLP.")
    vocab_size: int = Field(..., gt=1, le=2**32, description="Rows of the embedding (at least the tokenizer's size).")
    tie_word_embeddings: bool = Field(False, description="The output head shares the input embedding's weights.")
    config: dict[str, Any] = Field(default_factory=dict, description="Further transformers config fields "
                                   "(rope_theta, rms_norm_eps, max_position_embeddings, ...) for a random init; "
                                   "not the shape fields above.")
    config_path: Text | None = Field(None, json_schema_extra=READS,
                                     description="Random init from a transformers config: a config.json "
                                                 "or a folder holding one, on a mounted volume.")
    pretrained_path: Text | None = Field(None, json_schema_extra=READS,
                                         description="Fine-tune: a save_pretrained folder (config.json and "
                                                     "*.safetensors) on a mounted volume.")
    export_dir: Text | None = Field(None, json_schema_extra=WRITES,
                                    description="Where the weights are saved in save_pretrained layout "
                                                "(config.json + safetensors), as step-N/, at the end and "
                                                "with --export; unset: <checkpoint.dir>/hf.")

    @property
    def kv_heads(self) -> int:
        return self.num_key_value_heads or self.num_attention_heads

    @model_validator(mode="after")
    def _consistent(self) -> HFModelConfig:
        if self.hidden_size % self.num_attention_heads:
            raise rule_violation("KT232", f"hidden_size {self.hidden_size} is not divisible by num_attention_heads "
                                 f"{self.num_attention_heads}", "choose num_attention_heads that divides hidden_size",
                                 field="num_attention_heads")
        if self.num_attention_heads % self.kv_heads:
            raise rule_violation("KT232", f"num_key_value_heads {self.kv_heads} does not divide num_attention_heads "
                                 f"{self.num_attention_heads}", "choose num_key_value_heads that divides "
                                 "num_attention_heads (each key/value head serves a whole group)",
                                 field="num_key_value_heads")
        if self.config_path and self.pretrained_path:
            raise rule_violation("KT232", "config_path and pretrained_path are both set", "keep pretrained_path to "
                                 "fine-tune (its config.json comes with it), or config_path to start from random "
                                 "weights", field="config_path")
        clashes = sorted(set(self.config) & {*HF_SHAPE_FIELDS, "model_type", *HF_TRAINER_FIELDS})
        if clashes:
            raise rule_violation("KT232", f"model.config sets {', '.join(clashes)}", "set the shape and model_type "
                                 "as fields of model itself (once); the trainer decides use_cache and dtype, and "
                                 "never runs remote code", field="config")
        if self.config and (self.config_path or self.pretrained_path):
            raise rule_violation("KT232", "model.config is set but the config comes from a file", "remove "
                                 "model.config, or write the whole config here without config_path/pretrained_path",
                                 field="config")
        return self

    def transformers_config(self) -> dict[str, Any]:
        """The config transformers builds the model from (random init without a file)."""
        return {"model_type": self.model_type, **{name: getattr(self, name) for name in HF_SHAPE_FIELDS},
                "num_key_value_heads": self.kv_heads, **self.config}


def _model_kind(value: Any) -> str:
    # A run config without `kind` keeps meaning kubetrain's GPT, as before there was a choice.
    kind = value.get("kind", "gpt") if isinstance(value, dict) else getattr(value, "kind", "gpt")
    return UNION_TAG + kind  # RunConfig refused any other kind before


AnyModelConfig = Annotated[Annotated[ModelConfig, Tag(f"{UNION_TAG}gpt")] | Annotated[HFModelConfig, Tag(f"{UNION_TAG}hf")],
                           Discriminator(_model_kind)]


DATASET_SOURCES = ("parquet", "jsonl", "datasets")  # documents, tokenized by the trainer or already


class DataConfig(StrictModel):
    """Where tokens come from. Each data-parallel rank reads its own slice of the stream.

    The data set sources (parquet, JSON lines, a `datasets` save_to_disk folder) hold documents: raw text
    (`text_field`, tokenized with the local `tokenizer`) or token ids (`tokens_field`). Documents are packed
    into sequences with the end-of-sequence token between them; rank r of n reads documents r, r + n, ...,
    streaming, and its position is saved in every checkpoint (training/datasets.py)."""

    source: Literal["synthetic", "tokens", "parquet", "jsonl", "datasets"] = Field(
        "synthetic", description="`synthetic`: a deterministic stream from the seed; `tokens`: a flat token file; "
                                 "`parquet`, `jsonl`: a file, or a folder of them read in name order; `datasets`: "
                                 "a folder written by datasets' save_to_disk.")
    path: Text | None = Field(None, json_schema_extra=READS,
                              description="The token file (memory-mapped, `dtype`), or the data set's file "
                                          "or folder (read-only: an FSx or S3 Mountpoint path).")
    dtype: Literal["uint16", "uint32"] = Field(
        "uint16", description="Integer type of the token file: uint16 holds vocabularies up to 65,536 tokens.")
    seq_len: int = Field(256, gt=0, le=1_048_576, description="Tokens per training sequence.")
    text_field: Text = Field("text", min_length=1, description="Data sets: the column (or JSON key) of raw text.")
    tokens_field: Text | None = Field(None, min_length=1, description="Data sets: the column of token ids, "
                                                                      "when the documents are tokenized already.")
    tokenizer: Text | None = Field(None, json_schema_extra=READS,
                                   description="Data sets: a local tokenizer folder (tokenizer.json, as "
                                               "save_pretrained writes it), loaded with local_files_only.")
    eos_token_id: int | None = Field(None, ge=0, description="Data sets: the token between documents; unset: "
                                                             "the tokenizer's eos_token_id.")

    @model_serializer(mode="wrap")
    def _without_unused_fields(self, handler: Any) -> dict[str, Any]:
        # The data set fields mean nothing to the other sources: leaving them out keeps those run configs (and
        # their content-hashed run names) what they were before data sets existed.
        data = handler(self)
        if self.source not in DATASET_SOURCES:
            for name in ("text_field", "tokens_field", "tokenizer", "eos_token_id"):
                data.pop(name, None)
        return data

    @model_validator(mode="after")
    def _path_for_tokens(self) -> DataConfig:
        if self.source == "tokens" and not self.path:
            raise rule_violation("KT204", "source 'tokens' needs a token file",
                                 "set data.path to a token file, or use source 'synthetic'", field="path")
        if self.source == "synthetic" and self.path:
            raise rule_violation("KT205", f"data.path {self.path} is set but source is 'synthetic': the file "
                                 "would be ignored", "set source: tokens to train on the file, or remove path",
                                 field="path")
        if self.source in DATASET_SOURCES:
            problem = None
            if not self.path:
                problem = ("path", f"source {self.source!r} needs data.path",
                           "set data.path to the data set's file or folder on a mounted volume")
            elif self.tokens_field is None and not self.tokenizer:
                problem = ("tokenizer", f"raw text ({self.text_field!r}) needs a tokenizer",
                           "set data.tokenizer to a local tokenizer folder, or tokens_field to a column of token ids")
            elif self.tokens_field is not None and not self.tokenizer and self.eos_token_id is None:
                problem = ("eos_token_id", "tokenized documents need the token that separates them",
                           "set data.eos_token_id, or data.tokenizer (its eos_token_id is used)")
            if problem:
                raise rule_violation("KT236", problem[1], problem[2], field=problem[0])
        elif self.tokens_field or self.tokenizer or self.eos_token_id is not None:
            raise rule_violation("KT236", f"tokens_field, tokenizer and eos_token_id are for data sets, and source "
                                 f"is {self.source!r}: they would be ignored",
                                 f"set source to one of {', '.join(DATASET_SOURCES)}, or remove them",
                                 field="source")
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
    accumulated_gradients: Literal["auto", "sharded", "unsharded"] = Field(
        "auto", description="FSDP with gradient accumulation: `sharded` reduce-scatters every micro-batch, so a "
                            "rank holds only its shard of the gradients; `unsharded` keeps the whole model's fp32 "
                            "gradients on every rank until the last micro-batch (one reduce-scatter a step: "
                            "faster, 4 bytes a parameter); `auto` (the default) unsharded only when that fits "
                            "the GPU with 10 % to spare (training/memory.py).")

    @model_serializer(mode="wrap")
    def _without_default_accumulation(self, handler: Any) -> dict[str, Any]:
        # `auto` is left out, as before the setting existed: DDP run configs (and their content-hashed run names)
        # stay what they were. The compiler writes an FSDP job's resolved choice.
        data = handler(self)
        if self.accumulated_gradients == "auto":
            data.pop("accumulated_gradients", None)
        return data

    @model_validator(mode="after")
    def _accumulation_needs_fsdp(self) -> StrategyConfig:
        if self.name == "ddp" and self.accumulated_gradients != "auto":
            raise rule_violation(
                "KT242", f"accumulated_gradients {self.accumulated_gradients!r} means nothing under DDP: every rank "
                "holds every gradient, and DDP all-reduces them once, after the last micro-batch",
                "remove strategy.accumulated_gradients, or shard the model with strategy.name: fsdp",
                field="accumulated_gradients")
        return self


class RunConfig(StrictModel):
    """One training run: the file that `python -m training --config` reads."""

    model: AnyModelConfig = Field(default_factory=ModelConfig)
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

    @field_validator("model", mode="before")
    @classmethod
    def _known_kind(cls, value: Any) -> Any:
        kind = value.get("kind", "gpt") if isinstance(value, dict) else "gpt"
        if kind not in ("gpt", "hf"):
            raise rule_violation(INVALID_VALUE, f"model kind {kind!r} is unknown", "use kind: gpt (kubetrain's "
                                 "decoder, the default) or kind: hf (a Hugging Face causal LM)", field="kind")
        return value

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
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(where, [Problem("KT004", "", f"cannot read the config: {exc}",
                                          "pass a readable UTF-8 YAML file to --config, each key once")]) from None
    return read_run_config(data, where, overrides)


def read_run_config(data: bytes | str, where: str, overrides: Sequence[str] = (),
                    unreadable_fix: str = "pass a readable UTF-8 YAML file to --config, each key once") -> RunConfig:
    """A run config's text, read and validated as `load_run_config` reads its file (the pod, run-local, and the
    compiler reading a ConfigMap in dist/ all read it here); `unreadable_fix` is what to do about text that is
    no YAML mapping."""
    try:
        raw = parse_yaml(data.decode("utf-8") if isinstance(data, bytes) else data) or {}
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        reason = (f"not UTF-8 (byte {exc.start})" if isinstance(exc, UnicodeDecodeError)
                  else " ".join(str(exc).split()))
        raise ConfigError(where, [Problem("KT004", "", f"cannot read the config: {reason}", unreadable_fix)]) from None
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
