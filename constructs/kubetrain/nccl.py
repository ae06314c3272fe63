"""The NCCL/EFA environment of GPU jobs, and the variables that must never be set.

Two sources disagree (shared/domain-facts.md section 8): the seeds' EKS guide and
aws-ofi-nccl's own guidance. kubetrain targets images with aws-ofi-nccl >= 1.7 on the pod
network (AWS's reference manifests), so:
- it sets only what both sources agree helps: an interface *exclusion* list, the
  allocator setting, a local Triton cache, and FI_PROVIDER=efa (redundant for >= 1.7, needed
  for <= 1.5, harmless in between);
- it rejects, with rule KT106, the variables both sources say break EFA jobs or disable the
  AWS tuner. NCCL_NVLS_ENABLE and FI_EFA_USE_HUGE_PAGE stay the user's tuning choice.
"""

from __future__ import annotations

EFA_ENV: dict[str, str] = {
    "FI_PROVIDER": "efa",
    # An exclusion list keeps NCCL's bootstrap off loopback and container bridges without
    # pinning an interface name that differs between instance types.
    "NCCL_SOCKET_IFNAME": "^lo,docker,veth,pod-id-link0",
    "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
}

GPU_ENV: dict[str, str] = {
    # Triton's JIT cache on the node's disk, not on the shared file system or the image layer.
    "TRITON_CACHE_DIR": "/tmp/triton-cache",
}

# Hangs and collective failures (domain-facts section 10): a timed-out or failed NCCL collective
# aborts the process instead of hanging it, and first dumps the flight recorder's trace of the
# last collectives of every rank. The timeout itself is the run config's
# resilience.collective_timeout_s (the process group's timeout); rule KT113 keeps the training
# watchdog's floor above it, so the collective timeout and its dump come first.
NCCL_FAULT_ENV: dict[str, str] = {
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3",
    "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
    "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000",
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "/tmp/nccl_trace_rank_",
}

# name -> (why it must not be set on an EFA job, the values that are harmless)
FORBIDDEN_EFA_ENV: dict[str, tuple[str, frozenset[str]]] = {
    "NCCL_ALGO": ("forcing an algorithm disables the aws-ofi-nccl tuner", frozenset()),
    "NCCL_PROTO": ("forcing a protocol disables the aws-ofi-nccl tuner", frozenset()),
    "FI_EFA_USE_DEVICE_RDMA": ("turning device RDMA off routes GPU traffic through host memory; aws-ofi-nccl "
                               ">= 1.7 enables it itself where the instance supports it", frozenset({"1"})),
    "FI_EFA_FORK_SAFE": ("aws-ofi-nccl >= 1.7 sets fork safety itself", frozenset({"1"})),
}

# Interfaces that must not be forced: on p4d/p5 eth0 is not the EFA path.
FORBIDDEN_SOCKET_IFNAMES = {"eth0"}
