"""device_events() and device_namespace(): torch.cuda's event and stream API on the active device.

Absent devices are faked as in conftest.py: the active device at
``torch._C._accelerator_getAccelerator`` and the device counts, XPU and MPS
construction at ``torch._C._XpuEventBase`` and ``torch._C._mps_*``.
"""

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from _threads import in_other_thread

torch = pytest.importorskip("torch")

import patchscope  # noqa: E402
from patchscope.torch import (  # noqa: E402
    HostEvent,
    HostStream,
    _host,
    device_event_class,
    device_events,
    device_namespace,
)

DUMMY = "Tried to instantiate dummy base class Event"
NAMESPACE = (
    "current_stream",
    "default_stream",
    "is_current_stream_capturing",
    "set_stream",
    "stream",
    "synchronize",
)

needs_no_cuda = pytest.mark.skipif(
    torch.cuda._is_compiled(), reason="needs a torch whose torch.cuda.Event cannot construct"
)


@pytest.fixture(autouse=True)
def _on_cpu(devices: Any) -> None:
    """Run every test here with "cpu" active unless it fakes another device."""
    devices.active("cpu")


class EventModel(torch.nn.Module):
    """CUDA-written: creates a torch.cuda.Event in __init__ and records what was active."""

    def __init__(self, width: int = 4) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(width, width)
        self.active_during_init = len(_on_cuda_event())
        self.event = torch.cuda.Event(enable_timing=True)


def _undecorated_event_fails() -> None:
    """Assert that a plain torch.cuda.Event() here still fails as torch makes it fail."""
    with pytest.raises(RuntimeError, match=DUMMY):
        torch.cuda.Event()


def _on_cuda_event() -> list[patchscope.Activation]:
    """The live activations on torch.cuda.Event (Dynamo's device interface may add others)."""
    return [act for act in patchscope.active() if act.target is torch.cuda.streams.Event]


@needs_no_cuda
def test_device_events_with_block() -> None:
    """Inside the block torch.cuda.Event builds a HostEvent; outside it fails as before."""
    original = vars(torch.cuda.Event).get("__new__")
    with device_events() as value:
        event = torch.cuda.Event(True)
        assert isinstance(event, HostEvent)
        assert len(_on_cuda_event()) == 1
    assert value is HostEvent
    assert patchscope.active() == ()
    assert vars(torch.cuda.Event).get("__new__") is original
    _undecorated_event_fails()


@needs_no_cuda
def test_device_events_reaches_aliases() -> None:
    """Names bound before the redirect (from-imports, Dynamo's device interface) are reached."""
    from torch._dynamo.device_interface import get_interface_for_device
    from torch.cuda import Event as ImportedEvent

    dynamo_event = get_interface_for_device("cuda").Event
    with device_events():
        for event_class in (torch.cuda.streams.Event, ImportedEvent, dynamo_event):
            assert isinstance(event_class(enable_timing=True), HostEvent)


@needs_no_cuda
def test_device_events_every_decorator_form() -> None:
    """Functions, generators, coroutines, async generators and start()/stop() all work."""
    redirect = device_events()

    @redirect
    def make() -> Any:
        return torch.cuda.Event()

    @redirect
    def make_many() -> Iterator[Any]:
        yield torch.cuda.Event()
        yield torch.cuda.Event()

    @redirect
    async def make_async() -> Any:
        await asyncio.sleep(0)
        return torch.cuda.Event()

    @redirect
    async def make_async_many() -> AsyncIterator[Any]:
        yield torch.cuda.Event()
        await asyncio.sleep(0)
        yield torch.cuda.Event()

    async def collect() -> list[Any]:
        return [event async for event in make_async_many()]

    assert isinstance(make(), HostEvent)
    assert all(isinstance(event, HostEvent) for event in make_many())
    assert isinstance(asyncio.run(make_async()), HostEvent)
    assert all(isinstance(event, HostEvent) for event in asyncio.run(collect()))
    handle = redirect.start()
    try:
        assert isinstance(torch.cuda.Event(), HostEvent)
    finally:
        handle.stop()
    _undecorated_event_fails()


