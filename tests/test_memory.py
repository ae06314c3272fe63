"""Will it fit in GPU memory: the formula (training/memory.py) against real models and PyTorch's memory tracker,
and the rules that judge a job with it at synth (KT240, KT241, KT165), shown by `kubetrain plan` and `cost`."""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import ROOT, kubetrain, read_tree
from kubetrain.cli import app as cli
from kubetrain.jobs.command_flags import megatron_flags
from typer.testing import CliRunner

from training.config import ModelConfig, RunConfig
from training.flops import parameter_count
from training.memory import (
    GIB,
    Architecture,
    Layout,
    gpt_architecture,
    hf_architecture,
    megatron_estimate,
    run_estimate,
)

sys.path.insert(0, str(ROOT / "bench"))
import memory_estimate  # noqa: E402  (bench/memory_estimate.py: the tracker harness)

# Megatron-LM's Llama 3 8B-class job (its guide's shapes), tensor-parallel over 2 GPUs, no distributed optimizer.
LLAMA3_8B = ["pretrain_gpt.py", "--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "1",
             "--num-layers", "32", "--hidden-size", "4096", "--ffn-hidden-size", "14336",
             "--num-attention-heads", "32", "--group-query-attention", "--num-query-groups", "8",
             "--seq-length", "8192", "--max-position-embeddings", "8192", "--micro-batch-size", "1",
             "--global-batch-size", "128", "--swiglu", "--untie-embeddings-and-output-weights",
             "--vocab-size", "128256", "--bf16"]


# -- the architecture: parameters as the real models count them ---------------------------------------------------

def test_the_gpt_maps_to_the_parameters_it_has() -> None:
    import torch

    from training.model import GPT
    cfg = ModelConfig(vocab_size=512, dim=96, n_layers=3, n_heads=4, mlp_ratio=4.0)
    with torch.device("meta"):
        real = sum(p.numel() for p in GPT(cfg).parameters())
    assert gpt_architecture(cfg).parameters == parameter_count(cfg) == real


@pytest.mark.parametrize("kind", ["llama-gqa", "llama-tied", "qwen2"])
def test_a_hugging_face_config_maps_to_the_parameters_it_has(kind: str) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM
    sizes = {"vocab_size": 320, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
             "intermediate_size": 176}
    config = {"llama-gqa": LlamaConfig(**sizes, num_key_value_heads=2, tie_word_embeddings=False),
              "llama-tied": LlamaConfig(**sizes, tie_word_embeddings=True),
              "qwen2": Qwen2Config(**sizes, num_key_value_heads=2, tie_word_embeddings=False)}[kind]
    model_class = Qwen2ForCausalLM if kind == "qwen2" else LlamaForCausalLM
    with torch.device("meta"):
        real = sum(p.numel() for p in model_class(config).parameters())  # tied weights are counted once
    assert hf_architecture(config.to_dict()).parameters == real


def test_a_config_without_the_sizes_names_what_is_missing() -> None:
    with pytest.raises(ValueError, match="hidden_size, num_hidden_layers"):
        hf_architecture({"vocab_size": 32000, "num_attention_heads": 8, "intermediate_size": 11008})


# -- Megatron-LM ----------------------------------------------------------------------------------------------------

def test_megatron_flags_say_what_changes_memory() -> None:
    flags = megatron_flags(LLAMA3_8B)
    assert flags["layers"] == 32 and flags["hidden"] == 4096 and flags["kv_heads"] == 8 and flags["tensor"] == 2
    assert flags["vocab"] == 128256  # already a multiple of 128 x TP
    assert flags["bf16"] and flags["swiglu"] and "use-distributed-optimizer" not in flags
    gpt2 = megatron_flags(["pretrain_gpt.py", "--tokenizer-type", "GPT2BPETokenizer",
                           "--tensor-model-parallel-size", "2", "--recompute-activations"])
    assert gpt2["vocab"] == 50432 and gpt2["recompute"] == "selective"  # 50,257 padded to a multiple of 256


