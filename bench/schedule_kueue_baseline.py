"""Kueue's own scheduler performance scenario through the schedule simulation (kubetrain.schedule), against the
figures Kueue measured: test/performance/scheduler/configs/baseline/{generator,rangespec}.yaml of
github.com/kubernetes-sigs/kueue at tag v0.19.2.

The scenario: 5 cohorts of 6 ClusterQueues (20 CPU nominal, borrowing limit 100, reclaimWithinCohort Any,
withinClusterQueue LowerPriority); per ClusterQueue 350 small workloads (1 CPU, priority 50, 200 ms) one every
100 ms, 100 medium (5 CPU, 100, 500 ms) one every 500 ms, 50 large (20 CPU, 200, 1000 ms) one every 1200 ms.

Kueue's runtimes are milliseconds, so two costs of Kueue's own shape the figures; both are fitted to what Kueue
measured, none chosen by hand:

- `head_seconds`, a scheduling cycle's cost per head it nominates (flavors, preemption targets, the admission),
  calibrated on the measured wall time (351,116 ms) by the secant method, for each release below;
- `release_seconds`, how long a workload holds its quota past its runtime: the runner starts a workload's clock
  when it sees it Admitted, writes Finished when its runtime is up, and Kueue frees the quota when its cache sees
  that (runner/controller/controller.go). Fitted by least squares of the log ratios of all five figures (wall
  time, three class waits, usage) over a grid.

The figures, as Kueue's recorder and checker measure them (runner/recorder/recorder.go,
checker/checker_test.go): each class's average time from creation to its latest admission, and the usage: the CPU
of admitted workloads (ClusterQueue status.flavorsUsage; Kueue counts a workload admitted from the moment it
assumes it in its cache, pkg/scheduler/scheduler.go assumeWorkload) integrated over time, over the nominal quota of
the 30 ClusterQueues x the time from the first event to the last. Printed with their ratios to Kueue's and a
verdict against +/-25 %, then the same for the release that best fits the usage alone: usage is quota held over
quota x time, so 55.9 % over 351 s means each workload holds its quota about 1.4 s (CPU-weighted) past its
runtime, and a hold that long makes the large class queue behind itself (a ClusterQueue's second large workload
must borrow a whole 20 CPU): the two measured figures cannot both be met by one release latency in this model.
"""

from __future__ import annotations

import math
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from schedule_scale import fleet, workloads  # noqa: E402  (the same 30 ClusterQueues and class generator)

from kubetrain.schedule.simulation import simulate  # noqa: E402
from kubetrain.schedule.workload_state import SimWorkload  # noqa: E402

# className, count, creation interval (s), runtime (s), priority, CPU: generator.yaml
CLASSES = (("small", 350, 0.1, 0.2, 50, 1), ("medium", 100, 0.5, 0.5, 100, 5), ("large", 50, 1.2, 1.0, 200, 20))
MEASURED_WALL_S = 351.1164  # rangespec.yaml: "Average value 351116.4"
MEASURED_ADMISSION_MS = {"large": 16501, "medium": 76768, "small": 215468}  # rangespec.yaml averages
MEASURED_USAGE = 55.9  # % (rangespec.yaml: "Average value 55.9", minimum 50)
BAND = 0.25


def run(head_seconds: float, release_seconds: float) -> tuple[float, float, list[SimWorkload], int]:
    """(simulated end, usage %, workloads, cycles) of the scenario."""
    jobs = workloads(CLASSES)
    outcome = simulate(fleet(), jobs, head_seconds=head_seconds, release_seconds=release_seconds)
    return outcome.end, usage_percent(outcome.segments, outcome.end), jobs, outcome.cycles


def usage_percent(segments: list, end: float) -> float:
    """CPU-seconds held by admitted workloads (admitted, running, ended but not yet released) over nominal quota x
    elapsed time."""
    held = sum((s.end - s.start) * s.workload.pod_sets[0].requests["cpu"] / 1000 for s in segments
               if s.state in ("admitted", "running", "releasing"))
    return 100 * held / (30 * 20 * end)


