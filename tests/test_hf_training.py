"""Hugging Face causal LMs on real data sets: five families under torchrun with two CPU ranks, trained from
parquet with a local tokenizer, killed with SIGKILL and resumed bit-exactly, and exported into folders that
transformers loads as they trained (weights, logits, tokenizer ids, special tokens, generation).

Every model and tokenizer is built here, tiny, from code: nothing is downloaded (the runtime switches the hub
off, and so does this module before transformers is imported).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
from pathlib import Path

import pytest
import yaml
from conftest import kubetrain, run

os.environ["HF_HUB_OFFLINE"] = "1"
torch = pytest.importorskip("torch", reason="the training runtime needs torch: pip install -e '.[train]'")
transformers = pytest.importorskip("transformers", reason="Hugging Face models need the train extra")
pq = pytest.importorskip("pyarrow.parquet")

from training.config import DataConfig, RunConfig  # noqa: E402
from training.documents import DocumentLoader  # noqa: E402
from training.hf_export import check_tokenizer, write_tokenizer  # noqa: E402
from training.hf_model import build, model_config  # noqa: E402

WORDS = ("the cat sat on a mat while rain fell and dogs ran far over hills to see what lay beyond the river "
         "bank where old trees grew").split()
# Documents of different lengths (some shorter than a sequence, some longer): packing crosses their boundaries.
DOCUMENTS = [" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(3 + (i * 5) % 23)) for i in range(60)]
SHAPE = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
         "intermediate_size": 64, "vocab_size": 64}
CONFIG_CLASSES = {"llama": "LlamaConfig", "qwen2": "Qwen2Config", "mistral": "MistralConfig",
                  "gemma": "GemmaConfig", "phi3": "Phi3Config"}
# What a family needs beyond the shape at this size: Gemma's head_dim defaults to 256, Phi3's pad and eos to 32000
# (past a vocabulary of 64). None of these ids is the tokenizer's: the export must name the tokenizer's own.
FAMILY_CONFIG = {"gemma": {"head_dim": 8}, "phi3": {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 3}}
END_OF_TEXT = 0  # the tokenizers' end-of-text id: no family's default eos


def make_tokenizer(folder: Path, family: str = "llama") -> Path:
    """A tokenizer trained on the documents, saved as transformers saves one, its end-of-text token id 0. Word-level
    (a tokenizers.Tokenizer in PreTrainedTokenizerFast, with eos, unk and pad), but for qwen2: transformers gives
    every qwen2 model its Qwen2Tokenizer (byte-level BPE), so a qwen2 model trains with one of those."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    if family == "qwen2":
        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.train_from_iterator(DOCUMENTS, trainers.BpeTrainer(vocab_size=SHAPE["vocab_size"],
                                                                     special_tokens=["<|endoftext|>"]))
        bpe = json.loads(tokenizer.to_str())["model"]
        merges = [tuple(merge) for merge in bpe["merges"]]
        transformers.Qwen2Tokenizer(vocab=bpe["vocab"], merges=merges).save_pretrained(folder)
        return folder
    tokenizer = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator(DOCUMENTS, trainers.WordLevelTrainer(special_tokens=["<eos>", "<unk>", "<pad>"]))
    wrapped = transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>", eos_token="<eos>",
                                                   pad_token="<pad>")
    wrapped.save_pretrained(folder)
    return folder


def write_parquet(path: Path, documents: list[str] = DOCUMENTS, row_group_size: int = 16) -> Path:
    import pyarrow as pa

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": list(range(len(documents))), "text": documents}), path,
                   row_group_size=row_group_size)
    return path


def hf_config(family: str, **extra):
    return getattr(transformers, CONFIG_CLASSES[family])(**{**SHAPE, **FAMILY_CONFIG.get(family, {}), **extra})


def run_config(tmp: Path, family: str, model_source: dict, **overrides) -> dict:
    family_config = {"config": FAMILY_CONFIG[family]} if family in FAMILY_CONFIG and not model_source else {}
    return {
        "model": {"kind": "hf", "model_type": family, **SHAPE, **family_config, **model_source},
        "data": {"source": "parquet", "path": str(tmp / "data"), "tokenizer": str(tmp / "tokenizer"), "seq_len": 16},
        "optimizer": {"lr": 1e-2, "min_lr": 1e-3, "warmup_steps": 2},
        "batch": {"global_size": 4, "micro_size": 2},
        "strategy": {"name": "fsdp", "activation_checkpointing": True},
        "max_steps": 8, "seed": 3, "log_interval": 1, "metrics": {"port": 0},
        **overrides,
    }


