"""The PyTorch profiler on request: windows of steps recorded on the chosen ranks, written where TensorBoard reads them.

A run with `profiling.enabled` has one `StepProfiler` on every rank (the run's step hook calls `after(step)`); a run
without has none, so profiling costs an unprofiled step one attribute check. Each window is warmup + active steps:
a fresh torch.profiler.profile is started before its first step with a schedule of exactly that window, stepped
after each step, and stopped after the last, which writes the trace through torch.profiler.tensorboard_trace_handler
(`<job>-rank<rank>.<time_ns>.pt.trace.json`: Chrome trace JSON, the format TensorBoard's profiler plugin and
Perfetto open). Then every rank, profiled or not, gathers the files written (the window's end is the same step on
every rank, so this collective is met) and rank 0's JSON lines name them in a `profile` event; a `profile` event
also marks each window's start, and the Prometheus gauge kubetrain_profiling follows both.

A run resumed inside or past a window skips it (its trace would cover part of the window); a rollback inside a
window keeps recording, so the trace shows the steps run again.
"""

from __future__ import annotations

import glob
import os
import sys
from collections.abc import Callable
from typing import Any

from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

from kubetrain_runtime.distributed import World, all_gather_object
from kubetrain_runtime.runtime_config import ProfilingConfig

ACTIVITIES = {"cpu": ProfilerActivity.CPU, "cuda": ProfilerActivity.CUDA}


class StepProfiler:
    """The windows of a profiled run, from the step reached on start (`resumed_at`: 0 on a fresh start)."""

    def __init__(self, config: ProfilingConfig, folder: str, world: World, job: str, resumed_at: int,
                 max_steps: int, report: Callable[[dict[str, Any]], None]):
        self.config, self.folder, self.world, self.report = config, folder, world, report
        self.recording = config.profiles(world.rank)
        self.worker = f"{job}-rank{world.rank}"
        cycle = config.warmup + config.active
        first = config.start_step - config.warmup
        # (first step, last step) of each window still ahead, the ones past max_steps left out.
        self.windows = [(begin, begin + cycle - 1) for begin in (first + n * cycle for n in range(config.repeat))
                        if begin > resumed_at and begin + cycle - 1 <= max_steps]
        if world.is_main and config.last_step > max_steps:
            print(f"warning: profiling.start_step {config.start_step} with {config.active} active steps and repeat "
                  f"{config.repeat} reaches step {config.last_step}, past max_steps {max_steps}: the windows past it "
                  "are not profiled", file=sys.stderr, flush=True)
        self.profiler: profile | None = None
        self.after(resumed_at)  # a window that begins at the next step starts now

    def activities(self) -> list[ProfilerActivity]:
        wanted = [ACTIVITIES[name] for name in self.config.activities
                  if name != "cuda" or self.world.device.type == "cuda"]
        return wanted or [ProfilerActivity.CPU]  # `cuda` alone on a CPU rank: its host side still shows

    def after(self, step: int) -> None:
        """After `step` (0: before the first): step the profiler, end the window that ends here, start the next."""
        if not self.windows:
            return
        begin, end = self.windows[0]
        if step == end:
            self.end_window(begin, end)
        elif self.profiler is not None:
            self.profiler.step()
        elif step + 1 == begin:
            self.start_window(begin, end)

    def start_window(self, begin: int, end: int) -> None:
        config = self.config
        if self.recording:
            self.profiler = profile(
                activities=self.activities(),
                schedule=schedule(wait=0, warmup=config.warmup, active=config.active, repeat=1),
                on_trace_ready=tensorboard_trace_handler(self.folder, worker_name=self.worker),
                record_shapes=config.record_shapes, profile_memory=config.profile_memory,
                with_stack=config.with_stack)
            self.profiler.start()
        self.report({"event": "profile", "phase": "start", "steps": [begin + config.warmup, end],
                     "warmup_from": begin, "ranks": self.ranks(), "dir": self.folder})

    def end_window(self, begin: int, end: int) -> None:
        """Write this rank's trace (the profiler's stop saves the window it recorded), then name every rank's."""
        self.windows.pop(0)
        written: list[str] = []
        if self.profiler is not None:
            before = set(self.traces())
            self.profiler.stop()
            self.profiler = None
            written = sorted(set(self.traces()) - before)
        traces = [path for paths in all_gather_object(written) for path in paths]
        self.report({"event": "profile", "phase": "written", "steps": [begin + self.config.warmup, end],
                     "ranks": self.ranks(), "traces": traces})
        if self.windows and end + 1 == self.windows[0][0]:
            self.start_window(*self.windows[0])

    def traces(self) -> list[str]:
        return glob.glob(os.path.join(glob.escape(self.folder), f"{glob.escape(self.worker)}.*.pt.trace.json"))

    def ranks(self) -> list[int]:
        ranks = self.config.ranks
        return list(range(self.world.world_size)) if ranks == "all" else [r for r in ranks
                                                                            if r < self.world.world_size]

    def close(self) -> None:
        """The run ends inside a window (a stop signal): the steps recorded so far are written, unannounced."""
        if self.profiler is not None:
            self.profiler.stop()
            self.profiler = None
