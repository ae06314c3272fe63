"""A Hugging Face model's mistakes, refused at synth with a fix, and again by the pod's `--check` for what only the
pod reads: model types (KT233), positions (KT239), special token ids (KT229), and every path of the run config
against the job's volumes (KT237, KT238).

Synth judges from the table generated out of transformers' registry (kubetrain/model/transformers_registry.json);
the pod from its own transformers and the real config.json, built here, tiny. Nothing is downloaded.
"""

from __future__ import annotations

import json
import os
import sys
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT, run
from kubetrain import App, Cluster, TrainingJob
from kubetrain.model.transformers_registry import REGISTRY_FILE, transformers_registry
from kubetrain.pipeline import fleet_findings, synth
from pydantic import BaseModel

from kubetrain_runtime.config_paths import config_paths, path_use
from kubetrain_runtime.problems import ConfigError
from training.config import RunConfig

os.environ["HF_HUB_OFFLINE"] = "1"

SHAPE = {"kind": "hf", "model_type": "llama", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "intermediate_size": 64, "vocab_size": 256}
DATA = {"source": "parquet", "path": "/fsx/data/train", "tokenizer": "/fsx/models/tiny", "seq_len": 64}
RUN = {"model": SHAPE, "data": DATA, "batch": {"global_size": 4, "micro_size": 2}, "max_steps": 10,
       "optimizer": {"warmup_steps": 1}, "checkpoint": {"dir": "/ckpt/run"}}
CKPT = {"name": "ckpt", "claim": "ckpt", "mount_path": "/ckpt"}
FSX = {"name": "fsx", "claim": "fsx", "mount_path": "/fsx", "read_only": True}
JOB = {"image": "img:1", "nodes": 1, "procs_per_node": 2, "resources": {"cpu": "4", "memory": "8Gi"},
       "volumes": [CKPT, FSX]}
NEW_RULES = ("KT229", "KT233", "KT237", "KT238", "KT239")


def hf_run(model: dict | None = None, data: dict | None = None, **sections: Any) -> dict:
    return {**RUN, "model": {**SHAPE, **(model or {})}, "data": {**DATA, **(data or {})}, **sections}


def problems(run_config: dict) -> list[tuple[str, str, str, str]]:
    """(code, field, message, fix) of everything the fleet's definition reports for a job with this run config."""
    app = App()
    TrainingJob(Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"]), "job",
                {**JOB, "workload": {"kind": "trainer", "run": run_config}})
    return [(f.problem.code, f.problem.path, f.problem.message, f.problem.fix) for f in fleet_findings(app)]


# (what is wrong, the run config, the rule, the field it names, words of the message and the fix)
REFUSED = [
    ("a model type no transformers has", hf_run({"model_type": "llama3"}), "KT233", "model.model_type",
     ["'llama3' is not a model type of transformers", "did you mean llama?"]),
    ("a remote-code model", hf_run({"model_type": "internlm2"}), "KT233", "model.model_type",
     ["'internlm2' is not a model type", "trust_remote_code", "kubetrain never runs"]),
    ("a model without a causal LM head", hf_run({"model_type": "clip"}), "KT233", "model.model_type",
     ["without a causal", "decoder-only"]),
    ("GPT-2 past its default n_positions", hf_run({"model_type": "gpt2"}, {"seq_len": 2048}), "KT239",
     "data.seq_len", ["seq_len 2048 is past the model's n_positions 1024 (gpt2's default)", "at most 1024"]),
    ("GPT-2's limit set under its alias", hf_run({"model_type": "gpt2", "config": {"max_position_embeddings": 32}}),
     "KT239", "data.seq_len", ["max_position_embeddings 32 (model.config)",
                               "set model.config.max_position_embeddings: 64"]),
    ("Llama past the positions its config sets", hf_run({"config": {"max_position_embeddings": 32}}), "KT239",
     "data.seq_len", ["seq_len 64 is past the model's max_position_embeddings 32", "lower data.seq_len"]),
    ("Phi-3 from shape fields: its default pad", hf_run({"model_type": "phi3"}), "KT229",
     "model.config.pad_token_id", ["phi3's default pad_token_id 32000", "vocab_size 256", "crash",
                                   "set model.config.pad_token_id"]),
    ("an eos id past the vocabulary", hf_run({"config": {"eos_token_id": [2, 300]}}), "KT229",
     "model.config.eos_token_id", ["eos_token_id 300 is outside the vocabulary"]),
    ("the data's eos id past the vocabulary", hf_run(data={"tokens_field": "ids", "tokenizer": None,
                                                           "eos_token_id": 256}),
     "KT229", "data.eos_token_id", ["data's eos_token_id 256", "set data.eos_token_id"]),
    ("a hub id for the model", hf_run({"pretrained_path": "meta-llama/Llama-3.1-8B"}), "KT237",
     "model.pretrained_path", ["is a Hugging Face Hub id", "HF_HUB_OFFLINE",
                               "hf download meta-llama/Llama-3.1-8B --local-dir /ckpt/models/Llama-3.1-8B"]),
    ("a laptop's cache", hf_run(data={"tokenizer": "~/.cache/huggingface/hub/tok"}), "KT237", "data.tokenizer",
     ["home folder", "volumes: ckpt at /ckpt, fsx at /fsx"]),
    ("the volume's path on another machine", hf_run(data={"path": "/mnt/fsx/data/train"}), "KT237", "data.path",
     ["not under any volume the pod mounts", "did you mean /fsx/data/train?"]),
    ("a prefix that is no mount", hf_run({"config_path": "/fsxdata/models/config.json"}), "KT237",
     "model.config_path", ["/fsxdata/models/config.json is not under any volume"]),
    ("a path that climbs out of its volume", hf_run({"config_path": "/fsx/../etc/config.json"}), "KT237",
     "model.config_path", ["is not under any volume"]),
    ("a relative data path", hf_run(data={"path": "./data/train.parquet"}), "KT237", "data.path", ["is relative"]),
    ("TensorBoard on no volume", hf_run(metrics={"tensorboard_dir": "/var/tb"}), "KT237",
     "metrics.tensorboard_dir", ["/var/tb is not under any volume"]),
    ("profiles on no volume", hf_run(profiling={"enabled": True, "start_step": 2, "dir": "/tmp/p"}), "KT237",
     "profiling.dir", ["/tmp/p is not under any volume"]),
    ("the export on a read-only volume", hf_run({"export_dir": "/fsx/models/out"}), "KT238", "model.export_dir",
     ["is on read-only volume fsx", "mounted at: /ckpt"]),
    ("checkpoints on a read-only volume", hf_run(checkpoint={"dir": "/fsx/ckpt"}), "KT238", "checkpoint.dir",
     ["is on read-only volume fsx"]),
]


