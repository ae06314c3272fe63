"""A watchdog thread that turns a hang into a crash, so torchrun and Kubernetes can restart it.

A hang (a dead peer, a stuck file system, a deadlock) otherwise holds every GPU of the job
until someone notices. When no step completes within max(floor, factor x the recent median
step time), the watchdog prints every thread's stack (faulthandler) and kills the process.

Its dumps (every thread's stack, the flight recorder) come earlier, at DUMP_AT of the nearer of that timeout and the
collective timeout, and without a kill: a rank whose peer hangs waits in a collective, which under the defaults
(the collective timeout below the watchdog's) fails first and restarts the run. Every rank of a hung step stalls
alike (the hung one, and those waiting for it), so each writes its own dumps before any deadline ends one of them.
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
DUMP_AT = 0.75  # of the nearer deadline: room for the ranks' skew (about a step) and the dumps' own time


class Watchdog:
    def __init__(self, floor_s: float, factor: float, rank: int, dumps: Dumps | None = None,
                 collective_timeout_s: float | None = None):
        self.dumps = dumps
        self.collective_timeout_s = collective_timeout_s
        self._dumped = False  # in this stall
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
        self._dumped = False

    def median_step_s(self) -> float:
        return statistics.median(self._recent) if self._recent else 0.0

    def timeout_s(self) -> float:
        return max(self.floor_s, self.factor * self.median_step_s())

    def dump_after_s(self) -> float:
        """The stall after which this rank writes its dumps: before either deadline ends a rank of the step."""
        nearest = min(self.timeout_s(), self.collective_timeout_s or float("inf"))
        return DUMP_AT * nearest

    def stop(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        while not self._stop.wait(min(1.0, self.floor_s / 4)):
            stalled = time.monotonic() - self._last
            if stalled > self.dump_after_s() and not self._dumped:
                self._dumped = True
                where = self.dump()
                sys.stderr.write(f"kubetrain watchdog: rank {self.rank} made no progress for {stalled:.1f} s; {where}\n")
                sys.stderr.flush()
            if stalled > self.timeout_s():
                where = self.dump() if not self._dumped else "its dumps were written before"
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
        data = with_group_config(dump())
        with open(path, "wb") as out:
            out.write(data)
    except Exception as error:  # noqa: BLE001 - the stacks are kept whatever the recorder does
        return f"no flight recorder dump ({type(error).__name__}: {error})"
    return f"its flight recorder in {path}"


def with_group_config(data: bytes) -> bytes:
    """A recorder's dump with every process group of its entries in `pg_config` (keyed by the group's name, as each
    entry's `process_group` names it, with its description and global ranks), which torch's fr_trace reads to match
    a collective across ranks and to name the ranks that never joined it. NCCL's recorder lists its groups; gloo's
    (torch 2.13) lists one placeholder with no name and no ranks, which is dropped: the groups this process knows
    fill in what the recorder left out."""
    import pickle

    import torch.distributed.distributed_c10d as c10d

    trace = pickle.loads(data)
    config = {name: group for name, group in (trace.get("pg_config") or {}).items()
              if name and group.get("ranks") not in (None, "", "[]")}
    for group, name in list(c10d._world.pg_names.items()):
        if name not in config:
            config[name] = {"name": name, "desc": group.group_desc,
                            "ranks": str(sorted(c10d._world.pg_group_ranks.get(group, {})))}
    trace["pg_config"] = config
    return pickle.dumps(trace)
