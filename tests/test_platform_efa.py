"""The NCCL/EFA profile: environment by version, findings judged by value."""

from __future__ import annotations

import pytest
from kubetrain.model.efa import NcclProfile, efa_environment, environment_problems
from kubetrain.rules.registry import severity

from kubetrain_runtime.problems import ConfigError, validate_model

MODERN = NcclProfile(aws_ofi_nccl="1.16.0", nccl="2.27.3")


def test_environment_follows_the_image_versions():
    assert MODERN.environment() == {"NCCL_SOCKET_IFNAME": "^lo,docker,veth,pod-id-link0",
                                    "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    old = NcclProfile(aws_ofi_nccl="v1.5.0-aws", nccl="2.18.1").environment()
    assert old["FI_PROVIDER"] == "efa" and old["NCCL_NVLS_ENABLE"] == "0"
    assert NcclProfile(aws_ofi_nccl="1.14.2", nccl="2.26.2").environment()["NCCL_TUNER_PLUGIN"]
    for env in (MODERN.environment(), old):
        assert "NCCL_TIMEOUT" not in env and "FI_EFA_USE_HUGE_PAGE" not in env and "NCCL_ALGO" not in env
    assert MODERN.pod_fields() == {}
    assert NcclProfile(aws_ofi_nccl="1.16.0", nccl="2.27.3", host_network=True).pod_fields() == {
        "hostNetwork": True, "dnsPolicy": "ClusterFirstWithHostNet"}


def judged(env: dict[str, str], profile: NcclProfile | None = MODERN, gpus: bool = True, efa: bool = True):
    return [(p.code, p.path) for p in environment_problems(env, gpus=gpus, efa=efa, profile=profile)]


@pytest.mark.parametrize("name, bad, fine, code", [
    ("NCCL_P2P_DISABLE", "1", "0", "KT115"),
    ("CUDA_LAUNCH_BLOCKING", "1", "0", "KT115"),
    ("NCCL_SOCKET_IFNAME", "eth0", "^lo,docker", "KT106"),
    ("NCCL_SOCKET_IFNAME", "eth0,eth1", "^eth0", "KT106"),
    ("FI_PROVIDER", "tcp", "efa", "KT126"),
    ("NCCL_NET", "IB", "AWS Libfabric", "KT106"),
])
def test_values_are_judged_not_names(name, bad, fine, code):
    [problem] = environment_problems({name: bad}, gpus=True, efa=True, profile=MODERN)
    assert (problem.code, problem.path) == (code, f"env.{name}") and problem.fix and bad in problem.message
    assert judged({name: fine}) == []


@pytest.mark.parametrize("name, value", [("FI_EFA_USE_DEVICE_RDMA", "0"), ("FI_EFA_USE_DEVICE_RDMA", "1"),
                                         ("FI_EFA_FORK_SAFE", "0"), ("FI_EFA_FORK_SAFE", "1")])
def test_what_aws_ofi_nccl_sets_itself_is_never_set_by_hand(name, value):
    assert judged({name: value}) == [("KT106", f"env.{name}")]
    assert judged({name: value}, efa=False) == []


def test_efa_breakers_only_on_efa_jobs_and_debug_switches_only_on_gpu_jobs():
    assert judged({"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"}) == [("KT106", "env.NCCL_ALGO"),
                                                                     ("KT106", "env.NCCL_PROTO")]
    assert judged({"NCCL_ALGO": "Ring", "FI_PROVIDER": "tcp"}, efa=False) == []
    assert judged({"CUDA_LAUNCH_BLOCKING": "1"}, gpus=False, efa=False) == []


def test_tuner_plugin_only_for_the_versions_that_need_it():
    assert judged({"NCCL_TUNER_PLUGIN": "x.so"}) == [("KT127", "env.NCCL_TUNER_PLUGIN")]
    assert judged({"NCCL_TUNER_PLUGIN": "x.so"}, NcclProfile(aws_ofi_nccl="1.13.0", nccl="2.26.2")) == []
    assert judged({"NCCL_TUNER_PLUGIN": "x.so"}, profile=None) == []  # unknown stack: no judgement


def test_timeouts_nothing_reads_are_warnings_naming_the_setting_that_works():
    problems = environment_problems({"NCCL_TIMEOUT": "1800", "TORCH_DISTRIBUTED_TIMEOUT": "1800"}, gpus=False,
                                    efa=False, profile=None)
    assert [(p.code, severity(p.code)) for p in problems] == [("KT116", "warning"), ("KT116", "warning")]
    assert all("collective_timeout_s" in p.fix and "--distributed-timeout-minutes" in p.fix for p in problems)


def test_an_unnamed_stack_gets_what_is_right_for_every_plugin_version():
    assert efa_environment(None) == {"FI_PROVIDER": "efa", "NCCL_SOCKET_IFNAME": "^lo,docker,veth,pod-id-link0",
                                     "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    assert efa_environment(MODERN) == MODERN.environment()


def test_a_bad_version_is_a_config_error():
    with pytest.raises(ConfigError) as raised:
        validate_model(NcclProfile, {"aws_ofi_nccl": "latest", "nccl": "2.26"}, "image")
    assert [(p.code, p.path) for p in raised.value.problems] == [("KT003", "aws_ofi_nccl")]
