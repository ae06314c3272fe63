"""What a run costs: the shared FLOP formula against the real model, the price table against its sources and an
AWS offer file, `kubetrain cost` of real synth output against first principles (the example fleet's too),
pool price terms, the estimate rules, and `kubetrain diff` pricing a change in a real git repository."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT, run
from kubetrain import (
    App,
    ClaimVolume,
    Cluster,
    Command,
    EfaNodePool,
    Elastic,
    Estimate,
    InstanceType,
    NodeResources,
    PoolPricing,
    PyTorchJob,
    RunConfig,
    Trainer,
    TrainingJob,
)
from kubetrain.cli import app as cli
from kubetrain.cost.cost_report import number, usd
from kubetrain.cost.price_sources import build_table
from kubetrain.cost.prices import PRICES_FILE, price_table
from kubetrain.model.instances import BUILTIN_CATALOG
from kubetrain.pipeline import fleet_findings, synth
from platform_support import rejected
from typer.testing import CliRunner

from kubetrain_runtime.problems import rejection_of
from training.config import ModelConfig
from training.flops import flops_per_token, parameter_count
from training.model import GPT

SOURCES = ROOT / "scripts" / "price_sources"
FAMILIES = {name.split(".")[0] for name in BUILTIN_CATALOG.names()}
IMAGE = "ghcr.io/kubetrain/kubetrain:0.1.0"
P5_POOL = {"instance_types": ["p5.48xlarge"], "zones": ["us-west-2a"], "subnet_ids": ["subnet-0abc1234"],
           "security_group_ids": ["sg-0efa1234"], "role": "KarpenterNodeRole-prod", "max_nodes": 8}
BASE_KEYS = {"cluster", "namespace", "job", "instance_type", "capacity_type", "nodes", "gpus", "price_per_node_hour",
             "memory"}
ESTIMATE_KEYS = BASE_KEYS | {"tokens", "flops", "peak_flops_per_gpu", "mfu", "ettr", "hours", "gpu_hours", "usd"}


# -- the formula ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cfg", [ModelConfig(vocab_size=512, dim=64, n_layers=2, n_heads=4),
                                 ModelConfig(vocab_size=1000, dim=96, n_layers=3, n_heads=3, mlp_ratio=3.3)])
def test_the_formula_counts_the_parameters_the_model_has(cfg: ModelConfig) -> None:
    assert parameter_count(cfg) == sum(p.numel() for p in GPT(cfg).parameters())
    n = parameter_count(cfg) - cfg.vocab_size * cfg.dim  # PaLM: the input embedding is a lookup
    assert flops_per_token(cfg, 128) == 6 * n + 12 * cfg.n_layers * 128 * cfg.dim


@pytest.mark.processes
def test_a_run_reports_the_basis_of_its_mfu_and_says_when_there_is_none(tmp_path: Path) -> None:
    from test_training import TINY, train, write_config

    records = train(write_config(tmp_path, max_steps=2), 1)
    (basis,) = [r for r in records if r["event"] == "mfu_basis"]
    assert basis["flops_per_token"] == flops_per_token(ModelConfig(**TINY["model"]), TINY["data"]["seq_len"])
    assert (basis["device"], basis["peak_flops"]) == ("cpu", None) and "no MFU" in basis["note"]
    steps = [r for r in records if r["event"] == "step"]
    assert steps and all(r["tokens_per_s"] > 0 and "mfu" not in r for r in steps)


@pytest.mark.processes
def test_the_mfu_bench_runs_its_code_path_on_a_cpu() -> None:
    result = run([sys.executable, "bench/mfu.py", "--cpu", "--steps", "3", "--warmup", "1"])
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert lines[0].startswith("device: cpu;") and lines[1].startswith("tokens/s: ")
    assert lines[2] == "no MFU: cpu has no known bf16 peak FLOP/s (kubetrain_runtime/accelerators.py); " \
                       "`kubetrain cost` assumes MFU 0.35 on accelerators"


# -- the price table ------------------------------------------------------------------------------------------

def test_the_shipped_table_is_what_the_script_builds_from_its_sources() -> None:
    assert build_table(SOURCES, FAMILIES) == json.loads(PRICES_FILE.read_text())


def test_the_table_prices_the_catalog_in_both_regions_with_dated_sources() -> None:
    table = price_table()
    for region in ("us-east-1", "us-west-2"):
        # What has no on-demand price says why (scripts/price_sources/unpriced.csv; tests/test_prices.py checks
        # every type): AWS sells p5e and trn2 without one, as Capacity Blocks.
        missing = [name for name in BUILTIN_CATALOG.names() if table.get(name, region, "on-demand") is None]
        assert all(table.unpriced(name, region, "on-demand") for name in missing), region
        assert set(missing) == {"p5e.48xlarge", "trn2.48xlarge"}, region
    assert table.get("p5.48xlarge", "us-west-2", "on-demand").usd == 55.04
    assert table.get("p5.48xlarge", "us-east-1", "capacity-block").usd == 41.528
    spot = table.get("p5.48xlarge", "us-west-2", "spot")
    assert spot is not None and spot.usd < 55.04 and spot.as_of == "2026-07-20"
    assert all(source["url"].startswith("https://") and source["as_of"] for source in table.sources.values())


def test_the_snapshots_on_demand_column_agrees_with_the_dated_table() -> None:
    """What dates the SkyPilot snapshot (SOURCES.json): its us-east-1 on-demand prices are Karpenter's."""
    import csv
    karpenter = {r["instance_type"]: float(r["usd_per_hour"])
                 for r in csv.DictReader((SOURCES / "karpenter-on-demand-us-east-1.csv").open())}
    rows = [r for r in csv.DictReader((SOURCES / "skypilot-aws-vms.csv").open()) if r["Region"] == "us-east-1"]
    assert len(rows) > 100
    assert all(abs(float(r["Price"]) - karpenter[r["InstanceType"]]) < 1e-5 for r in rows if r["Price"])