def train(config: dict, folder: Path, *args: str, env: dict | None = None, expect: int = 0,
          nproc: int = 2) -> list[dict]:
    """`python -m training` under the pods' torchrun with `nproc` ranks (1: alone, as `--export` on request is
    documented)."""
    folder.mkdir(parents=True, exist_ok=True)
    config = {**config, "checkpoint": {"dir": str(folder / "ckpt"), "interval": 3, "keep": 2}}
    path = folder / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    launcher = ["-m", "kubetrain_runtime.torchrun", "--standalone", f"--nproc-per-node={nproc}"] if nproc > 1 else []
    result = run([sys.executable, *launcher, "-m", "training", "--config", str(path), *args], env=env)
    assert result.returncode == expect, result.stdout[-3000:] + result.stderr[-3000:]
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def digest(state: dict) -> str:
    """training.trainer.Trainer.weights_digest, of a plain state dict."""
    sha = hashlib.sha256()
    for name in sorted(state):
        sha.update(name.encode())
        sha.update(state[name].detach().float().cpu().contiguous().numpy().tobytes())
    return sha.hexdigest()


@pytest.mark.parametrize(("family", "source"), [
    ("llama", "inline"),  # random init from the config in the run config
    ("qwen2", "config_path"),  # random init from a config.json on a volume
    ("mistral", "pretrained_path"),  # fine-tuning safetensors written by save_pretrained
])
@pytest.mark.processes
def test_family_trains_resumes_bit_exactly_after_kill_and_loads_back(tmp_path, family, source):
    make_tokenizer(tmp_path / "tokenizer", family)
    write_parquet(tmp_path / "data" / "part-0.parquet", DOCUMENTS[:35])
    write_parquet(tmp_path / "data" / "part-1.parquet", DOCUMENTS[35:])
    model_source: dict = {}
    if source == "config_path":  # tied embeddings, as Qwen2.5's small models: one parameter in two places
        hf_config(family, tie_word_embeddings=True).save_pretrained(tmp_path / "config")
        model_source = {"config_path": str(tmp_path / "config" / "config.json"), "tie_word_embeddings": True}
    elif source == "pretrained_path":
        torch.manual_seed(11)
        transformers.AutoModelForCausalLM.from_config(hf_config(family)).save_pretrained(tmp_path / "pretrained")
        model_source = {"pretrained_path": str(tmp_path / "pretrained")}
    config = run_config(tmp_path, family, model_source)

    straight = train(config, tmp_path / "straight")
    losses = [r["loss"] for r in straight if r["event"] == "step"]
    assert len(losses) == 8 and sum(losses[-3:]) < sum(losses[:3]), losses
    finished = straight[-1]
    assert finished["event"] == "finished" and len(set(finished["weights_sha256_per_rank"])) == 1

    # Rank 1 is SIGKILLed at the start of step 6 (torchrun gives up: no restarts); the next run resumes at 3.
    train(config, tmp_path / "killed", env={"KUBETRAIN_FAULT": "crash:step=6:rank=1"}, expect=1)
    # On request (`python -m training --export`, one process: docs/guides/huggingface.md), the newest checkpoint's
    # weights, saved by two ranks, are exported without training.
    on_request = train(config, tmp_path / "killed", "--export", nproc=1)
    assert [r["event"] for r in on_request] == ["resumed", "exported"] and on_request[1]["step"] == 3
    assert (on_request[0]["saved_world_size"], on_request[0]["world_size"]) == (2, 1)
    transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "killed" / "ckpt" / "hf" / "step-3")
    resumed = train(config, tmp_path / "killed")
    assert resumed[0]["event"] == "resumed" and resumed[0]["step"] == 3
    assert [r["loss"] for r in resumed if r["event"] == "step"] == losses[3:]
    assert resumed[-1]["weights_sha256_per_rank"] == finished["weights_sha256_per_rank"]

    # The export is what transformers loads: the trained weights, bit for bit, and the same logits either way.
    exported = [r for r in resumed if r["event"] == "exported"]
    assert exported and exported[0]["path"] == str(tmp_path / "killed" / "ckpt" / "hf" / "step-8")
    models = [transformers.AutoModelForCausalLM.from_pretrained(folder / "ckpt" / "hf" / "step-8")
              for folder in (tmp_path / "straight", tmp_path / "killed")]
    assert type(models[0]).__name__.lower().startswith(family)
    assert digest(models[0].state_dict()) == finished["weights_sha256_per_rank"][0]
    tokens = torch.randint(0, SHAPE["vocab_size"], (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(models[0](tokens).logits, models[1](tokens).logits)
    assert_loads_as_trained(tmp_path / "killed" / "ckpt" / "hf" / "step-8", config, finished, tmp_path)


@pytest.mark.parametrize("family", ["gemma", "phi3"])
@pytest.mark.processes
def test_family_exports_as_trained(tmp_path, family):
    """The families the test above leaves out, trained and exported once each (FSDP2 over two ranks)."""
    make_tokenizer(tmp_path / "tokenizer", family)
    write_parquet(tmp_path / "data" / "part-0.parquet")
    config = run_config(tmp_path, family, {}, max_steps=4)
    records = train(config, tmp_path / "run")
    assert [r["event"] for r in records[-2:]] == ["exported", "finished"]
    assert_loads_as_trained(Path(records[-2]["path"]), config, records[-1], tmp_path)


class ForceEndOfText(transformers.LogitsProcessor):
    """Greedy decoding that picks the end-of-text token as the second new token, and never before."""

    def __init__(self, prompt_len: int):
        self.prompt_len = prompt_len

    def __call__(self, input_ids, scores):
        forced = scores.clone()
        if input_ids.shape[1] == self.prompt_len + 1:
            forced[:, :] = -float("inf")
            forced[:, END_OF_TEXT] = 0
        else:
            forced[:, END_OF_TEXT] = -float("inf")
        return forced


def assert_loads_as_trained(export: Path, config: dict, finished: dict, tmp: Path) -> None:
    """What a user of the export gets from transformers: the trained weights and the trainer's logits, the
    training ids from AutoTokenizer, the trained special tokens in both configs with the KV cache on, generate
    stopping at the trained end-of-text token, and nothing of the machine it was trained on."""
    trained_tokenizer = transformers.AutoTokenizer.from_pretrained(config["data"]["tokenizer"])  # as the loader
    model = transformers.AutoModelForCausalLM.from_pretrained(export)
    assert digest(model.state_dict()) == finished["weights_sha256_per_rank"][0]
    tokenizer = transformers.AutoTokenizer.from_pretrained(export)
    text = [*DOCUMENTS[:8], "a word the tokenizer never saw"]
    assert tokenizer(text)["input_ids"] == trained_tokenizer(text)["input_ids"]
    assert tokenizer.eos_token_id == END_OF_TEXT == trained_tokenizer.eos_token_id

    # The trainer's own model (built as the trainer builds it: no KV cache, its config's special tokens) with the
    # exported weights computes the export's logits exactly.
    trainer_model = build(RunConfig.model_validate(config).model, torch.device("cpu"))
    trainer_model.load_state_dict(model.state_dict())
    ids = torch.tensor([trained_tokenizer(DOCUMENTS[0])["input_ids"]])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, trainer_model(ids).logits)

    trained_ids = {"bos_token_id": trained_tokenizer.bos_token_id, "eos_token_id": END_OF_TEXT,
                   "pad_token_id": trained_tokenizer.pad_token_id}
    for name in ("config.json", "generation_config.json"):
        written = json.loads((export / name).read_text())
        assert {key: written.get(key) for key in trained_ids} == trained_ids, name
        assert written["use_cache"] is True, name
    assert model.config.use_cache and model.generation_config.use_cache

    # Generation stops right after the trained end-of-text token, through generation_config alone.
    prompt = tokenizer(DOCUMENTS[1], return_tensors="pt")["input_ids"]
    out = model.generate(prompt, max_new_tokens=8, do_sample=False, logits_processor=[ForceEndOfText(prompt.shape[1])])
    assert out.shape[1] == prompt.shape[1] + 2 and out[0, -1] == END_OF_TEXT

    tokenizer_config = json.loads((export / "tokenizer_config.json").read_text())
    assert tokenizer_config["tokenizer_class"] == type(trained_tokenizer).__name__.replace(
        "TokenizersBackend", "PreTrainedTokenizerFast")  # the class that both transformers 4 and 5 know
    assert {"eos_token", "unk_token"} <= set(tokenizer_config) and "local_files_only" not in tokenizer_config
    machine = (str(tmp), socket.gethostname())
    for file in export.iterdir():
        if file.suffix != ".safetensors":
            assert not any(part in file.read_text() for part in machine), file


def write_sources(tmp: Path) -> dict[str, dict]:
    """The same documents as parquet (raw text, two files), JSON lines (token ids, with blank lines) and a
    datasets save_to_disk folder (raw text, several arrow files)."""
    datasets = pytest.importorskip("datasets")
    tokenizer = transformers.AutoTokenizer.from_pretrained(make_tokenizer(tmp / "tokenizer"))
    write_parquet(tmp / "parquet" / "a.parquet", DOCUMENTS[:25], row_group_size=4)
    write_parquet(tmp / "parquet" / "b.parquet", DOCUMENTS[25:], row_group_size=7)
    (tmp / "jsonl").mkdir()
    for name, part in (("a.jsonl", DOCUMENTS[:25]), ("b.jsonl", DOCUMENTS[25:])):
        lines = [json.dumps({"ids": tokenizer(text)["input_ids"]}) + ("\n\n" if i % 9 == 0 else "\n")
                 for i, text in enumerate(part)]
        (tmp / "jsonl" / name).write_text("".join(lines))
    datasets.Dataset.from_dict({"body": DOCUMENTS}).save_to_disk(tmp / "arrow", max_shard_size="1KB")
    assert len(list((tmp / "arrow").glob("*.arrow"))) > 1
    tokenizer_path = str(tmp / "tokenizer")
    return {"parquet": {"source": "parquet", "path": str(tmp / "parquet"), "tokenizer": tokenizer_path},
            "jsonl": {"source": "jsonl", "path": str(tmp / "jsonl"), "tokens_field": "ids",
                      "eos_token_id": END_OF_TEXT},
            "datasets": {"source": "datasets", "path": str(tmp / "arrow"), "text_field": "body",
                         "tokenizer": tokenizer_path}}


@pytest.mark.parametrize("rank", [0, 1])
def test_every_source_streams_the_same_packed_tokens_and_resumes_anywhere(tmp_path, rank):
    sources = write_sources(tmp_path)

    def loader(source: dict) -> DocumentLoader:
        return DocumentLoader(DataConfig(**source, seq_len=16), 64, micro_size=1, dp_rank=rank, dp_size=2)

    # 40 sequences of 16 tokens from ~450 tokens a rank: past the end of the data, into a second epoch.
    reference = loader(sources["parquet"])
    expected = [reference.next_sequence() for _ in range(40)]
    assert all(len(sequence) == 17 for sequence in expected)
    for sequence, following in zip(expected, expected[1:], strict=False):
        assert following[0] == sequence[-1]  # the last target is the next sequence's first input
    for name, source in sources.items():
        straight = loader(source)
        assert [straight.next_sequence() for _ in range(40)] == expected, name
        for cut in (1, 7, 13, 29):  # resume from the position saved after `cut` sequences
            first = loader(source)
            for _ in range(cut):
                first.next_sequence()
            again = loader(source)
            again.load_state_dict(json.loads(json.dumps(first.state_dict())))
            assert [again.next_sequence() for _ in range(40 - cut)] == expected[cut:], (name, cut)


def check(config: dict, tmp: Path, capsys: pytest.CaptureFixture[str] | None = None) -> list[str]:
    """`python -m training --check` (the pod's first step, before torchrun): its error lines, the exit code 2 when
    there are any. Given `capsys`, the same entry point (training.__main__.main) is called in this process."""
    path = tmp / "run.yaml"
    path.write_text(yaml.safe_dump({**config, "checkpoint": {"dir": str(tmp / "ckpt")}}))
    argv = ["--config", str(path), "--check"]
    if capsys is None:
        result = run([sys.executable, "-m", "training", *argv])
        code, stderr = result.returncode, result.stderr
    else:
        from training.__main__ import main

        capsys.readouterr()
        code, stderr = main(argv), capsys.readouterr().err
    assert code == (2 if stderr else 0), stderr
    return stderr.splitlines()


@pytest.mark.processes
def test_check_names_each_missing_or_wrong_path_before_torchrun(tmp_path, monkeypatch, capsys):
    """The good config and one missing path through a process of their own (the exit code the pod's launcher
    reads); every other mistake through the same entry point in this process."""
    make_tokenizer(tmp_path / "tokenizer")
    write_parquet(tmp_path / "data" / "part-0.parquet")
    hf_config("llama", hidden_size=48).save_pretrained(tmp_path / "config")
    good = run_config(tmp_path, "llama", {})
    assert check(good, tmp_path) == []
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.setenv(name, "1")  # what the check sets for itself (training.hf_model.offline), undone after

    def lines(model: dict | None = None, data: dict | None = None, in_process: bool = True) -> list[str]:
        return check({**good, "model": {**good["model"], **(model or {})}, "data": {**good["data"], **(data or {})}},
                     tmp_path, capsys if in_process else None)

    (missing,) = lines(model={"pretrained_path": str(tmp_path / "absent")}, in_process=False)
    assert f"model.pretrained_path: cannot read {tmp_path / 'absent' / 'config.json'}" in missing and "[KT230]" in missing
    (shape,) = lines(model={"config_path": str(tmp_path / "config")})
    assert "model.hidden_size: 32 but" in shape and "says 48 [KT231]" in shape and "hidden_size: 48" in shape
    (unknown,) = lines(model={"model_type": "no-such-model"})
    assert "model.model_type" in unknown and "[KT233]" in unknown
    (no_data,) = lines(data={"path": str(tmp_path / "nothing")})
    assert f"data.path: {tmp_path / 'nothing'} does not exist [KT234]" in no_data
    (no_column,) = lines(data={"text_field": "body"})
    assert "data.text_field" in no_column and "no column 'body' (it has id, text) [KT234]" in no_column
    (no_tokenizer,) = lines(data={"tokenizer": str(tmp_path / "data")})
    assert "data.tokenizer: cannot load the tokenizer" in no_tokenizer and "[KT235]" in no_tokenizer
    (too_big,) = lines(model={"vocab_size": 8})
    assert "the tokenizer has" in too_big and "vocab_size 8 [KT235]" in too_big
    (not_given_back,) = lines(model={"model_type": "qwen2"})
    assert "data.tokenizer: an export of this qwen2 model would not give back the tokenizer" in not_given_back
    assert "builds Qwen2Tokenizer" in not_given_back and "[KT235]" in not_given_back


def test_a_bare_tokenizer_json_is_exported_with_its_special_tokens_named(tmp_path):
    """A tokenizers.Tokenizer saved as tokenizer.json alone (data.eos_token_id says the end of text): the export's
    tokenizer_config.json names PreTrainedTokenizerFast, the end-of-text token as eos and the unknown token."""
    from tokenizers import Tokenizer

    bare = Tokenizer.from_file(str(make_tokenizer(tmp_path / "full") / "tokenizer.json"))
    (tmp_path / "tokenizer").mkdir()
    bare.save(str(tmp_path / "tokenizer" / "tokenizer.json"))
    config = run_config(tmp_path, "llama", {})
    run = RunConfig.model_validate({**config, "data": {**config["data"], "eos_token_id": END_OF_TEXT}})
    trained = transformers.AutoTokenizer.from_pretrained(tmp_path / "tokenizer")
    assert trained.eos_token is None and trained.unk_token is None
    export = tmp_path / "export"
    model_config(run.model).save_pretrained(export)
    assert write_tokenizer(trained, END_OF_TEXT, export) is None
    saved = json.loads((export / "tokenizer_config.json").read_text())
    assert (saved["tokenizer_class"], saved["eos_token"], saved["unk_token"]) == ("PreTrainedTokenizerFast", "<eos>",
                                                                                 "<unk>")
    loaded = transformers.AutoTokenizer.from_pretrained(export)
    text = [*DOCUMENTS[:8], "<eos> never seen <unk>"]
    as_trained = transformers.AutoTokenizer.from_pretrained(tmp_path / "tokenizer")  # write_tokenizer named its eos
    assert loaded(text)["input_ids"] == as_trained(text)["input_ids"]
    assert (loaded.eos_token_id, loaded.unk_token_id) == (END_OF_TEXT, 1)


@pytest.mark.parametrize(("family", "tokenizer_of", "given_back"), [
    ("llama", "llama", True),  # a tokenizers.Tokenizer in PreTrainedTokenizerFast
    ("mistral", "llama", True),
    ("gemma", "llama", True),
    ("phi3", "llama", True),
    ("qwen2", "qwen2", True),  # Qwen2Tokenizer, the class transformers gives every qwen2 model
    ("llama", "qwen2", True),  # ... and that tokenizer under another model type
    ("qwen2", "llama", False),  # transformers builds Qwen2Tokenizer whatever tokenizer_config.json names
])
def test_the_export_gives_back_the_training_tokenizer_or_check_says_why(tmp_path, family, tokenizer_of, given_back):
    """training.hf_export writes the tokenizer next to the model's config.json and loads the folder back with
    AutoTokenizer, as a user of the export would; `--check` does the same before a run starts."""
    make_tokenizer(tmp_path / "tokenizer", tokenizer_of)
    run_config_ = RunConfig.model_validate(run_config(tmp_path, family, {}))
    problems = check_tokenizer(run_config_, model_config(run_config_.model))
    assert (problems == []) == given_back, problems
    if not given_back:
        (problem,) = problems
        assert problem.code == "KT235" and problem.path == "data.tokenizer" and "qwen2" in problem.fix


@pytest.mark.parametrize(("family", "tied"), [("llama", False), ("mistral", True), ("qwen2", False)])
def test_the_compilers_parameter_count_is_the_models(family, tied):
    """training/flops.py counts an HF model from the run config's shape alone (cost, checkpoint size, memory)."""
    from training.config import HFModelConfig
    from training.flops import parameter_count

    model = transformers.AutoModelForCausalLM.from_config(hf_config(family, tie_word_embeddings=tied))
    real = sum(p.numel() for p in model.parameters())
    counted = parameter_count(HFModelConfig(kind="hf", model_type=family, **SHAPE, tie_word_embeddings=tied))
    biases = 0 if family != "qwen2" else SHAPE["num_hidden_layers"] * (32 + 2 * 16)  # Qwen2's q, k, v biases
    assert counted + biases == real


@pytest.mark.processes
def test_the_dev_fleets_fine_tune_runs_locally_from_dist(tmp_path):
    """`kubetrain run-local dev/tiny-llama-sft`: the committed job, its claims mapped to local folders that hold a
    pretrained Llama-style checkpoint, its tokenizer and a parquet data set."""
    models = tmp_path / "volumes" / "datasets" / "models" / "tiny-llama"
    make_tokenizer(models)
    torch.manual_seed(5)
    transformers.AutoModelForCausalLM.from_config(transformers.LlamaConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, intermediate_size=128,
        vocab_size=512)).save_pretrained(models)
    write_parquet(tmp_path / "volumes" / "datasets" / "text" / "tiny-stories" / "part-0.parquet")
    result = kubetrain("run-local", "dev/tiny-llama-sft", "--steps", "12", "--workdir", str(tmp_path))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    records = [json.loads(line.split("] ", 1)[1]) for line in result.stdout.splitlines() if "] {" in line]
    assert [r["step"] for r in records if r["event"] == "step"] == list(range(1, 13))
    finished = records[-1]
    assert finished["event"] == "finished" and len(set(finished["weights_sha256_per_rank"])) == 1
    export = tmp_path / "volumes" / "checkpoints" / "tiny-llama-sft" / "hf" / "step-12"
    model = transformers.AutoModelForCausalLM.from_pretrained(export)
    assert digest(model.state_dict()) == finished["weights_sha256_per_rank"][0]


def test_the_warm_process_imports_transformers_for_a_hugging_face_run_alone(tmp_path):
    """A rank of a Hugging Face model finds transformers imported by its warm process (a restart would import it
    again otherwise); a GPT run's warm process, or one whose config does not load, imports the trainer alone."""
    import training.__main__ as entry

    hf, gpt, broken = tmp_path / "hf.yaml", tmp_path / "gpt.yaml", tmp_path / "broken.yaml"
    hf.write_text(yaml.safe_dump(run_config(tmp_path, "llama", {})))
    gpt.write_text(yaml.safe_dump({**run_config(tmp_path, "llama", {}), "model": {"kind": "gpt"}}))
    broken.write_text("model: [")
    assert entry.preloads(["--config", str(hf)]) == ("training.trainer", *entry.HF_PRELOADED)
    assert entry.preloads(["--config", str(gpt)]) == ("training.trainer",)
    assert entry.preloads(["--config", str(broken)]) == entry.preloads(["--bogus"]) == ("training.trainer",)
