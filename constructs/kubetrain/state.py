"""What the constructs of a fleet share while it is defined, held by the App and by each Cluster.

The App holds one `FleetState`: the diagnostics every construct reports into, the render steps (Argo CD
delivery's among them), the checks that need the whole fleet, each cluster's admission record and the CRD
folders synth uses; synth runs them in its steps (kubetrain.pipeline). Each Cluster holds one `ClusterState`:
the objects its constructs emit (plain data until synth writes them), the names claimed in its
namespaces, its queue system, the Pod Security level of its namespaces with the pod checks kept
against them, and what admission judges once the fleet is defined. Typed fields, set by the constructs
that own them; nothing is stashed on an object by name.

`kubetrain.App` (kubetrain/app.py) holds its FleetState as `app.fleet`; an App created with cdk8s's own class
gets one on first use, so both work. `fleet_state(scope)` finds it from any construct.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from constructs import Construct
from kubetrain.model.diagnostics import Diagnostics, Finding
from kubetrain_runtime.problems import Problem

RenderStep = Callable[[dict[Path, dict[str, Any]]], None]  # rendered objects by the path they are written to
FleetCheck = Callable[[], list[Finding]]  # a check that needs the whole fleet defined (run by the pipeline)
QueueSystem = Literal["kueue", "volcano"]
Level = Literal["privileged", "baseline", "restricted"]  # a Pod Security Standards level
PodCheck = Callable[[Level], list[Problem]]  # a pod's KT430 problems at a given level


@dataclass
class FleetState:
    """The whole fleet's: found from any construct of it with `fleet_state(scope)`."""

    diagnostics: Diagnostics = field(default_factory=Diagnostics)
    render_steps: list[RenderStep] = field(default_factory=list)  # run over every rendered object, in order
    fleet_checks: list[FleetCheck] = field(default_factory=list)  # run once the fleet is defined, in order
    admission_records: list[AdmissionRecord] = field(default_factory=list)  # one per cluster, judged by synth
    crd_folders: list[Path] = field(default_factory=list)  # CRDs synth validates raw objects against


@dataclass
class Emitted:
    """One object a construct of the cluster emits: plain data until synth writes it."""

    manifest: dict[str, Any]
    written: bool = False  # already in the form synth writes it (patched: patches apply to that form)


class Emitting(Protocol):
    emitted: bool
    depends_on: tuple[Emitting, ...]


def ready(construct: Emitting) -> bool:
    """The construct and everything it is built on emitted their objects."""
    return construct.emitted and all(ready(d) for d in construct.depends_on)


class AdmissionRecord:
    """One cluster's emitted objects, for the checks that need the whole fleet."""

    def __init__(self, cluster: str, namespaces: Iterable[str]):
        self.cluster = cluster
        self.platform: list[Mapping[str, Any]] = [{"apiVersion": "v1", "kind": "Namespace",
                                                    "metadata": {"name": n}} for n in namespaces]
        self.jobs: list[tuple[str, list[Emitted], tuple[Emitting, ...]]] = []

    def add_platform(self, manifests: Iterable[Mapping[str, Any]]) -> None:
        self.platform.extend(manifests)

    def add_job(self, where: str, emitted: list[Emitted], upstream: Iterable[Emitting]) -> None:
        """A job on a pool or a queue: `where` is its definition, `emitted` its objects' entries in the cluster
        (read when judged: after its patches), `upstream` its pool and queue."""
        self.jobs.append((where, emitted, tuple(upstream)))


@dataclass
class ClusterState:
    """One cluster's: `Cluster.state`."""

    admission: AdmissionRecord
    objects: list[Emitted] = field(default_factory=list)  # in the order the constructs emitted them
    claims: dict[tuple[str, str], str] = field(default_factory=dict)  # (namespace, name) -> who claimed it
    ids: dict[str | None, set[str]] = field(default_factory=dict)  # namespace (None: the cluster) -> ids placed there
    queue_system: QueueSystem | None = None  # chosen by its first queue object (KT420)
    pod_security: dict[str, Level] = field(default_factory=dict)  # namespace -> the level PodSecurity enforces
    pod_checks: list[tuple[str, str, PodCheck]] = field(default_factory=list)  # (namespace, where, check)
    default_priority_class: str | None = None  # the PriorityClass that is the cluster's global default (KT152)


_FLEETS: weakref.WeakKeyDictionary[Construct, FleetState] = weakref.WeakKeyDictionary()


def fleet_state(scope: Construct) -> FleetState:
    """The state of the fleet `scope` belongs to: its App's (kubetrain.App's own, or one made on first use)."""
    return _FLEETS.setdefault(scope.node.root, FleetState())


def diagnostics(scope: Construct) -> Diagnostics:
    """The diagnostics of the fleet `scope` belongs to."""
    return fleet_state(scope).diagnostics


def add_render_step(scope: Construct, step: RenderStep) -> None:
    """Run `step` after every chart of the fleet `scope` belongs to is rendered, before validation and writing. It
    gets the objects by the relative path they are written to, and may change them (an annotation, a sync wave)
    or add new ones under new paths (`kubetrain.output.writer.manifest_path(chart, obj)`); steps run in the order they were added. What a
    step leaves is validated like every other object, so synth and validate still agree."""
    fleet_state(scope).render_steps.append(step)
