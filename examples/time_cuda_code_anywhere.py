"""Time code written with CUDA events on a machine without CUDA.

``time_matmul`` is ordinary CUDA timing code: ``torch.cuda.Event(enable_timing=True)``,
``record()``, ``torch.cuda.synchronize()``, ``elapsed_time()``. Under
``device_namespace()`` it runs unchanged on the active device; on a CPU-only
machine the events are HostEvents, which time the work between the two
records with a monotonic high-resolution clock.

    python examples/time_cuda_code_anywhere.py
"""

from __future__ import annotations

import torch

from patchscope.torch import active_device_type, device_namespace


def time_matmul(a: torch.Tensor, b: torch.Tensor, iterations: int = 20) -> float:
    """Return the mean milliseconds of ``a @ b`` (CUDA-written, unmodified)."""
    a @ b  # warm up
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iterations):
        a @ b
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iterations


def main() -> None:
    device = active_device_type()
    print(f"active device: {device}")
    with device_namespace():
        for size in (64, 256, 512):
            a = torch.randn(size, size, device=device)
            b = torch.randn(size, size, device=device)
            ms = time_matmul(a, b)
            gflops = 2 * size**3 / (ms * 1e-3) / 1e9
            print(f"{size:4d} x {size:<4d} matmul: {ms:8.4f} ms  ({gflops:6.1f} GFLOP/s)")


if __name__ == "__main__":
    main()
