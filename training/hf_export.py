"""A Hugging Face model's export, `<export_dir>/step-N/`: a folder transformers loads as the model trained.

`AutoModelForCausalLM.from_pretrained` gets the trained weights, with config.json and generation_config.json
naming the special tokens the run trained with (the tokenizer's bos and pad, and the end-of-text token put
between documents as eos, so that `generate` stops where training taught the model to) and the model's own
`use_cache` (the trainer turns the KV cache off; generation wants it back). `AutoTokenizer.from_pretrained` gets
the tokenizer that produced the training ids: transformers picks a tokenizer class from tokenizer_config.json
and, for some model types (qwen2, phi3, ...), from config.json's model_type whatever tokenizer_config.json says;
the export loads its own folder back and compares, and `python -m training --check` does the same before a run
starts, so a tokenizer that a folder with this model could not give back is refused before any training.
Nothing machine-specific is written: no paths, no host names (transformers drops the name_or_path fields).
"""

from __future__ import annotations

import copy
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from kubetrain_runtime.problems import ConfigError, Problem
from training.config import RunConfig

EXPORT_MARK = "kubetrain-export.json"  # in every folder an export writes: the only folders it ever replaces
TOKENIZER_CONFIG = "tokenizer_config.json"
# transformers 5 saves a tokenizer that is only its tokenizer.json as TokenizersBackend, a name transformers 4
# does not know; PreTrainedTokenizerFast is the same class to 5 (an alias) and to 4, so both load the export.
GENERIC_TOKENIZER = ("TokenizersBackend", "PreTrainedTokenizerFast")
# How this machine loaded the tokenizer (from_pretrained's options, which transformers keeps among the tokenizer's
# own settings and saves): nothing of the tokenizer, and a path or a stale revision in another place.
LOAD_OPTIONS = ("local_files_only", "is_local", "cache_dir", "revision", "subfolder", "_commit_hash")


def export_path(run: RunConfig, step: int) -> Path:
    return Path(run.model.export_dir or Path(run.checkpoint.dir) / "hf") / f"step-{step}"


def special_token_ids(run: RunConfig, tokenizer: Any | None) -> dict[str, int | None]:
    """The special tokens the run trained with, by their config names: the tokenizer's bos and pad (None where it
    has none), and as eos the token the data loader put between documents. Without a tokenizer only that eos is
    known (data.eos_token_id), and without either nothing: the model's config keeps its own."""
    from training.documents import end_of_text_id

    eos = end_of_text_id(run.data, tokenizer)
    if tokenizer is None:
        return {} if eos is None else {"eos_token_id": eos}
    return {"bos_token_id": tokenizer.bos_token_id, "eos_token_id": eos, "pad_token_id": tokenizer.pad_token_id}


def save_pretrained(model, run: RunConfig, step: int, is_main: bool) -> Path:
    """Write the full weights as transformers' save_pretrained does (config.json + safetensors) into
    <export_dir>/step-N, gathered from the FSDP2 shards (a collective: every rank calls this), by rank 0 into
    a temporary folder renamed when complete, with the trained special tokens in the configs and the data set's
    tokenizer checked to load back as trained. A folder of that name is replaced only if an export wrote it."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    out = export_path(run, step)
    if not is_main:
        return out
    if out.exists() and not (out / EXPORT_MARK).exists():
        raise ConfigError(str(out), [Problem("KT230", "model.export_dir", f"{out} exists and no export wrote it",
                                             "point model.export_dir at a folder of its own")])
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)  # a partial folder is only ever an interrupted export's
    unwrapped = getattr(model, "module", model)  # DDP's wrapper; FSDP2 keeps the model's own class
    unwrapped.save_pretrained(str(partial), state_dict=state, safe_serialization=True)
    tokenizer = trained_tokenizer(run)
    tokens = special_token_ids(run, tokenizer)
    write_configs(unwrapped.config, unwrapped.generation_config if unwrapped.can_generate() else None, tokens,
                  partial)
    if tokenizer is not None:
        problem = write_tokenizer(tokenizer, tokens["eos_token_id"], partial)
        if problem:  # --check refuses such a tokenizer before training: only an unchecked run gets here
            raise ConfigError(str(out), [tokenizer_problem(run, problem)])
    (partial / EXPORT_MARK).write_text(json.dumps({"step": step}) + "\n", encoding="utf-8")
    if out.exists():
        shutil.rmtree(out)
    partial.rename(out)
    return out


def trained_tokenizer(run: RunConfig):
    """The tokenizer the data loader tokenized with (the same load), or None when the run has none."""
    if not run.data.tokenizer:
        return None
    from training.documents import load_tokenizer

    return load_tokenizer(run.data, run.model.vocab_size)


def write_configs(model_config, generation_config, tokens: dict[str, int | None], folder: Path) -> None:
    """config.json and generation_config.json as the model is used after training: the trained special tokens
    and the model class's default use_cache (True for every causal LM transformers ships), over the copies
    save_pretrained wrote. The model's own configs are left as they are: training may go on after an export."""
    config = copy.deepcopy(model_config)
    config.use_cache = getattr(type(config), "use_cache", True)  # the class's field default
    for name, value in tokens.items():
        setattr(config, name, value)
    config.save_pretrained(str(folder))
    if generation_config is None:
        return
    generation = copy.deepcopy(generation_config)  # a pretrained folder's sampling settings are kept
    generation.use_cache = config.use_cache
    for name, value in tokens.items():
        setattr(generation, name, value)
    generation.save_pretrained(str(folder))


