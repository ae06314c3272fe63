"""What the conformance tables share: a row citing its upstream test, and kubetrain's API-server check run on a
manifest dict in process (the code synth and `kubetrain validate` run, without the schema pass).

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

from kubetrain.output.apiserver.check import api_server_problems
from kubetrain.output.validate import Manifest

K8S = "kubernetes/kubernetes"
TAG = "v1.33.0"


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
