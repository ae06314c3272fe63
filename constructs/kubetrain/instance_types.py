"""The EC2 instance types GPU jobs run on: what one node can give a pod.

Figures from Karpenter's generated instance-type reference and aws-ofi-nccl's platform code
(shared/domain-facts.md section 6). Rules use them to reject a job that asks a node for more
accelerators or EFA interfaces than it has.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InstanceType:
    name: str
    accelerators: int
    accelerator: str  # the chip, e.g. "H100"
    accelerator_resource: str  # the extended resource a pod requests
    efa_interfaces: int
    gpudirect_rdma: bool


_GPU = "nvidia.com/gpu"
_NEURON = "aws.amazon.com/neuron"


def _family(prefix: str, sizes: dict[str, tuple[int, int]], chip: str, resource: str = _GPU) -> list[InstanceType]:
    return [InstanceType(f"{prefix}.{size}", accel, chip, resource, efa, False)
            for size, (accel, efa) in sizes.items()]


INSTANCE_TYPES: dict[str, InstanceType] = {t.name: t for t in [
    InstanceType("p4d.24xlarge", 8, "A100", _GPU, 4, True),
    InstanceType("p4de.24xlarge", 8, "A100", _GPU, 4, True),
    InstanceType("p5.48xlarge", 8, "H100", _GPU, 32, True),
    InstanceType("p5e.48xlarge", 8, "H200", _GPU, 32, True),
    InstanceType("p5en.48xlarge", 8, "H200", _GPU, 16, True),
    InstanceType("p6-b200.48xlarge", 8, "B200", _GPU, 8, True),
    InstanceType("trn1.32xlarge", 16, "Trainium", _NEURON, 8, True),
    InstanceType("trn2.48xlarge", 16, "Trainium2", _NEURON, 16, True),
    *_family("g5", {"xlarge": (1, 0), "2xlarge": (1, 0), "4xlarge": (1, 0), "8xlarge": (1, 1), "12xlarge": (4, 1),
                    "16xlarge": (1, 1), "24xlarge": (4, 1), "48xlarge": (8, 1)}, "A10G"),
    *_family("g6e", {"8xlarge": (1, 1), "12xlarge": (4, 1), "16xlarge": (1, 1), "24xlarge": (4, 2),
                     "48xlarge": (8, 4)}, "L40S"),
    *_family("g4dn", {"8xlarge": (1, 1), "12xlarge": (4, 1), "16xlarge": (1, 1), "metal": (8, 1)}, "T4"),
]}
