"""GitOps delivery: the Argo CD objects that sync dist/ to the clusters, the sync waves and health checks
they rely on, and `kubetrain diff`, the reviewer's view of a change to dist/.

`delivery.finalize` is a pure function over the rendered objects: it annotates every object with its
sync wave and sync options and returns the Argo CD objects (AppProject, one Application per cluster,
the argocd-cm health patch). Only `construct.py` (the `ArgoCd` construct) imports the constructs
library; the rest, `kubetrain diff` included, runs without cdk8s.
"""
