"""Offline sync check: what Argo CD would apply from dist/, checked without a cluster.

Reads the Argo CD objects synth wrote (`<dist>/<folder>/`), resolves each Application's source the way
Argo CD's directory source does (its path, and every sub-folder with `directory.recurse`), and checks:

- every manifest under dist/ (outside the Argo CD folder) belongs to exactly one Application;
- each Application's project allows its repository, its destination and every object's namespace and kind;
- every object carries a sync wave, and whatever it references inside its app (namespace, claim,
  config, queue, flavor, runtime, node class...) comes in the same wave or earlier, strictly earlier where
  admission needs it (waves.references).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubetrain.gitops import waves
from kubetrain.kinds.kind_registry import group_kind
from kubetrain.model.manifests import Manifest, manifest_files
from kubetrain.validation.validate import load_manifests


@dataclass(frozen=True)
class SyncObject:
    app: str
    file: str
    obj: dict[str, Any]

    @property
    def key(self) -> tuple[str, str, str | None, str]:
        group, kind = group_kind(self.obj)
        meta = self.obj.get("metadata") or {}
        return (group, kind, meta.get("namespace"), meta.get("name"))

    @property
    def label(self) -> str:
        _, kind, namespace, name = self.key
        return f"{self.app}: {kind} {namespace + '/' if namespace else ''}{name}"


def _manifests(folder: Path) -> list[Manifest]:
    return [m for m in load_manifests(manifest_files(folder)) if isinstance(m, Manifest) and isinstance(m.body, dict)]


def _in_source(repo: Path, file: Path, source: dict[str, Any]) -> bool:
    root = (repo / source.get("path", "")).resolve()
    if not file.resolve().is_relative_to(root):
        return False
    recurse = (source.get("directory") or {}).get("recurse", False)
    return recurse or file.resolve().parent == root


def _allowed(project: dict[str, Any], app: dict[str, Any], obj: dict[str, Any]) -> str | None:
    """Why the project refuses `obj` in `app`, or None."""
    spec = project.get("spec") or {}
    group, kind = group_kind(obj)
    namespace = (obj.get("metadata") or {}).get("namespace")
    whitelist = spec.get("namespaceResourceWhitelist" if namespace else "clusterResourceWhitelist") or []
    if {"group": group, "kind": kind} not in whitelist:
        return f"{'namespaced' if namespace else 'cluster-scoped'} kind {group or 'core'}/{kind} is not allowed"
    if namespace:
        target = {k: v for k, v in (app["spec"]["destination"]).items() if k in ("server", "name")}
        if {**target, "namespace": namespace} not in spec.get("destinations") or []:
            return f"namespace {namespace} on {target} is not a destination of project {project['metadata']['name']}"
    return None


def check(repo: Path, dist: Path, folder: str = "argocd") -> list[str]:
    """Every problem with syncing `dist` (inside the repository at `repo`) through its Argo CD objects."""
    argocd = [m.body for m in _manifests(dist / folder)]
    projects = {o["metadata"]["name"]: o for o in argocd if o.get("kind") == "AppProject"}
    apps = {o["metadata"]["name"]: o for o in argocd if o.get("kind") == "Application"}
    problems: list[str] = []
    if not apps:
        return [f"no Application under {dist / folder}"]
    members: list[SyncObject] = []
    for manifest in _manifests(dist):
        file = Path(manifest.file)
        if file.resolve().is_relative_to((dist / folder).resolve()):
            for name, app in apps.items():
                if _in_source(repo, file, app["spec"]["source"]):
                    problems.append(f"{file}: the Argo CD objects are inside Application {name}'s source")
            continue
        owners = [name for name, app in apps.items() if _in_source(repo, file, app["spec"]["source"])]
        if len(owners) != 1:
            problems.append(f"{file}: belongs to {len(owners)} Applications ({', '.join(owners) or 'none'}), "
                            "not exactly one")
            continue
        members.append(SyncObject(owners[0], str(file), manifest.body))
    for name, app in apps.items():
        project = projects.get(app["spec"].get("project"))
        if project is None:
            problems.append(f"Application {name}: project {app['spec'].get('project')!r} is not defined")
            continue
        if app["spec"]["source"]["repoURL"] not in (project["spec"].get("sourceRepos") or []):
            problems.append(f"Application {name}: repository {app['spec']['source']['repoURL']} not allowed")
        for member in (m for m in members if m.app == name):
            refusal = _allowed(project, app, member.obj)
            if refusal:
                problems.append(f"{member.file}: {member.label}: {refusal}")
    problems += _wave_problems(members)
    return problems


def _wave(obj: dict[str, Any]) -> int | None:
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(waves.WAVE_ANNOTATION)
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _wave_problems(members: list[SyncObject]) -> list[str]:
    problems = []
    index = {(m.app, *m.key): m for m in members}
    for member in members:
        wave = _wave(member.obj)
        if wave is None:
            problems.append(f"{member.file}: {member.label}: no integer {waves.WAVE_ANNOTATION} annotation")
            continue
        for ref in waves.references(member.obj):
            target = index.get((member.app, ref.group, ref.kind, ref.namespace, ref.name))
            target_wave = _wave(target.obj) if target else None
            if target_wave is None:
                continue  # not in this app: created elsewhere (or missing, which validation does not see)
            if target_wave > wave or (ref.admission and target_wave == wave):
                problems.append(f"{member.file}: {member.label} (wave {wave}) needs {target.label} "
                                f"(wave {target_wave}) {'before it' if ref.admission else 'no later'}")
    return problems
