"""What every platform construct shares: validated props, the cluster's diagnostics, plain manifests.

A platform construct is created inside a `kubetrain.Cluster`. Bad props raise
`ConfigError(where, problems)` at once: the definition cannot be read, and the objects built on it
(a job on a pool) could not be either. Rule violations of a readable definition (KT4xx), and an id
another construct of the cluster already has (KT010), are recorded in the app's diagnostics like a
job's; a construct with an error emits nothing, so synth reports every problem of the fleet together.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel

from constructs import Construct
from kubetrain.cluster import Cluster
from kubetrain.objects import api_object
from kubetrain.strict import as_fields
from training.problems import INVALID_VALUE, ConfigError, Problem, validate_model


class PlatformConstruct(Construct):
    """Base class: subclasses set `Props` and `kind`, and call `_emit` once they know their manifests."""

    Props: ClassVar[type[BaseModel]]
    kind: ClassVar[str]  # a short word for construct ids and messages ("nodepool", "fsx", ...)
    depends_on: tuple[PlatformConstruct, ...] = ()  # constructs whose objects this one's need (a flavor's pool)

    def __init__(self, scope: Cluster, id: str, props: BaseModel | Mapping[str, Any] | None, kwargs: dict[str, Any],
                 *, named: bool = True):
        if not isinstance(scope, Cluster):
            raise ConfigError(id, [Problem(INVALID_VALUE, "scope", f"a {self.kind} must be created inside a "
                                           f"Cluster, not in {type(scope).__name__}", "pass the Cluster first")])
        fields = as_fields(props)
        if named:
            fields = {"name": id, **fields}
        self.props = validate_model(self.Props, {**fields, **kwargs}, f"{scope.props.name}/{id}")
        self.cluster = scope
        self.where = f"{scope.props.name}/{self.kind}/{id}"
        self.emitted = False
        # Ids carry the kind, so a pool and a job (or a queue) may share a name.
        self._id_problems = scope.attach(self, None, f"{self.kind}:{id}")

    def _emit(self, problems: list[Problem], manifests: list[dict[str, Any]] | None = None) -> bool:
        """Record problems; hand cdk8s one ApiObject per manifest unless one of them is an error."""
        if self.cluster.diagnostics.report(self.where, self._id_problems + problems):
            return False
        for i, manifest in enumerate(manifests or []):
            api_object(self, f"{manifest['kind'].lower()}-{i}", manifest)
        self.cluster.admission.add_platform(manifests or [])
        self.emitted = True
        return True

