"""device_event_class(): each backend's event behind torch.cuda.Event's constructor.

XPU and MPS construction is faked at the lowest level (see conftest.py). Two
more backends are simulated here:

* MTIA, and backends without their own class: ``torch.Event`` is a builtin
  that refuses devices this build was not linked with; it is replaced by a
  Python class with its exact signature ``(device=None, *, enable_timing,
  blocking, interprocess)``.
* NPU (torch_npu, not installed): ``torch._C._get_privateuse1_backend_name``
  answers "npu" and ``torch.npu`` is a module whose ``Event`` has torch_npu's
  signature ``(enable_timing, blocking, interprocess)``.
"""

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from patchscope.torch import HostEvent, HostStream, device_event_class  # noqa: E402
from patchscope.torch._events import MpsEvent  # noqa: E402

# Every way CUDA code constructs an event, and what an XPU/MPS event receives.
CONSTRUCTOR_FORMS = [
    ((), {}, {"enable_timing": False}),
    ((True,), {}, {"enable_timing": True}),
    ((), {"enable_timing": True}, {"enable_timing": True}),
    ((), {"enable_timing": True, "blocking": True}, {"enable_timing": True}),
    ((False, True), {}, {"enable_timing": False}),
    ((), {"interprocess": False, "external": False}, {"enable_timing": False}),
]


class FakeTorchEvent:
    """Stands in for the builtin torch.Event, with its exact signature."""

    def __init__(
        self,
        device: Any = None,
        *,
        enable_timing: bool = False,
        blocking: bool = False,
        interprocess: bool = False,
    ) -> None:
        self.device = device
        self.flags = {
            "enable_timing": enable_timing,
            "blocking": blocking,
            "interprocess": interprocess,
        }


class FakeNpuEvent:
    """Stands in for torch_npu's torch.npu.Event, with its signature."""

    def __new__(
        cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
    ) -> "FakeNpuEvent":
        event = super().__new__(cls)
        event.flags = {  # type: ignore[attr-defined]
            "enable_timing": enable_timing,
            "blocking": blocking,
            "interprocess": interprocess,
        }
        return event


@pytest.fixture
def npu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Simulate torch_npu: privateuse1 renamed "npu" and a torch.npu module with an Event."""
    module = type(torch)("torch.npu")
    module.Event = FakeNpuEvent  # type: ignore[attr-defined]
    monkeypatch.setattr(torch, "npu", module, raising=False)
    monkeypatch.setattr(torch._C, "_get_privateuse1_backend_name", lambda: "npu")


@pytest.mark.parametrize("device", ["cuda", "cuda:1", torch.device("cuda", 0)])
def test_cuda_is_torch_cuda_event_itself(device: Any) -> None:
    """On CUDA the class is torch.cuda.Event, untouched."""
    assert device_event_class(device) is torch.cuda.Event


@pytest.mark.parametrize("device", ["cpu", torch.device("cpu")])
def test_cpu_is_host_event(device: Any) -> None:
    """On CPU the class is HostEvent."""
    assert device_event_class(device) is HostEvent


def test_active_device_by_default(devices: Any) -> None:
    """device=None resolves the active device at each call."""
    devices.active("cpu")
    assert device_event_class() is HostEvent
    devices.active("xpu")
    assert device_event_class() is device_event_class("xpu")


def test_unknown_device_is_a_clear_error() -> None:
    """ "meta" is not a device with events: ValueError listing the known ones."""
    with pytest.raises(ValueError, match=r"unknown device 'meta'.*'cpu', 'cuda'"):
        device_event_class("meta")


@pytest.mark.parametrize(("args", "kwargs", "received"), CONSTRUCTOR_FORMS)
def test_xpu_translates_cuda_arguments(
    xpu_constructions: list[dict[str, Any]],
    args: tuple[bool, ...],
    kwargs: dict[str, bool],
    received: dict[str, bool],
) -> None:
    """XPU events get enable_timing only; blocking, a scheduling hint, is dropped."""
    event = device_event_class("xpu")(*args, **kwargs)
    assert type(event) is torch.xpu.Event
    assert xpu_constructions == [received]


@pytest.mark.parametrize("flag", ["interprocess", "external"])
def test_xpu_rejects_flags_it_cannot_honour(
    xpu_constructions: list[dict[str, Any]], flag: str
) -> None:
    """interprocess=True and external=True on XPU raise ValueError naming backend and flag."""
    with pytest.raises(ValueError, match=f"'xpu' events do not support {flag}=True") as info:
        device_event_class("xpu")(**{flag: True})
    assert "torch.xpu.Event" in str(info.value)
    assert xpu_constructions == []


def test_without_faking_xpu_fails_as_torch_does() -> None:
    """Unfaked, the adapter surfaces torch's own error on a build without XPU."""
    if torch.xpu._is_compiled():
        pytest.skip("this torch was built with XPU")
    with pytest.raises(RuntimeError, match="Tried to instantiate dummy base class Event"):
        device_event_class("xpu")(enable_timing=True)


def test_adapter_is_shared_and_named() -> None:
    """One adapter class per backend, whatever the index; its name says what it builds."""
    xpu = device_event_class("xpu")
    assert xpu is device_event_class("xpu:1") is device_event_class(torch.device("xpu", 0))
    assert xpu.__name__ == "XpuEventAdapter"
    assert xpu.__module__ == "patchscope.torch._events"
    assert "torch.xpu.Event" in (xpu.__doc__ or "")


