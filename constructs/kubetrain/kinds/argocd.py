"""Argo CD's kinds (argoproj.io/v1alpha1, Argo CD v3.6): the AppProject and Applications kubetrain.gitops writes
into their own folder of dist/. They live in the management cluster, never in a training cluster's folder, so they
have no sync wave; their schemas validate them like every other object.
"""

from __future__ import annotations

from kubetrain.kinds.base import CrdSource, Kind


def _argocd_crd(name: str) -> CrdSource:
    return CrdSource(f"argoproj.io_{name}.yaml", "argoproj/argo-cd", "v3.6", (API_VERSION,))


API_VERSION = "argoproj.io/v1alpha1"


KINDS = (
    Kind(API_VERSION, "Application", None, crd=_argocd_crd("applications")),
    Kind(API_VERSION, "ApplicationSet", None, crd=_argocd_crd("applicationsets")),
    Kind(API_VERSION, "AppProject", None, crd=_argocd_crd("appprojects")),
)
