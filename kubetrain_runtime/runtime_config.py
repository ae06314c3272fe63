"""The runtime's configuration: checkpoints, resilience, metrics and profiling, the parts of a run that any training
loop has (kubetrain's trainer reads them from its run config, a loop of its own from the launcher's environment or from
arguments). Imports no torch and nothing of `training`: the compiler validates these with the run config.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import ConfigDict, Field, field_validator, model_validator

from kubetrain_runtime.config_paths import WRITES
from kubetrain_runtime.problems import (
    INVALID_VALUE,
    ConfigError,
    Problem,
    ReportedLater,
    Text,
    rule_violation,
    validate_model,
)

# What the launcher tells a loop of the user's own (kubetrain_runtime.Run reads them; the compiler sets them).
RUNTIME_CONFIG_ENV = "KUBETRAIN_RUNTIME_CONFIG"  # a YAML file of RuntimeConfig
CHECKPOINT_DIR_ENV = "KUBETRAIN_CHECKPOINT_DIR"  # the job's checkpoint folder (a Command's or Function's)
JOB_ENV = "KUBETRAIN_JOB"  # the job's name: the metrics' job label


class StrictModel(ReportedLater):
    """Unknown fields are errors: a typo must never be silently ignored. NaN and infinity are no numbers.
    Built with keywords in a fleet module, a mistake is reported by the job that takes the config."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class CheckpointConfig(StrictModel):
    """Distributed checkpoints (torch.distributed.checkpoint) for exact resume."""

    dir: Text = Field("/checkpoints", json_schema_extra=WRITES,
                      description="Folder shared by all ranks; must be on a persistent volume.")
    interval: Annotated[int, Field(gt=0)] | Literal["auto"] = Field(
        100, description="Save every this many steps; `auto`: from the measured save cost and "
                         "resilience.mtbf_s (Young/Daly), announced in a `checkpoint_interval` event.")
    keep: int = Field(3, ge=1, description="Keep the newest this many complete checkpoints.")
    async_save: bool = Field(False, description="Save in the background so training blocks only for the copy.")
    local_dir: Text | None = Field(None, json_schema_extra=WRITES,
                                   description="Node-local folder of the fast tier (an emptyDir or the "
                                               "instance store), saved often, each rank its own state; "
                                               "unset: only the durable tier in `dir`.")
    local_interval: Annotated[int, Field(gt=0)] | None = Field(
        None, description="Save to local_dir every this many steps; required with a numeric interval, "
                          "chosen with it (and left unset) when interval is `auto`.")

    @model_validator(mode="after")
    def _tiers_agree(self) -> CheckpointConfig:
        problem = None
        if self.local_interval is not None and not self.local_dir:
            problem = ("local_interval", "local_interval is set but local_dir is not: nothing would be saved",
                       "set local_dir to a node-local folder, or remove local_interval")
        elif self.local_dir and self.interval == "auto" and self.local_interval is not None:
            problem = ("local_interval", "interval auto chooses local_interval too",
                       "remove local_interval, or give interval a number of steps")
        elif self.local_dir and self.interval != "auto" and self.local_interval is None:
            problem = ("local_interval", "local_dir needs local_interval when interval is a number of steps",
                       "set local_interval (below interval), or set interval: auto to choose both")
        elif self.local_dir and os.path.normpath(self.local_dir) == os.path.normpath(self.dir):
            problem = ("local_dir", f"local_dir is the durable dir {self.dir}",
                       "point local_dir at node-local storage (an emptyDir), apart from dir")
        if problem:
            field, message, fix = problem
            raise rule_violation("KT207", message, fix, field=field)
        if isinstance(self.interval, int) and self.local_interval is not None and self.local_interval >= self.interval:
            raise rule_violation("KT217", f"local_interval {self.local_interval} is not below interval "
                                 f"{self.interval}: the node-local tier would never hold a newer checkpoint than the "
                                 "durable one",
                                 f"make local_interval smaller than interval (e.g. {max(1, self.interval // 5)}), or "
                                 "use interval: auto", field="local_interval")
        return self


# The tracking URI schemes MLflow's client resolves (mlflow.tracking._tracking_service.utils); `+driver`
# suffixes (postgresql+psycopg2) name a SQLAlchemy driver.
_MLFLOW_STORES = {"http", "https", "file", "databricks", "databricks-uc", "uc", "sqlite", "postgresql", "mysql",
                  "mssql"}


FAILURE_LINGER_S = 45  # two of Prometheus's usual 15-30 s scrape intervals