def secant(f, low: float, high: float, target: float, tolerance: float) -> tuple[float, tuple]:
    """x with f(x)[0] = target (within `tolerance`, relative), by the secant method from low and high."""
    found_low, found_high = f(low), f(high)
    x, found = high, found_high
    for _ in range(8):
        if abs(found[0] / target - 1) < tolerance or found_high[0] == found_low[0]:
            break
        x = high + (target - found_high[0]) * (high - low) / (found_high[0] - found_low[0])
        found = f(x)
        low, found_low, high, found_high = high, found_high, x, found
    return x, found


def calibrated(release_seconds: float) -> tuple[float, tuple]:
    """The head cost that ends the scenario when Kueue's did, under this release."""
    return secant(lambda head: run(head, release_seconds), 0.015, 0.02, MEASURED_WALL_S, 0.005)


def report(title: str, release: float, head: float, found: tuple) -> bool:
    end, usage, jobs, cycles = found
    print(f"{title}: release {release * 1e3:.0f} ms, head cost {head * 1e3:.2f} ms, {cycles} cycles")
    print(f"  wall time {end:>9.1f} s   Kueue {MEASURED_WALL_S:>9.1f} s   ratio {end / MEASURED_WALL_S:.2f}")
    ok = abs(usage / MEASURED_USAGE - 1) <= BAND
    print(f"  cq usage  {usage:>9.1f} %   Kueue {MEASURED_USAGE:>9.1f} %   ratio {usage / MEASURED_USAGE:.2f}  "
          f"{'within' if ok else 'OUTSIDE'} +/-{BAND:.0%}")
    for name, measured in MEASURED_ADMISSION_MS.items():
        wait = class_wait(jobs, name)
        ok &= abs(wait / measured - 1) <= BAND
        print(f"  {name:<7} average time to admission {wait:>9,.0f} ms  Kueue {measured:>9,} ms  "
              f"ratio {wait / measured:.2f}  {'within' if abs(wait / measured - 1) <= BAND else 'OUTSIDE'} +/-{BAND:.0%}")
    print(f"  preemptions {sum(len(w.preempted_at) for w in jobs)}")
    return ok


def misfit(found: tuple) -> float:
    """Sum of squared log ratios to Kueue's figures: the wall time, each class's wait, the usage."""
    end, usage, jobs, _ = found
    ratios = [end / MEASURED_WALL_S, usage / MEASURED_USAGE, *(class_wait(jobs, name) / measured
                                                            for name, measured in MEASURED_ADMISSION_MS.items())]
    return sum(math.log(r) ** 2 for r in ratios)


def class_wait(jobs: list[SimWorkload], name: str) -> float:
    waits = [(w.reserved_at - w.created) * 1000 for w in jobs if w.key == name and w.reserved_at is not None]
    return sum(waits) / len(waits)


def main() -> None:
    start = time.process_time()
    # The release is seen by the next cycle, so the waits move in steps of a cycle's length (about 0.6 s) while
    # the usage grows smoothly with it: a grid, then a finer one around the best, not a gradient method.
    fits = {r: calibrated(r) for r in [i * 0.1 for i in range(16)]}
    best = min(fits, key=lambda r: misfit(fits[r][1]))
    fits |= {r: calibrated(r) for r in [best + i * 0.02 for i in range(-4, 5)] if r >= 0 and r not in fits}
    best = min(fits, key=lambda r: misfit(fits[r][1]))
    ok = report("fitted on all five figures (least squares of the log ratios)", best, *fits[best])
    by_usage = min(fits, key=lambda r: abs(fits[r][1][1] / MEASURED_USAGE - 1))
    report("for comparison, the release that best fits the usage alone", by_usage, *fits[by_usage])
    print(f"CPU {time.process_time() - start:.0f} s, load average {os.getloadavg()[0]:.1f}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
