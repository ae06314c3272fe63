"""`ArgoCd(app, "argocd", props)`: the fleet's declaration that Argo CD delivers it.

The construct records the validated props in the fleet's state and adds a render step: after every chart is
rendered, `delivery.finalize_paths` gets all the objects, since the Argo CD objects depend on all the others.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from constructs import Construct
from kubetrain.cluster import bad_construct_id, construct_id_problem
from kubetrain.gitops.delivery import finalize_paths
from kubetrain.gitops.props import ArgoCdProps
from kubetrain.output.manifests import add_render_step
from kubetrain.state import diagnostics, fleet_state
from kubetrain.strict import as_fields
from kubetrain_runtime.problems import ConfigError, validate_model


class ArgoCd(Construct):
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
        fleet_state(scope).delivery = validated
        add_render_step(scope, lambda objects: _deliver(objects, validated))


def _deliver(objects: dict[Path, dict[str, Any]], props: ArgoCdProps) -> None:
    """The render step: every object annotated with its wave, and the Argo CD objects added."""
    delivered = finalize_paths(objects, props)
    objects.clear()
    objects.update(delivered)


def delivery_props(app: Construct) -> ArgoCdProps | None:
    """The props of the app's ArgoCd construct; None when the fleet declares no Argo CD delivery."""
    return fleet_state(app).delivery
