"""kubetrain's training runtime: the guarantees that keep a run's work, for any training loop.

    from kubetrain_runtime import Run

    run = Run(model, optimizer, scheduler=scheduler, max_steps=5000)
    for step in run.steps():
        ...                  # the loop's own step: forward, backward, optimizer.step()

See kubetrain_runtime/run.py. kubetrain's own trainer (the `training` package) is one user of it; this package never
imports `training`, so a user's package of that name cannot shadow it. Importing the package imports no torch
(the compiler reads its config and problems): `Run` is loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubetrain_runtime.config import ProfilingConfig, RuntimeConfig
    from kubetrain_runtime.run import Run

__all__ = ["ProfilingConfig", "Run", "RuntimeConfig"]


def __getattr__(name: str) -> Any:
    if name == "Run":
        from kubetrain_runtime.run import Run

        return Run
    if name in ("RuntimeConfig", "ProfilingConfig"):
        from kubetrain_runtime import config

        return getattr(config, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
