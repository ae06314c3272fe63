"""The Argo CD health checks, run by a real Lua 5.1 (lupa) in Argo CD's sandbox: no standard library.

Each kind's cases are in Argo CD's own test layout (`<group>/<kind>/health_test.yaml` with
`testdata/*.yaml`), so they can be carried to an Argo CD checkout's resource_customizations unchanged.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from kubetrain.gitops.health import HEALTH_KEY, argocd_cm_patch, checked_kinds, script

lupa = pytest.importorskip("lupa.lua51")

CASES = Path(__file__).parent / "gitops_health"


def run_health(lua_source: str, obj: dict) -> dict:
    """Run a health script as Argo CD does without useOpenLibs: the object as global `obj`, nothing else.
    The environment here is even stricter (not even the base library), so a script that passes here
    passes in Argo CD's gopher-lua."""
    runtime = lupa.LuaRuntime(unpack_returned_tuples=True)
    sandboxed = runtime.eval("""function(source, obj)
        local chunk, problem = loadstring(source, "health.lua")
        if chunk == nil then error(problem) end
        setfenv(chunk, {obj = obj})
        return chunk()
    end""")
    result = sandboxed(lua_source, runtime.table_from(obj, recursive=True))
    return {key: result[key] for key in ("status", "message") if result[key] is not None}


def _cases() -> list:
    found = []
    for kind in checked_kinds():
        tests = yaml.safe_load((CASES / kind.group / kind.kind / "health_test.yaml").read_text())["tests"]
        found += [pytest.param(kind, case, id=f"{kind.kind}-{Path(case['inputPath']).stem}") for case in tests]
    return found


@pytest.mark.parametrize(("kind", "case"), _cases())
def test_health_check(kind, case: dict) -> None:
    obj = yaml.safe_load((CASES / kind.group / kind.kind / case["inputPath"]).read_text())
    assert obj["kind"] == kind.kind
    assert run_health(script(kind), obj) == case["healthStatus"]


def test_every_kind_covers_every_status() -> None:
    """Training kinds reach Healthy, Degraded, Suspended and Progressing; the queues too."""
    for kind in checked_kinds():
        tests = yaml.safe_load((CASES / kind.group / kind.kind / "health_test.yaml").read_text())["tests"]
        assert {t["healthStatus"]["status"] for t in tests} == {"Healthy", "Degraded", "Suspended", "Progressing"}


def test_the_sandbox_has_no_standard_library() -> None:
    """The harness itself: a script that calls string.format or ipairs fails, as it would in Argo CD."""
    with pytest.raises(lupa.LuaError):
        run_health('return {status = string.format("%s", "Healthy")}', {})
    with pytest.raises(lupa.LuaError):
        run_health('for _, c in ipairs(obj.status.conditions) do end return {status = "Healthy"}',
                   {"status": {"conditions": []}})


def test_argocd_cm_patch_carries_every_check() -> None:
    patch = argocd_cm_patch("argocd")
    assert patch["metadata"] == {"name": "argocd-cm", "namespace": "argocd",
                                 "labels": {"app.kubernetes.io/part-of": "argocd"}}
    assert set(patch["data"]) == {HEALTH_KEY.format(group=k.group, kind=k.kind) for k in checked_kinds()}
    assert "resource.customizations.health.kubeflow.org_PyTorchJob" in patch["data"]
    assert not any(key.startswith("resource.customizations.useOpenLibs") for key in patch["data"])
