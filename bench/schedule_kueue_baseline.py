"""Kueue's own scheduler performance scenario through the schedule simulation (kubetrain.schedule), against the
figures Kueue measured: test/performance/scheduler/configs/baseline/{generator,rangespec}.yaml of
github.com/kubernetes-sigs/kueue at tag v0.19.2.

The scenario: 5 cohorts of 6 ClusterQueues (20 CPU nominal, borrowing limit 100, reclaimWithinCohort Any,
withinClusterQueue LowerPriority); per ClusterQueue 350 small workloads (1 CPU, priority 50, 200 ms) one every
100 ms, 100 medium (5 CPU, 100, 500 ms) one every 500 ms, 50 large (20 CPU, 200, 1000 ms) one every 1200 ms.

What shapes Kueue's figures is its test harness's, each taken from its code, none fitted:

- Kueue's API writes. minimalkueue's client is limited to 50 writes/s, burst 100 (minimalkueue/main.go), one token
  bucket per kind: all of Kueue's Workload writes share one (kubetrain.schedule.api_writes). The scheduler assumes
  a workload in its cache (its quota counts from then: scheduler.go assumeWorkload) and patches the admission from
  a goroutine (admissionRoutineWrapper), so the patch waits its turn; the runner starts the workload's clock, and
  the recorder stamps its admission, when the patch lands (runner/controller/controller.go,
  runner/recorder/recorder.go). 15,000 admissions at 50/s are 300 s of the 351 s Kueue measured: the writes, not
  the cycle's CPU, set the wall time, and the wait in the write queue is quota held and not running, which is the
  usage a release latency was once fitted to (0.69 then). The cycle also writes, one after another, the condition
  of each head it does not admit whose message changed ("N more needed"; requeueAndUpdate).
- The requeue of parked workloads: quota freed in a cohort moves its parked workloads back 1 s later, the
  frees meanwhile batched (pkg/cache/queue/inadmissible_workloads.go requeueBatchPeriod), and a workload that
  arrives while its equivalence class is parked is parked at once (cluster_queue.go PushOrUpdate).
- The generator: each workload set is a goroutine that waits its interval and then creates one workload
  (runner/generator/generator.go generateWlSet), so the n-th is created at n x (interval + the Create's round
  trip), the first after one interval. That round trip (taken as 2 ms on average, exponential, on envtest's
  local API server) drifts the 90 sets' phases; the large class's wait depends on its phase against the 1 s
  requeue, about 0.55 or 1.1 to 1.5 of Kueue's from one trial to the next (Kueue's varied +/-13 %), so the
  scenario runs in trials, as Kueue's rangespec averages 5, and their average is compared: 10 of them, for
  the large class's spread (1, 2 or 5 ms round trips give the same figures within it).
- A finished workload's quota frees when Kueue's informer sees Finished (workload_controller.go Update
  deletes it from the cache): no release latency.

The cycle's own CPU cost per head is calibrated on the measured wall time (351,116 ms): the simulated wall time
over a grid of costs, the cost whose trials' average is nearest. It comes out 0: the writes alone give 0.98 of
Kueue's wall time, and a dearer cycle only batches more admissions into each burst of writes (the wall time
falls). What is left (2 %) the simulation does not resolve: the Workload writes it does not count (the workload
controller's), the scheduler's own CPU, the harness's start and stop. The figures, as Kueue's recorder and checker
measure them (checker/checker_test.go): each class's average time from creation to its latest admission on the API
server; the usage: the CPU of admitted workloads (ClusterQueue status flavorsUsage, which counts a workload from
the moment it is assumed) integrated over time, over the nominal quota of the 30 ClusterQueues x the time from the
first event to the last. Printed with their ratios to Kueue's and a verdict against +/-25 %.
"""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path
from statistics import mean

sys.path.insert(0, str(Path(__file__).parent))
from schedule_scale import fleet  # noqa: E402  (the same 30 ClusterQueues)

from kubetrain.model.pod_sets import PodSet  # noqa: E402
from kubetrain.schedule.simulation import KUEUE_REQUEUE_SECONDS, simulate  # noqa: E402
from kubetrain.schedule.workload_state import SimWorkload  # noqa: E402

