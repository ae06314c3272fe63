"""Training alerts: a PrometheusRule over the series the runtime and the DCGM exporter export.

    monitor = TrainingPodMonitor(cluster, "training", namespace="ml")
    TrainingAlerts(cluster, "training-alerts", monitor=monitor, dcgm=dcgm)   # every alert on, documented defaults
    TrainingAlerts(cluster, "quiet", monitor=monitor, mfu_drop=None, restarts=RestartAlert(at_least=5))

Each alert is one typed setting with defaults a user tunes, or turns off with None. The rules read only what
kubetrain's own objects make Prometheus scrape: the runtime's series (kubetrain_runtime/metric_names.py) through the
monitor's PodMonitor, and the DCGM fields kubetrain's exporter collects (DCGM_FIELDS) through its
ServiceMonitor; synth parses every expression as PromQL and refuses a series nobody exports. Every rule
carries a runbook link (its section of the site's alerts guide, docs/guides/alerts.md) and the labels an
operator acts on: `job` for the training alerts, `node` (and `gpu`) for the GPU ones, so a bad node can be cordoned.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

import promql_parser
from pydantic import Field, InstanceOf

from kubetrain.cluster import Cluster
from kubetrain.kinds.monitoring import API_VERSION as MONITORING_API_VERSION
from kubetrain.model.names import Dns1123Subdomain, LabelKey, LabelValue, PrometheusDuration
from kubetrain.model.strict import StrictProps
from kubetrain.platform.gpu_monitoring import DCGM_FIELDS, DcgmExporter, TrainingPodMonitor
from kubetrain.platform.platform_construct import PlatformConstruct
from kubetrain.rules.registry import register
from kubetrain_runtime.metric_names import RUNTIME_METRICS
from kubetrain_runtime.problems import Problem

PROMETHEUS_RULES = "https://prometheus.io/docs/prometheus/latest/configuration/alerting_rules/"
# The site published from docs/ (mkdocs.yml site_url); each alert's runbook is its anchor on the alerts guide.
RUNBOOKS = "https://kubetrain.github.io/kubetrain/guides/alerts/"

BAD_EXPRESSION = register(
    "KT475", "error", "alert expression that is not PromQL",
    rationale="The Prometheus operator accepts the PrometheusRule, and Prometheus then refuses to load the rule "
              "file: none of the group's alerts evaluates, without a word in the pull request.",
    fix="correct the expression (promtool check rules shows the same error)", source=PROMETHEUS_RULES)
UNEXPORTED_SERIES = register(
    "KT477", "warning", "alert expression over a series kubetrain's exporters do not export",
    rationale="An expression over a series no exporter writes never fires. kubetrain's own alerts read only the "
              "runtime's series and the DCGM fields its exporter collects; a rule of yours may read another "
              "exporter's (kube-state-metrics, node-exporter), which kubetrain cannot see.",
    fix="name a series the runtime (kubetrain_runtime/metric_names.py) or kubetrain's DCGM exporter "
        "(kubetrain.platform.gpu_monitoring.DCGM_FIELDS) exports, or make sure another exporter writes it",
    source=PROMETHEUS_RULES)
GPU_ALERTS_WITHOUT_EXPORTER = register(
    "KT476", "error", "GPU alerts without a DCGM exporter",
    rationale="The XID, ECC and throttling alerts read the DCGM exporter's series; without an exporter on the "
              "job's pools they can never fire.",
    fix="pass the cluster's DcgmExporter as dcgm=..., or turn the GPU alerts off with gpu=None",
    source="README.md (Training alerts)")

Severity = Literal["critical", "warning", "info"]


class AlertSetting(StrictProps):
    severity: Severity = Field("warning", description="The `severity` label Alertmanager routes on.")


class StalledRunAlert(AlertSetting):
    """The step counter stands still: the run hangs (a collective that never returns, a stuck data reader)."""

    log_intervals: float = Field(5, gt=1, description="Fire once no step was logged for this many of the run's "
                                                     "own log intervals (its step time times its log interval).")
    at_least: PrometheusDuration = Field("10m", description="...and for at least this long: a checkpoint save "
                                                            "or an evaluation pauses the steps too.")
    severity: Severity = "critical"


class RestartAlert(AlertSetting):
    """The job keeps starting again: a crash loop the runtime's recovery hides from a glance at the step count."""

    at_least: int = Field(3, ge=1, description="Fire at this many starts of the job within `within`.")
    within: PrometheusDuration = Field("1h", description="The window the starts are counted in.")