class MetricsConfig(StrictModel):
    """Where metrics go besides rank 0's JSON lines (which always stay)."""

    port: int = Field(9400, ge=0, le=65535 - 255,
                      description="Prometheus endpoint: each rank serves /metrics on port + its local rank "
                                  "(a pod with 8 ranks uses 8 ports); 0 disables it.")
    tensorboard_dir: Text | None = Field(None, pattern=r"^/", json_schema_extra=WRITES,
                                         description="Rank 0 writes TensorBoard event files "
                                                     "here (an absolute path on a volume); needs "
                                                     "the `tensorboard` extra.")
    mlflow_tracking_uri: Text | None = Field(None, description="Rank 0 logs params and metrics to this MLflow "
                                                              "server or store (http(s)://host, databricks, or a "
                                                              "file:, sqlite:, postgresql: ... store); needs the "
                                                              "`mlflow` extra.")

    @field_validator("mlflow_tracking_uri")
    @classmethod
    def _tracking_uri(cls, value: str | None) -> str | None:
        if value is None:
            return value
        url = urlsplit(value)
        scheme = url.scheme.split("+")[0]
        if value.startswith("/") or (scheme in _MLFLOW_STORES and (url.netloc or scheme not in ("http", "https"))):
            return value
        raise rule_violation(INVALID_VALUE, f"{value!r} is not an MLflow tracking URI",
                             "use the server's URL (http://mlflow.mlflow:5000), databricks, or a store URI such as "
                             "file:/mnt/mlruns or postgresql://user@host/db")
    mlflow_experiment: Text = Field("kubetrain", min_length=1, description="MLflow experiment of the run.")
    failure_linger_s: float | None = Field(
        None, ge=0, le=600, description="A rank that fails for good keeps its endpoint (with "
                                        "kubetrain_permanent_failure) open this long before it exits, so Prometheus "
                                        "scrapes it; unset: 45 s (two default scrape intervals) in a Kubernetes pod "
                                        "with the endpoint on, 0 elsewhere (no one scrapes a laptop).")

    def linger_s(self) -> float:
        """How long a rank that fails for good keeps its endpoint open: failure_linger_s, else FAILURE_LINGER_S in a
        Kubernetes pod with the endpoint on, else 0."""
        if self.failure_linger_s is not None:
            return self.failure_linger_s
        return FAILURE_LINGER_S if self.port and os.environ.get("KUBERNETES_SERVICE_HOST") else 0.0


class ResilienceConfig(StrictModel):
    """How the run survives bad steps and hangs, and what failures cost."""

    max_bad_steps: int = Field(3, ge=1, description="Consecutive non-finite steps (each skipped) before the run "
                                                    "rolls back to the newest checkpoint and skips past those batches.")
    max_rollbacks: int = Field(5, ge=0, description="Rollbacks before the run gives up (the data or the "
                                                   "learning rate, not bad luck, is then the likely cause).")
    watchdog_floor_s: float = Field(900, gt=0, description="A hang is declared no sooner than this after a step.")
    watchdog_factor: float = Field(20, gt=1, description="...nor sooner than this many recent median step times.")
    collective_timeout_s: float = Field(600, gt=0, le=2_000_000,  # c10d keeps it in milliseconds, a C int
                                        description="Timeout of one collective; on NCCL the flight recorder "
                                                    "dumps when it fires.")
    mtbf_s: float = Field(86400, gt=0, description="Mean time between failures of the whole job, for "
                                                   "checkpoint.interval: auto.")
    ettr_target: float | None = Field(None, gt=0, lt=1, description="The ETTR the job must keep, exported as "
                                                                     "kubetrain_ettr_target for the training alerts' "
                                                                     "ETTR alert (unset: the alert's own default).")


