"""The site's reference pages, generated from the code that defines what they describe: the command line from the
typer app, the rules (and the troubleshooting page) from the rule registry, the run config and the runtime config
from their pydantic models, the Python API from the packages' exports. A rule, field, command or export added in
code appears on the site without a docs edit; tests/test_docs.py fails where one has no description.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

ROOT = Path(__file__).resolve().parents[2]

# Where each README section of the one-page manual went: rule sources cite "README.md (<section>)", and the
# reference links each such citation to its page.
SECTION_PAGES = {
    "Quickstart": "getting-started.md",
    "Tests": "getting-started.md",
    "How a job travels": "concepts/how-a-job-travels.md",
    "Adding a kind": "guides/adding-a-kind.md",
    "Writing a job": "guides/writing-a-job.md",
    "The platform": "guides/platform.md",
    "Admission": "guides/queues-and-admission.md",
    "Will it fit in GPU memory": "guides/memory-fit.md",
    "Commands": "reference/cli.md",
    "What a run costs": "guides/cost.md",
    "The training runtime": "guides/training-runtime.md",
    "Hugging Face models and data sets": "guides/huggingface.md",
    "Your own loop on the runtime": "guides/own-loop.md",
    "Resilience": "guides/resilience.md",
    "Debugging a run": "guides/debugging-and-profiling.md",
    "Training alerts": "guides/alerts.md",
    "Profiling on request": "guides/debugging-and-profiling.md",
    "Benchmarks": "benchmarks.md",
    "GitOps delivery": "guides/gitops.md",
    "Choices": "concepts/choices.md",
    "Rules": "reference/rules.md",
    "Layout": "reference/layout.md",
}
README_CITATION = re.compile(r"README\.md \(([^)]+)\)")


def _escape(text: str) -> str:
    """Text in a Markdown table cell: pipes escaped, one line."""
    return " ".join(str(text).split()).replace("|", "\\|")


def link_citations(source: str, page_dir: str) -> str:
    """A rule's source with each "README.md (<section>)" linked to the page that now holds the section."""
    depth = page_dir.count("/") + 1 if page_dir else 0

    def link(match: re.Match[str]) -> str:
        page = SECTION_PAGES.get(match.group(1))
        return f"[{match.group(1)}]({'../' * depth}{page})" if page else match.group(0)

    return README_CITATION.sub(link, source)


# ---- rules ------------------------------------------------------------------------------------------------------

def rule_areas() -> list[tuple[str, str]]:
    """(code prefix, area) of the registry's code ranges, read from its docstring ("KT1xx  jobs and their pods")."""
    from kubetrain.rules import registry

    return re.findall(r"^\s+(KT\d)xx\s+(.+)$", registry.__doc__ or "", re.MULTILINE)


def _by_area() -> Iterator[tuple[str, str, list[Any]]]:
    from kubetrain.rules.catalog import every_rule

    rules = every_rule()
    for prefix, area in rule_areas():
        members = [rule for rule in rules if rule.code.startswith(prefix)]
        if members:
            yield prefix, area, members


def rules_markdown() -> str:
    """Every rule, by area: the text `kubetrain explain CODE` prints, one section per rule (anchor: its code)."""
    from kubetrain.rules.catalog import explanation

    out = []
    for prefix, area, rules in _by_area():
        out.append(f"## {prefix}xx: {area}\n")
        for rule in rules:
            out.append(f"### {rule.code}: {rule.title} {{#{rule.code.lower()}}}\n")
            out.append(f"**{rule.severity}**\n")
            for label, text in explanation(rule):
                text = link_citations(text, "reference") if label == "source" else text
                out.append(f"- **{label}**: {text}")
            out.append("")
    return "\n".join(out)


def rules_table() -> str:
    from kubetrain.rules.catalog import markdown_table

    return markdown_table()


def troubleshooting_markdown() -> str:
    """The rules' fixes, by area: what a refusal means and what to change, each linked to its full rule."""
    out = []
    for prefix, area, rules in _by_area():
        out.append(f"## {area.capitalize()} ({prefix}xx)\n")
        out.append("| code | what synth (or the pod) says | what to do |")
        out.append("|---|---|---|")
        for rule in rules:
            out.append(f"| [{rule.code}](reference/rules.md#{rule.code.lower()}) | {_escape(rule.title)} "
                       f"({rule.severity}) | {_escape(rule.fix)} |")
        out.append("")
    return "\n".join(out)


# ---- the command line -------------------------------------------------------------------------------------------

def _commands() -> list[tuple[str, Any]]:
    import typer.main

    from kubetrain.cli import app

    return sorted(typer.main.get_command(app).commands.items())


def _type_name(param: Any, context: Any) -> str:
    if getattr(param, "is_flag", False):
        return "flag"
    if hasattr(param, "type"):  # click's parameters
        return param.type.name
    return str(param.display_type(context)).strip("<>").lower() or "text"  # typer's own (its vendored click)


