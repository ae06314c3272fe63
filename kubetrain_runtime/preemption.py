"""Stopping on request: SIGTERM (a pod deleted, preempted or drained) or SIGINT ends the run with a checkpoint.

The first signal asks the run to stop with a durable checkpoint of the step it is at; a second one ends
the process at once. Every rank must save the same step, yet a pod's ranks are told at slightly
different moments, and on a preemption only one pod of the job may be told at all. So the ranks agree
in rounds: each rank all-reduces (MAX, on a gloo group of its own, in the background) whether it has been
asked to stop, together with how many steps it proposes the next round to span (about AGREE_EVERY_S of
its steps), and reads the answer that many steps later. Every rank reads the same answer at the same
step and takes the same next span from it; the loop never waits, since every rank started the round a
whole span before, and on fast steps a round costs a fraction of a step's time. A stop is agreed within
two spans (about a second) of the signal.

The time to do it is a budget. torchrun passes the signal on to its ranks and kills them
`TORCH_ELASTIC_SHUTDOWN_TIMEOUT` seconds later (default 30); kubetrain sets that variable from the pod's
terminationGracePeriodSeconds, which a job derives from its expected save time. A rank exits a margin
before: 128 + the signal, the code of a container stopped by it, which every target restarts. A rank
that makes no progress for a while after the signal (a peer died and a collective hangs: which is also how
torchrun's restart of the survivors of a crash looks to them) exits at once, having nothing to save.

Python runs a signal's handler only between bytecodes of the main thread, which may be blocked in a
collective; so the signal is watched through `signal.set_wakeup_fd` by a thread of its own, which keeps
the clock and can end the process whatever the main thread is doing.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import threading
import time
from collections.abc import Callable

import torch
import torch.distributed as dist

from kubetrain_runtime.failures import STOP_SIGNALS, stopped_exit

SHUTDOWN_TIMEOUT_ENV = "TORCH_ELASTIC_SHUTDOWN_TIMEOUT"  # torchrun's, also read by its ranks
DEFAULT_SHUTDOWN_TIMEOUT_S = 30.0  # torchrun's default
MIN_STALL_S = 5.0  # no step for this long after the signal (or longer, see StopRequest.stall_s) means stuck
AGREE_EVERY_S = 0.5  # how often, in steps' time, the ranks agree on whether to stop
MAX_SPAN = 100  # steps between two rounds at most


def stop_budget_s() -> float:
    """Seconds a rank has from the signal to its exit: torchrun's shutdown timeout, less a margin for the
    process to end and torchrun to see it."""
    try:
        timeout = float(os.environ.get(SHUTDOWN_TIMEOUT_ENV, DEFAULT_SHUTDOWN_TIMEOUT_S))
    except ValueError:
        timeout = DEFAULT_SHUTDOWN_TIMEOUT_S
    return max(1.0, timeout - max(1.0, 0.1 * timeout))


class StopRequest:
    """This process's stop signals: installed once, in the main thread, by the process's entry point."""

    def __init__(self, rank: int, budget_s: float | None = None):
        self.rank = rank
        self.budget_s = stop_budget_s() if budget_s is None else budget_s
        self.signum: int | None = None
        self.received_at: float | None = None
        self.agreed = threading.Event()  # the ranks agreed to stop: the stall limit no longer applies
        self.stall_s: Callable[[], float] = lambda: MIN_STALL_S  # the trainer's estimate, once it has one
        self._progress = time.monotonic()
        self.step_s: Callable[[], float] = lambda: 0.0  # the recent median step time: the trainer's
        self._group: dist.ProcessGroup | None = None
        self._pending: tuple[dist.Work, torch.Tensor] | None = None
        self._span = 1  # steps from one round's start to its reading and the next round's start
        self._countdown = 0  # steps until the pending round is read

    def install(self) -> StopRequest:
        self._wakeup, writer = socket.socketpair()
        writer.setblocking(False)
        self._writer = writer  # kept open for the process's life
        signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        for signum in STOP_SIGNALS:
            signal.signal(signum, self._noted)
        threading.Thread(target=self._watch, name="kubetrain-stop", daemon=True).start()
        return self

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def join(self, world_size: int) -> None:
        """Create the agreement's process group (a collective: every rank, in the same order)."""
        self._pending, self._span, self._countdown = None, 1, 0
        # Named, so that a hang's flight-recorder dump (read by torch's fr_trace) says which group a collective is of.
        self._group = (dist.new_group(backend="gloo", group_desc="kubetrain_stop_agreement") if world_size > 1
                       else None)

    def progress(self) -> None:
        self._progress = time.monotonic()

    def agreed_now(self) -> bool:
        """Whether the ranks agree to stop before the next step; call once per step on every rank."""
        self.progress()
        if self._group is None:
            agreed = self.requested
        else:
            agreed = False
            if self._countdown > 0:
                self._countdown -= 1
                return False
            if self._pending is not None:
                work, answer = self._pending
                work.wait()  # started a span ago on every rank: done
                agreed, self._span = bool(answer[0]), int(answer[1])
            step_s = self.step_s()
            proposal = min(MAX_SPAN, max(1, int(AGREE_EVERY_S / step_s))) if step_s > 0 else 1
            answer = torch.tensor([int(self.requested), proposal], dtype=torch.int64)
            self._pending = (dist.all_reduce(answer, op=dist.ReduceOp.MAX, group=self._group, async_op=True),
                             answer)
            self._countdown = self._span - 1
        if agreed:
            self.agreed.set()
        return agreed

    def close(self) -> None:
        """Finish the last agreement round (every rank started it), then destroy the agreement's group while the
        interpreter is whole (a gloo group torn down during its finalization can abort the process)."""
        if self._pending is not None:
            self._pending[0].wait()
            self._pending = None
        if self._group is not None:
            dist.destroy_process_group(self._group)
            self._group = None

    def remaining_s(self) -> float:
        return self.budget_s - (time.monotonic() - self.received_at) if self.received_at is not None else self.budget_s

    def _noted(self, signum: int, frame: object) -> None:
        """The main thread's handler, when it runs Python: the request is then seen by the very next step (the
        watching thread, told through the wakeup fd, sees it too, and keeps the clock)."""
        if self.signum is None:
            self.received_at = time.monotonic()
            self.signum = signum

    def _watch(self) -> None:
        signum = self._next_signal(None)
        if self.signum is None:
            self.received_at = time.monotonic()
            self.signum = signum
        signum, self._progress = self.signum, time.monotonic()
        deadline = self.received_at + self.budget_s
        os.write(2, f"kubetrain: rank {self.rank}: {signal.Signals(signum).name}: stopping with a checkpoint of the "
                    f"step reached, within {self.budget_s:.0f} s (a second signal ends the rank at once)\n".encode())
        while True:
            now = time.monotonic()
            if now >= deadline:
                self._exit(signum, f"the stop budget of {self.budget_s:.0f} s after {signal.Signals(signum).name} "
                                   "ran out")
            stall = self.stall_s()
            if not self.agreed.is_set() and now - self._progress > stall:
                self._exit(signum, f"no step for {stall:.0f} s after {signal.Signals(signum).name} (a peer is gone or "
                                   "a collective hangs): nothing to save")
            again = self._next_signal(min(0.1, deadline - now))
            if again is not None:
                self._exit(again, f"a second stop signal ({signal.Signals(again).name})")

    def _next_signal(self, timeout: float | None) -> int | None:
        """The next stop signal, waiting up to `timeout` seconds (None: for ever); other signals are skipped."""
        while True:
            if not select.select([self._wakeup], [], [], timeout)[0]:
                return None
            for number in self._wakeup.recv(64):
                if number in STOP_SIGNALS:
                    return number

    def _exit(self, signum: int, why: str) -> None:
        code = stopped_exit(signum)
        os.write(2, f"kubetrain: rank {self.rank}: {why}; exiting {code}\n".encode())
        os._exit(code)