def test_an_aws_offer_file_replaces_the_transcribed_on_demand_prices(tmp_path: Path) -> None:
    linux = {"operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used"}

    def product(sku: str, **attributes: str) -> dict[str, Any]:
        return {"sku": sku, "productFamily": "Compute Instance", "attributes": {**linux, **attributes}}

    def term(usd: str) -> dict[str, Any]:
        return {"T1": {"priceDimensions": {"R1": {"unit": "Hrs", "pricePerUnit": {"USD": usd}}}}}

    offer = {"offerCode": "AmazonEC2", "version": "20260801000000", "publicationDate": "2026-08-01T00:00:00Z",
             "products": {"A": product("A", instanceType="p5.48xlarge", regionCode="us-west-2"),
                          "B": product("B", instanceType="p5.48xlarge", regionCode="us-west-2",
                                       operatingSystem="Windows"),
                          "C": product("C", instanceType="not-in-the-catalog", regionCode="us-west-2")},
             "terms": {"OnDemand": {"A": term("50.0000000000"), "B": term("99.0"), "C": term("1.0")}}}
    (tmp_path / "index.json").write_text(json.dumps(offer))
    table = build_table(SOURCES, FAMILIES, [tmp_path / "index.json"])
    figure = table["prices"]["us-west-2"]["p5.48xlarge"]["on-demand"]
    assert figure == {"usd": 50.0, "source": "aws-price-list:index.json"}
    assert table["sources"]["aws-price-list:index.json"]["as_of"] == "2026-08-01"
    assert "not-in-the-catalog" not in table["prices"]["us-west-2"]


# -- a fleet and what it costs --------------------------------------------------------------------------------

def _run(max_steps: int = 1000) -> RunConfig:
    return RunConfig.model_validate({
        "model": {"vocab_size": 50304, "dim": 1024, "n_layers": 8, "n_heads": 8},
        "data": {"seq_len": 2048}, "batch": {"global_size": 256, "micro_size": 2},
        "checkpoint": {"dir": "/ckpt/gpt"}, "precision": "bf16", "max_steps": max_steps})


