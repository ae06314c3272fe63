"""Every kind kubetrain knows, by (API group, kind): the one place its descriptors are registered.

Each module below declares `KINDS`, the descriptors of its operator or API family; listing a module here
registers them. Adding a kind is a module and a line in `MODULES`. A fleet may register a kind of its own
(a raw object's kind that Argo CD must deliver in some wave) with `register`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubetrain.kinds import (
    argocd,
    indexed_job,
    karpenter,
    kubernetes,
    kueue,
    monitoring,
    mpijob,
    pytorchjob,
    trainjob,
    volcano,
)
from kubetrain.kinds.base import Kind, RunShape, Sibling
from kubetrain.model.vocabulary import QUEUE_LABEL

# --8<-- [start:modules] (docs/guides/adding-a-kind.md shows it)
MODULES = (kubernetes, karpenter, kueue, volcano, monitoring, argocd, pytorchjob, trainjob, indexed_job, mpijob)
# --8<-- [end:modules]

_KINDS: dict[tuple[str, str], Kind] = {}


def register(*kinds: Kind) -> None:
    """Make `kinds` known; a kind registered again replaces the earlier descriptor."""
    _KINDS.update({kind.key: kind for kind in kinds})


def group_kind(obj: Mapping[str, Any]) -> tuple[str, str]:
    """(API group, kind) of an object; "" is the core group."""
    return str(obj.get("apiVersion", "")).rpartition("/")[0], str(obj.get("kind", ""))


def lookup(group: str, kind: str) -> Kind | None:
    return _KINDS.get((group, kind))


def kind_of(obj: Mapping[str, Any]) -> Kind | None:
    """The descriptor of an object's kind, None for kinds kubetrain does not know."""
    return _KINDS.get(group_kind(obj))


def run_kind(obj: Mapping[str, Any]) -> Kind | None:
    """The descriptor of a run object (a kind whose objects run pods), None for anything else."""
    kind = kind_of(obj)
    return kind if kind is not None and kind.run is not None else None


def shape_of(obj: Mapping[str, Any], sibling: Sibling = lambda kind, name: None) -> RunShape:
    """What a run object asks for (`run_kind(obj)` must be its descriptor); `sibling(kind, name)` reads the
    objects it names (a TrainJob's runtime). A queue label outranks what the kind's own fields name."""
    shape = run_kind(obj).run.shape(obj, sibling)
    shape.queue = ((obj.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL) or shape.queue
    return shape


def all_kinds() -> list[Kind]:
    """Every registered kind, by group and kind."""
    return [_KINDS[key] for key in sorted(_KINDS)]


for _module in MODULES:
    register(*_module.KINDS)
