"""A training run's guarantees around any loop: `Run` is handed what must survive and the loop's steps go through it.

    run = Run(model, optimizer, scheduler=scheduler, max_steps=5000, checkpoint_dir="/checkpoints/gpt")
    for step in run.steps():          # or: for batch in run.batches(loader):
        loss = model(*get_batch()).loss
        loss.backward()
        optimizer.step()              # skipped, for every rank, when the gradients are not finite
        optimizer.zero_grad()
        run.log(loss=loss)            # optional: the step records' loss

What it gives the loop, with nothing else written by the user:
- resume: on start, the newest checkpoint that verifies (either tier) is loaded: model and optimizer (DCP, so a
  DDP, FSDP2 or plain module, at any world size), the scheduler and the extra `state`, every rank's RNG streams
  (torch, CUDA, numpy, random) and the data position (a stateful `data`, or `batches`' epoch and batch), the batch
  in hand of a loop that fetches a step ahead (`run.batch`), and the step. A resumed run is bit-identical to one
  that was never interrupted (random draws between `Run(...)` and the first step that nothing handed over are the
  exception, and are reported at the first save).
- checkpoints in two tiers (kubetrain_runtime/checkpoint.py) at the config's interval, or at Daly's interval from the
  measured save cost and the MTBF (`interval: auto`), saved in the background, verified before any load;
- a stop signal (SIGTERM, SIGINT): the ranks agree on a step, save it, and the process exits 128 + the signal within
  torchrun's shutdown timeout (kubetrain_runtime/preemption.py);
- non-finite gradients: the optimizer's step is skipped on every rank; a streak of them rolls back to the newest
  checkpoint and skips past the batches that caused it; a run that keeps diverging fails for good (exit 4);
- a hang ends the process with every thread's stack (kubetrain_runtime/watchdog.py); unusable checkpoint storage
  fails for good (exit 3): the exit codes the targets' failure policies read (kubetrain_runtime/failures.py);
- records of steps, checkpoints, rollbacks and resumes: rank 0's JSON lines, Prometheus, TensorBoard, MLflow, and the
  TrainJob's status.trainerStatus (progress, ETA, metrics), with ETTR and, given the FLOPs per step, MFU;
- on request (`profile=ProfilingConfig(enabled=True, ...)`, or the config's `profiling`), the PyTorch profiler over a
  window of steps, its traces where TensorBoard reads them (kubetrain_runtime/profiling.py).

Configuration: the arguments, else a loop of one's own's defaults (`./checkpoints`, `interval: auto`, background
saves, a metrics port only in a kubetrain job) with the launcher's environment on top (`KUBETRAIN_RUNTIME_CONFIG`: a
YAML file of `RuntimeConfig`, layered field by field; `KUBETRAIN_CHECKPOINT_DIR`: the job's checkpoint folder). Under
plain torchrun, or alone, it works the same (kubetrain_runtime/distributed.py scopes torchrun's shared store).
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import os
import pickle
import random
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.tensor import DTensor

from kubetrain_runtime import failures, warm
from kubetrain_runtime.checkpoint import CheckpointManager, LocalCheckpoints
from kubetrain_runtime.distributed import (
    World,
    all_gather_object,
    all_reduce_mean,
    broadcast_object,
    init_world,
    shutdown,
)
from kubetrain_runtime.dumps import Dumps, own_run, use_run
from kubetrain_runtime.ettr import EttrClock, daly_interval_s, record_clean_end, record_start
from kubetrain_runtime.failures import EXIT_DIVERGED, PermanentFailure
from kubetrain_runtime.faults import FaultInjector
from kubetrain_runtime.interpreter_exit import freeze_at_exit
from kubetrain_runtime.metrics import device_name, peak_flops
from kubetrain_runtime.preemption import StopRequest
from kubetrain_runtime.problems import ConfigError, Problem
from kubetrain_runtime.runtime_config import (
    CHECKPOINT_DIR_ENV,
    JOB_ENV,
    RUNTIME_CONFIG_ENV,
    MetricsConfig,
    ProfilingConfig,
    RuntimeConfig,
    own_loop_config,
    profile_dir,
)
from kubetrain_runtime.telemetry import Telemetry, announce_failure, job_name
from kubetrain_runtime.watchdog import Watchdog

if TYPE_CHECKING:
    from kubetrain_runtime.profiling import StepProfiler

# With interval "auto": saves every AUTO_FIRST_CHECKPOINT steps until AUTO_MEASURED_SAVE, whose cost decides
# the intervals. The first save pays one-time setup (staging buffers, writer threads), so it is not measured.
AUTO_FIRST_CHECKPOINT = 5
AUTO_MEASURED_SAVE = 2
DIVERGED_CODE = "KT210"

Tier = CheckpointManager | LocalCheckpoints


def resolve_config(config: RuntimeConfig | None, checkpoint_dir: str | os.PathLike | None) -> RuntimeConfig:
    """The run's configuration: `config`, else a loop of the user's own's defaults with the file the launcher names
    (`KUBETRAIN_RUNTIME_CONFIG`) on top; `checkpoint_dir` (else the launcher's) replaces its folder. A file that
    cannot be used raises a ConfigError."""
    if config is None:
        config = own_loop_config(os.environ.get(RUNTIME_CONFIG_ENV), in_job=bool(os.environ.get(JOB_ENV)))
    folder = checkpoint_dir if checkpoint_dir is not None else os.environ.get(CHECKPOINT_DIR_ENV)
    if folder is not None:
        config = config.model_copy(update={"checkpoint": config.checkpoint.model_copy(update={"dir": str(folder)})})
    return config


def world_of(model: torch.nn.Module, collective_timeout_s: float, dumps: Dumps) -> World:
    """This process's place in the job: the process group the script made, or one this call makes (alone: a group of
    one); the device is the model's."""
    if not dist.is_initialized():
        init_world(collective_timeout_s, dumps)
        # The group is the runtime's: destroyed at the interpreter's exit, while it is whole (the script may use it
        # until then).
        atexit.register(shutdown)
    else:
        dumps.prepare(nccl=False)  # too late for the flight recorder's settings (the launcher's then hold)
    parameter = next(iter(model.parameters()), None)
    device = parameter.device if parameter is not None else torch.device("cpu")
    return World(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", 0)), device)


def _keep_last_lines() -> None:
    """stdout line-buffered, as a terminal's is: a rank's stdout is a pipe or a file (a container's log, a script's
    `| tee`), which Python buffers by blocks, and a rank killed by SIGKILL (kill -9, the OOM killer) would lose the
    loop's last lines, the ones that say what it was doing (stderr is line-buffered already)."""
    if hasattr(sys.stdout, "reconfigure") and not getattr(sys.stdout, "line_buffering", True):
        sys.stdout.reconfigure(line_buffering=True)


class Run:
    """What must survive, and the loop's steps: see the module's documentation.

    model, optimizer: the training state (any module: plain, DDP or FSDP2; any torch optimizer).
    scheduler: an LR scheduler (or anything with state_dict/load_state_dict), saved and restored.
    data: a data loader or sampler with state_dict/load_state_dict (a StatefulDataLoader, say), restored exactly;
        or the loader `batches()` iterates when given none.
    state: more to keep, by name: objects with state_dict/load_state_dict, or dicts (updated in place on resume).
    max_steps: optimizer steps in all (`batches(loader, epochs=N)` can derive it).
    checkpoint_dir, config: see `resolve_config`.
    tokens_per_step, flops_per_step: for tokens/s and MFU in the step records (global: the whole job's step).
    params: what MLflow records as the run's parameters.
    profile: the PyTorch profiler's window, activities and ranks (else the config's `profiling`: off by default).
    world, stop, owns_process, startup, on_reshard, on_finish: for an entry point that sets the process up itself
        (kubetrain's trainer): the process group, the stop signals it installed, whether the runtime may end the
        process, when the process's start was done (reported on resume), the data position at another world size,
        and what to do once max_steps is reached, before the `finished` record (an export of the weights).
    """

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, *, scheduler: Any = None,
                 data: Any = None, state: dict[str, Any] | None = None, max_steps: int | None = None,
                 checkpoint_dir: str | os.PathLike | None = None, config: RuntimeConfig | None = None,
                 tokens_per_step: int | None = None, flops_per_step: float | None = None,
                 params: dict[str, Any] | None = None, profile: ProfilingConfig | None = None,
                 world: World | None = None, stop: StopRequest | None = None,
                 owns_process: bool = True, startup: dict[str, float] | None = None,
                 on_reshard: Callable[[int], None] | None = None, on_finish: Callable[[], None] | None = None):
        try:
            self.config = config = resolve_config(config, checkpoint_dir)
        except ConfigError as error:
            if not owns_process:
                raise
            # A bad runtime config: no retry fixes it (exit 2, which the targets' failure policies do not retry).
            # The failed-run alert hears of it on the default metrics port (the config's own cannot be read).
            code = failures.bad_input(error.lines())
            announce_failure(MetricsConfig(), failures.REASONS[code])
            sys.stderr.flush()
            os._exit(code)
        if profile is not None:
            self.config = config = config.model_copy(update={"profiling": profile})
        self.model, self.optimizer, self.scheduler, self.data = model, optimizer, scheduler, data
        self.extra = state or {}
        self.max_steps = max_steps
        self.tokens_per_step, self.flops_per_step, self.params = tokens_per_step, flops_per_step, params
        self.on_reshard = on_reshard  # the data position at another world size, where `data` cannot say it
        self.on_finish = on_finish
        # Where a hang's stacks, the flight recorder and a failure note land (kubetrain_runtime/dumps.py).
        self.dumps = Dumps(Path(config.checkpoint.dir), os.environ.get(JOB_ENV, "local"),
                           world.rank if world else int(os.environ.get("RANK", 0)))
        self.world = world = world or world_of(model, config.resilience.collective_timeout_s, self.dumps)
        freeze_at_exit()  # this process imported torch: its exit skips the collector's passes (interpreter_exit.py)
        # A script of the user's own is this process: the runtime installs the stop signals and ends the process on
        # a stop or a failure for good. kubetrain's trainer passes the stop its entry point installed (or none: not
        # watched), and its entry point ends the process.
        self.owns_process = owns_process
        if owns_process:
            _keep_last_lines()
        if owns_process and stop is None and threading.current_thread() is threading.main_thread():
            stop = StopRequest(world.rank).install()
        self.stop = stop
        self.startup = startup or {}
        self.faults = FaultInjector.from_env(world.rank)
        self.checkpoints = CheckpointManager(config.checkpoint, world, self.faults)
        self.local = (LocalCheckpoints(config.checkpoint.local_dir, world, config.checkpoint.keep)
                      if config.checkpoint.local_dir else None)
        self.tiers: list[Tier] = [self.checkpoints, *([self.local] if self.local else [])]
        self.peak_flops = peak_flops(world.device)
        self.choosing_interval = config.checkpoint.interval == "auto"
        self.auto_saves = 0
        self.interval = AUTO_FIRST_CHECKPOINT if self.choosing_interval else config.checkpoint.interval
        self.local_interval = config.checkpoint.local_interval or self.interval
        # Rank 0's record of the job's starts, and its <attempt>/restart-<N>, under which every rank (in whatever pod)
        # writes its hang dumps: one folder per hang for fr_trace (kubetrain_runtime/dumps.py).
        self.job, hangs_run = broadcast_object((record_start(self.checkpoints.root), own_run()) if world.is_main
                                               else None)
        use_run(hangs_run)
        self.ettr = EttrClock(self.job["first_start"], self.job["paused_s"])
        self.watchdog = Watchdog(config.resilience.watchdog_floor_s, config.resilience.watchdog_factor, world.rank,
                                 self.dumps, config.resilience.collective_timeout_s)
        self.telemetry: Telemetry | None = None  # started with the loop, once max_steps is known
        self.profiler: StepProfiler | None = None  # only when profiling is on: an unprofiled step checks this, no more
        # Counted on the device, so that a skipped step costs no host sync; read at log steps.
        self.bad_streak = torch.zeros((), device=world.device)
        self.worst_streak = torch.zeros((), device=world.device)  # since the last log step
        self.skipped = torch.zeros((), device=world.device)
        self.rollbacks = 0
        self.step = 0
        self._first_step = 1
        self.durable_step: int | None = None  # the step of the newest durable save, made or loaded
        self.longest_save_s = 0.0
        self.last: dict[str, Any] | None = None  # the last step record
        self.ended: dict[str, Any] | None = None  # the `finished` or `stopped` record
        self.logged: dict[str, Any] = {}  # what `log` was given this step
        self.epoch, self.batch_in_epoch = 0, 0  # `batches`' position
        self._batches: Iterator[Any] | None = None
        self._epoch_steps: Iterator[int] | None = None  # the steps, inside `epochs()`
        self._epoch_rng: dict[str, Any] | None = None
        self._resume_batches: dict[str, Any] | None = None
        # `batch`: the batch in hand (a loop that fetches ahead), kept with each checkpoint; the one a resume found.
        self._in_hand: tuple[Any, ...] | None = None
        self._kept_batch: tuple[Any, ...] | None = None
        self._stepping = False  # a step was handed to the loop in this process
        # Random draws between here and the first step are what no resume replays (a batch fetched ahead).
        self._rng_at_start = self._rng_fingerprint()
        self._unkept_draws = False
        self._guard_optimizer()
        if stop is not None:
            stop.join(world.world_size)
            # After a stop signal, no step for this long means a peer is gone: a step, or a save, takes less.
            stop.stall_s = lambda: max(5.0, 3 * self.watchdog.median_step_s(), 2 * self.longest_save_s)
            stop.step_s = self.watchdog.median_step_s
        if startup is None:  # when parts of the process's start were done, reported on resume (recovery's anatomy)
            client = os.environ.get(warm.STARTED_ENV)  # torchrun's process for a warm rank (kubetrain_runtime/warm.py)
            self.startup = {**({"client": float(client)} if client else {}), "runtime": time.time()}

    # -- the loop ---------------------------------------------------------------------------------------------

    def steps(self, stop_after_step: int | None = None) -> Iterator[int]:
        """The steps still to run, from the one after the checkpoint resumed (1 on a fresh start) to max_steps
        (`stop_after_step`: end there as if interrupted, for drills; the schedule still runs to max_steps).

        After a stop signal the ranks save the step they agreed on; then a script of the user's own exits 128 + the
        signal at once (the code every target restarts), and the iteration ends for kubetrain's trainer."""
        if self.max_steps is None:
            raise ValueError("Run needs max_steps (or batches(loader, epochs=N)) to know where the run ends")
        if self.telemetry is None:
            self._guarded(self.begin)
        while self.step < self.max_steps and (stop_after_step is None or self.step < stop_after_step):
            if self.stop is not None and self.stop.agreed_now():
                self._guarded(self.stopped)
                if self.owns_process:
                    self.close()
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(failures.stopped_exit(self.stop.signum or failures.STOP_SIGNALS[0]))
                return
            self.step += 1
            started = time.perf_counter()
            self.faults.before_step(self.step)
            if not self._stepping:
                self._first_step_begins()
            try:
                yield self.step
            except GeneratorExit:
                # The loop left before max_steps (its own `break`: an eval-only run, a time limit): this step is
                # not done; the saves in flight complete and the runtime's threads end with it.
                self.step -= 1
                if self.owns_process:
                    self.close()
                raise
            self._guarded(lambda: self.step_done(started))
        self._guarded(self.finish)
        if self.owns_process:
            self.close()

    __iter__ = steps

    def batches(self, loader: Iterable[Any] | None = None, epochs: int | None = None) -> Iterator[Any]:
        """One batch of `loader` (else `data`) per step. Inside `epochs()`: the epoch's batches. Alone: epoch after
        epoch until max_steps, or `epochs` epochs when max_steps was not given. Each epoch tells the loader's sampler
        its number (set_epoch). On resume the loader is fast-forwarded to the batch after the checkpoint's, with the
        RNG streams of the epoch's start: the skipped batches are read again, so a shuffle, the workers' seeds and
        random transforms replay exactly."""
        loader = self._loader_of(loader)
        if self.max_steps is None:
            if epochs is None:
                raise ValueError("give Run max_steps, or batches(loader, epochs=N)")
            self.max_steps = epochs * len(loader)  # type: ignore[arg-type]
        if self._epoch_steps is None:  # alone: the steps end the batches
            for _ in self.steps():
                self._fast_forward(loader)
                yield self._next_batch(loader)
            return
        self._fast_forward(loader)
        per_epoch = len(loader)  # type: ignore[arg-type]
        while self.batch_in_epoch < per_epoch and next(self._epoch_steps, None) is not None:
            yield self._next_batch(loader)

    def epochs(self, count: int | None = None, loader: Iterable[Any] | None = None) -> Iterator[int]:
        """The epochs still to run, for a loop that keeps its epoch loop (`for batch in run.batches(loader)` inside):
        from the epoch of the checkpoint resumed, until max_steps, or `count` epochs of `loader` (else `data`) when
        max_steps was not given."""
        if self.max_steps is None:
            if count is None:
                raise ValueError("give Run max_steps, or epochs(N)")
            self.max_steps = count * len(self._loader_of(loader))  # type: ignore[arg-type]
        self._guarded(self.begin)
        self._epoch_steps = steps = self.steps()
        if self._resume_batches is not None:
            self.epoch = self._resume_batches["epoch"]
        while self.step < self.max_steps and (count is None or self.epoch < count) and self.ended is None:
            yield self.epoch
            self.epoch += 1
            self._batches, self.batch_in_epoch = None, 0
        next(steps, None)  # max_steps reached: the run's end (the last checkpoint, the `finished` record)

    def _loader_of(self, loader: Iterable[Any] | None) -> Iterable[Any]:
        loader = self.data if loader is None else loader
        if loader is None:
            raise ValueError("give the loader: run.batches(loader), or Run(..., data=loader)")
        return loader

    def batch(self, *batch: Any) -> Any:
        """The batch in hand, for a loop that fetches each batch a step ahead (nanoGPT's `X, Y = get_batch('train')`
        before the loop and again inside each step): hand every fetched batch over, `X, Y =
        run.batch(*get_batch('train'))`, and each checkpoint keeps the one in hand with this rank's RNG streams.
        Called before the loop, it resumes the run there and then, and on a resumed run returns the batch the
        checkpoint kept instead of the one just fetched (a fresh start's); otherwise it returns what it was given:
        one value as it is, several as a tuple. Tensors are kept on the host and come back on their device."""
        if self.telemetry is None:
            self._guarded(self.begin)
        if self._kept_batch is not None and not self._stepping:
            batch, self._kept_batch = self._kept_batch, None
        self._in_hand = batch
        return batch[0] if len(batch) == 1 else batch

    def log(self, **values: Any) -> None:
        """Values of this step for its record: `loss` (a tensor or number, averaged over ranks at log steps),
        `grad_norm` (the clipped gradients' norm: the non-finite check then reads it instead of computing it), and
        any other numbers, recorded as they are."""
        self.logged.update(values)

    @property
    def first_step(self) -> int:
        """The first step this process runs: the one after the checkpoint it resumed from (set once the loop began)."""
        return self._first_step

    def restore(self) -> None:
        """Load the newest checkpoint that verifies without starting the loop (an export, an evaluation): the
        sinks open, the `resumed` record goes to them, and no watchdog runs."""
        self.telemetry = self.telemetry or Telemetry(self.config.metrics, self.config.checkpoint.dir, self.max_steps,
                                                     self.params or {}, self.world)
        self.resume()

    def begin(self) -> None:
        self.telemetry = self.telemetry or Telemetry(
            self.config.metrics, self.config.checkpoint.dir, self.max_steps, self.params or {}, self.world,
            {"log_interval_steps": self.config.log_interval, "job_starts": self.job["starts"],
             "job_crashes": self.job["crashes"], "ettr_clock_start": self.job["first_start"] + self.job["paused_s"],
             "ettr_target": self.config.resilience.ettr_target})
        self.watchdog.start()
        self._unkept_draws = self.owns_process and self._rng_fingerprint() != self._rng_at_start
        self.resume()
        self._first_step = self.step + 1
        self.report(self.mfu_basis())
        profiling = self.config.profiling
        if profiling.enabled:
            from kubetrain_runtime.profiling import StepProfiler  # torch.profiler, only for a profiled run

            self.profiler = StepProfiler(profiling, profile_dir(profiling, self.config.metrics, self.config.checkpoint),
                                         self.world, job_name(), self.step, self.max_steps, self.report)
        self._mark, self._steps_since, self._saving = time.perf_counter(), 0, 0.0

    def step_done(self, started: float) -> None:
        """After the loop's step: logging, a rollback after a streak of bad steps, the checkpoints that are due."""
        self.watchdog.beat(time.perf_counter() - started)
        if self.profiler is not None:
            self.profiler.after(self.step)
        self._steps_since += 1
        final = self.step == self.max_steps
        if self.step % self.config.log_interval == 0 or final:
            self.last = self.log_step(final)
            if self.worst_streak.item() >= self.config.resilience.max_bad_steps:
                self.roll_back()
                return
            self.worst_streak.zero_()
        self.logged = {}
        # Productive: the step and its logging, the time that moved training on. Checkpoint saves are not: they
        # are the price of resilience, which ETTR is there to show.
        self.ettr.step_done(time.perf_counter() - started)
        durable_due = self.step % self.interval == 0 or final
        if durable_due or (self.local and self.step % self.local_interval == 0):
            if self._unkept_draws and self._in_hand is None:
                self._say_unkept_draws()
            started = time.perf_counter()
            if durable_due:
                self.save()
            else:
                self.report(self.local.save(self.step, self.state))
            self._saving += time.perf_counter() - started  # saving is not training time
            self.longest_save_s = max(self.longest_save_s, time.perf_counter() - started)
            self.watchdog.beat()
        for tier in self.tiers:
            self.report(tier.poll())

    def log_step(self, final: bool) -> dict[str, Any]:
        # The .item() below waits for the device, so the time is the steps' real time.
        values = dict(self.logged)
        record: dict[str, Any] = {"event": "step", "step": self.step}
        loss = values.pop("loss", None)
        if loss is not None:
            record["loss"] = all_reduce_mean(torch.as_tensor(loss, dtype=torch.float32,
                                                             device=self.world.device)).item()
        grad_norm = values.pop("grad_norm", None)
        step_time = (time.perf_counter() - self._mark - self._saving) / self._steps_since
        self._mark, self._steps_since, self._saving = time.perf_counter(), 0, 0.0
        if grad_norm is not None:
            record["grad_norm"] = float(grad_norm)
        record["lr"] = self.optimizer.param_groups[0]["lr"]
        if self.tokens_per_step:
            record["tokens_per_s"] = self.tokens_per_step / step_time
        record |= {"step_time_s": step_time, "skipped_steps": int(self.skipped.item()),
                   "ettr": self.ettr.report()["ettr"]}
        if self.peak_flops and self.flops_per_step:
            record["mfu"] = self.flops_per_step / step_time / self.world.world_size / self.peak_flops
        record |= {key: float(value) if isinstance(value, torch.Tensor) else value for key, value in values.items()}
        self.report(record)
        self.telemetry.checkpoint_intervals({"durable": self.interval * step_time,
                                             **({"local": self.local_interval * step_time} if self.local else {})})
        return record

    def failed(self, exit_code: int) -> None:
        """This rank fails for good (exit_code: one of failures.PERMANENT_EXITS): kubetrain_permanent_failure says
        why, on an endpoint held open for metrics.failure_linger_s so that Prometheus scrapes it."""
        reason = failures.REASONS.get(exit_code, str(exit_code))
        if self.telemetry is not None:
            self.telemetry.failed(reason)
        else:  # before the loop began: an endpoint of its own says it
            announce_failure(self.config.metrics, reason, self.world)

    def finish(self) -> None:
        """max_steps reached: every save complete, the loop's own last work (`on_finish`: the trainer's export),
        and the `finished` record (with every rank's weights' hash), the run's last."""
        self.wait_for_saves()
        if self.step == self.max_steps and self.on_finish is not None:
            self.on_finish()
        self.watchdog.stop()
        if self.stop is not None:
            self.stop.close()
        self.ended = {"event": "finished", "step": self.step,
                      **{k: v for k, v in (self.last or {}).items() if k not in ("event", "step")},
                      **self.ettr.report(), "weights_sha256_per_rank": all_gather_object(self.weights_digest())}
        self.report(self.ended)
        self._ended_cleanly()
        if self.step == self.max_steps:
            self.telemetry.finish()

    def stopped(self) -> None:
        """The ranks agreed to stop (a stop signal): finish the saves in flight, save the step reached to the
        durable tier (the node-local one goes with the pod) unless it is there already, and say so."""
        started = time.perf_counter()
        self.watchdog.stop()  # the stop budget bounds what follows
        self.wait_for_saves()
        if self.step > 0 and self.durable_step != self.step:
            self.report(self.checkpoints.save(self.step, self.state) or self.checkpoints.wait())
            self.durable_step = self.step
        self.ended = {"event": "stopped",
                      "signal": signal.Signals(self.stop.signum).name if self.stop.signum else None,
                      "step": self.step, "checkpoint_step": self.durable_step,
                      "save_s": time.perf_counter() - started, "budget_left_s": self.stop.remaining_s()}
        self.report(self.ended)
        self._ended_cleanly()
        self.stop.close()

    def _ended_cleanly(self) -> None:
        """Finished or stopped with its checkpoint: the next start is no crash, and the time until it no lost time."""
        if self.world.is_main:
            record_clean_end(self.checkpoints.root)

    def close(self, wait: bool = True) -> None:
        """Finish a background save (or, when the process is failing, abandon it) and release the checkpointer's,
        the watchdog's and the metrics' threads."""
        self.watchdog.stop()
        if self.profiler is not None:
            self.profiler.close()
        for tier in self.tiers:
            if wait:
                self.report(tier.wait())
            else:
                tier.abandon()
        for tier in self.tiers:
            tier.close()
        if self.telemetry is not None:
            self.telemetry.close()
        if wait:  # every save complete: the process groups the runtime made for itself go now, not at exit
            self.checkpoints.release_group()
            if self.stop is not None:
                self.stop.close()

    def _guarded(self, action: Callable[[], None]) -> None:
        """Run the runtime's part of a step; in a script of the user's own, a failure for good ends the process with
        its exit code and its note for the launcher (kubetrain's trainer leaves that to its entry point)."""
        if not self.owns_process:
            action()
            return
        try:
            action()
        except PermanentFailure as failure:
            failures.record(failure.exit_code, failure.line)
            try:
                self.failed(failure.exit_code)
                self.close(wait=False)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(failure.exit_code)

    def report(self, record: dict[str, Any] | None) -> None:
        if self.telemetry is not None:
            self.telemetry.observe(record)

    def mfu_basis(self) -> dict[str, Any]:
        """What the step records' `mfu` rests on, once per process: the FLOPs per step the loop gave and the
        device's peak, or why there is no MFU."""
        device = device_name(self.world.device)
        basis: dict[str, Any] = {"event": "mfu_basis", "device": device, "peak_flops": self.peak_flops}
        if self.flops_per_step and self.tokens_per_step:
            basis["flops_per_token"] = self.flops_per_step / self.tokens_per_step
        if not self.peak_flops:
            basis["note"] = f"no MFU: {device} has no known bf16 peak FLOP/s (kubetrain_runtime/accelerators.py)"
        elif not self.flops_per_step:
            basis["note"] = "no MFU: the loop gave no flops_per_step"
        return basis

    def weights_digest(self) -> str:
        """A hash of the full weights, by parameter name: replicas must agree, and so must runs that should have
        trained the same model (resumed, or reloaded at another world size)."""
        digest = hashlib.sha256()
        model_state, _ = get_state_dict(self.model, [])
        for name in sorted(model_state):
            tensor = model_state[name]
            if isinstance(tensor, DTensor):
                tensor = tensor.full_tensor()
            digest.update(name.encode())
            digest.update(tensor.detach().float().cpu().contiguous().numpy().tobytes())
        return digest.hexdigest()

    # -- non-finite steps -------------------------------------------------------------------------------------

    def _guard_optimizer(self) -> None:
        """The optimizer's step, as the loop calls it, goes through `_optimizer_step` (this instance only)."""
        original = self.optimizer.step

        @functools.wraps(original)  # an LR scheduler's mark on the step it wrapped stays visible
        def step(*args: Any, **kwargs: Any) -> Any:
            return self._optimizer_step(original, *args, **kwargs)

        self.optimizer.step = step  # type: ignore[method-assign]

    def _optimizer_step(self, original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Skip the update on every rank when the gradients are not finite. The norm is of the all-reduced (or, under
        FSDP, the full) gradients, so every rank reaches the same verdict. A fused optimizer reads the verdict on the
        device (found_inf) and leaves weights, moments and its step count untouched: no host sync; any other is
        skipped by the host."""
        if self.faults.poisons_loss(self.step):  # a drill's NaN step, for a loop that is not kubetrain's
            for group in self.optimizer.param_groups:
                for parameter in group["params"]:
                    if parameter.grad is not None:
                        parameter.grad.mul_(float("nan"))
        norm = self.logged.get("grad_norm")
        if norm is None:
            grads = [p.grad for group in self.optimizer.param_groups for p in group["params"] if p.grad is not None]
            norm = torch.nn.utils.get_total_norm(grads) if grads else torch.zeros((), device=self.world.device)
            self.logged["grad_norm"] = norm
        if isinstance(norm, DTensor):
            norm = norm.full_tensor()
        bad = (~torch.isfinite(torch.as_tensor(norm, device=self.world.device))).float()
        self.bad_streak = (self.bad_streak + 1) * bad
        self.worst_streak = torch.maximum(self.worst_streak, self.bad_streak)
        self.skipped += bad
        for tier in self.tiers:
            tier.wait_for_staging()  # a background save must have copied the weights first
        if self.optimizer.defaults.get("fused"):
            self.optimizer.found_inf = bad
            return original(*args, **kwargs)
        if bad.item():
            return None
        return original(*args, **kwargs)

    # -- checkpoints ------------------------------------------------------------------------------------------

    @property
    def _rank_key(self) -> str:
        # Per-rank key: DCP keeps one copy of keys that are identical across ranks.
        return f"rank{self.world.rank}"

    def _rng_state(self) -> dict[str, Any]:
        rng = {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": np.random.get_state()}
        if self.world.device_type == "cuda":
            rng["cuda"] = torch.cuda.get_rng_state(self.world.device)
        return rng

    def _set_rng_state(self, rng: dict[str, Any]) -> None:
        torch.set_rng_state(rng["torch"])
        random.setstate(rng["python"])
        np.random.set_state(rng["numpy"])
        if "cuda" in rng:
            torch.cuda.set_rng_state(rng["cuda"], self.world.device)

    def _rng_fingerprint(self) -> str:
        """A digest of the host's RNG streams (torch, numpy, random): whether anything drew from them."""
        digest = hashlib.sha256(torch.get_rng_state().numpy().tobytes())
        digest.update(np.random.get_state()[1].tobytes())
        digest.update(repr(random.getstate()).encode())
        return digest.hexdigest()

    def _first_step_begins(self) -> None:
        self._stepping = True
        if self._kept_batch is not None:
            self._kept_batch = None
            self._warn("the checkpoint kept the batch in hand, but the loop did not hand its first batch over "
                       "before the loop: its first step trains on a fresh start's batch, and the run is no longer "
                       "bit-identical to an uninterrupted one",
                       "call `X, Y = run.batch(*get_batch())` before the loop, as after each fetch inside it")

    def _say_unkept_draws(self) -> None:
        self._unkept_draws = False
        self._warn("the loop drew random numbers between Run(...) and its first step (a batch fetched ahead?) and "
                   "handed nothing over with run.batch(): a resume cannot replay them, so a resumed run trains its "
                   "first step on a fresh start's batch and is not bit-identical to an uninterrupted one",
                   "hand the batch in hand over where it is fetched: `X, Y = run.batch(*get_batch())`, before the "
                   "loop and inside it; or draw nothing between Run(...) and the loop")

    def _warn(self, message: str, fix: str) -> None:
        """Something the runtime cannot keep: once, on rank 0's stderr, and as a record."""
        if self.world.is_main:
            print(f"warning: {message}; fix: {fix}", file=sys.stderr, flush=True)
        self.report({"event": "warning", "step": self.step, "message": message, "fix": fix})

    def _rank_state(self) -> bytes:
        """What each rank keeps apart: its RNG streams and data position, and the small state objects."""
        state: dict[str, Any] = {"rng": self._rng_state()}
        if hasattr(self.data, "state_dict"):
            state["data"] = self.data.state_dict()
        if self._epoch_rng is not None:
            state["batches"] = {"epoch": self.epoch, "batch": self.batch_in_epoch, "epoch_rng": self._epoch_rng}
        if self.scheduler is not None:
            state["scheduler"] = self.scheduler.state_dict()
        if self.extra:
            state["extra"] = {name: value.state_dict() if hasattr(value, "state_dict") else dict(value)
                              for name, value in self.extra.items()}
        if self._in_hand is not None:
            state["batch"] = tuple((v.detach().cpu(), str(v.device)) if isinstance(v, torch.Tensor) else (v, None)
                                   for v in self._in_hand)
        if self.last is not None:
            state["last_step"] = self.last  # the `finished` record's values, when a run resumes at max_steps
        return pickle.dumps(state)

    def _restore_rank_state(self, blob: bytes) -> None:
        state = pickle.loads(blob)
        self._set_rng_state(state["rng"])
        if "data" in state:
            self.data.load_state_dict(state["data"])
        if "batches" in state:
            self._resume_batches = {**state["batches"], "rng": state["rng"]}
        if "batch" in state:
            self._kept_batch = tuple(v.to(device) if device else v for v, device in state["batch"])

    def _restore_shared_state(self, blob: bytes) -> None:
        """The scheduler and the extra state: the same on every rank, so taken from any rank's copy (after a
        rollback too: the learning rate follows the step)."""
        state = pickle.loads(blob)
        self.last = state.get("last_step", self.last)
        if self.scheduler is not None and "scheduler" in state:
            self.scheduler.load_state_dict(state["scheduler"])
        for name, saved in state.get("extra", {}).items():
            target = self.extra.get(name)
            if hasattr(target, "load_state_dict"):
                target.load_state_dict(saved)
            elif isinstance(target, dict):
                target.clear()
                target.update(saved)

    def state(self) -> dict[str, Any]:
        """What a checkpoint of either tier holds; the steps so far count as kept from now on."""
        model_state, optim_state = get_state_dict(self.model, self.optimizer)
        return {"model": model_state, "optim": optim_state,
                "train": {"step": self.step, "world_size": self.world.world_size,
                          "productive_s": self.ettr.checkpointed()},
                self._rank_key: self._rank_state()}

    def save(self) -> None:
        """A durable save (which makes a local one at the same step redundant)."""
        report = self.checkpoints.save(self.step, self.state)
        self.durable_step = self.step
        if not self.choosing_interval:
            self.report(report)
            return
        # interval "auto": each tier saves alone, one after the other, to measure what it costs.
        durable = report or self.checkpoints.wait()
        local = (self.local.save(self.step, self.state) or self.local.wait()) if self.local else None
        self.report(durable)
        self.report(local)
        self.auto_saves += 1
        if self.auto_saves == AUTO_MEASURED_SAVE:
            self.choose_intervals(durable, local)

    def choose_intervals(self, durable: dict[str, Any], local: dict[str, Any] | None) -> None:
        """interval "auto": Daly's interval of each tier, for its measured save cost and the configured MTBF; the
        durable interval is a multiple of the local one, so the cheap tier bounds lost work."""
        self.choosing_interval = False
        mtbf, step_s = self.config.resilience.mtbf_s, max(self.watchdog.median_step_s(), 1e-6)

        def steps(cost_s: float) -> int:
            return max(1, round(daly_interval_s(cost_s, mtbf) / step_s))

        # What a save holds the training thread while training goes on: not the wait for its writes that this
        # first save, measured alone, ended with.
        durable_steps = steps(durable["staging_blocked_s"])
        local_steps = steps(local["staging_blocked_s"]) if local else durable_steps
        if local_steps < durable_steps:
            durable_steps = durable_steps // local_steps * local_steps
        else:
            local_steps = durable_steps  # the local tier saves nothing the durable one does not
        # Rank 0 decides: every rank must save at the same steps.
        self.interval, self.local_interval = broadcast_object(
            (durable_steps, local_steps) if self.world.is_main else None)
        decision = {"event": "checkpoint_interval", "steps": self.interval, "interval_s": self.interval * step_s,
                    "save_cost_s": durable["staging_blocked_s"], "step_time_s": step_s, "mtbf_s": mtbf,
                    "method": "daly"}
        if local:
            decision |= {"local_steps": self.local_interval, "local_save_cost_s": local["staging_blocked_s"]}
        self.report(decision)

    def wait_for_saves(self) -> None:
        """Finish every tier's background save (before a load, and at the end)."""
        for tier in self.tiers:
            self.report(tier.wait())

    def newest_checkpoint(self) -> tuple[Tier, int] | None:
        """The newest checkpoint every rank can trust: marked and verified, newest first on either tier (a local
        one counts only where every rank has its own copy, at this world size, which its path names). A tie goes to
        the local tier: the same state, read from a faster disk. Each checkpoint that fails verification is
        reported, with why, and the next newest is tried (the same on every rank)."""
        candidates = [(step, 0, self.checkpoints) for step in self.checkpoints.candidates()]
        if self.local:
            candidates += [(step, 1, self.local) for step in self.local.candidates()]
        for step, _, tier in sorted(candidates, key=lambda c: c[:2], reverse=True):
            reason = tier.verify_everywhere(step)
            if reason is None:
                return tier, step
            if self.world.is_main:
                print(f"warning: skipping the {tier.tier} checkpoint {tier.step_dir(step)}: {reason}; trying the "
                      "next newest", file=sys.stderr, flush=True)
            self.report({"event": "checkpoint_skipped", "tier": tier.tier, "step": step,
                         "path": str(tier.step_dir(step)), "reason": reason})
        return None

    def load(self, tier: Tier, step: int, with_rank_state: bool) -> dict[str, Any]:
        """Load model, optimizer and progress from the checkpoint of `step`; returns its train state. Every later
        checkpoint, on either tier, belongs to the history this load leaves, and is removed."""
        train = {"step": 0, "world_size": 0, "productive_s": 0.0}
        model_state, optim_state = get_state_dict(self.model, self.optimizer)
        state: dict[str, Any] = {"train": train, "model": model_state, "optim": optim_state}
        keys, wants_shared = tier.keys(step), self.scheduler is not None or bool(self.extra)
        if self._rank_key in keys and (with_rank_state or wants_shared):
            state[self._rank_key] = b""
        elif wants_shared and "rank0" in keys:
            state["rank0"] = b""  # a rank the saving world did not have: the shared state from rank 0's copy
        tier.load(step, state)  # one read: DCP's per-item cost is most of a small checkpoint's load
        shared = state.get(self._rank_key) or state.get("rank0")
        if train["world_size"] != self.world.world_size:
            state.pop(self._rank_key, None)  # another world's RNG streams and data positions
        tier.verified = step
        for each in self.tiers:
            each.discard_after(step)
        set_state_dict(self.model, self.optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
        if shared:
            self._restore_shared_state(shared)
        self.step = train["step"]
        self.durable_step = step if tier is self.checkpoints else None
        self.ettr.restored(train["productive_s"])
        self.watchdog.beat()
        return {**train, "rank_state": state.get(self._rank_key) if with_rank_state else None}

    def roll_back(self) -> None:
        """Too many non-finite steps in a row: return to the newest checkpoint, skipping past the batches that caused
        them (PaLM's practice): the data position is kept, not restored. Every save in flight is complete first, so
        the checkpoint chosen is the same in every run with the same faults."""
        self.wait_for_saves()
        bad_step, streak = self.step, int(self.worst_streak.item())
        self.rollbacks += 1
        newest = self.newest_checkpoint() if self.rollbacks <= self.config.resilience.max_rollbacks else None
        if newest is None:
            reason = (f"after {self.rollbacks - 1} rollbacks" if self.rollbacks > self.config.resilience.max_rollbacks
                      else "with no checkpoint to roll back to")
            raise PermanentFailure(EXIT_DIVERGED, "training", Problem(
                DIVERGED_CODE, "resilience.max_rollbacks",
                f"{streak} non-finite steps in a row at step {bad_step}, {reason}: the run diverges",
                "lower optimizer.lr (or raise warmup_steps), check the data for bad samples, then restart the job"))
        tier, step = newest
        self.load(tier, step, with_rank_state=False)
        self.bad_streak.zero_()
        self.worst_streak.zero_()
        self.logged = {}
        record = {"event": "rollback", "from_step": bad_step, "to_step": step, "tier": tier.tier}
        position = getattr(self.data, "position", None)
        if position is not None:
            record["data_position"] = position
        self.report(record)

    def resume(self) -> None:
        newest = self.newest_checkpoint()
        if newest is None:
            return
        tier, step = newest
        train = self.load(tier, step, with_rank_state=True)
        if train["rank_state"] is not None:
            self._restore_rank_state(train["rank_state"])
        elif self.on_reshard is not None:
            # Another world size: RNG streams cannot carry over, but the data position may be recomputed.
            self.on_reshard(self.step)
        self.report({"event": "resumed", "step": self.step, "from": str(tier.step_dir(step)),
                     "tier": tier.tier, "saved_world_size": train["world_size"], "world_size": self.world.world_size,
                     "startup": {**self.startup, "resumed": time.time()}})

    # -- batches ----------------------------------------------------------------------------------------------

    def _fast_forward(self, loader: Iterable[Any]) -> None:
        """Resumed inside an epoch: the loader where the checkpoint left it, then the checkpoint's RNG streams."""
        if self._resume_batches is None:
            return
        position, self._resume_batches = self._resume_batches, None
        self.epoch = position["epoch"]
        if position["batch"]:
            self._start_epoch(loader, position["epoch_rng"])
            for _ in range(position["batch"]):
                next(self._batches, None)
        else:  # saved between epochs (a run that ended with one): the next batch starts the epoch, from the step's
            self._batches = None  # streams as the uninterrupted run did, its shuffle and workers' seeds drawn then
        self.batch_in_epoch = position["batch"]
        self._set_rng_state(position["rng"])  # the step's own streams, as the checkpoint had them

    def _next_batch(self, loader: Iterable[Any]) -> Any:
        while True:
            if self._batches is None:
                self._start_epoch(loader, None)
            try:
                batch = next(self._batches)
            except StopIteration:
                self._batches = None
                self.epoch += 1
                continue
            self.batch_in_epoch += 1
            return batch

    def _start_epoch(self, loader: Iterable[Any], rng: dict[str, Any] | None) -> None:
        """A new pass over `loader`: its sampler told the epoch, and the RNG streams as they were when it began (a
        shuffling loader draws its order and its workers' seeds from them)."""
        if rng is not None:
            self._set_rng_state(rng)
        for told in (loader, getattr(loader, "sampler", None), getattr(loader, "batch_sampler", None)):
            if hasattr(told, "set_epoch"):
                told.set_epoch(self.epoch)
        self._epoch_rng = self._rng_state()
        self._batches = iter(loader)
        self.batch_in_epoch = 0
