"""Effective training time ratio (ETTR), kept across restarts, and the checkpoint interval it implies.

ETTR = productive time / the job's wall time since it first started, less the time it was paused. Productive time
is the time of steps whose results were kept: it is saved in every checkpoint, so a restart resumes with the
productive time of the checkpoint it loads, and the steps it must recompute count as lost. A pause is the time
from a clean end (a stop signal obeyed with its checkpoint: a Kueue preemption, a suspended job, a drained node)
to the next start: nobody asked the job to run then, so it is no lost time. The time from a crash to the next
start is lost. The job's record lives beside the checkpoints (`ettr.json`): its first start, its starts, its
crashes (starts after a run that did not end cleanly) and its paused seconds.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

FILE = "ettr.json"


def _read(checkpoint_dir: Path) -> dict[str, Any]:
    path = checkpoint_dir / FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def _write(checkpoint_dir: Path, record: dict[str, Any]) -> None:
    path = checkpoint_dir / FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record) + "\n")
    os.replace(tmp, path)


def record_start(checkpoint_dir: Path) -> dict[str, float]:
    """This start of the job (rank 0's, once per process): when the job first started (epoch seconds), how many
    times it has started counting this one (`starts`), how many of those followed a run that did not end cleanly
    (`crashes`: the restarts alert's kubetrain_job_crashes, which survives the pods) and the seconds it was paused
    (`paused_s`, from clean ends to the starts after them)."""
    now = time.time()
    record = _read(checkpoint_dir) or {"first_start": now}
    if record.get("starts"):
        ended = record.pop("clean_end", None)
        if ended is None:
            record["crashes"] = record.get("crashes", 0) + 1
        else:
            record["paused_s"] = record.get("paused_s", 0.0) + max(0.0, now - ended)
    record["starts"] = record.get("starts", 0) + 1
    _write(checkpoint_dir, record)
    return {"first_start": record["first_start"], "starts": record["starts"], "crashes": record.get("crashes", 0),
            "paused_s": record.get("paused_s", 0.0)}


def record_clean_end(checkpoint_dir: Path) -> None:
    """This run ended cleanly (finished, or stopped with its checkpoint): the next start is no crash, and the time
    until it a pause (rank 0's, after its last checkpoint)."""
    record = _read(checkpoint_dir)
    if record:
        _write(checkpoint_dir, {**record, "clean_end": time.time()})


class EttrClock:
    """Productive time: committed (in the newest checkpoint) plus the steps done since."""

    def __init__(self, first_start_s: float, paused_s: float = 0.0):
        self.first_start_s = first_start_s
        self.paused_s = paused_s  # before this start: no lost time
        self.committed_s = 0.0
        self.uncommitted_s = 0.0

    def step_done(self, seconds: float) -> None:
        self.uncommitted_s += seconds

    def productive_s(self) -> float:
        return self.committed_s + self.uncommitted_s

    def checkpointed(self) -> float:
        """The steps so far are now safe; returns the productive time to store in the checkpoint."""
        self.committed_s += self.uncommitted_s
        self.uncommitted_s = 0.0
        return self.committed_s

    def restored(self, committed_s: float) -> None:
        """Resumed or rolled back to a checkpoint: what was done after it is lost."""
        self.committed_s, self.uncommitted_s = committed_s, 0.0

    def report(self) -> dict[str, float]:
        wall = max(time.time() - self.first_start_s - self.paused_s, 1e-9)
        productive = self.productive_s()
        return {"ettr": productive / wall, "wall_s": wall, "productive_s": productive, "lost_s": wall - productive}


def daly_interval_s(save_cost_s: float, mtbf_s: float) -> float:
    """Daly's optimal time between checkpoints (refining Young's sqrt(2 * cost * MTBF))."""
    if save_cost_s >= 2 * mtbf_s:
        return mtbf_s
    ratio = save_cost_s / (2 * mtbf_s)
    return math.sqrt(2 * save_cost_s * mtbf_s) * (1 + math.sqrt(ratio) / 3 + ratio / 9) - save_cost_s
