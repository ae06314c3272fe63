"""Training alerts: a PrometheusRule over the series the runtime and the DCGM exporter export.

    monitor = TrainingPodMonitor(cluster, "training", namespace="ml")
    TrainingAlerts(cluster, "training-alerts", monitor=monitor, dcgm=dcgm)   # every alert on, documented defaults
    TrainingAlerts(cluster, "quiet", monitor=monitor, mfu_drop=None, gpu=None, restarts=RestartAlert(at_least=5))

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
from kubetrain.kinds.monitoring import BAD_EXPRESSION, parse_promql
from kubetrain.model.names import Dns1123Subdomain, LabelKey, LabelValue, PrometheusDuration
from kubetrain.model.strict import StrictProps
from kubetrain.model.vocabulary import JOB_LABEL
from kubetrain.platform.gpu_monitoring import DCGM_FIELDS, DcgmExporter, TrainingPodMonitor
from kubetrain.platform.platform_construct import PlatformConstruct
from kubetrain.rules.registry import register
from kubetrain.rules.sources import MANUAL
from kubetrain_runtime.metric_names import RUNTIME_METRICS
from kubetrain_runtime.problems import Problem

PROMETHEUS_RULES = "https://prometheus.io/docs/prometheus/latest/configuration/alerting_rules/"
# Each alert's runbook is its anchor on the manual's alerts guide (docs/guides/alerts.md).
RUNBOOKS = f"{MANUAL}guides/alerts/"

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
GPU_LABELS = "node, gpu, UUID, modelName"  # what names a GPU in DCGM's series: the node is what an operator cordons
# What tells one rank's series from another's: its pod and its global rank (a pod runs several ranks).
RANK_OF_POD = "namespace, job, pod, rank"
JOB_TARGET_LABEL = re.sub(r"[^a-zA-Z0-9_]", "_", JOB_LABEL)  # the PodMonitor's podTargetLabels, as Prometheus names it


class AlertSetting(StrictProps):
    severity: Severity = Field("warning", description="The `severity` label Alertmanager routes on.")


class StalledRunAlert(AlertSetting):
    """The step counter stands still: the run hangs (a collective that never returns, a stuck data reader)."""

    log_intervals: float = Field(5, gt=1, description="Fire once no step was logged for this many of the run's "
                                                     "own log intervals (its step time times its log interval).")
    at_least: PrometheusDuration = Field("10m", description="...and for at least this long: a checkpoint save "
                                                            "or an evaluation pauses the steps too.")
    first_step_within: PrometheusDuration = Field("30m", description="A run that has logged no step this long "
                                                                     "after it began (resuming, compiling, a "
                                                                     "collective that never returns) is hung too.")
    severity: Severity = "critical"


class EndpointDownAlert(AlertSetting):
    """A rank's metrics endpoint stops answering while its pod runs: a process so stuck that even its endpoint's
    thread cannot run (the GIL held in native code, the process stopped), or one that never opened it."""

    sustained: PrometheusDuration = Field("10m", description="How long the endpoint must stay down (the rule's "
                                                             "`for`): a restarted rank reopens it after its "
                                                             "imports, rendezvous and resume.")
    severity: Severity = "critical"


class RestartAlert(AlertSetting):
    """The job keeps crashing: a crash loop the runtime's recovery hides from a glance at the step count. A start
    after a clean end (a preemption or suspension obeyed with its checkpoint) is no crash."""

    at_least: int = Field(3, ge=1, description="Fire at this many crashes (starts after a run that did not end "
                                               "cleanly) within `within`.")
    within: PrometheusDuration = Field("1h", description="The window the crashes are counted in.")


class EttrAlert(AlertSetting):
    """Effective training time ratio below target: restarts and recomputed steps eat the run's time."""

    below: float = Field(0.9, gt=0, lt=1, description="The target of a job whose run config sets none "
                                                      "(resilience.ettr_target, exported as kubetrain_ettr_target).")
    sustained: PrometheusDuration = Field("30m", description="How long it must stay below (the rule's `for`).")
    judged_over: PrometheusDuration = Field("2h", description="The least wall time ETTR is judged over: a younger "
                                                              "job's lost time is measured against this window, so "
                                                              "its start (imports, loading, compiling: up to "
                                                              "(1 - target) x the window, 12 minutes at 0.9 over "
                                                              "2h) never pages, and a young job that lost more "
                                                              "still does.")


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
    """The run failed for good (a failure class its launch target does not retry): a person must act. It stays
    firing until the job starts again, or its failed pod is deleted (seen through kube-state-metrics' kube_pod_info
    where Prometheus scrapes it), or `remember` has passed."""

    remember: PrometheusDuration = Field("3d", description="How long after its failed rank's last scrape the alert "
                                                           "keeps firing where nothing says the job was deleted.")
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
    endpoint_down: EndpointDownAlert | None = Field(default_factory=EndpointDownAlert)
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
        """Every training alert carries `namespace`, `job` and `pod` (the rank-0 pod for a job's own figures)."""
        p = self.props
        sel = f'namespace="{self.namespace}"'
        rules = []
        if s := p.stalled:
            # Per rank: a hung rank stops logging while its endpoint (a thread of its own) keeps serving. A run that
            # never logged a step is measured from its start (its step time is not known yet).
            last = f"kubetrain_last_step_timestamp_seconds{{{sel}}}"
            expr = (f"(time() - {last} > {s.log_intervals:g} * kubetrain_step_time_seconds{{{sel}}} * "
                    f"kubetrain_log_interval_steps{{{sel}}} and time() - {last} > {_seconds(s.at_least)}) "
                    f"or (time() - kubetrain_run_start_timestamp_seconds{{{sel}}} > {_seconds(s.first_step_within)} "
                    f"unless on ({RANK_OF_POD}) {last})")
            rules.append(self._rule(
                "TrainingRunStalled", expr, s, None, "{{ $labels.job }}: no step for {{ $value | humanizeDuration }}",
                "Rank {{ $labels.rank }} of job {{ $labels.job }} (pod {{ $labels.pod }}, node {{ $labels.node }}) "
                f"has logged no step for more than {s.log_intervals:g} of its log intervals, or none at all "
                f"within {s.first_step_within} of its start: the run is hung. Its hang dumps (stacks of every rank, "
                "the flight recorder) are under the run's checkpoint folder, in hangs/."))
        if s := p.endpoint_down:
            # `up` of the training PodMonitor's targets (its jobLabel makes `job` the kubetrain job); a finished or
            # failed pod is no target, a suspended or preempted job has no pods.
            rules.append(self._rule(
                "TrainingEndpointDown", f'up{{{sel},{JOB_TARGET_LABEL}!=""}} == 0', s, s.sustained,
                "{{ $labels.job }}: rank endpoint {{ $labels.endpoint }} of {{ $labels.pod }} down",
                "The metrics endpoint {{ $labels.endpoint }} of pod {{ $labels.pod }} (job {{ $labels.job }}) has "
                f"not answered Prometheus for {s.sustained} while the pod runs: its rank is stuck where not even "
                "its endpoint's thread runs (stopped, or holding the GIL in native code), or never started its "
                "run. Read the pod's last lines; its stacks: py-spy dump, or the hang dumps once it is killed."))
        if s := p.restarts:
            crashes = f"kubetrain_job_crashes{{{sel}}}"
            expr = (f"max by (namespace, job) (max_over_time({crashes}[{s.within}])) - "
                    f"min by (namespace, job) (min_over_time({crashes}[{s.within}])) >= {s.at_least}")
            rules.append(self._rule(
                "TrainingRunRestarting", self._with_pod(expr, s.within), s, None,
                "{{ $labels.job }}: {{ $value }} crashes in " + s.within,
                f"Job {{{{ $labels.job }}}} crashed and started again {{{{ $value }}}} times within {s.within} "
                "(stops obeyed with a checkpoint, such as preemptions, do not count): it is crash looping. Read the "
                "failure notes under its checkpoint folder (failures/) and the pods' last lines."))
        if s := p.ettr:
            # Rank 0's (every rank reports the job's ETTR), the run config's target where it sets one, else the
            # alert's. Judged over at least `judged_over` of wall time: the lost time (1 - ETTR) x wall, over
            # max(wall, window), so a young job's start-up is not read as most of its life. Each side made unique
            # per pod, so that two series of one rank (a restarted pod's, before the old one is stale) cannot fail
            # the rule; the alert's value is the job's own ETTR.
            on_rank0 = f'{{{sel},rank="0"}}'
            ettr = f"kubetrain_ettr{on_rank0}"
            wall = f"(time() - kubetrain_ettr_clock_start_timestamp_seconds{on_rank0})"
            window = _seconds(s.judged_over)
            judged = f"1 - (1 - {ettr}) * clamp_max({wall} / {window}, 1)"
            target = f"(kubetrain_ettr_target{on_rank0} or {ettr} * 0 + {s.below:g})"
            by = "by (namespace, job, pod)"
            expr = (f"max {by} ({ettr}) and on (namespace, job, pod) "
                    f"(max {by} ({judged}) < on (namespace, job, pod) min {by} {target})")
            rules.append(self._rule(
                "TrainingEttrLow", expr, s, s.sustained, "{{ $labels.job }}: ETTR {{ $value | humanizePercentage }}",
                "Job {{ $labels.job }} keeps less of its wall time as training than its target (judged over at "
                f"least {s.judged_over}): crashes, recomputed steps after them, or checkpoints that block too long "
                "(time paused by a preemption or a suspension does not count)."))
        if s := p.mfu_drop:
            now = f"avg by (namespace, job) (avg_over_time(kubetrain_mfu{{{sel}}}[10m]))"
            before = f"avg by (namespace, job) (avg_over_time(kubetrain_mfu{{{sel}}}[{s.recent}] offset 10m))"
            # A rank the profiler recorded in those 10 minutes slowed the job on purpose (kubetrain_profiling).
            profiled = f"max by (namespace, job) (max_over_time(kubetrain_profiling{{{sel}}}[10m])) > 0"
            dropped = f"({now} < {s.fraction:g} * {before}) unless on (namespace, job) ({profiled})"
            rules.append(self._rule(
                "TrainingMfuDropped", self._with_pod(dropped, "1h"), s, "10m",
                "{{ $labels.job }}: MFU fell to {{ $value | humanizePercentage }}",
                f"Job {{{{ $labels.job }}}}'s MFU over the last 10 minutes is below {s.fraction:g} of its level over "
                f"the {s.recent} before: a slow or throttled node, a data stall or a degraded link (see the GPU "
                "alerts of its nodes). Minutes in which the profiler recorded a rank (kubetrain_profiling) do not "
                "count: a profiled run is slower on purpose."))
        if s := p.stale_checkpoint:
            durable = f'{sel},tier="durable"'
            # A run that has not completed a checkpoint yet is measured from its start.
            since = (f"(kubetrain_last_checkpoint_timestamp_seconds{{{durable}}} or "
                     f"kubetrain_checkpoint_interval_seconds{{{durable}}} * 0 + on ({RANK_OF_POD}) group_left "
                     f"kubetrain_run_start_timestamp_seconds{{{sel}}})")
            expr = (f"time() - {since} > {s.intervals:g} * kubetrain_checkpoint_interval_seconds{{{durable}}}")
            rules.append(self._rule(
                "TrainingCheckpointStale", expr, s, "5m",
                "{{ $labels.job }}: newest durable checkpoint {{ $value | humanizeDuration }} old",
                f"Job {{{{ $labels.job }}}} has not completed a durable checkpoint for more than {s.intervals:g} of "
                "its checkpoint intervals (or none since it began): a crash now loses that much work. Check the "
                "checkpoint volume (full, slow, unmounted) and the run's checkpoint events."))
        if s := p.failed:
            rules.append(self._rule("TrainingRunFailed", self._failed_expr(s), s, None,
                                    "{{ $labels.job }} failed for good: {{ $labels.reason }}",
                                    "Job {{ $labels.job }} stopped with a failure its launch target does not retry "
                                    "({{ $labels.reason }}) on pod {{ $labels.pod }}. Its failure note is under "
                                    "its checkpoint folder (failures/), and in the pod's last lines."))
        return rules

    def _with_pod(self, expr: str, window: str) -> str:
        """A job's own figure (`expr`, by namespace and job) labelled with the pod of its newest rank 0 within
        `window`: the pod a person reads first."""
        newest = (f'topk by (namespace, job) (1, max_over_time(kubetrain_run_start_timestamp_seconds'
                  f'{{namespace="{self.namespace}",rank="0"}}[{window}]))')
        return f"({expr}) * on (namespace, job) group_left (pod) (0 * {newest} + 1)"

    def _failed_expr(self, s: FailedRunAlert) -> str:
        """Each failed rank's newest failure within `remember` (a failing rank is scraped once or twice before it
        exits, and a failed pod is no target: the alert must outlive the series), unless the job started again
        since, or kube-state-metrics (where it reports the namespace) no longer knows the pod."""
        sel = f'namespace="{self.namespace}"'
        failure = (f"max by (namespace, job, pod, reason) "
                   f"(last_over_time(kubetrain_permanent_failure_timestamp_seconds{{{sel}}}[{s.remember}]))")
        restarted = (f'max by (namespace, job) (max_over_time(kubetrain_run_start_timestamp_seconds{{{sel},rank="0"}}'
                     f"[{s.remember}])) > on (namespace, job) max by (namespace, job) ({failure})")
        live = (f"({failure} and on (namespace, pod) kube_pod_info{{{sel}}} "
                f"or {failure} unless on () kube_pod_info{{{sel}}})")
        return f"{live} unless on (namespace, job) ({restarted})"

    def _with_training_job(self, expr: str) -> str:
        """A GPU's alert (`expr`, by GPU and the `namespace` and `pod` the exporter says use it) with the `namespace`,
        `pod` and kubetrain `job` of the training pod (of the monitor's namespace) that uses the GPU, a person's
        first question; by GPU alone elsewhere (an idle GPU, whose `pod` would be the exporter's own, or another
        workload's): a bad GPU pages all the same."""
        training = (f'group by (namespace, pod, job) '
                    f'(kubetrain_run_start_timestamp_seconds{{namespace="{self.namespace}"}})')
        return (f"({expr}) * on (namespace, pod) group_left (job) {training} "
                f"or max by ({GPU_LABELS}) (({expr}) unless on (namespace, pod) {training})")

    def gpu_rules(self) -> list[dict[str, Any]]:
        s = self.props.gpu
        assert s is not None
        by = f"{GPU_LABELS}, namespace, pod"
        rules = []
        user = "{{ if $labels.job }} (here job {{ $labels.job }}, pod {{ $labels.pod }}){{ end }}"
        cordon = f" Cordon the node ({{{{ $labels.node }}}}) and drain it once its jobs{user} have checkpointed."
        if s.xid:
            rules.append(self._rule(
                "GpuXidError", self._with_training_job(f"max by ({by}) (DCGM_FI_DEV_XID_ERRORS) > 0"),
                AlertSetting(severity="critical"),
                None, "XID {{ $value }} on {{ $labels.node }} GPU {{ $labels.gpu }}",
                "The driver reported XID {{ $value }} on GPU {{ $labels.gpu }} of node {{ $labels.node }}: a GPU, "
                "driver or NVLink fault the jobs on it cannot recover from." + cordon))
        if s.memory_errors:
            expr = (f"max by ({by}) (increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[10m])) > 0 "
                    f"or max by ({by}) (increase(DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS[10m])) > 0 "
                    f"or max by ({by}) (DCGM_FI_DEV_ROW_REMAP_FAILURE) > 0")
            rules.append(self._rule(
                "GpuMemoryErrors", self._with_training_job(expr), AlertSetting(severity="critical"), None,
                "Uncorrectable memory errors on {{ $labels.node }} GPU {{ $labels.gpu }}",
                "GPU {{ $labels.gpu }} of node {{ $labels.node }} has double-bit ECC errors or uncorrectable row "
                "remaps: results on it may be wrong (NaN losses, diverging ranks)." + cordon))
        if s.throttled_fraction is not None:
            # The violation counters count nanoseconds throttled (DCGM's field reference, DCGM_FI_DEV_*_VIOLATION;
            # dcgm-exporter's counters, corrected from "us" in NVIDIA/dcgm-exporter#589): their rate over 1e9 is
            # the throttled fraction of the time.
            expr = (f"max by ({by}) (rate(DCGM_FI_DEV_THERMAL_VIOLATION[5m]) / 1e9) > {s.throttled_fraction:g} "
                    f"or max by ({by}) (rate(DCGM_FI_DEV_POWER_VIOLATION[5m]) / 1e9) > {s.throttled_fraction:g}")
            rules.append(self._rule(
                "GpuThrottled", self._with_training_job(expr), s, "10m",
                "{{ $labels.node }} GPU {{ $labels.gpu }} throttled",
                "GPU {{ $labels.gpu }} of node {{ $labels.node }} spends {{ $value | humanizePercentage }} of its "
                f"time thermally or power throttled: every rank of a synchronous job{user} waits for it. Check the "
                "node's cooling and power capping."))
        return rules


# `up`, which Prometheus writes for every target, and the one kube-state-metrics series the failed-run alert reads
# where it is scraped (the alert holds without it): https://github.com/kubernetes/kube-state-metrics/blob/main/docs/
# metrics/workload/pod-metrics.md
SCRAPE_SERIES = {"up": "gauge", "kube_pod_info": "gauge"}
EXPORTED = {**RUNTIME_METRICS, **SCRAPE_SERIES, **{field: kind for field, kind, _ in DCGM_FIELDS if kind != "label"}}


def expression_problems(rules: list[dict[str, Any]], field: str) -> list[Problem]:
    """KT475 for each rule whose expression does not parse as PromQL, KT477 for one that names a series
    kubetrain's exporters do not export. `field` is where the rules came from in the props ("" for kubetrain's
    own: the path then names the alert)."""
    problems = []
    for i, rule in enumerate(rules):
        path = f"{field}.{i}.expr" if field else f"alerts.{rule['alert']}.expr"
        tree, error = parse_promql(rule["expr"])
        if error is not None:
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
