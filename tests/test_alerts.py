"""Training alerts: the PrometheusRule synth writes, checked by Prometheus's own promtool on synthetic series.

`promtool check rules` reads the rules as Prometheus loads them (PromQL, templates); `promtool test rules`
evaluates them over series written as a stalled step counter, climbing restarts, a stale checkpoint, DCGM
XID and ECC errors, a failed run, low ETTR and a fallen MFU, and over a healthy run's series, where nothing may
fire. promtool compares annotations exactly, so the unit tests read a copy without them (the templates are
what `check rules` parses). Where promtool is not installed (Debian's `prometheus` package has it), those tests
skip and say so.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubetrain.platform.alerts import (
    CustomAlert,
    EttrAlert,
    TrainingAlerts,
    expression_problems,
)
from kubetrain.platform.gpu_monitoring import DcgmExporter, TrainingPodMonitor
from platform_support import cluster, codes, emitted, pools

from kubetrain_runtime.metric_names import RUNTIME_METRICS

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed (Debian: apt-get install "
                                                             "prometheus): the rules cannot be evaluated")

RANK = 'job="gpt",namespace="ml",node="ip-10-0-0-1",rank="0"'
GPU = 'node="ip-10-0-0-9",gpu="3",UUID="GPU-1234",modelName="NVIDIA H100 80GB HBM3"'


def rule_spec(crds: Path, **props: Any) -> dict[str, Any]:
    c = cluster()
    gpu, _ = pools(c)
    dcgm = DcgmExporter(c, "dcgm-exporter", pools=[gpu])
    monitor = TrainingPodMonitor(c, "training")
    TrainingAlerts(c, "training-alerts", monitor=monitor, dcgm=dcgm, **props)
    assert codes(c) == []
    return emitted(c, crds)["PrometheusRule/training-alerts"]["spec"]


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def write_rules(spec: dict[str, Any], folder: Path) -> None:
    (folder / "rules.yaml").write_text(yaml.safe_dump(spec))
    bare = {"groups": [{**g, "rules": [{k: v for k, v in r.items() if k != "annotations"} for r in g["rules"]]}
                       for g in spec["groups"]]}
    (folder / "bare.yaml").write_text(yaml.safe_dump(bare))


def series(name: str, labels: str, values: str) -> dict[str, str]:
    return {"series": f"{name}{{{labels}}}", "values": values}


# Every rank series of a healthy run for 90 minutes: logging each minute (its timestamp follows the clock),
# 1 s steps logged every 10, a durable checkpoint every 5 minutes, one start, steady ETTR and MFU; GPUs clean.
HEALTHY = [
    series("kubetrain_last_step_timestamp_seconds", RANK, "0+60x90"),
    series("kubetrain_step_time_seconds", RANK, "1x90"),
    series("kubetrain_log_interval_steps", RANK, "10x90"),
    series("kubetrain_last_checkpoint_timestamp_seconds", RANK + ',tier="durable"',
           " ".join(str(300 * (m // 5)) for m in range(91))),
    series("kubetrain_checkpoint_interval_seconds", RANK + ',tier="durable"', "300x90"),
    series("kubetrain_job_starts", RANK, "1x90"),
    series("kubetrain_ettr", RANK, "0.99x90"),
    series("kubetrain_mfu", RANK, "0.4x90"),
    series("DCGM_FI_DEV_XID_ERRORS", GPU, "0x90"),
    series("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", GPU, "0x90"),
    series("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", GPU, "0x90"),
    series("DCGM_FI_DEV_ROW_REMAP_FAILURE", GPU, "0x90"),
    series("DCGM_FI_DEV_THERMAL_VIOLATION", GPU, "0+1000000x90"),  # 1 s of every 60 throttled: 1.7 %
    series("DCGM_FI_DEV_POWER_VIOLATION", GPU, "0x90"),
]
ALERTS = ("TrainingRunStalled", "TrainingRunRestarting", "TrainingEttrLow", "TrainingMfuDropped",
          "TrainingCheckpointStale", "TrainingRunFailed", "GpuXidError", "GpuMemoryErrors", "GpuThrottled")


def replaced(base: list[dict[str, str]], *changes: dict[str, str]) -> list[dict[str, str]]:
    names = {c["series"] for c in changes}
    return [s for s in base if s["series"] not in names] + list(changes)


def unit_test(input_series: list[dict[str, str]], eval_time: str,
              expected: dict[str, list[dict[str, str]]]) -> dict[str, Any]:
    """One promtool test: at `eval_time`, exactly the alerts of `expected` fire (with those labels); the others
    of ALERTS stay silent."""
    return {"interval": "1m", "input_series": input_series, "alert_rule_test": [
        {"eval_time": eval_time, "alertname": name, "exp_alerts": [{"exp_labels": labels}
                                                                 for labels in expected.get(name, [])]}
        for name in ALERTS]}


TRAINING = {"job": "gpt", "namespace": "ml"}
ON_RANK = {**TRAINING, "node": "ip-10-0-0-1", "rank": "0"}
ON_GPU = {"node": "ip-10-0-0-9", "gpu": "3", "UUID": "GPU-1234", "modelName": "NVIDIA H100 80GB HBM3"}

CASES = {
    "healthy run": (HEALTHY, "80m", {}),
    # The step counter stops at minute 10: 20 minutes later it is 20 minutes old, past 5 log intervals (50 s)
    # and the 10-minute floor.
    "stalled step counter": (replaced(HEALTHY, series("kubetrain_last_step_timestamp_seconds", RANK,
                                                      "0+60x10 600x80")), "30m",
                             {"TrainingRunStalled": [{**ON_RANK, "severity": "critical"}]}),
    "climbing restarts": (replaced(HEALTHY, series("kubetrain_job_starts", RANK, "1x40 2x5 3x5 4x5 5x35")), "60m",
                          {"TrainingRunRestarting": [{**TRAINING, "severity": "warning"}]}),
    "stale checkpoint": (replaced(HEALTHY, series("kubetrain_last_checkpoint_timestamp_seconds",
                                                  RANK + ',tier="durable"', "0x90")), "20m",
                         {"TrainingCheckpointStale": [{**ON_RANK, "tier": "durable", "severity": "critical"}]}),
    "failed run": (HEALTHY + [series("kubetrain_permanent_failure", RANK + ',reason="diverged"', "1x10")], "5m",
                   {"TrainingRunFailed": [{**TRAINING, "reason": "diverged", "severity": "critical"}]}),
    "low ETTR": (replaced(HEALTHY, series("kubetrain_ettr", RANK, "0.5x90")), "40m",
                 {"TrainingEttrLow": [{**ON_RANK, "severity": "warning"}]}),
    "MFU fallen": (replaced(HEALTHY, series("kubetrain_mfu", RANK, "0.4x60 0.1x30")), "85m",
                   {"TrainingMfuDropped": [{**TRAINING, "severity": "warning"}]}),
    "XID error": (replaced(HEALTHY, series("DCGM_FI_DEV_XID_ERRORS", GPU, "0x10 79x80")), "15m",
                  {"GpuXidError": [{**ON_GPU, "severity": "critical"}]}),
    "double-bit ECC": (replaced(HEALTHY, series("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", GPU, "0x10 2x80")), "15m",
                       {"GpuMemoryErrors": [{**ON_GPU, "severity": "critical"}]}),
    "thermal throttling": (replaced(HEALTHY, series("DCGM_FI_DEV_THERMAL_VIOLATION", GPU, "0+30000000x90")), "30m",
                           {"GpuThrottled": [{**ON_GPU, "severity": "warning"}]}),
}


@needs_promtool
@pytest.mark.processes
def test_the_rules_load_in_prometheus_and_fire_on_each_failure_and_not_on_a_healthy_run(crds, tmp_path):
    write_rules(rule_spec(crds), tmp_path)
    checked = promtool("check", "rules", "rules.yaml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in checked.stdout
    tests = {"rule_files": ["bare.yaml"], "evaluation_interval": "1m",
             "tests": [{"name": name, **unit_test(*case)} for name, case in CASES.items()]}
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests, sort_keys=False))
    result = promtool("test", "rules", "tests.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
@pytest.mark.processes
def test_a_run_config_target_replaces_the_alerts_default_and_tuned_alerts_follow_their_settings(crds, tmp_path):
    spec = rule_spec(crds, ettr=EttrAlert(below=0.6, sustained="5m"), mfu_drop=None, gpu=None)
    assert [r["alert"] for g in spec["groups"] for r in g["rules"]] == [
        "TrainingRunStalled", "TrainingRunRestarting", "TrainingEttrLow", "TrainingCheckpointStale",
        "TrainingRunFailed"]
    write_rules(spec, tmp_path)
    ettr = [series("kubetrain_ettr", RANK, "0.7x30"), series("kubetrain_ettr", RANK.replace("gpt", "llm"), "0.7x30"),
            series("kubetrain_ettr_target", RANK.replace("gpt", "llm"), "0.95x30")]
    tests = {"rule_files": ["bare.yaml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": ettr,
        # 0.7 is above the alert's 0.6 for gpt, and below llm's own target of 0.95
        "alert_rule_test": [{"eval_time": "10m", "alertname": "TrainingEttrLow", "exp_alerts": [
            {"exp_labels": {**ON_RANK, "job": "llm", "severity": "warning"}}]}]}]}
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests))
    result = promtool("test", "rules", "tests.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_rule_reads_only_exported_series_and_links_its_runbook(crds):
    spec = rule_spec(crds)
    rules = [r for g in spec["groups"] for r in g["rules"]]
    assert {r["alert"] for r in rules} == set(ALERTS)
    assert expression_problems(rules, "") == []
    for rule in rules:
        assert rule["annotations"]["runbook_url"].endswith(f"#alert-{rule['alert'].lower()}")
        assert rule["labels"]["severity"] in ("critical", "warning")
    gpu_rules = [r for r in rules if r["alert"].startswith("Gpu")]
    assert all("by (node, gpu" in r["expr"] for r in gpu_rules), "an operator cordons by node"
    runbooks = (Path(__file__).parents[1] / "docs" / "guides" / "alerts.md").read_text()
    for name in ALERTS:
        assert f'<a id="alert-{name.lower()}"></a>' in runbooks, f"docs/guides/alerts.md has no runbook for {name}"
    assert "kubetrain_permanent_failure" in RUNTIME_METRICS


def test_a_custom_alert_is_parsed_as_promql_and_its_series_looked_up(crds):
    c = cluster()
    monitor = TrainingPodMonitor(c, "training")
    runbook = "https://runbooks.example.com/training"
    TrainingAlerts(c, "alerts", monitor=monitor, gpu=None, custom=[
        CustomAlert(alert="SlowLoader", expr="rate(kubetrain_step[5m] < 0.1", summary="slow", runbook_url=runbook),
        CustomAlert(alert="PodsPending", expr="kube_pod_status_phase{phase='Pending'} > 0", summary="pending",
                    runbook_url=runbook)])
    found = codes(c)
    assert [(code, path) for code, path, _ in found] == [("KT475", "custom.0.expr"), ("KT477", "custom.1.expr")]
    assert "PrometheusRule/alerts" not in emitted(c, crds)  # an error emits nothing


def test_gpu_alerts_need_the_dcgm_exporter():
    c = cluster()
    TrainingAlerts(c, "alerts", monitor=TrainingPodMonitor(c, "training"))
    assert [(code, path) for code, path, _ in codes(c)] == [("KT476", "dcgm")]


def test_dcgm_exporter_collects_what_the_gpu_alerts_read_and_keeps_the_gpu_pods_labels(crds):
    c = cluster()
    gpu, _ = pools(c)
    DcgmExporter(c, "dcgm-exporter", pools=[gpu])
    objects = emitted(c, crds)
    csv = objects["ConfigMap/dcgm-exporter-collectors"]["data"]["kubetrain-counters.csv"]
    for field in ("DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_THERMAL_VIOLATION",
                  "DCGM_FI_DEV_POWER_VIOLATION"):
        assert f"\n{field}, " in f"\n{csv}"
    container = objects["DaemonSet/dcgm-exporter"]["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "DCGM_EXPORTER_COLLECTORS", "value": "/etc/dcgm-exporter/kubetrain-counters.csv"} in \
        container["env"]
    endpoint = objects["ServiceMonitor/dcgm-exporter"]["spec"]["endpoints"][0]
    assert endpoint["honorLabels"] is True
    assert endpoint["relabelings"][0]["targetLabel"] == "node"