@pytest.mark.parametrize(("args", "kwargs", "received"), CONSTRUCTOR_FORMS)
def test_mps_translates_cuda_arguments(
    mps_calls: list[tuple[str, tuple[Any, ...]]],
    args: tuple[bool, ...],
    kwargs: dict[str, bool],
    received: dict[str, bool],
) -> None:
    """MPS events get enable_timing only and are torch.mps.Event instances."""
    event = device_event_class("mps")(*args, **kwargs)
    assert isinstance(event, torch.mps.Event)
    assert mps_calls == [("acquire", (received["enable_timing"],))]


@pytest.mark.parametrize("flag", ["interprocess", "external"])
def test_mps_rejects_flags_it_cannot_honour(
    mps_calls: list[tuple[str, tuple[Any, ...]]], flag: str
) -> None:
    """interprocess=True and external=True on MPS raise ValueError naming backend and flag."""
    with pytest.raises(ValueError, match=f"'mps' events do not support {flag}=True"):
        device_event_class("mps")(**{flag: True})


def test_mps_record_and_wait_accept_the_current_stream(
    mps_calls: list[tuple[str, tuple[Any, ...]]],
) -> None:
    """MPS's stream-less record()/wait() take None or a HostStream, as CUDA code passes them."""
    start = device_event_class("mps")(enable_timing=True)
    end = device_event_class("mps")(enable_timing=True)
    stream = HostStream()
    start.record()
    end.record(stream)
    end.wait(stream)
    start.wait()
    assert start.elapsed_time(end) == 1.5
    assert mps_calls[2:] == [
        ("record", (1,)),
        ("record", (2,)),
        ("wait", (2,)),
        ("wait", (1,)),
        ("elapsed", (1, 2)),
    ]


def test_mps_rejects_another_devices_stream(mps_calls: list[tuple[str, tuple[Any, ...]]]) -> None:
    """A stream of another device is a TypeError, not silently the MPS queue."""
    event = MpsEvent()
    with pytest.raises(TypeError, match=r"MpsEvent.record"):
        event.record(torch.Stream("cpu"))
    with pytest.raises(TypeError, match=r"MpsEvent.wait"):
        event.wait(object())
    assert ("record", (1,)) not in mps_calls


def test_mtia_uses_torch_event_with_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch.mtia.Event is torch.Event: the adapter passes the device type first, and all flags."""
    monkeypatch.setattr(torch, "Event", FakeTorchEvent)
    monkeypatch.setattr(torch.mtia, "Event", FakeTorchEvent)
    event = device_event_class("mtia:1")(True, blocking=True, interprocess=True)
    assert isinstance(event, FakeTorchEvent)
    assert event.device == "mtia"
    assert event.flags == {"enable_timing": True, "blocking": True, "interprocess": True}
    with pytest.raises(ValueError, match="'mtia' events do not support external=True"):
        device_event_class("mtia")(external=True)


def test_backend_without_its_own_class_uses_torch_event(monkeypatch: pytest.MonkeyPatch) -> None:
    """A renamed privateuse1 backend with no torch.<name>.Event gets torch.Event(device=...)."""
    monkeypatch.setattr(torch, "Event", FakeTorchEvent)
    monkeypatch.setattr(torch._C, "_get_privateuse1_backend_name", lambda: "npu")
    event = device_event_class("npu")(enable_timing=True)
    assert event.device == "npu"
    assert event.flags == {"enable_timing": True, "blocking": False, "interprocess": False}


@pytest.mark.usefixtures("npu")
def test_npu_module_event_keeps_the_flags_it_has() -> None:
    """torch.npu.Event takes blocking and interprocess: they are passed on; external is refused."""
    event_class = device_event_class("npu")
    event = event_class(True, True, True)
    assert isinstance(event, FakeNpuEvent)
    assert event.flags == {"enable_timing": True, "blocking": True, "interprocess": True}
    with pytest.raises(ValueError, match="'npu' events do not support external=True"):
        event_class(external=True)


@pytest.mark.parametrize("device", ["xpu", "mps", "mtia"])
def test_adapters_take_exactly_cuda_events_constructor(device: str) -> None:
    """Adapters refuse arguments torch.cuda.Event refuses, before touching the backend."""
    with pytest.raises(TypeError):
        device_event_class(device)(enable_timing=True, device="xpu")
    with pytest.raises(TypeError):
        device_event_class(device)(False, False, False, False, False)


def test_cuda_event_class_is_the_class_even_when_rebound() -> None:
    """device_event_class('cuda') is torch.cuda's own Event class, not a current rebinding."""
    import unittest.mock

    from patchscope.torch import device_event_class

    class Shim:
        pass

    real = torch.cuda.streams.Event
    with unittest.mock.patch.object(torch.cuda, "Event", Shim):
        assert device_event_class("cuda") is real


def test_host_stream_reports_its_device() -> None:
    """HostStream reports the CPU exactly as torch.Stream("cpu") does."""
    from patchscope.torch import HostStream

    stream, generic = HostStream(), torch.Stream("cpu")
    assert stream.device == generic.device == torch.device("cpu")
    assert (stream.device_type, stream.device_index) == (generic.device_type, generic.device_index)
