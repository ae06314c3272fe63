"""The run config, as the pod loads it: overrides, field-path errors, world-size rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubetrain_runtime.problems import ConfigError
from training.config import load_run_config

BASE = "batch: {global_size: 8, micro_size: 2}\nmax_steps: 5\n"
HF = ("model: {kind: hf, model_type: llama, hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4, "
      "intermediate_size: 128, vocab_size: 256}\n")


def config(tmp_path: Path, text: str = BASE) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(text)
    return path


def codes(exc: pytest.ExceptionInfo[ConfigError]) -> list[tuple[str, str]]:
    return [(p.code, p.path) for p in exc.value.problems]


def test_overrides_are_parsed_as_yaml(tmp_path):
    run = load_run_config(config(tmp_path), ["max_steps=30", "optimizer.lr=1e-3", "strategy.name=fsdp"])
    assert run.max_steps == 30 and run.optimizer.lr == 1e-3 and run.strategy.name == "fsdp"


def test_unknown_override_key_is_an_unknown_field(tmp_path):
    with pytest.raises(ConfigError) as exc:
        load_run_config(config(tmp_path), ["optimiser.lr=1"])
    assert codes(exc) == [("KT001", "optimiser")]
    assert "did you mean 'optimizer'?" in exc.value.problems[0].fix


def test_missing_and_invalid_fields_name_their_paths(tmp_path):
    with pytest.raises(ConfigError) as exc:
        load_run_config(config(tmp_path, "batch: {micro_size: 0}\nprecision: fp8\n"))
    assert set(codes(exc)) == {("KT002", "batch.global_size"), ("KT003", "batch.micro_size"),
                               ("KT002", "max_steps"), ("KT003", "precision")}
    assert str(tmp_path / "run.yaml") in exc.value.lines()[0]


def test_unreadable_or_non_mapping_config(tmp_path):
    with pytest.raises(ConfigError) as exc:
        load_run_config(tmp_path / "missing.yaml")
    assert codes(exc) == [("KT004", "")]
    with pytest.raises(ConfigError) as exc:
        load_run_config(config(tmp_path, "- a\n- b\n"))
    assert codes(exc) == [("KT003", "")]


def test_world_size_rule_and_accumulation(tmp_path):
    run = load_run_config(config(tmp_path))
    assert run.check_world_size(2) == [] and run.grad_accum_steps(2) == 2
    (problem,) = run.check_world_size(3)
    assert problem.code == "KT201" and "such as 6 or 12" in problem.fix


@pytest.mark.parametrize(("text", "overrides", "expected"), [
    (BASE + "optimizer: {lr: 1e-3}\noptimizer: {lr: 3e-4}\n", [], ("KT004", "")),
    (BASE, ["optimizer.lr=[1,"], ("KT005", "optimizer.lr")),
    (BASE, ["=3", "a..b=1"], ("KT005", "")),
    (BASE + "optimizer: {betas: [0.9, 1.5]}\n", [], ("KT003", "optimizer.betas.1")),
    (BASE + "optimizer: {lr: .nan}\n", [], ("KT003", "optimizer.lr")),
    (BASE + "data: {path: /data/tokens.bin}\n", [], ("KT205", "data.path")),
    (BASE + "data: {source: tokens, path: t.bin}\nmodel: {vocab_size: 100000}\n", [], ("KT206", "data.dtype")),
    (BASE + "data: {dtype: int8}\n", [], ("KT003", "data.dtype")),
    (BASE + "checkpoint: {local_dir: /local}\n", [], ("KT207", "checkpoint.local_interval")),
    (BASE + "checkpoint: {local_interval: 2}\n", [], ("KT207", "checkpoint.local_interval")),
    (BASE + "checkpoint: {interval: auto, local_dir: /l, local_interval: 2}\n", [], ("KT207", "checkpoint.local_interval")),
    (BASE + "checkpoint: {dir: /c/, local_dir: /c, local_interval: 2}\n", [], ("KT207", "checkpoint.local_dir")),
    (BASE, ["seed=4294967296"], ("KT003", "seed")),
    (BASE, ["model.mlp_ratio=0.001", "model.dim=16", "model.n_heads=4"], ("KT003", "model.mlp_ratio")),
    (BASE, ["resilience.collective_timeout_s=1e300"], ("KT003", "resilience.collective_timeout_s")),
    (BASE, ["metrics.port=70000"], ("KT003", "metrics.port")),
    (BASE + HF, ["model.hidden_size=62"], ("KT232", "model.num_attention_heads")),
    (BASE + HF, ["model.config={hidden_size: 64}"], ("KT232", "model.config")),
    (BASE + HF, ["model.config_path=/m/config.json", "model.pretrained_path=/m"], ("KT232", "model.config_path")),
    (BASE + HF, ["model.hiden_size=64"], ("KT001", "model.hiden_size")),  # the HF model's fields, not the GPT's
    (BASE + HF, ["model.kind=bert"], ("KT003", "model.kind")),
    (BASE + "data: {source: jsonl, path: /d, tokens_field: ids}\n", [], ("KT236", "data.eos_token_id")),
    (BASE + "data: {source: parquet, tokenizer: /t}\n", [], ("KT236", "data.path")),
    (BASE + "data: {source: tokens, path: t.bin, tokenizer: /t}\n", [], ("KT236", "data.source")),
    (BASE, ["profiling.start_step=2", "profiling.warmup=2"], ("KT003", "profiling.warmup")),
    (BASE, ["profiling.ranks=[0, 0]"], ("KT003", "profiling.ranks")),
    (BASE, ["profiling.activities=[gpu]"], ("KT003", "profiling.activities.0")),
    (BASE, ["profiling.activities=[]"], ("KT003", "profiling.activities")),
])
def test_config_is_strict_where_it_is_read(tmp_path, text, overrides, expected):
    with pytest.raises(ConfigError) as exc:
        load_run_config(config(tmp_path, text), overrides)
    assert expected in codes(exc)


def test_config_must_be_utf8(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_bytes(BASE.encode() + b"# caf\xe9\n")
    with pytest.raises(ConfigError) as exc:
        load_run_config(path)
    assert codes(exc) == [("KT004", "")] and "not UTF-8" in exc.value.problems[0].message


def test_every_bad_override_is_reported_at_once(tmp_path):
    with pytest.raises(ConfigError) as exc:
        load_run_config(config(tmp_path), ["nokey", "max_steps=[", "batch.global_size.x=1"])
    assert [c for c, _ in codes(exc)] == ["KT005", "KT005", "KT005"]


@pytest.mark.parametrize(("text", "overrides", "expected"), [
    (BASE + "max_steps: 6\n", ["seed=["], ["KT004"]),  # the duplicate key; the override is never reached
    (BASE + "# caf\xe9\n", [], ["KT004"]),
    (BASE, ["seed=[", "max_steps"], ["KT005", "KT005"]),
    (BASE + "optimizer: {betas: [1.0, -0.1]}\n", [], ["KT003", "KT003"]),
])
@pytest.mark.processes
def test_python_m_training_reports_bad_input_in_one_line_each(tmp_path, text, overrides, expected):
    import subprocess
    import sys

    from conftest import ROOT

    path = tmp_path / "run.yaml"
    path.write_bytes(text.encode("latin-1"))  # latin-1: the \xe9 case is one byte that is no UTF-8
    sets = [arg for override in overrides for arg in ("--set", override)]
    result = subprocess.run([sys.executable, "-m", "training", "--config", str(path), *sets],
                            capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert [line.split("[")[-1].split("]")[0] for line in result.stderr.splitlines()] == expected


def test_a_gpt_run_config_is_written_as_before_models_had_a_kind(tmp_path):
    """The written config (the ConfigMap, and the content-hashed run name) of a GPT run on a token stream keeps
    no field of Hugging Face models or data sets: merging them changes no running job's name."""
    written = load_run_config(config(tmp_path)).to_yaml()
    assert "kind" not in written and "tokenizer" not in written and "text_field" not in written
    hf = load_run_config(config(tmp_path, BASE + HF + "data: {source: parquet, path: /d, tokenizer: /t}\n"))
    again = load_run_config(config(tmp_path, hf.to_yaml()))
    assert again == hf and again.model.kind == "hf" and again.model.kv_heads == 4
