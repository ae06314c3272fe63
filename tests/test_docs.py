"""The manual's reference pages are the code's own words: every rule, public name, config field and command has a
description to show, every page a rule cites exists, and the README stays the front door.

The site itself is built and opened in a browser by tests/test_docs_site.py; its examples run in
tests/test_docs_examples.py.
"""

from __future__ import annotations

import importlib
import re

import pytest
from conftest import ROOT
from pydantic import BaseModel

from kubetrain.rules.catalog import every_rule
from kubetrain_runtime.runtime_config import RuntimeConfig
from scripts.docs_site import reference
from scripts.docs_site.hooks import DIRECTIVE, GENERATORS, expand
from training.config import RunConfig

DOCS = ROOT / "docs"


@pytest.mark.parametrize("rule", every_rule(), ids=lambda rule: rule.code)
def test_every_rule_says_what_why_fix_and_source(rule):
    for name in ("title", "rationale", "fix", "source"):
        assert getattr(rule, name).strip(), f"{rule.code} has no {name}: the rule reference would show nothing"


@pytest.mark.parametrize("package", ["kubetrain", "kubetrain_runtime"])
def test_every_public_name_has_a_docstring_of_its_own(package):
    missing = []
    for module, name in reference.public_names(package):
        value = getattr(importlib.import_module(module), name)
        own = vars(value).get("__doc__") if isinstance(value, type) else value.__doc__  # a class's, not its base's
        if not (own or "").strip():
            missing.append(f"{module}.{name}")
    assert not missing, f"public names without a docstring (the API reference would be empty): {missing}"


@pytest.mark.parametrize("root", [RunConfig, RuntimeConfig], ids=lambda model: model.__name__)
def test_every_config_field_has_a_description(root: type[BaseModel]):
    missing = [f"{model.__name__}.{name}" for model in reference.models_in(root)
               for name, field in model.model_fields.items() if not reference.description(field).strip()]
    assert not missing, f"fields without a description (the reference would show an empty cell): {missing}"
    undocumented = [model.__name__ for model in reference.models_in(root) if not (model.__doc__ or "").strip()]
    assert not undocumented, f"models without a docstring: {undocumented}"


def test_every_section_a_rule_cites_is_a_page_of_the_site():
    cited = {match.group(1) for rule in every_rule() for match in reference.README_CITATION.finditer(rule.source)}
    unknown = cited - set(reference.SECTION_PAGES)
    assert not unknown, f"rules cite README sections no page holds: {unknown} (add them to SECTION_PAGES)"
    for page in reference.SECTION_PAGES.values():
        assert (DOCS / page).is_file(), page
    linked = reference.link_citations("README.md (The platform)", "reference")
    assert linked == "[The platform](../guides/platform.md)"


def test_the_references_hold_everything_the_code_defines():
    rules = reference.rules_markdown()
    troubleshooting = reference.troubleshooting_markdown()
    for rule in every_rule():
        assert f"{{#{rule.code.lower()}}}" in rules and rule.fix in rules, rule.code
        assert f"[{rule.code}](reference/rules.md#{rule.code.lower()})" in troubleshooting, rule.code
    cli = reference.cli_markdown()
    for name, command in reference._commands():
        assert f"### kubetrain {name}\n" in cli
        for param in command.params:
            shown = param.name.upper() if param.param_type_name == "argument" else param.opts[0]
            assert shown in cli, (name, shown)
    run_config = reference.run_config_markdown()
    for model in reference.models_in(RunConfig):
        for name in model.model_fields:
            assert f"| `{name}` |" in run_config, (model.__name__, name)
    api = reference.api_markdown("kubetrain")
    assert "::: kubetrain.jobs.training_job.TrainingJob" in api and "cdk8s" not in api


def test_the_rule_reference_shows_what_kubetrain_explain_prints():
    from typer.testing import CliRunner

    from kubetrain.cli import app

    printed = CliRunner().invoke(app, ["explain", "KT240"]).output
    page = reference.rules_markdown()
    for line in printed.splitlines()[1:]:
        label, text = line.split(": ", 1)
        shown = reference.link_citations(text, "reference") if label == "source" else text
        assert f"- **{label}**: {shown}" in page, line


def test_every_page_names_only_generators_that_exist_and_every_nav_page_exists():
    import yaml

    for page in DOCS.rglob("*.md"):
        for match in DIRECTIVE.finditer(page.read_text()):
            assert match.group(1) in GENERATORS, f"{page}: {match.group(0)}"
    with pytest.raises(ValueError, match="names no generator"):
        expand("<!-- generate: nothing -->", "page.md")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())

    def pages(nav):
        for item in nav:
            for value in item.values():
                yield from (pages(value) if isinstance(value, list) else [value])

    listed = set(pages(config["nav"]))
    on_disk = {str(page.relative_to(DOCS)) for page in DOCS.rglob("*.md")}
    assert listed == on_disk, f"pages not in the nav: {on_disk - listed}; nav entries without a page: {listed - on_disk}"


def test_the_readme_is_the_front_door_and_keeps_the_quickstart():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 200
    # .ci/run reads the test command from the second line of the Quickstart's first code block.
    block = readme.split("## Quickstart", 1)[1].split("```")[1]
    assert block.splitlines()[2].endswith("&& pytest"), block
    for page in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (ROOT / page).is_file(), page
