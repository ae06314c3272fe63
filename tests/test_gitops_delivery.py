"""Argo CD delivery: finalize over the real fleet (plus the platform kinds coming soon), strict validation
of everything it returns, the project's whitelists, waves, and the offline sync check."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from conftest import ROOT, dist_file
from gitops_platform import platform_objects
from kubetrain.gitops import sync_check, waves
from kubetrain.gitops.argocd_construct import ArgoCd, delivery_props
from kubetrain.gitops.argocd_props import ArgoCdProps
from kubetrain.gitops.delivery import SYNC_OPTIONS_ANNOTATION, finalize, finalize_paths
from kubetrain.kinds import kind_registry
from kubetrain.kinds.base import PLATFORM, Kind
from kubetrain.kinds.kind_registry import all_kinds, group_kind
from kubetrain.model.manifests import Manifest
from kubetrain.output.emit import dump_manifest
from kubetrain.output.writer import MARKER, manifest_path, replaceable, write_tree
from kubetrain.pipeline import fleet_errors, render_objects
from kubetrain.validation.validate import Schemas, validate_objects

import apps
from kubetrain_runtime.problems import ConfigError

REPO = "https://github.com/example/fleet.git"
PROPS = ArgoCdProps(repo_url=REPO, revision="main",
                    destinations={"dev": {"name": "dev"}, "prod": {"server": "https://prod.example.com:6443"}})


@pytest.fixture(scope="module")
def rendered() -> dict[Path, dict]:
    app = apps.App()
    apps.dev.define(app)
    apps.prod.define(app)
    objects = render_objects(app)  # no ArgoCd yet: the fleet's own objects, undelivered
    ArgoCd(app, "argocd", PROPS.model_dump())
    assert delivery_props(app) == PROPS  # the construct hands its props to render through the app
    objects.update({manifest_path("dev", obj): obj for obj in platform_objects()})
    return objects


@pytest.fixture(scope="module")
def delivered(rendered: dict[Path, dict]) -> dict[Path, dict]:
    return finalize_paths(rendered, PROPS)


def _at(objects: dict[Path, dict], path: str) -> dict:
    return objects[Path(path)]


def test_every_object_passes_strict_validation(delivered: dict[Path, dict]) -> None:
    """Against the shipped schemas, which test_validate keeps equal to the upstream CRDs (reading all of
    those here again would cost seconds for nothing)."""
    manifests = [Manifest(str(path), obj, Path("/", *path.parts[:-1])) for path, obj in delivered.items()]
    assert validate_objects(manifests, Schemas()) == []
    assert {p for p in delivered if p.parts[0] == "argocd"} == {
        Path("argocd/argocd/AppProject.kubetrain.yaml"), Path("argocd/argocd/Application.kubetrain-dev.yaml"),
        Path("argocd/argocd/Application.kubetrain-prod.yaml"), Path("argocd/_patch/ConfigMap.argocd-cm.yaml")}


def test_finalize_is_pure(rendered: dict[Path, dict]) -> None:
    before = copy.deepcopy(rendered)
    finalize_paths(rendered, PROPS)
    assert rendered == before


def test_project_allows_exactly_what_the_fleet_emits(delivered: dict[Path, dict]) -> None:
    spec = _at(delivered, "argocd/argocd/AppProject.kubetrain.yaml")["spec"]
    assert spec["sourceRepos"] == [REPO]
    # Each cluster's namespaces, its own and those its platform objects create (the DCGM exporter's).
    assert spec["destinations"] == [{"name": "dev", "namespace": "ml-dev"},
                                    {"server": "https://prod.example.com:6443", "namespace": "ml-prod"},
                                    {"server": "https://prod.example.com:6443", "namespace": "gpu-monitoring"}]
    cluster_kinds = {(k["group"], k["kind"]) for k in spec["clusterResourceWhitelist"]}
    namespaced = {(k["group"], k["kind"]) for k in spec["namespaceResourceWhitelist"]}
    fleet = [obj for path, obj in delivered.items() if path.parts[0] != "argocd"]
    assert cluster_kinds == {group_kind(o) for o in fleet if not o["metadata"].get("namespace")}
    assert namespaced == {group_kind(o) for o in fleet if o["metadata"].get("namespace")}
    assert {("", "Namespace"), ("storage.k8s.io", "StorageClass"), ("kueue.x-k8s.io", "ClusterQueue"),
            ("trainer.kubeflow.org", "ClusterTrainingRuntime")} <= cluster_kinds
    assert {("", "ConfigMap"), ("kubeflow.org", "PyTorchJob"), ("trainer.kubeflow.org", "TrainJob"),
            ("kueue.x-k8s.io", "LocalQueue")} <= namespaced


def test_one_application_per_cluster(delivered: dict[Path, dict]) -> None:
    dev = _at(delivered, "argocd/argocd/Application.kubetrain-dev.yaml")["spec"]
    assert dev["source"] == {"repoURL": REPO, "targetRevision": "main", "path": "dist/dev",
                             "directory": {"recurse": True}}
    assert dev["destination"] == {"name": "dev", "namespace": "ml-dev"}
    assert dev["syncPolicy"]["automated"] == {"prune": True, "selfHeal": True}
    assert {"ServerSideApply=true", "RespectIgnoreDifferences=true"} <= set(dev["syncPolicy"]["syncOptions"])
    assert dev["syncPolicy"]["retry"] == {"limit": 5, "backoff": {"duration": "10s", "factor": 2,
                                                                  "maxDuration": "3m"}}
    ignored = {(i["group"], i["kind"]): i for i in dev["ignoreDifferences"]}
    assert {("kubeflow.org", "PyTorchJob"), ("trainer.kubeflow.org", "TrainJob"), ("batch", "Job")} <= set(ignored)
    assert ignored[("kubeflow.org", "PyTorchJob")]["jsonPointers"] == ["/spec/runPolicy/suspend"]
    assert ignored[("trainer.kubeflow.org", "TrainJob")]["jsonPointers"] == ["/spec/suspend"]
    prod = _at(delivered, "argocd/argocd/Application.kubetrain-prod.yaml")["spec"]
    assert prod["destination"] == {"server": "https://prod.example.com:6443", "namespace": "ml-prod"}
    prod_kinds = {group_kind(obj) for path, obj in delivered.items() if path.parts[0] == "prod"}
    # Only the kinds it holds.
    ignored_kinds = {kind.key for kind in all_kinds() if kind.ignored}
    assert {(i["group"], i["kind"]) for i in prod["ignoreDifferences"]} == prod_kinds & ignored_kinds


def test_waves_and_sync_options(delivered: dict[Path, dict]) -> None:
    def annotations(path: str) -> dict:
        return _at(delivered, path)["metadata"]["annotations"]

    assert annotations("dev/_cluster/Namespace.ml-dev.yaml")[waves.WAVE_ANNOTATION] == "0"
    job = annotations(str(dist_file("dev", "PyTorchJob", "tiny-gpt-pytorchjob").relative_to(ROOT / "dist")))
    # A claim comes with its consumer: a WaitForFirstConsumer claim would hold an earlier wave forever.
    assert job[waves.WAVE_ANNOTATION] == annotations("dev/ml-dev/PersistentVolumeClaim.checkpoints.yaml")[
        waves.WAVE_ANNOTATION]
    assert int(annotations("dev/ml-dev/LocalQueue.training.yaml")[waves.WAVE_ANNOTATION]) < int(
        job[waves.WAVE_ANNOTATION])
    assert job[SYNC_OPTIONS_ANNOTATION] == "SkipDryRunOnMissingResource=true"  # its CRD comes with the operator
    run = dist_file("dev", "PyTorchJob", "tiny-gpt-pytorchjob").name.split(".")[1]
    assert SYNC_OPTIONS_ANNOTATION not in annotations(f"dev/ml-dev/ConfigMap.{run}-config.yaml")


def test_every_problem_at_once() -> None:
    objects = {"dev": [{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}],
               "argocd": [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}]}
    props = ArgoCdProps(repo_url=REPO, destinations={"prod": {"name": "prod"}, "argocd": {"name": "in-cluster"}})
    with pytest.raises(ConfigError) as caught:
        finalize(objects, props)
    assert sorted(p.code for p in caught.value.problems) == ["KT501", "KT501", "KT502", "KT503"]


@pytest.mark.parametrize(("props", "needle"), [
    ({"repo_url": "not a url", "destinations": {}}, "[KT003]"),
    ({"repo_url": REPO, "destinations": {"dev": {"name": "dev", "server": "https://x"}}}, "exactly one"),
    ({"repo_url": REPO, "destinations": {}, "path_prefix": "../dist"}, "inside the repository"),
    ({"repo_url": REPO, "destinations": {}, "retry": {"duration": "10 seconds"}}, "not a duration"),
    ({"repo_url": REPO, "destinations": {}, "repo": REPO}, "[KT001]"),
])
def test_bad_props_are_problems(props: dict, needle: str) -> None:
    app = apps.App()
    ArgoCd(app, "argocd", props)
    assert needle in "\n".join(f.format() for f in fleet_errors(app))


def _write(delivered: dict[Path, dict], repo: Path) -> Path:
    write_tree({path: dump_manifest(obj) for path, obj in delivered.items()}, repo / "dist")
    return repo / "dist"


def test_offline_sync_check_passes(delivered: dict[Path, dict], tmp_path: Path) -> None:
    dist = _write(delivered, tmp_path)
    assert sync_check.check(tmp_path, dist) == []
    (dist / MARKER).unlink()
    assert replaceable(dist) is None  # every file, the Argo CD ones too, is in synth's own layout


def test_offline_sync_check_finds_what_argo_cd_would_refuse(delivered: dict[Path, dict], tmp_path: Path) -> None:
    broken = copy.deepcopy(delivered)
    # A queue that comes after the jobs that use it.
    broken[Path("dev/ml-dev/LocalQueue.training.yaml")]["metadata"]["annotations"][waves.WAVE_ANNOTATION] = "9"
    # A kind the project does not allow.
    project = broken[Path("argocd/argocd/AppProject.kubetrain.yaml")]["spec"]
    project["namespaceResourceWhitelist"].remove({"group": "apps", "kind": "DaemonSet"})
    # A second Application for prod, and one whose source is the Argo CD folder itself.
    for name, path in (("prod-again", "dist/prod"), ("argocd-self", "dist/argocd")):
        extra = copy.deepcopy(broken[Path("argocd/argocd/Application.kubetrain-prod.yaml")])
        extra["metadata"]["name"] = name
        extra["spec"]["source"]["path"] = path
        broken[Path(f"argocd/argocd/Application.{name}.yaml")] = extra
    problems = "\n".join(sync_check.check(tmp_path, _write(broken, tmp_path)))
    assert "TrainJob ml-dev/llama (wave 5) needs kubetrain-dev: LocalQueue ml-dev/training (wave 9)" in problems
    assert "namespaced kind apps/DaemonSet is not allowed" in problems
    megatron = dist_file("prod", "TrainJob", "megatron-gpt").name
    assert f"{megatron}: belongs to 2 Applications (kubetrain-prod, prod-again)" in problems
    assert "the Argo CD objects are inside Application argocd-self's source" in problems


def test_a_fleet_describes_a_kind_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """KT502's fix works from the fleet: a raw object's kind, registered with its wave, is delivered in it."""
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "ml"}}
    props = ArgoCdProps(repo_url=REPO, destinations={"dev": {"name": "dev"}})
    with pytest.raises(ConfigError) as caught:
        finalize({"dev": [widget]}, props)
    assert [p.code for p in caught.value.problems] == ["KT502"]
    monkeypatch.setattr(kind_registry, "_KINDS", dict(kind_registry._KINDS))  # the registration ends with the test
    kind_registry.register(Kind("example.com/v1", "Widget", PLATFORM))
    (delivered,) = finalize({"dev": [widget]}, props).objects_by_cluster["dev"]
    assert delivered["metadata"]["annotations"][waves.WAVE_ANNOTATION] == str(PLATFORM)
