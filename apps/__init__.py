"""The fleet as code: every cluster kubetrain manages, one module each, delivered by Argo CD.

`python -m apps`, `kubetrain synth` and `kubetrain cdk8s synth` all call `build()` and write dist/.
"""

from kubetrain import App, ArgoCd, ArgoCdProps

from apps import dev, prod

# Where Argo CD reads this repository, and the cluster each folder of dist/ is synced to (names of
# clusters registered in Argo CD). Replace with your fork's URL and your clusters.
REPOSITORY = "https://github.com/kubetrain/kubetrain.git"


def build() -> App:
    app = App()
    dev.define(app)
    prod.define(app)
    ArgoCd(app, "argocd", ArgoCdProps(repo_url=REPOSITORY, revision="main",
                                      destinations={"dev": {"name": "dev"}, "prod": {"name": "prod"}}))
    return app
