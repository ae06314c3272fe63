"""Where a run's records go: rank 0's JSON lines, every rank's Prometheus endpoint, the optional
TensorBoard and MLflow sinks (rank 0, each off unless configured), and the TrainJob's status where Kubeflow
Trainer injects its endpoint (rank 0, kubetrain_runtime/progress.py).

The run (kubetrain_runtime/run.py) hands every record (the dicts of `step`, `checkpoint`, `rollback`, `resumed`, ...
events) to `Telemetry.observe`; each sink takes the fields it knows. Labels of the Prometheus series:
`job` from KUBETRAIN_JOB, `node` from NODE_NAME (the downward API's spec.nodeName) or else the pod's
hostname, and the global `rank`.

Every rank serves its own endpoint on `metrics.port + local rank` rather than rank 0 of a node
aggregating the others: no extra collective or IPC in the training loop, a straggling or hung rank
shows in its own series, and one rank's death does not take its node's metrics with it.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from kubetrain_runtime.distributed import World
from kubetrain_runtime.metric_names import RUNTIME_METRICS
from kubetrain_runtime.metrics import emit
from kubetrain_runtime.progress import ProgressReporter
from kubetrain_runtime.runtime_config import JOB_ENV, MetricsConfig

MLFLOW_RUN_ID_FILE = "mlflow_run_id"  # beside the durable checkpoints: restarts log to the same run


def job_name() -> str:
    return os.environ.get(JOB_ENV, "local")


def job_labels(rank: int) -> dict[str, str]:
    return {"job": job_name(), "node": os.environ.get("NODE_NAME") or socket.gethostname(), "rank": str(rank)}


class PrometheusEndpoint:
    """This rank's /metrics: gauges of the latest values, counters of events since the process started."""

    def __init__(self, port: int, labels: dict[str, str], run_info: dict[str, Any] | None = None):
        from prometheus_client import CollectorRegistry, Counter, Gauge, disable_created_metrics, start_http_server

        disable_created_metrics()  # no `_created` series beside each counter: names metric_names.py does not list
        self.registry = CollectorRegistry()
        names = list(labels)

        # Only series kubetrain_runtime/metric_names.py lists: the alerts kubetrain synthesizes read no others.
        def gauge(name: str, doc: str, extra: tuple[str, ...] = ()) -> Any:
            if RUNTIME_METRICS.get(name) != "gauge":
                raise ValueError(f"{name} is no gauge of kubetrain_runtime/metric_names.py")
            return Gauge(name, doc, names + list(extra), registry=self.registry)

        def counter(name: str, doc: str, extra: tuple[str, ...] = ()) -> Any:
            if RUNTIME_METRICS.get(f"{name}_total") != "counter":
                raise ValueError(f"{name} is no counter of kubetrain_runtime/metric_names.py")
            return Counter(name, doc, names + list(extra), registry=self.registry)

        self.labels = labels
        self.step_gauges = {
            "step": gauge("kubetrain_step", "Last optimizer step logged."),
            "loss": gauge("kubetrain_loss", "Training loss (mean over ranks) at the last log step."),
            "tokens_per_s": gauge("kubetrain_tokens_per_second", "Training throughput of the whole job."),
            "step_time_s": gauge("kubetrain_step_time_seconds", "Mean step time since the previous log step."),
            "mfu": gauge("kubetrain_mfu", "Model FLOPs utilization (GPUs with a known peak)."),
            "ettr": gauge("kubetrain_ettr", "Effective training time ratio since the job first started."),
        }
        # The basis of kubetrain_mfu, the same as `kubetrain cost`'s estimate: achieved FLOP/s per device is
        # kubetrain_tokens_per_second x kubetrain_flops_per_token / ranks, on a CPU too (which has no peak).
        self.basis = {"flops_per_token": gauge("kubetrain_flops_per_token", "Training FLOPs per token (PaLM)."),
                      "peak_flops": gauge("kubetrain_peak_flops", "Dense bf16 peak FLOP/s of this rank's device, "
                                                                  "where known.")}
        self.skipped = counter("kubetrain_skipped_steps", "Optimizer steps skipped for non-finite gradients.")
        self.rollbacks = counter("kubetrain_rollbacks", "Rollbacks to a checkpoint after repeated bad steps.")
        self.checkpoints = counter("kubetrain_checkpoints", "Complete checkpoints saved.", ("tier",))
        self.blocked = gauge("kubetrain_checkpoint_blocked_seconds",
                             "Time the training thread spent on the last checkpoint.", ("tier",))
        self.complete = gauge("kubetrain_checkpoint_complete_seconds",
                              "Time from the last checkpoint's start until it was complete.", ("tier",))
        # torchrun counts the restarts of this pod's ranks; the pod's own restarts are the kubelet's.
        gauge("kubetrain_restarts", "Restarts of this pod's ranks by torchrun.").labels(**labels).set(
            int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")))
        # 1 while the profiler records this rank (kubetrain_runtime/profiling.py): its step times are not the run's.
        self.profiling = gauge("kubetrain_profiling", "1 while the PyTorch profiler records this rank, else 0.")
        self.profiling.labels(**labels).set(0)
        # What the training alerts compare against: when the last log step was, how far apart log steps are, when
        # each tier's last checkpoint completed and how far apart checkpoints should be.
        self.last_step = gauge("kubetrain_last_step_timestamp_seconds", "When the last log step was recorded.")
        self.last_checkpoint = gauge("kubetrain_last_checkpoint_timestamp_seconds",
                                     "When the last complete checkpoint of the tier was recorded.", ("tier",))
        self.checkpoint_interval = gauge("kubetrain_checkpoint_interval_seconds",
                                         "Seconds between checkpoints of the tier the run aims at: its interval in "
                                         "steps times the recent step time.", ("tier",))
        self.permanent_failure = gauge("kubetrain_permanent_failure_timestamp_seconds", "When this rank failed for "
                                       "good (a failure its launch target does not retry), by reason.", ("reason",))
        # From the endpoint's first answer: a run that hangs before its first step has a clock to be measured by.
        gauge("kubetrain_run_start_timestamp_seconds", "When this rank's run began (its endpoint opened).").labels(
            **labels).set(time.time())
        info = run_info or {}
        gauge("kubetrain_log_interval_steps", "Optimizer steps between log steps.").labels(**labels).set(
            info.get("log_interval_steps", 1))
        if info.get("job_starts") is not None:
            gauge("kubetrain_job_starts", "Starts of the job, kept beside its checkpoints (ettr.json).").labels(
                **labels).set(info["job_starts"])
        if info.get("job_crashes") is not None:
            gauge("kubetrain_job_crashes", "Starts of the job after a run that did not end cleanly (a stop with its "
                                           "checkpoint, or the end, is clean), kept in ettr.json.").labels(
                **labels).set(info["job_crashes"])
        if info.get("ettr_clock_start") is not None:
            gauge("kubetrain_ettr_clock_start_timestamp_seconds", "When the job's ETTR clock began: its first start, "
                  "later by the time it was paused (ettr.json).").labels(**labels).set(info["ettr_clock_start"])
        if info.get("ettr_target") is not None:  # unset: the alert's own default applies, and no series is written
            gauge("kubetrain_ettr_target", "The ETTR the run config asks for (resilience.ettr_target).").labels(
                **labels).set(info["ettr_target"])
        self._skipped_seen = 0
        self.server, self._thread = start_http_server(port, registry=self.registry)

    def observe(self, record: dict[str, Any]) -> None:
        event, labels = record["event"], self.labels
        if event == "step":
            for field, metric in self.step_gauges.items():
                if field in record:
                    metric.labels(**labels).set(record[field])
            # The trainer's count restarts with the process, like a counter's value.
            self.skipped.labels(**labels).inc(record["skipped_steps"] - self._skipped_seen)
            self._skipped_seen = record["skipped_steps"]
            self.last_step.labels(**labels).set(time.time())
        elif event == "mfu_basis":
            for field, metric in self.basis.items():
                if record.get(field):
                    metric.labels(**labels).set(record[field])
        elif event == "rollback":
            self.rollbacks.labels(**labels).inc()
        elif event == "profile":
            recording = record["phase"] == "start" and int(labels["rank"]) in record["ranks"]
            self.profiling.labels(**labels).set(int(recording))
        elif event == "checkpoint":
            tier = record.get("tier", "durable")
            self.checkpoints.labels(**labels, tier=tier).inc()
            self.blocked.labels(**labels, tier=tier).set(record["blocked_s"])
            self.complete.labels(**labels, tier=tier).set(record["complete_after_s"])
            self.last_checkpoint.labels(**labels, tier=tier).set(time.time())

    def checkpoint_intervals(self, seconds: dict[str, float]) -> None:
        for tier, interval_s in seconds.items():
            self.checkpoint_interval.labels(**self.labels, tier=tier).set(interval_s)

    def failed(self, reason: str) -> None:
        self.permanent_failure.labels(**self.labels, reason=reason).set(time.time())

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class TensorBoardSink:
    """Scalars of every step and checkpoint record, as TensorBoard event files."""

    def __init__(self, logdir: str):
        from tensorboardX import SummaryWriter

        self.writer = SummaryWriter(logdir, flush_secs=10)

    def observe(self, record: dict[str, Any]) -> None:
        if record["event"] == "step":
            for field, value in record.items():
                if field not in ("event", "step"):
                    self.writer.add_scalar(f"train/{field}", value, record["step"])
        elif record["event"] == "checkpoint":
            tier = record.get("tier", "durable")
            self.writer.add_scalar(f"checkpoint/{tier}_blocked_s", record["blocked_s"], record["step"])

    def close(self) -> None:
        self.writer.close()


class MlflowSink:
    """One MLflow run per job: its id is kept beside the durable checkpoints, so restarts continue it."""

    def __init__(self, metrics: MetricsConfig, checkpoint_dir: str, params: dict[str, Any]):
        from mlflow.entities import Metric, Param
        from mlflow.tracking import MlflowClient

        self._metric = Metric
        self.in_flight: Any = None  # the last log step's batch, queued for MLflow's background thread
        self.client = MlflowClient(metrics.mlflow_tracking_uri)
        id_file = Path(checkpoint_dir) / MLFLOW_RUN_ID_FILE
        if id_file.is_file():
            self.run_id = id_file.read_text().strip()
            return
        experiment = self.client.get_experiment_by_name(metrics.mlflow_experiment)
        experiment_id = (experiment.experiment_id if experiment
                         else self.client.create_experiment(metrics.mlflow_experiment))
        self.run_id = self.client.create_run(experiment_id, tags={"kubetrain.job": job_name()}).info.run_id
        params = [Param(key, str(value)) for key, value in flatten(params).items()]
        for start in range(0, len(params), 100):  # MLflow takes at most 100 params a batch
            self.client.log_batch(self.run_id, params=params[start:start + 100])
        id_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = id_file.with_suffix(".tmp")
        tmp.write_text(self.run_id + "\n")
        os.replace(tmp, id_file)

    def observe(self, record: dict[str, Any]) -> None:
        if record["event"] != "step":
            return
        stamp = int(time.time() * 1000)
        metrics = [self._metric(field, float(value), stamp, record["step"])
                   for field, value in record.items() if field not in ("event", "step")]
        # Queued: a tracking server slower than one log interval delays the next log step, no other.
        self.close()
        self.in_flight = self.client.log_batch(self.run_id, metrics=metrics, synchronous=False)

    def finish(self) -> None:
        self.close()
        self.client.set_terminated(self.run_id)

    def close(self) -> None:
        if self.in_flight is not None:
            self.in_flight.wait()
            self.in_flight = None


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}} -> {"a.b": 1}: the run's parameters (kubetrain's trainer: its run config) as MLflow params."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def announce_failure(metrics: MetricsConfig, reason: str, world: World | None = None) -> None:
    """A rank that fails for good before its run's endpoint opened (unusable storage at start, a bad input found
    by the rank, or by the launcher's check before torchrun: then `world` is None, and the rank is torchrun's or
    the pod's, from the environment): an endpoint of its own says so for the linger time, so the failed-run alert
    pages all the same."""
    linger = metrics.linger_s()
    if not metrics.port or not linger:
        return
    rank = world.rank if world else int(os.environ.get("RANK", 0))
    local_rank = world.local_rank if world else int(os.environ.get("LOCAL_RANK", 0))
    try:
        endpoint = PrometheusEndpoint(metrics.port + local_rank, job_labels(rank))
    except OSError as error:  # the port is taken: the failure note and the exit code still say it
        print(f"warning: rank {rank}: no Prometheus endpoint to report the failure on: {error}", file=sys.stderr)
        return
    endpoint.failed(reason)
    time.sleep(linger)
    endpoint.close()


