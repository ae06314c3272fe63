"""`kubetrain run-local`'s supervisor: a planned job's pods (run_plan.py) as local processes, run as the operator would.

It starts one process per pod, prints each line under its pod's name, and restarts a pod as the operator
would (its restart policy and the job's backoff limit); a pod that fails the job stops the others, as does
Ctrl-C or SIGTERM, the way the kubelet stops them. Where the plan has a status endpoint, the supervisor serves it on
loopback and prints each status the trainer posts. The last line sums the run up (summary.py).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from kubetrain.kinds.target import restart_after
from kubetrain.local.run_plan import LocalJob, LocalPod, StatusEndpointPlan, free_port
from kubetrain.local.summary import RunSummary
from kubetrain_runtime.failures import stopped_exit
from kubetrain_runtime.progress import ENV_URL


class _Supervisor:
    """Runs the pods, restarting each as its operator would, and reports the job's status."""

    def __init__(self, job: LocalJob):
        self.job = job
        self.lock = threading.Lock()
        self.restarts: dict[str, int] = {}  # per pod, or all under "" when the limit is the job's
        self.summary = RunSummary(job.name, job.trainer, len(job.pods))
        self.pumps: list[threading.Thread] = []

    def start(self, pod: LocalPod) -> subprocess.Popen:
        process = subprocess.Popen(pod.command, env=pod.env, cwd=pod.cwd, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, start_new_session=True)
        pump = threading.Thread(target=self.pump, args=(pod, process), daemon=True)
        pump.start()
        self.pumps.append(pump)
        return process

    def pump(self, pod: LocalPod, process: subprocess.Popen) -> None:
        for line in process.stdout:
            self.say(pod.name, line)
            with self.lock:
                self.summary.observe(line)

    def say(self, who: str, line: str) -> None:
        with self.lock:
            sys.stdout.write(f"[{who}] {line}" if line.endswith("\n") else f"[{who}] {line}\n")
            sys.stdout.flush()

    def run(self) -> int:
        started = time.monotonic()
        for note in self.job.notes:
            self.say("run-local", note)
        with contextlib.ExitStack() as stack:
            if self.job.status_endpoint is not None:
                try:
                    stack.enter_context(self.serve_status(self.job.status_endpoint))
                except OSError as error:  # no loopback socket to be had: the job runs without its endpoint
                    self.say("run-local", f"no status endpoint: {error.strerror or error}")
            status = self.run_pods()
            for pump in self.pumps:  # the pods' last lines (the trainer's finished record) before the summary
                pump.join(timeout=5)
        self.say("run-local", self.summary.line(status, time.monotonic() - started, sum(self.restarts.values())))
        return status

    def serve_status(self, plan: StatusEndpointPlan) -> contextlib.AbstractContextManager:
        from kubetrain.local.status_endpoint import StatusEndpoint, progress_line

        refusals: set[str] = set()

        def refused(code: int, message: str) -> None:
            if message not in refusals:  # each reason once: a client that posts every step must not flood
                refusals.add(message)
                self.say("status", f"refused a post: HTTP {code}: {message}")

        endpoint = StatusEndpoint(plan.status_object, plan.tls, plan.token,
                                  lambda status: self.say("status", progress_line(status)), refused, free_port())
        for pod in self.job.pods:
            pod.env[ENV_URL] = endpoint.url
        self.say("run-local", f"status endpoint of {plan.status_object['kind']} "
                              f"{plan.status_object['metadata']['name']} at {endpoint.url}")
        return endpoint

    def run_pods(self) -> int:
        running = {pod.name: (pod, self.start(pod)) for pod in self.job.pods}
        status = 0
        try:
            while running:
                for name, (pod, process) in list(running.items()):
                    code = process.poll()
                    if code is None:
                        continue
                    if running.pop(name, None) is None:
                        continue  # stopped with a sibling that failed before it in this round
                    code = code if code >= 0 else 128 - code  # killed by a signal, as a container reports it
                    if code == 0:
                        continue
                    retry = restart_after(pod.restart_policy, code, self.job.fail_job_exit_codes)
                    counter = name if self.job.per_pod_backoff else ""
                    if retry and self.restarts.get(counter, 0) < self.job.backoff_limit:
                        self.restarts[counter] = self.restarts.get(counter, 0) + 1
                        self.say("run-local", f"pod {name} exited {code}; restartPolicy {pod.restart_policy} "
                                 f"restarts it ({self.restarts[counter]} of backoffLimit {self.job.backoff_limit})")
                        running[name] = (pod, self.start(pod))
                        continue
                    reason = ("the backoff limit is spent" if retry
                              else f"restartPolicy {pod.restart_policy} does not retry it")
                    self.say("run-local", f"pod {name} exited {code} and {reason}: the job failed")
                    status = code
                    _terminate(list(running.values()))  # a failed pod fails the job: stop the others
                    running.clear()
                    break
                if running:
                    time.sleep(0.2)
        except KeyboardInterrupt:
            self.say("run-local", "stopping every pod, as Kubernetes stops them (SIGTERM, then SIGKILL after "
                     "each pod's grace period)")
            stopped = _terminate(list(running.values()))
            for pump in self.pumps:  # the ranks' `stopped` records
                pump.join(timeout=5)
            # Every pod ended within its grace period, as a stop signal ends it, and the ranks saved the step they
            # agreed on: the job did what was asked of it, and resumes from there.
            status = 0 if stopped and self.summary.clean_stop else 130
        return status


def run_job(job: LocalJob) -> int:
    """Run every pod until the job succeeds or fails; the exit status is the failing pod's."""
    # `kubectl delete` or a CI timeout sends SIGTERM: stop the pods too (they have sessions of their own).
    signal.signal(signal.SIGTERM, _interrupt)
    return _Supervisor(job).run()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _terminate(pods: list[tuple[LocalPod, subprocess.Popen]]) -> bool:
    """Stop pods as the kubelet does: SIGTERM to the container's first process only (the launcher passes it
    on), then SIGKILL to everything left once the pod's grace period is over. Whether every pod ended within its
    grace period with success or the code of a stop signal (its launcher's: 128 + the signal)."""
    clean = True
    for _, process in pods:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGTERM)
    signalled = time.monotonic()
    for pod, process in pods:
        try:
            code = process.wait(timeout=max(0.0, signalled + pod.grace_s - time.monotonic()))
        except subprocess.TimeoutExpired:
            kill_pod(process.pid)
            clean = False
            continue
        clean = clean and code in (0, stopped_exit(signal.SIGTERM), -signal.SIGTERM)
    return clean


def kill_pod(pid: int) -> None:
    """SIGKILL a process and all its descendants, as deleting its pod would. torchrun starts its
    workers in sessions of their own, so killing the agent's process group would orphan them."""
    if not Path("/proc/self/task").is_dir():  # no procfs: the pod's process group will have to do
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        return
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        os.kill(pid, signal.SIGKILL)
    except (FileNotFoundError, ProcessLookupError):
        return
    for child in children:
        kill_pod(int(child))
