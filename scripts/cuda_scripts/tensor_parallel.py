"""Tensor parallelism in the shape of pytorch/examples' ``tensor_parallel_example.py``.

A two-layer MLP split over a 1-D ``init_device_mesh("cuda", ...)`` with
``ColwiseParallel``/``RowwiseParallel``, trained a few steps, one process per
GPU started with ``mp.spawn``; it needs two GPUs and says so otherwise. Rank 0
checks that the sharded model trains exactly as the same model on one device.
Written for CUDA and not changed.
"""

import os
import sys

import torch
import torch.multiprocessing as mp
from torch import nn
from torch.distributed import destroy_process_group
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    parallelize_module,
)

TP_SIZE = 2
STEPS = 3


class ToyModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.in_proj = nn.Linear(10, 32)
        self.relu = nn.ReLU()
        self.out_proj = nn.Linear(32, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out_proj(self.relu(self.in_proj(x)))


def train(model: nn.Module, device: str) -> list[float]:
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01, foreach=True)
    losses = []
    for step in range(STEPS):
        torch.manual_seed(step)  # every rank sees the same batch
        inp = torch.rand(20, 10, device=device)
        loss = (model(inp) - 1).square().mean()
        losses.append(loss.item())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return losses


def main(rank: int, world_size: int) -> None:
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ.setdefault("MASTER_PORT", "12356")
    os.environ["RANK"], os.environ["WORLD_SIZE"] = str(rank), str(world_size)
    torch.cuda.set_device(rank)
    device_mesh = init_device_mesh(device_type="cuda", mesh_shape=(world_size,))

    torch.manual_seed(0)
    tp_model = ToyModel().to("cuda")
    torch.manual_seed(0)
    reference = ToyModel().to("cuda")
    tp_model = parallelize_module(
        module=tp_model,
        device_mesh=device_mesh,
        parallelize_plan={"in_proj": ColwiseParallel(), "out_proj": RowwiseParallel()},
    )
    sharded = train(tp_model, "cuda")
    single = train(reference, "cuda")
    if rank == 0:
        print(f"tp {world_size} losses {[round(x, 4) for x in sharded]}")
        assert torch.allclose(torch.tensor(sharded), torch.tensor(single), atol=1e-4), single
    destroy_process_group()


if __name__ == "__main__":
    if torch.cuda.device_count() < TP_SIZE:
        print(f"Requires at least {TP_SIZE} GPUs to run, but got {torch.cuda.device_count()}.")
        sys.exit(1)
    mp.spawn(main, args=(TP_SIZE,), nprocs=TP_SIZE, join=True)
