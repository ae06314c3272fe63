"""Progress of long work (synth and validate of large fleets), shown only where someone watches.

The work reports phases and counts to a `Progress`; the command line passes a rich progress bar on
a terminal and nothing otherwise, so CI logs keep plain lines.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

Advance = Callable[[int], None]


class Progress(Protocol):
    def phase(self, name: str, total: int | None = None) -> Advance:
        """Start a phase (`total` items, or unknown); returns the function that counts items done."""
        ...


def phase(progress: Progress | None, name: str, total: int | None = None) -> Advance | None:
    return progress.phase(name, total) if progress is not None else None