def test_megatrons_8b_at_tp2_needs_67_gib_of_model_state_per_gpu() -> None:
    """The guide's figure: 8B / 2 parameters x 18 bytes (bf16 weights, fp32 main gradients, fp32 master weights
    and Adam's two moments) is about 67 GiB before activations; the distributed optimizer shards 12 of the 18."""
    arch = Architecture(layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336, vocab=128256)
    assert 8.0e9 < arch.parameters < 8.1e9
    layout = Layout("megatron", data_parallel=4, micro_batch=1, seq_len=8192, tensor=2)
    plain = megatron_estimate(arch, layout)
    assert 66.5 < plain.model_state / GIB < 68.0
    sharded = megatron_estimate(arch, Layout("megatron", data_parallel=4, micro_batch=1, seq_len=8192, tensor=2,
                                             distributed_optimizer=True))
    assert sharded.model_state / GIB == pytest.approx(plain.model_state / GIB * (6 + 12 / 4) / 18)
    assert plain.total / GIB > 80  # with 8k-token activations it cannot fit an H100
    recomputed = megatron_estimate(arch, Layout("megatron", data_parallel=4, micro_batch=1, seq_len=8192, tensor=2,
                                                distributed_optimizer=True, recompute="full"))
    assert recomputed.total / GIB < 0.9 * 80


# -- measured: the formula against PyTorch's memory tracker -------------------------------------------------------

CASES = [memory_estimate.Case("gpt", "ddp", 1, False, "fp32"), memory_estimate.Case("llama", "fsdp", 1, True, "bf16"),
         memory_estimate.Case("gpt", "fsdp", 2, True, "fp32"), memory_estimate.Case("llama", "ddp", 2, False, "bf16"),
         memory_estimate.Case("llama", "fsdp", 2, False, "bf16", "vocab8", "unsharded"),
         memory_estimate.Case("gpt", "fsdp", 2, True, "bf16", "vocab8", "sharded")]


@pytest.mark.processes
def test_the_estimate_is_within_15_percent_of_pytorchs_tracker() -> None:
    """Real CPU tensors, gloo process groups of 1 and 2 ranks, two training steps each: DDP and FSDP2, with and
    without activation checkpointing, the kubetrain GPT and transformers' Llama. The formula's tensors (a CPU has
    no CUDA context, NCCL buffers or caching allocator) within 15 % of the tracker's peak on each. The bench runs
    every combination (bench/memory_estimate.py)."""
    peaks = memory_estimate.measure_all(CASES)
    ratios = {str(case): case.estimate_bytes() / peaks[case] for case in CASES}
    assert all(0.85 <= r <= 1.15 for r in ratios.values()), ratios


def test_a_run_config_estimate_shards_with_fsdp_and_shrinks_with_checkpointing() -> None:
    def run(**strategy) -> RunConfig:
        return RunConfig.model_validate({"model": {"vocab_size": 50304, "dim": 2048, "n_layers": 24, "n_heads": 16},
                                         "data": {"seq_len": 2048}, "batch": {"global_size": 64, "micro_size": 4},
                                         "strategy": strategy, "precision": "bf16", "max_steps": 1})
    ddp, fsdp = run_estimate(run(name="ddp"), 16), run_estimate(run(name="fsdp"), 16)
    assert fsdp.optimizer == pytest.approx(ddp.optimizer / 16)
    checkpointed = run_estimate(run(name="fsdp", activation_checkpointing=True), 16)
    assert checkpointed.activations < fsdp.activations / 3
    assert ddp.nccl > 0 and ddp.cuda_context > 0 and ddp.fragmentation > 0