@needs_no_cuda
def test_device_events_class_decorator_covers_init_only() -> None:
    """A decorated model class builds host events in __init__; nothing stays active afterwards."""
    model_class = device_events()(EventModel)
    assert model_class is EventModel
    model = EventModel()
    assert isinstance(model.event, HostEvent)
    assert model.active_during_init == 1
    assert patchscope.active() == ()
    _undecorated_event_fails()


def test_device_resolved_at_each_construction(
    devices: Any, xpu_constructions: list[dict[str, Any]]
) -> None:
    """A class decorated while CPU is active builds XPU events after the device changes to XPU."""

    @device_events()
    class Model(EventModel):
        pass

    assert isinstance(Model().event, HostEvent)
    devices.active("xpu")
    model = Model()
    assert type(model.event) is torch.xpu.Event
    assert xpu_constructions == [{"enable_timing": True}]
    devices.active("cpu")
    assert isinstance(Model().event, HostEvent)


@pytest.mark.parametrize("make", [device_events, device_namespace])
def test_nothing_installed_on_cuda(devices: Any, make: Any) -> None:
    """With CUDA active, device_events()/device_namespace() install nothing at all."""
    devices.compiled_with("cuda")
    devices.cuda_wheel_without_gpu()
    devices.active("cuda")
    redirect = make()
    with redirect:
        assert patchscope.active() == ()
        assert torch.cuda.Event is torch.cuda.streams.Event

    @redirect
    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.active_during_init = patchscope.active()
            self.event_class = device_event_class()

    model = Model()
    assert model.active_during_init == ()
    assert model.event_class is torch.cuda.Event


def test_explicit_device_is_checked_early() -> None:
    """An unknown device or scope is an error when the redirect is made, not when it is used."""
    with pytest.raises(ValueError, match="unknown device 'meta'"):
        device_events("meta")
    with pytest.raises(ValueError, match="unknown device 'meta'"):
        device_namespace("meta")
    with pytest.raises(ValueError, match="scope must be"):
        device_events(scope="thread")  # type: ignore[arg-type]


@needs_no_cuda
def test_context_scope_isolates_threads() -> None:
    """While one thread builds a model under device_events(), another's torch.cuda.Event() fails."""
    inside = threading.Event()
    checked = threading.Event()
    other_thread: list[BaseException | None] = []
    built: list[EventModel] = []

    def build() -> None:
        with device_events():
            inside.set()
            assert checked.wait(timeout=30)
            built.append(EventModel())

    def plain() -> None:
        assert inside.wait(timeout=30)
        try:
            torch.cuda.Event()
        except RuntimeError as exc:
            other_thread.append(exc)
        else:
            other_thread.append(None)
        finally:
            checked.set()

    threads = [threading.Thread(target=build), threading.Thread(target=plain)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)
    assert len(built) == 1 and isinstance(built[0].event, HostEvent)
    assert len(other_thread) == 1 and DUMMY in str(other_thread[0])


@needs_no_cuda
def test_process_scope_reaches_other_threads() -> None:
    """scope="process" makes the redirect visible to every thread while it is active."""
    seen: list[Any] = []
    with device_events(scope="process"):
        worker = threading.Thread(target=lambda: seen.append(torch.cuda.Event()))
        worker.start()
        worker.join(timeout=30)
    assert not worker.is_alive()
    assert len(seen) == 1 and isinstance(seen[0], HostEvent)
    _undecorated_event_fails()


