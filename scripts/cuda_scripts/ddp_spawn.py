"""Multi-GPU training in the shape of pytorch/examples' DDP tutorial (``multigpu.py``).

One process per GPU started with ``mp.spawn``, the world size from
``torch.cuda.device_count()``, NCCL, ``torch.cuda.set_device(rank)`` and the
model moved with ``.to(rank)``; the distributed names are imported at the top,
before anything runs. Written for CUDA and not changed.
"""

import os

import torch
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.distributed import all_reduce, destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def ddp_setup(rank: int, world_size: int) -> None:
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ.setdefault("MASTER_PORT", "12355")
    torch.cuda.set_device(rank)
    init_process_group(backend="nccl", rank=rank, world_size=world_size)


class Trainer:
    def __init__(self, model: torch.nn.Module, data: DataLoader, gpu_id: int) -> None:
        self.gpu_id = gpu_id
        self.model = DDP(model.to(gpu_id), device_ids=[gpu_id])
        self.data = data
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)

    def _run_epoch(self, epoch: int) -> float:
        self.data.sampler.set_epoch(epoch)
        total = torch.zeros((), device=self.gpu_id)
        for source, targets in self.data:
            source, targets = source.to(self.gpu_id), targets.to(self.gpu_id)
            self.optimizer.zero_grad()
            loss = F.mse_loss(self.model(source), targets)
            loss.backward()
            self.optimizer.step()
            total += loss.detach()
        return float(total) / len(self.data)

    def train(self, epochs: int) -> list[float]:
        return [self._run_epoch(epoch) for epoch in range(epochs)]


def main(rank: int, world_size: int, epochs: int) -> None:
    ddp_setup(rank, world_size)
    torch.manual_seed(0)
    inputs = torch.randn(256, 8)
    dataset = TensorDataset(inputs, inputs @ torch.arange(8.0).unsqueeze(1))
    data = DataLoader(dataset, batch_size=32, shuffle=False, sampler=DistributedSampler(dataset))
    trainer = Trainer(torch.nn.Linear(8, 1), data, rank)
    losses = trainer.train(epochs)
    # DDP averaged the gradients: every rank holds the same weights.
    weight = trainer.model.module.weight.detach()
    mean = weight.clone()
    all_reduce(mean)
    assert torch.allclose(mean / world_size, weight)
    if rank == 0:
        print(f"ranks {world_size} device {torch.cuda.current_device()} "
              f"loss {losses[0]:.3f} -> {losses[-1]:.3f}")
        assert losses[-1] < losses[0]
    destroy_process_group()


if __name__ == "__main__":
    world_size = torch.cuda.device_count()
    mp.spawn(main, args=(world_size, 5), nprocs=world_size)
