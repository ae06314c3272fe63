"""`ArgoCd(app, "argocd", props)`: the fleet's declaration that Argo CD delivers it.

The construct only records the validated props on the app; synth's render passes them, with every
rendered object, to `delivery.finalize_paths`, since the Argo CD objects depend on all the others.
"""

from __future__ import annotations

from typing import Any

from constructs import Construct
from kubetrain.gitops.props import ArgoCdProps
from training.problems import validate_model

_ATTRIBUTE = "_kubetrain_argocd"


class ArgoCd(Construct):
    def __init__(self, scope: Construct, id: str, props: ArgoCdProps | dict[str, Any]):
        validated = props if isinstance(props, ArgoCdProps) else validate_model(ArgoCdProps, props, where=id)
        super().__init__(scope, id)
        self.props = validated
        setattr(scope.node.root, _ATTRIBUTE, validated)


def delivery_props(app: Construct) -> ArgoCdProps | None:
    """The props of the app's ArgoCd construct; None when the fleet declares no Argo CD delivery."""
    return getattr(app.node.root, _ATTRIBUTE, None)
