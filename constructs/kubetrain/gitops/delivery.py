"""Argo CD delivery of the fleet, as a pure function over the rendered objects.

`finalize(objects_by_cluster, props)` annotates every object with its sync wave (waves.py) and, for
custom resources, `SkipDryRunOnMissingResource=true` (their CRDs come with the operators, installed by
another app, and may not exist at the first dry run), and returns the Argo CD objects:

- `AppProject <project>`: the fleet's repository as its only source, each cluster's namespaces as its
  only destinations, and exactly the kinds the fleet emits (cluster-scoped and namespaced whitelists):
  anything else in dist/ fails the sync instead of landing on a cluster.
- one `Application <project>-<cluster>` per cluster folder, not an ApplicationSet: synth writes the Argo
  CD objects together with the clusters' folders, so the generator's one advantage (finding new folders
  without editing Argo CD objects) buys nothing, while explicit Applications carry each cluster's own
  destination and only the ignoreDifferences of the kinds it holds, and show up in the pull request.
  Automated sync with prune and self-heal, server-side apply (training CRDs exceed the 262,144-byte
  annotation client-side apply needs), retries with backoff, and `RespectIgnoreDifferences` so self-heal
  leaves alone the fields Kueue and the operators own (each kind's `ignored` fields, kubetrain.kinds).
- the argocd-cm health patch (health.py).

They go under `<outdir>/<folder>/` (default dist/argocd/): Argo CD's own objects live in the management
cluster, not in any training cluster, and no cluster's Application reads that folder. Objects are in
synth's layout (`<folder>/<namespace>/<Kind>.<name>.yaml`); the argocd-cm patch is in the same layout under
`<folder>/_patch/` (an underscore cannot start a namespace), so `kubectl apply -f dist/argocd/argocd/` never
replaces argocd-cm, and synth still recognizes every file as its own.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubetrain.gitops import waves
from kubetrain.gitops.argocd_props import ArgoCdProps
from kubetrain.gitops.health import argocd_cm_patch
from kubetrain.kinds.argocd import API_VERSION as ARGOCD_API_VERSION
from kubetrain.kinds.kind_registry import group_kind, kind_of
from kubetrain.rules.registry import register
from kubetrain.rules.sources import ARGO_APP, ARGO_PROJECTS, ARGO_WAVES
from kubetrain_runtime.problems import ConfigError, Problem

SYNC_OPTIONS_ANNOTATION = "argocd.argoproj.io/sync-options"
HEALTH_PATCH = Path("_patch", "ConfigMap.argocd-cm.yaml")
MANAGED_BY = {"app.kubernetes.io/managed-by": "kubetrain"}
CLUSTER_LABEL = "kubetrain.dev/cluster"

NO_DESTINATION = register(
    "KT501", "error", "a cluster without an Argo CD destination, or a destination without a cluster",
    rationale="Each cluster folder of dist/ becomes one Argo CD Application, which must say where the cluster's "
              "API server is; a destination for a cluster the fleet does not define is a typo that would "
              "leave the real cluster without delivery.",
    fix="give ArgoCdProps.destinations one entry per Cluster, keyed by the cluster's name",
    source=ARGO_APP)
NO_WAVE = register(
    "KT502", "error", "an object kind without a sync wave",
    rationale="Argo CD applies objects wave by wave and waits for each wave to be healthy; a kind kubetrain "
              "does not know could be a workload that must wait for its queue, or a definition others need "
              "first, so it is not guessed.",
    fix="describe the kind with its wave: kubetrain.kinds.kind_registry.register(Kind(api_version, kind, wave)), "
        "the waves are in kubetrain.kinds.base",
    source=ARGO_WAVES)
FOLDER_TAKEN = register(
    "KT503", "error", "a cluster has the name of the Argo CD folder",
    rationale="dist/<folder>/ holds the Argo CD objects; a cluster of that name would share the folder.",
    fix="rename the cluster, or set ArgoCdProps.folder to another name",
    source="README.md (GitOps delivery)")
DESTINATION_OUTSIDE_PROJECT = register(
    "KT510", "error", "an Application's destination namespace is outside its AppProject",
    rationale="The AppProject permits exactly the namespaces the cluster's objects use; Argo CD refuses to sync an "
              "Application whose destination namespace the project does not permit (\"application destination "
              "... is not permitted in project\"), so the cluster would never be delivered.",
    fix="set the destination's namespace to one of the cluster's namespaces, or leave it unset (the cluster's "
        "first namespace)",
    source=ARGO_PROJECTS)
TTL_ON_MANAGED_RUN = register(
    "KT511", "error", "a TTL on a run Argo CD manages",
    rationale="ttlSecondsAfterFinished deletes a finished run; the run is still in dist/, so Argo CD's self-heal "
              "creates it again, and it trains again from its checkpoint, over and over.",
    fix="remove ttl_seconds_after_finished (and any patch that sets ttlSecondsAfterFinished): remove the job from "
        "the fleet to delete the run, and its pods with cleanPodPolicy",
    source=ARGO_APP)


@dataclass
class Delivery:
    """What `finalize` returns: the clusters' objects with their waves, and the Argo CD objects by the
    path they are written to (relative to synth's output folder)."""

    objects_by_cluster: dict[str, list[dict[str, Any]]]
    argocd: dict[Path, dict[str, Any]] = field(default_factory=dict)


def finalize(objects_by_cluster: dict[str, list[dict[str, Any]]], props: ArgoCdProps) -> Delivery:
    """Annotate every object for Argo CD and build the Argo CD objects. Pure: the input is not changed.
    Raises ConfigError (KT501, KT502, KT503) with every problem at once."""
    problems = _check(objects_by_cluster, props)
    if problems:
        raise ConfigError("argocd", problems)
    annotated = {cluster: [_annotate(obj) for obj in objects] for cluster, objects in objects_by_cluster.items()}
    argocd: dict[Path, dict[str, Any]] = {}
    for obj in [_project(objects_by_cluster, props),
                *(_application(cluster, objects, props) for cluster, objects in sorted(objects_by_cluster.items()))]:
        argocd[Path(props.folder, props.argocd_namespace, f"{obj['kind']}.{obj['metadata']['name']}.yaml")] = obj
    argocd[Path(props.folder) / HEALTH_PATCH] = argocd_cm_patch(props.argocd_namespace)
    return Delivery(annotated, argocd)


def finalize_paths(objects: dict[Path, dict[str, Any]], props: ArgoCdProps) -> dict[Path, dict[str, Any]]:
    """`finalize` over synth's `render_objects` output (path -> object; the first path part is the
    cluster): the annotated objects at their paths, plus the Argo CD objects."""
    by_cluster: dict[str, list[tuple[Path, dict[str, Any]]]] = {}
    for path, obj in objects.items():
        by_cluster.setdefault(path.parts[0], []).append((path, obj))
    delivery = finalize({cluster: [obj for _, obj in items] for cluster, items in by_cluster.items()}, props)
    result = {path: obj for cluster, items in by_cluster.items()
              for (path, _), obj in zip(items, delivery.objects_by_cluster[cluster])}
    result.update(delivery.argocd)
    return result


def _check(objects_by_cluster: dict[str, list[dict[str, Any]]], props: ArgoCdProps) -> list[Problem]:
    problems = [Problem(NO_DESTINATION.code, f"destinations.{cluster}", f"cluster {cluster!r} has no destination",
                        NO_DESTINATION.fix) for cluster in sorted(set(objects_by_cluster) - set(props.destinations))]
    problems += [Problem(NO_DESTINATION.code, f"destinations.{cluster}",
                         f"no cluster {cluster!r} in the fleet (clusters: {', '.join(sorted(objects_by_cluster))})",
                         NO_DESTINATION.fix) for cluster in sorted(set(props.destinations) - set(objects_by_cluster))]
    for cluster, target in sorted(props.destinations.items()):
        allowed = _namespaces(objects_by_cluster.get(cluster, []))
        if target.namespace and cluster in objects_by_cluster and target.namespace not in allowed:
            problems.append(Problem(DESTINATION_OUTSIDE_PROJECT.code, f"destinations.{cluster}.namespace",
                                    f"namespace {target.namespace!r} is not one of cluster {cluster!r}'s namespaces, "
                                    f"the AppProject's destinations ({', '.join(allowed) or 'none'})",
                                    DESTINATION_OUTSIDE_PROJECT.fix))
    for cluster, objects in sorted(objects_by_cluster.items()):
        for obj in objects:
            kind = kind_of(obj)
            spec = obj.get("spec") if kind is not None and kind.run is not None else None
            for path, holder in (("spec", spec), ("spec.runPolicy", (spec or {}).get("runPolicy"))):
                if isinstance(holder, dict) and holder.get("ttlSecondsAfterFinished") is not None:
                    problems.append(Problem(
                        TTL_ON_MANAGED_RUN.code, f"{cluster}/{obj['kind']}/{obj['metadata'].get('name')}: "
                        f"{path}.ttlSecondsAfterFinished", f"the run is deleted "
                        f"{holder['ttlSecondsAfterFinished']} s after it finishes and Argo CD's self-heal creates "
                        "it again from dist/", TTL_ON_MANAGED_RUN.fix))
    if props.folder in objects_by_cluster:
        problems.append(Problem(FOLDER_TAKEN.code, "folder", f"cluster {props.folder!r} would share "
                                f"{props.path_prefix}/{props.folder}/ with the Argo CD objects", FOLDER_TAKEN.fix))
    unknown = sorted({group_kind(obj) for objects in objects_by_cluster.values() for obj in objects
                      if waves.wave_of(obj) is None})
    problems += [Problem(NO_WAVE.code, "", f"no sync wave for kind {kind} (group {group or 'core'!r})", NO_WAVE.fix)
                 for group, kind in unknown]
    return problems


def _annotate(obj: dict[str, Any]) -> dict[str, Any]:
    result = copy.deepcopy(obj)
    annotations = result.setdefault("metadata", {}).setdefault("annotations", {})
    annotations[waves.WAVE_ANNOTATION] = str(waves.wave_of(obj))
    if waves.is_custom_resource(obj):
        options = [o for o in annotations.get(SYNC_OPTIONS_ANNOTATION, "").split(",") if o]
        if "SkipDryRunOnMissingResource=true" not in options:
            options.append("SkipDryRunOnMissingResource=true")
        annotations[SYNC_OPTIONS_ANNOTATION] = ",".join(options)
    return result


def _is_namespaced(obj: dict[str, Any]) -> bool:
    return bool((obj.get("metadata") or {}).get("namespace"))


def _namespaces(objects: list[dict[str, Any]]) -> list[str]:
    """A cluster's namespaces: those it creates (in order: the first is the default), then any others used."""
    created = [obj["metadata"]["name"] for obj in objects if group_kind(obj) == ("", "Namespace")]
    used = sorted({obj["metadata"]["namespace"] for obj in objects if _is_namespaced(obj)} - set(created))
    return created + used


def _destination(cluster: str, objects: list[dict[str, Any]], props: ArgoCdProps) -> dict[str, str]:
    target = props.destinations[cluster]
    where = {"server": target.server} if target.server else {"name": target.name}
    namespace = target.namespace or next(iter(_namespaces(objects)), None)
    return {**where, "namespace": namespace} if namespace else where


def _kinds(objects: list[dict[str, Any]], namespaced: bool) -> list[dict[str, str]]:
    found = sorted({group_kind(obj) for obj in objects if _is_namespaced(obj) == namespaced})
    return [{"group": group, "kind": kind} for group, kind in found]


def _project(objects_by_cluster: dict[str, list[dict[str, Any]]], props: ArgoCdProps) -> dict[str, Any]:
    everything = [obj for objects in objects_by_cluster.values() for obj in objects]
    destinations = []
    for cluster in sorted(objects_by_cluster):
        where = {k: v for k, v in _destination(cluster, objects_by_cluster[cluster], props).items()
                 if k != "namespace"}
        destinations += [{**where, "namespace": ns} for ns in _namespaces(objects_by_cluster[cluster])]
    return {
        "apiVersion": ARGOCD_API_VERSION,
        "kind": "AppProject",
        "metadata": {"name": props.project, "namespace": props.argocd_namespace, "labels": dict(MANAGED_BY)},
        "spec": {
            "description": "kubetrain's fleet: exactly the repository, namespaces and kinds that synth writes",
            "sourceRepos": [props.repo_url],
            "destinations": destinations,
            "clusterResourceWhitelist": _kinds(everything, namespaced=False),
            "namespaceResourceWhitelist": _kinds(everything, namespaced=True),
        },
    }


def _application(cluster: str, objects: list[dict[str, Any]], props: ArgoCdProps) -> dict[str, Any]:
    kinds = sorted({kind for kind in map(kind_of, objects) if kind is not None and kind.ignored}, key=lambda k: k.key)
    ignored = [{"group": kind.group, "kind": kind.kind, **kind.ignored.manifest()} for kind in kinds]
    metadata: dict[str, Any] = {"name": f"{props.project}-{cluster}", "namespace": props.argocd_namespace,
                                "labels": {**MANAGED_BY, CLUSTER_LABEL: cluster}}
    if props.cascade_delete:
        metadata["finalizers"] = ["resources-finalizer.argocd.argoproj.io"]
    spec: dict[str, Any] = {
        "project": props.project,
        "source": {"repoURL": props.repo_url, "targetRevision": props.revision,
                   "path": f"{props.path_prefix}/{cluster}", "directory": {"recurse": True}},
        "destination": _destination(cluster, objects, props),
        "syncPolicy": {
            "automated": {"prune": True, "selfHeal": True},
            # The namespaces are objects of the app (wave 0), never created on the side.
            "syncOptions": ["ServerSideApply=true", "RespectIgnoreDifferences=true", "CreateNamespace=false"],
            "retry": {"limit": props.retry.limit,
                      "backoff": {"duration": props.retry.duration, "factor": props.retry.factor,
                                  "maxDuration": props.retry.max_duration}},
        },
    }
    if ignored:
        spec["ignoreDifferences"] = ignored
    return {"apiVersion": ARGOCD_API_VERSION, "kind": "Application", "metadata": metadata, "spec": spec}
