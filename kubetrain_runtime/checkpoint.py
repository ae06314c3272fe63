"""Checkpoints in two tiers, each complete and verified or never used, and never too many.

The durable tier (`CheckpointManager`) is one DCP checkpoint of the job on the shared volume; the
fast tier (`LocalCheckpoints`) is each rank's own state on node-local storage, saved without a
collective and in the background, so it is cheap enough to save often and survives a restart of the
ranks on the same node (an emptyDir outlives its containers, not its pod). Both tiers hold the
training thread only while the state is copied (staging, itself in the background for GPU and large
states); the writes and the marker follow on a thread of the tier's own.

Durable layout: `<dir>/step-00000020/` holds one DCP checkpoint (a file per rank plus `.metadata`)
and its `COMPLETE` marker. Each rank takes the size and CRC-32 of every file it writes from the bytes
as they go out; DCP's coordinator gathers them with the write results, writes the metadata, and then
the marker: JSON with the step and every file's size and checksum, the metadata's included. DCP's
save returns on every rank only after that, so a save is complete (marked, durably) before `wait`
returns, and a crash mid-save leaves an unmarked folder that is never loaded. A marked checkpoint is
still verified before it is loaded (`verify`): a truncated, missing or damaged file, or a damaged
marker, makes resume fall back to the next newest checkpoint that verifies, on either tier.
Old checkpoints are pruned only after a newer one is complete, and never the newest one that was
verified by reading it back (the one this run resumed from).
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import time
import warnings
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter
from torch.distributed.checkpoint.filesystem import FileSystem
from torch.distributed.checkpoint.metadata import MetadataIndex
from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions
from torch.distributed.checkpoint.storage import WriteResult
from torch.distributed.tensor import DTensor
from torch.futures import Future as TorchFuture

from kubetrain_runtime.distributed import World, all_gather_object, broadcast_object
from kubetrain_runtime.failures import EXIT_STORAGE, PermanentFailure
from kubetrain_runtime.faults import FaultInjector
from kubetrain_runtime.problems import Problem
from kubetrain_runtime.runtime_config import CheckpointConfig

MARKER = "COMPLETE"
METADATA = ".metadata"  # DCP's
_STEP_FOLDER = re.compile(r"^step-(\d{8})$")
_CHUNK = 8 << 20  # bytes read at a time when a file is verified
# The fast tier saves and loads with `no_dist` on purpose (each rank alone). DCP warns about that from
# whichever thread does the work, so the filter is the process's, set once.
warnings.filterwarnings("ignore", message="torch.distributed is disabled")
# Storage that cannot take a checkpoint until someone acts: a full disk or quota, a read-only or missing
# volume, no permission. Retrying would redo the steps since the last checkpoint and fail the same way.
_STORAGE_ERRORS = {errno.ENOSPC: "no space left on the volume", errno.EDQUOT: "the volume's quota is used up",
                   errno.EROFS: "the volume is read-only", errno.EACCES: "no permission to write",
                   errno.EPERM: "no permission to write", errno.ENOENT: "the folder is gone (volume missing?)",
                   errno.ENOTDIR: "a file stands where a folder should be"}
STORAGE_CODE = "KT209"


@dataclass
class _PendingSave:
    step: int
    started: float
    staging: Future
    upload: Future
    blocked_s: float  # time the training thread has spent on this save so far
    staged: bool = False


class _BackgroundSaver:
    """A tier's background saves: the state is staged (copied into buffers this saver keeps from one save to the
    next, so that a save copies into memory already faulted in), then written by DCP on a thread of its own.
    A CPU state of plain tensors is copied by this saver into those buffers: a small one (below
    STAGE_IN_PLACE_BYTES) on the training thread, in a few hundred microseconds, a large one on a staging thread
    of its own while the next step's forward and backward run (they only read the weights). DCP's stager, whose
    generic deep copy holds the interpreter lock for longer and whose hand-over costs milliseconds, stages GPU and
    DTensor states, with pinned memory on a GPU. (bench/checkpoint.py, a 1.8 GiB CPU state: the training thread
    waited 0.03-0.2 s for DCP's stager, 0.007 s for this copy.)"""

    def __init__(self, world: World, tier: str):
        self.on_gpu = world.device_type == "cuda"
        self.writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"kubetrain-{tier}-save")
        # Who copies the state: "training thread", "staging thread" (both into self.buffers) or "stager" (DCP's);
        # decided at the first save, from the state's size and kind.
        self.copied_by: str | None = None
        self.staging = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"kubetrain-{tier}-stage")
        self.buffers: dict[tuple, torch.Tensor] = {}  # this saver's own copies: by the tensor's path in the state
        self.stager: DefaultStager | None = None
        self.sources: list[torch.UntypedStorage] = []

    def start(self, state: dict[str, Any], **save_options: Any) -> tuple[Future, Future]:
        """Stage `state` and write it with `dcp.save(**save_options)`: (staging, upload) futures."""
        if self.copied_by is None:
            tensors = list(_tensors(state))
            if self.on_gpu or any(isinstance(t, DTensor) for t in tensors):
                self.copied_by = "stager"
            elif sum(t.numel() * t.element_size() for t in tensors) <= STAGE_IN_PLACE_BYTES:
                self.copied_by = "training thread"
            else:
                self.copied_by = "staging thread"
        if self.copied_by == "training thread":
            staged = _completed(self._copy_state(state))
            staging = _completed(None)
        elif self.copied_by == "staging thread":
            staging = staged = self.staging.submit(self._copy_state, state)
        else:
            staging = staged = self._stage_in_background(state)
        return staging, self.writer.submit(lambda: dcp.save(staged.result(), **save_options))

    def _copy_state(self, state: dict[str, Any]) -> dict[str, Any]:
        with torch.no_grad():
            return self._copy(state, ())

    def _copy(self, value: Any, path: tuple) -> Any:
        if isinstance(value, torch.Tensor):
            buffer = self.buffers.get(path)
            if buffer is None or buffer.shape != value.shape or buffer.dtype != value.dtype:
                buffer = self.buffers[path] = torch.empty(value.shape, dtype=value.dtype)
            return buffer.copy_(value)
        if isinstance(value, dict):
            return {key: self._copy(item, (*path, key)) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self._copy(item, (*path, index)) for index, item in enumerate(value))
        return value  # numbers, strings, bytes: immutable

    def _stage_in_background(self, state: dict[str, Any]) -> Future:
        if self.stager is None:
            self.stager = DefaultStager(StagingOptions(use_pinned_memory=self.on_gpu, use_shared_memory=False,
                                                       use_async_staging=True, use_non_blocking_copy=self.on_gpu))
        # The stager finds a storage's buffer by the storage's Python object, which lives only as long as
        # someone holds it: held here from one save to the next, every save copies into the buffers of the
        # one before instead of allocating (and faulting in) the whole state again.
        sources = [(t.to_local() if isinstance(t, DTensor) else t).untyped_storage() for t in _tensors(state)]
        staged = self.stager.stage(state)
        self.sources = sources
        return staged

    def close(self) -> None:
        self.writer.shutdown(wait=False)
        self.staging.shutdown(wait=False)
        if self.stager is not None:
            self.stager.close()


