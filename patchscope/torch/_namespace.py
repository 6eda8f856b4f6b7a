"""Redirects that point CUDA-written code at the active device: device_events, device_namespace."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch

from patchscope import Redirect, combine, deferred, redirect_attr, redirect_construction

from . import _host
from ._detect import device_type_of
from ._events import device_event_class, event_class_of
from ._reach import Scope, reaching_every_name

# The classes as defined, not as ``torch.cuda`` currently names them: somebody
# may have rebound ``torch.cuda.Event``; these are what construction reaches.
_CUDA_EVENT = torch.cuda.streams.Event
_CUDA_STREAM = torch.cuda.streams.Stream
_CUDA_STREAM_CONTEXT = torch.cuda.StreamContext
_CUDA_EXTERNAL_STREAM = torch.cuda.streams.ExternalStream
# The ``torch.cuda`` functions that device_namespace redirects (by call).
_FUNCTIONS = (
    "current_stream",
    "default_stream",
    "is_current_stream_capturing",
    "set_stream",
    "stream",
    "synchronize",
)


def device_events(
    device: str | torch.device | None = None, *, scope: Scope = "context"
) -> Redirect:
    """Make ``torch.cuda.Event`` construct the event of ``device`` (the active device when None).

    While active, every construction of ``torch.cuda.Event``, through any
    name (``torch.cuda.streams.Event``, ``from torch.cuda import Event``,
    Dynamo's device interface), builds ``device_event_class(device)`` from
    the same arguments instead. The device is resolved at each activation
    (each ``with``, each decorated call, each construction of a decorated
    class), not when ``device_events()`` is called. On CUDA nothing is
    installed: ``patchscope.active()`` stays empty.

    Usable in every form a Redirect has: ``with``, a function, method,
    generator or coroutine decorator, or a class decorator (active during
    the class's ``__init__``), ``start()``/``stop()``.

    Thread safety: with ``scope="context"`` (the default) only the thread or
    asyncio task that activated it sees the redirect; every other thread
    gets ``torch.cuda.Event``'s own behaviour at the same time.
    ``scope="process"`` makes it visible to all threads.
    """
    _check(device, scope)
    return deferred(
        lambda: _events_redirect(device_event_class(device), scope, _dynamo_cuda_interface()),
        scope,
    )


def device_namespace(
    device: str | torch.device | None = None, *, scope: Scope = "context"
) -> Redirect:
    """Point ``torch.cuda``'s event and stream API at ``device`` (the active device when None).

    Redirects ``Event``, ``Stream``, ``StreamContext``, ``current_stream``,
    ``default_stream``, ``set_stream``, ``stream`` (the context manager),
    ``is_current_stream_capturing`` and ``synchronize`` of ``torch.cuda`` to
    the device's equivalents, so unmodified CUDA code runs: overlap with
    ``torch.cuda.stream(aux)`` or ``with aux:``, ``event.record()``/``wait()``,
    timing with ``elapsed_time``. On CPU these are :class:`HostEvent`,
    :class:`HostStream` and their functions, which also accept the
    device-generic ``torch.Stream("cpu")`` and ``torch.Event("cpu")``; a
    backend without streams of its own (MPS) gets the host streams with its
    own events. ``Event``, ``Stream`` and ``StreamContext`` are redirected at
    construction and the functions by call, so names bound before the scope
    (``from torch.cuda import Stream, synchronize``) are reached too. ``ExternalStream`` is
    redirected only to a backend that has external streams. A backend
    without one of the functions (XPU's ``default_stream``) gets one that
    raises NotImplementedError.

    The device is resolved at each activation; on CUDA nothing is installed.
    Usable in every form a Redirect has, like :func:`device_events`.

    Thread safety: with ``scope="context"`` (the default) only the thread or
    asyncio task that activated it sees the redirects; ``scope="process"``
    makes them visible to all threads.
    """
    _check(device, scope)

    def resolve() -> Redirect | None:
        device_type = device_type_of(device)
        return _namespace_redirect(
            device_type,
            event_class_of(device_type),
            getattr(torch, device_type, None),
            scope,
            _dynamo_cuda_interface(),
        )

    return deferred(resolve, scope)


def _check(device: str | torch.device | None, scope: str) -> None:
    """Reject a bad device or scope when the redirect is made, not at its first use."""
    if device is not None:
        device_type_of(device)
    if scope not in ("context", "process"):
        raise ValueError(f"scope must be 'context' or 'process', not {scope!r}")


# Cached so that each activation reuses one Redirect per device: a Redirect
# may be active any number of times at once, and building one costs more
# than activating it. The keys hold the classes and modules themselves, so a
# backend registered later gets a fresh entry.
@functools.cache
def _events_redirect(
    event_class: type, scope: Scope, dynamo_interface: type | None
) -> Redirect | None:
    """Return the redirect of torch.cuda.Event to ``event_class``; None on CUDA."""
    if event_class is _CUDA_EVENT:
        return None
    construction = redirect_construction(_CUDA_EVENT, event_class, scope=scope)
    if dynamo_interface is None:
        return construction
    group = combine(
        construction, *_dynamo_redirects(dynamo_interface, {"Event": event_class}, scope)
    )
    # What ``with device_events() as cls`` gives, as without Dynamo.
    group._value = event_class  # type: ignore[attr-defined]
    return group


@functools.cache
def _namespace_redirect(
    device_type: str,
    event_class: type,
    module: ModuleType | None,
    scope: Scope,
    dynamo_interface: type | None,
) -> Redirect | None:
    """Return the combined redirect of torch.cuda's stream API to ``device_type``; None on CUDA."""
    if event_class is _CUDA_EVENT:
        return None
    classes, functions = _streams(device_type, module)
    seen: set[int] = set()
    return combine(
        redirect_construction(_CUDA_EVENT, event_class, scope=scope),
        *(redirect_construction(cuda, own, scope=scope) for cuda, own in classes.items()),
        # By call, for the names bound before the scope; and by name, for
        # Dynamo, which recognises torch.cuda.current_stream and the others by
        # identity and traces the stand-ins it finds there without a break.
        *(
            part
            for name in _FUNCTIONS
            for part in reaching_every_name(torch.cuda, name, functions[name], scope, seen)
        ),
        *(redirect_attr(torch.cuda, name, functions[name], scope=scope) for name in _FUNCTIONS),
        *(
            _dynamo_redirects(
                dynamo_interface,
                {
                    "Event": event_class,
                    "Stream": classes[_CUDA_STREAM],
                    **{name: staticmethod(functions[name]) for name in _DYNAMO_BOUND},
                },
                scope,
            )
            if dynamo_interface is not None
            else ()
        ),
    )


# torch._dynamo.device_interface.CudaInterface binds these torch.cuda functions
# once, as staticmethods, when it is defined: rebinding torch.cuda's names does
# not reach them, so they are redirected on the class too.
_DYNAMO_BOUND = ("current_stream", "set_stream", "stream", "synchronize")


def _dynamo_redirects(
    interface: type, replacements: dict[str, Any], scope: Scope
) -> tuple[Redirect, ...]:
    """Redirects of CudaInterface's own attributes, for the names it has.

    Its ``Event`` and ``Stream`` are redirected too, although constructing
    them is already reached: Dynamo models a call of any class registered as
    an interface's ``Event`` (``CudaInterface.Event`` is ``torch.cuda.Event``)
    as an event on that device's current stream, which crashes tracing where
    there is no CUDA. With the device's class there, a call of
    ``torch.cuda.Event`` in compiled code is an ordinary call.
    """
    return tuple(
        redirect_attr(interface, name, value, scope=scope)
        for name, value in replacements.items()
        if name in vars(interface)
    )


def _dynamo_cuda_interface() -> type | None:
    """Dynamo's CUDA device interface, if torch._dynamo is loaded (never imported here)."""
    module = sys.modules.get("torch._dynamo.device_interface")
    interface = getattr(module, "CudaInterface", None)
    return interface if isinstance(interface, type) else None


_HOST_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "current_stream": _host.current_stream,
    "default_stream": _host.default_stream,
    "is_current_stream_capturing": _host.is_current_stream_capturing,
    "set_stream": _host.set_stream,
    "stream": _host.stream_context,
    "synchronize": _host.synchronize,
}
_HOST_CLASSES: dict[type, type] = {
    _CUDA_STREAM: _host.HostStream,
    _CUDA_STREAM_CONTEXT: _host.HostStreamContext,
}


def _streams(
    device_type: str, module: ModuleType | None
) -> tuple[dict[type, type], dict[str, Callable[..., Any]]]:
    """Return the classes (CUDA's -> the device's) and the stream functions that stand in."""
    if device_type == "cpu":
        return dict(_HOST_CLASSES), dict(_HOST_FUNCTIONS)
    if module is None:
        raise ValueError(
            f"device_namespace({device_type!r}) needs the torch.{device_type} module; "
            "import the backend's package first"
        )
    if not hasattr(module, "Stream"):
        # One queue (MPS): host streams keep CUDA code's ordering, since all
        # its work lands on that queue anyway; synchronize waits for it.
        host = dict(_HOST_FUNCTIONS)
        host["synchronize"] = _without_device(module.synchronize)
        return dict(_HOST_CLASSES), host
    classes: dict[type, type] = {_CUDA_STREAM: module.Stream}
    context = getattr(module, "StreamContext", None)
    if context is not None:
        classes[_CUDA_STREAM_CONTEXT] = context
    external = getattr(module, "ExternalStream", None)
    if external is not None:
        classes[_CUDA_EXTERNAL_STREAM] = external
    functions = {name: getattr(module, name, None) for name in _FUNCTIONS}
    return classes, {
        name: function if function is not None else _missing(device_type, name)
        for name, function in functions.items()
    }


def _without_device(synchronize: Callable[[], None]) -> Callable[..., None]:
    """Adapt a backend's ``synchronize()`` to ``torch.cuda.synchronize(device=None)``."""

    @functools.wraps(synchronize)
    def synchronize_any(device: object = None) -> None:
        synchronize()

    return synchronize_any


def _missing(device_type: str, name: str) -> Callable[..., Any]:
    """Return a stand-in for ``torch.cuda.<name>`` that says the backend lacks it."""
    return missing_function(
        name,
        f"torch.{device_type} has no {name}(), so device_namespace cannot stand in "
        f"for torch.cuda.{name} on {device_type!r}",
    )


def missing_function(name: str, message: str) -> Callable[..., Any]:
    """A function named *name* that raises NotImplementedError(*message*) when called."""

    def missing(*args: object, **kwargs: object) -> Any:
        raise NotImplementedError(message)

    missing.__name__ = missing.__qualname__ = name
    return missing
