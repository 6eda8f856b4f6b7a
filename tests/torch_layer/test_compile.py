"""torch.compile of CUDA-written code whose events and streams patchscope.torch redirects.

How Dynamo models them (torch 2.13): ``torch.cuda.Event`` and ``torch.cuda.Stream``
are "in-graph" classes, and a call of its device interface's ``Event`` becomes
an ``EventVariable`` tracked against the current accelerator stream; a
``torch.Stream`` (which HostStream is) becomes a ``StreamVariable``. A
``HostEvent`` is an ordinary object whose methods Dynamo inlines; its clock
is a custom operator, so recording does not break the graph.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")
dynamo = pytest.importorskip("torch._dynamo")
pytest.importorskip("torch._dynamo.device_interface")  # loaded before any scope starts
from torch._dynamo.utils import counters  # noqa: E402

import patchscope  # noqa: E402
from patchscope.torch import HostEvent, HostStream, device_events, device_namespace  # noqa: E402

pytestmark = pytest.mark.skipif(
    torch.cuda._is_compiled(), reason="needs a torch whose torch.cuda API cannot run"
)


@pytest.fixture(autouse=True)
def _fresh_dynamo(devices: Any) -> Any:
    """CPU is active; each test compiles from scratch and counts its own graph breaks."""
    devices.active("cpu")
    dynamo.reset()
    counters.clear()
    yield
    dynamo.reset()


def graph_breaks() -> int:
    return sum(counters["graph_break"].values())


@device_events()
class Timed(torch.nn.Module):
    """CUDA-written: events made in __init__, recorded around the forward."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.start.record()
        y = self.linear(x)
        self.end.record()
        return y


@pytest.mark.parametrize("inside", [False, True], ids=["outside the scope", "inside the scope"])
def test_recording_host_events_compiles_to_one_graph(inside: bool) -> None:
    """fullgraph=True: recording events made at construction breaks no graph, and times."""
    model, x = Timed(), torch.randn(2, 8)
    assert isinstance(model.start, HostEvent)
    expected = model(x)
    compiled = torch.compile(model, backend="eager", fullgraph=True)
    if inside:
        with device_namespace():
            got = compiled(x)
    else:
        got = compiled(x)
    assert torch.equal(got, expected) and graph_breaks() == 0
    model.end.synchronize()
    assert model.start.elapsed_time(model.end) >= 0.0


def _created_inside(x: torch.Tensor) -> torch.Tensor:
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record(torch.cuda.current_stream())
    y = x * 2
    end.record()
    end.synchronize()
    return y + float(start.query())


def _stream_inside(x: torch.Tensor) -> torch.Tensor:
    aux = torch.cuda.Stream()
    with torch.cuda.stream(aux):
        y = x + 1
    torch.cuda.current_stream().wait_stream(aux)
    return y


@pytest.mark.parametrize(
    ("fn", "breaks"),
    [(_created_inside, 2), (_stream_inside, 1)],
    ids=["two events created", "one stream created"],
)
def test_creating_events_and_streams_in_compiled_code_runs_as_eager(
    fn: Callable[[torch.Tensor], torch.Tensor], breaks: int
) -> None:
    """Created inside compiled code: eager's results, one graph break per creation."""
    x = torch.randn(4)
    with device_namespace():
        expected = fn(x)
        compiled = torch.compile(fn, backend="eager")
        assert torch.equal(compiled(x), expected)
        assert torch.equal(compiled(x), expected)  # and again, from the cache
    assert graph_breaks() == breaks
    assert patchscope.active() == ()


class HoldsStream(torch.nn.Module):
    """A module that keeps a host stream it enters in forward."""

    def __init__(self) -> None:
        super().__init__()
        with device_namespace():
            self.aux = torch.cuda.Stream()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with self.aux:
            return x + 1


def test_module_holding_a_host_stream_compiles_outside_the_scope() -> None:
    """Outside the scope, compiled code that enters a kept host stream behaves as eager."""
    model, x = HoldsStream(), torch.randn(3)
    assert isinstance(model.aux, HostStream)
    compiled = torch.compile(model, backend="eager", fullgraph=True)
    assert torch.equal(compiled(x), model(x)) and graph_breaks() == 0


@pytest.mark.slow
def test_inductor_on_cpu_records_host_events() -> None:
    """Inductor on CPU: the recorded forward is one graph and matches eager."""
    model, x = Timed(), torch.randn(2, 8)
    expected = model(x)
    got = torch.compile(model, backend="inductor", fullgraph=True)(x)
    assert torch.allclose(got, expected, atol=1e-6) and graph_breaks() == 0
    model.end.synchronize()
    assert model.start.elapsed_time(model.end) >= 0.0
    with device_namespace():
        compiled = torch.compile(_created_inside, backend="inductor")
        assert torch.equal(compiled(x), _created_inside(x))
