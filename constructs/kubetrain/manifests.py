"""Writing a cdk8s app's objects into dist/: one file per object, all or nothing.

Layout: `<outdir>/<chart>/<namespace>/<Kind>.<name>.yaml`, cluster-scoped objects under
`<outdir>/<chart>/_cluster/` (an underscore cannot start a namespace name, so they never clash).
One file per object makes a pull request show exactly which object changed; the namespace level
keeps same-named objects of different namespaces apart (cdk8s's own per-resource output does not).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import cdk8s
import yaml

from training.problems import ConfigError, Problem

CLUSTER_SCOPED_FOLDER = "_cluster"


class _ManifestDumper(yaml.SafeDumper):
    """Block style, no aliases, multi-line strings (embedded configs) as literal blocks."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_ManifestDumper.add_representer(str, _str_representer)


def dump_manifest(obj: dict[str, Any]) -> str:
    return yaml.dump(obj, Dumper=_ManifestDumper, sort_keys=False, default_flow_style=False, width=10_000)


def manifest_path(chart: str, obj: dict[str, Any]) -> Path:
    metadata = obj.get("metadata", {})
    folder = metadata.get("namespace") or CLUSTER_SCOPED_FOLDER
    return Path(chart, folder, f"{obj['kind']}.{metadata['name']}.yaml")


def render(app: cdk8s.App) -> dict[Path, str]:
    """Every object of every chart, by relative path. One jsii call per chart."""
    files: dict[Path, str] = {}
    for chart in app.charts:
        chart_id = chart.node.id
        for obj in chart.to_json():
            path = manifest_path(chart_id, obj)
            if path in files:
                raise ConfigError(chart_id, [Problem(
                    "KT010", str(path), "two objects of the same kind, namespace and name",
                    "give one of them another name")])
            files[path] = dump_manifest(obj)
    return files


def write_tree(files: dict[Path, str], outdir: Path) -> None:
    """Replace `outdir` with exactly `files`; on any failure the old `outdir` is left untouched."""
    outdir = outdir.resolve()
    outdir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{outdir.name}.tmp-", dir=outdir.parent))
    try:
        for path, text in files.items():
            target = staging / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        os.chmod(staging, 0o755)
        if outdir.exists():
            retired = Path(tempfile.mkdtemp(prefix=f".{outdir.name}.old-", dir=outdir.parent))
            os.replace(outdir, retired / outdir.name)
            os.replace(staging, outdir)
            shutil.rmtree(retired)
        else:
            os.replace(staging, outdir)
    finally:
        if staging.exists():
            shutil.rmtree(staging)


def synth(app: cdk8s.App, outdir: str | Path) -> dict[Path, str]:
    """Render the app and swap the result into `outdir`. Returns what was written."""
    files = render(app)
    write_tree(files, Path(outdir))
    return files