def cli_markdown() -> str:
    """Every command of `kubetrain`, its help and every argument and option, from the typer app itself."""
    out = []
    for name, command in _commands():
        context = command.context_class(command, info_name=f"kubetrain {name}")
        out.append(f"### kubetrain {name}\n")
        out.append(" ".join((command.help or "").split()) + "\n")
        usage = command.get_usage(context).removeprefix("Usage: ").strip()
        out.append(f"```\n{usage}\n```\n")
        params = [param for param in command.params if param.name != "help"]
        if params:
            out.append("| argument or option | type | default | meaning |")
            out.append("|---|---|---|---|")
        for param in params:
            if param.param_type_name == "argument":
                names = f"`{param.name.upper()}`"
            else:
                names = ", ".join(f"`{opt}`" for opt in [*param.opts, *param.secondary_opts])
            default = param.default
            shown = "" if param.required or default is None or (getattr(param, "is_flag", False) and not default) \
                else f"`{default}`"
            repeat = " (repeatable)" if getattr(param, "multiple", False) or param.nargs == -1 else ""
            out.append(f"| {names} | {_type_name(param, context)}{repeat} | {shown} | {_escape(getattr(param, 'help', '') or '')} |")
        out.append("")
    return "\n".join(out)


# ---- pydantic models: the run config and the runtime config ----------------------------------------------------

def _strip(annotation: Any) -> Any:
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def type_text(annotation: Any) -> str:
    """A field's type as a reader writes it in YAML: `int`, `auto` or `int`, one of the literals."""
    annotation = _strip(annotation)
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " \\| ".join(f"`{value}`" for value in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(type_text(arg) for arg in typing.get_args(annotation))
    if origin in (list, tuple, set, frozenset):
        args = [arg for arg in typing.get_args(annotation) if arg is not Ellipsis]
        return f"list of {type_text(args[0])}" if args else "list"
    if origin is dict:
        key, value = typing.get_args(annotation)
        return f"map of {type_text(key)} to {type_text(value)}"
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{annotation.__name__.lower()})"
    name = getattr(annotation, "__name__", None) or str(annotation)
    return {"str": "string", "Text": "string", "bool": "boolean", "int": "integer", "float": "number"}.get(name, name)


def _models(annotation: Any) -> list[type[BaseModel]]:
    annotation = _strip(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in typing.get_args(annotation) for model in _models(arg)]


def _default(field: Any) -> str:
    if field.default_factory is not None:
        value = field.default_factory()
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if isinstance(value, BaseModel):
        return "its defaults"
    if isinstance(value, tuple):
        value = list(value)
    return "unset" if value is None else f"`{value}`"


def description(field: Any) -> str:
    """A field's description; a section (a field holding a model) without one is described by its model's
    docstring, first sentence."""
    if field.description:
        return field.description
    docs = [" ".join((model.__doc__ or "").split()) for model in _models(field.annotation)]
    return " / ".join(doc.split(". ")[0].rstrip(".") + "." for doc in docs if doc)


def models_in(root: type[BaseModel]) -> list[type[BaseModel]]:
    """`root` and every model its fields hold, depth first, each once."""
    seen: list[type[BaseModel]] = []

    def visit(model: type[BaseModel]) -> None:
        if model in seen:
            return
        seen.append(model)
        for field in model.model_fields.values():
            for nested in _models(field.annotation):
                visit(nested)

    visit(root)
    return seen


def model_markdown(root: type[BaseModel], path_names: dict[type[BaseModel], str] | None = None) -> str:
    """One section per model reachable from `root`: its docstring, then a row per field (type, default,
    description), in the order the model declares them."""
    out = []
    for model in models_in(root):
        out.append(f"### {model.__name__} {{#{model.__name__.lower()}}}\n")
        if path_names and model in path_names:
            out.append(f"At `{path_names[model]}`.\n")
        out.append(" ".join((model.__doc__ or "").split()) + "\n")
        out.append("| field | type | default | description |")
        out.append("|---|---|---|---|")
        for name, field in model.model_fields.items():
            out.append(f"| `{field.alias or name}` | {type_text(field.annotation)} | {_default(field)} | "
                       f"{_escape(description(field))} |")
        out.append("")
    return "\n".join(out)


def field_paths(root: type[BaseModel], prefix: str = "") -> dict[type[BaseModel], str]:
    """Where each nested model sits in a YAML file of `root` (`checkpoint`, `model`)."""
    paths: dict[type[BaseModel], str] = {}
    for name, field in root.model_fields.items():
        for nested in _models(field.annotation):
            if nested not in paths:
                paths[nested] = f"{prefix}{name}"
                for deeper, path in field_paths(nested, f"{prefix}{name}.").items():
                    paths.setdefault(deeper, path)
    return paths


def run_config_markdown() -> str:
    from training.config import RunConfig

    return model_markdown(RunConfig, field_paths(RunConfig))


def runtime_config_markdown() -> str:
    from kubetrain_runtime.runtime_config import RuntimeConfig

    return model_markdown(RuntimeConfig, field_paths(RuntimeConfig))


# ---- the Python API ---------------------------------------------------------------------------------------------

def public_names(package: str) -> list[tuple[str, str]]:
    """(module, name) of every name `package` exports, its own modules only (cdk8s's re-exports are cdk8s's)."""
    import importlib

    exports = importlib.import_module(package)._EXPORTS
    own = ("kubetrain", "training", "kubetrain_runtime")
    return sorted(((module, name) for name, module in exports.items() if module.split(".")[0] in own),
                  key=lambda pair: (pair[0], pair[1]))


def api_markdown(package: str) -> str:
    """mkdocstrings blocks for every export of `package`, by module."""
    out = []
    module = None
    for owner, name in public_names(package):
        if owner != module:
            module = owner
            out.append(f"## `{module}`\n")
        out.append(f"::: {owner}.{name}\n")
    return "\n".join(out)
