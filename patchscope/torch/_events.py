"""Each device's event class, behind ``torch.cuda.Event``'s constructor.

Backends disagree on what an event takes (torch 2.13):

* ``torch.cuda.Event(enable_timing, blocking, interprocess, external)``
* ``torch.xpu.Event(enable_timing)``, ``torch.mps.Event(enable_timing)``;
  MPS's ``record()``/``wait()`` take no stream
* ``torch.Event(device, *, enable_timing, blocking, interprocess)``; the
  class behind ``torch.mtia.Event`` and out-of-tree backends without their own

An adapter translates CUDA's arguments: ``enable_timing`` is passed on;
``blocking`` only schedules how ``synchronize()`` waits, so a backend that
cannot honour it ignores it; ``interprocess`` and ``external`` change what the
event *is*, so asking a backend without them is a ValueError.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, ClassVar

import torch

from ._detect import device_type_of
from ._host import HostEvent, HostStream, _TorchStream

_FLAGS = ("enable_timing", "blocking", "interprocess", "external")
# Flags a backend may drop: they change how a wait is scheduled, not its result.
_HINTS = frozenset({"blocking"})
# torch.Event is a builtin without a signature to inspect.
_TORCH_EVENT_FLAGS = frozenset({"enable_timing", "blocking", "interprocess"})


def device_event_class(device: str | torch.device | None = None) -> type:
    """Return the event class of ``device`` (the active device when None).

    The class takes ``torch.cuda.Event``'s constructor exactly
    (``enable_timing`` also positionally, ``blocking``, ``interprocess``,
    ``external``):

    * ``"cuda"``: ``torch.cuda.Event`` itself;
    * ``"cpu"``: :class:`HostEvent`;
    * ``"xpu"``, ``"mps"``, ``"mtia"``, an out-of-tree backend such as
      ``"npu"``: an adapter class. Calling it returns the backend's own event
      (an instance of ``torch.xpu.Event``, say), built from the translated
      arguments: ``blocking`` is ignored where the backend has no such option,
      ``interprocess=True`` or ``external=True`` raise ValueError there. On MPS
      the event's ``record()``/``wait()`` also take a stream, as CUDA's do.

    An index (``"xpu:1"``) is accepted and does not change the class: as on
    CUDA, an event belongs to the device of the stream it is first recorded
    on. An unknown device (``"meta"``) raises ValueError listing the known ones.

    Thread safety: safe to call from any thread; adapter classes are created
    once per backend and shared.
    """
    return event_class_of(device_type_of(device))


def event_class_of(device_type: str) -> type:
    """:func:`device_event_class` for a device type already checked by ``device_type_of``."""
    if device_type == "cuda":
        # The class itself, not whatever torch.cuda.Event is bound to now
        # (a shim, a mock): on CUDA nothing is redirected.
        return torch.cuda.streams.Event
    if device_type == "cpu":
        return HostEvent
    if device_type == "mps":
        return _adapter_class(device_type, MpsEvent)
    module_event = getattr(getattr(torch, device_type, None), "Event", None)
    # torch.mtia.Event is torch.Event; a backend with no class of its own gets it too.
    return _adapter_class(device_type, module_event or torch.Event)


class _EventAdapter:
    """Base of the adapter classes; calling one builds the backend's own event.

    It is a class (not a function) so that it can stand where
    ``torch.cuda.Event`` stands: subclass checks, ``device_event_class() is``
    comparisons, a readable ``repr``.
    """

    _device_type: ClassVar[str]
    _backend: ClassVar[type]
    _accepted: ClassVar[frozenset[str]]

    def __new__(
        cls,
        enable_timing: bool = False,
        blocking: bool = False,
        interprocess: bool = False,
        external: bool = False,
    ) -> Any:
        given = {
            "enable_timing": enable_timing,
            "blocking": blocking,
            "interprocess": interprocess,
            "external": external,
        }
        kwargs: dict[str, bool] = {}
        for flag, value in given.items():
            if flag in cls._accepted:
                kwargs[flag] = value
            elif value and flag not in _HINTS:
                raise ValueError(
                    f"{cls._device_type!r} events do not support {flag}=True: "
                    f"{_name(cls._backend)} takes no {flag!r} argument"
                )
        if cls._backend is torch.Event:
            # Only the type: like a CUDA event, it takes its device index from
            # the stream it is first recorded on.
            return cls._backend(cls._device_type, **kwargs)
        return cls._backend(**kwargs)


@functools.cache
def _adapter_class(device_type: str, backend: type) -> type[_EventAdapter]:
    """Return the (shared) adapter that builds ``backend`` events for ``device_type``."""
    name = f"{device_type.capitalize()}EventAdapter"
    accepted = _TORCH_EVENT_FLAGS if backend is torch.Event else _accepted_flags(backend)
    doc = (
        f"Takes torch.cuda.Event's arguments and returns a {_name(backend)} "
        f"for {device_type!r}; it accepts {', '.join(sorted(accepted))}."
    )
    namespace = {
        "__module__": __name__,
        "__qualname__": name,
        "__doc__": doc,
        "_device_type": device_type,
        "_backend": backend,
        "_accepted": accepted,
    }
    return type(name, (_EventAdapter,), namespace)


def _accepted_flags(backend: type) -> frozenset[str]:
    """Return which of CUDA's event arguments ``backend``'s constructor takes."""
    try:
        parameters = inspect.signature(backend).parameters.values()
    except (TypeError, ValueError):
        # A builtin without a signature: assume the one argument every event takes.
        return frozenset({"enable_timing"})
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return frozenset(_FLAGS)
    return frozenset(p.name for p in parameters) & frozenset(_FLAGS)


def _name(cls: type) -> str:
    """Return ``torch.xpu.Event``-style names for torch classes, qualified names otherwise."""
    module = cls.__module__
    if module.startswith("torch."):
        module = ".".join(module.split(".")[:2])  # torch.xpu.streams -> torch.xpu
    return f"{module}.{cls.__qualname__}"


class MpsEvent(torch.mps.Event):
    """``torch.mps.Event`` whose ``record()`` and ``wait()`` take a stream, as CUDA's do.

    MPS runs all work on one queue, so any MPS stream, and any
    :class:`HostStream` (what ``device_namespace`` gives out as streams on
    MPS), is the current stream, and is accepted. Other streams raise TypeError.

    Thread safety: as ``torch.mps.Event``.
    """

    def record(self, stream: Any = None) -> None:
        """Record the event on the MPS queue; ``stream`` must be None or that queue."""
        _check_mps_stream(stream, "record")
        super().record()

    def wait(self, stream: Any = None) -> None:
        """Make later work on the MPS queue wait for this event."""
        _check_mps_stream(stream, "wait")
        super().wait()


def _check_mps_stream(stream: object, method: str) -> None:
    """Accept the streams that all stand for MPS's single queue."""
    if stream is None or isinstance(stream, HostStream):
        return
    if isinstance(stream, _TorchStream) and stream.device.type == "mps":
        return
    raise TypeError(
        f"MpsEvent.{method}() takes None, an MPS stream or a HostStream, not {stream!r}"
    )
