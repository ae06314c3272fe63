"""Where a problem is, in the object the user committed.

The API server's checks run on committed objects and on the objects their controllers and operators
create from them (a Job's pods, a PyTorchJob's pods). A problem found in a created object is reported at
the committed field it comes from: a field of the created object's template maps to that template's
path, a name or label the creator derives maps to the field the name comes from.
"""

from __future__ import annotations

from typing import Any

from kubetrain.apiserver.apiserver_rules import DERIVED_NAMES, POD_FIELDS
from kubetrain.model.created import Created

KubernetesVersion = tuple[int, int]


class Report:
    """The problems of one committed object, as (code, path, message); paths are `a.b[0].c`, map keys `[key]`."""

    __slots__ = ("_valid_specs", "found", "named", "version")
    committed = True  # the object comes from git (it needs a fixed name); created objects may be generated

    def __init__(self, version: KubernetesVersion) -> None:
        self.found: list[tuple[str, str, str]] = []
        self.version = version
        self._valid_specs: list[Any] = []
        # Fields whose derived names the operator's own check already found too long: the created objects'
        # names and hostnames would only repeat it.
        self.named: set[str] = set()

    @property
    def root(self) -> Report:
        return self

    def add(self, code: str, path: str, message: str) -> None:
        self.found.append((code, path, message))

    def of_created(self, created: Created) -> Report:
        """The report of an object `created` from this one (its problems land here, at their source)."""
        return _CreatedReport(self, created)

    def checked_before(self, spec: Any) -> bool:
        """Whether an equal pod spec of this object was already checked and found valid (a PyTorchJob's Master and
        Workers usually share one template): its problems would be the same."""
        return any(spec == seen for seen in self.root._valid_specs)

    def remember_valid(self, spec: Any) -> None:
        self.root._valid_specs.append(spec)


class _CreatedReport(Report):
    __slots__ = ("created", "parent")
    committed = False

    def __init__(self, parent: Report, created: Created) -> None:
        self.parent = parent
        self.created = created
        self.version = parent.version

    @property
    def found(self) -> list[tuple[str, str, str]]:  # type: ignore[override]
        return self.root.found

    @property
    def root(self) -> Report:
        return self.parent.root

    def add(self, code: str, path: str, message: str) -> None:
        created = self.created
        if path in created.derived or path.startswith("metadata.name") or (
                path.startswith("metadata.labels[") and _key(path) not in created.template_labels):
            # A name, or a label or field the creator derives from a name: the committed name is what to change.
            if created.name_field not in self.root.named:
                self.parent.add(DERIVED_NAMES.code, created.name_field, f"the {_what(created)}: {path}: {message}")
        else:
            for items, count in created.appended:
                if path.startswith(f"{items}[") and int(path[len(items) + 1:path.index("]", len(items))]) >= count:
                    # An item the creator adds (its volume, its port) collides with one of the template's.
                    committed = _committed(created, items)
                    if committed is not None:
                        self.parent.add(code, committed, f"{created.by} adds {path[len(items):]}: {message} (in the "
                                        f"{_what(created)})")
                    return
            committed = _committed(created, path)
            if committed is not None:
                self.parent.add(code, committed, f"{message} (in the {_what(created)})")


def _what(created: Created) -> str:
    if created.describe:
        return created.describe
    meta = created.body.get("metadata") or {}
    name = meta.get("name") or f"{meta.get('generateName', '')}..."
    return f"{created.body.get('kind')} {name} that {created.by} creates"


def _committed(created: Created, path: str) -> str | None:
    """The committed field `path` of the created object comes from (None: another object's, reported there)."""
    for prefix, committed in created.paths:
        if path == prefix or path.startswith((f"{prefix}.", f"{prefix}[")):
            return committed + path[len(prefix):]
    if created.only_paths:
        return None
    return f"{created.source}.{path}" if created.source else path


def _key(path: str) -> str:
    return path[path.index("[") + 1:path.index("]")]


def is_int(value: Any) -> bool:
    """An integer as JSON has it (a bool is not one, though Python says so)."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_value(check, value: str, path: str, report: Report, code: str = POD_FIELDS.code) -> None:
    """Report what `check` (a name or format check) finds in a string field; a field that is no string is one."""
    problem = check(value) if isinstance(value, str) else f"{value!r} is not a string"
    if problem:
        report.add(code, path, problem)
