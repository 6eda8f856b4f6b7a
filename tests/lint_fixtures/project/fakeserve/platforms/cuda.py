"""CUDA platform: allowed to use torch.cuda (see pyproject.toml)."""

import torch

from .interface import Platform


class CudaPlatform(Platform):
    def set_device(self, index: int) -> None:
        torch.cuda.set_device(index)

    def synchronize(self) -> None:
        torch.cuda.synchronize()

    def event(self) -> torch.cuda.Event:
        return torch.cuda.Event(enable_timing=True)
