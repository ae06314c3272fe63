"""The Kubeflow Trainer guide's training function (kubeflow.org, Trainer "Getting Started": `train_pytorch`), as a
kubetrain `Function` workload: a CNN on Fashion-MNIST with DDP, one call per rank under torchrun.

The function is the guide's, step for step ([1]-[5]); kubetrain captures its source at synth. Two changes make it a
function kubetrain can capture and a test can run offline: its settings are parameters (kubetrain passes `kwargs`
as JSON), and `synthetic` replaces the download with random images of Fashion-MNIST's shape (torchvision is then
not needed). `apps/dev.py` runs it on random images (`kubetrain run-local dev/fashion-mnist`).
"""


def train_fashion_mnist(epochs: int = 3, batch_size: int = 100, lr: float = 0.1, data_dir: str = "./data",
                        synthetic: int = 0):
    import os

    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch import nn
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

    # [1] Configure CPU/GPU device and distributed backend (torchrun sets the distributed environment).
    device, backend = ("cuda", "nccl") if torch.cuda.is_available() else ("cpu", "gloo")
    dist.init_process_group(backend=backend)

    local_rank = int(os.getenv("LOCAL_RANK", 0))
    print(f"Distributed Training with WORLD_SIZE: {dist.get_world_size()}, RANK: {dist.get_rank()}, "
          f"LOCAL_RANK: {local_rank}.")

    # [2] Define PyTorch CNN Model to be trained.
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 20, 5, 1)
            self.conv2 = nn.Conv2d(20, 50, 5, 1)
            self.fc1 = nn.Linear(4 * 4 * 50, 500)
            self.fc2 = nn.Linear(500, 10)

        def forward(self, x):
            x = F.relu(self.conv1(x))
            x = F.max_pool2d(x, 2, 2)
            x = F.relu(self.conv2(x))
            x = F.max_pool2d(x, 2, 2)
            x = x.view(-1, 4 * 4 * 50)
            x = F.relu(self.fc1(x))
            x = self.fc2(x)
            return F.log_softmax(x, dim=1)

    # [3] Attach model to the correct device.
    device = torch.device(f"{device}:{local_rank}")
    model = nn.parallel.DistributedDataParallel(Net().to(device))
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)

    # [4] Get the Fashion-MNIST dataset and distribute it across all available devices.
    if synthetic:
        generator = torch.Generator().manual_seed(0)
        dataset = TensorDataset(torch.rand(synthetic, 1, 28, 28, generator=generator),
                                torch.randint(0, 10, (synthetic,), generator=generator))
    else:
        from torchvision import datasets, transforms

        dataset = datasets.FashionMNIST(data_dir, train=True, download=True,
                                        transform=transforms.Compose([transforms.ToTensor()]))
    train_loader = DataLoader(dataset, batch_size=batch_size, sampler=DistributedSampler(dataset))

    # [5] Define the training loop.
    for epoch in range(epochs):
        for batch_idx, (inputs, labels) in enumerate(train_loader):
            inputs, labels = inputs.to(device), labels.to(device)
            outputs = model(inputs)
            loss = F.nll_loss(outputs, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if batch_idx % 10 == 0 and dist.get_rank() == 0:
                print(f"Train Epoch: {epoch} [{batch_idx * len(inputs)}/{len(train_loader.dataset)} "
                      f"({100.0 * batch_idx / len(train_loader):.0f}%)]\tLoss: {loss.item():.6f}")

    # Wait for the training to complete and destroy the PyTorch distributed process group.
    dist.barrier()
    if dist.get_rank() == 0:
        print("Training is finished")
    dist.destroy_process_group()
