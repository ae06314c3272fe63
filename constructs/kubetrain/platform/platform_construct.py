"""What every platform construct shares: validated props, the cluster's diagnostics, plain manifests.

A platform construct is created inside a `kubetrain.Cluster`. Every problem is recorded in the app's
diagnostics, like a job's, and a construct with an error emits nothing, so synth reports every problem of
the fleet together: bad props (KT001-KT003), rule violations of a readable definition (KT4xx), an id
another construct of the cluster already has (KT010). A construct whose props cannot be read is
*rejected*: it has no props, and what is built on it (a flavor on a pool, a job on a queue) is rejected in
turn with KT011, since it could not be checked.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from pydantic import BaseModel

from constructs import Construct
from kubetrain.cluster import Cluster
from kubetrain.model.strict import REJECTED_REFERENCE as REJECTED_REFERENCE_CODE
from kubetrain.model.strict import as_fields
from kubetrain.rules.registry import register
from kubetrain_runtime.problems import INVALID_VALUE, ConfigError, Problem, rejection_of, validate_model
from training.config import StrictModel as RunConfigModel

REJECTED_REFERENCE = register(
    REJECTED_REFERENCE_CODE, "error", "refers to a construct whose definition has errors",
    rationale="A construct takes others as objects (a job its pool and queue, a flavor its pool); when one of "
              "those could not be read, nothing built on it can be checked or emitted.",
    fix="fix the errors reported for the construct it names; this one is checked again then",
    source="README.md (The platform)")


class _Rejected(Exception):
    """Ends a platform construct's __init__ once its problems are recorded (see `_ends_when_rejected`)."""


class PlatformConstruct(Construct):
    """Base class: subclasses set `Props` and `kind`, and call `_emit` once they know their manifests."""

    Props: ClassVar[type[BaseModel]]
    kind: ClassVar[str]  # a short word for construct ids and messages ("nodepool", "fsx", ...)
    rejected: bool = False  # its props could not be read: it has none, and emits nothing

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            cls.__init__ = _ends_when_rejected(cls.__dict__["__init__"])  # type: ignore[method-assign]
    depends_on: tuple[PlatformConstruct, ...] = ()  # constructs whose objects this one's need (a flavor's pool)

    def __init__(self, scope: Cluster, id: str, props: BaseModel | Mapping[str, Any] | None, kwargs: dict[str, Any],
                 *, named: bool = True):
        if not isinstance(scope, Cluster):
            raise ConfigError(id, [Problem(INVALID_VALUE, "scope", f"a {self.kind} must be created inside a "
                                           f"Cluster, not in {type(scope).__name__}", "pass the Cluster first")])
        self.cluster = scope
        self.where = f"{scope.props.name}/{self.kind}/{id}"
        self.emitted = False
        # Ids carry the kind, so a pool and a job (or a queue) may share a name.
        self._id_problems = scope.attach(self, None, f"{self.kind}:{id}")
        fields = as_fields(props)
        if named:
            fields = {"name": id, **fields}
        try:
            self.props = validate_model(self.Props, {**fields, **kwargs}, self.where)
            problems = rejected_references(self.props)
        except ConfigError as error:
            problems = error.problems
        if problems:
            self.rejected = True
            scope.diagnostics.report(self.where, self._id_problems + problems)
            raise _Rejected

    def _emit(self, problems: list[Problem], manifests: list[dict[str, Any]] | None = None) -> bool:
        """Record problems; emit the manifests into the cluster unless one of the problems is an error."""
        if self.cluster.diagnostics.report(self.where, self._id_problems + problems):
            return False
        for manifest in manifests or []:
            self.cluster.add_object(manifest)
        self.cluster.state.admission.add_platform(manifests or [])
        self.emitted = True
        return True


def _ends_when_rejected(init: Callable[..., None]) -> Callable[..., None]:
    """A subclass's __init__ that stops quietly where the base __init__ rejected the props: the problems are
    recorded, and the rest of the subclass's __init__ (which reads the props) must not run. Only the
    outermost __init__ (the constructed class's own) swallows the signal; a base's re-raises it."""

    @functools.wraps(init)
    def guarded(self: PlatformConstruct, *args: Any, **kwargs: Any) -> None:
        try:
            init(self, *args, **kwargs)
        except _Rejected:
            if type(self).__init__ is not guarded:
                raise

    return guarded


def rejected_references(value: Any, path: str = "") -> list[Problem]:
    """The problems of typed models built with a mistake that validated props hold where a field takes them as
    objects without validating them again (a job's target: `InstanceOf`), with their paths. (A rejected
    construct in props is refused by the props' own validation: KT011.)"""
    rejection = rejection_of(value)
    if rejection is not None:
        rejection.claimed = True
        return [Problem(p.code, ".".join(filter(None, [path, p.path])), p.message, p.fix) for p in rejection.problems]
    if isinstance(value, RunConfigModel):  # validated whole, field by field, and it holds no construct
        return []
    if isinstance(value, BaseModel):
        return [problem for name in type(value).model_fields
                for problem in rejected_references(getattr(value, name), f"{path}.{name}" if path else name)]
    if isinstance(value, (list, tuple)):
        return [problem for i, item in enumerate(value) for problem in rejected_references(item, f"{path}.{i}")]
    if isinstance(value, Mapping):
        return [problem for key, item in value.items() for problem in rejected_references(item, f"{path}.{key}")]
    return []
