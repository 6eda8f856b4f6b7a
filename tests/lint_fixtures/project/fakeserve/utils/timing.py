import time

import torch.cuda as tc
from torch.cuda import Event as CudaEvent


class Timer:
    """Wall-clock timer; uses CUDA events when it can (torch.cuda.Event)."""

    def __enter__(self) -> "Timer":
        self.start = CudaEvent(enable_timing=True)
        self.end = CudaEvent(enable_timing=True)
        self.stream = tc.current_stream()
        self.start.record(self.stream)
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.end.record(self.stream)
        tc.synchronize()
        self.elapsed = time.perf_counter() - self.t0


def overlapped(side_stream, fn):
    with tc.stream(side_stream):
        return fn()
