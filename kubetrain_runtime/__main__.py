"""`python -m kubetrain_runtime SCRIPT [ARGS...]`: run a training script of the user's own as its rank, the way
`python SCRIPT [ARGS...]` would, started warm.

Under torchrun on Linux the rank is a fork of the pod's warm process (kubetrain_runtime/warm.py), which has imported
torch, DCP and kubetrain_runtime.Run and rehearsed a first step: a restarted rank is training again in well under a
second instead of importing for two. The script runs as `__main__` with `sys.argv` = [SCRIPT, ARGS...] and ends the
rank with its exit status. A Function job whose function takes the runtime (its `run` parameter) is started this
way; so can any command job's script. This module imports only the standard library at the top.
"""

from __future__ import annotations

import sys

from kubetrain_runtime import warm

ENTRY = "kubetrain_runtime.__main__"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not runs_warm(argv):
        print(__doc__.strip(), file=sys.stderr if not argv else sys.stdout)
        return 2 if not argv else 0
    if warm.wanted():
        code = warm.run_in_warm_process(argv, ENTRY)
        if code is not None:
            return code
    return run(argv)


def runs_warm(argv: list[str]) -> bool:
    """Whether a rank with these arguments runs in the pod's warm process: any that names a script."""
    return bool(argv) and argv[0] not in ("-h", "--help")


def run(argv: list[str]) -> int:
    """Run the script in this process, as `python SCRIPT ARGS` would (its folder first on sys.path)."""
    import os
    import runpy

    script = argv[0]
    sys.argv = list(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1
    return 0


def preloads(argv: list[str]) -> tuple[str, ...]:
    """What the warm process imports for a rank of a script on the runtime, whatever the script."""
    return ("kubetrain_runtime.run",)


def rehearse() -> None:
    """The warm process's rehearsal of a rank's first steps on a tiny model (kubetrain_runtime/warm.py)."""
    import torch

    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    optimizer = torch.optim.AdamW(model.parameters())
    torch.nn.functional.mse_loss(model(torch.zeros(2, 8)).squeeze(-1), torch.zeros(2)).backward()
    warm.rehearse(model, optimizer)


if __name__ == "__main__":
    sys.exit(main())
