"""What kubetrain knows about one API kind, in one place: its `Kind`.

Every kind kubetrain emits or reads has one descriptor, declared in the module of the operator or
API family it belongs to (`pytorchjob.py`, `kueue.py`, `kubernetes.py`, ...) and registered in
`registry.py`. Delivery, validation, `kubetrain diff`, `kubetrain plan`, admission and run-local look
kinds up there and keep no tables of their own, so adding a kind is one module plus its registration.

A descriptor holds facts, never the objects themselves: how an object of the kind is delivered
(its Argo CD sync wave, whether it is created once and never updated, the fields Argo CD must leave
to the operators, its health check), checked (the CRD its schema comes from, what the API server checks
beyond the schema, the name its operator needs, what its operator creates from it and its webhook
refuses, the objects it names), and read back (the pod sets Kueue admits, what `kubetrain diff`
reports of a run, how `kubetrain run-local` emulates its operator: the kind's `target`). Everything
here reads plain manifests and imports no cdk8s, so `kubetrain validate`, `diff` and `plan` start no
Node.js.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubetrain.model.names import dns_1123_subdomain_problem
from kubetrain.model.vocabulary import ACCELERATOR_RESOURCES

if TYPE_CHECKING:
    from kubetrain.apiserver.report import Report
    from kubetrain.kinds.target import Target
    from kubetrain.model.created import Created
    from kubetrain.model.pod_sets import PodSet

Manifest = Mapping[str, Any]
Sibling = Callable[[str, str], "dict[str, Any] | None"]  # (kind, name) -> another object of the same namespace

# Argo CD applies one sync wave, waits until its objects are healthy, then applies the next. Whatever an
# object needs at admission or to become useful comes in an earlier wave: namespaces first, then cluster-wide
# definitions (storage classes, node classes, Kueue topologies and cohorts), then namespaced configuration and
# what is built on the definitions (pools, flavors, training runtimes), then queues, then the workloads.
NAMESPACES, DEFINITIONS, PLATFORM, QUEUES, LOCAL_QUEUES, WORKLOADS = 0, 1, 2, 3, 4, 5


@dataclass(frozen=True)
class Reference:
    """One object naming another. `admission`: the API server or a webhook rejects the object while the
    target is missing, so the target must come in a strictly earlier wave (same wave is enough otherwise)."""

    group: str
    kind: str
    namespace: str | None  # None for cluster-scoped targets
    name: str
    admission: bool = False


@dataclass(frozen=True)
class IgnoredFields:
    """Fields controllers write on an object kubetrain emits (Argo CD's ignoreDifferences): Argo CD must neither
    report them as drift nor, with RespectIgnoreDifferences, put them back."""

    json_pointers: tuple[str, ...] = ()
    jq_path_expressions: tuple[str, ...] = ()

    def manifest(self) -> dict[str, list[str]]:
        found = {"jsonPointers": list(self.json_pointers), "jqPathExpressions": list(self.jq_path_expressions)}
        return {key: value for key, value in found.items() if value}


# On a run object: the folder its run saves checkpoints in and resumes from, for `kubetrain diff` to say where a
# replaced run picks up (a command job's is nowhere else in its manifests).
CHECKPOINT_DIR_ANNOTATION = "kubetrain.dev/checkpoint-dir"


def pod_template_fields(prefix: str) -> tuple[str, ...]:
    """The pod template fields Kueue merges in when it admits a job (its flavor's node selector and
    tolerations, and with topology-aware scheduling the scheduling gates), as jq paths under `prefix`.
    Runs are create-once, so ignoring template fields loses no update."""
    return tuple(f"{prefix}.{name}" for name in ("nodeSelector", "tolerations", "schedulingGates"))


@dataclass(frozen=True)
class CrdSource:
    """Where a custom resource's schema comes from: the operator's CRD file, pinned to the version kubetrain
    targets (`scripts/generate_schemas.py` turns it into the shipped schema)."""

    file: str  # the CRD file's name, as the project publishes it
    project: str
    version: str
    api_versions: tuple[str, ...]  # the served versions kubetrain emits


@dataclass
class RunShape:
    """What a run object asks for, whatever its operator: pods, ranks, accelerators, where the pods go. Read from
    the manifests alone, so `kubetrain diff` and `kubetrain cost` see any revision of dist/ alike."""

    kind: str
    pods: int = 0
    procs_per_pod: int | None = None
    elastic: tuple[int, int] | None = None  # min and max pods of an elastic job
    accelerators_per_pod: int = 0  # GPUs or Neuron devices of one (rank-running) pod
    accelerator_resource: str | None = None
    pod_specs: list[dict[str, Any]] = field(default_factory=list)  # the rank-running pods' specs
    reads: tuple[tuple[str, str], ...] = ()  # (kind, name) of the objects beside it the shape is read from
    queue: str | None = None
    images: list[str] = field(default_factory=list)

    @property
    def accelerators(self) -> int:
        return self.pods * self.accelerators_per_pod

    @property
    def node_selector(self) -> dict[str, str]:
        """The pods' node selector (every rank-running pod of a kubetrain run has the same)."""
        return dict((self.pod_specs[0] if self.pod_specs else {}).get("nodeSelector") or {})


def number(value: Any, default: int = 0) -> int:
    """A count a manifest holds as a number or a digit string (`default` for anything else)."""
    text = str(value if value is not None else default)
    return int(text) if text.isdigit() else default


def container_limits(pod_spec: Mapping[str, Any]) -> dict[str, Any]:
    """The first container's resource limits: the container that runs the ranks."""
    containers = pod_spec.get("containers") or [{}]
    return dict((containers[0].get("resources") or {}).get("limits") or {})


def accelerators_in(limits: Mapping[str, Any]) -> tuple[int, str | None]:
    """(how many, which resource) of the accelerators in resource limits."""
    for resource in ACCELERATOR_RESOURCES:
        if number(limits.get(resource)):
            return number(limits.get(resource)), resource
    return 0, None


def run_shape(kind: str, pods: list[tuple[int, dict[str, Any]]], procs_per_pod: Any = None,
              **known: Any) -> RunShape:
    """The shape of a run from its (count, pod spec) pairs of rank-running pods and its ranks per pod."""
    shape = RunShape(kind, sum(n for n, _ in pods), number(procs_per_pod) or None,
                     pod_specs=[pod for _, pod in pods], **known)
    if pods:
        shape.accelerators_per_pod, shape.accelerator_resource = accelerators_in(container_limits(pods[0][1]))
    shape.images = sorted({image for _, pod in pods if (image := (pod.get("containers") or [{}])[0].get("image"))})
    return shape


def scheduling_queue(spec: Mapping[str, Any]) -> str | None:
    """The Volcano queue a Kubeflow job's runPolicy.schedulingPolicy names."""
    return ((spec.get("runPolicy") or {}).get("schedulingPolicy") or {}).get("queue")


def pod_specs(obj: Manifest) -> list[dict[str, Any]]:
    """Every pod spec in an object, wherever its kind keeps its templates."""
    found, stack = [], [obj.get("spec")]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            template = node.get("template")
            if isinstance(template, dict) and isinstance(template.get("spec"), dict) \
                    and "containers" in template["spec"]:
                found.append(template["spec"])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


@dataclass(frozen=True)
class Run:
    """A kind whose objects run pods: a job. How Kueue counts it and what it asks for."""

    # (pod sets in Kueue's order, the fewest pods an elastic job trains with) of one object; `sibling` reads
    # the objects it names (a TrainJob's runtime). None: a kind kubetrain never queues.
    pod_sets: Callable[[Manifest, Sibling], tuple[list[PodSet], int | None]] | None
    # pods, ranks, accelerators, images: what `kubetrain diff` and `kubetrain cost` read
    shape: Callable[[Manifest, Sibling], RunShape]
    # where a queued object would set Kueue's `suspend` (Kueue sets it on creation, KT422)
    suspend: tuple[tuple[str, ...], ...] = (("spec", "suspend"),)
    reads: tuple[str, ...] = ()  # kinds of the siblings `pod_sets` and `shape` read


def no_references(obj: Manifest) -> list[Reference]:
    return []


def creates_nothing(obj: Manifest, sibling: Sibling) -> list[Created]:
    return []


def no_problems(obj: Manifest, sibling: Sibling) -> list[tuple[str, str]]:
    return []


@dataclass(frozen=True)
class Kind:
    """One API kind: everything kubetrain knows about objects of it. Looked up by (API group, kind)."""

    api_version: str  # group/version as kubetrain emits it ("v1" for the core group)
    kind: str
    wave: int | None  # Argo CD sync wave; None: never synced to a training cluster (Argo CD's own objects)
    # The API server's check of the object, for a kind it validates beyond its schema (Pod, Service, Job, ...):
    # every problem into the report, and the objects its controller creates (a Job's pods)
    check: Callable[[Manifest, Report], list[Created]] | None = None
    # Otherwise: what its name must be (the API server's or its operator's format), the names its operator
    # derives from it that would be refused ((path, message) each), and what its operator creates from it (a
    # PyTorchJob's pods and Services), each checked as the API server will
    name_problem: Callable[[str], str | None] = dns_1123_subdomain_problem
    derived_names: Callable[[Manifest, Sibling], list[tuple[str, str]]] = no_problems
    # Of every kind: what its operator's webhook refuses, or the program that reads it (the trainer its run
    # config, Prometheus its rules): (path, message) under KT625, or (path, message with its fix, code). The
    # constructs that build these objects call the same checks on their props, so synth and `kubetrain
    # validate` refuse the same mistakes.
    admission: Callable[[Manifest, Sibling], Sequence[tuple[str, str] | tuple[str, str, str]]] = no_problems
    created: Callable[[Manifest, Sibling], list[Created]] = creates_nothing
    crd: CrdSource | None = None  # None: served by the API server itself (schema from kubernetes-validate)
    create_once: bool = False  # its spec cannot change once created: a changed definition is a new object
    ignored: IgnoredFields | None = None  # what Argo CD leaves to the operators and Kueue
    health: str | None = None  # the Argo CD health check, a Lua file of kinds/lua/
    holds_pod_templates: bool = False  # templates others instantiate: the runs made from it need their volumes
    references: Callable[[Manifest], list[Reference]] = no_references  # the objects it names, by its own fields
    run: Run | None = None  # a job: its pod sets and training facts
    target: type[Target] | None = field(default=None, compare=False)  # renders it and emulates its operator

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def key(self) -> tuple[str, str]:
        return (self.group, self.kind)