def _job(cluster: Cluster, name: str, pool: EfaNodePool | None = None, **props: Any) -> TrainingJob:
    fields: dict[str, Any] = {"name": name, "image": IMAGE, "nodes": 2, "procs_per_node": 8, "pool": pool,
                              "resources": NodeResources(cpu="184", memory="1800Gi"),
                              "volumes": [ClaimVolume(name="ckpt", claim="ckpt", mount_path="/ckpt")],
                              "workload": Trainer(run=_run())}
    if pool is None:
        fields["instance_type"] = "p5.48xlarge"
    return TrainingJob(cluster, name, {**fields, **props})  # a dict: problems are recorded, not raised


def _costs(app: App, dist: Path) -> dict[str, dict[str, Any]]:
    synth(app, dist)
    result = CliRunner().invoke(cli, ["cost", "--dist", str(dist), "--json"])
    assert result.exit_code == 0, result.output
    return {row["job"]: row for row in json.loads(result.stdout)}


def _check_row(row: dict[str, Any]) -> None:
    """The published arithmetic: the row's own figures agree with each other."""
    assert row["gpu_hours"] == pytest.approx(row["hours"] * row["gpus"])
    assert row["hours"] == pytest.approx(row["flops"] / (row["gpus"] * row["peak_flops_per_gpu"] * row["mfu"]
                                                         * row["ettr"]) / 3600)
    if row["price_per_node_hour"] is not None:
        assert row["usd"] == pytest.approx(row["hours"] * row["nodes"] * row["price_per_node_hour"])


def test_a_trainer_job_on_a_pool_is_priced_from_its_run_config(tmp_path: Path) -> None:
    app = App()
    cluster = Cluster(app, "prod", kubernetes_version="1.33", namespaces=["ml"], run_names="content-hash")
    pool = EfaNodePool(cluster, "p5", **P5_POOL)
    _job(cluster, "gpt", pool)
    _job(cluster, "tuned", pool, estimate=Estimate(mfu=0.5, ettr=0.95))
    _job(cluster, "pinned")  # an instance type but no pool: no region, no capacity type, so no dollars
    rows = _costs(app, tmp_path / "dist")
    gpt = rows["gpt"]
    assert set(gpt) == ESTIMATE_KEYS
    assert gpt["memory"]["accelerator"] == "H100" and gpt["memory"]["per_rank_gib"]["total"] > 0  # kubetrain.dev/memory
    run = _run()
    assert gpt["tokens"] == run.max_steps * run.batch.global_size * run.data.seq_len
    assert gpt["flops"] == gpt["tokens"] * flops_per_token(run.model, run.data.seq_len)
    assert (gpt["instance_type"], gpt["capacity_type"], gpt["nodes"], gpt["gpus"]) == ("p5.48xlarge", "on-demand", 2, 16)
    assert (gpt["price_per_node_hour"], gpt["peak_flops_per_gpu"], gpt["mfu"], gpt["ettr"]) == (55.04, 989e12, 0.35, 0.9)
    _check_row(gpt)
    assert rows["tuned"]["hours"] == pytest.approx(gpt["hours"] * 0.35 * 0.9 / (0.5 * 0.95))
    assert (rows["pinned"]["capacity_type"], rows["pinned"]["usd"]) == (None, None) and rows["pinned"]["hours"]


