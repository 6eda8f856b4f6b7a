"""Events and streams for work the host runs itself: CPU-only machines, and MPS's streams.

CPU work is synchronous: when ``record()`` returns, everything issued before
it has finished. So an event is just the moment it was recorded, a stream is
a label, and waiting is already done. Timing uses ``time.perf_counter_ns()``,
a monotonic high-resolution clock, like Inductor's ``CpuInterface.Event``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch


class HostEvent:
    """``torch.cuda.Event`` for work the host runs synchronously.

    Takes ``torch.cuda.Event``'s constructor: ``enable_timing``, ``blocking``,
    ``interprocess`` and ``external``. ``blocking`` and ``external`` change
    nothing here (waiting is already done, and there are no graphs to
    capture); ``interprocess=True`` is accepted, but :meth:`ipc_handle`
    raises, since a host event cannot be shared with another process.

    :meth:`elapsed_time` returns the milliseconds between two records and
    raises the same errors as ``torch.cuda.Event``, in the same order.

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
        self._recorded_ns: int | None = None

    def record(self, stream: HostStream | None = None) -> None:
        """Mark this moment; all host work issued before it has finished."""
        _check_stream(stream, "HostEvent.record")
        self._recorded_ns = time.perf_counter_ns()

    def wait(self, stream: HostStream | None = None) -> None:
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
        return (end_ns - start_ns) / 1e6

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


class HostStream:
    """``torch.cuda.Stream`` for work the host runs synchronously.

    Takes ``torch.cuda.Stream``'s ``device`` and ``priority`` and ignores the
    device. All its waits are already satisfied, so ``query()`` is always
    True and ``synchronize()`` returns at once. Use it with the ``stream()``
    context manager that :func:`patchscope.torch.device_namespace` installs as
    ``torch.cuda.stream``.

    Thread safety: a stream holds no mutable state and may be used from any
    thread; which stream is *current* is per thread, as on CUDA.
    """

    __slots__ = ("priority",)

    def __init__(self, device: torch.device | str | int | None = None, priority: int = 0) -> None:
        self.priority = priority

    @property
    def device(self) -> torch.device:
        """``torch.device("cpu")``: host streams run on the host."""
        return torch.device("cpu")

    @property
    def device_type(self) -> str:
        """``"cpu"``."""
        return "cpu"

    def query(self) -> bool:
        """Return True: all work submitted to a host stream has finished."""
        return True

    def synchronize(self) -> None:
        """Wait for all work on this stream: already finished on the host."""

    def wait_event(self, event: Any) -> None:
        """Make later work on this stream wait for ``event``."""
        event.wait(self)

    def wait_stream(self, stream: Any) -> None:
        """Make later work on this stream wait for the work already on ``stream``."""
        self.wait_event(stream.record_event())

    def record_event(self, event: Any = None) -> Any:
        """Record ``event`` (a new :class:`HostEvent` when None) on this stream and return it."""
        if event is None:
            event = HostEvent()
        event.record(self)
        return event

    def __repr__(self) -> str:
        return f"<patchscope.torch.HostStream priority={self.priority} at {id(self):#x}>"


def _check_stream(stream: object, where: str) -> None:
    """Reject a stream that is not a host stream, as CUDA rejects another device's stream."""
    if stream is not None and not isinstance(stream, HostStream):
        raise TypeError(f"{where}() takes a HostStream or None, not {type(stream).__name__!r}")


_DEFAULT_STREAM = HostStream()
# The current stream is per thread, as CUDA's is.
_current = threading.local()


def current_stream(device: torch.device | str | int | None = None) -> HostStream:
    """Return this thread's current host stream (``torch.cuda.current_stream``'s stand-in)."""
    stream: HostStream = getattr(_current, "stream", _DEFAULT_STREAM)
    return stream


def default_stream(device: torch.device | str | int | None = None) -> HostStream:
    """Return the process's default host stream (``torch.cuda.default_stream``'s stand-in)."""
    return _DEFAULT_STREAM


@contextmanager
def stream_context(stream: HostStream | None) -> Iterator[None]:
    """Make ``stream`` this thread's current host stream inside the block; None changes nothing."""
    if stream is None:
        yield
        return
    _check_stream(stream, "torch.cuda.stream")
    previous = current_stream()
    _current.stream = stream
    try:
        yield
    finally:
        _current.stream = previous


def synchronize(device: torch.device | str | int | None = None) -> None:
    """Wait for all host work: already finished (``torch.cuda.synchronize``'s stand-in)."""
