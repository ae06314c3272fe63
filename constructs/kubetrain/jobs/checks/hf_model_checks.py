"""Job rules on a Hugging Face model (`model.kind: hf`) as the run config states it: a model_type transformers builds
as a causal LM without remote code, sequences within the model's positions, special token ids within its vocabulary.

Judged from the table generated out of transformers' registry (kubetrain.model.transformers_registry) with the
family's config defaults for what the run config leaves out; a model whose config is a file on a volume is judged
here by its type alone, and by the pod's `--check` with the real config.json (training/hf_model.py), in the same
words (training/hf_limits.py)."""

from __future__ import annotations

from collections.abc import Iterator

from kubetrain.jobs.checks.job_rules import JobRules, Violation
from kubetrain.jobs.spec import JobSpec
from kubetrain.model.transformers_registry import Family, transformers_registry
from kubetrain.rules.sources import HF_AUTO, HF_CONFIG, HF_REMOTE_CODE, TORCH_EMBEDDING, cite
from kubetrain_runtime.problems import Problem
from training.config import HFModelConfig, RunConfig
from training.hf_limits import TOKEN_ID_KEYS, model_type_problems, position_problems, token_id_problems

RULES = JobRules()  # this module's rules, in the order their problems are reported
job_rule = RULES.rule
RUN = "workload.run."


def _violations(problems: list[Problem]) -> Iterator[Violation]:
    for problem in problems:
        yield (RUN + problem.path, problem.message, problem.fix)


def _hf_model(job: JobSpec) -> HFModelConfig | None:
    model = job.trainer.run.model if job.trainer else None
    return model if isinstance(model, HFModelConfig) else None


def _inline_family(model: HFModelConfig) -> Family | None:
    """The family whose defaults fill what the run config leaves out, when the run config is the whole config."""
    if model.config_path or model.pretrained_path:
        return None  # the file's values, which only the pod reads
    family = transformers_registry().families.get(model.model_type)
    return family if family is not None and family.known else None


@job_rule("KT233", "error", "model type transformers does not build as a causal LM",
          rationale="The pod builds the model with AutoModelForCausalLM from its image's transformers, never with "
                    "remote code (trust_remote_code): a model_type that transformers does not know (a typo such as "
                    "llama3, or a model whose architecture lives in its hub repository's own code, such as "
                    "internlm2), or knows without a causal LM head, cannot be trained. Synth judges it from the "
                    "table generated out of transformers' registry (its version is in the message); the pod "
                    "judges it again with its own transformers and the config.json's auto_map.",
          fix="use a model_type AutoModelForCausalLM builds (llama, qwen2, mistral, ...; the message suggests the "
              "closest), or convert a remote-code checkpoint to one of them",
          source=cite(HF_AUTO, HF_REMOTE_CODE, "training/hf_limits.py"), checked_by=("synth", "pod"))
def model_type_known(job: JobSpec) -> Iterator[Violation]:
    model = _hf_model(job)
    if model is None:
        return
    registry = transformers_registry()
    yield from _violations(model_type_problems(model.model_type, known=registry.model_types, causal=registry.causal,
                                               version=registry.version))


@job_rule("KT239", "error", "sequence length past the model's positions",
          rationale="A model takes sequences up to its config's position limit (max_position_embeddings, GPT-2's "
                    "n_positions, MPT's max_seq_len, ...; the family's default when the config leaves it out): a "
                    "learned position table has no row past it, so the first step dies with an IndexError, and a "
                    "RoPE model would be trained past the context its config declares.",
          fix="lower data.seq_len to the limit, or raise the limit in the model's config",
          source=cite(HF_CONFIG, "training/hf_limits.py"), checked_by=("synth", "pod"))
def sequence_within_positions(job: JobSpec) -> Iterator[Violation]:
    model = _hf_model(job)
    family = _inline_family(model) if model else None
    if family is None:
        return
    key, limit, given = family.position_limit(model.config)
    source = "model.config" if given else f"{model.model_type}'s default"
    yield from _violations(position_problems(job.trainer.run.data.seq_len, key, limit, source=source, in_file=False))


@job_rule("KT229", "error", "special token id outside the vocabulary",
          rationale="Token ids run from 0 to vocab_size - 1. A pad_token_id past them (a family's default too: "
                    "Phi-3's is 32000) fails every rank as the embedding is built with it as padding_idx, and "
                    "torchrun would retry it; a bos or eos id past them is a token the model can never produce, so "
                    "generation never stops where training taught it to; data.eos_token_id past them is a token "
                    "the embedding has no row for.",
          fix="set the id to the tokenizer's (model.config.pad_token_id, data.eos_token_id, ...), below vocab_size",
          source=cite(TORCH_EMBEDDING, HF_CONFIG, "training/hf_limits.py"), checked_by=("synth", "pod"))
def token_ids_in_vocabulary(job: JobSpec) -> Iterator[Violation]:
    run = job.trainer.run if job.trainer else None
    if run is None:
        return
    yield from _violations(_run_token_id_problems(run))


def _run_token_id_problems(run: RunConfig) -> list[Problem]:
    """The run config's own special token ids against its vocabulary: data.eos_token_id, the ids model.config
    sets, and the family's default pad_token_id when the config leaves it out: the one id the model is built with
    (a family's default bos and eos matter only to generation, and the tokenizer's are what training used)."""
    vocab = run.model.vocab_size
    ids, sources, fields, settings = {}, {}, {}, {}
    model = run.model if isinstance(run.model, HFModelConfig) else None
    family = _inline_family(model) if model else None
    if family is not None:
        defaults = dict(family.token_ids)
        for name in TOKEN_ID_KEYS:
            given = name in model.config
            if given or (name == "pad_token_id" and defaults.get(name) is not None):
                ids[name] = model.config[name] if given else defaults[name]
                sources[name] = "model.config's" if given else f"{model.model_type}'s default"
                fields[name] = settings[name] = f"model.config.{name}"
    problems = token_id_problems(ids, vocab, sources=sources, fields=fields, settings=settings)
    if run.data.eos_token_id is not None:
        problems += token_id_problems({"eos_token_id": run.data.eos_token_id}, vocab,
                                      sources={"eos_token_id": "data's"}, fields={"eos_token_id": "data.eos_token_id"},
                                      settings={"eos_token_id": "data.eos_token_id"})
    return problems
