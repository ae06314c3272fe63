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


def check_model(cfg: HFModelConfig) -> list[Problem]:
    """Every reason the pod could not build this model, found before torchrun starts: files missing or
    unreadable (KT230), a shape that disagrees with the file (KT231), a model type transformers cannot
    build as a causal LM (KT233)."""
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
    problems = _check_type(raw.get("model_type"), file)
    if problems:
        return problems
    if file is not None:
        problems += _check_shape(cfg, raw, file)
    if cfg.pretrained_path:
        problems += _check_weights(Path(cfg.pretrained_path))
    return problems


def _check_type(model_type: Any, file: Path | None) -> list[Problem]:
    try:
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    except ImportError:
        return [Problem("KT233", "model.kind", "kind hf needs the transformers library, which is not installed",
                        "install kubetrain[train] in the image (it brings transformers)")]
    if model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        where = f"{file}'s model_type" if file else "model_type"
        return [Problem("KT233", "model.model_type", f"{where} {model_type!r} is no causal LM that this "
                        "transformers builds", "use a model_type of AutoModelForCausalLM (llama, qwen2, mistral, "
                        "...), or an image whose transformers knows it; remote code is never run")]
    return []


def _check_shape(cfg: HFModelConfig, raw: dict[str, Any], file: Path) -> list[Problem]:
    """The run config states the shape (the compiler estimates cost and memory from it): it must be the file's."""
    from transformers import AutoConfig

    loaded = AutoConfig.for_model(**raw)  # the class's defaults for what the file leaves out
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
