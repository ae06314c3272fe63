"""A ClusterQueue's pending workloads, as Kueue's queue manager holds them (v0.19.2 pkg/cache/queue).

The heap is ordered by priority, then creation time, then UID. A cycle takes each ClusterQueue's head. A
workload that is not admitted goes back: at once under StrictFIFO (so the head blocks the queue) or when it
failed only because of this cycle's other admissions or waits on its own preemptions; otherwise, under
BestEffortFIFO, it is parked as inadmissible, with every pending workload of the same scheduling shape
(SchedulingEquivalenceHashing), until quota frees in its cohort (a workload finishes or is evicted), and
so is every workload of that shape that arrives meanwhile.
"""

from __future__ import annotations

import heapq

from kubetrain.schedule.workload_state import SimWorkload


class PendingQueue:
    """One heap per scheduling shape: parking a shape parks every pending workload of it at once, and
    releasing the queue unparks them all, without moving a workload."""

    def __init__(self, name: str, strategy: str):
        self.name, self.strict = name, strategy == "StrictFIFO"
        self._heaps: dict[tuple, list[tuple[tuple[int, float, int], SimWorkload]]] = {}
        self._parked: set[tuple] = set()

    def __bool__(self) -> bool:
        return any(heap for shape, heap in self._heaps.items() if shape not in self._parked)

    def __len__(self) -> int:
        return sum(len(heap) for heap in self._heaps.values())

    @property
    def inadmissible(self) -> list[SimWorkload]:
        return [w for shape in self._parked for _, w in self._heaps.get(shape, [])]

    def push(self, workload: SimWorkload) -> None:
        """A new or returning workload joins its shape's heap: parked if its shape is (Kueue's PushOrUpdate
        sends a workload whose equivalence class was bulk-moved to the inadmissible ones, cluster_queue.go)."""
        heapq.heappush(self._heaps.setdefault(workload.shape, []), (workload.order_key, workload))

    def pop(self) -> SimWorkload | None:
        best = None
        for shape, heap in self._heaps.items():
            if heap and shape not in self._parked and (best is None or heap[0][0] < best[0][0]):
                best = heap
        return heapq.heappop(best)[1] if best else None

    def requeue(self, workload: SimWorkload, immediate: bool) -> bool:
        """Put back a head that was not admitted; True when it was parked (with its equals)."""
        heapq.heappush(self._heaps.setdefault(workload.shape, []), (workload.order_key, workload))
        if immediate or self.strict:
            return False
        self._parked.add(workload.shape)
        return True

    def release(self) -> None:
        """QueueInadmissibleWorkloads: quota freed, every parked workload competes again."""
        self._parked.clear()
