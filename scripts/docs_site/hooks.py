"""mkdocs hooks (mkdocs.yml `hooks:`): a line `<!-- generate: NAME -->` in a page is replaced, at every build, by
what the code says now: a reference table, a command's output on the committed example fleet, or a picture.

So the pages hold the prose, and everything that the code defines is drawn from it (scripts/docs_site/reference.py,
diagrams.py); a page that names a generator that does not exist fails the build.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _project_on_path() -> None:
    """The project root (apps/, examples/, scripts/) and the compiler's source root, on the path as pytest's
    `pythonpath` puts them. mkdocs imports this file by path and restores sys.path afterwards, so this runs again
    when the build starts (on_config), for the generators' own imports."""
    for path in (ROOT, ROOT / "constructs"):
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))


_project_on_path()
from scripts.docs_site import diagrams, reference  # noqa: E402

DIRECTIVE = re.compile(r"^<!-- generate: ([\w-]+)(?: (\S+))? -->$", re.MULTILINE)
DIST = ROOT / "dist"


def _console(text: str) -> str:
    return f"```\n{text.rstrip()}\n```\n"


def plan_output(_: str | None = None) -> str:
    """`kubetrain plan` of the committed dist/, as the command prints it."""
    from kubetrain.admission.plan_command import plan_dist, render_text

    jobs, pools = plan_dist(DIST)
    return _console(render_text(jobs, pools))


def cost_output(_: str | None = None) -> str:
    """`kubetrain cost` of the committed dist/, as the command prints it."""
    from kubetrain.cost.cost_report import render_text
    from kubetrain.cost.estimate import fleet_costs, pools
    from kubetrain.gitops.diff import load_objects
    from kubetrain.model.manifests import yaml_files

    objects = [(key.cluster, obj) for key, obj in load_objects(yaml_files(DIST), str(DIST)).items()]
    return _console(render_text(fleet_costs(objects), pools(objects)))


GENERATORS: dict[str, Callable[[str | None], str]] = {
    "cli": lambda _: reference.cli_markdown(),
    "rules": lambda _: reference.rules_markdown(),
    "rules-table": lambda _: reference.rules_table(),
    "troubleshooting": lambda _: reference.troubleshooting_markdown(),
    "run-config": lambda _: reference.run_config_markdown(),
    "runtime-config": lambda _: reference.runtime_config_markdown(),
    "api": lambda package: reference.api_markdown(package or "kubetrain"),
    "plan": plan_output,
    "cost": cost_output,
    "job-path": lambda _: diagrams.job_path_svg(ROOT / "docs" / "concepts" / "how-a-job-travels.md"),
    "fleet": lambda cluster: diagrams.fleet_svg(DIST, cluster or "prod"),
    "checkpoints": lambda _: diagrams.checkpoint_svg(),
}


def expand(markdown: str, where: str = "") -> str:
    """`markdown` with every directive replaced by its generator's output."""

    def generate(match: re.Match[str]) -> str:
        name, argument = match.group(1), match.group(2)
        if name not in GENERATORS:
            raise ValueError(f"{where}: <!-- generate: {name} --> names no generator; known: "
                             f"{', '.join(sorted(GENERATORS))}")
        return GENERATORS[name](argument)

    return DIRECTIVE.sub(generate, markdown)


def on_config(config):  # noqa: ANN001, ANN201 (mkdocs' hook signature)
    _project_on_path()
    from kubetrain.rules.sources import MANUAL

    # The manual's address is written once, in the package, since the alerts' runbook links the clusters get are
    # its pages; `mkdocs serve` replaces it with its own address as it does any site_url.
    if not config.get("site_url"):
        config["site_url"] = MANUAL
    return config


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ANN001 (mkdocs' hook signature)
    return expand(markdown, page.file.src_path)
