"""The instance catalog: built-in figures, allocatable capacity, a fleet's own types."""

from __future__ import annotations

from decimal import Decimal

import pytest
from kubetrain.model.instances import BUILTIN_CATALOG, BUILTIN_INSTANCE_TYPES, GIB, InstanceCatalog, InstanceType
from pydantic import ValidationError

from kubetrain_runtime.problems import ConfigError, validate_model

GUIDE_TYPES = ["g4dn.xlarge", "g5.48xlarge", "g6e.48xlarge", "p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge",
               "p5e.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge", "trn1.32xlarge", "trn2.48xlarge",
               "c5.xlarge", "m5.24xlarge"]


def test_the_guides_types_are_built_in_with_their_accelerators_and_efa():
    assert all(name in BUILTIN_CATALOG for name in GUIDE_TYPES)
    p5 = BUILTIN_CATALOG.get("p5.48xlarge")
    assert (p5.accelerator_resource, p5.accelerators, p5.efa_interfaces, p5.peak_bf16_flops) == (
        "nvidia.com/gpu", 8, 32, 989e12)
    assert BUILTIN_CATALOG.get("trn2.48xlarge").accelerator_resource == "aws.amazon.com/neuron"
    assert BUILTIN_CATALOG.get("c5.xlarge").accelerator_resource is None
    assert BUILTIN_CATALOG.get("g5.xlarge").efa_interfaces == 0
    assert len({t.name for t in BUILTIN_INSTANCE_TYPES}) == len(BUILTIN_INSTANCE_TYPES)


def test_nccl_bus_bandwidth_is_an_estimate_marked_as_one_on_rdma_types_only():
    p5 = BUILTIN_CATALOG.get("p5.48xlarge")
    assert p5.nccl_allreduce_busbw_gbs == pytest.approx(320.0)
    assert p5.nccl_busbw_source.startswith("estimate")
    assert BUILTIN_CATALOG.get("g5.48xlarge").nccl_allreduce_busbw_gbs is None


def test_allocatable_figures_follow_the_eks_formulas():
    # m5.large: 2 vCPU, 8 GiB. CPU: 6 % + 1 % reserved. Memory: 8 GiB x 0.925 - (11 x 110 + 255 + 100) MiB.
    m5 = BUILTIN_CATALOG.get("m5.large")
    assert m5.allocatable_cpu() == Decimal("1.93")
    assert m5.allocatable_memory() == round(8 * GIB * Decimal("0.925") - (1210 + 355) * 2**20)
    # p5: 192 vCPU -> 0.06 + 0.01 + 0.01 + 188 x 0.0025 = 0.55 reserved.
    p5 = BUILTIN_CATALOG.get("p5.48xlarge")
    assert p5.allocatable_cpu() == Decimal("191.45")
    for t in BUILTIN_INSTANCE_TYPES:  # sane everywhere: less than the instance, and most of it from 16 GiB up
        assert 0.95 * t.vcpus < t.allocatable_cpu() < t.vcpus
        assert 0 < t.allocatable_memory() < 0.925 * t.memory_gib * GIB
        assert t.memory_gib < 16 or t.allocatable_memory() > 0.8 * t.memory_gib * GIB


def test_more_pods_reserve_more_memory():
    m5 = BUILTIN_CATALOG.get("m5.large")
    dense = m5.model_copy(update={"max_pods": 250})
    assert m5.allocatable_memory() - dense.allocatable_memory() == 11 * 140 * 2**20


def test_a_fleet_registers_its_own_type_without_editing_the_library():
    custom = InstanceType(name="p5.4xlarge", vcpus=16, memory_gib=256, accelerator_resource="nvidia.com/gpu",
                          accelerators=1, accelerator="H100", accelerator_memory_gib=80, efa_interfaces=1,
                          gpudirect_rdma=True, peak_bf16_flops=989e12)
    catalog = BUILTIN_CATALOG.with_types([custom])
    assert catalog.get("p5.4xlarge") is custom and BUILTIN_CATALOG.get("p5.4xlarge") is None
    assert catalog.get("p5.48xlarge") is BUILTIN_CATALOG.get("p5.48xlarge")
    assert catalog.get("nope.large") is None
    # a registered type replaces a built-in one of the same name
    mine = BUILTIN_CATALOG.get("m5.large").model_copy(update={"max_pods": 29})
    assert InstanceCatalog().with_types([mine]).get("m5.large").max_pods == 29


def test_a_bad_type_is_a_config_error_not_a_crash():
    with pytest.raises(ConfigError) as raised:
        validate_model(InstanceType, {"name": "x", "vcpus": 0, "memory_gib": 1, "gpus": 8,
                                      "accelerator_resource": "amd.com/gpu"}, "fleet")
    codes = {(p.code, p.path) for p in raised.value.problems}
    assert codes == {("KT003", "name"), ("KT003", "vcpus"), ("KT001", "gpus"), ("KT003", "accelerator_resource")}
    with pytest.raises(ValidationError, match="frozen"):
        BUILTIN_CATALOG.get("m5.large").vcpus = 4
