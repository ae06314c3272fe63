"""One job definition, three launch targets: each honours its operator's contract (tests/test_run_local.py runs
the dev fleet's job on each and compares the weights)."""

from __future__ import annotations

import pytest
from kubetrain import App, Cluster, IndexedJob, TrainingJob, TrainJob
from kubetrain.gitops.waves import references
from kubetrain.kinds.base import Reference
from kubetrain.kinds.kind_registry import kind_of
from kubetrain.pipeline import check_objects, fleet_errors, fleet_findings, render_objects

from kubetrain_runtime.failures import PERMANENT_EXITS

RUN = {"batch": {"global_size": 16, "micro_size": 1}, "max_steps": 10, "checkpoint": {"dir": "/ckpt/run"}}
JOB = {"image": "img:1", "nodes": 2, "procs_per_node": 8, "instance_type": "p5.48xlarge",
       "resources": {"cpu": "96", "memory": "1000Gi", "accelerators": 8, "efa": 32},
       "volumes": [{"name": "ckpt", "claim": "ckpt", "mount_path": "/ckpt"}],
       "workload": {"kind": "trainer", "run": RUN}}


def build(**overrides) -> tuple[dict[str, dict], list[tuple[str, str]]]:
    app = App()
    TrainingJob(Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"]), "job", {**JOB, **overrides})
    found = fleet_findings(app)
    if [f for f in found if f.severity == "error"]:
        return {}, [(f.problem.code, f.problem.path) for f in [f for f in found if f.severity == "error"]]
    objects = render_objects(app)
    check_objects(objects)  # strict validation, as synth does
    return {str(path): obj for path, obj in objects.items()}, []


def test_trainjob_runs_on_a_runtime_kubetrain_emits():
    objects, _ = build(target=TrainJob())
    job = objects["c/ml/TrainJob.job.yaml"]
    runtime = objects["c/ml/TrainingRuntime.job-runtime.yaml"]
    assert job["spec"]["runtimeRef"] == {"name": "job-runtime", "apiGroup": "trainer.kubeflow.org",
                                         "kind": "TrainingRuntime"}
    assert job["spec"]["trainer"] == {"numNodes": 2, "numProcPerNode": 8}
    # The runtime syncs first: one wave, its kind's, whoever delivers it; the job's reference makes the sync
    # check demand it.
    assert kind_of(runtime).wave < kind_of(job).wave and "annotations" not in runtime["metadata"]
    assert Reference("trainer.kubeflow.org", "TrainingRuntime", "ml", "job-runtime", admission=True) in \
        references(job)
    (replicated,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    assert replicated["name"] == "node"
    assert replicated["template"]["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"] == "trainer"
    pod = replicated["template"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["name"] == "node" and "--rdzv-endpoint=$(PET_MASTER_ADDR):$(PET_MASTER_PORT)" in \
        container["command"]
    assert not [e for e in container["env"] if e["name"].startswith("PET_")], "the controller injects PET_*"
    assert pod["tolerations"][0]["key"] == "nvidia.com/gpu" and pod["restartPolicy"] == "Never"


def test_indexed_job_sets_torchruns_variables_itself():
    objects, _ = build(target=IndexedJob())
    job, service = objects["c/ml/Job.job.yaml"], objects["c/ml/Service.job.yaml"]
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["completions"] == job["spec"]["parallelism"] == 2
    assert job["spec"]["podFailurePolicy"]["rules"][0]["onExitCodes"]["values"] == list(PERMANENT_EXITS) == [2, 3, 4]
    assert job["spec"]["successPolicy"] == {"rules": [{"succeededIndexes": "0"}]}
    pod = job["spec"]["template"]["spec"]
    assert pod["subdomain"] == "job" and pod["restartPolicy"] == "Never"
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["PET_RDZV_ENDPOINT"] == "job-0.job:29500" and env["PET_NNODES"] == "2"
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True


@pytest.mark.parametrize(("target", "overrides", "expected"), [
    (TrainJob(), {"env": {"PET_NNODES": "2"}}, ("KT105", "env.PET_NNODES")),
    (TrainJob(), {"env": {"KUBEFLOW_TRAINER_SERVER_TOKEN": "/t"}}, ("KT105", "env.KUBEFLOW_TRAINER_SERVER_TOKEN")),
    (TrainJob(), {"volumes": [{"name": "kubeflow-trainer-token", "claim": "ckpt", "mount_path": "/ckpt"}]},
     ("KT219", "volumes.0.name")),
    (TrainJob(), {"volumes": [{"name": "ckpt", "claim": "ckpt", "mount_path": "/ckpt"},
                                 {"name": "mine", "secret": "mine",
                                  "mount_path": "/var/run/secrets/kubeflow/trainer"}]},
     ("KT219", "volumes.1.mount_path")),
    (TrainJob(), {"elastic": {"min_nodes": 1}}, ("KT701", "elastic")),
    (IndexedJob(), {"workload": {"kind": "command", "command": ["run.sh"], "launcher": "none"}},
     ("KT701", "workload.launcher")),
    (IndexedJob(), {"env": {"JOB_COMPLETION_INDEX": "0"}}, ("KT105", "env.JOB_COMPLETION_INDEX")),
])
def test_each_target_has_its_own_rules(target, overrides, expected):
    assert expected in build(target=target, **overrides)[1]


# TrainJob: JobSet's webhook wants its last pod's name, <job>-node-0-<n-1>-<5 random characters>, to be a DNS-1035
# label (jobset v0.12 pkg/webhooks/jobset_webhook.go); IndexedJob: the pods' hostnames <job>-<n-1>.
@pytest.mark.parametrize(("target", "longest"), [(TrainJob(), 48), (IndexedJob(), 61)])
def test_name_limits_are_the_targets(target, longest):
    app = App()
    cluster = Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"])
    TrainingJob(cluster, "j" * longest, {**JOB, "target": target})
    TrainingJob(cluster, "k" * (longest + 1), {**JOB, "target": target})
    assert [(f.where, f.problem.code) for f in fleet_errors(app)] == [(f"c/ml/{'k' * (longest + 1)}", "KT101")]


def test_nccl_test_measures_a_gpu_pool_over_efa():
    from kubetrain import NcclTest

    app = App()
    cluster = Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"])
    NcclTest(cluster, "nccl", image="nccl-tests:1", instance_type="p5.48xlarge", nodes=4)
    NcclTest(cluster, "cpu", image="nccl-tests:1", instance_type="c5.xlarge")
    assert [(f.where, f.problem.code) for f in fleet_errors(app)] == [("c/ml/cpu", "KT702")]
    fleet_findings(app).clear()
    objects = render_objects(app)
    check_objects(objects)
    job = objects[next(p for p in objects if p.name == "MPIJob.nccl.yaml")]
    assert job["metadata"]["annotations"]["kubetrain.dev/expected-busbw-gbytes"] == "320"
    assert job["spec"]["slotsPerWorker"] == 8 and job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 4
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"]
    assert launcher[:4] == ["mpirun", "--allow-run-as-root", "-np", "32"] and "FI_PROVIDER" in launcher
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert worker["resources"]["limits"]["vpc.amazonaws.com/efa"] == "32"


def test_an_nccl_test_name_leaves_room_for_the_mpi_operators_names():
    from kubetrain import NcclTest

    app = App()
    cluster = Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"])
    NcclTest(cluster, "n" * 54, image="nccl-tests:1", instance_type="p5.48xlarge")  # <name>-launcher: 63
    NcclTest(cluster, "m" * 55, image="nccl-tests:1", instance_type="p5.48xlarge")
    (error,) = fleet_errors(app)
    assert (error.where, error.problem.code, error.problem.path) == (f"c/ml/{'m' * 55}", "KT101", "name")
    assert f"launcher Job '{'m' * 55}-launcher'" in error.problem.message and "54" in error.problem.fix
    fleet_findings(app).clear()
    check_objects(render_objects(app))  # and the operator's names of the 54-character one pass the output check
