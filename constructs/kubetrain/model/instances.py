"""The instance catalog: what one EC2 node gives a pod, for the capacity rules and node pools.

Figures from AWS's instance-type pages as summarised in Karpenter's generated instance-type
reference and aws-ofi-nccl's platform code (https://karpenter.sh/docs/reference/instance-types/). A fleet adds its
own types without editing the library: `Cluster(..., instance_types=[InstanceType(...)])`.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Literal

from pydantic import Field, model_validator

from kubetrain.model.strict import StrictProps
from kubetrain.model.vocabulary import GPU_RESOURCE, NEURON_RESOURCE
from kubetrain_runtime.accelerators import PEAK_BF16_FLOPS
from kubetrain_runtime.problems import INVALID_VALUE, rule_violation
from kubetrain_runtime.spelling import did_you_mean

GIB = 2**30
MIB = 2**20

# Karpenter's model of what the kubelet leaves to pods (karpenter-provider-aws,
# pkg/providers/instancetype/types.go: kubeReservedResources, evictionThreshold, memory()), the same
# formulas as the EKS AMIs' bootstrap (amazon-eks-ami, bottlerocket's pluto: "11 * max_pods + 255"):
#   allocatable = capacity - kube-reserved - system-reserved (none by default) - hard eviction
#   memory capacity = EC2's figure x (1 - vmMemoryOverheadPercent), the setting's default 7.5 %
#     (EC2 lists more memory than the kernel sees);
#   kube-reserved memory = 11 MiB x maxPods + 255 MiB;
#   kube-reserved CPU = 6 % of the first core, 1 % of the second, 0.5 % of the next two, 0.25 % of the rest;
#   eviction: memory.available < 100Mi (the kubelet's default hard threshold).
VM_MEMORY_OVERHEAD = Decimal("0.075")
DEFAULT_MAX_PODS = 110  # the kubelet's default; set InstanceType.max_pods for ENI-limited density
EVICTION_MIB = 100
_CPU_RESERVED = [(1, Decimal("0.06")), (1, Decimal("0.01")), (2, Decimal("0.005"))]  # then 0.25 % a core


class InstanceType(StrictProps):
    """One EC2 instance type. Frozen and strict like every user-facing input."""

    name: str = Field(..., pattern=r"^[a-z][a-z0-9-]*\.[a-z0-9-]+$", description="EC2 name, e.g. p5.48xlarge: "
                                                                                  "family, '.', size.")
    vcpus: int = Field(..., gt=0)
    memory_gib: float = Field(..., gt=0, description="Memory in GiB as EC2 lists it (not what pods get: see "
                                                     "allocatable_memory()).")
    accelerator_resource: Literal[GPU_RESOURCE, NEURON_RESOURCE] | None = Field(
        None, description="The extended resource its accelerators are requested as; None for CPU types.")
    accelerators: int = Field(0, ge=0, description="GPUs, or Neuron devices (chips).")
    accelerator: str | None = Field(None, description="The chip, e.g. H100.")
    accelerator_memory_gib: float = Field(0, ge=0, description="Memory of one accelerator.")
    efa_interfaces: int = Field(0, ge=0)
    gpudirect_rdma: bool = Field(False, description="EFA with GPUDirect RDMA (p4d and newer, Trainium).")
    network_gbps: float | None = Field(None, gt=0)
    peak_bf16_flops: float | None = Field(None, gt=0, description="Dense bf16 peak of one accelerator in FLOP/s, "
                                                                  "for MFU; None when unknown.")
    nccl_allreduce_busbw_gbs: float | None = Field(
        None, gt=0, description="Expected nccl-tests all_reduce_perf bus bandwidth (GB/s) between nodes of this "
                                "type at large message sizes, the pass mark of an NCCL test; None when unknown.")
    nccl_busbw_source: str | None = Field(None, description="Where nccl_allreduce_busbw_gbs comes from "
                                                            "('estimate: ...' when it is one).")
    max_pods: int = Field(DEFAULT_MAX_PODS, gt=0, description="The kubelet's maxPods on these nodes (it sizes the "
                                                              "kube-reserved memory).")

    @model_validator(mode="after")
    def _accelerators_have_a_resource(self) -> InstanceType:
        if bool(self.accelerator_resource) != bool(self.accelerators):
            raise rule_violation(INVALID_VALUE, f"{self.name} has {self.accelerators} accelerators and accelerator "
                                 f"resource {self.accelerator_resource}", "give both (accelerators and "
                                 "accelerator_resource) for an accelerated type, neither for a CPU type",
                                 field="accelerators")
        return self

    @property
    def uses_efa(self) -> bool:
        return self.efa_interfaces > 0

    def allocatable_cpu(self) -> Decimal:
        """Cores a pod can request: the vCPUs less the kubelet's reservation."""
        reserved, left = Decimal(0), self.vcpus
        for cores, share in _CPU_RESERVED:
            used = min(cores, left)
            reserved += used * share
            left -= used
        return self.vcpus - reserved - left * Decimal("0.0025")

    def allocatable_memory(self) -> Decimal:
        """Bytes a pod can request (huge pages included): EC2's figure less overhead, reservation, eviction."""
        kernel = Decimal(str(self.memory_gib)) * GIB * (1 - VM_MEMORY_OVERHEAD)
        return (kernel - (11 * self.max_pods + 255 + EVICTION_MIB) * MIB).to_integral_value()


