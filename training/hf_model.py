"""Hugging Face causal LMs (`model.kind: hf`): checked and built (training/hf_export.py saves them back).

Nothing is ever downloaded: the hub is switched off for the whole process (HF_HUB_OFFLINE,
TRANSFORMERS_OFFLINE) and every load passes local_files_only, so a missing file is an error that
names its path (KT230) instead of a request to the internet from a training pod. The model keeps
transformers' parameter names, so a checkpoint, the weights digest and the save_pretrained export
all speak the same names.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from training.config import HF_SHAPE_FIELDS, HFModelConfig
from training.hf_limits import TOKEN_ID_KEYS, model_type_problems, position_key, position_problems, token_id_problems
from kubetrain_runtime.problems import ConfigError, Problem

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX = "model.safetensors.index.json"  # the weights in shards, as save_pretrained writes large models


def offline() -> None:
    """Switch hub access off for this process and the ranks it starts (set before transformers is imported)."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        os.environ[name] = "1"


def config_file(cfg: HFModelConfig) -> Path | None:
    """The config.json the model comes from, or None when the run config holds the whole config."""
    folder_or_file = cfg.pretrained_path or cfg.config_path
    if folder_or_file is None:
        return None
    path = Path(folder_or_file)
    return path if path.suffix == ".json" else path / CONFIG_FILE


def check_model(cfg: HFModelConfig, seq_len: int | None = None) -> list[Problem]:
    """Every reason the pod could not build or train this model, found before torchrun starts: files missing or
    unreadable (KT230), a shape that disagrees with the file (KT231), a model type transformers cannot build as a
    causal LM without remote code (KT233), special token ids outside the vocabulary (KT229) and, given the run's
    `seq_len`, sequences past the model's positions (KT239); the config is the file's, with its class's defaults
    for what it leaves out, as transformers builds it."""
    field = "model.pretrained_path" if cfg.pretrained_path else "model.config_path"
    file = config_file(cfg)
    raw: dict[str, Any] = cfg.transformers_config()
    if file is not None:
        try:
            raw = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else f"not JSON ({exc})"
            return [Problem("KT230", field, f"cannot read {file}: {reason}",
                            "mount the volume that holds the model, or fix the path (a save_pretrained folder "
                            "or its config.json)")]
        if not isinstance(raw, dict):
            return [Problem("KT230", field, f"{file} is no JSON object", "point at a transformers config.json")]
    problems = _check_type(raw.get("model_type"), raw.get("auto_map"), file)
    if problems:
        return problems
    loaded = _load_config(raw)
    if file is not None:
        problems += _check_shape(cfg, raw, loaded, file)
    problems += _check_limits(cfg, raw, loaded, file, seq_len)
    if cfg.pretrained_path:
        problems += _check_weights(Path(cfg.pretrained_path))
    return problems


def _load_config(raw: dict[str, Any]) -> Any:
    """The config as transformers builds it: the class's defaults for what the file (or the run config) leaves
    out. Quietly: transformers' own warnings about ids past the vocabulary would stand beside the check's lines."""
    from transformers import AutoConfig
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        return AutoConfig.for_model(**raw)
    finally:
        hf_logging.set_verbosity(verbosity)


def _check_type(model_type: Any, auto_map: Any, file: Path | None) -> list[Problem]:
    try:
        import transformers
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    except ImportError:
        return [Problem("KT233", "model.kind", "kind hf needs the transformers library, which is not installed",
                        "install kubetrain[train] in the image (it brings transformers)")]
    remote = None
    if isinstance(auto_map, dict) and auto_map:
        remote = str(auto_map.get("AutoModelForCausalLM") or next(iter(auto_map.values())))
    return model_type_problems(model_type, known=CONFIG_MAPPING_NAMES, causal=MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
                               version=transformers.__version__, remote_code=remote,
                               where=f"{file}'s model_type" if file else "model_type")


def _check_limits(cfg: HFModelConfig, raw: dict[str, Any], loaded: Any, file: Path | None,
                  seq_len: int | None) -> list[Problem]:
    """Positions and special token ids, as training/hf_limits.py judges them at synth, of the config as built.
    Ids the config leaves out are judged only for pad, the one the embedding is built with (a family's default bos
    and eos matter only to generation)."""
    try:
        text = loaded.get_text_config()
    except ValueError:  # several text configs (an encoder-decoder): nothing to judge by
        return []
    given = raw  # what the file (or the run config) sets; a multimodal config's decoder is one of its sub-configs
    if text is not loaded:
        owner = next((name for name in getattr(loaded, "sub_configs", {}) if getattr(loaded, name, None) is text), "")
        given = raw.get(owner) if isinstance(raw.get(owner), dict) else {}
    source = str(file) if file else "model.config"
    default = f"{cfg.model_type}'s default"
    field = ("model.pretrained_path" if cfg.pretrained_path else "model.config_path") if file else None
    problems = []
    if seq_len is not None:
        key = position_key(text)
        problems += position_problems(seq_len, key, getattr(text, key) if key else None,
                                      source=source if key in given else default, in_file=file is not None)
    vocab_size = getattr(text, "vocab_size", None)
    if not isinstance(vocab_size, int):
        return problems
    names = [name for name in TOKEN_ID_KEYS if name in given or name == "pad_token_id"]
    ids = {name: getattr(text, name, None) for name in names}
    problems += token_id_problems(
        ids, vocab_size, sources={name: f"{source}'s" if name in given else default for name in names},
        fields={name: field or f"model.config.{name}" for name in names},
        settings={name: f"{name} in {file}" if file else f"model.config.{name}" for name in names})
    return problems


