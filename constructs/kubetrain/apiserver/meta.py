"""Object metadata, labels, annotations and label selectors, as apimachinery validates them.

Sources: k8s.io/apimachinery v0.33 pkg/api/validation/objectmeta.go (ValidateObjectMeta, annotations and
their 256 KiB total), pkg/apis/meta/v1/validation (ValidateLabels, ValidateLabelSelector) and
pkg/util/validation (the name formats, in kubetrain.model.names).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kubetrain.apiserver.apiserver_rules import METADATA
from kubetrain.apiserver.report import Report
from kubetrain.model.names import dns_1123_label_problem, label_value_problem, qualified_name_problem

NameCheck = Callable[[str], "str | None"]
ANNOTATIONS_LIMIT = 256 * 1024  # apimachinery TotalAnnotationSizeLimitB
_STANDARD_FINALIZERS = {"kubernetes", "orphan", "foregroundDeletion"}


def validate_object_meta(meta: Any, kind: str, name_check: NameCheck, report: Report, *, code: str = METADATA.code,
                         core_finalizers: bool = False) -> None:
    """ValidateObjectMeta. An object applied from git needs a fixed name; one a controller creates may be
    named by generateName."""
    if not isinstance(meta, dict):
        return
    committed = report.committed
    name = meta.get("name")
    if committed and meta.get("generateName") is not None:
        report.add(code, "metadata.generateName", "an object synced from git needs a fixed name: generateName makes "
                   "a new object on every apply (Argo CD and kubectl apply refuse it); set metadata.name")
    if isinstance(name, str) and name:
        problem = name_check(name)
        if problem:
            report.add(code, "metadata.name", f"{problem}, as a {kind}'s name must be")
    elif committed or not meta.get("generateName"):
        report.add(code, "metadata.name", "required: the object has no name")
    namespace = meta.get("namespace")
    if isinstance(namespace, str) and namespace and dns_1123_label_problem(namespace):
        report.add(code, "metadata.namespace", dns_1123_label_problem(namespace))
    labels = meta.get("labels")
    if labels:
        validate_labels(labels, "metadata.labels", report, code)
    annotations = meta.get("annotations")
    if annotations:
        validate_annotations(annotations, "metadata.annotations", report, code)
    for i, finalizer in enumerate(meta.get("finalizers") or ()):
        problem = qualified_name_problem(finalizer) if isinstance(finalizer, str) else "must be a string"
        if problem is None and core_finalizers and "/" not in finalizer and finalizer not in _STANDARD_FINALIZERS:
            problem = f"{finalizer!r} is neither a standard finalizer name nor fully qualified (example.com/name)"
        if problem:
            report.add(code, f"metadata.finalizers[{i}]", problem)
    for i, owner in enumerate(meta.get("ownerReferences") or ()):
        for field in ("apiVersion", "kind", "name", "uid"):
            if not (owner or {}).get(field):
                report.add(code, f"metadata.ownerReferences[{i}].{field}", "required")


def validate_labels(labels: Mapping[str, Any], path: str, report: Report, code: str) -> None:
    for key, value in labels.items():
        problem = qualified_name_problem(key) if isinstance(key, str) else f"{key!r} is not a string"
        if problem is None:
            problem = label_value_problem(value) if isinstance(value, str) else f"{value!r} is not a string"
        if problem:
            report.add(code, f"{path}[{key}]", problem)


def annotations_size(annotations: Mapping[str, Any]) -> int:
    """Bytes of keys and values (UTF-8), as the API server counts them against its 256 KiB limit."""
    return sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items()
               if isinstance(k, str) and isinstance(v, str))


def validate_annotations(annotations: Mapping[str, Any], path: str, report: Report, code: str) -> None:
    for key in annotations:
        problem = qualified_name_problem(key.lower()) if isinstance(key, str) else f"{key!r} is not a string"
        if problem:
            report.add(code, f"{path}[{key}]", problem)
    # Characters count at most 4 bytes in UTF-8: count bytes only when that could pass the limit.
    if sum(map(len, annotations)) + sum(len(v) for v in annotations.values() if isinstance(v, str)) * 4 <= \
            ANNOTATIONS_LIMIT:
        return
    size = annotations_size(annotations)
    if size > ANNOTATIONS_LIMIT:
        report.add(code, path, f"the annotations total {size} bytes; the API server takes at most {ANNOTATIONS_LIMIT} "
                   "(256 KiB)")


def validate_label_selector(selector: Any, path: str, report: Report, code: str,
                            values_are_labels: bool = True) -> None:
    """ValidateLabelSelector: matchLabels as labels; In/NotIn with values, Exists/DoesNotExist without."""
    if not isinstance(selector, dict):
        return
    if selector.get("matchLabels"):
        validate_labels(selector["matchLabels"], f"{path}.matchLabels", report, code)
    for i, requirement in enumerate(selector.get("matchExpressions") or ()):
        validate_requirement(requirement, f"{path}.matchExpressions[{i}]", report, code,
                             ("In", "NotIn"), ("Exists", "DoesNotExist"), values_are_labels)


def validate_requirement(requirement: Mapping[str, Any], path: str, report: Report, code: str,
                         with_values: tuple[str, ...], without_values: tuple[str, ...],
                         values_are_labels: bool = True, single_value: tuple[str, ...] = ()) -> None:
    """A selector requirement: its operator decides whether it takes values."""
    operator, values = requirement.get("operator"), requirement.get("values") or []
    if operator in with_values:
        if not values:
            report.add(code, f"{path}.values", f"required: operator {operator} needs at least one value")
    elif operator in without_values:
        if values:
            report.add(code, f"{path}.values", f"operator {operator} takes no values")
    elif operator in single_value:
        if len(values) != 1:
            report.add(code, f"{path}.values", f"operator {operator} takes exactly one value")
    else:
        known = ", ".join((*with_values, *without_values, *single_value))
        report.add(code, f"{path}.operator", f"{operator!r} is not a selector operator ({known})")
    key = requirement.get("key")
    problem = qualified_name_problem(key) if isinstance(key, str) else "required: a label key"
    if problem:
        report.add(code, f"{path}.key", problem)
    if values_are_labels:
        for j, value in enumerate(values):
            problem = label_value_problem(value) if isinstance(value, str) else f"{value!r} is not a string"
            if problem:
                report.add(code, f"{path}.values[{j}]", problem)


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Whether a LabelSelector (matchLabels and matchExpressions) selects `labels`, as apimachinery's
    LabelSelectorAsSelector reads it: a nil selector selects nothing, an empty one everything."""
    if selector is None:
        return False
    if any(labels.get(key) != value for key, value in (selector.get("matchLabels") or {}).items()):
        return False
    for requirement in selector.get("matchExpressions") or ():
        key, operator, values = requirement.get("key"), requirement.get("operator"), requirement.get("values") or ()
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True