STAGE_IN_PLACE_BYTES = 64 << 20


def _completed(value: Any) -> Future:
    future: Future = Future()
    future.set_result(value)
    return future


def _tensors(state: Any) -> Iterator[torch.Tensor]:
    """The tensors of a state dict."""
    if isinstance(state, dict):
        for value in state.values():
            yield from _tensors(value)
    elif isinstance(state, (list, tuple)):
        for value in state:
            yield from _tensors(value)
    elif isinstance(state, torch.Tensor):
        yield state


def _report(tier: str, step: int, background: bool, started: float, blocked_s: float,
            staging_blocked_s: float) -> dict[str, Any]:
    """A save's record. `blocked_s`: all the time it held the training thread; `staging_blocked_s`: the part
    before any final wait for its writes, which is what a save costs while training goes on (interval: auto)."""
    return {"event": "checkpoint", "tier": tier, "step": step, "async": background, "blocked_s": blocked_s,
            "staging_blocked_s": staging_blocked_s, "complete_after_s": time.perf_counter() - started}


# -- checksums ----------------------------------------------------------------------------------------

class _ChecksummedStream:
    """A write stream that keeps the size and CRC-32 of what passes through it (zlib releases the GIL on
    large buffers), and the first error the file system gave: DCP's serializer may report a short write as
    a garbled position mismatch, while the errno (ENOSPC, say) is what tells a full disk from a fault."""

    def __init__(self, stream: Any, errors: list[OSError]):
        self.stream = stream
        self.errors = errors
        self.size = 0
        self.crc = 0

    def write(self, data: Any) -> int:
        try:
            written = self.stream.write(data)
        except OSError as exc:
            self.errors.append(exc)
            raise
        self.crc = zlib.crc32(data, self.crc)
        self.size += memoryview(data).nbytes
        return written

    def tell(self) -> int:
        return self.stream.tell()

    def fileno(self) -> int:
        return self.stream.fileno()

    def flush(self) -> None:
        self.stream.flush()

    def close(self) -> None:
        self.stream.close()