@needs_no_cuda
def test_namespace_on_cpu_redirects_every_name() -> None:
    """On CPU, the classes build host objects and the functions are the host ones."""
    originals = {name: vars(torch.cuda)[name] for name in NAMESPACE}
    from torch.cuda import Stream as ImportedStream

    with device_namespace():
        assert isinstance(torch.cuda.Event(), HostEvent)
        aux = ImportedStream(priority=-1)
        assert isinstance(aux, HostStream)
        assert torch.cuda.current_stream() is torch.cuda.default_stream()
        with torch.cuda.stream(aux):
            assert torch.cuda.current_stream() is aux
        with torch.cuda.StreamContext(aux):
            assert torch.cuda.current_stream() is aux
        assert torch.cuda.synchronize() is None
        assert torch.cuda.is_current_stream_capturing() is False
        assert torch.cuda.stream is _host.stream_context
        torch.cuda.set_stream(aux)
        assert torch.cuda.current_stream() is aux
        torch.cuda.set_stream(torch.cuda.default_stream())
    assert {name: vars(torch.cuda)[name] for name in NAMESPACE} == originals
    for name, value in originals.items():
        assert getattr(torch.cuda, name) is value
    assert patchscope.active() == ()
    with pytest.raises(RuntimeError, match="requires CUDA support"):
        torch.cuda.Stream()


@needs_no_cuda
def test_namespace_runs_overlap_and_timing_code() -> None:
    """Unmodified CUDA overlap code (aux stream, record/wait, elapsed_time) runs on CPU."""

    def overlapped(x: torch.Tensor) -> tuple[torch.Tensor, float]:
        aux = torch.cuda.Stream()
        start = torch.cuda.Event(enable_timing=True)
        done = torch.cuda.Event(enable_timing=True)
        start.record()
        with torch.cuda.stream(aux):
            start.wait()
            y = x @ x
            done.record()
        torch.cuda.current_stream().wait_stream(aux)
        done.wait()
        torch.cuda.synchronize()
        return y, start.elapsed_time(done)

    x = torch.randn(64, 64)
    y, elapsed = device_namespace()(overlapped)(x)
    assert torch.equal(y, x @ x)
    assert elapsed >= 0.0


@needs_no_cuda
def test_during_device_events_stays_in_its_context() -> None:
    """during(Model, "__init__", device_events()): other threads construct the original."""

    class Model:
        def __init__(self) -> None:
            self.event = torch.cuda.Event()

    def build_elsewhere() -> str:
        try:
            return type(Model().event).__name__
        except RuntimeError as exc:
            return str(exc)

    with patchscope.during(Model, "__init__", device_events()):
        assert isinstance(Model().event, HostEvent)
        assert DUMMY in in_other_thread(build_elsewhere)
    assert "__init__" in vars(Model) and patchscope.active() == ()


@needs_no_cuda
def test_dynamo_device_interface_is_reached() -> None:
    """Dynamo's CudaInterface binds torch.cuda functions once; they are redirected there too."""
    from torch._dynamo.device_interface import CudaInterface, get_interface_for_device

    bound = {
        name: vars(CudaInterface)[name] for name in ("current_stream", "stream", "synchronize")
    }
    with device_namespace():
        interface = get_interface_for_device("cuda")
        assert interface.synchronize is _host.synchronize
        assert isinstance(interface.current_stream(), HostStream)
        aux = interface.Stream()
        with interface.stream(aux):
            assert interface.current_stream() is aux
        start, end = interface.Event(enable_timing=True), interface.Event(enable_timing=True)
        start.record()
        end.record()
        interface.synchronize()
        assert start.elapsed_time(end) >= 0.0
        elsewhere = in_other_thread(lambda: CudaInterface.synchronize)
        assert elsewhere is bound["synchronize"].__func__
    assert {name: vars(CudaInterface)[name] for name in bound} == bound


@needs_no_cuda
def test_namespace_streams_are_torch_streams() -> None:
    """Streams speak torch.Stream's protocol: ``with``, ids, capture state, equality."""
    with device_namespace():
        aux = torch.cuda.Stream()
        with aux:  # vLLM's offloader enters its stream this way
            assert torch.cuda.current_stream() == aux
            assert torch.cuda.current_stream().stream_id == aux.stream_id
        assert torch.cuda.current_stream() == torch.cuda.default_stream()
        assert not aux.is_capturing() and aux.device_index == -1
        assert {aux: "aux"}[aux] == "aux"
        assert aux != torch.cuda.default_stream()