@pytest.mark.parametrize(("case", "run_config", "code", "field", "words"), REFUSED, ids=[c[0] for c in REFUSED])
def test_synth_refuses_the_mistake_with_its_field_and_fix(case, run_config, code, field, words):
    found = [p for p in problems(run_config) if p[0] in NEW_RULES]
    assert [(c, f) for c, f, *_ in found] == [(code, f"workload.run.{field}")], found
    text = " ".join(found[0][2:])
    assert all(word in text for word in words), text


# What each of them looks like once fixed, and what synth leaves to the pod.
ACCEPTED = [
    ("llama, every path on a volume, the export writable", hf_run({"export_dir": "/ckpt/export"})),
    ("Llama 3 says llama", hf_run(data={"seq_len": 2048})),
    ("GPT-2 within n_positions", hf_run({"model_type": "gpt2"}, {"seq_len": 1024})),
    ("GPT-2 with more positions", hf_run({"model_type": "gpt2", "config": {"n_positions": 2048}}, {"seq_len": 2048})),
    ("Phi-3 with the tokenizer's pad", hf_run({"model_type": "phi3", "config": {"pad_token_id": 0}})),
    ("a family's default bos and eos, replaced by the tokenizer's at export", hf_run({"model_type": "gpt2"})),
    ("a file's limits are the pod's to judge", hf_run({"pretrained_path": "/fsx/models/tiny"}, {"seq_len": 65536})),
    ("a multimodal family's decoder is the pod's to judge", hf_run({"model_type": "gemma3"}, {"seq_len": 65536})),
    ("the fast tier's folder gets kubetrain's emptyDir",
     hf_run(checkpoint={"dir": "/ckpt/run", "local_dir": "/local/ckpt", "interval": "auto"})),
    ("a read-only data volume is fine to read", hf_run(data={"path": "/fsx/data/train.jsonl", "source": "jsonl"})),
]


