"""The line `kubetrain run-local` ends with (after `[run-local]`): how the job ended, in how long, and what it did.

For a trainer job it reads rank 0's JSON lines (README, The training runtime) as the pods print them: the last
step and its loss (the `finished` record's, else the last `step` record's), the complete checkpoints of each tier,
where a resumed run started, and how many times the trainer started (each start of rank 0 prints one `mfu_basis`
record: torchrun's restarts of the ranks and the operator's of the pods alike). A command job's output is its own,
so its line says only how it ended, its pods and their restarts: those of torchrun too where its script runs on
kubetrain_runtime.Run, whose rank 0 prints the same records. A run stopped by a signal that saved the step it reached
(its `stopped` record) says so.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any


class RunSummary:
    def __init__(self, job: str, trainer: bool, pods: int):
        self.job, self.trainer, self.pods = job, trainer, pods
        self.step: int | None = None
        self.loss: float | None = None
        self.resumed_from: int | None = None
        self.starts = 0
        self.stopped: dict[str, Any] | None = None  # the ranks' agreed stop, with its checkpoint
        self.checkpoints: Counter[str] = Counter()

    def observe(self, line: str) -> None:
        """One line of a pod's output; only rank 0's records (JSON objects with an `event`) count."""
        if not line.startswith("{"):
            return
        try:
            record = json.loads(line)
        except ValueError:
            return
        if isinstance(record, dict) and isinstance(record.get("event"), str):
            self.record(record)

    def record(self, record: dict[str, Any]) -> None:
        event = record["event"]
        if event == "mfu_basis":
            self.starts += 1
        elif event == "stopped":
            self.stopped = record
        elif not self.trainer:
            return  # a command's own output: its starts and stop are the runtime's, the rest is the script's
        elif event == "resumed" and self.step is None:
            self.resumed_from = record.get("step")
        elif event == "checkpoint":
            self.checkpoints[record.get("tier", "durable")] += 1
        elif event in ("step", "finished"):
            self.step = record.get("step", self.step)
            self.loss = record.get("loss", self.loss)

    @property
    def clean_stop(self) -> bool:
        """The ranks agreed on a stop and saved the step they stopped at."""
        return self.stopped is not None and self.stopped.get("checkpoint_step") is not None

    def line(self, exit_code: int, elapsed_s: float, pod_restarts: int) -> str:
        outcome = ("was stopped" if exit_code == 0 and self.clean_stop else "succeeded" if exit_code == 0
                   else "was interrupted" if exit_code == 130 else f"failed (exit {exit_code})")
        head = f"{self.job} {outcome} after {elapsed_s:.1f} s"
        # Each start after the first was a restart, whoever made it; a pod restarted before its trainer printed
        # anything counts too.
        restarts = max(self.starts - 1, pod_restarts)
        restarted = f"{restarts} restart{'s' * (restarts != 1)}"
        if pod_restarts:
            restarted += f" ({pod_restarts} of a pod)" if pod_restarts == 1 else f" ({pod_restarts} of pods)"
        if self.clean_stop:
            restarted += f", stopped with a checkpoint of step {self.stopped['checkpoint_step']}"
        if not self.trainer:
            return f"{head}: {self.pods} pod{'s' * (self.pods != 1)}, {restarted}"
        if self.step is None:
            return f"{head} before its first step, {restarted}"
        steps = f"{self.step} steps" if exit_code == 0 else f"stopped at step {self.step}"
        if self.resumed_from is not None:
            steps += f" (resumed from step {self.resumed_from})"
        loss = f"final loss {self.loss:.4f}" if isinstance(self.loss, (int, float)) else "no loss"
        total = sum(self.checkpoints.values())
        saved = f"{total} checkpoint{'s' * (total != 1)}"
        if total:
            saved += " (" + ", ".join(f"{n} {tier}" for tier, n in sorted(self.checkpoints.items())) + ")"
        return f"{head}: {steps}, {loss}, {saved}, {restarted}"
