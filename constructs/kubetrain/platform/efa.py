"""The NCCL/EFA profile of an image: the environment derived from its aws-ofi-nccl and NCCL versions.

Two sources disagree (shared/domain-facts.md section 8): the seeds' EKS guide has a must-set and a
must-not-set list written for old images; aws-ofi-nccl (>= 1.7) sets the EFA provider, device RDMA
and fork safety itself and says that forcing NCCL's algorithm or protocol disables its tuner. A
profile names the versions the image ships, and each piece of guidance is honoured where it applies:

    guide's item                     kubetrain
    FI_PROVIDER=efa                  set for aws-ofi-nccl < 1.7 (needed <= 1.5); the plugin sets it after
    FI_EFA_USE_HUGE_PAGE=0           not set: pools give EFA pods 2 MiB huge pages, which the provider uses
    NCCL_TIMEOUT, TORCH_DISTRIBUTED_TIMEOUT   not set: torch and NCCL read neither (domain-facts 11); a
                                     finding names the setting that works
    NCCL_NVLS_ENABLE=0               set for NCCL < 2.18.5; a tuning choice from there on
    PYTORCH_CUDA_ALLOC_CONF          expandable_segments:True (both sources agree)
    TRITON_CACHE_DIR on local disk   the node pool's placement (a local emptyDir)
    NCCL_SOCKET_IFNAME               an exclusion list, never eth0 (not the EFA path on p4d/p5)
    NCCL_TUNER_PLUGIN                only for aws-ofi-nccl 1.13-1.15, which need it named
    hostNetwork + ClusterFirstWithHostNet   an explicit choice (`host_network`), off by default as in
                                     AWS's reference manifests; it needs a privileged namespace

`forbidden(env)` judges the values a job sets, not just the names: NCCL_P2P_DISABLE=0 is fine,
=1 is not. Findings are plain data; the job rules (KT106 family) report them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from training.problems import INVALID_VALUE, rule_violation

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:[-+][0-9A-Za-z.-]+)?$")
SOCKET_EXCLUSIONS = "^lo,docker,veth,pod-id-link0"


def parse_version(text: str) -> tuple[int, int, int]:
    """'1.14.2', 'v1.13.0-aws', '2.26.2-1' -> (major, minor, patch); ValueError otherwise."""
    match = _VERSION.match(text.strip())
    if not match:
        raise ValueError(f"{text!r} is not a version like 1.14.0")
    return int(match[1]), int(match[2]), int(match[3] or 0)


def _check_version(value: str) -> str:
    try:
        parse_version(value)
    except ValueError as error:
        raise rule_violation(INVALID_VALUE, str(error), "give the version the image ships, e.g. 1.14.0") from None
    return value


@dataclass(frozen=True)
class EnvFinding:
    """One environment variable a job should not set (or not to that value)."""

    name: str
    severity: Literal["error", "warning"]
    message: str
    fix: str


class NcclProfile(BaseModel):
    """The communication stack of a job's image. Frozen and strict like every input."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    aws_ofi_nccl: str = Field(..., description="aws-ofi-nccl version in the image, e.g. '1.14.0'.")
    nccl: str = Field(..., description="NCCL version in the image, e.g. '2.26.2'.")
    host_network: bool = Field(False, description="Run pods on the host's network (the seed guide's choice). Off "
                                                  "by default: AWS's reference manifests use the pod network, and "
                                                  "hostNetwork needs a namespace at Pod Security 'privileged'.")
    tuner_plugin: str = Field("libnccl-ofi-tuner.so", description="The tuner library as the image installs it; "
                                                                  "named in NCCL_TUNER_PLUGIN for 1.13-1.15 only.")

    _versions = field_validator("aws_ofi_nccl", "nccl")(_check_version)

    @property
    def plugin_version(self) -> tuple[int, int, int]:
        return parse_version(self.aws_ofi_nccl)

    @property
    def nccl_version(self) -> tuple[int, int, int]:
        return parse_version(self.nccl)

    @property
    def needs_tuner_plugin(self) -> bool:
        return (1, 13, 0) <= self.plugin_version < (1, 16, 0)

    def environment(self) -> dict[str, str]:
        """The variables an EFA job's containers get (TRITON_CACHE_DIR comes with the pool's placement)."""
        env = {"NCCL_SOCKET_IFNAME": SOCKET_EXCLUSIONS, "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
        if self.plugin_version < (1, 7, 0):
            env["FI_PROVIDER"] = "efa"
        if self.needs_tuner_plugin:
            env["NCCL_TUNER_PLUGIN"] = self.tuner_plugin
        if self.nccl_version < (2, 18, 5):
            env["NCCL_NVLS_ENABLE"] = "0"
        return env

    def pod_fields(self) -> dict[str, object]:
        """Pod spec fields of the network choice."""
        return {"hostNetwork": True, "dnsPolicy": "ClusterFirstWithHostNet"} if self.host_network else {}

    def forbidden(self, env: dict[str, str]) -> list[EnvFinding]:
        """What is wrong with a job's own environment on an EFA instance, judged by value."""
        found: list[EnvFinding] = []

        def bad(name: str, message: str, fix: str, severity: Literal["error", "warning"] = "error") -> None:
            found.append(EnvFinding(name, severity, message, fix))

        for name, value in env.items():
            value = value.strip()
            if name in ("NCCL_ALGO", "NCCL_PROTO"):
                bad(name, f"forcing NCCL's {name[5:].lower()} disables the aws-ofi-nccl tuner", f"remove {name}")
            elif name == "NCCL_P2P_DISABLE" and value not in ("0", ""):
                bad(name, "disabling peer-to-peer sends intra-node traffic through host memory instead of NVLink",
                    "remove it (or set 0)")
            elif name == "CUDA_LAUNCH_BLOCKING" and value not in ("0", ""):
                bad(name, "synchronous kernel launches serialize every kernel (a debugging switch)",
                    "remove it (or set 0)")
            elif name == "NCCL_SOCKET_IFNAME" and not value.startswith("^") and "eth0" in value.lstrip("=").split(","):
                bad(name, "pinning eth0 breaks EFA instances, where eth0 is not the EFA path",
                    f"remove it, or use an exclusion list such as {SOCKET_EXCLUSIONS}")
            elif name == "FI_PROVIDER" and value != "efa":
                bad(name, f"FI_PROVIDER={value} keeps libfabric off EFA", "remove it (or set efa)")
            elif name == "FI_EFA_USE_DEVICE_RDMA" and value != "1":
                bad(name, "turning device RDMA off routes GPU traffic through host memory",
                    "remove it: aws-ofi-nccl >= 1.7 enables it where the instance supports it")
            elif name == "FI_EFA_FORK_SAFE" and value != "1":
                bad(name, "turning fork safety off can corrupt registered memory after a fork (data loaders)",
                    "remove it: aws-ofi-nccl >= 1.7 sets it itself")
            elif name == "NCCL_TUNER_PLUGIN" and not self.needs_tuner_plugin:
                bad(name, f"aws-ofi-nccl {self.aws_ofi_nccl} does not need its tuner named (only 1.13-1.15 do)",
                    "remove it", "warning")
            elif name in ("NCCL_TIMEOUT", "TORCH_DISTRIBUTED_TIMEOUT"):
                bad(name, f"nothing reads {name}: torch takes the collective timeout from init_process_group, "
                          "and NCCL has no such variable",
                    "remove it; set the run config's resilience.collective_timeout_s (kubetrain's trainer) or "
                    "Megatron-LM's --distributed-timeout-minutes", "warning")
        return found