@pytest.mark.parametrize(("case", "run_config"), ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_synth_accepts_the_fixed_model(case, run_config):
    assert [p for p in problems(run_config) if p[0] in NEW_RULES] == []


def test_synth_stops_and_writes_nothing(tmp_path: Path):
    app = App()
    TrainingJob(Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"]), "job",
                {**JOB, "workload": {"kind": "trainer", "run": hf_run({"model_type": "phi3"}, {"seq_len": 8192})}})
    with pytest.raises(ConfigError) as caught:
        synth(app, tmp_path / "dist", validate=False)
    assert {p.code for p in caught.value.problems} >= {"KT229", "KT239"}
    assert not (tmp_path / "dist").exists()


def _path_like_fields(model: type[BaseModel], prefix: str = "") -> list[tuple[str, str | None]]:
    """Every string field of the run config whose name says it holds a file or folder, with what it declares."""
    found = []
    for name, info in model.model_fields.items():
        members = [info.annotation, *typing.get_args(info.annotation)]
        for member in members:
            for inner in [member, *typing.get_args(member)]:
                if isinstance(inner, type) and issubclass(inner, BaseModel):
                    found += _path_like_fields(inner, f"{prefix}{name}.")
        holds_text = any(inner is str for member in members for inner in [member, *typing.get_args(member)])
        if holds_text and any(word in name for word in ("dir", "path", "tokenizer", "file")):
            found.append((prefix + name, path_use(model, name)))
    return found


def test_every_path_field_of_the_run_config_declares_whether_it_is_read_or_written():
    """The volume rules (KT237, KT238) cover the fields that declare READS or WRITES: a path field added without
    a declaration would escape them."""
    fields = dict(_path_like_fields(RunConfig))
    assert {name for name, use in fields.items() if use is None} == set(), fields
    assert {"model.pretrained_path", "model.config_path", "model.export_dir", "data.path", "data.tokenizer",
            "checkpoint.dir", "checkpoint.local_dir", "metrics.tensorboard_dir", "profiling.dir"} <= set(fields)
    config = RunConfig.model_validate(hf_run({"export_dir": "/ckpt/x"}))
    assert [(p.field, p.writes) for p in config_paths(config)] == [
        ("model.export_dir", True), ("data.path", False), ("data.tokenizer", False), ("checkpoint.dir", True)]


def test_the_shipped_table_is_what_the_installed_transformers_says():
    """scripts/generate_transformers_registry.py, run against the transformers installed here, writes the table
    shipped (when it is the version the table names)."""
    transformers = pytest.importorskip("transformers")
    registry = transformers_registry()
    if transformers.__version__ != registry.version:
        pytest.skip(f"the table is of transformers {registry.version}, {transformers.__version__} is installed")
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import generate_transformers_registry as generator
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    assert generator.render(generator.build()) == REGISTRY_FILE.read_text(encoding="utf-8")
    phi3 = registry.families["phi3"]
    assert dict(phi3.token_ids)["pad_token_id"] == 32000 and phi3.position_keys == ("max_position_embeddings",)
    assert registry.families["gpt2"].position_keys == ("n_positions", "max_position_embeddings")


# -- the pod ----------------------------------------------------------------------------------------------------


def _tiny(family: str, folder: Path, **fields: Any) -> Path:
    transformers = pytest.importorskip("transformers")
    shape = {k: v for k, v in SHAPE.items() if k not in ("kind", "model_type")}
    transformers.AutoConfig.for_model(family, **shape, **fields).save_pretrained(folder)
    return folder


def _pod_check(tmp: Path, model: dict, seq_len: int = 64,
               capsys: pytest.CaptureFixture[str] | None = None) -> tuple[int, str]:
    """`python -m training --check`'s exit code and standard error; given `capsys`, the same entry point
    (training.__main__.main) called in this process."""
    config = {**RUN, "model": {**SHAPE, **model}, "data": {"source": "synthetic", "seq_len": seq_len},
              "checkpoint": {"dir": str(tmp / "ckpt")}}
    path = tmp / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    argv = ["--config", str(path), "--check"]
    if capsys is None:
        result = run([sys.executable, "-m", "training", *argv])
        return result.returncode, result.stderr
    from training.__main__ import main

    capsys.readouterr()
    return main(argv), capsys.readouterr().err


@pytest.mark.processes
def test_the_pods_check_refuses_what_only_the_pod_reads_and_exits_permanently(tmp_path, monkeypatch, capsys):
    """`python -m training --check`, the pod's step before torchrun: the real config.json's model type (with its
    auto_map), positions and token ids, and the family's default pad, each exit 2 (a permanent failure: not
    retried), one line with the rule and the fix. The first refusal and the fixed config run as processes of their
    own (the exit code the pod's launcher reads); the others call the same entry point in this process."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.setenv(name, "1")  # what the check sets for itself (training.hf_model.offline), undone after
    remote = tmp_path / "remote"
    remote.mkdir()
    (remote / "config.json").write_text(json.dumps({"model_type": "internlm2", "auto_map": {
        "AutoConfig": "configuration_internlm2.InternLM2Config",
        "AutoModelForCausalLM": "modeling_internlm2.InternLM2ForCausalLM"}}))
    cases = [
        ({"model_type": "phi3"}, 64, "model.config.pad_token_id", "phi3's default pad_token_id 32000", "KT229"),
        ({"model_type": "internlm2", "config_path": str(remote)}, 64, "model.model_type",
         "needs trust_remote_code (config.json's auto_map names modeling_internlm2.InternLM2ForCausalLM)", "KT233"),
        ({"model_type": "gpt2", "tie_word_embeddings": True,
          "config_path": str(_tiny("gpt2", tmp_path / "gpt2", n_positions=32, bos_token_id=1, eos_token_id=1))}, 64,
         "data.seq_len", "n_positions 32", "KT239"),
        ({"config_path": str(_tiny("llama", tmp_path / "llama", pad_token_id=300))}, 64, "model.config_path",
         "pad_token_id 300 is outside the vocabulary", "KT229"),
    ]
    for index, (model, seq_len, field, words, code) in enumerate(cases):
        exit_code, stderr = _pod_check(tmp_path, model, seq_len, capsys if index else None)
        assert exit_code == 2, stderr
        (line,) = stderr.splitlines()
        assert f": {field}: " in line and words in line and f"[{code}] fix: " in line, line
    exit_code, stderr = _pod_check(tmp_path, {"model_type": "phi3", "config": {"pad_token_id": 0}})
    assert exit_code == 0, stderr