# className, count, creation interval (s), runtime (s), priority, CPU: generator.yaml
CLASSES = (("small", 350, 0.1, 0.2, 50, 1), ("medium", 100, 0.5, 0.5, 100, 5), ("large", 50, 1.2, 1.0, 200, 20))
MINIMALKUEUE_API_WRITES = (50.0, 100)  # minimalkueue/main.go: kubeConfig.QPS = 50, kubeConfig.Burst = 100
CREATE_ROUND_TRIP_S = 0.002  # the generator's c.Create on envtest's API server, on average
TRIALS = 10  # rangespec.yaml's are "computed based on the result of 5 trial runs"; the large class varies more here
HEAD_COSTS_S = (0.0, 0.001, 0.002, 0.005)
MEASURED_WALL_S = 351.1164  # rangespec.yaml: "Average value 351116.4"
MEASURED_ADMISSION_MS = {"large": 16501, "medium": 76768, "small": 215468}  # rangespec.yaml averages
MEASURED_USAGE = 55.9  # % (rangespec.yaml: "Average value 55.9", minimum 50)
BAND = 0.25


def workloads(seed: int) -> list[SimWorkload]:
    """generateWlSet for every set of every ClusterQueue: wait the interval, create, and again."""
    rng = random.Random(seed)
    found = []
    for c in range(5):
        for q in range(6):
            for name, count, every, runtime, priority, cpu in CLASSES:
                pod_sets = (PodSet("main", 1, {"cpu": cpu * 1000}, {}, None, (), None),)
                created = 0.0
                for _ in range(count):
                    created += every + rng.expovariate(1 / CREATE_ROUND_TRIP_S)
                    found.append(SimWorkload(name, f"cq{c}-{q}", priority, created, pod_sets, runtime))
    return found


def trial(head_seconds: float, seed: int) -> dict[str, float]:
    """One run's figures: wall time (s), usage (%), each class's average time to admission (ms), preemptions."""
    jobs = workloads(seed)
    outcome = simulate(fleet(), jobs, head_seconds=head_seconds, api_writes=MINIMALKUEUE_API_WRITES,
                       requeue_seconds=KUEUE_REQUEUE_SECONDS)
    held = sum((s.end - s.start) * s.workload.pod_sets[0].requests["cpu"] / 1000 for s in outcome.segments
               if s.state in ("admitted", "running", "releasing"))
    figures = {"wall": outcome.end, "usage": 100 * held / (30 * 20 * outcome.end),
               "preemptions": sum(len(w.preempted_at) for w in jobs), "cycles": outcome.cycles}
    for name in MEASURED_ADMISSION_MS:
        figures[name] = mean((w.written_at - w.created) * 1000 for w in jobs if w.key == name)
    return figures


def trials(head_seconds: float) -> list[dict[str, float]]:
    return [trial(head_seconds, seed) for seed in range(1, TRIALS + 1)]


def main() -> None:
    start = time.process_time()
    runs = {head: trials(head) for head in HEAD_COSTS_S}
    head = min(runs, key=lambda h: abs(mean(r["wall"] for r in runs[h]) / MEASURED_WALL_S - 1))
    for h, found in runs.items():
        print(f"head cost {h * 1e3:.1f} ms: wall time {mean(r['wall'] for r in found):.1f} s "
              f"(trials {min(r['wall'] for r in found):.1f} to {max(r['wall'] for r in found):.1f})")
    found = runs[head]
    print(f"calibrated: head cost {head * 1e3:.1f} ms, API writes {MINIMALKUEUE_API_WRITES[0]:.0f}/s burst "
          f"{MINIMALKUEUE_API_WRITES[1]}, requeue {KUEUE_REQUEUE_SECONDS:.0f} s, {TRIALS} trials, "
          f"{mean(r['cycles'] for r in found):.0f} cycles, {mean(r['preemptions'] for r in found):.1f} preemptions")
    ok = True
    rows = [("wall time", "wall", MEASURED_WALL_S, "s", False), ("cq usage", "usage", MEASURED_USAGE, "%", True),
            *((f"{n} average time to admission", n, float(m), "ms", True) for n, m in MEASURED_ADMISSION_MS.items())]
    for label, key, measured, unit, judged in rows:
        value = mean(r[key] for r in found)
        spread = f"trials {min(r[key] for r in found) / measured:.2f} to {max(r[key] for r in found) / measured:.2f}"
        within = abs(value / measured - 1) <= BAND
        ok &= within or not judged
        verdict = ("within" if within else "OUTSIDE") + f" +/-{BAND:.0%}" if judged else "(calibrated on)"
        print(f"  {label:<32} {value:>10,.1f} {unit:<2}  Kueue {measured:>10,.1f} {unit:<2}  "
              f"ratio {value / measured:.2f} ({spread})  {verdict}")
    print(f"CPU {time.process_time() - start:.0f} s, load average {os.getloadavg()[0]:.1f}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
