"""A watchdog thread that turns a hang into a crash, so torchrun and Kubernetes can restart it.

A hang (a dead peer, a stuck file system, a deadlock) otherwise holds every GPU of the job
until someone notices. When no step completes within max(floor, factor x the recent median
step time), the watchdog prints every thread's stack (faulthandler) and kills the process.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import statistics
import sys
import threading
import time
from collections import deque


class Watchdog:
    def __init__(self, floor_s: float, factor: float, rank: int):
        self.floor_s = floor_s
        self.factor = factor
        self.rank = rank
        self._recent: deque[float] = deque(maxlen=32)
        self._last = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="kubetrain-watchdog", daemon=True)

    def start(self) -> Watchdog:
        self._last = time.monotonic()
        self._thread.start()
        return self

    def beat(self, step_time_s: float | None = None) -> None:
        """Progress: a step completed (its duration feeds the timeout), or slow work finished."""
        if step_time_s is not None:
            self._recent.append(step_time_s)
        self._last = time.monotonic()

    def median_step_s(self) -> float:
        return statistics.median(self._recent) if self._recent else 0.0

    def timeout_s(self) -> float:
        return max(self.floor_s, self.factor * self.median_step_s())

    def stop(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        while not self._stop.wait(min(1.0, self.floor_s / 4)):
            stalled = time.monotonic() - self._last
            if stalled > self.timeout_s():
                sys.stderr.write(f"kubetrain watchdog: rank {self.rank} made no progress for {stalled:.1f} s "
                                 f"(timeout {self.timeout_s():.1f} s); stacks of every thread follow\n")
                faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
                sys.stderr.flush()
                # SIGKILL, not an exception: the hung thread may never run Python again.
                os.kill(os.getpid(), signal.SIGKILL)
