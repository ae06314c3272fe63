"""Objects whose controllers create pods: batch Jobs and CronJobs, DaemonSets, Deployments, ReplicaSets,
StatefulSets, and Pods themselves.

Each validator checks the object as the API server does and returns what its controller will create from
it (a Job's pods, a CronJob's Jobs), which the caller validates in turn: a pod template is checked as the
pod the controller asks the API server to create. Sources: Kubernetes 1.33 pkg/apis/batch/validation and
pkg/apis/apps/validation, the Job controller's pod labels (pkg/apis/batch/types.go).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from typing import Any

from kubetrain.apiserver.apiserver_rules import DERIVED_NAMES, JOB, WORKLOADS
from kubetrain.apiserver.meta import selector_matches, validate_label_selector, validate_object_meta
from kubetrain.apiserver.pods import validate_pod_annotations, validate_pod_spec
from kubetrain.apiserver.report import Report, is_int
from kubetrain.model.created import JOB_NAME_LABELS, JOB_UID_LABELS, Created, pod_from_template
from kubetrain.model.names import (
    dns_1123_label_problem,
    dns_1123_subdomain_problem,
    label_value_problem,
    qualified_name_problem,
)

_EXIT_CODES_MAX = 255
_RULES_MAX = 20
_INDEXED_PARALLELISM_MAX = 100_000
_FAILED_INDEXES_MAX = 100_000
_COMPLETIONS_SOFT_LIMIT = 100_000
_PERCENT = re.compile(r"^([0-9]+)%$")


def validate_pod(pod: Mapping[str, Any], report: Report) -> list[Created]:
    """A Pod (committed, or created by a controller from a template)."""
    meta = pod.get("metadata") or {}
    validate_object_meta(meta, "Pod", dns_1123_subdomain_problem, report)
    spec = pod.get("spec") or {}
    if not report.checked_before(spec):
        before = len(report.found)
        validate_pod_spec(spec, "spec", report, is_pod=True)
        if len(report.found) == before:
            report.remember_valid(spec)
    if meta.get("annotations"):
        validate_pod_annotations(meta["annotations"], spec, report)
    return []


def _nonnegative(spec: Mapping[str, Any], fields: tuple[str, ...], path: str, report: Report, code: str) -> None:
    for field in fields:
        value = spec.get(field)
        if value is not None and value < 0:
            report.add(code, f"{path}.{field}", f"{value} must be greater than or equal to 0")


# -- batch Jobs -----------------------------------------------------------------------------------------

def validate_job(job: Mapping[str, Any], report: Report) -> list[Created]:
    meta = job.get("metadata") or {}
    name = meta.get("name") or ""
    validate_object_meta(meta, "Job", dns_1123_subdomain_problem, report)
    spec = job.get("spec") or {}
    template = spec.get("template") or {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    pod_spec = template.get("spec") or {}
    code = JOB.code
    if spec.get("manualSelector") is True:
        selector = spec.get("selector")
        if selector is None:
            report.add(code, "spec.selector", "required: manualSelector needs a selector")
        else:
            validate_label_selector(selector, "spec.selector", report, code)
            if not selector_matches(selector, labels):
                report.add(code, "spec.template.metadata.labels", "selector does not match the template's labels")
    else:
        if spec.get("selector") is not None:
            report.add(code, "spec.selector", "a Job generates its selector (its controller-uid): remove "
                       "spec.selector, or set manualSelector: true")
        for key in JOB_NAME_LABELS:
            if key in labels and labels[key] != name:
                report.add(code, f"spec.template.metadata.labels[{key}]", f"must be {name!r}: the Job controller sets "
                           f"{key} to the Job's name on its pods (its generated selector); remove the label")
        for key in JOB_UID_LABELS:
            if key in labels:
                report.add(code, f"spec.template.metadata.labels[{key}]", f"{key} is the Job's uid, which the Job "
                           "controller sets once the Job exists (its generated selector); remove the label")
        problem = label_value_problem(name) if name else None
        if problem:
            report.add(DERIVED_NAMES.code, "metadata.name", f"the Job controller labels its pods {JOB_NAME_LABELS[0]}="
                       f"<the Job's name>: {problem}")
    _job_spec(spec, pod_spec, report)
    completions = spec.get("completions", 1 if spec.get("parallelism") is None else None)
    if spec.get("completionMode") == "Indexed" and isinstance(completions, int) and completions > 0 and name and \
            not label_value_problem(name):  # else the job-name label already says the name is too long
        hostname = f"{name}-{completions - 1}"
        problem = dns_1123_label_problem(hostname)
        if problem:
            report.add(DERIVED_NAMES.code, "metadata.name", f"the Job controller names the hostname of its last pod "
                       f"{hostname!r}: {problem}")
    pod = pod_from_template(template, generate_name=f"{name}-")
    return [Created(pod, "the Job controller", source="spec.template", template_labels=frozenset(labels))]


def _job_spec(spec: Mapping[str, Any], pod_spec: Mapping[str, Any], report: Report) -> None:
    """validateJobSpec (the spec of a Job, or of a JobSet's or CronJob's Job template)."""
    code = JOB.code
    _nonnegative(spec, ("parallelism", "completions", "activeDeadlineSeconds", "backoffLimit",
                        "ttlSecondsAfterFinished", "backoffLimitPerIndex", "maxFailedIndexes"), "spec", report, code)
    per_index, max_failed = spec.get("backoffLimitPerIndex"), spec.get("maxFailedIndexes")
    completions, parallelism = spec.get("completions"), spec.get("parallelism")
    if completions is None and parallelism is None:  # the Job's defaulting (SetDefaults_Job): one pod
        completions = parallelism = 1
    if max_failed is not None and per_index is None:
        report.add(code, "spec.backoffLimitPerIndex", "required when maxFailedIndexes is specified")
    managed_by = spec.get("managedBy")
    if managed_by is not None and (len(managed_by) > 63 or "/" not in managed_by
                                   or dns_1123_subdomain_problem(managed_by.split("/", 1)[0])):
        report.add(code, "spec.managedBy", f"{managed_by!r} must be a domain-prefixed path of at most 63 characters "
                   "(e.g. kueue.x-k8s.io/multikueue)")
    mode = spec.get("completionMode", "NonIndexed")
    if mode not in ("NonIndexed", "Indexed"):
        report.add(code, "spec.completionMode", f"{mode!r}: supported values are NonIndexed, Indexed")
    if mode == "Indexed":
        if completions is None:
            report.add(code, "spec.completions", "required when completionMode is Indexed")
        if isinstance(parallelism, int) and parallelism > _INDEXED_PARALLELISM_MAX:
            report.add(code, "spec.parallelism", f"must be at most {_INDEXED_PARALLELISM_MAX} when completionMode is "
                       "Indexed")
        if isinstance(completions, int) and isinstance(max_failed, int) and max_failed > completions:
            report.add(code, "spec.maxFailedIndexes", f"{max_failed} must be at most completions ({completions})")
        if isinstance(max_failed, int) and max_failed > _FAILED_INDEXES_MAX:
            report.add(code, "spec.maxFailedIndexes", f"must be at most {_FAILED_INDEXES_MAX}")
        if isinstance(completions, int) and completions > _COMPLETIONS_SOFT_LIMIT and per_index is not None:
            if max_failed is None:
                report.add(code, "spec.maxFailedIndexes", "required when completions is above "
                           f"{_COMPLETIONS_SOFT_LIMIT}")
            if isinstance(parallelism, int) and parallelism > 10_000:
                report.add(code, "spec.parallelism", f"must be at most 10000 when completions are above "
                           f"{_COMPLETIONS_SOFT_LIMIT} with backoffLimitPerIndex")
    else:
        for field in ("backoffLimitPerIndex", "maxFailedIndexes"):
            if spec.get(field) is not None:
                report.add(code, f"spec.{field}", "requires completionMode Indexed")
    failure_policy = spec.get("podFailurePolicy")
    if failure_policy is not None:
        _pod_failure_policy(failure_policy, spec, pod_spec, report)
    success_policy = spec.get("successPolicy")
    if success_policy is not None:
        if mode != "Indexed":
            report.add(code, "spec.successPolicy", "requires completionMode Indexed")
        else:
            _success_policy(success_policy, completions if isinstance(completions, int) else 0, report)
    replacement = spec.get("podReplacementPolicy")
    if replacement is not None:
        allowed = ("Failed",) if failure_policy is not None else ("Failed", "TerminatingOrFailed")
        if replacement not in allowed:
            report.add(code, "spec.podReplacementPolicy", f"{replacement!r}: supported values are {', '.join(allowed)}"
                       + (" (with a podFailurePolicy)" if failure_policy is not None else ""))
    restart = pod_spec.get("restartPolicy") or "Always"
    if restart == "Always":
        report.add(code, "spec.template.spec.restartPolicy", "required: a Job's pods restart OnFailure or Never "
                   "(Always is the default, and a Job's pods must end)")
    elif restart not in ("OnFailure", "Never"):
        report.add(code, "spec.template.spec.restartPolicy", f"{restart!r}: supported values are OnFailure, Never")
    elif failure_policy is not None and restart != "Never":
        report.add(code, "spec.template.spec.restartPolicy", "only Never is supported when podFailurePolicy is "
                   "specified")


def _pod_failure_policy(policy: Mapping[str, Any], spec: Mapping[str, Any], pod_spec: Mapping[str, Any],
                        report: Report) -> None:
    code = JOB.code
    rules = policy.get("rules") or ()
    if len(rules) > _RULES_MAX:
        report.add(code, "spec.podFailurePolicy.rules", f"must have at most {_RULES_MAX} items")
    containers = {c.get("name") for c in (*(pod_spec.get("containers") or ()), *(pod_spec.get("initContainers") or ()))}
    for i, rule in enumerate(rules):
        where = f"spec.podFailurePolicy.rules[{i}]"
        action = rule.get("action")
        if not action:
            report.add(code, f"{where}.action", "required: one of Count, FailIndex, FailJob, Ignore")
        elif action == "FailIndex":
            if spec.get("backoffLimitPerIndex") is None:
                report.add(code, f"{where}.action", "FailIndex requires backoffLimitPerIndex")
        elif action not in ("Count", "FailJob", "Ignore"):
            report.add(code, f"{where}.action", f"{action!r}: supported values are Count, FailIndex, FailJob, Ignore")
        exits, conditions = rule.get("onExitCodes"), rule.get("onPodConditions") or ()
        if exits is not None and conditions:
            report.add(code, where, "specifying both onExitCodes and onPodConditions is not supported")
        if exits is None and not conditions:
            report.add(code, where, "specifying one of onExitCodes and onPodConditions is required")
        if exits is not None:
            _on_exit_codes(exits, f"{where}.onExitCodes", containers, report)
        if len(conditions) > _RULES_MAX:
            report.add(code, f"{where}.onPodConditions", f"must have at most {_RULES_MAX} items")
        for j, condition in enumerate(conditions):
            kind = condition.get("type") or ""
            problem = qualified_name_problem(kind) if kind else "required"
            if problem:
                report.add(code, f"{where}.onPodConditions[{j}].type", problem)
            status = condition.get("status")
            if status not in ("True", "False", "Unknown"):
                report.add(code, f"{where}.onPodConditions[{j}].status", f"{status!r}: supported values are True, "
                           "False, Unknown")


def _on_exit_codes(exits: Mapping[str, Any], path: str, containers: set[Any], report: Report) -> None:
    code = JOB.code
    operator = exits.get("operator")
    if operator not in ("In", "NotIn"):
        report.add(code, f"{path}.operator", f"{operator!r}: supported values are In, NotIn")
    container = exits.get("containerName")
    if container is not None and container not in containers:
        report.add(code, f"{path}.containerName", f"{container!r} must be one of the container or initContainer names "
                   "in the pod template")
    values = exits.get("values") or []
    if not values:
        report.add(code, f"{path}.values", "at least one value is required")
    elif len(values) > _EXIT_CODES_MAX:
        report.add(code, f"{path}.values", f"must have at most {_EXIT_CODES_MAX} items")
    seen: set[int] = set()
    for j, value in enumerate(values):
        if operator == "In" and value == 0:
            report.add(code, f"{path}.values[{j}]", "must not be 0 for the In operator (0 is success)")
        if value in seen:
            report.add(code, f"{path}.values[{j}]", f"Duplicate value: {value}")
        seen.add(value)
    if any(a > b for a, b in itertools.pairwise(values)):
        report.add(code, f"{path}.values", f"{values} must be ordered")


def _success_policy(policy: Mapping[str, Any], completions: int, report: Report) -> None:
    code = JOB.code
    rules = policy.get("rules") or ()
    if not rules:
        report.add(code, "spec.successPolicy.rules", "at least one rule must be specified")
    if len(rules) > _RULES_MAX:
        report.add(code, "spec.successPolicy.rules", f"must have at most {_RULES_MAX} items")
    for i, rule in enumerate(rules):
        where = f"spec.successPolicy.rules[{i}]"
        indexes, count = rule.get("succeededIndexes"), rule.get("succeededCount")
        if indexes is None and count is None:
            report.add(code, where, "at least one of succeededCount or succeededIndexes must be specified")
        total = 0
        if indexes is not None:
            if len(indexes) > 64 * 1024:
                report.add(code, f"{where}.succeededIndexes", "must be at most 65536 characters")
            try:
                total = indexes_count(indexes, completions)
            except ValueError as error:
                report.add(code, f"{where}.succeededIndexes", f"error parsing {indexes!r}: {error}")
        if count is not None:
            if count < 0:
                report.add(code, f"{where}.succeededCount", "must be greater than or equal to 0")
            if count > completions:
                report.add(code, f"{where}.succeededCount", f"must be at most {completions} (the completions)")
            if indexes is not None and count > total:
                report.add(code, f"{where}.succeededCount", f"must be at most {total} (the indexes in "
                           "succeededIndexes)")


def indexes_count(text: str, completions: int) -> int:
    """How many indexes an interval list like '0,2-5' names; ValueError as the batch validation words it."""
    if not text:
        return 0
    total, last = 0, -1
    for interval in text.split(","):
        limits = interval.split("-")
        if len(limits) > 2:
            raise ValueError(f"the fragment {interval!r} has more than two parts separated by '-'")
        try:
            bounds = [int(limit) for limit in limits]
        except ValueError:
            raise ValueError(f"cannot convert {interval!r} to integer indexes") from None
        for bound in bounds:
            if bound >= completions or bound < 0:
                raise ValueError(f"index {bound} is not below completions ({completions})")
        low, high = bounds[0], bounds[-1]
        if len(bounds) == 2 and low >= high:
            raise ValueError(f"non-increasing order in {interval!r}")
        if last >= low:
            raise ValueError(f"non-increasing order, previous: {last}, current: {low}")
        total += high - low + 1
        last = high
    return total


def validate_cron_job(cron_job: Mapping[str, Any], report: Report) -> list[Created]:
    meta = cron_job.get("metadata") or {}
    name = meta.get("name") or ""
    validate_object_meta(meta, "CronJob", dns_1123_subdomain_problem, report)
    if len(name) > 52:
        report.add(DERIVED_NAMES.code, "metadata.name", f"{len(name)} characters: the CronJob controller names its "
                   "Jobs <name>-<11 digits>, and a Job's name is at most 63 characters, so at most 52")
    spec = cron_job.get("spec") or {}
    if not spec.get("schedule"):
        report.add(JOB.code, "spec.schedule", "required")
    policy = spec.get("concurrencyPolicy", "Allow")
    if policy not in ("Allow", "Forbid", "Replace"):
        report.add(JOB.code, "spec.concurrencyPolicy", f"{policy!r}: supported values are Allow, Forbid, Replace")
    _nonnegative(spec, ("startingDeadlineSeconds", "successfulJobsHistoryLimit", "failedJobsHistoryLimit"), "spec",
                 report, JOB.code)
    job_template = spec.get("jobTemplate") or {}
    job_spec = job_template.get("spec") or {}
    if job_spec.get("selector") is not None:
        report.add(JOB.code, "spec.jobTemplate.spec.selector", "the selector of a CronJob's Jobs is generated: "
                   "remove it")
    if job_spec.get("manualSelector") is True:
        report.add(JOB.code, "spec.jobTemplate.spec.manualSelector", "supported values are unset and false")
    job_meta = job_template.get("metadata") or {}
    job = {"apiVersion": "batch/v1", "kind": "Job", "spec": {k: v for k, v in job_spec.items()
                                                             if k not in ("selector", "manualSelector")},
           "metadata": {"name": f"{name[:52]}-29000000", "labels": job_meta.get("labels") or {},
                        "annotations": job_meta.get("annotations") or {}}}
    return [Created(job, "the CronJob controller", source="spec.jobTemplate",
                    template_labels=frozenset(job_meta.get("labels") or ()))]


# -- apps: DaemonSet, Deployment, ReplicaSet, StatefulSet -----------------------------------------------

def _int_or_percent(value: Any, path: str, report: Report, at_most_100: bool) -> int | None:
    """An IntOrString of a rollout: a non-negative count, or 'N%'. Returns the count or percentage."""
    if is_int(value):
        if value < 0:
            report.add(WORKLOADS.code, path, f"{value} must be greater than or equal to 0")
        return value
    match = _PERCENT.match(value) if isinstance(value, str) else None
    if not match:
        report.add(WORKLOADS.code, path, f"{value!r} must be an integer or a percentage (e.g. '25%')")
        return None
    percent = int(match.group(1))
    if at_most_100 and percent > 100:
        report.add(WORKLOADS.code, path, f"{value!r} must not be greater than 100%")
    return percent


def _rolling_update(rolling: Mapping[str, Any], path: str, report: Report) -> None:
    unavailable = _int_or_percent(rolling.get("maxUnavailable", 1), f"{path}.maxUnavailable", report, True)
    surge = _int_or_percent(rolling.get("maxSurge", 0), f"{path}.maxSurge", report, False)
    if unavailable == 0 and surge == 0:
        report.add(WORKLOADS.code, f"{path}.maxUnavailable", "may not be 0 when maxSurge is 0")


def validate_workload(obj: Mapping[str, Any], report: Report) -> list[Created]:
    """DaemonSet, Deployment, ReplicaSet, StatefulSet: a selector over a template whose pods restart Always."""
    kind = obj.get("kind")
    code = WORKLOADS.code
    meta = obj.get("metadata") or {}
    name = meta.get("name") or ""
    validate_object_meta(meta, kind, dns_1123_subdomain_problem, report)
    spec = obj.get("spec") or {}
    template = spec.get("template") or {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    pod_spec = template.get("spec") or {}
    selector = spec.get("selector")
    if selector is None:
        report.add(code, "spec.selector", "required")
    else:
        validate_label_selector(selector, "spec.selector", report, code)
        if not (selector.get("matchLabels") or selector.get("matchExpressions")):
            report.add(code, "spec.selector", f"an empty selector is invalid for a {kind}")
        elif not selector_matches(selector, labels):
            report.add(code, "spec.template.metadata.labels", "selector does not match the template's labels")
    restart = pod_spec.get("restartPolicy") or "Always"
    if restart != "Always":
        report.add(code, "spec.template.spec.restartPolicy", f"{restart!r}: a {kind}'s pods restart Always")
    if pod_spec.get("activeDeadlineSeconds") is not None:
        report.add(code, "spec.template.spec.activeDeadlineSeconds", f"not supported in a {kind}")
    _nonnegative(spec, ("replicas", "minReadySeconds", "revisionHistoryLimit"), "spec", report, code)
    if kind == "DaemonSet":
        strategy = spec.get("updateStrategy") or {}
        if strategy.get("type", "RollingUpdate") not in ("RollingUpdate", "OnDelete"):
            report.add(code, "spec.updateStrategy.type", f"{strategy.get('type')!r}: supported values are "
                       "RollingUpdate, OnDelete")
        if strategy.get("rollingUpdate"):
            _rolling_update(strategy["rollingUpdate"], "spec.updateStrategy.rollingUpdate", report)
    elif kind == "Deployment":
        strategy = spec.get("strategy") or {}
        kind_of = strategy.get("type", "RollingUpdate")
        if kind_of not in ("RollingUpdate", "Recreate"):
            report.add(code, "spec.strategy.type", f"{kind_of!r}: supported values are RollingUpdate, Recreate")
        elif kind_of == "Recreate" and strategy.get("rollingUpdate") is not None:
            report.add(code, "spec.strategy.rollingUpdate", "may not be specified when strategy type is Recreate")
        if strategy.get("rollingUpdate"):
            _rolling_update(strategy["rollingUpdate"], "spec.strategy.rollingUpdate", report)
        deadline, ready = spec.get("progressDeadlineSeconds"), spec.get("minReadySeconds", 0)
        if deadline is not None and deadline <= ready:
            report.add(code, "spec.progressDeadlineSeconds", "must be greater than minReadySeconds")
    elif kind == "StatefulSet":
        policy = spec.get("podManagementPolicy", "OrderedReady")
        if policy not in ("OrderedReady", "Parallel"):
            report.add(code, "spec.podManagementPolicy", f"{policy!r}: supported values are OrderedReady, Parallel")
        replicas = spec.get("replicas", 1)
        if name and isinstance(replicas, int) and replicas > 0:
            pod_name = f"{name}-{replicas - 1}"
            problem = label_value_problem(pod_name) or dns_1123_label_problem(pod_name)
            if problem:
                report.add(DERIVED_NAMES.code, "metadata.name", f"the StatefulSet controller names its last pod "
                           f"{pod_name!r} and labels it statefulset.kubernetes.io/pod-name with it: {problem}")
    pod = pod_from_template(template, generate_name=f"{name}-")
    return [Created(pod, f"the {kind} controller", source="spec.template", template_labels=frozenset(labels))]
