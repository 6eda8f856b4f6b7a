"""Run CUDA-written PyTorch code on the active device: XPU, MPS, NPU, or a CPU-only machine.

Importing this package imports torch.
"""

try:
    import torch  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a subprocess
    raise ImportError(
        "patchscope.torch needs PyTorch; install it with: pip install 'patchscope[torch]'"
    ) from exc

from ._detect import active_device_type

__all__ = ["active_device_type"]
