"""The NCCL/EFA profile: environment by version, findings judged by value."""

from __future__ import annotations

import pytest
from kubetrain.platform.efa import NcclProfile

from training.problems import ConfigError, validate_model

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


@pytest.mark.parametrize("name, bad, fine", [
    ("NCCL_P2P_DISABLE", "1", "0"),
    ("CUDA_LAUNCH_BLOCKING", "1", "0"),
    ("NCCL_SOCKET_IFNAME", "eth0", "^lo,docker"),
    ("FI_PROVIDER", "tcp", "efa"),
    ("FI_EFA_USE_DEVICE_RDMA", "0", "1"),
    ("FI_EFA_FORK_SAFE", "0", "1"),
])
def test_values_are_judged_not_names(name, bad, fine):
    [finding] = MODERN.forbidden({name: bad})
    assert (finding.name, finding.severity) == (name, "error") and finding.fix
    assert MODERN.forbidden({name: fine}) == []


def test_tuner_plugin_only_for_the_versions_that_need_it_and_forced_algorithms_never():
    assert [f.severity for f in MODERN.forbidden({"NCCL_TUNER_PLUGIN": "x.so"})] == ["warning"]
    assert NcclProfile(aws_ofi_nccl="1.13.0", nccl="2.26.2").forbidden({"NCCL_TUNER_PLUGIN": "x.so"}) == []
    assert [f.name for f in MODERN.forbidden({"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"})] == ["NCCL_ALGO",
                                                                                              "NCCL_PROTO"]


def test_timeouts_nothing_reads_are_warnings_naming_the_setting_that_works():
    findings = MODERN.forbidden({"NCCL_TIMEOUT": "1800", "TORCH_DISTRIBUTED_TIMEOUT": "1800"})
    assert [(f.name, f.severity) for f in findings] == [("NCCL_TIMEOUT", "warning"),
                                                        ("TORCH_DISTRIBUTED_TIMEOUT", "warning")]
    assert all("collective_timeout_s" in f.fix and "--distributed-timeout-minutes" in f.fix for f in findings)


def test_a_bad_version_is_a_config_error():
    with pytest.raises(ConfigError) as raised:
        validate_model(NcclProfile, {"aws_ofi_nccl": "latest", "nccl": "2.26"}, "image")
    assert [(p.code, p.path) for p in raised.value.problems] == [("KT003", "aws_ofi_nccl")]