def test_a_hugging_face_run_config_is_estimated_from_the_shape_it_states() -> None:
    """A model section of kind hf is sized from its own fields (the pod checks them against config.json): 7B of
    Llama under DDP holds 16 bytes a parameter on every rank, ~100 GiB, past any single GPU of the catalog."""
    llama_7b = {"kind": "hf", "model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
                "num_attention_heads": 32, "intermediate_size": 11008, "vocab_size": 32000}
    run = RunConfig.model_validate({"model": llama_7b, "data": {"seq_len": 2048},
                                    "batch": {"global_size": 64, "micro_size": 1}, "strategy": {"name": "ddp"},
                                    "precision": "bf16", "max_steps": 1})
    found = run_estimate(run, 8)
    assert found.parameters + found.gradients + found.optimizer > 95 * GIB
    assert hf_architecture({**llama_7b, "tie_word_embeddings": False}).parameters == pytest.approx(6.74e9, rel=0.01)


@pytest.mark.processes
def test_the_trainer_logs_its_own_estimate(tmp_path: Path) -> None:
    from test_training import train, write_config

    from training.config import load_run_config
    config = write_config(tmp_path, max_steps=1)
    records = train(config, 1)
    (logged,) = [r for r in records if r["event"] == "memory_estimate"]
    assert logged["per_rank_gib"] == run_estimate(load_run_config(config), 1, gpu=False).gib()


# -- the rules at synth ---------------------------------------------------------------------------------------------

FLEET = '''
from kubetrain import App, Cluster, Command, CommandModel, Parallelism, TrainingJob

def build():
    app = App()
    dev = Cluster(app, "dev", kubernetes_version="1.33", namespaces=["ml"])
    TrainingJob(dev, "job", image="img:1", nodes={nodes}, procs_per_node={procs}, instance_type={instance!r},
                resources={{"cpu": "4", "memory": "64Gi"}},
                volumes=[{{"name": "ckpt", "claim": "ckpt", "mount_path": "/checkpoints"}}],
                workload={workload})
    return app
'''


def trainer_run(model: dict, micro: int, strategy: dict, ranks: int = 16) -> dict:
    return {"model": model, "data": {"seq_len": 2048}, "batch": {"global_size": micro * ranks, "micro_size": micro},
            "strategy": strategy, "precision": "bf16", "max_steps": 10}


def trainer(model: dict, micro: int, strategy: dict) -> str:
    return repr({"kind": "trainer", "run": trainer_run(model, micro, strategy)})


def project(tmp_path: Path, workload: str, nodes: int = 2, procs: int = 8, instance: str = "p5.48xlarge") -> Path:
    package = tmp_path / "fleet"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent(FLEET.format(nodes=nodes, procs=procs, instance=instance,
                                                                      workload=workload)))
    return tmp_path


GPT_7B = {"vocab_size": 32000, "dim": 4096, "n_layers": 32, "n_heads": 32}


@pytest.mark.processes
def test_a_job_whose_model_cannot_fit_does_not_synthesize(tmp_path: Path) -> None:
    """7B parameters under DDP: 16 bytes a parameter of weights, gradients and AdamW's moments on every GPU."""
    work = project(tmp_path, trainer(GPT_7B, 1, {"name": "ddp"}))
    result = kubetrain("synth", "--app", "fleet", cwd=work)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    (line,) = [line for line in result.stderr.splitlines() if "[KT240]" in line]
    assert line.startswith("error: dev/ml/job: workload.run: the model does not fit: ")
    assert "GiB per H100 against its 80 GiB" in line and "optimizer 50.0" in line
    # FSDP alone fits; checkpointing alone would not (the replicated state is over the H100 by itself)
    assert re.search(r"shard with strategy\.name: fsdp \(\d+\.\d GiB\)", line)
    assert "activation checkpointing cannot help: the state alone is 138.5 GiB" in line
    assert "set strategy.activation_checkpointing" not in line
    assert not (work / "dist").exists()


