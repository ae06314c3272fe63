"""Kubernetes' own Job validation cases, as data: kubernetes/kubernetes@ddb4da8d0ac4 pkg/apis/batch/validation/validation_test.go
TestValidateJob, each case transcribed as the Job a user commits and checked against kubetrain's API-server check.

The upstream test validates a Job after the API server's create strategy has run, so its "generated selector" cases
carry the selector and the controller-uid/job-name labels the strategy adds; the committed Job has neither (the
API server generates them, and refuses a template that sets controller-uid itself, KT618). Those rows are the
committed form; their `note` says so. The test also validates the Job as written, where the API server first
applies batch/v1 defaults (a Job without completions and parallelism gets one of each).
"""

from __future__ import annotations

import copy

import pytest
from conformance_rows import K8S, at, Row, check

SOURCE = at("ddb4da8d0ac4819ba21a7a4c65831f3d604d0989", "pkg/apis/batch/validation/validation_test.go")
Case = Row.citing(SOURCE)
MANUAL = {"matchLabels": {"a": "b"}}
COMMITTED = "committed form: the API server generates the selector and its controller-uid/job-name labels"


def job(spec: dict | None = None, *, manual: bool = False, labels: dict | None = None,
        restart: str = "OnFailure") -> dict:
    """The upstream test's Job "myjob": a generated selector (nothing in the committed Job), or with `manual` the
    selector {a: b} with manualSelector and the template's labels {a: b}."""
    template_labels = labels if labels is not None else (dict(MANUAL["matchLabels"]) if manual else {})
    body: dict = {"template": {"metadata": {"labels": template_labels} if template_labels else {},
                               "spec": {"restartPolicy": restart, "dnsPolicy": "ClusterFirst", "containers": [
                                   {"name": "abc", "image": "image", "imagePullPolicy": "IfNotPresent",
                                    "terminationMessagePolicy": "File"}]}}}
    if manual:
        body.update(selector=copy.deepcopy(MANUAL), manualSelector=True)
    body.update(spec or {})
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "myjob", "namespace": "default"},
            "spec": body}


ROWS = [
    Case("TestValidateJob", "valid manual selector", job(manual=True), None),
    Case("TestValidateJob", "valid generated selector", job(), None, note=COMMITTED),
    Case("TestValidateJob", "valid NonIndexed completion mode", job({"completionMode": "NonIndexed"}), None,
         note=COMMITTED),
    Case("TestValidateJob", "valid Indexed completion mode", job(
        {"completionMode": "Indexed", "completions": 2, "parallelism": 100000}), None, note=COMMITTED),
    Case("TestValidateJob", "spec.parallelism:must be greater than or equal to 0", job({"parallelism": -1}),
         "spec.parallelism"),
    Case("TestValidateJob", "spec.completions:must be greater than or equal to 0", job({"completions": -1}),
         "spec.completions"),
    Case("TestValidateJob", "spec.activeDeadlineSeconds:must be greater than or equal to 0", job(
        {"activeDeadlineSeconds": -1}), "spec.activeDeadlineSeconds"),
    Case("TestValidateJob", "spec.selector:Required value", job({"manualSelector": True}), "spec.selector",
         note="committed form: a selector is required when the Job does not let the API server generate it"),
    Case("TestValidateJob", "spec.template.metadata.labels: `selector` does not match template `labels` (y: z)", job(
        manual=True, labels={"y": "z"}), "spec.template.metadata.labels"),
    Case("TestValidateJob", "spec.template.metadata.labels: `selector` does not match template `labels` "
         "(controller-uid)", job(manual=True, labels={"controller-uid": "4d5e6f"}), "spec.template.metadata.labels"),
    Case("TestValidateJob", "spec.template.spec.restartPolicy: Required value", job(manual=True, restart="Always"),
         "spec.template.spec.restartPolicy"),
    Case("TestValidateJob", "spec.template.spec.restartPolicy: Unsupported value", job(manual=True, restart="Invalid"),
         "spec.template.spec.restartPolicy"),
    Case("TestValidateJob", "spec.ttlSecondsAfterFinished: must be greater than or equal to 0", job(
        {"ttlSecondsAfterFinished": -1}), "spec.ttlSecondsAfterFinished"),
    Case("TestValidateJob", "spec.completions: Required value: when completion mode is Indexed", job(
        {"completionMode": "Indexed"}), None,
         note="defaulting: the test validates the internal Job as written; the API server first defaults a batch/v1 "
              "Job without completions and parallelism to one of each (SetDefaults_Job), which this Job then has"),
    Case("TestValidateJob", "spec.completions: Required value: when completion mode is Indexed (with parallelism)",
         job({"completionMode": "Indexed", "parallelism": 2}), "spec.completions",
         note="the same case with parallelism set, so that defaulting leaves completions unset as the test has it"),
    Case("TestValidateJob", "spec.parallelism: must be less than or equal to 100000 when completion mode is Indexed",
         job({"completionMode": "Indexed", "completions": 2, "parallelism": 100001}), "spec.parallelism"),
]


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_kubernetes_job_validation_case(row: Row):
    check(row)
