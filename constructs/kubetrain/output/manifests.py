"""Writing a cdk8s app's objects into dist/: one file per object, all or nothing.

Layout: `<outdir>/<chart>/<namespace>/<Kind>.<name>.yaml`, cluster-scoped objects under
`<outdir>/<chart>/_cluster/` (an underscore cannot start a namespace name, so they never clash).
One file per object makes a pull request show exactly which object changed; the namespace level
keeps same-named objects of different namespaces apart (cdk8s's own per-resource output does not).
"""

from __future__ import annotations

import ctypes
import errno
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import cdk8s

from constructs import Construct
from kubetrain.admission.synth import rendered_findings
from kubetrain.cluster import Cluster
from kubetrain.model.diagnostics import DefinitionError
from kubetrain.output.render import as_written
from kubetrain.output.emit import dump_manifest
from kubetrain.model.phases import Progress, phase
from kubetrain.validation.validate import Manifest, Schemas, validate_objects
from kubetrain.rules.registry import get as rule_named
from kubetrain.rules.registry import register
from kubetrain.rules.sources import CRDS, KV, PRUNING, cite
from kubetrain.state import RenderStep, fleet_state
from kubetrain_runtime.problems import ConfigError, Problem

CLUSTER_SCOPED_FOLDER = "_cluster"


def manifest_path(chart: str, obj: dict[str, Any]) -> Path:
    metadata = obj.get("metadata", {})
    folder = metadata.get("namespace") or CLUSTER_SCOPED_FOLDER
    return Path(chart, folder, f"{obj['kind']}.{metadata['name']}.yaml")


def add_render_step(scope: Construct, step: RenderStep) -> None:
    """Run `step` after every chart of the fleet `scope` belongs to is rendered, before validation and writing. It
    gets the objects by the relative path they are written to, and may change them (an annotation, a sync wave)
    or add new ones under new paths (`manifest_path(chart, obj)`); steps run in the order they were added. What a
    step leaves is validated like every other object, so synth and validate still agree."""
    fleet_state(scope).render_steps.append(step)


def add_crds(scope: Construct, *folders: str | Path) -> None:
    """Validate the fleet's objects also against the CRDs in `folders` (their YAML files), as `kubetrain synth
    --crds DIR` does: kinds kubetrain ships no schema for (a PrometheusRule, a VolumeSnapshot added as a raw
    `ApiObject`), or newer versions of shipped ones. Their CEL rules are evaluated too. A relative folder
    is relative to the working directory synth runs in."""
    fleet_state(scope).crd_folders.extend(Path(folder) for folder in folders)


def crd_folders(scope: Construct) -> list[Path]:
    """The folders `add_crds` gave the fleet."""
    return list(fleet_state(scope).crd_folders)


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


MARKER = ".kubetrain-synth"
MARKER_TEXT = ("This folder is written by `kubetrain synth`, which replaces all of it on every run.\n"
               "These are the files it wrote; any other file here stops the next synth (KT601).\n")
_MANIFEST_NAME = re.compile(r"^[A-Z][A-Za-z0-9]*\.[a-z0-9]([-a-z0-9.]*[a-z0-9])?\.yaml$")
# What an interrupted synth can leave beside the output folder: its staging folder (and, from older versions
# of synth, the retired output). Both are recognised by the marker inside, and git-ignored (.gitignore).
_LEFTOVER_PREFIXES = ("tmp-", "old-")


def marker_text(paths: Iterable[Path]) -> str:
    """The marker: what the folder is, then every file synth wrote into it, one relative path a line."""
    return MARKER_TEXT + "".join(f"{path.as_posix()}\n" for path in sorted(paths))


def written_by_synth(outdir: Path) -> set[str] | None:
    """The files the marker of `outdir` says synth wrote (relative POSIX paths), or None for a marker from an
    older synth that lists none."""
    lines = (outdir / MARKER).read_text(encoding="utf-8", errors="replace").splitlines()
    header = MARKER_TEXT.splitlines()
    return set(lines[len(header):]) if lines[:len(header)] == header else None

INVALID_OBJECT = register(
    "KT602", "error", "an emitted object fails strict validation",
    rationale="synth validates every object against the Kubernetes and operator schemas before writing, the "
              "same check `kubetrain validate` makes: what synth writes, the API server accepts whole.",
    fix="fix the field the message names (a JSON patch of the escape hatch, or a raw object in the fleet); if "
        "kubetrain's own output is wrong, report it",
    source=cite(KV, PRUNING))
