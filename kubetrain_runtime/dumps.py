"""What a hung or failed rank leaves behind, on the run's persistent folder rather than in a pod about to be replaced.

Everything lands beside the durable checkpoints (`checkpoint.dir`), named by job, attempt, restart and rank:

    <checkpoint.dir>/hangs/<job>/<attempt>/restart-<N>/rank-<R>.stacks.txt           every thread's Python stack
    <checkpoint.dir>/hangs/<job>/<attempt>/restart-<N>/flight_recorder_rank_<R>      torch's flight recorder: the
                                                                                      watchdog's dump, or NCCL's own
                                                                                      on a collective timeout
    <checkpoint.dir>/failures/<job>/<attempt>.restart-<N>.rank-<R>.txt               a copy of the failure note

`<attempt>` is the pod's start (`attempt-<UTC time>`, set by kubetrain's launcher in KUBETRAIN_ATTEMPT), else
torchrun's run id; `<N>` is torchrun's restart count of the pod's ranks. Once the ranks' process group exists, the
runtime makes the hang folder rank 0's `<attempt>/restart-<N>` on every rank (KUBETRAIN_HANGS_RUN): the ranks of a
job of several pods (each with its own start and its own agent's restart count) write one hang's dumps into one
folder, which is what fr_trace reads. NCCL's own dump on a timeout, whose file is set before the group exists, stays
in the pod's folder. The flight recorder keeps the last
collectives of each process group (TORCH_FR_BUFFER_SIZE entries, gloo and NCCL alike in torch 2.13), dumped by
NCCL itself when a collective times out (TORCH_NCCL_DUMP_ON_TIMEOUT, to the prefix TORCH_NCCL_DEBUG_INFO_TEMP_FILE)
and by the watchdog (kubetrain_runtime/watchdog.py) before it kills a hung rank. Both variables must be set before
the process group is created: `prepare` does it. Read a restart's dumps with
`python -m torch.distributed.flight_recorder.fr_trace <folder>` (the stacks' names end in no digit, so fr_trace
infers the prefix; the watchdog lists gloo's process groups in each dump, which fr_trace needs) or `pickle.load`.

Where a rank leaves something, it appends the folder to KUBETRAIN_DUMPS_NOTE (a file of the container's, like the
failure note), and the launcher's last lines name it. Imports only the standard library (the warm process's thin
client imports failures.py, which imports this).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

HANGS = "hangs"
FAILURES = "failures"
ATTEMPT_ENV = "KUBETRAIN_ATTEMPT"  # the pod's start, from kubetrain's launcher
DUMPS_NOTE_ENV = "KUBETRAIN_DUMPS_NOTE"  # where ranks list the folders they left dumps in, for the launcher
FAILURE_COPY_ENV = "KUBETRAIN_FAILURE_COPY"  # where failures.record keeps a copy of its note
FR_FILE_ENV = "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"  # the prefix of NCCL's dumps; torch appends the rank
FR_BUFFER_ENV = "TORCH_FR_BUFFER_SIZE"
FR_BUFFER_ENV_OLD = "TORCH_NCCL_TRACE_BUFFER_SIZE"  # its name before torch 2.8, still read as a fallback
FR_BUFFER_ENTRIES = "2000"
FR_PREFIX = "flight_recorder_rank_"
POD_FR_FILE = "/tmp/nccl_trace_rank_"  # the pod's default (kubetrain.jobs.pod), for a job with no checkpoint folder


HANGS_RUN_ENV = "KUBETRAIN_HANGS_RUN"  # rank 0's <attempt>/restart-<N>, agreed by the ranks once their group exists


def attempt() -> str:
    return os.environ.get(ATTEMPT_ENV) or f"run-{os.environ.get('TORCHELASTIC_RUN_ID', 'local')}"


def restart() -> str:
    return f"restart-{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"


def own_run() -> str:
    """This process's `<attempt>/restart-<N>`: rank 0's names the folder of every rank's hang dumps."""
    return f"{attempt()}/{restart()}"


def use_run(run: str) -> None:
    """Every rank's hang dumps go under rank 0's `run` (its own_run, shared once the group exists)."""
    os.environ[HANGS_RUN_ENV] = run


@dataclass(frozen=True)
class Dumps:
    """Where this rank's dumps go."""

    checkpoint_dir: Path
    job: str
    rank: int

    @property
    def folder(self) -> Path:
        return self.checkpoint_dir / HANGS / self.job / (os.environ.get(HANGS_RUN_ENV) or own_run())

    @property
    def stacks(self) -> Path:
        return self.folder / f"rank-{self.rank}.stacks.txt"

    @property
    def flight_recorder(self) -> Path:
        # The name torch's fr_trace reads (a common prefix, then the rank), as NCCL's own dump on a timeout.
        return self.folder / f"{FR_PREFIX}{self.rank}"

    @property
    def failure_note(self) -> Path:
        return self.checkpoint_dir / FAILURES / self.job / f"{attempt()}.{restart()}.rank-{self.rank}.txt"

    def prepare(self, nccl: bool) -> None:
        """Before the process group is created: the flight recorder records (gloo's too), NCCL dumps into this
        rank's folder unless the job chose a file of its own, and a failure note is copied here."""
        os.environ.setdefault(FR_BUFFER_ENV, os.environ.get(FR_BUFFER_ENV_OLD, FR_BUFFER_ENTRIES))
        os.environ.setdefault("TORCH_NCCL_DUMP_ON_TIMEOUT", "1")
        current = os.environ.get(FR_FILE_ENV)
        if current in (None, "", POD_FR_FILE) or current.startswith(str(self.checkpoint_dir / HANGS)):
            os.environ[FR_FILE_ENV] = str(self.folder / FR_PREFIX)
            if nccl:  # NCCL writes its dump on a timeout into this folder, and creates none
                try:
                    self.folder.mkdir(parents=True, exist_ok=True)
                    tell_launcher(self.folder)
                except OSError:
                    pass  # the checkpoints report unusable storage, with its fix
        os.environ[FAILURE_COPY_ENV] = str(self.failure_note)


def tell_launcher(folder: Path) -> None:
    """List `folder` for the launcher's last lines (once per line; the launcher removes duplicates)."""
    note = os.environ.get(DUMPS_NOTE_ENV)
    if not note:
        return
    try:
        with open(note, "a") as out:
            out.write(f"{folder}\n")
    except OSError:
        pass
