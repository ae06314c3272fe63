"""Checkpoints in two tiers, each complete or invisible, and never too many.

The durable tier (`CheckpointManager`) is one DCP checkpoint of the job on the shared volume; the
fast tier (`LocalCheckpoints`) is each rank's own state on node-local storage, saved without a
collective and in the background, so it is cheap enough to save often and survives a restart of the
ranks on the same node (an emptyDir outlives its containers, not its pod). Both tiers hold the
training thread only while a background thread copies the state (staging); the writes and the
marker follow on their own.

Durable layout: `<dir>/step-00000020/` holds one DCP checkpoint (a file per rank plus `.metadata`).
Rank 0 writes the `COMPLETE` marker only after DCP reports the whole checkpoint written, so a
crash mid-save leaves a folder that is never loaded. Old checkpoints are pruned only after a
newer one is complete.
"""

from __future__ import annotations

import os
import shutil
import time
import warnings
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemWriter
from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions

from training.config import CheckpointConfig
from training.distributed import World, all_gather_object, broadcast_object
from training.faults import FaultInjector

MARKER = "COMPLETE"
# The fast tier saves and loads with `no_dist` on purpose (each rank alone). DCP warns about that from
# whichever thread does the work, so the filter is the process's, set once.
warnings.filterwarnings("ignore", message="torch.distributed is disabled")


@dataclass
class _PendingSave:
    step: int
    started: float
    staging: Future
    upload: Future
    blocked_s: float  # time the training thread has spent on this save so far
    staged: bool = False


def _stager(world: World) -> DefaultStager:
    """One stager per tier for the whole run: it keeps its staging buffers, so each save is a copy into
    memory already faulted in, done on a background thread while the next step's forward and backward
    run (they only read the weights)."""
    on_gpu = world.device_type == "cuda"
    return DefaultStager(StagingOptions(use_pinned_memory=on_gpu, use_shared_memory=False, use_async_staging=True,
                                        use_non_blocking_copy=on_gpu))


def _report(tier: str, step: int, background: bool, started: float, blocked_s: float,
            staging_blocked_s: float) -> dict[str, Any]:
    """A save's record. `blocked_s`: all the time it held the training thread; `staging_blocked_s`: the part
    before any final wait for its writes, which is what a save costs while training goes on (interval: auto)."""
    return {"event": "checkpoint", "tier": tier, "step": step, "async": background, "blocked_s": blocked_s,
            "staging_blocked_s": staging_blocked_s, "complete_after_s": time.perf_counter() - started}


class _Tier:
    """What both tiers share: at most one background save in flight. Its staging (the copy of the state)
    must finish before the weights change, its upload (the writes) whenever it does. `_mark_complete(step)`
    runs as soon as the writes have succeeded, on the writer's thread: a save is complete on disk even if
    the process dies before the training thread looks again. The report waits for `poll` or `wait`."""

    def __init__(self, tier: str, stager: DefaultStager | None):
        self.tier = tier
        self._stager = stager
        self._pending: _PendingSave | None = None

    def _mark_complete(self, step: int) -> None:
        raise NotImplementedError

    def _track(self, step: int, started: float, response: Any) -> None:
        """Track the background save `response` (of dcp.async_save) of `step`, begun at `started`."""
        self._pending = _PendingSave(step, started, response.staging_completion, response.upload_completion,
                                     blocked_s=time.perf_counter() - started)
        response.upload_completion.add_done_callback(
            lambda upload: self._mark_complete(step) if upload.exception() is None else None)

    def wait_for_staging(self) -> None:
        """Block until a background save has copied the state: call before weights change."""
        pending = self._pending
        if pending and not pending.staged:
            waited = time.perf_counter()
            pending.staging.result()
            pending.staged = True
            pending.blocked_s += time.perf_counter() - waited

    def poll(self) -> dict[str, Any] | None:
        """Finish a background save if it is done; cheap enough to call every step."""
        if self._pending and self._pending.upload.done():
            return self.wait()
        return None

    def wait(self) -> dict[str, Any] | None:
        """Finish the background save, if any, and return its report."""
        if self._pending is None:
            return None
        self.wait_for_staging()
        pending, self._pending = self._pending, None
        staging_blocked_s, waited = pending.blocked_s, time.perf_counter()
        pending.upload.result()
        return _report(self.tier, pending.step, True, pending.started,
                       pending.blocked_s + time.perf_counter() - waited, staging_blocked_s)

    def close(self) -> None:
        if self._stager is not None:
            self._stager.close()


class _DiesAfterItsData(FileSystemWriter):
    """Fault injection (crash-in-save): this rank's data files are written, the metadata never is."""

    def write_data(self, plan, planner):
        written = super().write_data(plan, planner)
        written.wait()
        FaultInjector.crash()
        return written