class EttrAlert(AlertSetting):
    """Effective training time ratio below target: restarts and recomputed steps eat the run's time."""

    below: float = Field(0.9, gt=0, lt=1, description="The target of a job whose run config sets none "
                                                      "(resilience.ettr_target, exported as kubetrain_ettr_target).")
    sustained: PrometheusDuration = Field("30m", description="How long it must stay below (the rule's `for`).")


class MfuDropAlert(AlertSetting):
    """MFU fell well below the run's own recent level: a slow node, throttling, a data stall, a bad link."""

    fraction: float = Field(0.7, gt=0, lt=1, description="Fire when the last 10 minutes' MFU is below this "
                                                        "fraction of the level over `recent` before them.")
    recent: PrometheusDuration = Field("1h", description="The window of the run's recent level.")


class StaleCheckpointAlert(AlertSetting):
    """The newest durable checkpoint is old: a crash now loses more than the run planned to risk."""

    intervals: float = Field(2, gt=1, description="Fire when the newest durable checkpoint is older than this "
                                                  "many of the run's checkpoint intervals.")
    severity: Severity = "critical"


class FailedRunAlert(AlertSetting):
    """The run failed for good (a failure class its launch target does not retry): a person must act."""

    severity: Severity = "critical"


class GpuAlert(AlertSetting):
    """GPU trouble on a node, from DCGM: XID errors, uncorrectable memory errors, thermal or power throttling."""

    xid: bool = Field(True, description="An XID error reported by the driver.")
    memory_errors: bool = Field(True, description="Double-bit ECC errors, uncorrectable row remaps, a failed remap.")
    throttled_fraction: float | None = Field(0.1, gt=0, lt=1, description="Fire when thermal or power "
                                                                         "throttling takes this fraction of the "
                                                                         "time over 5 minutes; None: off.")


