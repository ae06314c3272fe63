"""When will it start: a discrete-event simulation of Kueue's scheduler over time, on a cluster's own objects.

A port of Kueue v0.19.2's scheduler, built on the idle-cluster admission port (kubetrain.admission: the
cohort tree's quotas, the flavor matching):

    workload_state.py  one workload: its pod sets, priority, queue, duration, and what happens to it
    ledger.py          the cohort tree with usage: available, borrowing levels, dominant resource share
    assignment.py      the flavor assigner under load: Fit, Preempt or NoFit per flavor, fungibility
    preemption.py      classical and fair-sharing preemption: candidates and their order
    pending.py         each ClusterQueue's pending heap, StrictFIFO/BestEffortFIFO, inadmissible parking
    cycle.py           one scheduling cycle: nominate the heads, order them, admit, preempt, skip
    api_writes.py      Kueue's API writes through its client's rate limiter (opt-in: latency of admissions)
    simulation.py      events over time: arrivals, cycles, pools' nodes, finishes, preemptions

and what a user gives it and gets from it:

    fleet_runs.py      the fleet's queued runs from dist/: queue, priority class, kubetrain cost's duration
    background.py      the load not declared here: recurring workload classes (YAML), past submissions (CSV)
    forecast.py        replicas with drawn durations: each run's P50/P90 admission, wait, finish, preemptions
    simulate_command.py  `kubetrain simulate`: dist/ and the user's inputs to forecasts
    timeline_picture.py  the timeline as PNG or SVG (matplotlib, imported only to draw)
    wait_change.py     `kubetrain diff`: whom a change makes wait longer or preempts, by how much, at what cost

Left out of the port: topology-aware scheduling (placement in topology domains; a job's nodes are counted per
pool instead), admission checks and provisioning requests, waitForPodsReady, partial admission, elastic workload
slices, MultiKueue, admission fair sharing (LocalQueue usage), preemption gates, the last-tried flavor Kueue
remembers across cycles (FlavorFungibilityPreserveScanProgress), requeue backoff, the eviction's pod termination
time (victims leave at once, so no candidate is ever an evicted workload not yet gone), alpha feature gates that
are off by default (PrioritizePreemptorWorkloads), fair sharing's preemption strategies other than Kueue's
default (LessThanOrEqualToFinalShare, then LessThanInitialShare: fairSharing.preemptionStrategies is the Kueue
Configuration's, which a fleet does not declare), and Karpenter consolidation (freed nodes stay for the next
job). Within a cycle every admission is at the cycle's start; the cycle then takes its time. The controllers'
latencies are 0 unless asked for (right for runs of hours): the requeuer's 1 s batch (`requeue_seconds`), the
client's rate limiter (`api_writes`), a cycle's cost per head; Kueue's scheduler performance scenario sets them
(bench/schedule_kueue_baseline.py). Of Kueue's Workload writes only the scheduler's are counted (admissions,
evictions, pending heads' conditions), not the workload controller's that share their limiter.
"""
