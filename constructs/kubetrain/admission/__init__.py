"""Admission feasibility: can a job's queue ever admit it, and can its pool ever hold it?

Every check reads plain manifests, the objects synth writes into dist/, so `kubetrain synth` (on the
fleet's objects as it builds them), `kubetrain plan` and `kubetrain diff` (on dist/) reach one verdict.
Nothing here imports cdk8s: `kubetrain plan` starts no Node.js.

    requests.py   what Kueue counts for a job: its pod sets and each pod's requests, in Kueue's units
    output/render.py    one cluster's queues, cohorts, flavors, topologies, pools and namespaces, read from manifests
    quota.py      Kueue's cohort tree: nominal quota, borrowing and lending limits, potentialAvailable
    flavors.py    Kueue's flavor assigner on an idle cluster: flavor matching, fitsResourceQuota, fungibility
    capacity.py   what a Karpenter pool can ever hold, in nodes and in one topology domain
    verdict.py    one job's verdict (fits, borrows, never) and the rules it breaks; each pool's demand
    rules.py      the rules (KT440-KT448)
    synth.py      the checks on a fleet being synthesized, reported with the user's field paths
    plan.py       `kubetrain plan`, and the verdicts `kubetrain diff` compares
"""