def test_the_example_fleet_agrees_with_first_principles() -> None:
    """Every trainer job of apps/ (the committed dist/): tokens from its run config, FLOPs near 6 N tokens with
    N all of the model's parameters, and hours, GPU-hours and dollars consistent with each other."""
    result = CliRunner().invoke(cli, ["cost", "--dist", str(ROOT / "dist"), "--json"])
    assert result.exit_code == 0, result.stderr
    rows = {(r["cluster"], r["job"]): r for r in json.loads(result.stdout)}
    trainer_jobs = 0
    for path in sorted((ROOT / "dist").glob("*/*/ConfigMap.*-config.yaml")):
        config = yaml.safe_load(path.read_text())
        if "run.yaml" not in config["data"]:
            continue  # a Function job's ConfigMap holds its source
        run = RunConfig.model_validate(yaml.safe_load(config["data"]["run.yaml"]))
        row = rows[(path.parts[-3], config["metadata"]["labels"]["kubetrain.dev/job"])]
        assert set(row) == ESTIMATE_KEYS
        tokens = run.max_steps * run.batch.global_size * run.data.seq_len
        assert row["tokens"] == tokens
        assert 0.8 <= row["flops"] / (6 * parameter_count(run.model) * tokens) <= 1.6
        if row["hours"] is not None:
            _check_row(row)
        trainer_jobs += 1
    assert trainer_jobs >= 5
    prod = rows[("prod", "gpt-1b-fsdp")]
    assert prod["usd"] > 0 and prod["capacity_type"] == "reserved"
    assert rows[("prod", "megatron-gpt")]["usd"] > 0  # a command job with an Estimate
    assert rows[("dev", "tiny-gpt-elastic")]["nodes"] == 2  # elastic 1-2: JSON gives the starting size


def test_an_elastic_job_shows_its_range_at_one_price(tmp_path: Path) -> None:
    app = App()
    cluster = Cluster(app, "prod", kubernetes_version="1.33", namespaces=["ml"])
    pool = EfaNodePool(cluster, "p5", **P5_POOL)
    _job(cluster, "elastic", pool, nodes=4, elastic=Elastic(min_nodes=2), target=PyTorchJob(),
         workload=Trainer(run=_run().model_copy(update={"batch": _run().batch.model_copy(
             update={"global_size": 384})})))
    row = _costs(app, tmp_path / "dist")["elastic"]
    assert (row["nodes"], row["gpus"]) == (4, 32)  # JSON: the size it starts with
    _check_row(row)
    text = CliRunner().invoke(cli, ["cost", "--dist", str(tmp_path / "dist")]).stdout
    cells = next(line for line in text.splitlines() if " elastic " in line).split()
    # The table: 2-4 nodes, 16-32 GPUs, and hours from the full size to half of it (twice as long); GPU-hours
    # and dollars are the same at every size.
    assert cells[5:7] == ["2-4", "16-32"]
    assert cells[12] == f"{row['hours']:,.1f}-{2 * row['hours']:,.1f}"


def test_a_command_job_is_priced_by_what_it_declares(tmp_path: Path) -> None:
    app = App()
    cluster = Cluster(app, "prod", kubernetes_version="1.33", namespaces=["ml"])
    pool = EfaNodePool(cluster, "p5", **P5_POOL)
    command = Command(command=["pretrain.py"])
    _job(cluster, "declared", pool, workload=command, estimate=Estimate(parameters=1e9, tokens=2e10))
    _job(cluster, "shaped", pool, workload=command,
         estimate=Estimate(model=ModelConfig(vocab_size=50304, dim=1024, n_layers=8, n_heads=8), steps=1000,
                           global_batch=256, seq_len=2048))
    _job(cluster, "silent", pool, workload=command)
    rows = _costs(app, tmp_path / "dist")
    assert rows["declared"]["flops"] == 6 * 1e9 * 2e10
    _check_row(rows["declared"])
    run = _run()  # the same model and work as a trainer job: the same FLOPs
    assert rows["shaped"]["flops"] == pytest.approx(1000 * 256 * 2048 * flops_per_token(run.model, 2048))
    assert set(rows["silent"]) == BASE_KEYS  # no estimate: what it runs on, not how long


