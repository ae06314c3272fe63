"""examples/ddp_minimal.py as a Kubeflow-style training function: a `Function` workload whose parameter `run` the
launcher fills with kubetrain_runtime.Run, configured by the job (its checkpoint_dir). `apps/dev.py` runs it as
`dev/ddp-function` (`kubetrain run-local dev/ddp-function`).
"""


def train_regression(steps: int = 20, width: int = 64, run=None):
    import os

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend)
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if backend == "nccl" else torch.device("cpu")
    torch.manual_seed(0)  # the same initial weights on every rank
    model = torch.nn.Sequential(torch.nn.Linear(16, width), torch.nn.ReLU(), torch.nn.Dropout(0.1),
                                torch.nn.Linear(width, 1))
    model = DistributedDataParallel(model.to(device))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10, gamma=0.7)

    inputs = torch.randn(1024, 16, generator=torch.Generator().manual_seed(1))
    dataset = TensorDataset(inputs, inputs @ (torch.arange(16, dtype=torch.float32) / 16))
    loader = DataLoader(dataset, batch_size=32, sampler=DistributedSampler(dataset, seed=0))

    run = run(model, optimizer, scheduler=scheduler, max_steps=steps)  # the job's checkpoints, resume, stop
    for epoch in run.epochs():
        loader.sampler.set_epoch(epoch)
        for features, targets in run.batches(loader):
            features = features + 0.01 * torch.randn_like(features)
            loss = torch.nn.functional.mse_loss(model(features.to(device)).squeeze(-1), targets.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            run.log(loss=loss)
    dist.destroy_process_group()
