"""Progress into the TrainJob's `status.trainerStatus`, where Kubeflow Trainer offers it.

Kubeflow Trainer (>= 2.2, feature gate `TrainJobStatus`; KEP-2779) injects three variables into the trainer's
containers: `KUBEFLOW_TRAINER_SERVER_URL`, the HTTPS URL of its status endpoint for this TrainJob
(`POST /apis/trainer.kubeflow.org/v1alpha1/namespaces/<ns>/trainjobs/<name>/status`), and the paths of the CA
certificate that signs the endpoint's (`KUBEFLOW_TRAINER_SERVER_CA_CERT`) and of a projected service account token
(`KUBEFLOW_TRAINER_SERVER_TOKEN`, a JWT the kubelet rotates: it is read again for every post). The body is
`{"trainerStatus": {...}}` with `progressPercentage` (integer 0-100), `estimatedRemainingSeconds` (integer >= 0),
`metrics` (at most 256 `{name, value}` pairs of strings of 1-64 characters) and `lastUpdatedTime` (RFC 3339; the CRD
requires it). (kubeflow/trainer v2.3.0: pkg/runtime/framework/plugins/trainjobstatus, pkg/statusserver,
pkg/apis/trainer/v1alpha1/trainjob_types.go.)

Only rank 0 reports. The training thread hands each log step's record over and goes on (a few dict operations); a
background thread builds the status and posts at most one every `interval_s` (5 s, the Kubeflow SDK's and
Transformers' KubeflowCallback's throttle), always the newest: one that waits while a post is in flight or the
interval runs is replaced by a newer one (dropped when behind). A post that fails or hangs (timeout `timeout_s`)
costs the training thread nothing, and says so in one warning line per process, not one per step. The run's last
status (100 % at `max_steps`) is posted at once; `close()` waits for it at most `timeout_s`.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import ssl
import sys
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ENV_URL = "KUBEFLOW_TRAINER_SERVER_URL"
ENV_CA_CERT = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
ENV_TOKEN = "KUBEFLOW_TRAINER_SERVER_TOKEN"

MIN_INTERVAL_S = 5.0
TIMEOUT_S = 5.0
# The CRD's limits on status.trainerStatus (kubebuilder markers of TrainerStatus and Metric).
MAX_METRICS = 256
MAX_METRIC_CHARS = 64
INT32_MAX = 2**31 - 1


def status_path(namespace: str, name: str) -> str:
    """The path of a TrainJob's status endpoint (statusserver.StatusUrl)."""
    return f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status"