@pytest.mark.processes
def test_the_same_model_sharded_and_checkpointed_fits_and_plan_and_cost_show_it(tmp_path: Path) -> None:
    work = project(tmp_path, trainer(GPT_7B, 1, {"name": "fsdp", "activation_checkpointing": True}))
    result = kubetrain("synth", "--app", "fleet", cwd=work)
    assert result.returncode == 0, result.stderr
    assert "KT240" not in result.stderr and "KT241" not in result.stderr
    # plan and cost read the written dist/ (in this process: what they print is the point, not their process)
    dist = str(work / "dist")
    plan = CliRunner().invoke(cli, ["plan", "--dist", dist])
    (line,) = [line for line in plan.stdout.splitlines() if line.strip().startswith("memory per H100")]
    assert "of 80 GiB" in line and "run config at 16 ranks" in line
    (job,) = json.loads(CliRunner().invoke(cli, ["plan", "--dist", dist, "--json"]).stdout)["jobs"]
    assert job["memory"]["capacity_gib"] == 80 and 0 < job["memory"]["per_rank_gib"]["total"] < 80
    (row,) = json.loads(CliRunner().invoke(cli, ["cost", "--dist", dist, "--json"]).stdout)
    assert row["memory"] == job["memory"]
    assert any(line.startswith("dev/ml/job: memory per H100") for line in
               CliRunner().invoke(cli, ["cost", "--dist", dist]).stdout.splitlines())


@pytest.mark.processes
def test_a_job_within_10_percent_of_the_memory_warns(tmp_path: Path) -> None:
    """The micro batch is chosen by the formula itself: the first whose estimate lands in 90-100 % of the H100."""
    model = {"vocab_size": 32000, "dim": 2048, "n_layers": 16, "n_heads": 16}
    for micro in range(1, 64):
        run = RunConfig.model_validate(trainer_run(model, micro, {"name": "fsdp"}))
        share = run_estimate(run, 16).total / (80 * GIB)
        if 0.9 < share <= 1:
            break
    else:
        pytest.fail("no micro batch lands within 10 % of 80 GiB")
    work = project(tmp_path, trainer(model, micro, {"name": "fsdp"}))
    result = kubetrain("synth", "--app", "fleet", cwd=work)
    assert result.returncode == 0, result.stderr
    (line,) = [line for line in result.stderr.splitlines() if "[KT241]" in line]
    assert line.startswith("warning: dev/ml/job: workload.run: the model fills 9")


@pytest.mark.processes
def test_a_megatron_command_is_read_for_its_memory(tmp_path: Path) -> None:
    work = project(tmp_path, repr({"kind": "command", "command": LLAMA3_8B}))
    result = kubetrain("synth", "--app", "fleet", cwd=work)
    assert result.returncode == 2
    (line,) = [line for line in result.stderr.splitlines() if "[KT240]" in line]
    assert "workload.command" in line and "Megatron-LM flags, TP=2, PP=1, DP=8, micro batch 1" in line
    assert "--use-distributed-optimizer" in line
    fixed = [*LLAMA3_8B, "--use-distributed-optimizer", "--recompute-granularity", "full"]
    other = project(tmp_path / "fixed", repr({"kind": "command", "command": fixed}))
    assert kubetrain("synth", "--app", "fleet", cwd=other).returncode == 0


@pytest.mark.processes
def test_a_declared_model_that_contradicts_the_flags(tmp_path: Path) -> None:
    declared = ('Command(command={command!r}, model=CommandModel(layers=40, hidden=4096, heads=32, kv_heads=8, '
                'ffn=14336, vocab=128256, seq_len=8192, distributed_optimizer=True))').format(
        command=[*LLAMA3_8B, "--use-distributed-optimizer", "--recompute-granularity", "full"])
    work = project(tmp_path, declared)
    result = kubetrain("synth", "--app", "fleet", cwd=work)
    assert result.returncode == 2
    (line,) = [line for line in result.stderr.splitlines() if "[KT165]" in line]
    assert "workload.model: Command.model says layers 40 (the flags say 32)" in line