def test_estimates_that_contradict_the_workload_are_errors() -> None:
    cluster = Cluster(App(), "prod", kubernetes_version="1.33", namespaces=["ml"])
    cases = [({"estimate": Estimate(tokens=1e9, parameters=1e8)}, "estimate"),  # a trainer job's run config says it
             ({"workload": Command(command=["x.py"]), "estimate": Estimate(mfu=0.4)}, "estimate")]
    for props, path in cases:
        _job(cluster, f"job{len(fleet_findings(cluster))}", **props)
    assert [(f.problem.code, f.problem.path) for f in fleet_findings(cluster)] == \
        [("KT470", path) for _, path in cases]
    half = rejection_of(Estimate(parameters=1e9, steps=10, global_batch=8))  # the tokens are not said
    assert half is not None and [(p.code, p.path) for p in half.problems] == [("KT470", "seq_len")]


# -- pools ----------------------------------------------------------------------------------------------------

def test_pool_terms_discount_spot_and_a_reservation_paid_whether_used(tmp_path: Path) -> None:
    app = App()
    cluster = Cluster(app, "prod", kubernetes_version="1.33", namespaces=["ml"])
    pools = {"discounted": EfaNodePool(cluster, "discounted", **P5_POOL, pricing=PoolPricing(discount=0.3)),
             "spot": EfaNodePool(cluster, "spot", **{**P5_POOL, "capacity_type": "spot"}),
             "own": EfaNodePool(cluster, "own", **P5_POOL, pricing=PoolPricing(usd_per_node_hour=40.0)),
             "reserved": EfaNodePool(cluster, "reserved", **{**P5_POOL, "capacity_type": "reserved",
                                                               "capacity_reservation_ids": ["cr-0123456789abcdef0"]},
                                     pricing=PoolPricing(reserved_nodes=1))}
    for name, pool in pools.items():
        _job(cluster, name, pool)
    rows = _costs(app, tmp_path / "dist")
    assert rows["discounted"]["price_per_node_hour"] == pytest.approx(55.04 * 0.7)
    assert rows["spot"]["price_per_node_hour"] == price_table().get("p5.48xlarge", "us-west-2", "spot").usd
    assert (rows["own"]["price_per_node_hour"], rows["reserved"]["price_per_node_hour"]) == (40.0, 55.04)
    for row in rows.values():
        _check_row(row)
    pool = yaml.safe_load((tmp_path / "dist/prod/_cluster/NodePool.reserved.yaml").read_text())
    assert json.loads(pool["metadata"]["annotations"]["kubetrain.dev/pricing"]) == {"reserved_nodes": 1}
    text = CliRunner().invoke(cli, ["cost", "--dist", str(tmp_path / "dist")]).stdout
    # One of the job's two nodes is inside the reservation: half its dollars are sunk, half marginal.
    reserved = next(line for line in text.splitlines() if line.split()[2:3] == ["reserved"])
    total, marginal = (float(cell.strip("$").replace(",", "")) for cell in reserved.split()[-2:])
    assert marginal == pytest.approx(total / 2, abs=1)
    assert "prod/reserved: 1 x p5.48xlarge reserved at $55.04/node-h" in text and "paid whether used or not" in text


def test_pool_terms_that_contradict_the_capacity_type_are_errors() -> None:
    cluster = Cluster(App(), "prod", kubernetes_version="1.33", namespaces=["ml"])
    for i, bad in enumerate(({"pricing": PoolPricing(rate="capacity-block")},  # a reservation's rate, on-demand
                              {"pricing": {"usd_per_node_hour": 40.0, "discount": 0.2}})):  # two prices
        problems = rejected(cluster, lambda i=i, bad=bad: EfaNodePool(cluster, f"bad{i}", **P5_POOL, **bad))
        assert [p.code for p in problems] == ["KT472"]


def test_a_pool_without_a_price_is_a_warning_and_still_emitted(tmp_path: Path) -> None:
    app = App()
    own = InstanceType(name="p5.custom", vcpus=192, memory_gib=2048, accelerator_resource="nvidia.com/gpu",
                       accelerators=8, accelerator="H100", efa_interfaces=32, gpudirect_rdma=True,
                       peak_bf16_flops=900e12)
    cluster = Cluster(app, "prod", kubernetes_version="1.33", namespaces=["ml"], instance_types=[own])
    pool = EfaNodePool(cluster, "own", **{**P5_POOL, "instance_types": ["p5.custom"]})
    _job(cluster, "gpt", pool)
    assert [(f.problem.code, f.severity) for f in fleet_findings(cluster)] == [("KT471", "warning")]
    row = _costs(app, tmp_path / "dist")["gpt"]
    assert (row["price_per_node_hour"], row["usd"]) == (None, None)
    assert row["peak_flops_per_gpu"] == 900e12 and row["hours"] > 0  # the fleet's own peak, from its annotation


