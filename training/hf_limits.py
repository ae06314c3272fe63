"""What a Hugging Face model's config allows a run: a model_type that transformers builds as a causal LM without
remote code, sequences within the model's positions, special token ids within its vocabulary.

Judged twice, in the same words: by the compiler from the table generated out of transformers' registry
(kubetrain/model/transformers_registry.json, scripts/generate_transformers_registry.py), and by the pod's
`--check` from its own transformers and the real config.json (training/hf_model.py). This module imports
neither transformers nor torch.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from kubetrain_runtime.problems import Problem
from kubetrain_runtime.spelling import did_you_mean

# Where a config keeps the longest sequence the model takes, by the names transformers' config classes use (GPT-2's
# n_positions, MPT's max_seq_len, RWKV's context_length, ...); a class's attribute_map may alias one to another.
POSITION_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "n_ctx", "context_length",
                 "max_target_positions")
TOKEN_ID_KEYS = ("bos_token_id", "eos_token_id", "pad_token_id")
COMMON_TYPES = "llama, qwen2, mistral, gemma, phi3"


def position_key(config: Any) -> str | None:
    """The attribute of a transformers config object that holds its position limit, or None (Mamba, Bloom's
    ALiBi: no limit)."""
    aliases = getattr(config, "attribute_map", {}) or {}
    for key in POSITION_KEYS:
        name = aliases.get(key, key)
        value = getattr(config, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return name
    return None


def model_type_problems(model_type: Any, *, known: Collection[str], causal: Collection[str], version: str,
                        remote_code: str | None = None, where: str = "model_type") -> list[Problem]:
    """KT233: a model_type transformers `version` does not build as a causal LM. `remote_code`: the class a
    config.json's auto_map names, when the file asks for code of its own."""
    field = "model.model_type"
    if model_type in causal:  # built natively: an auto_map beside it is never used (trust_remote_code is off)
        return []
    if remote_code:
        return [Problem("KT233", field, f"{where} {model_type!r} needs trust_remote_code (config.json's auto_map "
                        f"names {remote_code}); kubetrain never runs code from a model's repository",
                        f"use a checkpoint converted to a model_type transformers {version} builds natively "
                        f"({COMMON_TYPES}, ...): most such models have a conversion script to llama")]
    if model_type in known:
        return [Problem("KT233", field, f"{where} {model_type!r} is a transformers {version} model without a causal "
                        "LM head: AutoModelForCausalLM cannot build it",
                        f"use a decoder-only model_type ({COMMON_TYPES}, ...)")]
    guess = did_you_mean(str(model_type), [name for name in causal if not _another_version(str(model_type), name)],
                         quote=False)
    return [Problem("KT233", field, f"{where} {model_type!r} is not a model type of transformers {version}: a typo, "
                    "or a model that needs trust_remote_code (its own code from the hub), which kubetrain never runs",
                    f"{guess}use a model_type transformers builds ({COMMON_TYPES}, ...); a remote-code model needs a "
                    "checkpoint converted to one of them, or an image whose transformers knows it")]


def _another_version(typed: str, known: str) -> bool:
    """internlm2 against internlm3: one architecture's name with another number is another architecture, not a
    typo to correct (llama3 against llama is: Llama 3 checkpoints say llama)."""
    stem = typed.rstrip("0123456789")
    return stem != typed and known != stem and known.rstrip("0123456789") == stem


def position_problems(seq_len: int, key: str | None, limit: Any, *, source: str, in_file: bool) -> list[Problem]:
    """KT239: sequences longer than the model's positions (a learned position table, such as GPT-2's, has no row
    past them: the first step dies with an IndexError; a RoPE model is trained past what its config declares).
    `source` says where the limit comes from (the run config, a file, the family's default)."""
    if key is None or not isinstance(limit, int) or seq_len <= limit:
        return []
    fix = (f"lower data.seq_len to at most {limit}, or use a config.json whose {key} is at least {seq_len}"
           if in_file else f"lower data.seq_len to at most {limit}, or set model.config.{key}: {seq_len} (a longer "
                           "context for a RoPE model may also want rope_scaling)")
    return [Problem("KT239", "data.seq_len", f"seq_len {seq_len} is past the model's {key} {limit} ({source})", fix)]


def token_id_problems(ids: Mapping[str, Any], vocab_size: int, *, sources: Mapping[str, str],
                      fields: Mapping[str, str], settings: Mapping[str, str]) -> list[Problem]:
    """KT229: a special token id outside 0..vocab_size-1. A pad id past the vocabulary crashes every rank as the
    embedding is built (its padding_idx); a bos or eos id past it can never be generated or stop generation.
    `sources[name]` says where the id comes from, `fields[name]` the field to report it on, `settings[name]` the
    setting that changes it."""
    problems = []
    for name, value in ids.items():
        values = value if isinstance(value, list) else [value]
        bad = [v for v in values if isinstance(v, int) and not isinstance(v, bool) and not 0 <= v < vocab_size]
        if not bad:
            continue
        shown = bad[0] if len(bad) == 1 else bad
        crash = ": every rank would crash building the embedding" if name == "pad_token_id" else ""
        problems.append(Problem("KT229", fields[name], f"{sources[name]} {name} {shown} is outside the vocabulary "
                                f"(vocab_size {vocab_size}){crash}",
                                f"set {settings[name]} to the tokenizer's id (below {vocab_size}), or raise "
                                "vocab_size to cover the tokenizer"))
    return problems