def test_the_example_fleet_fits_and_dist_carries_the_estimates() -> None:
    texts = {path: data.decode() for path, data in read_tree(ROOT / "dist").items() if "/TrainJob." in path}
    estimated = [path for path, text in texts.items() if "kubetrain.dev/memory" in text]
    assert any("gpt-1b-fsdp" in p for p in estimated) and any("megatron-gpt" in p for p in estimated)


# -- fine-tuning jobs: accumulated gradients sharded, and a fix that fits -----------------------------------------

# The shape fields of the published config.json files (meta-llama/Meta-Llama-3-8B, mistralai/Mistral-7B-v0.1).
LLAMA_3_8B_CONFIG = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
                     "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
                     "tie_word_embeddings": False}
MISTRAL_7B_CONFIG = {"model_type": "mistral", "hidden_size": 4096, "num_hidden_layers": 32,
                     "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
                     "vocab_size": 32000, "tie_word_embeddings": False}


def fine_tune(config: dict, nodes: int, procs: int, instance: str, micro: int, global_size: int, strategy: dict,
              seq_len: int = 2048, elastic: dict | None = None) -> tuple[list, dict]:
    """One job fine-tuning a Hugging Face model stated by its config.json's shape, compiled in this process: its
    findings and, when it has no error, its rendered run config."""
    from kubetrain import App, Cluster, TrainingJob
    from kubetrain.pipeline import fleet_findings, render

    app = App()
    TrainingJob(Cluster(app, "dev", kubernetes_version="1.33", namespaces=["ml"]), "sft", {
        "image": "img:1", "nodes": nodes, "procs_per_node": procs, "instance_type": instance,
        "resources": {"cpu": "4", "memory": "64Gi"}, **({"elastic": elastic} if elastic else {}),
        "volumes": [{"name": "ckpt", "claim": "ckpt", "mount_path": "/checkpoints"}],
        "workload": {"kind": "trainer", "run": {
            "model": {"kind": "hf", **config}, "data": {"seq_len": seq_len},
            "batch": {"global_size": global_size, "micro_size": micro}, "strategy": strategy,
            "optimizer": {"warmup_steps": 10}, "precision": "bf16", "max_steps": 100}}})
    found = [(f.problem.code, f.problem.message, f.problem.fix) for f in fleet_findings(app)]
    if any(f.severity == "error" for f in fleet_findings(app)):
        return found, {}
    (text,) = [text for path, text in render(app).items() if path.name.startswith("ConfigMap.")]
    import yaml
    return found, yaml.safe_load(yaml.safe_load(text)["data"]["run.yaml"])


@pytest.mark.parametrize(("config", "nodes", "procs", "instance", "micro", "global_size"), [
    (LLAMA_3_8B_CONFIG, 4, 8, "p4d.24xlarge", 2, 512),  # 32 A100-40GB
    (MISTRAL_7B_CONFIG, 1, 8, "g5.48xlarge", 1, 64),  # 8 A10G (24 GiB)
])
def test_7b_8b_fsdp_fine_tunes_fit_with_gradients_kept_sharded(config, nodes, procs, instance, micro,
                                                                global_size) -> None:
    """Unsharded, the whole model's fp32 gradients (~27-30 GiB) would sit on every rank and neither job would fit;
    sharded, a rank holds 1/ranks of them, and the job's run config carries the choice to its pods."""
    strategy = {"name": "fsdp", "activation_checkpointing": True}
    found, run = fine_tune(config, nodes, procs, instance, micro, global_size, strategy)
    assert not [f for f in found if f[0] in ("KT240", "KT241")], found
    assert run["strategy"]["accumulated_gradients"] == "sharded"
    unsharded, _ = fine_tune(config, nodes, procs, instance, micro, global_size,
                             {**strategy, "accumulated_gradients": "unsharded"})
    ((code, message, fix),) = [f for f in unsharded if f[0] == "KT240"]
    assert "accumulated unsharded" in message
    assert re.search(r"set strategy\.accumulated_gradients: sharded \(\d+\.\d GiB\)", fix), fix


