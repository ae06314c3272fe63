"""Which rules the tests make fire, and where: every problem a process reports is recorded with its code.

A problem is *reported* when it is in a ConfigError (what every command prints as bad input), in a fleet's
diagnostics (what synth prints), or in a rank's PermanentFailure (what a pod prints before it exits for good).
It is reported *by synth* when it reaches a fleet's diagnostics, or a ConfigError leaves
`kubetrain.fleet.build_fleet` or `kubetrain.pipeline.synth`: the synth path, from the fleet's code to the
written files. Test code that builds a Problem itself records nothing.

The conftest installs the recorder in the test process; `sitecustomize.py` beside this file installs it in
every Python process the tests start (the conftest puts this folder on their PYTHONPATH), so `kubetrain
synth`, `python -m training` and `kubetrain run-local` run as subprocesses are recorded too. Modules are
patched as they are imported, so a process records only what it imports anyway. Records are lines
"<stage> <code>" appended to the file `KUBETRAIN_RULES_FIRED` names (stage: synth or reported).
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.util
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

SINK = "KUBETRAIN_RULES_FIRED"


def _record(stage: str, codes: Iterable[str]) -> None:
    path = os.environ.get(SINK)
    lines = "".join(f"{stage} {code}\n" for code in codes)
    if path and lines:
        with open(path, "a", encoding="utf-8") as sink:  # one write per call: lines of processes never mix
            sink.write(lines)


def _codes(problems: Iterable[Any]) -> list[str]:
    return [getattr(p, "code", "") for p in problems]


def _on_synth_path(function: Callable[..., Any], error_type: type[Exception]) -> Callable[..., Any]:
    @functools.wraps(function)
    def recorded(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except error_type as error:
            _record("synth", _codes(getattr(error, "problems", [])))
            raise

    return recorded


def _record_when_made(cls: type, problems_of: Callable[..., list[Any]]) -> None:
    """Record the problems an instance of `cls` carries as it is made (`problems_of` takes __init__'s arguments)."""
    init = cls.__init__

    @functools.wraps(init)
    def recorded(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        _record("reported", _codes(problems_of(*args, **kwargs)))

    cls.__init__ = recorded


def _patch_problems(module: Any) -> None:
    _record_when_made(module.ConfigError, lambda where, problems: problems)


def _patch_failures(module: Any) -> None:
    _record_when_made(module.PermanentFailure, lambda exit_code, where, problem: [problem])


def _patch_diagnostics(module: Any) -> None:
    report = module.Diagnostics.report
    findings = module.Diagnostics.findings

    @functools.wraps(report)
    def recorded_report(self: Any, where: str, problems: list[Any]) -> bool:
        _record("synth", _codes(problems))
        return report(self, where, problems)

    def recorded_findings(self: Any) -> list[Any]:
        found = findings.fget(self)
        _record("synth", _codes(f.problem for f in found))
        return found

    module.Diagnostics.report = recorded_report
    module.Diagnostics.findings = property(recorded_findings, doc=findings.__doc__)


def _patch_fleet(module: Any) -> None:
    module.build_fleet = _on_synth_path(module.build_fleet, sys.modules["kubetrain_runtime.problems"].ConfigError)


def _patch_pipeline(module: Any) -> None:
    module.synth = _on_synth_path(module.synth, sys.modules["kubetrain_runtime.problems"].ConfigError)
    fleet_findings = module.fleet_findings

    @functools.wraps(fleet_findings)
    def recorded_fleet_findings(*args: Any, **kwargs: Any) -> list[Any]:
        found = fleet_findings(*args, **kwargs)  # what admission and the fleet checks add to the recorded
        _record("synth", _codes(f.problem for f in found))
        return found

    module.fleet_findings = recorded_fleet_findings


PATCHES = {"kubetrain_runtime.problems": _patch_problems, "kubetrain_runtime.failures": _patch_failures,
           "kubetrain.model.diagnostics": _patch_diagnostics,
           "kubetrain.fleet": _patch_fleet, "kubetrain.pipeline": _patch_pipeline}


class _Patcher(importlib.abc.MetaPathFinder):
    """Patches a module of PATCHES right after it is executed, before anything can import names from it."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in PATCHES:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        loader = spec.loader

        class Patching(importlib.abc.Loader):
            def create_module(self, spec: Any) -> Any:
                return loader.create_module(spec)

            def exec_module(self, module: Any) -> None:
                loader.exec_module(module)
                PATCHES[name](module)

        spec.loader = Patching()
        return spec


def install(sink: Path | None = None) -> None:
    """Record into `sink` (or the file the environment names), in this process and in the processes it starts."""
    if sink is not None:
        os.environ[SINK] = str(sink)
    if not os.environ.get(SINK):
        return
    already = [name for name in PATCHES if name in sys.modules]
    for name in already:  # imported before the recorder: patched now
        PATCHES[name](sys.modules[name])
    sys.meta_path.insert(0, _Patcher())


def fired(sink: Path) -> dict[str, set[str]]:
    """stage -> the codes recorded in it."""
    found: dict[str, set[str]] = {"synth": set(), "reported": set()}
    if sink.is_file():
        for line in sink.read_text(encoding="utf-8").splitlines():
            stage, _, code = line.partition(" ")
            found.setdefault(stage, set()).add(code)
    return found
