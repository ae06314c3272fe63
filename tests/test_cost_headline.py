"""The cost headline of `kubetrain diff` agrees with its per-job lines: what is added and what is removed apart,
GPU-hours and dollars each, and no dollar total over a job without a price."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st
from kubetrain.cost.change import CostChange, JobChange, text_lines
from kubetrain.cost.cost_props import Estimate
from kubetrain.cost.cost_report import number, usd
from kubetrain.cost.estimate import JobCost, Work
from kubetrain.cost.prices import NodePrice
from kubetrain.kinds.base import RunShape

_ESTIMATE = Estimate(mfu=0.5, ettr=0.5)
_PEAK = 1e15
_FLOPS_PER_GPU_HOUR = _PEAK * 0.25 * 3600  # one GPU-hour of work at this MFU and ETTR


def _cost(job: str, run: str, gpu_hours: float | None, usd_per_node_hour: float | None,
          capacity: str = "on-demand") -> JobCost:
    """A one-GPU job of `gpu_hours` (None: no peak, so no hours) at `usd_per_node_hour` (None: no price)."""
    price = NodePrice(usd_per_node_hour, "p5.48xlarge", f"{capacity} us-east-1", "2026-07-20") \
        if usd_per_node_hour is not None else None
    return JobCost("prod", "ml", job, run, RunShape("PyTorchJob", pods=1, accelerators_per_pod=1), "p5.48xlarge",
                   capacity, price, None, _ESTIMATE, Work(1.0, (gpu_hours or 1.0) * _FLOPS_PER_GPU_HOUR),
                   _PEAK if gpu_hours is not None else None)


_hours = st.one_of(st.none(), st.floats(0.5, 5000, allow_nan=False))
_price = st.one_of(st.none(), st.sampled_from([1.2, 11.8, 41.528, 55.04]))


@st.composite
def _changes(draw: st.DrawFn) -> CostChange:
    jobs = []
    for i in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["new job", "removed", "changed", "new run"]))
        name = f"job{i}"
        old = _cost(name, f"{name}-a", draw(_hours), draw(_price)) if kind != "new job" else None
        new = _cost(name, f"{name}-b" if kind == "new run" else f"{name}-a", draw(_hours), draw(_price)) \
            if kind != "removed" else None
        jobs.append(JobChange(("prod", "ml", name), kind, old, new))
    return CostChange(jobs)


@settings(max_examples=300, deadline=None)
@given(_changes())
def test_no_headline_contradicts_the_per_job_lines(change: CostChange) -> None:
    lines = text_lines(change)
    headline, job_lines = lines[0], lines[1:]
    assert len(job_lines) == len(change.jobs)
    hours = [job.gpu_hours for job in change.jobs]
    dollars = [job.usd for job in change.jobs]
    # Each measure: the sums of what the per-job lines add and remove, as those lines print them.
    for values, amount, signed, what in ((hours, lambda v: f"{number(v)} GPU-hours",
                                          lambda v: number(v, True) + " GPU-hours", "GPU-hours"),
                                         (dollars, usd, lambda v: usd(v, True), "dollars")):
        known = [v for v in values if v is not None]
        added, removed = sum(v for v in known if v > 0), -sum(v for v in known if v < 0)
        complete = len(known) == len(values)
        if complete:
            assert f"adds {amount(added)} and removes {amount(removed)}" in headline, headline
        else:
            assert (f"adds {amount(added)}" in headline) == bool(added), headline
            assert (f"removes {amount(removed)}" in headline) == bool(removed), headline
        net = sum(known)
        if complete:
            assert f"(net {signed(net)})" in headline
        else:  # never a total over an unknown: the jobs are named instead
            assert f"(net {signed(net)})" not in headline and f"unknown for {values.count(None)} job" in headline
    # A job line without a price shows "-", and then no net dollar figure anywhere.
    if any(re.search(r"GPU-hours, - \(", line) for line in job_lines):
        assert not re.search(r"net [+-]\$", headline)


def test_removing_a_reserved_job_and_adding_a_spot_one_says_both() -> None:
    # The case: 295 GPU-hours of new spot work, 100 fewer of reserved work. The headline must not
    # say the change removes GPU-hours overall, nor hide the new spend behind the net.
    removed = JobChange(("prod", "ml", "reserved"), "removed", _cost("reserved", "reserved-a", 100.0, 1.73, "reserved"),
                        None)
    added = JobChange(("prod", "ml", "spot"), "new job", None, _cost("spot", "spot-a", 395.1, 1.68, "spot"))
    headline = CostChange([removed, added]).headline()
    assert headline.startswith("this change adds 395.1 GPU-hours and removes 100.0 GPU-hours (net +295.1 GPU-hours)")
    assert "adds $664 and removes $173 (net +$491)" in headline


def test_jobs_without_a_price_are_named_not_counted_as_zero() -> None:
    unpriced = JobChange(("prod", "ml", "g6"), "new job", None, _cost("g6", "g6-a", 10.0, None))
    headline = CostChange([unpriced]).headline()
    assert "$0.00" not in headline and "net" not in headline.split(";")[1]
    assert headline == ("this change adds 10.0 GPU-hours and removes 0.0 GPU-hours (net +10.0 GPU-hours); "
                        "dollars (no price) unknown for 1 job (prod/ml/g6)")
