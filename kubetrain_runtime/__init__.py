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

import importlib
from typing import Any

# name -> the module it lives in, imported on first use (by name, so that no submodule's import of this package
# is an import of itself: the package sits below every module in it).
_EXPORTS = {"Run": "kubetrain_runtime.run", "RuntimeConfig": "kubetrain_runtime.runtime_config",
            "ProfilingConfig": "kubetrain_runtime.runtime_config"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
