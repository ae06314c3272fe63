"""Synth, one step after another: what `kubetrain synth` (and `App.synth()`) does to a fleet, in order.

1. define: the fleet module's `build()` runs (kubetrain.fleet); every construct validates its props and records
   its problems in the fleet's diagnostics, emitting plain objects into its cluster (kubetrain.state); a job's
   `patch()` applies to its objects as they will be written (kubetrain.output.render).
2. check the definitions (`fleet_findings`): what the constructs recorded, then the checks that need the whole
   fleet defined: admission of each cluster's jobs as defined (kubetrain.admission.fleet_admission; a cohort may
   gain the member a job borrows from after the job), and the fleet checks constructs added (Argo CD's run names).
3. render (`render_objects`): every cluster's objects as written, and what a user added to a chart with cdk8s,
   which cdk8s renders; then the fleet's render steps (Argo CD delivery adds its objects and each sync wave).
4. admit (`check_admission`): admission judged again on the objects as rendered, so `kubetrain plan` on dist/
   reaches the same verdict.
5. validate (`check_objects`): every object strictly, as `kubetrain validate` does (kubetrain.validation).
6. write: the files swapped into the output folder whole (kubetrain.output.writer).

Every step reports all of its problems at once; nothing is written unless every step passed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import cdk8s

from constructs import Construct
from kubetrain.admission.fleet_admission import definition_findings, rendered_findings
from kubetrain.cluster import Cluster
from kubetrain.model.diagnostics import DefinitionError, Finding
from kubetrain.model.manifests import Manifest
from kubetrain.model.phases import Progress, phase
from kubetrain.output.emit import dump_manifest
from kubetrain.output.render import as_written
from kubetrain.output.writer import manifest_path, refuse_unless_replaceable, write_tree
from kubetrain.rules.registry import get as rule_named
from kubetrain.rules.registry import register
from kubetrain.rules.sources import CRDS, KV, PRUNING, cite
from kubetrain.state import fleet_state
from kubetrain.validation.validate import Schemas, validate_objects
from kubetrain_runtime.problems import ConfigError, Problem


def synth(app: cdk8s.App, outdir: str | Path, validate: bool = True, progress: Progress | None = None,
          crds: list[Path] | None = None, strict: bool = False,
          warn: Callable[[list[Finding]], None] | None = None) -> dict[Path, str]:
    """The steps above on a defined fleet: its definitions checked (warnings handed to `warn`; with `strict`
    they are errors), rendered, admission judged on what it rendered, every object validated (unless told not
    to; against the shipped schemas, the CRDs of `crds` and those `add_crds` gave the app), and the result
    swapped into `outdir`. Returns what was written. Nothing is written when anything is wrong."""
    refuse_unless_replaceable(Path(outdir))  # before the work, so a wrong --outdir fails fast
    check_definitions(app, strict, warn)
    phase(progress, "rendering")
    objects = render_objects(app)
    check_admission(objects)
    if validate:
        check_objects(objects, phase(progress, "validating", len(objects)), [*(crds or []), *crd_folders(app)])
    advance = phase(progress, "writing", len(objects))
    files = {}
    for path, obj in objects.items():
        files[path] = dump_manifest(obj)
        if advance and len(files) % 256 == 0:
            advance(256)
    write_tree(files, Path(outdir))
    return files


def fleet_findings(scope: Construct) -> list[Finding]:
    """Every problem of the fleet `scope` belongs to, as defined so far: what its constructs recorded, then what
    admission finds in each cluster's jobs and what the fleet checks find (step 2)."""
    fleet = fleet_state(scope)
    recorded = fleet.diagnostics.findings
    found = [f for record in fleet.admission_records for f in definition_findings(record, recorded)]
    return [*recorded, *found, *(f for check in fleet.fleet_checks for f in check())]


def fleet_errors(scope: Construct) -> list[Finding]:
    return [f for f in fleet_findings(scope) if f.severity == "error"]


def fleet_warnings(scope: Construct) -> list[Finding]:
    return [f for f in fleet_findings(scope) if f.severity == "warning"]


def check_definitions(scope: Construct, strict: bool = False,
                      warn: Callable[[list[Finding]], None] | None = None) -> None:
    """Step 2: raise every error of the fleet's definitions (and with `strict`, every warning) as one
    DefinitionError; hand the warnings to `warn` otherwise."""
    found = fleet_findings(scope)
    failing = found if strict else [f for f in found if f.severity == "error"]
    if not strict and warn is not None:
        warn([f for f in found if f.severity == "warning"])
    if failing:
        raise DefinitionError(failing)