class _ChecksummingFileSystem(FileSystem):
    """DCP's local file system, with every file written through it checksummed: {name: (size, crc32)}."""

    def __init__(self) -> None:
        super().__init__()
        self.checksums: dict[str, tuple[int, int]] = {}
        self.errors: list[OSError] = []

    @contextmanager
    def create_stream(self, path: str | os.PathLike, mode: str) -> Iterator[Any]:
        try:
            with super().create_stream(path, mode) as stream:
                if "w" not in mode:
                    yield stream
                    return
                checksummed = _ChecksummedStream(stream, self.errors)
                yield checksummed
        except OSError as exc:  # opening, flushing or closing: a full disk often shows here first
            self.errors.append(exc)
            raise
        self.checksums[Path(path).name] = (checksummed.size, checksummed.crc)


def file_checksum(path: Path, buffer: bytearray | None = None) -> tuple[int, int]:
    """(size, CRC-32) of a file, read in chunks."""
    buffer = buffer or bytearray(_CHUNK)
    view, size, crc = memoryview(buffer), 0, 0
    with open(path, "rb", buffering=0) as file:
        while count := file.readinto(view):
            crc = zlib.crc32(view[:count], crc)
            size += count
    return size, crc


_CHECKSUM_KEY = "kubetrain/checksum/"  # write results of this prefix carry a file's checksum, not a tensor


