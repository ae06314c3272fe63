"""A Kubernetes cluster of the fleet: one cdk8s chart, synthesized into dist/<cluster>/."""

from __future__ import annotations

from typing import Any

import cdk8s
from cdk8s_plus_33 import k8s
from constructs import Construct
from pydantic import Field, field_validator

from kubetrain.job_props import StrictProps
from kubetrain.names import Dns1123Label
from training.problems import ConfigError, Problem, validate_model

KUBERNETES_VERSION_ANNOTATION = "kubetrain.dev/kubernetes-version"


class ClusterProps(StrictProps):
    """A cluster and the namespaces kubetrain owns in it."""

    name: Dns1123Label = Field(..., description="Folder name under dist/ and the `kubetrain.dev/cluster` label.")
    kubernetes_version: str = Field(..., pattern=r"^1\.[0-9]{2}$",
                                    description="Control plane version, e.g. '1.33'; objects are validated against it.")
    namespaces: list[Dns1123Label] = Field(..., min_length=1,
                                           description="Namespaces created and owned here; the first is the default.")

    @field_validator("namespaces")
    @classmethod
    def _unique(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("namespaces must be unique")
        return value


class Cluster(cdk8s.Chart):
    """All objects of one cluster. Jobs and other constructs are created inside it."""

    def __init__(self, scope: Construct, id: str, **props: Any):
        validated = validate_model(ClusterProps, {"name": id, **props}, where=id)
        super().__init__(scope, id, disable_resource_name_hashes=True,
                         labels={"app.kubernetes.io/managed-by": "kubetrain", "kubetrain.dev/cluster": id})
        self.props = validated
        self._names: set[tuple[str, str, str]] = set()
        for namespace in self.props.namespaces:
            # The version rides on the namespaces so `kubetrain validate` can check each
            # cluster's folder against its own Kubernetes API without importing the fleet.
            k8s.KubeNamespace(self, f"namespace-{namespace}", metadata=k8s.ObjectMeta(
                name=namespace, annotations={KUBERNETES_VERSION_ANNOTATION: self.props.kubernetes_version}))

    @property
    def default_namespace(self) -> str:
        return self.props.namespaces[0]

    def claim(self, kind: str, namespace: str | None, name: str, where: str) -> str:
        """Reserve a namespaced object name; returns the namespace it lives in."""
        namespace = namespace or self.default_namespace
        if namespace not in self.props.namespaces:
            raise ConfigError(where, [Problem(
                "KT109", "namespace", f"namespace {namespace!r} is not owned by cluster {self.props.name}",
                f"use one of {', '.join(self.props.namespaces)}, or add it to the cluster's namespaces")])
        if (kind, namespace, name) in self._names:
            raise ConfigError(where, [Problem(
                "KT110", "name", f"a {kind} named {name!r} already exists in {self.props.name}/{namespace}",
                "give each job in a namespace its own name")])
        self._names.add((kind, namespace, name))
        return namespace
