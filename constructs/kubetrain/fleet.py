"""Loading the user's fleet module and building its App, with every mistake reported as bad input.

`kubetrain synth --app MODULE` imports MODULE and calls its `build()`. What can go wrong there
is the user's: a misspelled module, a file path instead of a module name, no `build()`, a
`build()` that returns something else, or a definition with errors. Each is one line naming the
problem and the fix. An exception raised by the user's own code is the one case whose traceback
is shown, since it points into their module: `FleetCodeError` carries it.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
import traceback

import cdk8s
from pydantic import ValidationError

from kubetrain.rules.registry import register
from kubetrain.state import diagnostics
from kubetrain_runtime.problems import (
    ConfigError,
    Problem,
    model_named,
    problems_from_validation_error,
    unclaimed_rejections,
)
from kubetrain_runtime.spelling import did_you_mean

FLEET_MODULE = register(
    "KT020", "error", "the fleet module cannot be loaded",
    rationale="synth imports the module named by --app (default: apps) and calls its build(), which must "
              "return the cdk8s App it defined.",
    fix="name an importable module (apps, or apps.dev) whose build() returns an App", source="README.md (Commands)")


class FleetCodeError(Exception):
    """The user's own fleet code raised: `report()` is one framing line and their traceback."""

    def __init__(self, module: str, error: BaseException):
        self.module = module
        self.error = error
        super().__init__(f"the fleet module {module!r} raised {type(error).__name__}: {error}")

    def report(self) -> str:
        # Keep the user's frames: everything from the first frame outside kubetrain's own loader.
        frames = traceback.extract_tb(self.error.__traceback__)
        inside = [f for f in frames if not f.filename.endswith(("kubetrain/fleet.py", "importlib/__init__.py"))
                  and "<frozen importlib" not in f.filename]
        lines = ["Traceback (most recent call last):\n", *traceback.format_list(inside),
                 *traceback.format_exception_only(type(self.error), self.error)]
        return f"error: {self}; its traceback follows (the problem is in your code, not kubetrain's):\n" + \
            "".join(lines)


def _bad(module: str, message: str, fix: str = FLEET_MODULE.fix) -> ConfigError:
    return ConfigError(f"--app {module}", [Problem(FLEET_MODULE.code, "", message, fix)])


def build_fleet(module_name: str) -> cdk8s.App:
    """Import the fleet module, call its build(), and return the App (its definitions are checked by synth's
    next step, kubetrain.pipeline)."""
    if module_name.endswith(".py") or "/" in module_name or os.sep in module_name:
        dotted = module_name.removesuffix(".py").replace(os.sep, ".").replace("/", ".").strip(".")
        raise _bad(module_name, "--app takes a module name, not a file path", f"use --app {dotted}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # the fleet lives in the project, not in site-packages
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and (module_name == error.name or module_name.startswith(f"{error.name}.")):
            raise _bad(module_name, f"no module named {module_name!r} (looked in {os.getcwd()} and the installed "
                                    "packages)", f"{did_you_mean(module_name, _modules_beside(module_name))}run "
                                    "synth from the project root, or fix the module name") from None
        raise FleetCodeError(module_name, error) from None
    except ConfigError:
        raise
    except Exception as error:  # noqa: BLE001 - the user's code, reported with its own traceback
        raise FleetCodeError(module_name, error) from None
    build = getattr(module, "build", None)
    if not callable(build):
        raise _bad(module_name, f"module {module_name!r} has no build() function",
                   "define build() returning the App (see apps/__init__.py)")
    unclaimed_rejections()  # models rejected before this build are not this fleet's
    try:
        app = build()
    except ConfigError:
        raise
    except ValidationError as error:  # `Model.model_validate(...)` in the fleet's code: bad input, not a crash
        raise ConfigError(_user_frame(error), problems_from_validation_error(error, model_named(error.title))) \
            from None
    except Exception as error:  # noqa: BLE001
        raise FleetCodeError(module_name, error) from None
    if not isinstance(app, cdk8s.App):
        raise _bad(module_name, f"build() returned {type(app).__name__}, not a cdk8s App",
                   "end build() with `return app`")
    # A typed model built with a mistake and never given to a construct (or given to one outside any
    # construct's props): its problems are reported where it was built.
    for rejection in unclaimed_rejections():
        diagnostics(app).report(rejection.where, rejection.problems)
    return app


def _modules_beside(module_name: str) -> list[str]:
    """The modules a misspelt --app may have meant: the project's top-level ones, or those of the package it
    names a module of (apps.dve -> apps.*)."""
    parent, _, _ = module_name.rpartition(".")
    if not parent:
        return [m.name for m in pkgutil.iter_modules([os.getcwd()])]
    try:
        package = importlib.import_module(parent)
    except Exception:  # noqa: BLE001 - no suggestion where the parent itself does not load
        return []
    return [f"{parent}.{m.name}" for m in pkgutil.iter_modules(getattr(package, "__path__", []))]


def _user_frame(error: BaseException) -> str:
    """`file:line` of the innermost frame of the fleet's own code in `error`'s traceback."""
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if f"{os.sep}site-packages{os.sep}" not in f.filename and "kubetrain" + os.sep not in f.filename
              and "<frozen" not in f.filename]
    if not frames:
        return error.title if isinstance(error, ValidationError) else "the fleet"
    return f"{os.path.relpath(frames[-1].filename)}:{frames[-1].lineno}"