class CustomAlert(StrictProps):
    """An alert of your own, checked like kubetrain's: its expression must parse as PromQL."""

    alert: str = Field(..., pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", description="The alert's name.")
    expr: str = Field(..., min_length=1, description="A PromQL expression; the alert fires for each series it "
                                                     "returns.")
    sustained: PrometheusDuration | None = Field(None, description="How long it must hold first (`for`).")
    severity: Severity = "warning"
    summary: str = Field(..., min_length=1, description="One line for the notification.")
    runbook_url: str = Field(..., pattern=r"^https?://", description="What a person does when it fires.")


class TrainingAlertsProps(StrictProps):
    name: Dns1123Subdomain = Field(..., description="The PrometheusRule's name; default the id.")
    monitor: InstanceOf[TrainingPodMonitor] = Field(..., description="The PodMonitor that scrapes the training "
                                                                     "pods: the rules live in its namespace and "
                                                                     "read its series.")
    dcgm: InstanceOf[DcgmExporter] | None = Field(None, description="The cluster's DCGM exporter, for the GPU "
                                                                    "alerts.")
    runbook_url: str = Field(RUNBOOKS, pattern=r"^https?://", description="Where the runbooks are; each alert "
                                                                          "links its own section (#anchor).")
    prometheus_labels: dict[LabelKey, LabelValue] = Field(default_factory=dict, description="Labels your "
                                                          "Prometheus selects rules by, e.g. {'release': "
                                                          "'kube-prometheus-stack'}.")
    stalled: StalledRunAlert | None = Field(default_factory=StalledRunAlert)
    restarts: RestartAlert | None = Field(default_factory=RestartAlert)
    ettr: EttrAlert | None = Field(default_factory=EttrAlert)
    mfu_drop: MfuDropAlert | None = Field(default_factory=MfuDropAlert)
    stale_checkpoint: StaleCheckpointAlert | None = Field(default_factory=StaleCheckpointAlert)
    failed: FailedRunAlert | None = Field(default_factory=FailedRunAlert)
    gpu: GpuAlert | None = Field(default_factory=GpuAlert, description="Needs `dcgm`; None turns it off.")
    custom: list[CustomAlert] = Field(default_factory=list, description="Alerts of your own, in the same rule "
                                                                        "group as the training alerts.")


def _seconds(duration: str) -> int:
    units = {"y": 365 * 86400, "w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1, "ms": 0.001}
    return int(sum(int(n) * units[u] for n, u in re.findall(r"([0-9]+)(ms|y|w|d|h|m|s)", duration)))


class TrainingAlerts(PlatformConstruct):
    """A PrometheusRule with the training and GPU alerts, in the monitor's namespace."""

    Props = TrainingAlertsProps
    kind = "alerts"

    def __init__(self, scope: Cluster, id: str, props: TrainingAlertsProps | Mapping[str, Any] | None = None,
                 **kwargs: Any):
        super().__init__(scope, id, props, kwargs)
        p = self.props
        self.namespace = p.monitor.namespace
        problems = []
        if p.gpu is not None and p.dcgm is None:
            problems.append(Problem(GPU_ALERTS_WITHOUT_EXPORTER.code, "dcgm", "the GPU alerts are on but no DCGM "
                                    "exporter is given", GPU_ALERTS_WITHOUT_EXPORTER.fix))
        rules = self.training_rules() + (self.gpu_rules() if p.gpu is not None and p.dcgm is not None else [])
        custom = [self.custom_rule(alert) for alert in p.custom]
        problems += expression_problems(rules, "") + expression_problems(custom, "custom")
        rules += custom
        self._emit(problems, [{
            "apiVersion": MONITORING_API_VERSION, "kind": "PrometheusRule",
            "metadata": {"name": p.name, "namespace": self.namespace, "labels": dict(p.prometheus_labels)},
            "spec": {"groups": [group for group in (
                {"name": "kubetrain-training", "rules": [r for r in rules if not r["alert"].startswith("Gpu")]},
                {"name": "kubetrain-gpu", "rules": [r for r in rules if r["alert"].startswith("Gpu")]})
                if group["rules"]]}}])

    def _rule(self, alert: str, expr: str, setting: AlertSetting, for_: str | None, summary: str,
              description: str) -> dict[str, Any]:
        rule: dict[str, Any] = {"alert": alert, "expr": expr}
        if for_:
            rule["for"] = for_
        rule["labels"] = {"severity": setting.severity}
        rule["annotations"] = {"summary": summary, "description": description,
                               "runbook_url": f"{self.props.runbook_url}#alert-{alert.lower()}"}
        return rule

    def custom_rule(self, alert: CustomAlert) -> dict[str, Any]:
        rule: dict[str, Any] = {"alert": alert.alert, "expr": alert.expr}
        if alert.sustained:
            rule["for"] = alert.sustained
        rule["labels"] = {"severity": alert.severity}
        rule["annotations"] = {"summary": alert.summary, "runbook_url": alert.runbook_url}
        return rule

    def training_rules(self) -> list[dict[str, Any]]:
        p = self.props
        sel = f'namespace="{self.namespace}"'
        rules = []
        if s := p.stalled:
            # Per rank: a hung rank stops logging while its endpoint (a thread of its own) keeps serving.
            expr = (f"time() - kubetrain_last_step_timestamp_seconds{{{sel}}} > "
                    f"{s.log_intervals:g} * kubetrain_step_time_seconds{{{sel}}} * "
                    f"kubetrain_log_interval_steps{{{sel}}} "
                    f"and time() - kubetrain_last_step_timestamp_seconds{{{sel}}} > {_seconds(s.at_least)}")
            rules.append(self._rule(
                "TrainingRunStalled", expr, s, None, "{{ $labels.job }}: no step for {{ $value | humanizeDuration }}",
                "Rank {{ $labels.rank }} of job {{ $labels.job }} on node {{ $labels.node }} has logged no step "
                f"for more than {s.log_intervals:g} of its log intervals: the run is hung. Its hang dumps (stacks "
                "of every rank, the NCCL flight recorder) are under the run's checkpoint folder, in hangs/."))
        if s := p.restarts:
            expr = (f"max by (namespace, job) (max_over_time(kubetrain_job_starts{{{sel}}}[{s.within}])) - "
                    f"min by (namespace, job) (min_over_time(kubetrain_job_starts{{{sel}}}[{s.within}])) "
                    f">= {s.at_least}")
            rules.append(self._rule(
                "TrainingRunRestarting", expr, s, None, "{{ $labels.job }}: {{ $value }} restarts in " + s.within,
                f"Job {{{{ $labels.job }}}} started {{{{ $value }}}} more times within {s.within}: it is crash "
                "looping. Read the failure notes under its checkpoint folder (failures/) and the pods' last lines."))
        if s := p.ettr:
            # The run config's target where it sets one, the alert's otherwise.
            expr = (f"kubetrain_ettr{{{sel}}} < on (namespace, job, node, rank) "
                    f"(kubetrain_ettr_target{{{sel}}} or kubetrain_ettr{{{sel}}} * 0 + {s.below:g})")
            rules.append(self._rule(
                "TrainingEttrLow", expr, s, s.sustained, "{{ $labels.job }}: ETTR {{ $value | humanizePercentage }}",
                "Job {{ $labels.job }} keeps less of its wall time as training than its target: restarts, "
                "recomputed steps after them, or checkpoints that block too long."))
        if s := p.mfu_drop:
            now = f"avg by (namespace, job) (avg_over_time(kubetrain_mfu{{{sel}}}[10m]))"
            before = f"avg by (namespace, job) (avg_over_time(kubetrain_mfu{{{sel}}}[{s.recent}] offset 10m))"
            rules.append(self._rule(
                "TrainingMfuDropped", f"{now} < {s.fraction:g} * {before}", s, "10m",
                "{{ $labels.job }}: MFU fell to {{ $value | humanizePercentage }}",
                f"Job {{{{ $labels.job }}}}'s MFU over the last 10 minutes is below {s.fraction:g} of its level over "
                f"the {s.recent} before: a slow or throttled node, a data stall or a degraded link (see the GPU "
                "alerts of its nodes; a profiled run is slower on purpose: kubetrain_profiling)."))
        if s := p.stale_checkpoint:
            durable = f'{sel},tier="durable"'
            expr = (f"time() - kubetrain_last_checkpoint_timestamp_seconds{{{durable}}} > "
                    f"{s.intervals:g} * kubetrain_checkpoint_interval_seconds{{{durable}}}")
            rules.append(self._rule(
                "TrainingCheckpointStale", expr, s, "5m",
                "{{ $labels.job }}: newest durable checkpoint {{ $value | humanizeDuration }} old",
                f"Job {{{{ $labels.job }}}} has not completed a durable checkpoint for more than {s.intervals:g} of "
                "its checkpoint intervals: a crash now loses that much work. Check the checkpoint volume "
                "(full, slow, unmounted) and the run's checkpoint events."))
        if s := p.failed:
            rules.append(self._rule(
                "TrainingRunFailed", f"max by (namespace, job, reason) (kubetrain_permanent_failure{{{sel}}}) > 0",
                s, None, "{{ $labels.job }} failed for good: {{ $labels.reason }}",
                "Job {{ $labels.job }} stopped with a failure its launch target does not retry "
                "({{ $labels.reason }}). Its failure note is under its checkpoint folder (failures/)."))
        return rules

    def gpu_rules(self) -> list[dict[str, Any]]:
        s = self.props.gpu
        assert s is not None
        by = "node, gpu, UUID, modelName"
        rules = []
        cordon = " Cordon the node ({{ $labels.node }}) and drain it once its jobs have checkpointed."
        if s.xid:
            rules.append(self._rule(
                "GpuXidError", f"max by ({by}) (DCGM_FI_DEV_XID_ERRORS) > 0", AlertSetting(severity="critical"),
                None, "XID {{ $value }} on {{ $labels.node }} GPU {{ $labels.gpu }}",
                "The driver reported XID {{ $value }} on GPU {{ $labels.gpu }} of node {{ $labels.node }}: a GPU, "
                "driver or NVLink fault the jobs on it cannot recover from." + cordon))
        if s.memory_errors:
            expr = (f"max by ({by}) (increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[10m])) > 0 "
                    f"or max by ({by}) (increase(DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS[10m])) > 0 "
                    f"or max by ({by}) (DCGM_FI_DEV_ROW_REMAP_FAILURE) > 0")
            rules.append(self._rule(
                "GpuMemoryErrors", expr, AlertSetting(severity="critical"), None,
                "Uncorrectable memory errors on {{ $labels.node }} GPU {{ $labels.gpu }}",
                "GPU {{ $labels.gpu }} of node {{ $labels.node }} has double-bit ECC errors or uncorrectable row "
                "remaps: results on it may be wrong (NaN losses, diverging ranks)." + cordon))
        if s.throttled_fraction is not None:
            # The violation counters count microseconds throttled: their rate over 1e6 is the throttled fraction.
            expr = (f"max by ({by}) (rate(DCGM_FI_DEV_THERMAL_VIOLATION[5m]) / 1e6) > {s.throttled_fraction:g} "
                    f"or max by ({by}) (rate(DCGM_FI_DEV_POWER_VIOLATION[5m]) / 1e6) > {s.throttled_fraction:g}")
            rules.append(self._rule(
                "GpuThrottled", expr, s, "10m", "{{ $labels.node }} GPU {{ $labels.gpu }} throttled",
                "GPU {{ $labels.gpu }} of node {{ $labels.node }} spends {{ $value | humanizePercentage }} of its "
                "time thermally or power throttled: every rank of a synchronous job waits for it. Check the "
                "node's cooling and power capping."))
        return rules


EXPORTED = {**RUNTIME_METRICS, **{field: kind for field, kind, _ in DCGM_FIELDS if kind != "label"}}


def expression_problems(rules: list[dict[str, Any]], field: str) -> list[Problem]:
    """KT475 for each rule whose expression does not parse as PromQL, KT477 for one that names a series
    kubetrain's exporters do not export. `field` is where the rules came from in the props ("" for kubetrain's
    own: the path then names the alert)."""
    problems = []
    for i, rule in enumerate(rules):
        path = f"{field}.{i}.expr" if field else f"alerts.{rule['alert']}.expr"
        try:
            tree = promql_parser.parse(rule["expr"])
        except Exception as error:  # the parser raises ValueError or its own errors, naming the position
            problems.append(Problem(BAD_EXPRESSION.code, path, f"not PromQL: {error}", BAD_EXPRESSION.fix))
            continue
        unknown = sorted(name for name in metric_names(tree) if name not in EXPORTED)
        if unknown:
            problems.append(Problem(UNEXPORTED_SERIES.code, path, f"reads {', '.join(unknown)}, which neither the "
                                    "runtime nor kubetrain's DCGM exporter exports", UNEXPORTED_SERIES.fix))
    return problems


def metric_names(node: Any) -> set[str]:
    """Every series name a parsed PromQL expression selects."""
    found: set[str] = set()
    if isinstance(node, promql_parser.VectorSelector):
        names = [node.name] if node.name else [m.value for m in node.matchers.matchers if m.name == "__name__"]
        return set(names)
    for attr in ("expr", "lhs", "rhs", "param", "vector_selector"):
        child = getattr(node, attr, None)
        if child is not None:
            found |= metric_names(child)
    for arg in getattr(node, "args", None) or []:
        found |= metric_names(arg)
    return found