def rfc3339(seconds: float | None = None) -> str:
    """A time (default: now) as metav1.Time writes it: RFC 3339 in UTC, whole seconds."""
    return datetime.fromtimestamp(time.time() if seconds is None else seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def metric_value(value: Any) -> str:
    """A metric's value as the status carries it: a string, floats to 6 significant digits (the JSON lines keep
    full precision)."""
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def trainer_status(progress: int | None, remaining_s: float | None, metrics: dict[str, Any],
                   observed: float | None = None) -> dict[str, Any]:
    """The `trainerStatus` object, within the CRD's bounds whatever the inputs; `observed` is when (time.time())."""
    status: dict[str, Any] = {"lastUpdatedTime": rfc3339(observed)}
    if progress is not None:
        status["progressPercentage"] = max(0, min(100, int(progress)))
    if remaining_s is not None and math.isfinite(remaining_s):
        status["estimatedRemainingSeconds"] = max(0, min(INT32_MAX, round(remaining_s)))
    pairs = [{"name": name[:MAX_METRIC_CHARS], "value": metric_value(value)[:MAX_METRIC_CHARS]}
             for name, value in metrics.items() if value is not None and name]
    if pairs:
        status["metrics"] = pairs[:MAX_METRICS]
    return status


@dataclass(frozen=True)
class _Observation:
    """What the training thread hands over: a step or finished record and what it knew then."""

    record: dict[str, Any]
    checkpoints: dict[str, int]  # the last checkpoint step of each tier
    at: float  # time.monotonic()
    wall: float  # time.time(), for lastUpdatedTime
    finished: bool


class ProgressReporter:
    """A telemetry sink (rank 0) that posts the trainer's progress to the Trainer's status endpoint."""

    def __init__(self, url: str, ca_cert: str | None, token_path: str, max_steps: int,
                 interval_s: float = MIN_INTERVAL_S, timeout_s: float = TIMEOUT_S):
        parts = urlsplit(url)
        if parts.scheme != "https" or not parts.hostname:
            raise ValueError(f"{ENV_URL}={url!r} is not an https:// URL")
        self.url, self.token_path, self.max_steps = url, token_path, max_steps
        self.interval_s, self.timeout_s = interval_s, timeout_s
        self._host, self._port = parts.hostname, parts.port or 443
        self._target = parts.path + (f"?{parts.query}" if parts.query else "")
        # The CA is read once: a file that cannot be read is the sink failing to start (one warning).
        self._tls = ssl.create_default_context(cafile=ca_cert)
        # What the statuses are made of, updated from the training thread only.
        self._metrics: dict[str, Any] = {}
        self._first: tuple[float, int] | None = None  # (time, step) of this process's first step record
        # Shared with the poster thread, under the lock.
        self._lock = threading.Condition()
        self._pending: tuple[_Observation, bool] | None = None  # (what to post, post it at once)
        self._closing = False
        self._in_flight = False
        self._last_post = float("-inf")
        self.posted = self.failed = self.dropped = 0
        self._warned = False
        self._thread = threading.Thread(target=self._run, name="trainjob-progress", daemon=True)
        self._thread.start()

    @classmethod
    def from_env(cls, max_steps: int, environ: dict[str, str] | os._Environ = os.environ) -> ProgressReporter | None:
        """A reporter when the Trainer injected its endpoint, else None (any other operator, or the feature off)."""
        url = environ.get(ENV_URL)
        if not url:
            return None
        token = environ.get(ENV_TOKEN)
        if not token:
            raise ValueError(f"{ENV_URL} is set but {ENV_TOKEN} is not: the endpoint needs the token")
        return cls(url, environ.get(ENV_CA_CERT) or None, token, max_steps)

    # -- the training thread ------------------------------------------------------------------------

    def observe(self, record: dict[str, Any]) -> None:
        """Take a record: a few dict operations on the training thread; the status is built by the poster thread,
        and only for what it posts."""
        event = record["event"]
        if event == "checkpoint":
            key = "last_checkpoint_step" if record.get("tier", "durable") == "durable" else "last_local_checkpoint_step"
            self._metrics[key] = record["step"]
        elif event in ("step", "finished"):
            now = time.monotonic()
            if self._first is None:
                self._first = (now, record["step"])
            # The trainer makes a new record every time and no sink changes one: it is kept, not copied.
            observation = _Observation(record, {**self._metrics}, now, time.time(), event == "finished")
            self._offer(observation, force=observation.finished)

    def _offer(self, observation: _Observation, force: bool) -> None:
        with self._lock:
            if self._pending is not None:
                self.dropped += 1
                force = force or self._pending[1]
            self._pending = (observation, force)
            self._lock.notify()

    def status(self, observation: _Observation) -> dict[str, Any]:
        """The trainerStatus of one observation (on the poster thread)."""
        record, step = observation.record, observation.record["step"]
        started, first_step = self._first or (observation.at, step)
        # Wall time per step in this process (saves included: they delay the end too); the step's own time until
        # a second record gives a span.
        per_step = ((observation.at - started) / (step - first_step) if step > first_step
                    else record.get("step_time_s"))
        done = observation.finished and step >= self.max_steps
        progress = 100 if done else min(99, step * 100 // self.max_steps)  # 100 only once the run has ended
        remaining = 0.0 if done else (self.max_steps - step) * per_step if per_step is not None else None
        metrics = {"loss": record.get("loss"), "learning_rate": record.get("lr"),
                   "tokens_per_second": record.get("tokens_per_s"), "mfu": record.get("mfu"),
                   "ettr": record.get("ettr"), "skipped_steps": record.get("skipped_steps"),
                   "current_step": step, "total_steps": self.max_steps, **observation.checkpoints}
        return trainer_status(progress, remaining, metrics, observation.wall)

    def close(self) -> None:
        """Post what is pending (the run's last status), waiting at most `timeout_s`, then stop."""
        deadline = time.monotonic() + self.timeout_s
        with self._lock:
            self._closing = True
            self._lock.notify()
            while (self._pending is not None or self._in_flight) and time.monotonic() < deadline:
                self._lock.wait(deadline - time.monotonic())
            abandoned = self._pending is not None or self._in_flight
        # A post still hanging is abandoned: the thread is a daemon and holds nothing the run needs.
        if abandoned:
            self._warn(f"no answer within {self.timeout_s:g} s at the end of the run (timed out)")

    # -- the poster thread --------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._pending is None:
                    if self._closing:
                        return
                    self._lock.wait()
                    continue
                observation, force = self._pending
                wait = self._last_post + self.interval_s - time.monotonic()
                if wait > 0 and not force and not self._closing:
                    self._lock.wait(wait)  # a newer status, a forced one or close() may come meanwhile
                    continue
                self._pending, self._in_flight = None, True
                self._last_post = time.monotonic()
            error = self._post(self.status(observation))
            with self._lock:
                self._in_flight = False
                if error is None:
                    self.posted += 1
                else:
                    self.failed += 1
                self._lock.notify_all()
            if error is not None:
                self._warn(error)

    def _warn(self, reason: str) -> None:
        with self._lock:
            if self._warned:
                return
            self._warned = True
        print(f"warning: rank 0: TrainJob progress not delivered to {self.url}: {reason}; training goes on, and later "
              "failures are not printed", file=sys.stderr, flush=True)

    def _post(self, status: dict[str, Any]) -> str | None:
        """One POST; None on success, else why not. http.client rather than urllib: no proxy from the
        environment is used for the in-cluster endpoint, and the timeout bounds connect, handshake and reads."""
        connection = http.client.HTTPSConnection(self._host, self._port, timeout=self.timeout_s, context=self._tls)
        try:
            token = Path(self.token_path).read_text().strip()  # rotated by the kubelet: never cached
            body = json.dumps({"trainerStatus": status}).encode()
            connection.request("POST", self._target, body=body,
                               headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
            response = connection.getresponse()
            reply = response.read(1 << 16)
            if response.status == 200:
                return None
            return f"HTTP {response.status} {_status_message(reply)}".rstrip()
        except (OSError, http.client.HTTPException) as exc:  # refused, TLS, timeouts, a token file gone
            return f"{type(exc).__name__}: {exc}"
        finally:
            connection.close()


def _status_message(reply: bytes) -> str:
    """The message of the endpoint's metav1.Status error body, when it has one."""
    try:
        message = json.loads(reply).get("message")
    except (ValueError, AttributeError):
        return ""
    return str(message)[:200] if message else ""
