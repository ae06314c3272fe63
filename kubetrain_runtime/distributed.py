"""The process's place in the job: rank, world, device, and the process groups it trains with."""

from __future__ import annotations

import functools
import gc
import importlib
import os
import sys
from collections.abc import Iterator
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
    """The key-value store the process group meets in: env:// (None) in a job, scoped to its attempt (below)."""
    if "MASTER_ADDR" not in os.environ:
        # Alone, an in-process store gives a group of one: every code path (FSDP's device mesh,
        # DCP's collectives) is then the same as in a job.
        return dist.HashStore()
    return None


# Under torchrun, unless TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1, every rank's env:// store is a client of a TCPStore
# its agent created at the first rendezvous and keeps for every later one (torch's dynamic_rendezvous.py reuses its
# bootstrap store; pytorch/pytorch#135712), with no prefix of the attempt. A restarted rank then reads what the
# attempt before left under the same keys (gloo's peer addresses, NCCL's unique id) and connects to a dead peer:
# connectFullMesh fails or hangs. So env:// stores get a prefix of the attempt, for the user's own
# init_process_group as for the runtime's: importing this module (as `from kubetrain_runtime import Run` does,
# before a script makes its group) wraps torch's env:// handler. The restart count names the attempt alike on every
# rank only under one agent: agents on several nodes count restarts apart (a node restarted by a peer's
# re-rendezvous does not count it), so there the store stays unscoped, and the runtime says how to turn sharing off
# (kubetrain's pods do).
AGENT_STORE_ENV = "TORCHELASTIC_USE_AGENT_STORE"
SHARING_OFF_ENV = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"


def attempt_prefix() -> str | None:
    """The prefix of this torchrun attempt's keys in the agent's shared store; None where no prefix is needed (no
    shared store) or none is safe (several agents)."""
    if os.environ.get(AGENT_STORE_ENV) != "True" or os.environ.get("GROUP_WORLD_SIZE", "1") != "1":
        return None
    return f"kubetrain/attempt-{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}/"


def unscoped_restarts_warning() -> str | None:
    """What rank 0 says where several agents share a store across attempts: restarts may hang, and the fix."""
    if os.environ.get(AGENT_STORE_ENV) != "True" or os.environ.get("GROUP_WORLD_SIZE", "1") == "1":
        return None
    return (f"torchrun shares its rendezvous store with the ranks across restarts, which agents on several nodes "
            f"cannot scope alike: a restart may hang in the process group's connect; set {SHARING_OFF_ENV}=1 in "
            "torchrun's environment (kubetrain's pods do)")


def _scope_env_rendezvous() -> None:
    rendezvous = importlib.import_module("torch.distributed.rendezvous")  # the module, not its function
    original = rendezvous._rendezvous_handlers.get("env")
    if original is None or getattr(original, "kubetrain_scoped", False):
        return

    @functools.wraps(original)
    def scoped(url: str, **kwargs: Any) -> Iterator[tuple[dist.Store, int, int]]:
        prefix = attempt_prefix()
        for store, rank, world_size in original(url, **kwargs):
            if rank == 0 and (warning := unscoped_restarts_warning()):
                print(f"warning: {warning}", file=sys.stderr, flush=True)
            yield (dist.PrefixStore(prefix, store) if prefix else store), rank, world_size

    scoped.kubetrain_scoped = True  # type: ignore[attr-defined]
    rendezvous._rendezvous_handlers["env"] = scoped


_scope_env_rendezvous()


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
