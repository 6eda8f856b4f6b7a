"""The platform interface every device implements."""

import enum


class PlatformEnum(enum.Enum):
    CUDA = "cuda"
    XPU = "xpu"


class Platform:
    """Device hooks.

    Implementations wrap calls such as ``torch.cuda.set_device(i)`` or
    ``torch.xpu.set_device(i)``; callers never use them directly.
    """

    device_type = "cuda"  # overridden per platform; not torch.cuda.device

    def set_device(self, index: int) -> None:
        raise NotImplementedError("torch.cuda.set_device or an equivalent")

    def synchronize(self) -> None:
        raise NotImplementedError
