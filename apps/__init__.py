"""The fleet as code: every cluster kubetrain manages, one module each.

`python -m apps`, `kubetrain synth` and `cdk8s synth` all call `build()` and write dist/.
"""

from kubetrain import App

from apps import dev, prod


def build() -> App:
    app = App()
    dev.define(app)
    prod.define(app)
    return app
