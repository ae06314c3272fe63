"""A Kubernetes cluster of the fleet: one cdk8s chart, synthesized into dist/<cluster>/."""

from __future__ import annotations

from typing import Any, Literal

import cdk8s
from pydantic import Field, field_validator

from constructs import Construct
from kubetrain.model.diagnostics import DefinitionError
from kubetrain.model.instances import BUILTIN_CATALOG, InstanceType
from kubetrain.model.names import Dns1123Label
from kubetrain.model.strict import StrictProps
from kubetrain.model.vocabulary import KUBERNETES_VERSION_ANNOTATION
from kubetrain.rules.registry import register
from kubetrain.rules.sources import K8S_NAMES
from kubetrain.state import AdmissionRecord, ClusterState, Emitted, diagnostics, fleet_state
from kubetrain.validation.validate import supported_kubernetes_versions
from kubetrain_runtime.problems import INVALID_VALUE, ConfigError, Problem, rule_violation, validate_model

# Namespaces the control plane creates and owns; kubetrain's objects never go there.
PLATFORM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")

NAMESPACE_NOT_OWNED = register(
    "KT109", "error", "namespace not owned by the cluster",
    rationale="Every object kubetrain emits lives in a namespace the cluster definition creates and owns, so "
              "Argo CD's project can allow exactly those and nothing lands in a namespace nobody reviews.",
    fix="use one of the cluster's namespaces, or add the namespace to Cluster(namespaces=[...])",
    source="README.md (Writing a job)")
DUPLICATE_ID = register(
    "KT010", "error", "two objects with one id, or one kind and name",
    rationale="cdk8s needs every construct id in a scope to be unique, and two objects of one kind, namespace "
              "and name would overwrite each other in dist/.",
    fix="give one of them another id or name", source=K8S_NAMES)
NAME_TAKEN = register(
    "KT110", "error", "name already taken in the namespace",
    rationale="A job claims its own name and the names of the objects derived from it (its ConfigMap, the "
              "operator's Services); two claims on one name in one namespace would overwrite each other.",
    fix="give one of them another name (the same name in two namespaces is fine)",
    source="README.md (Writing a job)")


def _check_version(value: str) -> str:
    supported = supported_kubernetes_versions()
    if value not in supported:
        raise rule_violation(INVALID_VALUE, f"Kubernetes {value} is not one kubetrain can validate against",
                             f"use one of {supported[0]}..{supported[-1]} (e.g. {supported[-1]})")
    return value