def write_tokenizer(tokenizer, eos_token_id: int | None, folder: Path) -> str | None:
    """Save the trained tokenizer into `folder` (which holds the model's config.json) and load it back as a user
    would, with AutoTokenizer: None when it is the trained tokenizer, or what differs. tokenizer_config.json names
    the class that was trained, and the special tokens, loading options left out."""
    from transformers import AutoTokenizer

    _name_special_tokens(tokenizer, eos_token_id)
    tokenizer.save_pretrained(str(folder))
    path = folder / TOKENIZER_CONFIG
    saved = json.loads(path.read_text(encoding="utf-8"))
    for option in LOAD_OPTIONS:
        saved.pop(option, None)
    if saved.get("tokenizer_class") == GENERIC_TOKENIZER[0]:
        saved["tokenizer_class"] = GENERIC_TOKENIZER[1]
    path.write_text(json.dumps(saved, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    loaded = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    return tokenizer_difference(tokenizer, loaded)


def _name_special_tokens(tokenizer, eos_token_id: int | None) -> None:
    """A tokenizer saved as a bare tokenizer.json names no special tokens: the trained end-of-text token becomes its
    eos (so that its eos_token_id is the configs'), the vocabulary's unknown token its unk, where each is a special
    token of the tokenizer already (naming one that is not would change how text containing it is split)."""
    specials = {token_id: token.content for token_id, token in tokenizer.added_tokens_decoder.items() if token.special}
    if tokenizer.eos_token is None and eos_token_id in specials:
        tokenizer.eos_token = specials[eos_token_id]
    unknown = _pipeline(tokenizer)["model"].get("unk_token")
    if tokenizer.unk_token is None and unknown in specials.values():
        tokenizer.unk_token = unknown


def tokenizer_difference(trained, loaded) -> str | None:
    """None when `loaded` tokenizes as `trained` (the same tokenizers pipeline: vocabulary, normalizer,
    pre-tokenizer, post-processor, added tokens; and the same special tokens), or what differs."""
    if _pipeline(loaded) != _pipeline(trained):
        return (f"AutoTokenizer builds {type(loaded).__name__} for it, which tokenizes differently from the trained "
                f"{type(trained).__name__}")
    for name in ("bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id"):
        if getattr(loaded, name) != getattr(trained, name):
            return f"AutoTokenizer loads {name} {getattr(loaded, name)}, trained {getattr(trained, name)}"
    return None


def _pipeline(tokenizer) -> dict[str, Any]:
    described = json.loads(tokenizer.backend_tokenizer.to_str())
    described.pop("truncation", None)  # set per call, not part of how text becomes ids
    described.pop("padding", None)
    return described


def tokenizer_problem(run: RunConfig, difference: str) -> Problem:
    return Problem("KT235", "data.tokenizer", f"an export of this {run.model.model_type} model would not give back "
                   f"the tokenizer in {run.data.tokenizer}: {difference} (transformers picks the tokenizer class "
                   "from the model_type for some models)", f"use a tokenizer of the kind {run.model.model_type} "
                   "models load (save it with that class's save_pretrained), or a model_type whose tokenizer "
                   "transformers takes from tokenizer_config.json (llama, mistral, ...)")


def check_tokenizer(run: RunConfig, model_config) -> list[Problem]:
    """Before torchrun (`python -m training --check`): does a folder with this model's config.json and the run's
    tokenizer, written as the export writes it, load back as the trained tokenizer?"""
    tokenizer = trained_tokenizer(run)
    if tokenizer is None:
        return []
    with tempfile.TemporaryDirectory(prefix="kubetrain-export-check-") as folder:
        model_config.save_pretrained(folder)
        difference = write_tokenizer(tokenizer, special_token_ids(run, tokenizer)["eos_token_id"], Path(folder))
    return [tokenizer_problem(run, difference)] if difference else []
