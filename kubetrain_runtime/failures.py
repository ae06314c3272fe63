"""How a run ends when it cannot go on: one exit code per class of failure, shared by the runtime and the compiler.

A failure that retrying cannot fix (a bad config, a full or read-only checkpoint volume, a run that keeps
diverging) exits with a code below 128, which every target's failure policy treats as permanent
(PyTorchJob's `restartPolicy: ExitCode` fails the job on 1-127; TrainJob's and the Indexed Job's
`podFailurePolicy` fails it on exactly these codes). A transient failure (a rank lost, a collective that
timed out) is anything else, and is retried by torchrun and then by the operator.

torchrun restarts failed ranks whatever their exit code and then exits 1, so a permanent failure also
leaves a note: the rank writes its code and its one-line report to `KUBETRAIN_FAILURE_FILE` (a path the
pod's launcher chooses for this container). Every rank started after that exits at once with the same
code, which spends torchrun's restart budget in moments, and the launcher exits with the code and prints
the report instead of asking for a retry. This module imports only the standard library.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import TYPE_CHECKING

from kubetrain_runtime.dumps import FAILURE_COPY_ENV, tell_launcher

if TYPE_CHECKING:  # the rank's thin client (kubetrain_runtime/warm.py) imports this module: the standard library only
    from kubetrain_runtime.problems import Problem

EXIT_BAD_INPUT = 2  # the run config, the data or KUBETRAIN_FAULT: fix the input
EXIT_STORAGE = 3  # checkpoint storage full, read-only, missing or not writable
EXIT_DIVERGED = 4  # non-finite steps persist through every rollback
PERMANENT_EXITS = (EXIT_BAD_INPUT, EXIT_STORAGE, EXIT_DIVERGED)
# The `reason` label of kubetrain_permanent_failure.
REASONS = {EXIT_BAD_INPUT: "bad_input", EXIT_STORAGE: "storage", EXIT_DIVERGED: "diverged"}

FAILURE_FILE_ENV = "KUBETRAIN_FAILURE_FILE"
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def stopped_exit(signum: int) -> int:
    """The exit of a rank stopped by `signum` (after its checkpoint): 128 + the signal, as a container
    killed by it reports, which every target retries (preemption is no fault of the job)."""
    return 128 + signum


class PermanentFailure(Exception):
    """A failure retrying cannot fix; `exit_code` is one of PERMANENT_EXITS."""

    def __init__(self, exit_code: int, where: str, problem: Problem):
        self.exit_code = exit_code
        self.line = problem.format(where)
        super().__init__(self.line)


def record(exit_code: int, line: str, say: bool = True) -> None:
    """Say why this rank fails for good: one line on stderr (unless said already), and the note for the
    launcher (the first rank's note stands: later ones would only repeat or follow from it)."""
    if say:
        print(f"error: {line}", file=sys.stderr, flush=True)
    keep_copy(exit_code, line)
    path = os.environ.get(FAILURE_FILE_ENV)
    if not path:
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except OSError:
        return  # already recorded (or the folder is gone, and the exit code still says it)
    with os.fdopen(fd, "w") as note:
        note.write(f"{exit_code} {line}\n")


def bad_input(lines: list[str], record_note: bool = True) -> int:
    """Input that no retry can fix (a config, the data): every line once, by rank 0 (not one copy per rank), and the
    note for the launcher (unless `record_note` is False: a check that trains nothing); returns EXIT_BAD_INPUT."""
    if os.environ.get("RANK", "0") == "0":
        for line in lines:
            print(f"error: {line}", file=sys.stderr, flush=True)
    if record_note:
        record(EXIT_BAD_INPUT, lines[0] if len(lines) == 1 else f"{lines[0]} (and {len(lines) - 1} more problems)",
               say=False)
    return EXIT_BAD_INPUT


def keep_copy(exit_code: int, line: str) -> None:
    """This rank's note also on the run's persistent folder (the container's goes with the pod), where the runtime
    set one (kubetrain_runtime/dumps.py); the launcher's last lines name it."""
    copy = os.environ.get(FAILURE_COPY_ENV)
    if not copy:
        return
    try:
        os.makedirs(os.path.dirname(copy), exist_ok=True)
        with open(copy, "w") as note:
            note.write(f"{exit_code} {line}\n")
    except OSError:
        return
    tell_launcher(os.path.dirname(copy))


def recorded() -> int | None:
    """The exit code an earlier rank of this container recorded as permanent, if any."""
    path = os.environ.get(FAILURE_FILE_ENV)
    try:
        with open(path) as note:  # type: ignore[arg-type]
            code = int(note.read().split(maxsplit=1)[0])
    except (TypeError, OSError, ValueError, IndexError):
        return None
    return code if code in PERMANENT_EXITS else None