UNWRITABLE = register(
    "KT603", "error", "the output folder cannot be written",
    rationale="synth stages its output beside the output folder and swaps it in; without write access there "
              "(or with a full disk) nothing is written and the old folder stays as it was.",
    fix="choose a folder you can write, or free space",
    source="README.md (Commands)")
UNREADABLE_CRDS = register(
    "KT605", "error", "a CRD folder given to synth cannot be read",
    rationale="`kubetrain synth --crds DIR` and `kubetrain.add_crds(app, DIR)` add the CRDs in DIR's YAML files to "
              "the schemas objects are validated against; a folder that does not exist, or a file that is not a "
              "CustomResourceDefinition (a Helm template, a kustomization), would leave kinds unchecked.",
    fix="name a folder that holds only CustomResourceDefinition YAML files (render Helm charts first, e.g. "
        "`helm template` or `helm show crds`)",
    source=CRDS)
NOT_SYNTH_OUTPUT = register(
    "KT601", "error", "the output folder holds more than synth's output",
    rationale="synth replaces its output folder whole; a folder with anything else in it (the project root, "
              "a .git, your files) would be destroyed.",
    fix="choose an empty or new folder, or the folder synth wrote before (it carries a .kubetrain-synth marker)",
    source="README.md (Commands)")


def replaceable(outdir: Path) -> str | None:
    """Why synth must not replace `outdir` (None: it may). It may replace an empty folder, one whose marker lists
    every file in it (what synth wrote last time), or one that provably holds only manifests in synth's layout
    (<cluster>/<folder>/<Kind>.<name>.yaml). A file synth did not write is never deleted: it is named instead."""
    if not outdir.exists():
        existing = next((parent for parent in outdir.absolute().parents if parent.exists()), None)
        return f"{existing} is not a folder" if existing is not None and not existing.is_dir() else None
    if not outdir.is_dir() or outdir.is_symlink():
        return f"{outdir} is not a folder"
    if Path.cwd().resolve().is_relative_to(outdir.resolve()):
        return f"{outdir} holds the current folder"
    written = written_by_synth(outdir) if (outdir / MARKER).is_file() else None
    tracked: set[str] | None = None
    for path in sorted(outdir.rglob("*")):
        relative = path.relative_to(outdir)
        if path.is_dir() and not path.is_symlink():
            if written is None and len(relative.parts) >= 3:
                return f"{outdir} holds {relative}, which synth did not write"
            continue
        if written is not None:
            ours = relative.as_posix() in written or relative.as_posix() == MARKER
            if not ours:  # committed to git (a merge brought it): recoverable from the repository, not a user's own
                tracked = _tracked_by_git(outdir) if tracked is None else tracked
                ours = relative.as_posix() in tracked
        else:
            ours = (path.is_file() and not path.is_symlink() and len(relative.parts) == 3
                    and _MANIFEST_NAME.match(relative.name)) or relative.as_posix() == MARKER
        if not ours:
            return f"{outdir} holds {relative}, which synth did not write (move it out of the folder)"
    return None


def _tracked_by_git(folder: Path) -> set[str]:
    """The files under `folder` that git tracks, relative to it (empty outside a repository or without git)."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=folder, capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return set()
    return set(listed.stdout.decode("utf-8", "replace").split("\0")) - {""} if listed.returncode == 0 else set()


def write_tree(files: dict[Path, str], outdir: Path) -> None:
    """Replace `outdir` with exactly `files` (and the marker); on any failure the old `outdir` is left
    untouched, and a folder that holds anything synth did not write is never replaced (KT601)."""
    refuse_unless_replaceable(outdir)
    outdir = outdir.resolve()
    try:
        outdir.parent.mkdir(parents=True, exist_ok=True)
        _remove_leftovers(outdir)
        _swap_in(files, outdir)
    except OSError as error:  # a read-only or full disk: the user's to fix, not a crash
        reason = f"cannot write {outdir}: {error.strerror or error}"
        raise ConfigError(str(outdir), [Problem(UNWRITABLE.code, "", reason, UNWRITABLE.fix)]) from None


def _remove_leftovers(outdir: Path) -> None:
    """Delete what an interrupted synth left beside `outdir`: its staging folders (and older synths' retired
    outputs), each recognised as synth's by its marker, or empty (killed before it wrote anything)."""
    for prefix in _LEFTOVER_PREFIXES:
        for leftover in outdir.parent.glob(f".{glob.escape(outdir.name)}.{prefix}*"):
            if not leftover.is_dir() or leftover.is_symlink():
                continue
            inside = list(leftover.iterdir())
            if not inside or (leftover / MARKER).is_file() or (leftover / outdir.name / MARKER).is_file():
                shutil.rmtree(leftover)