class CheckpointManager(_Tier):
    def __init__(self, cfg: CheckpointConfig, world: World, faults: FaultInjector):
        self.root = Path(cfg.dir)
        self.keep = cfg.keep
        self.async_save = cfg.async_save
        self.world = world
        self.faults = faults
        # Background saves run their collectives on a gloo group of their own, so they never
        # queue behind (or block) the training collectives on the default group.
        self._group = dist.new_group(backend="gloo") if self.async_save else None
        super().__init__("durable", _stager(world) if self.async_save else None)
        if world.is_main:
            self.root.mkdir(parents=True, exist_ok=True)

    def step_dir(self, step: int) -> Path:
        return self.root / f"step-{step:08d}"

    def _folders(self) -> dict[int, bool]:
        """Every checkpoint folder's step, and whether it is complete (marked)."""
        return {int(p.name.removeprefix("step-")): (p / MARKER).is_file() for p in self.root.glob("step-*")}

    def complete_steps(self) -> list[int]:
        return sorted(step for step, complete in self._folders().items() if complete)

    def latest(self) -> int | None:
        """The newest complete checkpoint's step, as rank 0 sees it (every rank gets the same answer)."""
        steps = self.complete_steps() if self.world.is_main else None
        steps = broadcast_object(steps)
        return steps[-1] if steps else None

    def save(self, step: int, state: dict[str, Any]) -> dict[str, Any] | None:
        """Save `state` as the checkpoint of `step`. Returns the save's report once it is complete
        (at once for a synchronous save; a background save reports from `poll` or `wait`)."""
        started = time.perf_counter()
        report = self.wait()  # one save at a time: the previous one is finished and marked first
        path = self.step_dir(step)
        writer = _DiesAfterItsData(path) if self.faults.crash_in_save_due(step) else None
        if not self.async_save:
            dcp.save(state, checkpoint_id=path, storage_writer=writer)
            self._mark_complete(step)
            blocked = time.perf_counter() - started
            return _report("durable", step, False, started, blocked, blocked)
        response = dcp.async_save(state, checkpoint_id=path, process_group=self._group, async_stager=self._stager,
                                  storage_writer=writer)
        self._track(step, started, response)
        return report

    def load(self, step: int, state: dict[str, Any]) -> None:
        """Fill `state` in place from the checkpoint of `step` (only the keys `state` holds)."""
        dcp.load(state, checkpoint_id=self.step_dir(step))

    def _mark_complete(self, step: int) -> None:
        # DCP's save returns on every rank only after the coordinator has written the metadata,
        # which it does after gathering every rank's write results: the checkpoint is whole.
        if self.world.is_main:
            marker = self.step_dir(step) / MARKER
            tmp = marker.with_suffix(".tmp")
            tmp.write_text(f"{step}\n")
            os.replace(tmp, marker)
            self._prune(newest=step)

    def _prune(self, newest: int) -> None:
        folders = self._folders()
        complete = sorted(step for step, done in folders.items() if done)
        doomed = set(complete[:-self.keep])
        # Folders without a marker older than the newest complete one are debris of a crash.
        doomed |= {step for step, done in folders.items() if not done and step < newest}
        for step in sorted(doomed):
            # The marker goes first: a crash halfway through leaves an invisible folder, never
            # a marked one with files missing.
            (self.step_dir(step) / MARKER).unlink(missing_ok=True)
            shutil.rmtree(self.step_dir(step), ignore_errors=True)


class LocalCheckpoints(_Tier):
    """The fast tier: `<local_dir>/world-<N>/rank-<R>/step-<S>/`, one DCP checkpoint per rank, saved
    by that rank alone (`no_dist`: replicated tensors are written by every rank, so each folder is
    whole by itself) and in the background: the training thread waits only for the copy of the state.
    A folder counts once its own COMPLETE marker exists; a step can be resumed only when every rank
    finds its folder of that step complete, which `common_steps` decides."""

    def __init__(self, local_dir: str, world: World, keep: int):
        # The world size in the path: a shard saved at another world size is never taken for one.
        self.root = Path(local_dir) / f"world-{world.world_size}" / f"rank-{world.rank:05d}"
        self.root.mkdir(parents=True, exist_ok=True)
        self.keep = keep
        super().__init__("local", _stager(world))

    def step_dir(self, step: int) -> Path:
        return self.root / f"step-{step:08d}"

    def complete_steps(self) -> list[int]:
        return sorted(int(p.parent.name.removeprefix("step-")) for p in self.root.glob(f"step-*/{MARKER}"))

    def common_steps(self) -> list[int]:
        """Steps whose local checkpoint is complete on every rank (a collective)."""
        per_rank = [set(steps) for steps in all_gather_object(self.complete_steps())]
        return sorted(set.intersection(*per_rank))

    def save(self, step: int, state: dict[str, Any]) -> dict[str, Any] | None:
        """Start saving `state` as this rank's checkpoint of `step`; returns the previous save's report."""
        started = time.perf_counter()
        report = self.wait()  # one save at a time
        # No fsync: the tier is for restarts of processes, whose writes the page cache keeps; a node
        # that goes down takes its emptyDir with it anyway. One file and one thread: small writes.
        writer = FileSystemWriter(self.step_dir(step), sync_files=False, single_file_per_rank=True, thread_count=1)
        response = dcp.async_save(state, storage_writer=writer, no_dist=True, async_stager=self._stager)
        self._track(step, started, response)
        return report

    def _mark_complete(self, step: int) -> None:
        (self.step_dir(step) / MARKER).write_text(f"{step}\n")
        for old in self.complete_steps()[:-self.keep]:
            self.discard(old)

    def load(self, step: int, state: dict[str, Any]) -> None:
        dcp.load(state, checkpoint_id=self.step_dir(step), no_dist=True)

    def discard(self, step: int) -> None:
        (self.step_dir(step) / MARKER).unlink(missing_ok=True)  # marker first, as in the durable tier
        shutil.rmtree(self.step_dir(step), ignore_errors=True)

    def discard_after(self, step: int) -> None:
        """A rollback to `step` starts a new history: later local checkpoints belong to the old one."""
        for later in self.complete_steps():
            if later > step:
                self.discard(later)
