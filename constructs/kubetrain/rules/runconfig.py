"""The rules of input shape and of the run config.

They are checked by pydantic models in `training/` (the run config, which the pod validates again
at start and which must not import kubetrain) and in kubetrain's props; this module only declares
them, so `kubetrain explain` and the README's table cover them too.
"""

from __future__ import annotations

from kubetrain.rules.registry import register
from kubetrain.rules.sources import K8S_NAMES, PRUNING, cite

TRAINER = "training/config.py"

register("KT001", "error", "unknown field",
         rationale="A misspelled field would otherwise be ignored (and the API server prunes unknown fields "
                   "silently): the run would use a default the author never chose.",
         fix="remove the field or correct its name (the message suggests the closest one)",
         source=cite("README.md (Rules)", PRUNING))
register("KT002", "error", "required field missing",
         rationale="Some settings have no safe default (batch sizes, max_steps, the image).",
         fix="add the field", source="README.md (Rules)")
register("KT003", "error", "invalid value",
         rationale="A value of the wrong type, out of range, or not what Kubernetes accepts (names, quantities, "
                   "image references) fails later, on the cluster or at pod start, where it costs a run.",
         fix="change the value as the message says", source=cite("README.md (Rules)", K8S_NAMES))
register("KT004", "error", "run config file unreadable",
         rationale="The pod reads the mounted run config: it must be UTF-8 YAML, a mapping, with each key once "
                   "(YAML would otherwise keep the last of two keys silently).",
         fix="pass a readable UTF-8 YAML file to --config, each key once", source=TRAINER, checked_by=("pod",))
register("KT005", "error", "malformed --set override",
         rationale="Overrides are dotted.key=value with a YAML value; a malformed one would set nothing or the "
                   "wrong thing.",
         fix="write overrides as dotted.key=value, e.g. max_steps=30", source=TRAINER, checked_by=("pod", "run-local"))
register("KT006", "error", "malformed KUBETRAIN_FAULT",
         rationale="Fault drills are parsed at synth (a job's env) and again before training starts (the pod's "
                   "env), so a typo does not run a drill-less job.",
         fix="write faults as KIND:step=N[:rank=R], separated by ';' (see kubetrain_runtime/faults.py)",
         source="kubetrain_runtime/faults.py", checked_by=("synth", "pod"))
register("KT201", "error", "global batch not a multiple of micro batch x world size",
         rationale="Gradient accumulation is derived as global / (micro x world); it must be a whole number at "
                   "every world size the job can run at.",
         fix="change global_size, micro_size or the node counts", source=TRAINER)
register("KT202", "error", "attention heads do not divide the model width",
         rationale="head_dim = dim / n_heads must be whole.", fix="choose n_heads that divides dim", source=TRAINER)
register("KT203", "error", "min_lr above lr",
         rationale="The cosine schedule decays from lr to min_lr.", fix="set min_lr at or below lr", source=TRAINER)
register("KT204", "error", "token source without a file",
         rationale="source 'tokens' reads a token file; without a path there is nothing to train on.",
         fix="set data.path, or use source 'synthetic'", source=TRAINER)
register("KT205", "error", "token file given to the synthetic source",
         rationale="The synthetic stream ignores data.path: a run meant to train on a data set would train on "
                   "synthetic tokens.",
         fix="set data.source to tokens, or remove data.path", source=TRAINER)
register("KT206", "error", "vocabulary does not fit the token file's dtype",
         rationale="Token ids run up to vocab_size - 1; a uint16 file holds ids below 65,536 only, so a larger "
                   "vocabulary means the file was written for another tokenizer or dtype and would be misread.",
         fix="set data.dtype: uint32 (and write the file as uint32), or use a smaller vocabulary", source=TRAINER)
register("KT207", "error", "checkpoint tiers inconsistent",
         rationale="The node-local tier needs its own interval (or interval: auto, which chooses both), an interval "
                   "without local_dir would save nothing, and a local_dir equal to dir would put the fast tier on "
                   "the shared volume.",
         fix="set local_dir and local_interval together, or interval: auto with local_dir alone", source=TRAINER)
register("KT242", "error", "gradient accumulation setting under DDP",
         rationale="strategy.accumulated_gradients says whether FSDP reduce-scatters every micro-batch (sharded "
                   "gradients) or once a step (the whole model's gradients on every rank); DDP replicates every "
                   "gradient and all-reduces once a step whatever it says, so the setting would be ignored.",
         fix="remove strategy.accumulated_gradients, or shard the model with strategy.name: fsdp", source=TRAINER)
