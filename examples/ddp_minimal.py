"""A plain torchrun DDP script in the style of PyTorch's DDP tutorial, on kubetrain's runtime: what "bring your own
train.py" looks like.

    torchrun --nproc-per-node=2 examples/ddp_minimal.py --steps 20 --checkpoint-dir /tmp/ddp

It reads only what torchrun gives every rank (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT) and fits a small
regression with DDP: a DataLoader with a DistributedSampler, dropout, a noisy augmentation and a step LR schedule,
every one a source of state a resumed run must get back exactly. Six lines hand it to `kubetrain_runtime.Run`
(marked `# runtime`), which resumes it from the newest verified checkpoint, checkpoints it, saves on SIGTERM, skips
non-finite steps and writes its metrics; without them it is the tutorial's loop. `apps/dev.py` runs it as a command
job (`kubetrain run-local dev/ddp-minimal`); bench/ettr.py --loop ddp-minimal crashes it every two minutes.
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from kubetrain_runtime import Run  # runtime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--width", type=int, default=64, help="hidden units (bench/ettr.py makes a step longer)")
    parser.add_argument("--checkpoint-dir", default=None,
                        help="default: the job's (KUBETRAIN_CHECKPOINT_DIR), else ./checkpoints")
    args = parser.parse_args()

    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend)
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if backend == "nccl" else torch.device("cpu")
    torch.manual_seed(0)  # the same initial weights on every rank
    model = torch.nn.Sequential(torch.nn.Linear(16, args.width), torch.nn.ReLU(), torch.nn.Dropout(0.1),
                                torch.nn.Linear(args.width, 1))
    model = DistributedDataParallel(model.to(device))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10, gamma=0.7)

    inputs = torch.randn(1024, 16, generator=torch.Generator().manual_seed(1))
    dataset = TensorDataset(inputs, inputs @ (torch.arange(16, dtype=torch.float32) / 16))
    loader = DataLoader(dataset, batch_size=32, sampler=DistributedSampler(dataset, seed=0))

    run = Run(model, optimizer, scheduler=scheduler, max_steps=args.steps,  # runtime
              checkpoint_dir=args.checkpoint_dir)  # runtime
    for epoch in run.epochs():  # runtime: was `for epoch in range(epochs):`
        loader.sampler.set_epoch(epoch)
        for features, targets in run.batches(loader):  # runtime: was `for features, targets in loader:`
            features = features + 0.01 * torch.randn_like(features)  # augmentation: a random stream
            loss = torch.nn.functional.mse_loss(model(features.to(device)).squeeze(-1), targets.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            run.log(loss=loss)  # runtime
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