def _swap_in(files: dict[Path, str], outdir: Path) -> None:
    """Write `files` into a staging folder beside `outdir`, then exchange the two in one step: `outdir` is
    never absent, and never half old, half new. Where the platform cannot exchange two folders, the staged
    files are moved in one by one instead (the folder is then briefly mixed, but never absent)."""
    staging = Path(tempfile.mkdtemp(prefix=f".{outdir.name}.{_LEFTOVER_PREFIXES[0]}", dir=outdir.parent))
    try:
        # The marker first: a staging folder left by a kill is then recognisably synth's.
        (staging / MARKER).write_text(marker_text(files))
        for path, text in files.items():
            target = staging / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        os.chmod(staging, 0o755)
        if not outdir.exists():
            os.rename(staging, outdir)
        elif not exchange(staging, outdir):
            _move_in(staging, outdir, files)
    finally:
        if staging.exists():
            shutil.rmtree(staging)  # after an exchange, it holds the old output


def exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux renameat2 RENAME_EXCHANGE, macOS renamex_np RENAME_SWAP). False where
    the platform, the file system or the paths cannot; other failures raise OSError."""
    libc = ctypes.CDLL(None, use_errno=True)
    old, new = os.fsencode(a), os.fsencode(b)
    if sys.platform.startswith("linux") and hasattr(libc, "renameat2"):
        failed = libc.renameat2(_AT_FDCWD, old, _AT_FDCWD, new, _RENAME_EXCHANGE)
    elif sys.platform == "darwin" and hasattr(libc, "renamex_np"):
        failed = libc.renamex_np(old, new, _RENAME_SWAP)
    else:
        return False
    if not failed:
        return True
    code = ctypes.get_errno()
    # No such call or file system support, or a folder that cannot move (a mount point: EBUSY, EXDEV).
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBUSY, errno.EXDEV):
        return False
    raise OSError(code, os.strerror(code), str(b))


_AT_FDCWD = -100  # fcntl.h: paths relative to the current folder
_RENAME_EXCHANGE = 2  # linux/fs.h
_RENAME_SWAP = 2  # macOS stdio.h


def _move_in(staging: Path, outdir: Path, files: dict[Path, str]) -> None:
    """The fallback of `_swap_in`: replace `outdir`'s files one by one (each `os.replace` is atomic), then
    delete what the new output no longer has. The marker lists old and new files until the end, so a kill
    halfway leaves a folder the next synth may still replace."""
    old = written_by_synth(outdir) or set()
    (outdir / MARKER).write_text(marker_text({*files, *map(Path, old)}))
    for path in files:
        (outdir / path).parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging / path, outdir / path)
    new = {path.as_posix() for path in files}
    for path in sorted(outdir.rglob("*"), reverse=True):  # files before the folders that hold them
        relative = path.relative_to(outdir).as_posix()
        if relative == MARKER or relative in new:
            continue
        if path.is_dir() and not path.is_symlink():
            if not any(path.iterdir()):
                path.rmdir()
        else:
            path.unlink()
    os.replace(staging / MARKER, outdir / MARKER)


def refuse_unless_replaceable(outdir: Path) -> None:
    """Raise KT601 when synth must not replace `outdir`."""
    refusal = replaceable(outdir)
    if refusal is not None:
        raise ConfigError(str(outdir), [Problem(NOT_SYNTH_OUTPUT.code, "", refusal, NOT_SYNTH_OUTPUT.fix)])


def synth(app: cdk8s.App, outdir: str | Path, validate: bool = True,
          progress: Progress | None = None, crds: list[Path] | None = None) -> dict[Path, str]:
    """Render the app, judge admission on what it rendered (`check_admission`), validate every object (unless
    told not to; against the shipped schemas, the CRDs of `crds` and those `add_crds` gave the app), and swap
    the result into `outdir`.
    Returns what was written. Nothing is written when anything is wrong."""
    refuse_unless_replaceable(Path(outdir))  # before the work, so a wrong --outdir fails fast
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
