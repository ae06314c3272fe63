"""The process's place in the job: rank, world, device, and the process groups it trains with."""

from __future__ import annotations

import gc
import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from kubetrain_runtime.dumps import Dumps


@dataclass(frozen=True)
class World:
    rank: int
    world_size: int
    local_rank: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def device_type(self) -> str:
        return self.device.type


def init_world(collective_timeout_s: float = 600, dumps: Dumps | None = None) -> World:
    """Join the job's process group: NCCL on CUDA, gloo on CPU; world size 1 when run alone. With `dumps`, the
    flight recorder records and dumps into the rank's folder on the checkpoint volume (set before the group)."""
    rank = int(os.environ.get("RANK", 0))
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        device = torch.device("cpu")
        backend = "gloo"
    if dumps is not None:
        dumps.prepare(nccl=backend == "nccl")
    dist.init_process_group(backend, store=_store(world_size, collective_timeout_s), rank=rank, world_size=world_size,
                            device_id=device if backend == "nccl" else None,
                            timeout=timedelta(seconds=collective_timeout_s))
    return World(rank, world_size, local_rank, device)


def _store(world_size: int, timeout_s: float) -> dist.Store | None:
    """The key-value store the process group meets in."""
    if "MASTER_ADDR" not in os.environ:
        # Alone, an in-process store gives a group of one: every code path (FSDP's device mesh,
        # DCP's collectives) is then the same as in a job.
        return dist.HashStore()
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        # env://: rank 0 hosts a store of this attempt's own. Synthesized pods take this path
        # (TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1, see kubetrain's pod_template).
        return None
    # torchrun's default shares the agent's store, which outlives the attempts: a restarted rank
    # could read a dead peer's address left by the attempt before and fail to connect. Keys of
    # each attempt get a prefix of their own. The restart count names the attempt only while
    # every agent counts the same restarts, which holds for one agent (one node), not always
    # for several: an agent restarted by a peer's re-rendezvous does not count it.
    agent_store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world_size,
                                is_master=False, timeout=timedelta(seconds=timeout_s))
    return dist.PrefixStore(f"kubetrain/attempt-{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}", agent_store)


def all_reduce_mean(value: torch.Tensor) -> torch.Tensor:
    value = value.detach().clone()
    dist.all_reduce(value)  # SUM: gloo has no AVG
    return value / dist.get_world_size()


def broadcast_object(obj: Any) -> Any:
    """Rank 0's `obj`, on every rank."""
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def all_gather_object(obj: Any) -> list[Any]:
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, obj)
    return gathered


def shutdown() -> None:
    # DDP's hooks and FSDP's state form reference cycles that keep process groups alive; free
    # them now, while the interpreter is whole: gloo objects torn down during interpreter
    # finalization can abort the process after training has finished.
    gc.collect()
    if dist.is_initialized():
        dist.destroy_process_group()
