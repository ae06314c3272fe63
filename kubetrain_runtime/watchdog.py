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

from kubetrain_runtime.dumps import Dumps, tell_launcher

FLIGHT_RECORDER_WAIT_S = 10  # a dump that does not come back in this long is given up: the kill matters more


class Watchdog:
    def __init__(self, floor_s: float, factor: float, rank: int, dumps: Dumps | None = None):
        self.dumps = dumps
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
                where = self.dump()
                sys.stderr.write(f"kubetrain watchdog: rank {self.rank} made no progress for {stalled:.1f} s "
                                 f"(timeout {self.timeout_s():.1f} s); {where}; stacks of every thread follow\n")
                faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
                sys.stderr.flush()
                # SIGKILL, not an exception: the hung thread may never run Python again.
                os.kill(os.getpid(), signal.SIGKILL)

    def dump(self) -> str:
        """Every thread's stack and the flight recorder's dump into the rank's folder; says where they are."""
        if self.dumps is None:
            return "no checkpoint folder to keep dumps in"
        try:
            self.dumps.folder.mkdir(parents=True, exist_ok=True)
            with open(self.dumps.stacks, "w") as stacks:
                faulthandler.dump_traceback(file=stacks, all_threads=True)
        except OSError as error:
            return f"cannot write its dumps to {self.dumps.folder}: {error.strerror or error}"
        tell_launcher(self.dumps.folder)
        # In a thread of its own: the dump takes the flight recorder's lock, which a wedged backend might hold.
        written: list[str] = []
        dumper = threading.Thread(target=lambda: written.append(dump_flight_recorder(self.dumps.flight_recorder)),
                                  name="kubetrain-flight-recorder", daemon=True)
        dumper.start()
        dumper.join(FLIGHT_RECORDER_WAIT_S)
        recorder = written[0] if written else f"the flight recorder's dump took over {FLIGHT_RECORDER_WAIT_S} s"
        return f"its stacks are in {self.dumps.stacks}, {recorder}"


def dump_flight_recorder(path: os.PathLike) -> str:
    """torch's flight recorder of this process (the pickle NCCL writes on a timeout): NCCL's own where the process
    group is NCCL, else the backend-neutral one that gloo records into (torch 2.13)."""
    try:
        import torch.distributed as dist
        from torch._C import _distributed_c10d as c10d

        nccl = dist.is_initialized() and "nccl" in str(dist.get_backend())
        dump = getattr(c10d, "_dump_nccl_trace", None) if nccl else None
        dump = dump or getattr(c10d, "_dump_fr_trace", None)
        if dump is None:
            return "this torch has no flight recorder to dump"
        data = dump()
        with open(path, "wb") as out:
            out.write(data)
    except Exception as error:  # noqa: BLE001 - the stacks are kept whatever the recorder does
        return f"no flight recorder dump ({type(error).__name__}: {error})"
    return f"its flight recorder in {path}"