class ClusterProps(StrictProps):
    """A cluster and the namespaces kubetrain owns in it."""

    name: Dns1123Label = Field(..., description="Folder name under dist/ and the `kubetrain.dev/cluster` label.")
    kubernetes_version: str = Field(..., description="Control plane version, e.g. '1.33'; objects are validated "
                                                     "against it. One of `supported_kubernetes_versions()`.")
    namespaces: list[Dns1123Label] = Field(..., min_length=1,
                                           description="Namespaces created and owned here; the first is the default.")
    run_names: Literal["fixed", "content-hash"] = Field(
        "fixed", description="`content-hash`: every run's objects are named <job>-<8 hex digits of the definition>, "
                             "so a changed job is a new object and a GitOps sync never patches a running one "
                             "(create-once); `fixed`: named <job>.")
    instance_types: list[InstanceType] = Field(default_factory=list,
                                               description="Instance types beyond the built-in catalog (or "
                                                           "replacing an entry of the same name).")

    @field_validator("kubernetes_version")
    @classmethod
    def _supported(cls, value: str) -> str:
        return _check_version(value)

    @field_validator("namespaces")
    @classmethod
    def _unique_and_ours(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("namespaces must be unique")
        platform = [n for n in value if n in PLATFORM_NAMESPACES]
        if platform:
            raise rule_violation(INVALID_VALUE, f"{', '.join(platform)} belongs to the control plane",
                                 "create a namespace of your own for training, e.g. ml")
        if "default" in value:
            raise rule_violation(INVALID_VALUE, "the default namespace is every cluster's catch-all: kubetrain would "
                                 "own it and Argo CD would manage (and try to prune) it",
                                 "create a namespace of your own for training, e.g. ml")
        return value


class Cluster(cdk8s.Chart):
    """All objects of one cluster. Jobs and other constructs are created inside it.

    Constructs that live in a namespace are created in that namespace's scope, so the same
    name may be used in two namespaces without their construct ids colliding. The objects they emit
    stay plain data in the cluster's state until synth writes them (with any cdk8s object a user adds
    to the chart, which cdk8s renders).
    """

    def __init__(self, scope: Construct, id: str, **props: Any):
        try:
            validated = validate_model(ClusterProps, {"name": id, **props}, where=id)
        except ConfigError as error:
            # Everything else lives inside a cluster, so the fleet stops here: with every problem found so far.
            found = diagnostics(scope)
            found.report(id, error.problems)
            raise DefinitionError([f for f in found.findings if f.severity == "error"]) from None
        labels = {"app.kubernetes.io/managed-by": "kubetrain", "kubetrain.dev/cluster": id}
        try:
            super().__init__(scope, id, disable_resource_name_hashes=True, labels=labels)
        except RuntimeError as error:
            problem = construct_id_problem(error)
            if problem is None:
                raise
            raise ConfigError(id, [problem]) from None
        self.props = validated
        self.diagnostics = diagnostics(self)  # kept here: every lookup of the app through jsii costs a round trip
        self.instance_catalog = BUILTIN_CATALOG.with_types(validated.instance_types)
        self.labels_of_objects = labels  # on every object of the cluster, as cdk8s puts a chart's labels
        # Queues, pools and jobs keep their manifests in the admission record too; synth judges their admission
        # once the whole fleet is defined (kubetrain.pipeline).
        self.state = ClusterState(AdmissionRecord(id, validated.namespaces))
        fleet_state(self).admission_records.append(self.state.admission)
        self._scopes: dict[str, Construct] = {}
        # The version rides on the namespaces so `kubetrain validate` can check each cluster's folder against
        # its own Kubernetes API without importing the fleet.
        self.namespaces = {namespace: self.add_object({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": namespace,
                         "annotations": {KUBERNETES_VERSION_ANNOTATION: self.props.kubernetes_version}}})
            for namespace in self.props.namespaces}

    def add_object(self, manifest: dict[str, Any]) -> Emitted:
        """Emit one object into the cluster: plain data, written by synth with every other object (no call into
        cdk8s). Returns its entry, which the emitting construct may patch before synth."""
        emitted = Emitted(manifest)
        self.state.objects.append(emitted)
        return emitted

    @property
    def default_namespace(self) -> str:
        return self.props.namespaces[0]

    def instance_type(self, name: str | None) -> InstanceType | None:
        """The catalog entry of an instance type (the cluster's own types first), None when unknown."""
        return self.instance_catalog.get(name) if name else None

    def namespace_scope(self, namespace: str) -> Construct:
        """The construct scope of one namespace's objects."""
        if namespace not in self._scopes:
            self._scopes[namespace] = Construct(self, f"ns:{namespace}")
        return self._scopes[namespace]

    def attach(self, construct: Construct, namespace: str | None, id: str) -> list[Problem]:
        """Place `construct` in the scope of `namespace` (the default one when the cluster does not own it, whose
        problem is reported elsewhere), or in the cluster itself for None (cluster-wide objects). An id already
        taken there is KT010, not a jsii crash: the construct then gets a unique id, so the caller can still
        report and skip it. A `NodeOnDemand` construct enters cdk8s's tree when its node is first asked for."""
        if namespace is not None and namespace not in self.props.namespaces:
            namespace = self.default_namespace
        scope = self if namespace is None else self.namespace_scope(namespace)
        taken = self.state.ids.setdefault(namespace, set())
        problem = bad_construct_id(id) or (construct_id_taken() if id in taken else None)
        placed = id if problem is None else f"{id if isinstance(id, str) else ''}#{len(taken)}"
        taken.add(placed)
        if isinstance(construct, NodeOnDemand):
            construct.place(scope, placed)
        else:
            _enter_tree(construct, scope, placed)
        return [problem] if problem else []

    def check_namespace(self, namespace: str | None) -> tuple[str, list[Problem]]:
        """The namespace an object lives in (the default when None), and KT109 if the cluster does not own it."""
        namespace = namespace or self.default_namespace
        if namespace in self.props.namespaces:
            return namespace, []
        return namespace, [Problem(NAMESPACE_NOT_OWNED.code, "namespace",
                                   f"namespace {namespace!r} is not owned by cluster {self.props.name}",
                                   f"use one of {', '.join(self.props.namespaces)}, or add it to the cluster's "
                                   "namespaces")]

    def claim(self, namespace: str, names: dict[str, str], owner: str) -> list[Problem]:
        """Reserve names in a namespace for `owner`: {name: the field it comes from}. Claims are all or
        nothing: when any name is taken, none is reserved and KT110 names each clash."""
        claims = self.state.claims
        problems = [Problem(NAME_TAKEN.code, field, f"{name!r} is already used in {self.props.name}/{namespace} "
                            f"by {claims[(namespace, name)]}", NAME_TAKEN.fix)
                    for name, field in names.items() if (namespace, name) in claims]
        if not problems:
            claims.update({(namespace, name): owner for name in names})
        return problems


