"""What the constructs of a fleet share while it is defined, held by the App and by each Cluster.

The App holds one `FleetState`: the diagnostics every construct reports into, the Argo CD delivery the
fleet declares, the render steps and the CRD folders synth uses. Each Cluster holds one `ClusterState`:
the objects its constructs emit (plain data until synth writes them), the names claimed in its
namespaces, its queue system, the Pod Security level of its namespaces with the pod checks kept
against them, and what admission judges once the fleet is defined. Typed fields, set by the constructs
that own them; nothing is stashed on an object by name.

`kubetrain.App` (kubetrain/app.py) holds its FleetState as `app.fleet`; an App created with cdk8s's own class
gets one on first use, so both work. `fleet_state(scope)` finds it from any construct.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from constructs import Construct
from kubetrain.model.diagnostics import Diagnostics

if TYPE_CHECKING:
    from kubetrain.admission.synth import AdmissionRecord
    from kubetrain.gitops.argocd_props import ArgoCdProps
    from kubetrain.platform.queues import QueueSystem
    from kubetrain.platform.security import Level, PodCheck

RenderStep = Callable[[dict[Path, dict[str, Any]]], None]


@dataclass
class FleetState:
    """The whole fleet's: found from any construct of it with `fleet_state(scope)`."""

    diagnostics: Diagnostics = field(default_factory=Diagnostics)
    delivery: ArgoCdProps | None = None  # the ArgoCd construct's props; None when Argo CD does not deliver it
    render_steps: list[RenderStep] = field(default_factory=list)  # run over every rendered object, in order
    crd_folders: list[Path] = field(default_factory=list)  # CRDs synth validates raw objects against


@dataclass
class Emitted:
    """One object a construct of the cluster emits: plain data until synth writes it."""

    manifest: dict[str, Any]
    written: bool = False  # already in the form synth writes it (patched: patches apply to that form)


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
