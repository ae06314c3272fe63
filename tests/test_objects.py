"""Objects stay plain data until they are written: what synth writes is what cdk8s would write for them, user
objects added with cdk8s still go through cdk8s, and the fleet's state is held by the App and its Clusters."""

from __future__ import annotations

import json

import cdk8s
import pytest
from cdk8s_plus_33 import k8s
from conftest import ROOT
from kubetrain import App, Cluster, JsonPatch, PodSecurity, TrainingJob
from kubetrain.output.render import written
from kubetrain.pipeline import render, render_objects
from kubetrain.state import FleetState, diagnostics, fleet_state

import apps
from kubetrain_runtime.problems import ConfigError

RUN = {"batch": {"global_size": 16, "micro_size": 4}, "max_steps": 10, "checkpoint": {"dir": "/ckpt/run"}}
JOB = {"image": "ghcr.io/kubetrain/kubetrain:0.1.0", "nodes": 2, "procs_per_node": 1,
       "resources": {"cpu": "2", "memory": "4Gi"}, "workload": {"kind": "trainer", "run": RUN},
       "volumes": [{"name": "ckpt", "claim": "ckpt", "mount_path": "/ckpt"}]}


def through_cdk8s(manifest: dict, labels: dict[str, str]) -> dict:
    """The object as cdk8s renders it: an ApiObject of a chart with `labels`, the rest of the object added by
    JSON patches (what kubetrain handed cdk8s for every object before they stayed plain data)."""
    chart = cdk8s.Chart(cdk8s.App(), "c", labels=labels, disable_resource_name_hashes=True)
    metadata = manifest["metadata"]
    obj = cdk8s.ApiObject(chart, "o", api_version=manifest["apiVersion"], kind=manifest["kind"],
                          metadata=cdk8s.ApiObjectMetadata(
                              name=metadata["name"], namespace=metadata.get("namespace"),
                              labels=metadata.get("labels"), annotations=metadata.get("annotations")))
    obj.add_json_patch(*[JsonPatch.add(f"/{key}", value) for key, value in manifest.items()
                         if key not in ("apiVersion", "kind", "metadata")])
    (rendered,) = chart.to_json()
    return rendered


def test_every_object_of_the_example_fleet_is_written_as_cdk8s_writes_it():
    app = apps.build()
    clusters = [chart for chart in app.charts if isinstance(chart, Cluster)]
    checked = 0
    for cluster in clusters:
        for emitted in cluster.state.objects:
            ours = written(emitted.manifest, cluster.labels_of_objects)
            theirs = through_cdk8s(emitted.manifest, cluster.labels_of_objects)
            # Equal as data and in key order: the YAML bytes follow from both.
            assert json.dumps(ours) == json.dumps(theirs)
            checked += 1
    assert checked > 40


def test_metadata_is_sanitized_as_cdk8s_does():
    manifest = {"apiVersion": "v1", "kind": "Thing", "data": {"b": "1", "a": None},
                "spec": {"ratio": 2.0, "half": 0.5, "items": [None, {"x": None}], "empty": {}},
                "metadata": {"name": "x", "namespace": "ml", "labels": {"z": "1", "a": "2"}, "annotations": {},
                             "finalizers": []}}
    expected = {"apiVersion": "v1", "kind": "Thing",
                "metadata": {"labels": {"a": "2", "team": "llm", "z": "1"}, "name": "x", "namespace": "ml"},
                "data": {"b": "1"}, "spec": {"ratio": 2, "half": 0.5, "items": [None, {}], "empty": {}}}
    assert json.dumps(written(manifest, {"team": "llm"})) == json.dumps(through_cdk8s(manifest, {"team": "llm"})) \
        == json.dumps(expected)


