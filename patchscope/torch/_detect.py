"""Which device is active, and which device names patchscope.torch understands.

Detection does not poison a later ``fork``: it asks torch which accelerator
it was compiled with, then confirms that one is present with
``device_count()``, which on CUDA asks NVML before it would initialise the
driver (``torch.cuda.is_available()`` initialises it unless
``PYTORCH_NVML_BASED_CUDA_CHECK=1``; ``torch._C._get_accelerator()`` on
torch 2.4-2.5 poisons fork too, so neither is used). The one exception is
torch's own: a CUDA build on a machine without NVML (no NVIDIA driver), where
``device_count()`` asks the CUDA runtime instead, and that marks a later
fork as bad. Counting 0 without NVML would also answer "cpu" on a GPU whose
container lacks NVML, so torch's answer is kept.
"""

from __future__ import annotations

import torch

# The probe order of torch releases without ``torch.accelerator`` (2.4-2.5).
# The privateuse1 backend (e.g. Ascend's "npu") is probed after these.
_PROBE_ORDER = ("cuda", "xpu", "mps", "mtia")

# What torch._C._get_privateuse1_backend_name() returns when no out-of-tree
# backend renamed it (the spelling changed between releases).
_UNRENAMED_PRIVATEUSE1 = frozenset({"privateuse1", "privateuseone"})


def active_device_type() -> str:
    """Return the type of the device this process runs on: ``"cuda"``, ``"xpu"``, ``"mps"``, ...

    The answer is ``"cpu"`` when torch has no accelerator, and also when it was
    compiled with one that is not present at run time (a CUDA wheel on a
    machine without a GPU). Calling it does not poison ``fork``: a child
    forked afterwards can still use torch, and the accelerator too (except
    with a CUDA build on a machine without NVML, where torch's own
    ``device_count()`` marks the fork as bad; see this module).

    Thread safety: safe to call from any thread; it keeps no state, so each
    call asks torch again.
    """
    try:
        compiled = _compiled_accelerator()
    except _NoAcceleratorApi:
        return _probe()
    if compiled is None:
        return "cpu"
    return compiled if _present(compiled) else "cpu"


class _NoAcceleratorApi(Exception):
    """This torch release cannot say which accelerator it was built with."""


def _compiled_accelerator() -> str | None:
    """Return the accelerator torch was compiled with, or None, without touching a driver."""
    accelerator = getattr(torch, "accelerator", None)
    current = getattr(accelerator, "current_accelerator", None)
    if current is None:  # torch 2.4-2.5
        raise _NoAcceleratorApi
    try:
        device = current(check_available=False)
    except (TypeError, RuntimeError) as exc:
        # torch 2.6 takes no argument and raises when there is no accelerator.
        raise _NoAcceleratorApi from exc
    return None if device is None else str(device.type)


def _probe() -> str:
    """Return the first present device in torch's own order, or ``"cpu"``."""
    candidates = [*_PROBE_ORDER]
    privateuse1 = _privateuse1_name()
    if privateuse1 is not None:
        candidates.append(privateuse1)
    for device_type in candidates:
        if _present(device_type):
            return device_type
    return "cpu"


def _present(device_type: str) -> bool:
    """Return whether a device of this type is usable now, asking fork-safe queries only."""
    if device_type == "mps":
        return bool(torch.backends.mps.is_available())
    module = getattr(torch, device_type, None)
    device_count = getattr(module, "device_count", None)
    if device_count is None:
        return False
    try:
        return int(device_count()) > 0
    except RuntimeError:
        # A broken driver is an absent device; torch.cuda.device_count()
        # itself answers 0 in that case, some out-of-tree backends raise.
        return False


def _privateuse1_name() -> str | None:
    """Return the name an out-of-tree backend gave privateuse1 ("npu", ...), or None."""
    name = str(torch._C._get_privateuse1_backend_name())
    return None if name in _UNRENAMED_PRIVATEUSE1 else name


def known_device_types() -> tuple[str, ...]:
    """Return the device types :func:`device_type_of` accepts, sorted."""
    known = {"cpu", "cuda"}
    known.update(name for name in _PROBE_ORDER if getattr(torch, name, None) is not None)
    privateuse1 = _privateuse1_name()
    if privateuse1 is not None:
        known.add(privateuse1)
    return tuple(sorted(known))


def device_type_of(device: str | torch.device | None) -> str:
    """Return the device type named by ``device`` (the active one for None).

    Accepts ``torch.device`` objects and strings with an index (``"xpu:1"``);
    raises ValueError listing the known types for anything else.
    """
    if device is None:
        return active_device_type()
    if not isinstance(device, (str, torch.device)):
        raise TypeError(
            f"device must be a str, a torch.device or None, not {type(device).__name__!r}"
        )
    if isinstance(device, torch.device):
        device_type = device.type
    else:
        # Parsed by hand so that every malformed or unknown name gets the
        # same error, the one that lists what is known.
        device_type, colon, index = device.partition(":")
        if colon and not index.isdigit():
            device_type = ""
    known = known_device_types()
    if device_type not in known:
        raise ValueError(
            f"unknown device {str(device)!r}: patchscope.torch knows "
            + ", ".join(repr(name) for name in known)
        )
    return device_type
