"""Run CUDA-written PyTorch code on the active device: XPU, MPS, NPU, or a CPU-only machine.

``device_events()``, ``device_namespace()`` and ``transfer_to_device()`` are Redirects: use them as
``with`` blocks or as decorators (on a model class: active during its
``__init__``). ``HostEvent`` and ``HostStream`` give ``torch.cuda``'s event and
stream API on the CPU. Importing this package imports torch.
"""

try:
    import torch  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a subprocess
    raise ImportError(
        "patchscope.torch needs PyTorch; install it with: pip install 'patchscope[torch]'"
    ) from exc

from ._detect import active_device_type
from ._events import device_event_class
from ._host import HostEvent, HostStream
from ._namespace import device_events, device_namespace
from ._transfer import transfer_to_device

__all__ = [
    "HostEvent",
    "HostStream",
    "active_device_type",
    "device_event_class",
    "device_events",
    "device_namespace",
    "transfer_to_device",
]
