"""How fast the schedule simulation (kubetrain.schedule) runs: 10,000 workloads over 30 ClusterQueues (5 cohorts
of 6, Kueue's baseline scenario's shape: test/performance/scheduler/configs/baseline/generator.yaml at v0.19.2,
its three classes scaled to 10,000 workloads), on one core. Prints the wall time, the scheduling cycles, the
time per cycle and per workload; the target is under 10 s of one core: the CPU time the process took (on a loaded
machine the wall time also counts other work's turns), with the load average beside it."""

from __future__ import annotations

import os
import resource
import time

from kubetrain.admission.cluster_objects import ClusterObjects
from kubetrain.model.pod_sets import PodSet
from kubetrain.schedule.simulation import simulate
from kubetrain.schedule.workload_state import SimWorkload

KUEUE = "kueue.x-k8s.io/v1beta2"
CLASSES = (("small", 233, 0.1, 0.2, 50, 1), ("medium", 67, 0.5, 0.5, 100, 5), ("large", 33, 1.2, 1.0, 200, 20))


def fleet() -> ClusterObjects:
    objects = [{"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "default"}, "spec": {}}]
    for c in range(5):
        for q in range(6):
            objects.append({"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": f"cq{c}-{q}"}, "spec": {
                "cohortName": f"cohort{c}", "namespaceSelector": {},
                "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
                "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [
                    {"name": "cpu", "nominalQuota": "20", "borrowingLimit": "100"}]}]}]}})
    return ClusterObjects.from_manifests("bench", objects)


def workloads(classes: tuple[tuple[str, int, float, float, int, int], ...] = CLASSES) -> list[SimWorkload]:
    """Per ClusterQueue, each class's workloads: (name, count, creation interval s, runtime s, priority, CPU)."""
    found = []
    for c in range(5):
        for q in range(6):
            for name, count, every, runtime, priority, cpu in classes:
                pod_sets = (PodSet("main", 1, {"cpu": cpu * 1000}, {}, None, (), None),)
                found += [SimWorkload(name, f"cq{c}-{q}", priority, i * every, pod_sets, runtime) for i in range(count)]
    return found


def main() -> None:
    objects, jobs = fleet(), workloads()
    start, cpu_start = time.perf_counter(), time.process_time()
    outcome = simulate(objects, jobs, record=False)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # the process's, interpreter included
    admitted = sum(w.admitted_at is not None for w in jobs)
    print(f"workloads {len(jobs)}  cluster queues {len(objects.cluster_queues)}  admitted {admitted}")
    print(f"cpu {cpu:.2f} s  wall {wall:.2f} s  load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"cycles {outcome.cycles}  {cpu / outcome.cycles * 1e3:.3f} ms/cycle  {cpu / len(jobs) * 1e3:.3f} ms/workload  "
          f"peak RSS {peak / 2**20:.0f} MiB  target < 10 s of one core: ratio {cpu / 10:.2f}")


if __name__ == "__main__":
    main()
