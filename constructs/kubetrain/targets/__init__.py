"""Launch targets, one module per operator. Importing this package registers every target in it."""

from __future__ import annotations

import importlib
import pkgutil

from kubetrain.targets.base import LocalPlan, LocalReplica, Target, restart_after

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

from kubetrain.targets.pytorchjob import PyTorchJob  # noqa: E402  (the default target, for convenience)

__all__ = ["LocalPlan", "LocalReplica", "PyTorchJob", "Target", "restart_after"]