def _enter_tree(construct: Construct, scope: Construct, id: str) -> None:
    """Create the construct's node in cdk8s's tree; an id something else took there (a cdk8s construct the fleet
    added itself) gets a unique suffix."""
    try:
        Construct.__init__(construct, scope, id)
    except RuntimeError as error:
        if construct_id_problem(error) is None:
            raise
        Construct.__init__(construct, scope, f"{id}#{len(scope.node.children)}")


class _Created(type(Construct)):  # jsii's metaclass
    """jsii's metaclass ties an instance to its JavaScript object right after `__init__`; a `NodeOnDemand`
    construct has none until its node is asked for, and is tied to it then (by jsii's `create`)."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return type.__call__(cls, *args, **kwargs)


class NodeOnDemand(Construct, metaclass=_Created):
    """A construct that enters cdk8s's construct tree only when something asks for it (its `node`, or handing
    it to cdk8s as a scope): creating a node is a call into cdk8s's Node.js process, and a fleet of thousands
    of jobs needs none of theirs. The cluster checks its id when it is placed (KT010), as cdk8s would."""

    _placement: tuple[Construct, str] | None = None

    def place(self, scope: Construct, id: str) -> None:
        self._placement = (scope, id)

    def __getattr__(self, name: str) -> Any:
        if name != "__jsii_ref__" or self._placement is None:
            raise AttributeError(name)
        scope, id = self._placement
        self._placement = None
        _enter_tree(self, scope, id)  # jsii's create sets __jsii_ref__ on the instance
        return self.__dict__[name]


def bad_construct_id(id: object) -> Problem | None:
    """KT003 for an id cdk8s cannot take (it would crash in jsii): ids are non-empty strings."""
    if isinstance(id, str) and id:
        return None
    return Problem(INVALID_VALUE, "id", f"a construct id must be a non-empty string, not {id!r}",
                   'name the construct, e.g. TrainingJob(cluster, "gpt", ...)')


def construct_id_problem(error: Exception, field: str = "name") -> Problem | None:
    """jsii's "There is already a Construct with name ..." as a KT010 problem (None for other errors)."""
    return construct_id_taken(field) if "There is already a Construct with name" in str(error) else None


def construct_id_taken(field: str = "name") -> Problem:
    return Problem("KT010", field, "another construct in the same scope already has this id",
                   "give each construct in a cluster and namespace its own id")
