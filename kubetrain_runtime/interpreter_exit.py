"""Leaving the interpreter without collecting garbage: a second of CPU off every exit of a process that imported torch.

CPython's finalization (`Py_FinalizeEx`) runs the cyclic garbage collector over every tracked object as it tears the
modules down. After `import torch` and dynamo that is about 280,000 objects, and the passes cost a process 0.5-1 s of
CPU at each exit: a rank's, the warm process's, torchrun's. Every rank of a pod exits at each restart, and the restart
waits for them. `gc.freeze()` moves every tracked object into the permanent generation, which the collector never
visits; run last at exit, it leaves finalization only the modules' teardown. What that gives up: reference cycles that
are garbage at exit are not collected, so their `__del__` does not run, which finalization never promised either
(the Python reference, `object.__del__`: "It is not guaranteed that __del__() methods are called for objects that
still exist when the interpreter exits").
"""

from __future__ import annotations

import atexit
import gc

_registered = False


def freeze_at_exit() -> None:
    """Freeze the garbage collector's objects when the interpreter exits, after every atexit function registered later
    (atexit runs the last registered first). Called once a process has imported torch: by `Run` as it starts and by
    the torchrun wrapper; the first call registers, the others (a process that makes several Runs) do nothing."""
    global _registered
    if not _registered:
        atexit.register(gc.freeze)
        _registered = True
