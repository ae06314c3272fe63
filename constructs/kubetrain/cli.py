"""The `kubetrain` command line: synth, validate and run-local.

Bad input is the user's, not a crash: it prints one line per problem and exits 2, with no
traceback and nothing written.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from pydantic import ValidationError
from rich.console import Console

from kubetrain.manifests import synth as synth_app
from training.problems import ConfigError, problems_from_validation_error

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Compile typed training jobs into Kubernetes YAML, and check it.")
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

EXIT_BAD_INPUT = 2


def run_synth(app_module: str = "apps", outdir: Path | None = None) -> int:
    """Build the fleet in `app_module` (its `build()` returns a cdk8s App) and write it to `outdir`."""
    outdir = outdir or Path(os.environ.get("CDK8S_OUTDIR") or "dist")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # the fleet lives in the project, not in site-packages
    try:
        fleet = importlib.import_module(app_module).build()
        written = synth_app(fleet, outdir)
    except ConfigError as exc:
        return _report(exc.lines(), outdir)
    except ValidationError as exc:  # a model built directly in the app, outside any construct
        return _report([p.format(exc.title) for p in problems_from_validation_error(exc)], outdir)
    clusters = sorted({path.parts[0] for path in written})
    out.print(f"synthesized {len(written)} objects for {len(clusters)} clusters ({', '.join(clusters)}) into {outdir}/")
    return 0


def _report(lines: list[str], outdir: Path) -> int:
    for line in lines:
        err.print(f"error: {line}", markup=False)
    err.print(f"synth failed with {len(lines)} problem(s); {outdir}/ was not changed", markup=False)
    return EXIT_BAD_INPUT


@app.command()
def synth(
    app_module: Annotated[str, typer.Option("--app", help="Python module whose build() returns the cdk8s App.")] = "apps",
    outdir: Annotated[Optional[Path], typer.Option(help="Output folder. Default: $CDK8S_OUTDIR, else dist.")] = None,
) -> None:
    """Synthesize the fleet into one YAML file per Kubernetes object."""
    raise typer.Exit(run_synth(app_module, outdir))


@app.command()
def validate(
    paths: Annotated[Optional[list[Path]], typer.Argument(help="Files or folders of manifests. Default: dist.")] = None,
    crds: Annotated[Optional[Path], typer.Option(help="Folder of CRD YAML files for custom resources.")] = None,
    kubernetes_version: Annotated[Optional[str], typer.Option(
        help="Validate against this Kubernetes version. Default: each cluster's declared version.")] = None,
) -> None:
    """Strictly validate manifests offline: unknown fields, wrong types and unknown kinds are errors."""
    from kubetrain.validate import CrdSchemas, supported_versions, validate_manifests

    paths = paths or [Path("dist")]
    for path in paths:
        if not path.exists():
            err.print(f"error: {path} does not exist", markup=False)
            raise typer.Exit(EXIT_BAD_INPUT)
    if crds is not None and not crds.is_dir():
        err.print(f"error: --crds {crds} is not a folder", markup=False)
        raise typer.Exit(EXIT_BAD_INPUT)
    if kubernetes_version and kubernetes_version not in supported_versions():
        err.print(f"error: --kubernetes-version {kubernetes_version} is not one of {', '.join(supported_versions())}",
                  markup=False)
        raise typer.Exit(EXIT_BAD_INPUT)
    schemas = CrdSchemas(crds) if crds else None
    count, findings = validate_manifests(paths, schemas, kubernetes_version)
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
    steps: Annotated[Optional[int], typer.Option(help="Override the run config's max_steps.")] = None,
    workdir: Annotated[Optional[Path], typer.Option(
        help="Where volumes live. Default: .run-local/<job>; checkpoints there survive, so a rerun resumes.")] = None,
    overrides: Annotated[Optional[list[str]], typer.Option(
        "--set", help="Override a run config field, dotted.key=value (repeatable).")] = None,
    dist: Annotated[Path, typer.Option(help="The synthesized manifests.")] = Path("dist"),
) -> None:
    """Run a committed PyTorchJob on this machine: one process per replica, CPU and gloo."""
    from kubetrain.run_local import find_job, plan_pods, run_pods

    try:
        job_file = find_job(dist, job)
        pods = plan_pods(job_file, workdir or Path(".run-local") / job.replace("/", "-"), steps, overrides or [])
    except ConfigError as exc:
        for line in exc.lines():
            err.print(f"error: {line}", markup=False)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    raise typer.Exit(run_pods(pods))


def main() -> None:
    app()