class Telemetry:
    """Fans the trainer's records out: JSON lines and the sinks on rank 0, Prometheus on every rank."""

    def __init__(self, metrics: MetricsConfig, checkpoint_dir: str, max_steps: int, params: dict[str, Any],
                 world: World, run_info: dict[str, Any] | None = None):
        """run_info: what the Prometheus endpoint says once (log_interval_steps, job_starts, job_crashes,
        ettr_clock_start, ettr_target)."""
        self.is_main, self.rank = world.is_main, world.rank
        self.sinks: list[Any] = []
        self.mlflow: MlflowSink | None = None
        self.prometheus: PrometheusEndpoint | None = None
        self.linger_s = metrics.linger_s()
        if metrics.port:
            port = metrics.port + world.local_rank
            self.prometheus = self._start(f"Prometheus endpoint on port {port}",
                                          lambda: PrometheusEndpoint(port, job_labels(world.rank), run_info))
        if world.is_main and metrics.tensorboard_dir:
            self._start("TensorBoard sink", lambda: TensorBoardSink(metrics.tensorboard_dir))
        if world.is_main and metrics.mlflow_tracking_uri:
            self.mlflow = self._start("MLflow sink", lambda: MlflowSink(metrics, checkpoint_dir, params))
        if world.is_main:
            self._start("TrainJob progress reporter", lambda: ProgressReporter.from_env(max_steps))

    def _start(self, what: str, factory: Any) -> Any:
        # Metrics are not worth a run: a busy port, a missing extra or an unreachable tracking
        # server is said loudly on stderr, and training goes on without that sink.
        try:
            sink = factory()
        except Exception as exc:  # noqa: BLE001 - any failure of an optional sink
            print(f"warning: rank {self.rank}: no {what}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return None
        if sink is not None:  # None: nothing to report to here
            self.sinks.append(sink)
        return sink

    def observe(self, record: dict[str, Any] | None) -> None:
        if not record:
            return
        if self.is_main:
            emit(record)
        for sink in self.sinks:
            sink.observe(record)

    def checkpoint_intervals(self, seconds: dict[str, float]) -> None:
        """The seconds between checkpoints each tier aims at, for the stale-checkpoint alert."""
        if self.prometheus:
            self.prometheus.checkpoint_intervals(seconds)

    def failed(self, reason: str) -> None:
        """This rank fails for good: say so on the endpoint, and keep it open until Prometheus has scraped it."""
        if self.prometheus:
            self.prometheus.failed(reason)
            time.sleep(self.linger_s)

    def finish(self) -> None:
        """The run reached max_steps (not an interruption)."""
        if self.mlflow:
            self.mlflow.finish()

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()
        self.sinks = []
