"""The DDP variant: a CUDA-written two-rank job (nccl, device_ids) on gloo, on this machine.

``ddp_rank`` is written for a CUDA cluster, in nanoGPT's style:
``init_process_group(backend="nccl")``, ``device = f"cuda:{local_rank}"``,
``torch.cuda.set_device(device)``, ``DDP(model, device_ids=[local_rank])``.
``@transfer_to_device()`` runs it on the active device; on a CPU-only machine
the process group is gloo. Two ranks are spawned; each prints its losses,
which agree because DDP averages the gradients.

    python examples/train_ddp_cuda_script_anywhere.py
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import tempfile
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from patchscope.torch import transfer_to_device

WORLD_SIZE = 2
TIMEOUT_S = 60


@transfer_to_device()
def ddp_rank(rank: int, store: str, steps: int = 5) -> tuple[list[float], float]:
    """One rank of the CUDA-written job, unmodified; its mean losses and a weights checksum.

    Each rank trains on its own data, so the ranks' weights agree at the end
    only if DDP averaged their gradients.
    """
    dist.init_process_group(
        backend="nccl",
        init_method=f"file://{store}",
        rank=rank,
        world_size=WORLD_SIZE,
        timeout=timedelta(seconds=TIMEOUT_S),
    )
    try:
        local_rank = rank
        device = f"cuda:{local_rank}"
        torch.cuda.set_device(device)
        torch.manual_seed(1337)  # the same initial weights on every rank
        model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.GELU(), torch.nn.Linear(32, 1))
        model = DDP(model.to(device), device_ids=[local_rank])
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        torch.manual_seed(rank)  # each rank its own shard of data
        x = torch.randn(16, 8).pin_memory().to(device, non_blocking=True)
        y = x.sum(dim=1, keepdim=True)
        losses = []
        for _ in range(steps):
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            reduced = loss.detach().clone()
            dist.all_reduce(reduced)
            losses.append(reduced.item() / WORLD_SIZE)
        if rank == 0:
            print(f"backend {dist.get_backend()}, parameters on {next(model.parameters()).device}")
        checksum = sum(float(p.detach().double().sum()) for p in model.parameters())
        return losses, checksum
    finally:
        dist.destroy_process_group()


def _rank_main(rank: int, store: str, results: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    results.put((rank, ddp_rank(rank, store)))
    # Done and reported: leave without the interpreter's finalization, where
    # torch's gloo threads now and then abort the process (SIGABRT,
    # "terminate called without an active exception"), with or without
    # patchscope.
    results.close()
    results.join_thread()
    sys.stdout.flush()
    os._exit(0)


def main() -> None:
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        ranks = [
            context.Process(target=_rank_main, args=(rank, os.path.join(tmp, "store"), results))
            for rank in range(WORLD_SIZE)
        ]
        for process in ranks:
            process.start()
        try:
            reports = dict(results.get(timeout=TIMEOUT_S) for _ in ranks)
        finally:
            for process in ranks:
                process.join(timeout=TIMEOUT_S)
                if process.is_alive():  # a rank that hangs or died half-way
                    process.terminate()
                    process.join(timeout=TIMEOUT_S)
    for rank in sorted(reports):
        losses, checksum = reports[rank]
        print(
            f"rank {rank}: mean loss "
            + " -> ".join(f"{loss:.3f}" for loss in losses)
            + f", weights checksum {checksum:.6f}"
        )
    codes = [process.exitcode for process in ranks]
    print(f"exit codes: {codes}")
    if codes != [0] * WORLD_SIZE:
        sys.exit(1)


if __name__ == "__main__":
    main()