# Expected inter-node all-reduce bus bandwidth. No published figure is pinned in the project's sources
# (EC2 publishes line rates only), so these are estimates: nccl-tests' bus bandwidth of a ring
# all-reduce across nodes is bounded by the node's network line rate (Gbps / 8 = GB/s), and AWS's
# GPUDirect RDMA types reach roughly 80 % of it at large messages. Replace them with your own
# measurements (InstanceType.model_copy(update=...)) once the NCCL test has run on your fleet.
_BUSBW_EFFICIENCY = 0.8
_BUSBW_NOTE = "estimate: 80 % of the EFA line rate (Gbps / 8)"


def _gpu(name: str, vcpus: int, memory: float, gpus: int, chip: str, chip_gib: float, efa: int, rdma: bool,
         gbps: float | None, peak: float | None) -> InstanceType:
    busbw = gbps / 8 * _BUSBW_EFFICIENCY if rdma and gbps else None
    return InstanceType(name=name, vcpus=vcpus, memory_gib=memory, accelerator_resource=GPU_RESOURCE, accelerators=gpus,
                        accelerator=chip, accelerator_memory_gib=chip_gib, efa_interfaces=efa, gpudirect_rdma=rdma,
                        network_gbps=gbps, peak_bf16_flops=peak, nccl_allreduce_busbw_gbs=busbw,
                        nccl_busbw_source=_BUSBW_NOTE if busbw else None)


def _cpu(family: str, sizes: dict[str, tuple[int, float]]) -> list[InstanceType]:
    return [InstanceType(name=f"{family}.{size}", vcpus=v, memory_gib=m) for size, (v, m) in sizes.items()]