def test_a_hand_edited_annotation_is_one_line_and_exit_2(tmp_path: Path) -> None:
    app = App()
    cluster = Cluster(app, "prod", kubernetes_version="1.33", namespaces=["ml"])
    _job(cluster, "gpt", EfaNodePool(cluster, "p5", **P5_POOL, pricing=PoolPricing(discount=0.1)))
    synth(app, tmp_path / "dist")
    path = tmp_path / "dist/prod/_cluster/NodePool.p5.yaml"
    path.write_text(path.read_text().replace('{"discount":0.1}', '{"discount":7}'))
    result = CliRunner().invoke(cli, ["cost", "--dist", str(tmp_path / "dist")])
    assert result.exit_code == 2 and "kubetrain.dev/pricing" in result.stderr and "Traceback" not in result.output


# -- the pull request's diff ----------------------------------------------------------------------------------

def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                          check=True, capture_output=True, text=True).stdout


def _fleet(max_steps: int, mfu: float | None = None) -> App:
    app = App()
    cluster = Cluster(app, "prod", kubernetes_version="1.33", namespaces=["ml"], run_names="content-hash")
    pool = EfaNodePool(cluster, "p5", **P5_POOL)
    _job(cluster, "gpt", pool, workload=Trainer(run=_run(max_steps)))
    _job(cluster, "other", pool, **({"estimate": Estimate(mfu=mfu)} if mfu else {}))
    return app


def _diff(repo: Path, *args: str) -> str:
    before = os.getcwd()
    os.chdir(repo)
    try:
        result = CliRunner().invoke(cli, ["diff", *args])
    finally:
        os.chdir(before)
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.processes
def test_doubling_max_steps_prices_the_new_run_in_text_and_markdown(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q", "-b", "main")
    synth(_fleet(200_000), tmp_path / "dist")
    before = {r["job"]: r for r in json.loads(CliRunner().invoke(
        cli, ["cost", "--dist", str(tmp_path / "dist"), "--json"]).stdout)}
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "fleet")
    synth(_fleet(400_000, mfu=0.7), tmp_path / "dist")
    text = _diff(tmp_path)
    # The new run of the create-once job costs its whole run (twice the old one); the other job's estimate
    # changed in place (no new run), so it costs the difference: half the hours at twice the MFU.
    gpt, other = before["gpt"], before["other"]
    assert f"cost: this change adds {number(2 * gpt['gpu_hours'])} GPU-hours and removes " \
           f"{number(other['gpu_hours'] / 2)} GPU-hours (net " \
           f"{number(2 * gpt['gpu_hours'] - other['gpu_hours'] / 2, True)} GPU-hours); adds {usd(2 * gpt['usd'])} and " \
           f"removes {usd(other['usd'] / 2)} (net {usd(2 * gpt['usd'] - other['usd'] / 2, True)})" in text
    (line,) = [line for line in text.splitlines() if line.startswith("  prod/ml/gpt: new run gpt-")]
    assert f"{usd(2 * gpt['usd'], signed=True)} (2 x p5.48xlarge on-demand at $55.04/node-h)" in line
    assert f"  prod/ml/other: changed: {number(-other['hours'] / 2, signed=True)} h" in text
    markdown = _diff(tmp_path, "--format", "markdown")
    assert "#### Cost" in markdown and "| `prod/ml/gpt` | new run gpt-" in markdown
    assert f"{usd(2 * gpt['usd'], signed=True)} |" in markdown and 2 * gpt["usd"] > 1000
