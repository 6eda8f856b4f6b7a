"""Events and streams for work the host runs itself: CPU-only machines, and MPS's streams.

CPU work is synchronous: when ``record()`` returns, everything issued before
it has finished. So an event is just the moment it was recorded, a stream is
a label, and waiting is already done. Timing uses ``time.perf_counter_ns()``,
a monotonic high-resolution clock, like Inductor's ``CpuInterface.Event``.

Device-generic CPU objects (``torch.Stream("cpu")``, ``torch.Event("cpu")``)
stand for the same host work, so host events and streams accept them wherever
``torch.cuda``'s versions accept a CUDA stream or event: half-migrated code
mixes both.
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import torch

# The classes themselves: torch's names may be redirected while this code runs.
_TorchStream = torch.Stream
_TorchEvent = torch.Event
# torch.Stream's numeric device type for the host (c10::DeviceType::CPU).
_CPU = 0
# Stream ids: 0 is the default stream, the one torch.Stream("cpu") also names.
_stream_ids = itertools.count(1)


def _host_clock_ns() -> torch.Tensor:
    """``time.perf_counter_ns()`` as a 0-d int64 tensor: what compiled code records."""
    return torch.tensor(time.perf_counter_ns(), dtype=torch.int64)


def _define_clock_op() -> tuple[Any, Any]:
    """The clock as a custom operator with a side effect, so compiled graphs keep it in place.

    Returns (is_compiling, clock); on a torch without custom operators
    (before 2.4) nothing is compiled through this path.
    """
    custom_op = getattr(getattr(torch, "library", None), "custom_op", None)
    is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    if custom_op is None or is_compiling is None:
        return (lambda: False), _host_clock_ns
    op = custom_op("patchscope::host_clock_ns", mutates_args=())(_host_clock_ns)
    op.register_fake(lambda: torch.empty((), dtype=torch.int64))
    torch.fx.node.has_side_effect(torch.ops.patchscope.host_clock_ns.default)
    return is_compiling, op


_compiling, _clock_op = _define_clock_op()


class HostEvent:
    """``torch.cuda.Event`` for work the host runs synchronously.

    Takes ``torch.cuda.Event``'s constructor: ``enable_timing``, ``blocking``,
    ``interprocess`` and ``external``. ``blocking`` and ``external`` change
    nothing here (waiting is already done, and there are no graphs to
    capture); ``interprocess=True`` is accepted, but :meth:`ipc_handle`
    raises, since a host event cannot be shared with another process.

    It speaks ``torch.Event``'s protocol: ``record``, ``wait``, ``query``,
    ``synchronize``, ``elapsed_time``, ``ipc_handle``, ``device`` and
    ``event_id``. ``record()`` and ``wait()`` take a :class:`HostStream`, a
    device-generic ``torch.Stream("cpu")`` or None. :meth:`elapsed_time`
    returns the milliseconds between two records and raises the same errors
    as ``torch.cuda.Event``, in the same order.

    Thread safety: an event may be recorded, queried and timed from several
    threads; each record is one atomic store, and the latest one wins, as on
    CUDA.
    """

    __slots__ = ("_blocking", "_enable_timing", "_external", "_interprocess", "_recorded_ns")

    def __init__(
        self,
        enable_timing: bool = False,
        blocking: bool = False,
        interprocess: bool = False,
        external: bool = False,
    ) -> None:
        self._enable_timing = bool(enable_timing)
        self._blocking = bool(blocking)
        self._interprocess = bool(interprocess)
        self._external = bool(external)
        self._recorded_ns: int | torch.Tensor | None = None

    @property
    def device(self) -> torch.device:
        """``torch.device("cpu")``: host events belong to the host."""
        return torch.device("cpu")

    @property
    def event_id(self) -> int:
        """0: a host event has no native handle (``torch.Event("cpu").event_id`` is 0 too)."""
        return 0

    def record(self, stream: torch.Stream | None = None) -> None:
        """Mark this moment; all host work issued before it has finished."""
        _check_stream(stream, "HostEvent.record")
        if _compiling():
            # Read the clock at run time, in graph order: a call to the
            # clock itself would break the graph (Dynamo cannot trace it).
            self._recorded_ns = _clock_op()
        else:
            self._recorded_ns = time.perf_counter_ns()

    def wait(self, stream: torch.Stream | None = None) -> None:
        """Make later work on ``stream`` wait for this event: already true on the host."""
        _check_stream(stream, "HostEvent.wait")

    def query(self) -> bool:
        """Return True: the work an event captures has finished once ``record()`` returned."""
        return True

    def synchronize(self) -> None:
        """Wait for the work this event captures: already finished on the host."""

    def elapsed_time(self, end_event: HostEvent) -> float:
        """Return the milliseconds from this event's record to ``end_event``'s."""
        if not isinstance(end_event, HostEvent):
            raise TypeError(
                f"elapsed_time() needs another HostEvent, not {type(end_event).__name__!r}"
            )
        # Same checks, messages and order as torch.cuda.Event in torch 2.13.
        if not (self._enable_timing and end_event._enable_timing):
            raise ValueError("Both events must be created with argument 'enable_timing=True'.")
        start_ns, end_ns = self._recorded_ns, end_event._recorded_ns
        if start_ns is None or end_ns is None:
            raise ValueError("Both events must be recorded before calculating elapsed time.")
        # int(): a record made in compiled code holds the clock as a 0-d tensor.
        return int(end_ns - start_ns) / 1e6

    def ipc_handle(self) -> bytes:
        """Raise: a host event lives in this process only."""
        raise RuntimeError(
            "host events cannot be shared between processes: HostEvent.ipc_handle() has "
            "no handle to give (interprocess=True is accepted only so that CUDA code "
            "constructs)"
        )

    def __repr__(self) -> str:
        state = "recorded" if self._recorded_ns is not None else "not recorded"
        return f"<patchscope.torch.HostEvent enable_timing={self._enable_timing} {state}>"


class HostStream(_TorchStream):
    """``torch.cuda.Stream`` for work the host runs synchronously: a ``torch.Stream`` of the CPU.

    Takes ``torch.cuda.Stream``'s ``device`` and ``priority`` and ignores the
    device. All its waits are already satisfied, so ``query()`` is always
    True and ``synchronize()`` returns at once.

    It is a ``torch.Stream`` (device ``cpu``, index -1, a ``stream_id`` of its
    own), so ``stream_id``, ``device_index``, ``device_type``, ``==`` and
    ``hash`` are torch's own: the default host stream has id 0 and equals
    ``torch.Stream("cpu")``. ``with stream:`` makes it this thread's current
    stream, as ``torch.cuda.stream(stream)`` does; ``is_capturing()`` is False
    (the host has no graphs). ``wait_event``, ``wait_stream`` and
    ``record_event`` also take device-generic CPU events and streams.

    Thread safety: a stream holds no mutable state and may be used from any
    thread; which stream is *current* is per thread, as on CUDA.
    """

    __slots__ = ("priority",)

    def __new__(
        cls, device: torch.device | str | int | None = None, priority: int = 0
    ) -> HostStream:
        return _new_stream(cls, next(_stream_ids))

    def __init__(self, device: torch.device | str | int | None = None, priority: int = 0) -> None:
        self.priority = priority

    def query(self) -> bool:
        """Return True: all work submitted to a host stream has finished."""
        return True

    def synchronize(self) -> None:
        """Wait for all work on this stream: already finished on the host."""

    def is_capturing(self) -> bool:
        """Return False: the host captures no graphs."""
        return False

    def wait_event(self, event: Any) -> None:
        """Make later work on this stream wait for ``event``: already true on the host."""
        _check_event(event, "HostStream.wait_event")
        if isinstance(event, HostEvent):
            event.wait(self)

    def wait_stream(self, stream: Any) -> None:
        """Make later work on this stream wait for the work already on ``stream``."""
        _check_stream(stream, "HostStream.wait_stream")

    def record_event(self, event: Any = None) -> Any:
        """Record ``event`` (a new :class:`HostEvent` when None) on this stream and return it."""
        if event is None:
            event = HostEvent()
        _check_event(event, "HostStream.record_event")
        if isinstance(event, HostEvent):
            event.record(self)
        return event

    def __enter__(self) -> HostStream:
        _push(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        _pop()

    def __repr__(self) -> str:
        return (
            f"<patchscope.torch.HostStream stream_id={self.stream_id} "
            f"priority={self.priority} at {id(self):#x}>"
        )


def _new_stream(cls: type[HostStream], stream_id: int) -> HostStream:
    stream: HostStream = _TorchStream.__new__(
        cls, stream_id=stream_id, device_index=-1, device_type=_CPU
    )
    return stream


def _is_host_stream(stream: object) -> bool:
    """A host stream, or a device-generic stream of the CPU."""
    if isinstance(stream, HostStream):
        return True
    if _compiling():
        # Dynamo models every stream as a torch.Stream and cannot read its
        # device while tracing; the eager run of the same code checks it.
        return isinstance(stream, _TorchStream)
    return isinstance(stream, _TorchStream) and stream.device.type == "cpu"


def _check_stream(stream: object, where: str) -> None:
    """Reject another device's stream, as CUDA rejects one that is not CUDA's."""
    if stream is not None and not _is_host_stream(stream):
        raise TypeError(
            f"{where}() takes a HostStream, a torch.Stream of the CPU or None, not {stream!r}"
        )


def _check_event(event: object, where: str) -> None:
    """Accept host events and device-generic CPU events."""
    if isinstance(event, HostEvent):
        return
    if isinstance(event, _TorchEvent) and event.device.type == "cpu":
        return
    raise TypeError(f"{where}() takes a HostEvent or a torch.Event of the CPU, not {event!r}")


_DEFAULT_STREAM = _new_stream(HostStream, 0)
_DEFAULT_STREAM.priority = 0
# The current stream is per thread, as CUDA's is; ``with stream:`` pushes.
_current = threading.local()


def _stack() -> list[torch.Stream]:
    stack: list[torch.Stream] | None = getattr(_current, "stack", None)
    if stack is None:
        stack = _current.stack = []
    return stack


def _push(stream: torch.Stream) -> None:
    _check_stream(stream, "torch.cuda.stream")
    _stack().append(current_stream())
    _current.stream = stream


def _pop() -> None:
    stack = _stack()
    if not stack:
        raise RuntimeError(
            "a host stream context was exited without being entered in this thread: "
            "enter torch.cuda.stream(...) or the stream with `with`, in the thread that exits it"
        )
    _current.stream = stack.pop()


def current_stream(device: torch.device | str | int | None = None) -> torch.Stream:
    """Return this thread's current host stream (``torch.cuda.current_stream``'s stand-in)."""
    stream: torch.Stream = getattr(_current, "stream", _DEFAULT_STREAM)
    return stream


def default_stream(device: torch.device | str | int | None = None) -> HostStream:
    """Return the process's default host stream (``torch.cuda.default_stream``'s stand-in)."""
    return _DEFAULT_STREAM


def set_stream(stream: torch.Stream | None) -> None:
    """Make ``stream`` this thread's current host stream; None changes nothing.

    ``torch.cuda.set_stream``'s stand-in; like it, it is not undone by itself
    (prefer ``with stream:``).
    """
    if stream is None:
        return
    _check_stream(stream, "torch.cuda.set_stream")
    _current.stream = stream


def is_current_stream_capturing() -> bool:
    """Return False: no graph is captured on the host (``torch.cuda``'s stand-in)."""
    return False


class HostStreamContext:
    """``torch.cuda.StreamContext`` for host streams: ``stream`` is current inside the block.

    None changes nothing, as in torch. Entering it twice nests: each exit
    restores the stream that was current at the matching entry.

    Thread safety: the current stream is per thread; one context object
    should be entered by one thread at a time, as torch's.
    """

    def __init__(self, stream: torch.Stream | None) -> None:
        if stream is not None:
            _check_stream(stream, "torch.cuda.StreamContext")
        self.stream = stream

    def __enter__(self) -> None:
        if self.stream is not None:
            _push(self.stream)

    def __exit__(self, *exc_info: object) -> None:
        if self.stream is not None:
            _pop()


def stream_context(stream: torch.Stream | None) -> HostStreamContext:
    """Make ``stream`` this thread's current host stream inside the block; None changes nothing."""
    return HostStreamContext(stream)


def synchronize(device: torch.device | str | int | None = None) -> None:
    """Wait for all host work: already finished (``torch.cuda.synchronize``'s stand-in)."""