# Peak dense bf16 of each chip: kubetrain_runtime/accelerators.py (the runtime's MFU and the cost estimate read the same).
BUILTIN_INSTANCE_TYPES: tuple[InstanceType, ...] = (
    _gpu("p4d.24xlarge", 96, 1152, 8, "A100", 40, 4, True, 400, PEAK_BF16_FLOPS["A100"]),
    _gpu("p4de.24xlarge", 96, 1152, 8, "A100", 80, 4, True, 400, PEAK_BF16_FLOPS["A100"]),
    _gpu("p5.48xlarge", 192, 2048, 8, "H100", 80, 32, True, 3200, PEAK_BF16_FLOPS["H100 SXM"]),
    _gpu("p5e.48xlarge", 192, 2048, 8, "H200", 141, 32, True, 3200, PEAK_BF16_FLOPS["H200"]),
    _gpu("p5en.48xlarge", 192, 2048, 8, "H200", 141, 16, True, 3200, PEAK_BF16_FLOPS["H200"]),
    _gpu("p6-b200.48xlarge", 192, 2048, 8, "B200", 179, 8, True, 3200, PEAK_BF16_FLOPS["B200"]),
    InstanceType(name="trn1.32xlarge", vcpus=128, memory_gib=512, accelerator_resource=NEURON_RESOURCE, accelerators=16,
                 accelerator="Trainium", accelerator_memory_gib=32, efa_interfaces=8, gpudirect_rdma=True,
                 network_gbps=800, peak_bf16_flops=PEAK_BF16_FLOPS["Trainium"]),
    InstanceType(name="trn2.48xlarge", vcpus=192, memory_gib=2048, accelerator_resource=NEURON_RESOURCE, accelerators=16,
                 accelerator="Trainium2", accelerator_memory_gib=96, efa_interfaces=16, gpudirect_rdma=True,
                 network_gbps=3200, peak_bf16_flops=PEAK_BF16_FLOPS["Trainium2"]),
    *(_gpu(f"g5.{size}", v, m, g, "A10G", 24, efa, False, None, PEAK_BF16_FLOPS["A10G"]) for size, (v, m, g, efa) in {
        "xlarge": (4, 16, 1, 0), "2xlarge": (8, 32, 1, 0), "4xlarge": (16, 64, 1, 0), "8xlarge": (32, 128, 1, 1),
        "12xlarge": (48, 192, 4, 1), "16xlarge": (64, 256, 1, 1), "24xlarge": (96, 384, 4, 1),
        "48xlarge": (192, 768, 8, 1)}.items()),
    *(_gpu(f"g6e.{size}", v, m, g, "L40S", 48, efa, False, None, PEAK_BF16_FLOPS["L40S"]) for size, (v, m, g, efa) in {
        "xlarge": (4, 32, 1, 0), "2xlarge": (8, 64, 1, 0), "4xlarge": (16, 128, 1, 0),
        "8xlarge": (32, 256, 1, 1), "12xlarge": (48, 384, 4, 1), "16xlarge": (64, 512, 1, 1),
        "24xlarge": (96, 768, 4, 2), "48xlarge": (192, 1536, 8, 4)}.items()),
    # G6 (NVIDIA L4, 24 GB): sizes, vCPUs, memory, GPUs and EFA as Karpenter's generated instance-type reference
    # lists them (karpenter-provider-aws 1d927085, website/content/en/docs/reference/instance-types.md: 8xlarge and
    # up have one EFA interface), the figures of AWS's accelerated-computing instance specifications.
    *(_gpu(f"g6.{size}", v, m, g, "L4", 24, efa, False, None, PEAK_BF16_FLOPS["L4"]) for size, (v, m, g, efa) in {
        "xlarge": (4, 16, 1, 0), "2xlarge": (8, 32, 1, 0), "4xlarge": (16, 64, 1, 0), "8xlarge": (32, 128, 1, 1),
        "12xlarge": (48, 192, 4, 1), "16xlarge": (64, 256, 1, 1), "24xlarge": (96, 384, 4, 1),
        "48xlarge": (192, 768, 8, 1)}.items()),
    *(_gpu(f"g4dn.{size}", v, m, g, "T4", 16, efa, False, None, PEAK_BF16_FLOPS["T4"]) for size, (v, m, g, efa) in {
        "xlarge": (4, 16, 1, 0), "2xlarge": (8, 32, 1, 0), "4xlarge": (16, 64, 1, 0), "8xlarge": (32, 128, 1, 1),
        "12xlarge": (48, 192, 4, 1), "16xlarge": (64, 256, 1, 1), "metal": (96, 384, 8, 1)}.items()),
    *_cpu("c5", {"large": (2, 4), "xlarge": (4, 8), "2xlarge": (8, 16), "4xlarge": (16, 32), "9xlarge": (36, 72),
                 "12xlarge": (48, 96), "18xlarge": (72, 144), "24xlarge": (96, 192)}),
    *_cpu("m5", {"large": (2, 8), "xlarge": (4, 16), "2xlarge": (8, 32), "4xlarge": (16, 64), "8xlarge": (32, 128),
                 "12xlarge": (48, 192), "16xlarge": (64, 256), "24xlarge": (96, 384)}),
)


class InstanceCatalog:
    """Instance types by name: the built-in ones, plus a fleet's own (which win on a name clash).

        catalog = BUILTIN_CATALOG.with_types([InstanceType(name="p5.4xlarge", vcpus=16, memory_gib=256, ...)])
        catalog.get("p5.4xlarge")  # the registered type; get() of an unknown name is None
    """

    def __init__(self, types: tuple[InstanceType, ...] | list[InstanceType] = BUILTIN_INSTANCE_TYPES):
        self._types = {t.name: t for t in types}

    def get(self, name: str) -> InstanceType | None:
        return self._types.get(name)

    def with_types(self, types: list[InstanceType]) -> InstanceCatalog:
        return InstanceCatalog([*self._types.values(), *types])

    def names(self) -> list[str]:
        return sorted(self._types)

    def near(self, name: str) -> str:
        """'did you mean ...? ' for a misspelt type name (a near name of the catalog), else ''."""
        return did_you_mean(name, self.names(), cutoff=0.8)

    def __contains__(self, name: object) -> bool:
        return name in self._types


BUILTIN_CATALOG = InstanceCatalog()