@needs_no_cuda
def test_namespace_accepts_device_generic_cpu_streams() -> None:
    """Half-migrated code hands torch.Stream()/torch.Event() of the CPU to the CUDA API."""
    with device_namespace():
        torch.cuda.default_stream().wait_stream(torch.Stream())
        torch.cuda.Event().record(torch.Stream("cpu"))
        torch.cuda.current_stream().wait_event(torch.Event())
        generic = torch.Stream("cpu")
        with torch.cuda.stream(generic):
            assert torch.cuda.current_stream() is generic
        assert torch.cuda.current_stream() is torch.cuda.default_stream()


def test_namespace_on_mps_uses_host_streams(
    devices: Any, mps_calls: list[tuple[str, tuple[Any, ...]]]
) -> None:
    """MPS has no streams: host streams stand in, events are MPS events, synchronize is MPS's."""
    devices.active("mps")
    with device_namespace():
        event = torch.cuda.Event(enable_timing=True)
        assert isinstance(event, torch.mps.Event)
        aux = torch.cuda.Stream()
        assert isinstance(aux, HostStream)
        with torch.cuda.stream(aux):
            event.record()
            event.record(torch.cuda.current_stream())
        torch.cuda.synchronize(0)
    assert ("record", (1,)) in mps_calls
    assert mps_calls[-1] == ("synchronize", ())


def test_namespace_on_xpu_uses_xpu_streams(devices: Any) -> None:
    """XPU has streams: torch.xpu's functions stand in; its missing default_stream says so."""
    devices.active("xpu")
    with device_namespace():
        assert torch.cuda.current_stream is torch.xpu.current_stream
        assert torch.cuda.stream is torch.xpu.stream
        assert torch.cuda.synchronize is torch.xpu.synchronize
        with pytest.raises(NotImplementedError, match=r"torch\.xpu has no default_stream"):
            torch.cuda.default_stream()


# --- torch's own CUDA-timing code, unchanged ----------------------------------------


@needs_no_cuda
def test_torch_runtime_estimator_benchmark_runs_on_cpu() -> None:
    """torch.distributed._tools' RuntimeEstimator times an aten op with CUDA events, here on CPU."""
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
    from torch.distributed._tools.runtime_estimator import RuntimeEstimator

    a, b = torch.randn(32, 32), torch.randn(32, 32)
    estimator = RuntimeEstimator
    previous = vars(estimator).get("fake_mode")
    estimator.fake_mode = FakeTensorMode()
    try:
        with device_namespace():
            result, mean_ms = estimator._maybe_run_and_benchmark_fallback_kernel(
                torch.ops.aten.mm.default, (a, b), {}, NotImplementedError
            )
    finally:
        estimator.fake_mode = previous
    assert isinstance(result, FakeTensor) and result.shape == (32, 32)
    assert isinstance(mean_ms, float) and mean_ms >= 0.0


@needs_no_cuda
def test_torch_jit_trace_timer_runs_on_cpu(capsys: pytest.CaptureFixture[str]) -> None:
    """torch.jit._trace._time times a block with CUDA events and a stream, here on CPU.

    It first asks torch.cuda.is_available(), which device_namespace leaves
    alone, so that one name is redirected next to it.
    """
    from torch.jit._trace import _time

    answer_yes = patchscope.redirect_attr(torch.cuda, "is_available", lambda: True, scope="context")
    with device_namespace(), answer_yes:
        with _time("trace", "block"):
            torch.randn(64, 64) @ torch.randn(64, 64)
    printed = capsys.readouterr().out
    assert printed.startswith("trace block time: ")
    assert float(printed.split(": ")[1].split()[0]) >= 0.0