def test_an_h100_job_keeps_its_gradients_unsharded_where_they_fit() -> None:
    found, run = fine_tune(MISTRAL_7B_CONFIG, 2, 8, "p5.48xlarge", 1, 64, {"name": "fsdp",
                                                                           "activation_checkpointing": True})
    assert run["strategy"]["accumulated_gradients"] == "unsharded"


def _advised_runs(config: dict, fix: str, micro: int, nodes: int, strategy: dict) -> list[tuple[str, dict, int]]:
    """Each single change the fix names, applied to the job: (change, strategy, micro batch, nodes)."""
    changes = []
    for step in fix.split("; "):
        if step.startswith("set strategy.activation_checkpointing: true"):
            changes.append((step, {**strategy, "activation_checkpointing": True}, micro, nodes))
        elif m := re.match(r"lower batch\.micro_size to (\d+)", step):
            changes.append((step, strategy, int(m[1]), nodes))
        elif m := re.match(r"set nodes: (\d+) \(", step):
            changes.append((step, strategy, micro, int(m[1])))
        elif step.startswith("set strategy.accumulated_gradients: sharded"):
            changes.append((step, {**strategy, "accumulated_gradients": "sharded"}, micro, nodes))
    return changes


@pytest.mark.parametrize(("config", "nodes", "instance", "micro", "global_size", "seq_len", "strategy", "expected"), [
    # 8B without checkpointing at micro 4 on one p4d: its activations do not fit, checkpointing does.
    (LLAMA_3_8B_CONFIG, 1, "p4d.24xlarge", 4, 512, 2048, {"name": "fsdp"}, ["set strategy.activation_checkpointing"]),
    # Mistral on one 8-GPU A10G node at micro 4 of 4k tokens, checkpointed: a smaller micro batch.
    (MISTRAL_7B_CONFIG, 1, "g5.48xlarge", 4, 64, 4096, {"name": "fsdp", "activation_checkpointing": True},
     ["lower batch.micro_size to"]),
    # Held unsharded on A100-40GB: sharded fits, or 32 nodes with no accumulation left.
    (LLAMA_3_8B_CONFIG, 4, "p4d.24xlarge", 2, 512, 2048, {"name": "fsdp", "activation_checkpointing": True,
                                                          "accumulated_gradients": "unsharded"},
     ["set strategy.accumulated_gradients: sharded", "set nodes: 32"]),
])
def test_the_fix_names_only_changes_that_fit_and_each_does(config, nodes, instance, micro, global_size, seq_len,
                                                           strategy, expected) -> None:
    found, _ = fine_tune(config, nodes, 8, instance, micro, global_size, strategy, seq_len)
    ((_, _, fix),) = [f for f in found if f[0] == "KT240"]
    for phrase in expected:
        assert phrase in fix, fix
    assert re.search(r"or use an instance type with at least \d+ GiB per accelerator$", fix)
    changes = _advised_runs(config, fix, micro, nodes, strategy)
    assert len(changes) >= len(expected)
    for change, changed_strategy, changed_micro, changed_nodes in changes:
        after, _ = fine_tune(config, changed_nodes, 8, instance, changed_micro, global_size, changed_strategy,
                             seq_len)
        assert not [f for f in after if f[0] in ("KT240", "KT241")], (change, after)


def test_ddp_state_that_no_activation_change_can_fit_says_so() -> None:
    """8B under DDP on A100-40GB: 16 bytes a parameter on every rank. Checkpointing and a smaller micro batch
    cannot help, more DDP nodes neither; the fix names what does, together, and the state's own size."""
    found, _ = fine_tune(LLAMA_3_8B_CONFIG, 4, 8, "p4d.24xlarge", 2, 512, {"name": "ddp"})
    ((_, _, fix),) = [f for f in found if f[0] == "KT240"]
    assert re.search(r"activation checkpointing cannot help: the state alone is \d+\.\d GiB", fix), fix
    assert "lower batch.micro_size" not in fix.split("together")[0]
    assert "together: set strategy.name: fsdp" in fix