class _VerifiedWriter(FileSystemWriter):
    """DCP's file-system writer for one save of `tier`: the coordinator empties a folder an earlier save
    left (unmarked first) before any rank writes, every rank's file checksums travel to the coordinator
    with its write results, and the coordinator marks the checkpoint complete right after the metadata."""

    def __init__(self, tier: _Tier, step: int, crash_after_data: bool = False, **options: Any):
        super().__init__(tier.step_dir(step), **options)
        self.fs = _ChecksummingFileSystem()
        self.tier = tier
        self.step = step
        self.crash_after_data = crash_after_data  # fault injection (crash-in-save): data written, no metadata
        self.is_coordinator = False

    def set_up_storage_writer(self, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        super().set_up_storage_writer(is_coordinator, *args, **kwargs)
        self.is_coordinator = is_coordinator

    def prepare_local_plan(self, plan: Any) -> Any:
        # DCP gathers every rank's plan before any rank writes: the coordinator's clearing comes first.
        if self.is_coordinator:
            self.tier.clear(self.step)
        return super().prepare_local_plan(plan)

    def write_data(self, plan: Any, planner: Any) -> TorchFuture:
        try:
            results = super().write_data(plan, planner).wait()
        except Exception as exc:
            if self.fs.errors:
                raise self.fs.errors[0] from exc
            raise
        if self.crash_after_data:
            FaultInjector.crash()
        checksums = [WriteResult(MetadataIndex(_CHECKSUM_KEY + name), size, crc)
                     for name, (size, crc) in self.fs.checksums.items()]
        future = TorchFuture()
        future.set_result(results + checksums)
        return future

    def finish(self, metadata: Any, results: list[list[WriteResult]]) -> None:
        files: dict[str, tuple[int, int]] = {}
        for rank_results in results:
            for result in rank_results:
                if result.index.fqn.startswith(_CHECKSUM_KEY):
                    files[result.index.fqn.removeprefix(_CHECKSUM_KEY)] = (result.size_in_bytes, result.storage_data)
        kept = [[r for r in rank_results if not r.index.fqn.startswith(_CHECKSUM_KEY)] for rank_results in results]
        try:
            super().finish(metadata, kept)
        except OSError as exc:
            self.fs.errors.append(exc)
            raise
        files[METADATA] = file_checksum(Path(self.path) / METADATA)
        self.tier.mark(self.step, files)


# -- the tiers ----------------------------------------------------------------------------------------

class _Tier:
    """What both tiers share: their folders, markers and verification, pruning, and at most one background
    save in flight. Its staging (the copy of the state) must finish before the weights change, its upload
    (the writes, then the marker) whenever it does."""

    def __init__(self, tier: str, root: Path, keep: int, durable: bool, owner: bool, saver: _BackgroundSaver | None):
        self.tier = tier
        self.root = root
        self.keep = keep
        self.durable = durable  # fsync markers and folders: a node crash must not lose a marker, or keep a stale one
        self.owner = owner  # this process removes folders (one rank per shared folder)
        self._saver = saver
        self._pending: _PendingSave | None = None
        self.verified: int | None = None  # the newest step read back and verified (resumed from): never pruned

    def step_dir(self, step: int) -> Path:
        return self.root / f"step-{step:08d}"

    def _folders(self) -> dict[int, bool]:
        """Every checkpoint folder's step, and whether it is marked complete."""
        found = {}
        for path in self.root.glob("step-*"):
            match = _STEP_FOLDER.match(path.name)
            if match:
                found[int(match.group(1))] = (path / MARKER).is_file()
        return found

    def marked_steps(self) -> list[int]:
        return sorted(step for step, marked in self._folders().items() if marked)

    # Writing and removing, in the order that keeps a marked folder whole: the marker goes last in and first out.

    def mark(self, step: int, files: dict[str, tuple[int, int]]) -> None:
        """The checkpoint of `step` is whole: write its marker, with every file's size and CRC-32, then prune."""
        folder = self.step_dir(step)
        tmp = folder / f"{MARKER}.tmp"
        with open(tmp, "w") as marker:
            json.dump({"step": step, "files": {name: list(files[name]) for name in sorted(files)}}, marker)
            if self.durable:
                marker.flush()
                os.fsync(marker.fileno())
        os.replace(tmp, folder / MARKER)
        self._sync(folder)
        self.prune(newest=step)

    def clear(self, step: int) -> None:
        """Empty the folder of `step` before a save writes into it (a rollback replays steps): unmarked first,
        so that a crash halfway never leaves a marker over files of two saves."""
        folder = self.step_dir(step)
        if folder.exists():
            self.discard(step)

    def discard(self, step: int) -> None:
        folder = self.step_dir(step)
        try:
            (folder / MARKER).unlink()
            self._sync(folder)
        except FileNotFoundError:
            pass
        shutil.rmtree(folder, ignore_errors=True)

    def discard_after(self, step: int) -> None:
        """A load of `step` starts a new history: later folders (unmarked, or marked but failing verification,
        or saved before a rollback) belong to the history it leaves."""
        if not self.owner:
            return
        for later in sorted(self._folders()):
            if later > step:
                self.discard(later)

    def prune(self, newest: int) -> None:
        folders = self._folders()
        marked = sorted(step for step, done in folders.items() if done)
        doomed = set(marked[:-self.keep]) - {self.verified}
        # Unmarked folders older than the newest complete one are debris of a crash.
        doomed |= {step for step, done in folders.items() if not done and step < newest}
        for step in sorted(doomed):
            self.discard(step)

    def _sync(self, folder: Path) -> None:
        if self.durable:
            fd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    # Verification.

    def verify(self, step: int, share: int = 0, shares: int = 1) -> str | None:
        """Why the checkpoint of `step` cannot be trusted, or None. Every file's size is checked; the checksums
        of every `shares`-th file from the `share`-th, so that ranks split the reading."""
        folder = self.step_dir(step)
        try:
            marker = json.loads((folder / MARKER).read_text())
            files = {name: (int(size), int(crc)) for name, (size, crc) in marker["files"].items()}
            if marker["step"] != step or METADATA not in files:
                raise ValueError(marker)
        except FileNotFoundError:
            return "its COMPLETE marker is gone"
        except (ValueError, KeyError, TypeError, AttributeError):
            return "its COMPLETE marker is damaged or lists no checksums"
        buffer = bytearray(_CHUNK)
        for index, name in enumerate(sorted(files)):
            size, crc = files[name]
            try:
                actual = (folder / name).stat().st_size
            except FileNotFoundError:
                return f"{name} is missing"
            if actual != size:
                return f"{name} is {actual} bytes, {size} when it was written (truncated or overwritten)"
            if index % shares == share and file_checksum(folder / name, buffer)[1] != crc:
                return f"{name} does not match its checksum (corrupted)"
        return None

    def keys(self, step: int) -> set[str]:
        """The top-level keys of the checkpoint of `step` (from its metadata)."""
        metadata = FileSystemReader(self.step_dir(step)).read_metadata()
        return {key.split(".", 1)[0] for key in metadata.state_dict_metadata}

    # The background save.

    def _save_in_background(self, step: int, started: float, state: dict[str, Any], **save_options: Any) -> None:
        """Start the background save of `state` as the checkpoint of `step`, begun at `started`."""
        staging, upload = self._saver.start(state, **save_options)
        self._pending = _PendingSave(step, started, staging, upload, blocked_s=time.perf_counter() - started)

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
        """Finish the background save, if any, and return its report. The save is marked complete by then."""
        if self._pending is None:
            return None
        self.wait_for_staging()
        pending, self._pending = self._pending, None
        staging_blocked_s, waited = pending.blocked_s, time.perf_counter()
        with self.storage_errors(pending.step):
            pending.upload.result()
        return _report(self.tier, pending.step, True, pending.started,
                       pending.blocked_s + time.perf_counter() - waited, staging_blocked_s)

    def abandon(self) -> None:
        """Forget a background save without waiting for it (the process is about to exit)."""
        self._pending = None

    @contextmanager
    def storage_errors(self, step: int) -> Iterator[None]:
        """Turn a save's failure for want of usable storage into a PermanentFailure (KT209); other failures
        (a lost peer, say) pass through to be retried."""
        try:
            yield
        except BaseException as exc:  # DCP's CheckpointException is a BaseException
            cause = storage_error(exc)
            if cause is None:
                raise
            if self.owner:
                self.discard(step)  # the partial save only takes space
            raise self.storage_failure(cause, f"while saving step {step}") from None

    def storage_failure(self, cause: OSError, when: str) -> PermanentFailure:
        field = "checkpoint.dir" if self.durable else "checkpoint.local_dir"
        reason = _STORAGE_ERRORS.get(cause.errno, cause.strerror or str(cause))
        return PermanentFailure(EXIT_STORAGE, str(self.root), Problem(
            STORAGE_CODE, field, f"cannot write checkpoints {when}: {reason} ({cause.strerror or cause})",
            "free space or grow the volume (or lower checkpoint.keep), mount it read-write and writable by the "
            "pod's user; the run then resumes from its newest checkpoint"))

    def check_writable(self) -> None:
        """Create the tier's folder and write (and sync, on the durable tier) and remove a small file in it:
        storage that cannot take a checkpoint fails the run now, in one line, not at the first save."""
        probe = self.root / f".kubetrain-probe-{os.getpid()}"
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            with open(probe, "wb") as file:
                file.write(b"\0" * 4096)
                if self.durable:
                    file.flush()
                    os.fsync(file.fileno())
            probe.unlink()
        except OSError as exc:
            if exc.errno not in _STORAGE_ERRORS:
                raise
            raise self.storage_failure(exc, "at start") from None

    def close(self) -> None:
        if self._saver is not None:
            self._saver.close()


def storage_error(exc: BaseException) -> OSError | None:
    """The OSError of unusable storage behind `exc` (DCP wraps each rank's in a CheckpointException), if any."""
    seen: set[int] = set()
    stack = [exc]
    while stack:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _STORAGE_ERRORS:
            return current
        failures = getattr(current, "failures", None)
        if isinstance(failures, dict):
            stack.extend(failure[0] if isinstance(failure, tuple) else failure for failure in failures.values())
        stack.extend((current.__cause__, current.__context__))
    return None


class CheckpointManager(_Tier):
    def __init__(self, cfg: CheckpointConfig, world: World, faults: FaultInjector):
        self.async_save = cfg.async_save
        self.world = world
        self.faults = faults
        # Background saves run their collectives on a gloo group of their own, so they never
        # queue behind (or block) the training collectives on the default group.
        self._group = dist.new_group(backend="gloo") if self.async_save else None
        super().__init__("durable", Path(cfg.dir), cfg.keep, durable=True, owner=world.is_main,
                         saver=_BackgroundSaver(world, "durable") if self.async_save else None)
        if world.is_main:
            self.check_writable()

    def release_group(self) -> None:
        """Destroy the background saves' process group (no save in flight: after `wait`), while the interpreter is
        whole: a gloo group torn down during its finalization can abort the process."""
        if self._group is not None:
            dist.destroy_process_group(self._group)
            self._group = None

    def save(self, step: int, state: Callable[[], dict[str, Any]]) -> dict[str, Any] | None:
        """Save `state()` as the checkpoint of `step` (a callable: taking the state dict is part of a save's
        cost). Returns the save's report once it is complete (at once for a synchronous save; a background
        save reports from `poll` or `wait`)."""
        started = time.perf_counter()
        report = self.wait()  # one save at a time: the previous one is finished and marked first
        writer = _VerifiedWriter(self, step, crash_after_data=self.faults.crash_in_save_due(step))
        if not self.async_save:
            with self.storage_errors(step):
                dcp.save(state(), storage_writer=writer)
            blocked = time.perf_counter() - started
            return _report("durable", step, False, started, blocked, blocked)
        self._save_in_background(step, started, state(), storage_writer=writer, process_group=self._group)
        return report

    def load(self, step: int, state: dict[str, Any]) -> None:
        """Fill `state` in place from the checkpoint of `step` (only the keys `state` holds)."""
        dcp.load(state, checkpoint_id=self.step_dir(step))

    def candidates(self) -> list[int]:
        """The marked steps, newest first, as rank 0 sees them (every rank gets the same list)."""
        steps = self.marked_steps() if self.world.is_main else None
        return sorted(broadcast_object(steps), reverse=True)

    def verify_everywhere(self, step: int) -> str | None:
        """Verify the checkpoint of `step`, each rank reading its share of the files (a collective)."""
        reasons = all_gather_object(self.verify(step, self.world.rank, self.world.world_size))
        return next((reason for reason in reasons if reason), None)


class LocalCheckpoints(_Tier):
    """The fast tier: `<local_dir>/world-<N>/rank-<R>/step-<S>/`, one DCP checkpoint per rank, saved
    by that rank alone (`no_dist`: replicated tensors are written by every rank, so each folder is
    whole by itself) and in the background: the training thread waits only for the copy of the state.
    A folder counts once its own marker exists; a step can be resumed only when every rank finds its
    folder of that step marked and verified, which `candidates` and `verify_everywhere` decide."""

    def __init__(self, local_dir: str, world: World, keep: int):
        # The world size in the path: a shard saved at another world size is never taken for one.
        root = Path(local_dir) / f"world-{world.world_size}" / f"rank-{world.rank:05d}"
        # No fsync: the tier is for restarts of processes, whose writes the page cache keeps; a node
        # that goes down takes its emptyDir with it anyway.
        super().__init__("local", root, keep, durable=False, owner=True, saver=_BackgroundSaver(world, "local"))
        self.check_writable()

    def save(self, step: int, state: Callable[[], dict[str, Any]]) -> dict[str, Any] | None:
        """Start saving `state()` as this rank's checkpoint of `step`; returns the previous save's report."""
        started = time.perf_counter()
        report = self.wait()  # one save at a time
        # One file and one thread: small writes.
        writer = _VerifiedWriter(self, step, sync_files=False, single_file_per_rank=True, thread_count=1)
        self._save_in_background(step, started, state(), storage_writer=writer, no_dist=True)
        return report

    def load(self, step: int, state: dict[str, Any]) -> None:
        dcp.load(state, checkpoint_id=self.step_dir(step), no_dist=True)

    def candidates(self) -> list[int]:
        """Steps marked on every rank, newest first (a collective)."""
        per_rank = [set(steps) for steps in all_gather_object(self.marked_steps())]
        return sorted(set.intersection(*per_rank), reverse=True)

    def verify_everywhere(self, step: int) -> str | None:
        """Each rank verifies its own folder of `step` (a collective)."""
        reasons = all_gather_object(self.verify(step))
        return next((f"rank {rank}'s copy: {reason}" for rank, reason in enumerate(reasons) if reason), None)
