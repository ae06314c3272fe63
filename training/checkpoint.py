"""CheckpointManager: distributed checkpoints that are complete or invisible, and never too many.

Layout: `<dir>/step-00000020/` holds one DCP checkpoint (a file per rank plus `.metadata`).
Rank 0 writes the `COMPLETE` marker only after DCP reports the whole checkpoint written, so a
crash mid-save leaves a folder that is never loaded. Old checkpoints are pruned only after a
newer one is complete.
"""

from __future__ import annotations

import os
import shutil
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import torch.distributed as dist
import torch.distributed.checkpoint as dcp

from training.config import CheckpointConfig
from training.distributed import World, broadcast_object

MARKER = "COMPLETE"


class CheckpointManager:
    def __init__(self, cfg: CheckpointConfig, world: World):
        self.root = Path(cfg.dir)
        self.keep = cfg.keep
        self.async_save = cfg.async_save
        self.world = world
        self._pending: tuple[int, Future] | None = None
        # Background saves run their collectives on a gloo group of their own, so they never
        # queue behind (or block) the training collectives on the default group.
        self._group = dist.new_group(backend="gloo") if self.async_save else None
        if world.is_main:
            self.root.mkdir(parents=True, exist_ok=True)

    def step_dir(self, step: int) -> Path:
        return self.root / f"step-{step:08d}"

    def complete_steps(self) -> list[int]:
        steps = []
        for path in self.root.glob("step-*"):
            if (path / MARKER).is_file():
                steps.append(int(path.name.removeprefix("step-")))
        return sorted(steps)

    def latest(self) -> int | None:
        """The newest complete checkpoint's step, as rank 0 sees it (every rank gets the same answer)."""
        steps = self.complete_steps() if self.world.is_main else None
        steps = broadcast_object(steps)
        return steps[-1] if steps else None

    def save(self, step: int, state: dict[str, Any]) -> None:
        self.wait()  # one save at a time: the previous one is finished and marked first
        path = self.step_dir(step)
        if self.async_save:
            future = dcp.async_save(state, checkpoint_id=path, process_group=self._group)
            self._pending = (step, future)
        else:
            dcp.save(state, checkpoint_id=path)
            self._mark_complete(step)

    def poll(self) -> None:
        """Finish a background save if it is done; cheap enough to call every step."""
        if self._pending and self._pending[1].done():
            self.wait()

    def wait(self) -> None:
        if self._pending:
            step, future = self._pending
            self._pending = None
            future.result()
            self._mark_complete(step)

    def load(self, step: int, state: dict[str, Any]) -> None:
        """Fill `state` in place from the checkpoint of `step` (only the keys `state` holds)."""
        dcp.load(state, checkpoint_id=self.step_dir(step))

    def _mark_complete(self, step: int) -> None:
        # DCP's save returns on every rank only after the coordinator has written the metadata,
        # which it does after gathering every rank's write results: the checkpoint is whole.
        if not self.world.is_main:
            return
        marker = self.step_dir(step) / MARKER
        tmp = marker.with_suffix(".tmp")
        tmp.write_text(f"{step}\n")
        os.replace(tmp, marker)
        self._prune(newest=step)

    def _prune(self, newest: int) -> None:
        complete = self.complete_steps()
        doomed = set(complete[:-self.keep])
        # Folders without a marker older than the newest complete one are debris of a crash.
        doomed |= {int(p.name.removeprefix("step-")) for p in self.root.glob("step-*")
                   if not (p / MARKER).is_file() and int(p.name.removeprefix("step-")) < newest}
        for step in sorted(doomed):
            # The marker goes first: a crash halfway through leaves an invisible folder, never
            # a marked one with files missing.
            (self.step_dir(step) / MARKER).unlink(missing_ok=True)
            shutil.rmtree(self.step_dir(step), ignore_errors=True)
