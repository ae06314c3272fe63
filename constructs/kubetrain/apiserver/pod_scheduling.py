"""Where a pod may run, as the API server checks it: tolerations, node and pod (anti-)affinity, topology spread
constraints (Kubernetes 1.33 pkg/apis/core/validation/validation.go: validateTolerations, validateAffinity,
validateNodeSelectorTerm, validateTopologySpreadConstraints). Called by the pod's checks (pods.py), by the
PersistentVolume's node affinity (core_objects.py) and by a job's affinity props (kubetrain.jobs.affinity).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubetrain.apiserver.apiserver_rules import AFFINITY, TOLERATIONS
from kubetrain.apiserver.meta import validate_label_selector, validate_requirement
from kubetrain.apiserver.report import Report, check_value, is_int
from kubetrain.model.names import (
    dns_1123_label_problem,
    dns_1123_subdomain_problem,
    label_value_problem,
    qualified_name_problem,
)

_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def validate_tolerations(tolerations: Any, path: str, report: Report, spec: Any = None) -> None:
    """ValidateTolerations."""
    code = TOLERATIONS.code
    for i, toleration in enumerate(tolerations):
        where = f"{path}[{i}]"
        key = toleration.get("key") or ""
        operator = toleration.get("operator") or "Equal"
        value = toleration.get("value") or ""
        effect = toleration.get("effect") or ""
        if key:
            check_value(qualified_name_problem, key, f"{where}.key", report, code)
        elif operator != "Exists":
            report.add(code, f"{where}.operator", f"{operator!r}: operator must be Exists when key is empty (which "
                       "tolerates every taint)")
        if toleration.get("tolerationSeconds") is not None and effect != "NoExecute":
            report.add(code, f"{where}.effect", f"{effect!r}: effect must be NoExecute when tolerationSeconds is set")
        if operator == "Equal":
            if label_value_problem(value):
                report.add(code, f"{where}.value", label_value_problem(value))
        elif operator == "Exists":
            if value:
                report.add(code, f"{where}.operator", f"value {value!r} must be empty when operator is Exists")
        else:
            report.add(code, f"{where}.operator", f"{operator!r}: supported values are Equal, Exists")
        if effect and effect not in _EFFECTS:
            report.add(code, f"{where}.effect", f"{effect!r}: supported values are {', '.join(_EFFECTS)}")


def validate_affinity(affinity: Mapping[str, Any], path: str, report: Report, spec: Any = None) -> None:
    """validateAffinity, plus what no node can satisfy (an empty term, a Gt/Lt value that is no integer)."""
    code = AFFINITY.code
    node = affinity.get("nodeAffinity")
    if node:
        required = node.get("requiredDuringSchedulingIgnoredDuringExecution")
        if required is not None:
            where = f"{path}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
            terms = required.get("nodeSelectorTerms") or ()
            if not terms:
                report.add(code, f"{where}.nodeSelectorTerms", "required: must have at least one node selector term")
            for i, term in enumerate(terms):
                node_selector_term(term, f"{where}.nodeSelectorTerms[{i}]", report, required=True)
        for i, preferred in enumerate(node.get("preferredDuringSchedulingIgnoredDuringExecution") or ()):
            where = f"{path}.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
            _weight(preferred.get("weight"), f"{where}.weight", report)
            node_selector_term(preferred.get("preference") or {}, f"{where}.preference", report, required=False)
    for kind in ("podAffinity", "podAntiAffinity"):
        pod = affinity.get(kind)
        if not pod:
            continue
        for i, term in enumerate(pod.get("requiredDuringSchedulingIgnoredDuringExecution") or ()):
            _pod_affinity_term(term, f"{path}.{kind}.requiredDuringSchedulingIgnoredDuringExecution[{i}]", report)
        for i, weighted in enumerate(pod.get("preferredDuringSchedulingIgnoredDuringExecution") or ()):
            where = f"{path}.{kind}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
            _weight(weighted.get("weight"), f"{where}.weight", report)
            _pod_affinity_term(weighted.get("podAffinityTerm") or {}, f"{where}.podAffinityTerm", report)


def node_selector_term(term: Mapping[str, Any], path: str, report: Report, required: bool) -> None:
    """ValidateNodeSelectorTerm. A required term's values are label values (a preferred one's are not checked:
    the API server lets them through) and an empty required term matches no node, so the pod is never placed."""
    code, values_are_labels = AFFINITY.code, required
    expressions, fields = term.get("matchExpressions") or (), term.get("matchFields") or ()
    if required and not expressions and not fields:
        report.add(code, path, "an empty node selector term matches no node: give it matchExpressions or matchFields")
    for j, requirement in enumerate(expressions):
        where = f"{path}.matchExpressions[{j}]"
        validate_requirement(requirement, where, report, code, ("In", "NotIn"), ("Exists", "DoesNotExist"),
                             values_are_labels, single_value=("Gt", "Lt"))
        values = requirement.get("values") or ()
        if requirement.get("operator") in ("Gt", "Lt") and len(values) == 1 and not _is_integer(values[0]):
            report.add(code, f"{where}.values[0]", f"{values[0]!r}: Gt and Lt compare the node label as an integer, so "
                       "the value must be one (the scheduler never matches this)")
    for j, requirement in enumerate(fields):
        where = f"{path}.matchFields[{j}]"
        if requirement.get("operator") not in ("In", "NotIn"):
            report.add(code, f"{where}.operator", f"{requirement.get('operator')!r} is not a valid operator for a node "
                       "field selector (In, NotIn)")
        elif len(requirement.get("values") or ()) != 1:
            report.add(code, f"{where}.values", "must be exactly one value for a node field selector")
        if requirement.get("key") != "metadata.name":
            report.add(code, f"{where}.key", f"{requirement.get('key')!r} is not a valid field selector key "
                       "(metadata.name)")
        else:
            for k, value in enumerate(requirement.get("values") or ()):
                check_value(dns_1123_subdomain_problem, value, f"{where}.values[{k}]", report, code)


def _is_integer(value: Any) -> bool:
    try:
        int(value, 10)
    except (TypeError, ValueError):
        return False
    return True


def _weight(weight: Any, path: str, report: Report) -> None:
    if not (is_int(weight) and 1 <= weight <= 100):
        report.add(AFFINITY.code, path, f"{weight!r} must be in the range 1-100")


def _pod_affinity_term(term: Mapping[str, Any], path: str, report: Report) -> None:
    code = AFFINITY.code
    selector = term.get("labelSelector")
    validate_label_selector(selector, f"{path}.labelSelector", report, code)
    validate_label_selector(term.get("namespaceSelector"), f"{path}.namespaceSelector", report, code)
    for i, namespace in enumerate(term.get("namespaces") or ()):
        check_value(dns_1123_label_problem, namespace, f"{path}.namespaces[{i}]", report, code)
    match, mismatch = term.get("matchLabelKeys") or (), term.get("mismatchLabelKeys") or ()
    for field, keys in (("matchLabelKeys", match), ("mismatchLabelKeys", mismatch)):
        if keys and selector is None:
            report.add(code, f"{path}.{field}", "must not be specified when labelSelector is not set")
        for i, key in enumerate(keys):
            check_value(qualified_name_problem, key, f"{path}.{field}[{i}]", report, code)
    for i, key in enumerate(match):
        if key in mismatch:
            report.add(code, f"{path}.matchLabelKeys[{i}]", f"{key!r} exists in both matchLabelKeys and "
                       "mismatchLabelKeys")
    topology = term.get("topologyKey")
    if not topology:
        report.add(code, f"{path}.topologyKey", "required: can not be empty (e.g. kubernetes.io/hostname)")
    else:
        check_value(qualified_name_problem, topology, f"{path}.topologyKey", report, code)


def validate_topology_spread(constraints: Any, path: str, report: Report, spec: Any = None) -> None:
    code = AFFINITY.code
    seen: set[tuple[Any, Any]] = set()
    for i, constraint in enumerate(constraints):
        where = f"{path}[{i}]"
        skew, key = constraint.get("maxSkew"), constraint.get("topologyKey")
        action = constraint.get("whenUnsatisfiable")
        if not (is_int(skew) and skew > 0):
            report.add(code, f"{where}.maxSkew", f"{skew!r} must be greater than zero")
        if not key:
            report.add(code, f"{where}.topologyKey", "required: can not be empty")
        if action not in ("DoNotSchedule", "ScheduleAnyway"):
            report.add(code, f"{where}.whenUnsatisfiable", f"{action!r}: supported values are DoNotSchedule, "
                       "ScheduleAnyway")
        if (key, action) in seen:
            report.add(code, where, f"Duplicate value: {{{key}, {action}}}")
        seen.add((key, action))
        domains = constraint.get("minDomains")
        if domains is not None:
            if not (is_int(domains) and domains > 0):
                report.add(code, f"{where}.minDomains", f"{domains!r} must be greater than zero")
            if action != "DoNotSchedule":
                report.add(code, f"{where}.minDomains", "can only be used with whenUnsatisfiable DoNotSchedule")
        for policy in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            if constraint.get(policy) not in (None, "Honor", "Ignore"):
                report.add(code, f"{where}.{policy}", f"{constraint.get(policy)!r}: supported values are Honor, Ignore")
        selector = constraint.get("labelSelector")
        keys = constraint.get("matchLabelKeys") or ()
        if keys and selector is None:
            report.add(code, f"{where}.matchLabelKeys", "must not be specified when labelSelector is not set")
        selector_keys = set((selector or {}).get("matchLabels") or ()) | {
            e.get("key") for e in (selector or {}).get("matchExpressions") or ()}
        for j, label in enumerate(keys):
            check_value(qualified_name_problem, label, f"{where}.matchLabelKeys[{j}]", report, code)
            if label in selector_keys:
                report.add(code, f"{where}.matchLabelKeys[{j}]", f"{label!r} exists in both matchLabelKeys and "
                           "labelSelector")
        validate_label_selector(selector, f"{where}.labelSelector", report, code)
