"""Fakes shared by the patchscope.torch tests.

Backends absent from a CPU-only build are exercised through their real
Python classes, with construction faked at the lowest level:

* XPU: ``torch.xpu.Event``'s base, ``torch._C._XpuEventBase``, is a dummy
  class on this build whose ``__new__``/``__init__`` raise. They are replaced
  by recorders, so torch's own ``torch.xpu.Event.__new__`` runs unchanged.
* MPS: ``torch.mps.Event`` is pure Python over ``torch._C._mps_*Event``
  functions; those are replaced by recorders.

Which device is active is faked at ``torch._C._accelerator_getAccelerator``
(what ``torch.accelerator.current_accelerator`` asks) and at the queries below
``torch.<backend>.device_count()``. torch is imported inside the fixtures so
that a machine without torch skips these tests instead of failing to collect.
"""

from __future__ import annotations

from itertools import count
from typing import Any

import pytest


class FakeDevices:
    """Fakes which device is active, undone with the test's monkeypatch."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self._monkeypatch = monkeypatch

    def compiled_with(self, device_type: str | None) -> None:
        """Make torch 2.7+'s compile-time query answer ``device_type`` (None: no accelerator)."""
        import torch

        device = None if device_type is None else torch.device(device_type)
        self._monkeypatch.setattr(torch._C, "_accelerator_getAccelerator", lambda: device)

    def xpu_present(self) -> None:
        """Fake an XPU build with one device, at the queries below torch.xpu.device_count()."""
        import torch

        self._monkeypatch.setattr(torch.xpu, "_is_compiled", lambda: True)
        if hasattr(torch.xpu, "_device_count_zes"):
            self._monkeypatch.setattr(torch.xpu, "_device_count_zes", lambda: 1)
        else:  # releases without it count in device_count() itself
            self._monkeypatch.setattr(torch.xpu, "device_count", lambda: 1)

    def cuda_wheel_without_gpu(self) -> None:
        """Fake a CUDA build on a machine with no GPU: NVML is missing and the driver counts 0."""
        import torch

        self._monkeypatch.setattr(torch.cuda, "_is_compiled", lambda: True)
        self._monkeypatch.setattr(torch.cuda, "_device_count_nvml", lambda: -1)
        self._monkeypatch.setattr(torch._C, "_cuda_getDeviceCount", lambda: 0, raising=False)

    def active(self, device_type: str | None) -> None:
        """Make ``device_type`` the active device (None or "cpu": no accelerator)."""
        import torch

        if device_type in (None, "cpu"):
            self.compiled_with(None)
            if not hasattr(torch.xpu, "_device_count_zes"):
                # Releases that probe each device (no compile-time query):
                # an XPU faked present earlier in the test is absent again.
                self._monkeypatch.setattr(torch.xpu, "device_count", lambda: 0)
            return
        self.compiled_with(device_type)
        if device_type == "xpu":
            self.xpu_present()
        elif device_type == "mps":
            self._monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
        else:
            module = getattr(torch, device_type)
            self._monkeypatch.setattr(module, "device_count", lambda: 1)


@pytest.fixture
def devices(monkeypatch: pytest.MonkeyPatch) -> FakeDevices:
    """Fake which device is active for this test."""
    return FakeDevices(monkeypatch)


@pytest.fixture
def xpu_constructions(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Let torch.xpu.Event construct here; return the keyword arguments its C base receives."""
    import torch

    base = torch.xpu.Event.__mro__[1]
    received: list[dict[str, Any]] = []

    def new(cls: type, *args: Any, **kwargs: Any) -> Any:
        assert args == ()
        received.append(kwargs)
        return object.__new__(cls)

    monkeypatch.setattr(base, "__new__", staticmethod(new))
    monkeypatch.setattr(base, "__init__", lambda self, *args, **kwargs: None)
    return received


@pytest.fixture
def mps_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[Any, ...]]]:
    """Let torch.mps.Event work here; return the torch._C._mps_* calls it makes."""
    import torch

    calls: list[tuple[str, tuple[Any, ...]]] = []
    ids = count(1)

    def acquire(enable_timing: bool) -> int:
        calls.append(("acquire", (enable_timing,)))
        return next(ids)

    def recorder(name: str, result: Any = None) -> Any:
        def call(*args: Any) -> Any:
            calls.append((name, args))
            return result

        return call

    for name, fake in [
        ("_mps_acquireEvent", acquire),
        ("_mps_releaseEvent", recorder("release")),
        ("_mps_recordEvent", recorder("record")),
        ("_mps_waitForEvent", recorder("wait")),
        ("_mps_elapsedTimeOfEvents", recorder("elapsed", 1.5)),
        ("_mps_deviceSynchronize", recorder("synchronize")),
    ]:
        monkeypatch.setattr(torch._C, name, fake, raising=False)
    return calls


@pytest.fixture(autouse=True)
def _a_fresh_threads_selection() -> Any:
    """Each test selects as a fresh thread would: logical device 0.

    ``torch.cuda.set_device`` in a scope on the CPU lasts as long as the
    thread, as on CUDA (tests/torch_layer/test_transfer.py checks that); the
    tests share one thread, and one test's selection must not decide
    another's answer.
    """
    import sys

    yield
    runtime = sys.modules.get("patchscope.torch._runtime")
    if runtime is not None:
        vars(runtime._selected).clear()
