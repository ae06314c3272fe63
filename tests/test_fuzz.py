"""Property-based checks of the compiler over generated definitions (hypothesis, bounded for CI).

1. Any props, however wrong, either build or are reported as kubetrain problems: never a crash.
2. Synth and validate agree: whatever synth accepts, strict validation of its output accepts too.
"""

from __future__ import annotations

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubetrain import App, ArgoCd, Cluster, ConfigError, EfaNodePool, NcclTest, TrainingJob
from kubetrain.pipeline import fleet_errors, fleet_findings, render
from kubetrain.validation.validate import Schemas, validate_manifests

SCHEMAS = Schemas()  # the shipped ones, compiled once for every example
BUDGET = settings(max_examples=60, deadline=None, derandomize=True,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

names = st.one_of(st.sampled_from(["job", "a", "tiny-gpt", "j" * 70, "Job_1", "", "-x", "x-", "9x"]),
                  st.text("abcxyz-0123456789", min_size=1, max_size=70))
counts = st.one_of(st.integers(-2, 40), st.sampled_from([2**31 - 1, 2**31, 2**63]))
quantities = st.one_of(
    st.sampled_from(["1", "500m", "16Gi", "1.5Gi", "0.5", "1e3", "1e1000000", "9223372036854775807",
                     "9223372036854775808", "1Ei", "10Ei", "0.0001", "-1", "", "abc", "1.2.3", "1Ki", "0"]),
    st.from_regex(r"\A[0-9]{1,4}(\.[0-9]{1,4})?(m|k|Mi|Gi|Ti|e[0-9]{1,3})?\Z"))
env_names = st.sampled_from(["NCCL_ALGO", "NCCL_PROTO", "NCCL_SOCKET_IFNAME", "FI_PROVIDER", "WORLD_SIZE", "PET_X",
                             "NCCL_DEBUG", "CUDA_LAUNCH_BLOCKING", "NCCL_P2P_DISABLE", "NCCL_TIMEOUT", "MY_VAR",
                             "TRITON_CACHE_DIR", "FI_EFA_USE_HUGE_PAGE", "1BAD", "A=B"])
env_values = st.one_of(st.sampled_from(["0", "1", "eth0", "^lo", "efa", "tcp", "/ckpt/cache", "/tmp/x", "", "a\x00b",
                                        "\ud800"]), st.text(max_size=4))
instance_types = st.sampled_from([None, "p5.48xlarge", "g5.xlarge", "g5.48xlarge", "c5.xlarge", "trn1.32xlarge",
                                  "p4d.24xlarge", "nope.large"])
volumes = st.lists(st.fixed_dictionaries({
    "name": st.sampled_from(["ckpt", "data", "shm", "kubetrain-config", "Bad_Name"]),
    "mount_path": st.sampled_from(["/ckpt", "/data", "/dev/shm", "relative", "/ckpt/run"]),
}, optional={"claim": st.sampled_from(["ckpt", "data", "UPPER"]), "read_only": st.booleans(),
             "empty_dir": st.sampled_from(["disk", "memory", "tape"])}), max_size=3)
run_configs = st.fixed_dictionaries({
    "batch": st.fixed_dictionaries({"global_size": counts, "micro_size": counts}),
    "max_steps": counts,
}, optional={
    "checkpoint": st.fixed_dictionaries({"dir": st.sampled_from(["/ckpt/run", "/elsewhere", "rel"])}),
    "optimizer": st.fixed_dictionaries({}, optional={"lr": st.floats(-1, 1), "betas": st.tuples(
        st.floats(-1, 2), st.floats(-1, 2))}),
    "model": st.fixed_dictionaries({}, optional={"dim": counts, "n_heads": counts, "vocab_size": counts}),
    "data": st.fixed_dictionaries({"source": st.sampled_from(["synthetic", "tokens", "web"])},
                                  optional={"path": st.sampled_from(["/data/t.bin", "/x.bin"])}),
})
workloads = st.one_of(
    st.fixed_dictionaries({"kind": st.just("trainer"), "run": run_configs}),
    st.fixed_dictionaries({"kind": st.just("command"), "command": st.lists(st.sampled_from(
        ["train.py", "--lr", "3e-4", ""]), max_size=3)}, optional={
        "launcher": st.sampled_from(["torchrun", "none", "mpirun"]),
        "parallelism": st.fixed_dictionaries({"tensor": counts, "micro_batch": counts, "global_batch": counts},
                                             optional={"pipeline": counts}),
        "checkpoint_dir": st.sampled_from(["/ckpt/x", "/nowhere"])}),
    st.none())
job_props = st.fixed_dictionaries({
    "image": st.sampled_from(["img:1", "ghcr.io/org/img:2.0", "img", "img:latest", "img:", "UPPER:1", ""]),
    "nodes": counts,
    "procs_per_node": counts,
    "resources": st.fixed_dictionaries({"cpu": quantities, "memory": quantities}, optional={
        "accelerators": counts, "efa": counts, "shm": quantities, "hugepages_2mi": quantities}),
    "workload": workloads,
}, optional={
    "name": names, "namespace": st.sampled_from(["ml", "other", "kube-system", "Bad"]),
    "instance_type": instance_types, "env": st.dictionaries(env_names, env_values, max_size=3), "volumes": volumes,
    "elastic": st.fixed_dictionaries({"min_nodes": counts}, optional={"max_nodes": counts}),
    "restart_policy": st.sampled_from(["ExitCode", "OnFailure", "Always"]), "max_restarts": counts,
    "pod": st.fixed_dictionaries({}, optional={
        "host_network": st.booleans(), "labels": st.dictionaries(st.sampled_from(["team", "a/b", "bad key"]),
                                                                  st.sampled_from(["x", "", "-bad"]), max_size=2),
        "affinity": st.sampled_from([None, {}, {"nodeAffinity": {}}, {"bogus": 1}]),
        "tolerations": st.lists(st.fixed_dictionaries({"key": st.sampled_from(["a", "b"])}, optional={
            "operator": st.sampled_from(["Exists", "Equal", "In"])}), max_size=2)}),
    "unknown_field": st.just(1),
})
clusters = st.fixed_dictionaries({
    "kubernetes_version": st.sampled_from(["1.33", "1.30", "1.23", "v1.33", "2.0", "1.37"]),
    "namespaces": st.lists(st.sampled_from(["ml", "other", "kube-system", "Bad", "default"]), max_size=3),
})


def build(cluster_props: dict, jobs: list[dict]) -> App:
    app = App()
    cluster = Cluster(app, "c", **cluster_props)
    for i, props in enumerate(jobs):
        TrainingJob(cluster, props.pop("name", f"job{i}") if isinstance(props.get("name"), str) else f"job{i}", props)
    return app


@BUDGET
@given(clusters, st.lists(job_props, min_size=1, max_size=3))
def test_any_definition_builds_or_is_reported(cluster_props, jobs):
    try:
        app = build(cluster_props, [dict(j) for j in jobs])
    except ConfigError:
        return  # a bad cluster definition: reported with field paths
    found = fleet_findings(app)
    assert all(f.problem.code.startswith("KT") and f.problem.fix for f in found)
    if not [f for f in found if f.severity == "error"]:
        render(app)


# What a construct's id can be in Python: cdk8s needs a non-empty string, and jsii crashes on anything else.
construct_ids = st.one_of(st.sampled_from(["", " ", "a/b", "x" * 300, "\x00", "job"]), st.integers(), st.none(),
                          st.floats(allow_nan=True), st.text(max_size=6))
P5 = {"instance_types": ["p5.48xlarge"], "zones": ["us-west-2a"], "subnet_ids": ["subnet-0abc1234"],
      "security_group_ids": ["sg-00000001"], "role": "node-role", "max_nodes": 2}


@BUDGET
@given(construct_ids, st.dictionaries(env_names, env_values, max_size=2))
def test_any_construct_id_or_env_value_is_reported_not_a_crash(id, env):
    app = App()
    try:
        cluster = Cluster(app, id, kubernetes_version="1.33", namespaces=["ml"])
    except ConfigError as error:
        assert all(p.code.startswith("KT") and p.fix for p in error.problems)
        cluster = Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"])
    TrainingJob(cluster, id, image="img:1", nodes=1, procs_per_node=1, resources={"cpu": "1", "memory": "2Gi"},
                env=env, workload={"kind": "command", "command": ["t.py"]})
    EfaNodePool(cluster, id, **P5)
    NcclTest(cluster, id, image="img:1", instance_type="p5.48xlarge")
    ArgoCd(app, id, repo_url="https://example.com/fleet.git", destinations={})
    found = fleet_findings(app)
    assert all(f.problem.code.startswith("KT") and f.problem.fix for f in found)
    if not (isinstance(id, str) and id):
        assert any(f.problem.path == "id" for f in [f for f in found if f.severity == "error"])
    if any("\x00" in value for value in env.values()):
        assert any(f.problem.path.startswith("env.") for f in [f for f in found if f.severity == "error"])
    if not [f for f in found if f.severity == "error"]:
        render(app)


valid_jobs = st.fixed_dictionaries({
    "image": st.just("ghcr.io/org/trainer:1.0"),
    "nodes": st.integers(1, 4),
    "procs_per_node": st.sampled_from([1, 2, 8]),
    "resources": st.fixed_dictionaries({"cpu": st.sampled_from(["2", "500m", "1.5"]),
                                        "memory": st.sampled_from(["64Gi", "1000Gi", "123456789"])},
                                       optional={"shm": st.sampled_from(["1Gi", "512Mi"])}),
    "volumes": st.just([{"name": "ckpt", "claim": "ckpt", "mount_path": "/ckpt"}]),
    "workload": st.one_of(
        st.just({"kind": "trainer", "run": {"batch": {"global_size": 64, "micro_size": 1}, "max_steps": 5,
                                            "checkpoint": {"dir": "/ckpt/x"}}}),
        st.just({"kind": "command", "command": ["train.py"], "launcher": "none"})),
}, optional={
    "env": st.dictionaries(st.sampled_from(["NCCL_DEBUG", "MY_VAR"]), st.sampled_from(["INFO", "1"]), max_size=2),
    "elastic": st.just({"min_nodes": 1}),
    "pod": st.fixed_dictionaries({}, optional={"host_network": st.booleans(), "priority_class": st.just("high"),
                                               "labels": st.just({"team": "ml"})}),
})


@BUDGET
@given(st.lists(valid_jobs, min_size=1, max_size=2))
def test_what_synth_accepts_validate_accepts(tmp_path_factory, jobs):
    app = build({"kubernetes_version": "1.33", "namespaces": ["ml"]}, [dict(j) for j in jobs])
    if fleet_errors(app):
        return
    out = tmp_path_factory.mktemp("fuzz")
    for path, text in render(app).items():
        (out / path.name).write_text(text)
    count, findings = validate_manifests([out], SCHEMAS, "1.33")
    assert count and not findings, [f.format() for f in findings]


def test_the_fuzzer_reaches_both_outcomes():
    # A definition that builds and one that is reported, so the properties above test something.
    assert not fleet_errors(build({"kubernetes_version": "1.33", "namespaces": ["ml"]}, [{
        "image": "img:1", "nodes": 1, "procs_per_node": 1, "resources": {"cpu": "1", "memory": "2Gi"},
        "workload": {"kind": "command", "command": ["t.py"]}}]))
    with pytest.raises(ConfigError):
        build({"kubernetes_version": "1.23", "namespaces": ["ml"]}, [])
    assert yaml  # PyYAML is what render writes with
