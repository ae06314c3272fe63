"""Every kind kubetrain knows, by (API group, kind): the one place its descriptors are registered.

Each module below declares `KINDS`, the descriptors of its operator or API family; listing a module here
registers them. Adding a kind is a module and a line in `MODULES`. A fleet may register a kind of its own
(a raw object's kind that Argo CD must deliver in some wave) with `register`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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
from kubetrain.kinds.base import Kind

MODULES = (kubernetes, karpenter, kueue, volcano, monitoring, argocd, pytorchjob, trainjob, indexed_job, mpijob)

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


def all_kinds() -> list[Kind]:
    """Every registered kind, by group and kind."""
    return [_KINDS[key] for key in sorted(_KINDS)]


def kinds_where(has: Iterable[str]) -> list[Kind]:
    """The registered kinds whose descriptor sets every field named in `has`."""
    wanted = list(has)
    return [kind for kind in all_kinds() if all(getattr(kind, name) for name in wanted)]


for _module in MODULES:
    register(*_module.KINDS)
