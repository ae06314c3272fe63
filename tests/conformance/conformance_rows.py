"""What the conformance tables share: a row citing its upstream test, and kubetrain's API-server check run on a
manifest dict in process (the code synth and `kubetrain validate` run, without the schema pass); a CEL row and
kubetrain's CEL environment (the one CRD rules are compiled in).

A row is a case of an upstream test suite, transcribed as the v1 manifest a user would commit: `path` is the field
the API server refuses (None: the object is valid), `note` says where kubetrain's path or verdict differs from the
upstream test's and why (the README's Choices, "What the API server checks", name each such difference).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubetrain.model.manifests import Manifest
from kubetrain.validation.api_checks import api_server_problems

K8S = "kubernetes/kubernetes"


def at(commit: str, file: str) -> str:
    """A row's source: the upstream file at the commit it was transcribed from (the cases kept are those of the
    Kubernetes 1.33 behaviour kubetrain ports; the commit says exactly which text was read)."""
    return f"{K8S}@{commit[:12]} {file}"


@dataclass(frozen=True)
class Row:
    test: str  # the upstream test function
    case: str  # the upstream case's name (or its value, for unnamed cases)
    obj: dict[str, Any]
    path: str | None  # the field refused; None: accepted
    version: str = "1.33"
    note: str = ""
    source: str = ""  # repository, tag and file of the upstream test

    @classmethod
    def citing(cls, source: str) -> Callable[..., Row]:
        """Rows of one upstream test file."""
        return functools.partial(cls, source=source)

    @property
    def id(self) -> str:
        return f"{self.test}[{self.case}]"


def problems(obj: dict[str, Any], version: str = "1.33") -> list[tuple[str, str, str]]:
    """(code, path, message) of every problem kubetrain's API-server check finds in `obj`."""
    manifest = Manifest(f"{obj['kind']}.yaml", obj, Path("/cluster", "ns"))
    return [(code, path, message) for _, code, path, message in api_server_problems([manifest], lambda m: version)]


def check(row: Row) -> None:
    found = problems(row.obj, row.version)
    if row.path is None:
        assert found == [], f"{row.source} {row.id}: upstream accepts it; kubetrain found {found}"
    else:
        assert row.path in {path for _, path, _ in found}, \
            f"{row.source} {row.id}: upstream refuses {row.path}; kubetrain found {found}"


def pod(spec: dict[str, Any] | None = None, *, name: str = "123", annotations: dict[str, str] | None = None,
        container: dict[str, Any] | None = None, init: dict[str, Any] | None = None) -> dict[str, Any]:
    """podtest.MakePod(name): one container "ctr" of image "image", restartPolicy Always, dnsPolicy ClusterFirst;
    `container` adds fields to that container, `init` adds an init container, `spec` adds pod fields."""
    body = {"name": "ctr", "image": "image", "imagePullPolicy": "IfNotPresent",
            "terminationMessagePolicy": "File", **copy.deepcopy(container or {})}
    spec_body: dict[str, Any] = {"containers": [body], "restartPolicy": "Always", "dnsPolicy": "ClusterFirst"}
    if init is not None:
        spec_body["initContainers"] = [{"image": "image", "imagePullPolicy": "IfNotPresent",
                                        "terminationMessagePolicy": "File", **copy.deepcopy(init)}]
    spec_body.update(copy.deepcopy(spec or {}))
    metadata: dict[str, Any] = {"name": name, "namespace": "ns"}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec_body}


# -- CEL library cases ---------------------------------------------------------------------------------------

class Outcome:
    """What a CEL case expects besides a plain value."""

    def __init__(self, what: str, expression: str = "") -> None:
        self.what, self.expression = what, expression

    def __repr__(self) -> str:
        return f"{self.what}({self.expression})" if self.expression else self.what


RUNTIME_ERROR = Outcome("runtime error")
COMPILE_ERROR = Outcome("compile error")
REFUSED = Outcome("compile or runtime error")  # kubetrain refuses the rule's objects where Kubernetes refuses the rule


def equals(expression: str) -> Outcome:
    """The result is the value `expression` evaluates to (an opaque value: a quantity, an IP, a CIDR), compared
    with CEL's own ==, as the upstream test compares with ref.Val.Equal."""
    return Outcome("equals", expression)


@dataclass(frozen=True)
class CelRow:
    test: str
    case: str
    expression: str
    expect: Any  # upstream's outcome: a plain value, RUNTIME_ERROR, COMPILE_ERROR or equals(...)
    kubetrain: Any = None  # kubetrain's outcome where it differs on purpose (then `note` says why)
    note: str = ""
    source: str = ""

    @classmethod
    def citing(cls, source: str) -> Callable[..., CelRow]:
        return functools.partial(cls, source=source)

    @property
    def id(self) -> str:
        return f"{self.test}[{self.case}]"


def check_cel(row: CelRow) -> None:
    from cel_expr_python import cel
    from kubetrain.validation.cel_library import environment

    where = f"{row.source} {row.id}: {row.expression}"
    expect = row.expect if row.kubetrain is None else row.kubetrain
    assert row.kubetrain is None or row.note, f"{where}: a row that differs says why"
    expression = f"({row.expression}) == ({expect.expression})" if isinstance(expect, Outcome) and \
        expect.what == "equals" else row.expression
    try:
        program = environment().compile(expression)
    except RuntimeError as error:
        assert expect in (COMPILE_ERROR, REFUSED), f"{where}: does not compile: {error}"
        return
    assert expect is not COMPILE_ERROR, f"{where}: compiles, upstream refuses it"
    result = program.eval()
    if expect in (RUNTIME_ERROR, REFUSED):
        assert result.type() == cel.Type.ERROR, f"{where}: evaluates to {result.plain_value()!r}, upstream errors"
        return
    assert result.type() != cel.Type.ERROR, f"{where}: evaluation error {result.value()}"
    value = result.plain_value()
    expected = True if isinstance(expect, Outcome) else expect
    if isinstance(expected, float):
        assert isinstance(value, float) and abs(value - expected) < 1e-4, f"{where}: {value!r} != {expected!r}"
    else:
        assert value == expected and type(value) is type(expected), f"{where}: {value!r} != {expected!r}"
