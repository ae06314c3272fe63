"""Effective training time ratio (ETTR), kept across restarts, and the checkpoint interval it implies.

ETTR = productive time / wall time since the job first started. Productive time is the time of
steps whose results were kept: it is saved in every checkpoint, so a restart resumes with the
productive time of the checkpoint it loads, and the steps it must recompute count as lost. The
job's first start is recorded once, beside the checkpoints (`ettr.json`).
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

FILE = "ettr.json"


def record_start(checkpoint_dir: Path) -> tuple[float, int]:
    """This start of the job (rank 0's, once per process): when the job first started (epoch seconds) and how many
    times it has started, counting this one (the restarts alert's kubetrain_job_starts: it survives the pods)."""
    path = checkpoint_dir / FILE
    record = json.loads(path.read_text()) if path.is_file() else {"first_start": time.time()}
    record["starts"] = record.get("starts", 0) + 1
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record) + "\n")
    os.replace(tmp, path)
    return record["first_start"], record["starts"]


class EttrClock:
    """Productive time: committed (in the newest checkpoint) plus the steps done since."""

    def __init__(self, first_start_s: float):
        self.first_start_s = first_start_s
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
        wall = max(time.time() - self.first_start_s, 1e-9)
        productive = self.productive_s()
        return {"ettr": productive / wall, "wall_s": wall, "productive_s": productive, "lost_s": wall - productive}


def daly_interval_s(save_cost_s: float, mtbf_s: float) -> float:
    """Daly's optimal time between checkpoints (refining Young's sqrt(2 * cost * MTBF))."""
    if save_cost_s >= 2 * mtbf_s:
        return mtbf_s
    ratio = save_cost_s / (2 * mtbf_s)
    return math.sqrt(2 * save_cost_s * mtbf_s) * (1 + math.sqrt(ratio) / 3 + ratio / 9) - save_cost_s
