"""kubetrain's App: cdk8s's App, holding the fleet's state (kubetrain.state) as `fleet`.

`app.synth()` is `kubetrain synth` into the App's outdir: every problem of the fleet reported at once,
every object validated, the output swapped in whole. (cdk8s's own writer would see none of kubetrain's
objects: they stay plain data and never cross into cdk8s.)
"""

from __future__ import annotations

from typing import Any

import cdk8s

from kubetrain.pipeline import synth
from kubetrain.state import FleetState, fleet_state


class App(cdk8s.App):
    """The root of a fleet: cdk8s's App, with the fleet's shared state as `fleet` (diagnostics, render steps,
    admission records, claims). Its clusters are `Cluster(app, name, ...)`; `app.synth()` is `kubetrain synth`."""

    def __init__(self, **props: Any):
        super().__init__(**props)
        self.fleet: FleetState = fleet_state(self)

    def synth(self) -> None:
        synth(self, self.outdir)