def add_crds(scope: Construct, *folders: str | Path) -> None:
    """Validate the fleet's objects also against the CRDs in `folders` (their YAML files), as `kubetrain synth
    --crds DIR` does: kinds kubetrain ships no schema for (a PrometheusRule, a VolumeSnapshot added as a raw
    `ApiObject`), or newer versions of shipped ones. Their CEL rules are evaluated too. A relative folder
    is relative to the working directory synth runs in."""
    fleet_state(scope).crd_folders.extend(Path(folder) for folder in folders)


def crd_folders(scope: Construct) -> list[Path]:
    """The folders `add_crds` gave the fleet."""
    return list(fleet_state(scope).crd_folders)


INVALID_OBJECT = register(
    "KT602", "error", "an emitted object fails strict validation",
    rationale="synth validates every object against the Kubernetes and operator schemas before writing, the "
              "same check `kubetrain validate` makes: what synth writes, the API server accepts whole.",
    fix="fix the field the message names (a JSON patch of the escape hatch, or a raw object in the fleet); if "
        "kubetrain's own output is wrong, report it",
    source=cite(KV, PRUNING))
UNREADABLE_CRDS = register(
    "KT605", "error", "a CRD folder given to synth cannot be read",
    rationale="`kubetrain synth --crds DIR` and `kubetrain.add_crds(app, DIR)` add the CRDs in DIR's YAML files to "
              "the schemas objects are validated against; a folder that does not exist, or a file that is not a "
              "CustomResourceDefinition (a Helm template, a kustomization), would leave kinds unchecked.",
    fix="name a folder that holds only CustomResourceDefinition YAML files (render Helm charts first, e.g. "
        "`helm template` or `helm show crds`)",
    source=CRDS)


def render_objects(app: cdk8s.App) -> dict[Path, dict[str, Any]]:
    """Every object of every chart, by the relative path it is written to, after the fleet's render steps
    (Argo CD delivery adds its objects and sync waves in one). kubetrain's objects are plain data already; what
    a user added to a chart with cdk8s (an ApiObject, a cdk8s-plus construct) cdk8s renders, in one call per
    chart."""
    objects: dict[Path, dict[str, Any]] = {}
    for chart in app.charts:
        chart_id = chart.props.name if isinstance(chart, Cluster) else chart.node.id
        own = [as_written(e, chart.labels_of_objects) for e in chart.state.objects] if isinstance(chart, Cluster) \
            else []
        for obj in [*own, *chart.to_json()]:
            path = manifest_path(chart_id, obj)
            if path in objects:
                raise ConfigError(chart_id, [Problem(
                    "KT010", str(path), "two objects of the same kind, namespace and name",
                    "give one of them another name")])
            objects[path] = obj
    for step in fleet_state(app).render_steps:
        step(objects)
    return objects


def render(app: cdk8s.App) -> dict[Path, str]:
    """Every object of every chart as YAML text, by relative path."""
    return {path: dump_manifest(obj) for path, obj in render_objects(app).items()}


def check_objects(objects: dict[Path, dict[str, Any]], progress: Callable[[int], None] | None = None,
                  crds: list[Path] | None = None) -> None:
    """Validate the rendered objects in memory exactly as `kubetrain validate` validates files (KT602, and
    KT604 for the CRDs' CEL rules), with the CRDs of the folders in `crds` besides the shipped schemas."""
    schemas = crd_schemas(crds or [])
    manifests = [Manifest(str(path), obj, Path("/", *path.parts[:-1])) for path, obj in objects.items()]
    findings = validate_objects(manifests, schemas, progress=progress)
    if findings:
        raise ConfigError("synth", [Problem(finding.code, "", finding.format(with_code=False),
                                            rule_named(finding.code).fix) for finding in findings])


def check_admission(objects: dict[Path, dict[str, Any]]) -> None:
    """Raise what admission refuses among the objects as they are written (after patches and render steps, with
    any cdk8s object a user added): the verdict `kubetrain plan` gives dist/. The fleet's own checks report the
    same problems earlier, on the definitions, unless a render step or an added object brings them."""
    errors = [f for f in rendered_findings(objects) if f.severity == "error"]
    if errors:
        raise DefinitionError(errors)


def crd_schemas(folders: list[Path]) -> Schemas:
    """The shipped schemas and the CRDs of `folders`; a folder that is not one, or a file in it that is not
    a CRD, is bad input (KT605)."""
    problems = [Problem(UNREADABLE_CRDS.code, "", f"{folder} is not a folder", UNREADABLE_CRDS.fix)
                for folder in folders if not folder.is_dir()]
    schemas = Schemas([folder for folder in folders if folder.is_dir()])
    problems += [Problem(UNREADABLE_CRDS.code, "", line, UNREADABLE_CRDS.fix) for line in schemas.unreadable]
    if problems:
        raise ConfigError("crds", problems)
    return schemas
