"""Fault injection for tests and drills, off unless KUBETRAIN_FAULT is set.

    KUBETRAIN_FAULT="crash:step=13:rank=1;nan:step=7"

Faults are separated by `;`, each `KIND:step=N[:rank=R]` (no rank: every rank):
- `crash`: the rank kills itself with SIGKILL at the start of step N;
- `nan`: the loss of step N becomes NaN (and so do its gradients);
- `hang`: the rank stops making progress at the start of step N;
- `crash-in-save`: the rank dies while writing the checkpoint of step N, after its data files
  and before the checkpoint's metadata;
- `sigterm`: the rank is sent SIGTERM at the start of step N, as torchrun passes on a pod's stop signal
  (to one rank: the others learn of it from the stop agreement, see kubetrain_runtime/preemption.py).
A fault fires only in the first attempt (TORCHELASTIC_RESTART_COUNT = 0), so a restarted run
recovers instead of failing again.
"""

from __future__ import annotations

import os
import signal
import threading
from dataclasses import dataclass

KINDS = ("crash", "nan", "hang", "crash-in-save", "sigterm")


@dataclass(frozen=True)
class Fault:
    kind: str
    step: int
    rank: int | None = None


def parse_faults(text: str) -> list[Fault]:
    """Parse the KUBETRAIN_FAULT grammar; ValueError names the bad part and the expected form."""
    faults = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        kind, *fields = part.split(":")
        values = dict(field.partition("=")[::2] for field in fields)
        if kind not in KINDS or "step" not in values or set(values) - {"step", "rank"}:
            raise ValueError(f"bad fault {part!r}: expected KIND:step=N[:rank=R] with KIND one of {', '.join(KINDS)}")
        try:
            faults.append(Fault(kind, int(values["step"]), int(values["rank"]) if "rank" in values else None))
        except ValueError:
            raise ValueError(f"bad fault {part!r}: step and rank must be integers") from None
    return faults


class FaultInjector:
    """The faults meant for this rank in this attempt."""

    def __init__(self, faults: list[Fault], rank: int, restart_count: int):
        self.faults = [f for f in faults if restart_count == 0 and f.rank in (None, rank)]

    @classmethod
    def from_env(cls, rank: int) -> FaultInjector:
        return cls(parse_faults(os.environ.get("KUBETRAIN_FAULT", "")), rank,
                   int(os.environ.get("TORCHELASTIC_RESTART_COUNT", 0)))

    def _due(self, kind: str, step: int) -> bool:
        """Whether a fault of `kind` is due at `step`; it fires once (a rollback replays steps)."""
        fault = next((f for f in self.faults if f.kind == kind and f.step == step), None)
        if fault is not None:
            self.faults.remove(fault)
        return fault is not None

    @staticmethod
    def crash() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    def before_step(self, step: int) -> None:
        if self._due("crash", step):
            self.crash()
        if self._due("sigterm", step):
            os.kill(os.getpid(), signal.SIGTERM)
        if self._due("hang", step):
            threading.Event().wait()  # forever: only the watchdog (or a signal) ends this

    def poisons_loss(self, step: int) -> bool:
        return self._due("nan", step)

    def crash_in_save_due(self, step: int) -> bool:
        """Whether the save of `step` must die after its data files (see checkpoint.py)."""
        return self._due("crash-in-save", step)
