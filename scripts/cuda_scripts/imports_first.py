"""A single-GPU script that imports torch's functions by name at the top, before anything runs.

``from torch.cuda import is_available, ...`` and ``from torch.distributed
import init_process_group`` bind torch's own functions to the script's names
when it is imported; ``main()`` then checks for a GPU, joins a one-rank NCCL
group, trains a step and reads the memory counters through those names.
Written for CUDA and not changed: the runner imports it first and calls
``main()`` inside the scope.
"""

import os

import torch
from torch.cuda import (
    current_device,
    device_count,
    get_device_name,
    is_available,
    manual_seed,
    max_memory_allocated,
    set_device,
    synchronize,
)
from torch.distributed import all_reduce, destroy_process_group, init_process_group


def main() -> None:
    assert is_available(), "this script needs a CUDA GPU"
    set_device(device_count() - 1)
    manual_seed(0)
    os.environ.setdefault("MASTER_ADDR", "localhost")
    os.environ.setdefault("MASTER_PORT", "12357")
    init_process_group("nccl", rank=0, world_size=1)
    model = torch.nn.Linear(16, 4).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model(torch.randn(8, 16, device="cuda")).square().mean()
    loss.backward()
    optimizer.step()
    total = loss.detach().clone()
    all_reduce(total)
    synchronize()
    print(f"on {get_device_name(current_device())}: loss {float(total):.4f}, "
          f"peak {max_memory_allocated()} bytes")
    destroy_process_group()


if __name__ == "__main__":
    main()