def _check_shape(cfg: HFModelConfig, raw: dict[str, Any], loaded: Any, file: Path) -> list[Problem]:
    """The run config states the shape (the compiler estimates cost and memory from it): it must be the file's."""
    problems = []
    if raw.get("model_type") != cfg.model_type:
        problems.append(Problem("KT231", "model.model_type", f"{cfg.model_type!r} but {file} says "
                                f"{raw.get('model_type')!r}", f"set model_type: {raw.get('model_type')}"))
    for name in HF_SHAPE_FIELDS:
        ours = cfg.kv_heads if name == "num_key_value_heads" else getattr(cfg, name)
        theirs = getattr(loaded, name, None)
        if name == "num_key_value_heads" and theirs is None:
            theirs = loaded.num_attention_heads
        if name == "tie_word_embeddings":
            theirs = bool(getattr(loaded, "tie_word_embeddings", False))
        if ours != theirs:
            problems.append(Problem("KT231", f"model.{name}", f"{ours} but {file} says {theirs}",
                                    f"set model.{name}: {json.dumps(theirs)} (the run config states the shape so "
                                    "that the compiler can size the job)"))
    return problems


def _check_weights(folder: Path) -> list[Problem]:
    index = folder / WEIGHTS_INDEX
    try:
        if index.exists():
            shards = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        else:
            shards = [WEIGHTS_FILE]
    except (OSError, ValueError, KeyError, AttributeError) as exc:
        return [Problem("KT230", "model.pretrained_path", f"cannot read {index}: {exc}",
                        "write the checkpoint again with save_pretrained (safe_serialization)")]
    from safetensors import safe_open

    for shard in shards:
        path = folder / shard
        try:
            with safe_open(str(path), framework="numpy"):  # reads the header only
                pass
        except Exception as exc:  # noqa: BLE001 - safetensors raises its own error types for a bad header
            reason = exc.strerror if isinstance(exc, OSError) else str(exc)
            return [Problem("KT230", "model.pretrained_path", f"cannot read the weights {path}: {reason}",
                            "point pretrained_path at a save_pretrained folder with safetensors weights "
                            "(convert .bin checkpoints with save_pretrained(safe_serialization=True))")]
    return []


def model_config(cfg: HFModelConfig):
    """The transformers config the model is built from: the file's, or the run config's."""
    from transformers import AutoConfig

    file = config_file(cfg)
    return (AutoConfig.from_pretrained(str(file), local_files_only=True) if file is not None
            else AutoConfig.for_model(**cfg.transformers_config()))


def build(cfg: HFModelConfig, device: Any):
    """The model in fp32 (master weights; bf16 compute comes from the strategy), on `device`: random
    weights from the torch RNG (seeded alike on every rank), or the pretrained safetensors."""
    import torch
    from transformers import AutoModelForCausalLM

    problems = check_model(cfg)
    if problems:
        raise ConfigError("model", problems)
    config = model_config(cfg)
    config.use_cache = False  # a KV cache is for generation; in training it only costs memory
    options = {"config": config, "dtype": torch.float32, "attn_implementation": "sdpa"}
    if cfg.pretrained_path:
        model = AutoModelForCausalLM.from_pretrained(cfg.pretrained_path, local_files_only=True, **options)
        return model.to(device)
    with torch.device(device):
        return AutoModelForCausalLM.from_config(**options)


def decoder_layers(model) -> list:
    """The repeated decoder layers: the units of FSDP2 sharding, activation checkpointing and compilation."""
    from torch import nn

    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if isinstance(layers, nn.ModuleList):
        return list(layers)
    # Other layouts (GPT-2's transformer.h): the module list of the classes transformers never splits.
    unsplit = set(getattr(model, "_no_split_modules", None) or ())
    for module in model.modules():
        if isinstance(module, nn.ModuleList) and module and type(module[0]).__name__ in unsplit:
            return list(module)
    raise ValueError(f"{type(model).__name__} has no decoder layers kubetrain can find")


def enable_activation_checkpointing(model) -> None:
    """Recompute each decoder layer in backward (non-reentrant: composes with FSDP2 and torch.compile)."""
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
