"""A plain torchrun DDP script, not using kubetrain's trainer: what "bring your own train.py" looks like.

    torchrun --nproc-per-node=2 examples/ddp_minimal.py --steps 20 --checkpoint-dir /tmp/ddp

It reads only what torchrun gives every rank (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT),
fits a small regression with DDP, and saves a checkpoint every `--save-every` steps with rank 0,
resuming from the newest one. `apps/dev.py` runs it as a command job (`kubetrain run-local
dev/ddp-minimal`).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--save-every", type=int, default=10)
    parser.add_argument("--checkpoint-dir", type=Path, required=True)
    args = parser.parse_args()

    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if backend == "nccl" else torch.device("cpu")
    torch.manual_seed(0)  # the same initial weights on every rank
    model = DistributedDataParallel(torch.nn.Linear(16, 1).to(device))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

    step, checkpoint = 0, args.checkpoint_dir / "latest.pt"
    if checkpoint.is_file():
        state = torch.load(checkpoint, map_location=device)
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step = state["step"]

    target = torch.arange(16, dtype=torch.float32, device=device) / 16
    generator = torch.Generator().manual_seed(1000 + rank)  # each rank its own data
    while step < args.steps:
        step += 1
        inputs = torch.randn(32, 16, generator=generator).to(device)
        loss = torch.nn.functional.mse_loss(model(inputs).squeeze(-1), inputs @ target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if rank == 0:
            print(f"step {step} loss {loss.item():.5f} world_size {world}", flush=True)
        if step % args.save_every == 0 or step == args.steps:
            if rank == 0:
                args.checkpoint_dir.mkdir(parents=True, exist_ok=True)
                tmp = checkpoint.with_suffix(".tmp")
                torch.save({"model": model.module.state_dict(), "optimizer": optimizer.state_dict(), "step": step}, tmp)
                os.replace(tmp, checkpoint)  # a crash mid-save never leaves a torn checkpoint
            dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