register("KT217", "error", "fast checkpoint tier saved no more often than the durable one",
         rationale="The node-local tier exists to be saved often and cheaply; saved every local_interval steps "
                   "with local_interval >= interval, a crash always finds a durable checkpoint as new, and the "
                   "local saves only cost time. Checked on the run config itself, so `run-local --set` and the "
                   "pod's own config are held to it as synth is.",
         fix="make checkpoint.local_interval smaller than checkpoint.interval (or use interval: auto)",
         source="kubetrain_runtime/checkpoint.py", checked_by=("synth", "run-local", "pod"))
register("KT208", "error", "token file unusable",
         rationale="Checked when the pod starts, before torch is imported: a missing file, a size that is no whole "
                   "number of data.dtype tokens, fewer tokens than one sequence, or ids beyond the vocabulary (a file "
                   "of another dtype or tokenizer) would otherwise crash every rank or train on garbage.",
         fix="fix data.path, data.dtype or the vocabulary, as the message says", source="training/tokens.py",
         checked_by=("pod",))
register("KT209", "error", "checkpoint storage unusable",
         rationale="Found by the ranks, at start (a probe write) or when a save fails: a full disk or quota, a "
                   "read-only or missing volume, or no permission. Retrying would redo every step since the last "
                   "checkpoint and fail the same way, so the rank exits 3, which every target treats as permanent, "
                   "with one line naming the folder and the cause.",
         fix="free space or grow the volume (or lower checkpoint.keep), mount it read-write and writable by the "
             "pod's user; the run resumes from its newest checkpoint", source="kubetrain_runtime/checkpoint.py", checked_by=("pod",))
register("KT210", "error", "training diverged",
         rationale="Non-finite steps are skipped, and a streak of them rolls back to the newest checkpoint past the "
                   "batches that caused them; when that happens more than resilience.max_rollbacks times, or "
                   "with no checkpoint to return to, the learning rate or the data is the cause, not bad luck: the "
                   "rank exits 4, which every target treats as permanent.",
         fix="lower optimizer.lr or raise warmup_steps, check the data for bad samples", source="training/trainer.py", checked_by=("pod",))
register("KT230", "error", "Hugging Face model files missing or unreadable",
         rationale="Nothing is downloaded at run time (the hub is off in every pod): the model's config.json and "
                   "safetensors weights must be on a mounted volume. `python -m training --check`, the pod's first "
                   "step, reads them before torchrun starts, so a wrong path fails the job at once, with the path.",
         fix="mount the volume that holds the model, or fix model.pretrained_path / model.config_path",
         source="training/hf_model.py", checked_by=("pod",))
register("KT231", "error", "Hugging Face model shape differs from its config.json",
         rationale="The run config states the model's shape (the compiler sizes cost and memory from it without "
                   "reading the volume); a config.json that says otherwise would train another model than the one "
                   "the pull request was reviewed for.",
         fix="copy the file's value into the run config field the message names", source="training/hf_model.py",
         checked_by=("pod",))
register("KT232", "error", "Hugging Face model section inconsistent",
         rationale="Heads must divide the width and key/value heads the heads; the config comes from one place "
                   "(the run config, config_path or pretrained_path); model.config must not restate the shape or "
                   "set what the trainer decides (use_cache, dtype, remote code); --export needs kind hf.",
         fix="change the field the message names", source=TRAINER, checked_by=("synth", "pod"))
register("KT234", "error", "data set missing or unreadable",
         rationale="Checked by `python -m training --check` before torchrun, and by each rank as it reads: a missing "
                   "path, a folder without parquet or JSON lines files or a save_to_disk state.json, a column that "
                   "is not there, token ids beyond the vocabulary, or fewer rows than ranks would otherwise crash "
                   "every rank (and be retried) or train on garbage.",
         fix="mount the data volume, fix data.path, data.text_field or data.tokens_field as the message says",
         source="training/documents.py", checked_by=("pod",))
register("KT235", "error", "tokenizer missing or unusable",
         rationale="Raw text is tokenized in the pod with the tokenizer from a local folder (never downloaded); "
                   "a folder that does not load, a tokenizer larger than the model's vocabulary, or no "
                   "end-of-sequence token to put between documents cannot train the model; one that AutoTokenizer "
                   "would not give back from the export (transformers builds Qwen2Tokenizer for every qwen2 model, "
                   "whatever tokenizer_config.json names) would make a model that does not load as it trained.",
         fix="point data.tokenizer at the folder the model's tokenizer was saved to (save_pretrained)",
         source="training/documents.py", checked_by=("pod",))
register("KT236", "error", "data set source incomplete",
         rationale="A parquet, JSON lines or datasets source needs its path, a tokenizer for raw text (or a column "
                   "of token ids and the token between documents); tokenizer settings on the synthetic or token-file "
                   "source would be ignored.",
         fix="set data.path and data.tokenizer (or data.tokens_field and data.eos_token_id)", source=TRAINER)
