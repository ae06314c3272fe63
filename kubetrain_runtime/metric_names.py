"""The Prometheus series the runtime exports: one owner for the names, read by the exporter
(kubetrain_runtime/telemetry.py) and by the alert rules kubetrain synthesizes (kubetrain.platform.alerts), which may
name no other series of the runtime. Imports nothing: the compiler imports it.

Every series carries the labels `job` (the kubetrain job), `node` and `rank`; the PodMonitor scrapes them
with `honorLabels`, so `job` stays the kubetrain job rather than Prometheus's scrape-job name.
"""

from __future__ import annotations

# name -> Prometheus type, as prometheus_client exposes it (a Counter `x` is exposed as `x_total`).
RUNTIME_METRICS: dict[str, str] = {
    "kubetrain_step": "gauge",
    "kubetrain_loss": "gauge",
    "kubetrain_tokens_per_second": "gauge",
    "kubetrain_step_time_seconds": "gauge",
    "kubetrain_mfu": "gauge",
    "kubetrain_ettr": "gauge",
    "kubetrain_ettr_target": "gauge",  # the run config's resilience.ettr_target, where it sets one
    # When the job's ETTR clock began: its first start, moved later by the time it was paused (a preemption, a
    # suspension). time() minus it is the wall time ETTR divides by: the ETTR alert judges a young job over a window.
    "kubetrain_ettr_clock_start_timestamp_seconds": "gauge",
    "kubetrain_flops_per_token": "gauge",
    "kubetrain_peak_flops": "gauge",
    "kubetrain_skipped_steps_total": "counter",
    "kubetrain_rollbacks_total": "counter",
    "kubetrain_checkpoints_total": "counter",
    "kubetrain_checkpoint_blocked_seconds": "gauge",
    "kubetrain_checkpoint_complete_seconds": "gauge",
    "kubetrain_restarts": "gauge",
    # When the last log step was recorded (unix seconds), and how many steps apart log steps are: a run whose
    # step stands still for several of its own log intervals is hung (kubetrain's stalled-run alert).
    "kubetrain_last_step_timestamp_seconds": "gauge",
    "kubetrain_log_interval_steps": "gauge",
    # When the last checkpoint of a tier completed, and the seconds between checkpoints the run aims at (its
    # interval in steps times the step time, or the Young/Daly interval with `interval: auto`).
    "kubetrain_last_checkpoint_timestamp_seconds": "gauge",
    "kubetrain_checkpoint_interval_seconds": "gauge",
    # How many times the job has started, and how many of those starts followed a crash (a run that did not end
    # cleanly: a stop obeyed with its checkpoint is clean), kept beside its checkpoints: they survive the pods.
    "kubetrain_job_starts": "gauge",
    "kubetrain_job_crashes": "gauge",
    # When this rank's run began (its endpoint opened): the clock of a run that never logged a step.
    "kubetrain_run_start_timestamp_seconds": "gauge",
    # When the rank failed for good (a failure class the launch target does not retry), with `reason`.
    "kubetrain_permanent_failure_timestamp_seconds": "gauge",
    # 1 while the PyTorch profiler records this rank (a profiled run's step times are not its usual ones).
    "kubetrain_profiling": "gauge",
}
