"""The API server's check of every object, and of what controllers and operators create from it: the walk.

Each kind's checks are its descriptor's (kubetrain.kinds): `Kind.check` for the kinds the API server validates
beyond their schemas (the validators of output/render.py and workloads.py), `Kind.name_problem`, `derived_names`,
`admission` and `created` for the rest. This module imports no cdk8s.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from kubetrain.apiserver.apiserver_rules import ADMISSION, DERIVED_NAMES
from kubetrain.apiserver.meta import validate_object_meta
from kubetrain.apiserver.report import Report
from kubetrain.kinds.base import Sibling
from kubetrain.kinds.kind_registry import kind_of
from kubetrain.model.created import Created
from kubetrain.model.names import dns_1123_subdomain_problem

if TYPE_CHECKING:
    from kubetrain.model.manifests import Manifest


def check_object(obj: dict[str, Any], report: Report, sibling: Sibling) -> None:
    """Every problem the API server (and the controllers and operators behind it) has with `obj`, into `report`."""
    for created in _check(obj, report, sibling):
        _check_created(created, report, sibling)


def _check(obj: dict[str, Any], report: Report, sibling: Sibling) -> Iterable[Created]:
    """The object's kind says what is checked: the API server's own check of a kind it validates beyond its
    schema, else its name's format and the names its operator derives; then what its webhook or the program that
    reads it refuses, and what its controller or operator creates. An unknown kind's name is a DNS-1123
    subdomain."""
    kind = kind_of(obj)
    if kind is None:
        validate_object_meta(obj.get("metadata"), obj.get("kind"), dns_1123_subdomain_problem, report)
        return ()
    if kind.check is not None:
        created = kind.check(obj, report)
    else:
        validate_object_meta(obj.get("metadata"), obj.get("kind"), kind.name_problem, report)
        for path, message in kind.derived_names(obj, sibling):
            report.add(DERIVED_NAMES.code, path, message)
            report.root.named.add(path)
        created = kind.created(obj, sibling)
    for path, message, *code in kind.admission(obj, sibling):
        report.add(code[0] if code else ADMISSION.code, path, message)
    return created


def _check_created(created: Created, report: Report, sibling: Sibling) -> None:
    """An object a controller or operator creates, checked as the API server checks it when it is created; and
    what it creates in turn (a JobSet's Job, then the Job's pods)."""
    sub = report.of_created(created)
    for more in _check(created.body, sub, sibling):
        _check_created(more, sub, sibling)


def _version(text: str) -> tuple[int, int]:
    major, _, minor = text.lstrip("v").partition(".")
    try:
        return int(major), int(minor.split(".")[0])
    except ValueError:
        return 1, 33


def api_server_problems(manifests: list[Manifest], version_of: Callable[[Manifest], str],
                        malformed: Collection[tuple[str, str]] = ()) -> Iterator[tuple[Manifest, str, str, str]]:
    """(manifest, code, path, message) for every problem of every manifest. `malformed` names the (file, label) of
    objects the schema check found wrong: one whose shape keeps these checks from running (a string where a list
    belongs) is left to the schema's findings. Siblings (a TrainJob's runtime) come from the object's cluster folder
    (dist/<cluster>/<namespace>/...)."""
    # Folders as strings: hashing Path objects per manifest costs more than the checks of a small object.
    folders = [str(m.folder) for m in manifests]
    roots = {folder: folder.rpartition("/")[0] for folder in set(folders)}
    by_kind: dict[str, dict[tuple[str, str, Any], dict[str, Any]]] = {}

    def of_kind(kind: str) -> dict[tuple[str, str, Any], dict[str, Any]]:
        """(cluster folder, namespace, name) -> object, for the kinds operators look up (a runtime, say): built
        on the first look-up, so a fleet without such references pays nothing per object."""
        index = by_kind.get(kind)
        if index is None:
            index = by_kind[kind] = {}
            for m, folder in zip(manifests, folders):
                if isinstance(m.body, dict) and m.body.get("kind") == kind and isinstance(m.body.get("metadata"), dict):
                    meta = m.body["metadata"]
                    index[(roots[folder], meta.get("namespace") or "", meta.get("name"))] = m.body
        return index

    versions: dict[str, tuple[int, int]] = {}
    for m, folder in zip(manifests, folders):
        body = m.body
        if not (isinstance(body, dict) and isinstance(body.get("apiVersion"), str)
                and isinstance(body.get("kind"), str)):
            continue
        root, namespace = roots[folder], (body.get("metadata") or {}).get("namespace") or ""

        def sibling(kind: str, name: str, root: str = root, namespace: str = namespace) -> dict[str, Any] | None:
            index = of_kind(kind)
            return index.get((root, namespace, name)) or index.get((root, "", name))

        version = versions.get(folder)
        if version is None:
            version = versions[folder] = _version(version_of(m))
        report = Report(version)
        if (m.file, m.label) in malformed:
            try:
                check_object(body, report, sibling)
            except (TypeError, AttributeError, KeyError, ValueError, IndexError):
                continue
        else:
            check_object(body, report, sibling)
        for code, path, message in report.found:
            yield m, code, path, message