class ProfilingConfig(StrictModel):
    """The PyTorch profiler on request (kubetrain_runtime/profiling.py): a window of steps, recorded on the chosen
    ranks and written with torch.profiler.tensorboard_trace_handler, one trace per rank and window, where TensorBoard's
    profiler plugin reads it. Off by default: an unprofiled run has no profiler at all."""

    enabled: bool = Field(False, description="Profile the window below.")
    start_step: int = Field(10, ge=1, description="First step recorded (steps count from 1); past the first steps, "
                                                  "which pay one-time costs (allocator, autotuning, compilation).")
    warmup: int = Field(1, ge=0, description="Steps profiled but discarded before start_step: the profiler's own "
                                             "start-up cost stays out of the trace.")
    active: int = Field(3, ge=1, le=1000, description="Steps recorded in each window: a few suffice, and a trace "
                                                      "grows with every step.")
    repeat: int = Field(1, ge=1, le=100, description="Windows, one after the other (each warmup + active steps), "
                                                     "each written as its own trace.")
    activities: tuple[Literal["cpu", "cuda"], ...] = Field(
        ("cpu", "cuda"), min_length=1, description="What the profiler records: `cpu` (operators on the host) and "
                                                   "`cuda` (kernels on the GPU; left out on a rank without one).")
    record_shapes: bool = Field(False, description="Record the input shapes of every operator.")
    profile_memory: bool = Field(False, description="Record tensor allocations and frees (memory view).")
    with_stack: bool = Field(False, description="Record the Python stack of every operator (large traces).")
    ranks: list[Annotated[int, Field(ge=0)]] | Literal["all"] = Field(
        [0], description="Ranks profiled: rank 0 by default, since data-parallel ranks run the same program and "
                         "every rank's trace costs its step time and tens of MB; `all` (or a list) to find a "
                         "straggler.")
    dir: Text | None = Field(None, json_schema_extra=WRITES,
                             description="Folder of the traces (on a persistent volume of the job); unset: "
                                         "<metrics.tensorboard_dir>/profile when TensorBoard is on, else "
                                         "<checkpoint.dir>/profiles.")

    @model_validator(mode="after")
    def _window_after_start(self) -> ProfilingConfig:
        if self.warmup >= self.start_step:
            raise rule_violation(INVALID_VALUE, f"warmup {self.warmup} needs steps before start_step "
                                 f"{self.start_step}, and steps begin at 1",
                                 f"set start_step to {self.warmup + 1} or later, or lower warmup", field="warmup")
        if isinstance(self.ranks, list) and len(set(self.ranks)) != len(self.ranks):
            raise rule_violation(INVALID_VALUE, "a rank is listed twice", "list each rank once", field="ranks")
        return self

    @property
    def last_step(self) -> int:
        """The last step the windows record."""
        return self.start_step - self.warmup - 1 + self.repeat * (self.warmup + self.active)

    def profiles(self, rank: int) -> bool:
        return self.enabled and (self.ranks == "all" or rank in self.ranks)


def profile_dir(profiling: ProfilingConfig, metrics: MetricsConfig, checkpoint: CheckpointConfig) -> str:
    """Where the traces go: the configured folder, else beside TensorBoard's event files (its profiler plugin
    finds them under the same --logdir), else beside the checkpoints."""
    if profiling.dir:
        return profiling.dir
    if metrics.tensorboard_dir:
        return os.path.join(metrics.tensorboard_dir, "profile")
    return os.path.join(checkpoint.dir, "profiles")


class RuntimeConfig(StrictModel):
    """What the runtime needs of any run: kubetrain's trainer takes these sections from its run config; a loop of
    the user's own gets them from the launcher (`KUBETRAIN_RUNTIME_CONFIG`, a YAML file of these fields) or its
    arguments."""

    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    resilience: ResilienceConfig = Field(default_factory=ResilienceConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    profiling: ProfilingConfig = Field(default_factory=ProfilingConfig)
    log_interval: int = Field(1, gt=0, description="Write a step record every this many steps.")


# A loop of the user's own: checkpoints in the working folder (the job's volume when the launcher names one), Daly's
# interval, background saves, and a metrics port only in a kubetrain job (a laptop's port is nobody's business).
# The trainer's run config keeps RuntimeConfig's own defaults (its pods mount /checkpoints).
OWN_LOOP_CHECKPOINT_DIR = "checkpoints"


def own_loop_defaults(in_job: bool) -> dict[str, dict[str, object]]:
    """What a loop of the user's own gets where RuntimeConfig's defaults (the trainer's) differ."""
    return {"checkpoint": {"dir": OWN_LOOP_CHECKPOINT_DIR, "interval": "auto", "async_save": True},
            "metrics": {"port": MetricsConfig.model_fields["port"].default if in_job else 0}}


def own_loop_config(path: str | None, in_job: bool) -> RuntimeConfig:
    """A loop of the user's own: its defaults, with what the YAML file at `path` (if any) names on top, field by
    field: a file that sets only `checkpoint.interval` keeps the default folder and background saves. Every problem
    is reported at once as a ConfigError naming the file."""
    raw: object = {}
    if path:
        import yaml

        try:
            raw = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise ConfigError(path, [Problem("KT004", "", "cannot read the runtime config: "
                                             f"{' '.join(str(exc).split())}",
                                             "point KUBETRAIN_RUNTIME_CONFIG at a readable YAML file")]) from None
    return validate_model(RuntimeConfig, _layered(own_loop_defaults(in_job), raw), path or "the defaults")


def _layered(defaults: dict[str, dict[str, object]], raw: object) -> object:
    """`raw` over `defaults`, section by section; anything but a mapping is left as it is, for validation to refuse."""
    if not isinstance(raw, dict):
        return raw
    layered: dict[object, object] = {name: dict(fields) for name, fields in defaults.items()}
    for name, value in raw.items():
        base = layered.get(name)
        if value is None and isinstance(base, dict):
            continue  # `checkpoint:` with every line under it commented out: nothing named
        layered[name] = {**base, **value} if isinstance(base, dict) and isinstance(value, dict) else value
    return layered
