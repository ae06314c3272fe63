"""Argo CD health checks for the kinds Argo CD has none for, as the argocd-cm patch operators apply.

Argo CD (3.x) ships no health check for any Kubeflow, Trainer, JobSet or Kueue kind, and a resource
without one is left out of the app's health: a failed run would never turn the app Degraded. The
scripts in `lua/` fill that gap. They run on gopher-lua (Lua 5.1) without Lua's standard libraries
(Argo CD opens them only with `resource.customizations.useOpenLibs.<group>_<kind>`), so they use none.

Which kinds:
- every training kind kubetrain emits or will: PyTorchJob, MPIJob (kubeflow.org), TrainJob
  (trainer.kubeflow.org) and JobSet (jobset.x-k8s.io, what a TrainJob becomes);
- Kueue's ClusterQueue and LocalQueue: they are in Git, and an inactive queue admits nothing, which the
  app should show as Degraded;
- not Kueue's Workload: Kueue creates it (it is never in Git), so its health would not count toward the
  app's; the job it belongs to shows the same state (Suspended while queued).
"""

from __future__ import annotations

from importlib.resources import files
from typing import Any

from kubetrain.kinds.base import Kind
from kubetrain.kinds.kind_registry import all_kinds

HEALTH_KEY = "resource.customizations.health.{group}_{kind}"


def checked_kinds() -> list[Kind]:
    """Every kind whose descriptor carries a health check."""
    return [kind for kind in all_kinds() if kind.health]


def script(kind: Kind) -> str:
    """The Lua health check of one kind (a file of kubetrain/kinds/lua/)."""
    return (files("kubetrain.kinds") / "lua" / kind.health).read_text()


def argocd_cm_patch(argocd_namespace: str) -> dict[str, Any]:
    """The argocd-cm keys of every check, as a ConfigMap: a valid object for `kubetrain validate`, and a
    strategic-merge patch that adds these keys and leaves the others (`kubectl patch --patch-file`)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "argocd-cm", "namespace": argocd_namespace,
                     "labels": {"app.kubernetes.io/part-of": "argocd"}},
        "data": {HEALTH_KEY.format(group=kind.group, kind=kind.kind): script(kind) for kind in checked_kinds()},
    }