def test_a_patch_applies_to_the_written_object_as_cdk8s_applies_it():
    app = App()
    cluster = Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"])
    job = TrainingJob(cluster, "job", JOB)
    plain = dict(job.main_object)
    patches = (JsonPatch.add("/metadata/labels/team", "llm"), JsonPatch.add("/spec/activeDeadlineSeconds", 60),
               JsonPatch.add("/status", {}))
    job.patch(*patches[:2])
    job.patch(patches[2])
    chart = cdk8s.Chart(cdk8s.App(), "c", labels=cluster.labels_of_objects, disable_resource_name_hashes=True)
    obj = cdk8s.ApiObject(chart, "o", api_version=plain["apiVersion"], kind=plain["kind"],
                          metadata=cdk8s.ApiObjectMetadata(name="job", namespace="ml", labels=plain["metadata"]["labels"],
                                                               annotations=plain["metadata"].get("annotations")))
    obj.add_json_patch(*[JsonPatch.add(f"/{key}", value) for key, value in plain.items()
                         if key not in ("apiVersion", "kind", "metadata")], *patches)
    (theirs,) = chart.to_json()
    ours = render_objects(app)[next(p for p in render_objects(app) if p.name == "TrainJob.job.yaml")]
    assert json.dumps(ours) == json.dumps(theirs)
    assert ours["metadata"]["labels"]["team"] == "llm" and ours["spec"]["activeDeadlineSeconds"] == 60


def test_objects_added_with_cdk8s_are_rendered_by_cdk8s_and_validated():
    app = App()
    cluster = Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"])
    k8s.KubeConfigMap(cluster, "extra", metadata=k8s.ObjectMeta(name="extra", namespace="ml"), data={"k": "v"})
    raw = cdk8s.ApiObject(cluster, "raw", api_version="v1", kind="Secret",
                          metadata=cdk8s.ApiObjectMetadata(name="raw", namespace="ml"))
    raw.add_json_patch(JsonPatch.add("/stringData", {"token": "x"}))
    objects = {str(path): obj for path, obj in render_objects(app).items()}
    assert objects["c/ml/ConfigMap.extra.yaml"]["data"] == {"k": "v"}
    assert objects["c/ml/Secret.raw.yaml"]["stringData"] == {"token": "x"}
    assert objects["c/ml/Secret.raw.yaml"]["metadata"]["labels"]["kubetrain.dev/cluster"] == "c"
    raw.add_json_patch(JsonPatch.add("/spec", {"bogus": 1}))  # a Secret has no spec: the API server refuses it
    with pytest.raises(ConfigError) as info:
        from kubetrain.pipeline import check_objects
        check_objects(render_objects(app))
    assert [p.code for p in info.value.problems] == ["KT602"]


def test_an_object_in_both_is_one_name_too_many():
    app = App()
    cluster = Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"])
    k8s.KubeNamespace(cluster, "again", metadata=k8s.ObjectMeta(name="ml"))
    with pytest.raises(ConfigError) as info:
        render_objects(app)
    assert [(p.code, p.path) for p in info.value.problems] == [("KT010", "c/_cluster/Namespace.ml.yaml")]


def test_the_fleet_state_is_held_by_the_app_and_its_clusters():
    app = App()
    cluster = Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"])
    assert isinstance(app.fleet, FleetState) and fleet_state(cluster) is app.fleet
    assert diagnostics(cluster) is app.fleet.diagnostics is cluster.diagnostics
    PodSecurity(cluster)
    TrainingJob(cluster, "job", JOB)
    assert cluster.state.pod_security == {"ml": "baseline"}
    assert cluster.state.claims[("ml", "job")] == "job job"
    assert [e.manifest["kind"] for e in cluster.state.objects] == ["Namespace", "ConfigMap", "TrainJob",
                                                                   "TrainingRuntime"]
    # An App of cdk8s's own class gets a state too.
    plain = cdk8s.App()
    Cluster(plain, "d", kubernetes_version="1.33", namespaces=["ml"])
    assert fleet_state(plain) is fleet_state(plain.node.find_child("d"))


def test_app_synth_is_kubetrains_synth(tmp_path):
    app = App(outdir=str(tmp_path / "out"))
    cluster = Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"])
    TrainingJob(cluster, "job", JOB)
    app.synth()
    written_files = sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*.yaml"))
    assert written_files == sorted(str(path) for path in render(app))
    TrainingJob(cluster, "bad", {**JOB, "nodes": 0})
    with pytest.raises(ConfigError):
        app.synth()


def test_constructs_hand_cdk8s_nothing():
    """kubetrain's constructs create no ApiObject: the example fleet's only ones are the claims dev adds with
    cdk8s-plus itself (checkpoints and datasets), and every other object of dist/ never crossed into cdk8s."""
    app = apps.build()
    assert [type(c).__name__ for c in app.node.find_all() if isinstance(c, cdk8s.ApiObject)] == \
        ["KubePersistentVolumeClaim"] * 2
    assert len(render_objects(app)) == len(list((ROOT / "dist").rglob("*.yaml")))
