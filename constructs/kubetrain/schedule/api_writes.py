"""Kueue's writes to the API server, through its client's rate limiter.

Kueue writes every admission, eviction and pending workload's condition through its controller-runtime client,
which builds one REST client per kind (pkg/client/client_rest_resources.go, RESTClientForGVK), each with a token
bucket of the config's QPS and Burst (client-go rest.RESTClientForConfigAndClient, no shared RateLimiter set):
all of Kueue's Workload writes share one. Kueue v0.19.2 defaults `clientConnection` to 300/s,
burst 500 (apis/config/v1beta2/defaults.go); its scheduler performance test runs minimalkueue at 50/s, burst 100
(test/performance/scheduler/minimalkueue/main.go). A write waits for its token in the order writes asked
(golang.org/x/time/rate reservations), and nothing else sees it before it lands: the job controller unsuspends
a job, and a test runner starts its clock, only when the admission is on the API server; the quota was counted
from the moment the scheduler assumed the workload in its cache.
"""

from __future__ import annotations


class WriteLimiter:
    """A token bucket of `per_second` tokens up to `burst`, full at the start; one token per write."""

    def __init__(self, per_second: float, burst: int):
        if per_second <= 0 or burst < 1:
            raise ValueError(f"API writes: {per_second}/s, burst {burst}: both must be positive")
        self.per_second, self.burst = per_second, burst
        self.tokens, self.last = float(burst), 0.0

    def reserve(self, at: float) -> float:
        """When a write asked for at `at` goes out: the writes asked so far are served first (rate.Limiter
        reserveN: the bucket refills since the last ask, capped at the burst, and may go into debt)."""
        at = max(at, self.last)
        self.tokens = min(self.burst, self.tokens + (at - self.last) * self.per_second) - 1
        self.last = at
        return at if self.tokens >= 0 else at + -self.tokens / self.per_second
