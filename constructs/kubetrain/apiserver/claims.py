"""A PersistentVolumeClaim's spec, as the API server validates it: a claim of its own, or the claim template of a
pod's ephemeral volume (the claim the ephemeral-volume controller creates, named <pod>-<volume>).

Written after Kubernetes 1.33 pkg/apis/core/validation/validation.go (ValidatePersistentVolumeClaimSpec,
ValidatePersistentVolumeClaimTemplate, ValidateTemplateObjectMeta). The caller says which rule a problem is.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from kubetrain.apiserver.meta import validate_annotations, validate_label_selector, validate_labels
from kubetrain.apiserver.report import Report
from kubetrain.model.names import dns_1123_subdomain_problem
from kubetrain.model.quantity import parse_quantity

ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
_TEMPLATE_METADATA = frozenset(("labels", "annotations"))


def _storage(text: Any) -> Decimal | None:
    try:
        return parse_quantity(text)
    except ValueError:
        return None


def validate_access_modes(modes: Any, path: str, report: Report, code: str) -> None:
    if not modes:
        report.add(code, path, "required: at least one access mode (e.g. [ReadWriteOnce])")
    for mode in modes or ():
        if mode not in ACCESS_MODES:
            report.add(code, path, f"{mode!r}: supported values are {', '.join(ACCESS_MODES)}")
    if "ReadWriteOncePod" in (modes or ()) and len(set(modes)) > 1:
        report.add(code, path, "may not use ReadWriteOncePod with other access modes")


def validate_claim_spec(spec: Mapping[str, Any], path: str, report: Report, code: str) -> None:
    """ValidatePersistentVolumeClaimSpec: access modes, a storage request above zero, class names, volume mode
    and data sources."""
    validate_access_modes(spec.get("accessModes"), f"{path}.accessModes", report, code)
    validate_label_selector(spec.get("selector"), f"{path}.selector", report, code)
    storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    where = f"{path}.resources.requests[storage]"
    if storage is None:
        report.add(code, where, "required: a claim requests its size (e.g. storage: 100Gi)")
    else:
        amount = _storage(storage)
        if amount is None or amount <= 0:
            report.add(code, where, f"{storage!r} must be a quantity greater than zero")
    for field in ("storageClassName", "volumeAttributesClassName"):
        name = spec.get(field)
        if name:
            problem = dns_1123_subdomain_problem(name)
            if problem:
                report.add(code, f"{path}.{field}", problem)
    mode = spec.get("volumeMode")
    if mode is not None and mode not in ("Block", "Filesystem"):
        report.add(code, f"{path}.volumeMode", f"{mode!r}: supported values are Block, Filesystem")
    for field in ("dataSource", "dataSourceRef"):
        source = spec.get(field)
        if source is None:
            continue
        if not source.get("name"):
            report.add(code, f"{path}.{field}.name", "required")
        if not source.get("kind"):
            report.add(code, f"{path}.{field}.kind", "required")
        group = source.get("apiGroup") or ""
        if not group and source.get("kind") != "PersistentVolumeClaim":
            report.add(code, f"{path}.{field}", "kind must be PersistentVolumeClaim when referencing the default "
                       "apiGroup")
        elif group and dns_1123_subdomain_problem(group):
            report.add(code, f"{path}.{field}.apiGroup", dns_1123_subdomain_problem(group))


def validate_claim_template(template: Mapping[str, Any], path: str, report: Report, code: str) -> None:
    """ValidatePersistentVolumeClaimTemplate: the template's metadata holds only labels and annotations (the
    controller names the claim), and its spec is a claim's."""
    meta = template.get("metadata") or {}
    for field in sorted(meta.keys() - _TEMPLATE_METADATA):
        report.add(code, f"{path}.metadata.{field}", "cannot be set for an ephemeral volume (the claim is named "
                   "<pod>-<volume>): only labels and annotations")
    if meta.get("labels"):
        validate_labels(meta["labels"], f"{path}.metadata.labels", report, code)
    if meta.get("annotations"):
        validate_annotations(meta["annotations"], f"{path}.metadata.annotations", report, code)
    validate_claim_spec(template.get("spec") or {}, f"{path}.spec", report, code)
