"""`kubetrain plan` against Kueue's own flavor-assigner cases (tests/conformance/kueue_flavor_assigner.py): each
row's objects are written as dist/ holds them and planned in this process, as `kubetrain plan` plans dist/."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from conformance.kueue_flavor_assigner import ROWS, Row
from kubetrain.admission.plan_command import plan_files


def workload(pod_sets: list[dict[str, Any]], namespace: str) -> dict[str, Any]:
    """One pod set: an indexed batch Job; two: a PyTorchJob, whose Master and Worker Kueue takes in that order."""
    metadata = {"name": "job", "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "lq"}}
    if len(pod_sets) == 1:
        [only] = pod_sets
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata,
                "spec": {"parallelism": only["count"], "completions": only["count"], "completionMode": "Indexed",
                         "suspend": True, "template": only["template"]}}
    master, worker = pod_sets
    replicas = {"Master": {"replicas": master["count"], "template": master["template"]},
                "Worker": {"replicas": worker["count"], "template": worker["template"]}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": metadata,
            "spec": {"pytorchReplicaSpecs": replicas}}


def dist(row: Row) -> dict[str, bytes]:
    """The row as synth lays out dist/: <cluster>/<namespace or _cluster>/<Kind>.<name>.yaml."""
    local_queue = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                   "metadata": {"name": "lq", "namespace": row.namespace}, "spec": {"clusterQueue": row.cluster_queue}}
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": row.namespace}}
    files = {}
    for obj in [namespace, *row.objects, local_queue, workload(row.pod_sets, row.namespace)]:
        folder = obj["metadata"].get("namespace") or "_cluster"
        files[f"c/{folder}/{obj['kind']}.{obj['metadata']['name']}.yaml"] = yaml.safe_dump(obj).encode()
    return files


def test_the_table_is_as_the_issue_asks():
    assert len(ROWS) >= 30
    assert len({(r.test, r.case) for r in ROWS}) == len(ROWS)
    assert {r.verdict for r in ROWS} == {"fits", "borrows", "never"}
    assert all(r.repository == "kubernetes-sigs/kueue" and r.tag == "v0.19.2" and r.file.endswith("_test.go")
               for r in ROWS)


@pytest.mark.parametrize("row", ROWS, ids=[f"{r.test}/{r.case}" for r in ROWS])
def test_plan_agrees_with_kueue(row: Row):
    [plan] = plan_files(dist(row))[0]
    assert plan.verdict == row.verdict, (row.source, [(r.code, r.message) for r in plan.reasons])
    if row.verdict == "never":
        assert row.code in {r.code for r in plan.reasons}, (row.source, [r.code for r in plan.reasons])
    else:
        assert plan.flavor == row.flavor, row.source
        assert {r.code for r in plan.reasons} == ({"KT442"} if row.verdict == "borrows" else set()), row.source
