"""`ArgoCd(app, "argocd", props)`: the fleet's declaration that Argo CD delivers it.

The construct keeps its validated props and adds a render step: after every chart is rendered,
`delivery.finalize_paths` gets all the objects, since the Argo CD objects depend on all the others. It also adds a
fleet check, run by synth once the fleet is defined: that Argo CD can sync every change to a run (KT504).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from constructs import Construct
from kubetrain.cluster import Cluster, bad_construct_id, construct_id_problem
from kubetrain.gitops.argocd_props import ArgoCdProps
from kubetrain.gitops.delivery import finalize_paths
from kubetrain.kinds.kind_registry import run_kind
from kubetrain.model.diagnostics import Finding
from kubetrain.model.strict import as_fields
from kubetrain.model.vocabulary import JOB_LABEL
from kubetrain.rules.registry import register
from kubetrain.rules.sources import ARGO_APP, cite
from kubetrain.state import add_render_step, diagnostics, fleet_state
from kubetrain_runtime.problems import ConfigError, Problem, validate_model

FIXED_RUN_NAMES = register(
    "KT504", "warning", "Argo CD delivers runs that keep their name when they change",
    rationale="A run object's spec is immutable once created (a PyTorchJob's, TrainJob's, JobSet's or Job's pod "
              "templates), so when a run named <job> changes, by an edit or by a kubetrain upgrade that renders it "
              "differently, Argo CD's sync fails with \"field is immutable\" for as long as the old run exists: "
              "self-heal retries, the change never lands, and deleting the run by hand restarts it. Runs named by "
              "what is rendered (content-hash) are a new object on every change, which Argo CD creates while it "
              "prunes the old one; `kubetrain diff` names the run replaced and where it resumes.",
    fix="set Cluster(..., run_names=\"content-hash\") on the cluster",
    source=cite(ARGO_APP, "https://kubernetes.io/docs/concepts/workloads/controllers/job/"))


class ArgoCd(Construct):
    """The fleet's declaration that Argo CD delivers it: `ArgoCd(app, "argocd", ArgoCdProps(repo_url=...,
    destinations={cluster: ...}))` writes the AppProject, one Application per cluster and the argocd-cm health
    checks, and gives every object its sync wave."""

    def __init__(self, scope: Construct, id: str, props: ArgoCdProps | dict[str, Any] | None = None, **kwargs: Any):
        id_problem = bad_construct_id(id)
        try:
            super().__init__(scope, "argocd#invalid-id" if id_problem else id)
        except RuntimeError as error:  # the id of a cluster, say: KT010, not a jsii crash
            id_problem = construct_id_problem(error, "id")
            if id_problem is None:
                raise
            super().__init__(scope, f"argocd#{len(scope.node.children)}")
        try:
            validated = validate_model(ArgoCdProps, {**as_fields(props), **kwargs}, where=str(id) or "argocd")
            problems = [id_problem] if id_problem else []
        except ConfigError as error:
            problems = error.problems
        if problems:  # recorded: synth reports them with the rest of the fleet's problems
            diagnostics(scope).report(str(id) or "argocd", problems)
            return
        self.props = validated
        add_render_step(scope, lambda objects: _deliver(objects, validated))
        app = scope.node.root
        fleet_state(scope).fleet_checks.append(lambda: _fixed_run_names(app))


def _fixed_run_names(app: Construct) -> list[Finding]:
    """KT504 for each delivered cluster whose runs keep their job's name."""
    found = []
    for cluster in app.node.children:
        if not isinstance(cluster, Cluster) or cluster.props.run_names != "fixed":
            continue
        runs = sorted({labels[JOB_LABEL] for e in cluster.state.objects if run_kind(e.manifest) is not None and
                       JOB_LABEL in (labels := (e.manifest.get("metadata") or {}).get("labels") or {})})
        if runs:
            named = ", ".join(runs[:3]) + (f" and {len(runs) - 3} more" if len(runs) > 3 else "")
            found.append(Finding(cluster.props.name, Problem(
                FIXED_RUN_NAMES.code, "run_names",
                f"Argo CD delivers runs named after their job ({named}): a change to one, or a kubetrain upgrade "
                "that renders it differently, fails to sync while the run exists (its spec is immutable)",
                FIXED_RUN_NAMES.fix)))
    return found


def _deliver(objects: dict[Path, dict[str, Any]], props: ArgoCdProps) -> None:
    """The render step: every object annotated with its wave, and the Argo CD objects added."""
    delivered = finalize_paths(objects, props)
    objects.clear()
    objects.update(delivered)


def delivery_props(app: Construct) -> ArgoCdProps | None:
    """The props of the app's ArgoCd construct; None when the fleet declares no Argo CD delivery."""
    return next((child.props for child in app.node.children if isinstance(child, ArgoCd) and hasattr(child, "props")),
                None)
