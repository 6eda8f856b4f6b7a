"""XPU attention, patched the way the design document describes."""

import torch

from .interface import Platform


class XPUAttention:
    def __init__(self, *args, **kwargs):
        # The layer builds torch.cuda.Event() objects internally; swap in the
        # XPU class while it does.
        orig = torch.cuda.Event
        torch.cuda.Event = torch.xpu.Event
        try:
            super().__init__(*args, **kwargs)
        finally:
            torch.cuda.Event = orig


class XPUPlatform(Platform):
    def set_device(self, index: int) -> None:
        torch.xpu.set_device(index)
