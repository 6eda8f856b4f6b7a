"""Decorator forms: functions, coroutines, generators, classes, raw class attributes.

Each call of a decorated callable is a fresh activation, so recursion and
concurrent calls are independent (``mock.patch`` shares one patcher state and
breaks; ANCHORS). Generators and async generators are activated only while
their own code runs: the caller never sees the redirect between items
(``mock.patch`` is already gone before the body runs; cpython gh-88893).
Wrappers are ``wrapt.FunctionWrapper`` objects, so binding (instance, class and
static methods), ``__wrapped__``, ``inspect.signature`` and the
``inspect.is*function`` predicates stay those of the wrapped function.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, Callable, Generator
from typing import TYPE_CHECKING, Any

import wrapt

from ._resolve import ABSENT, OBJECT_INIT, OBJECT_NEW, lookup_mro

if TYPE_CHECKING:
    from ._redirect import Redirect



def decorate(redirect: Redirect, obj: Any) -> Any:
    """Apply *redirect* to a class (during ``__init__``) or a callable (per call)."""
    if isinstance(obj, type):
        return _decorate_class(redirect, obj)
    if isinstance(obj, (staticmethod, classmethod)):
        return type(obj)(wrap_callable(redirect, obj.__func__))
    if not callable(obj):
        raise TypeError(
            f"{redirect!r} can decorate functions, methods and classes, "
            f"not {type(obj).__name__} {obj!r}; use it as a context manager instead"
        )
    return wrap_callable(redirect, obj)


def _site_of(fn: Any) -> tuple[Any, int]:
    code = getattr(inspect.unwrap(fn), "__code__", None)
    return code, 0


def wrap_callable(redirect: Redirect, fn: Callable[..., Any]) -> Any:
    """A wrapt wrapper that activates *redirect* around each call of *fn*."""
    code, lasti = _site_of(fn)
    activate = redirect._activate

    # Generators, async generators and coroutines get a driver that activates
    # the redirect around each step of their own code; plain callables around
    # the call.
    driver: Callable[..., Any] | None = None
    if inspect.isasyncgenfunction(fn):
        driver = _drive_async
    elif inspect.isgeneratorfunction(fn):
        driver = _drive
    elif inspect.iscoroutinefunction(fn):
        driver = _run_activated

    if driver is not None:
        drive = driver

        def step_wrapper(
            wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
        ) -> Any:
            # Call now (it runs none of the body), so bad arguments raise at
            # the call, as they would undecorated.
            return drive(activate, code, lasti, wrapped(*args, **kwargs))

        return wrapt.FunctionWrapper(fn, step_wrapper)

    def call_wrapper(
        wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        handle = activate(code, lasti)
        try:
            return wrapped(*args, **kwargs)
        finally:
            handle.stop()

    return wrapt.FunctionWrapper(fn, call_wrapper)


async def _run_activated(
    activate: Callable[[Any, int], Any], code: Any, lasti: int, coro: Any
) -> Any:
    # Activated when the coroutine starts running, in the awaiting task's context.
    handle = activate(code, lasti)
    try:
        return await coro
    finally:
        handle.stop()


def _drive(
    activate: Callable[[Any, int], Any], code: Any, lasti: int, gen: Generator[Any, Any, Any]
) -> Generator[Any, Any, Any]:
    sent: Any = None
    thrown: BaseException | None = None
    while True:
        handle = activate(code, lasti)
        try:
            if thrown is not None:
                exc, thrown = thrown, None
                item = gen.throw(exc)
            else:
                item = gen.send(sent)
        except StopIteration as stop:
            return stop.value
        finally:
            handle.stop()
        try:
            sent = yield item
        except GeneratorExit:
            handle = activate(code, lasti)
            try:
                gen.close()
            finally:
                handle.stop()
            raise
        except BaseException as exc:
            thrown = exc


async def _drive_async(
    activate: Callable[[Any, int], Any], code: Any, lasti: int, agen: AsyncGenerator[Any, Any]
) -> AsyncGenerator[Any, Any]:
    sent: Any = None
    thrown: BaseException | None = None
    while True:
        handle = activate(code, lasti)
        try:
            if thrown is not None:
                exc, thrown = thrown, None
                item = await agen.athrow(exc)
            else:
                item = await agen.asend(sent)
        except StopAsyncIteration:
            return
        finally:
            handle.stop()
        try:
            sent = yield item
        except GeneratorExit:
            handle = activate(code, lasti)
            try:
                await agen.aclose()
            finally:
                handle.stop()
            raise
        except BaseException as exc:
            thrown = exc


def wrap_raw(redirect: Redirect, raw: Any) -> Any:
    """Wrap a raw class attribute so it binds exactly as *raw* did."""
    if isinstance(raw, (staticmethod, classmethod)):
        return type(raw)(wrap_callable(redirect, raw.__func__))
    return wrap_callable(redirect, raw)


def _decorate_class(redirect: Redirect, cls: type) -> type:
    """Activate *redirect* during the class's effective ``__init__``; same class back.

    The wrapper goes into the class's own ``__dict__`` (decorating the class
    object itself would replace it and break pickling; ANCHORS), so subclasses
    reaching this ``__init__`` are covered and the class keeps its identity.
    """
    name = "__init__"
    raw = cls.__dict__.get("__init__", ABSENT)
    if raw is ABSENT:
        raw = lookup_mro(cls, "__init__")
        new = lookup_mro(cls, "__new__")
        if raw is OBJECT_INIT and new is not OBJECT_NEW:
            # Construction happens in __new__ (ANCHORS: a class that defines
            # only __new__ needs __new__ wrapped; it binds as a staticmethod).
            name, raw = "__new__", new
            if not isinstance(raw, staticmethod):
                raw = staticmethod(raw)  # type: ignore[arg-type]
        elif raw is OBJECT_INIT:
            raw = _object_init_for(cls)
    setattr(cls, name, wrap_raw(redirect, raw))
    return cls


def _object_init_for(cls: type) -> Callable[..., None]:
    """A Python stand-in for ``object.__init__`` that keeps ``inspect.signature(cls)``.

    Wrapping the slot wrapper itself would change the class's signature (and
    raise on 3.11; ANCHORS), and once a class has its own ``__init__``,
    ``object.__init__`` rejects extra arguments, so check them here exactly
    as ``type.__call__`` would have.
    """
    try:
        shown: inspect.Signature | None = inspect.signature(cls)
    except (TypeError, ValueError):
        shown = None
    takes_args = lookup_mro(cls, "__new__") is not OBJECT_NEW

    def __init__(self: object, *args: Any, **kwargs: Any) -> None:
        if (args or kwargs) and not takes_args:
            raise TypeError(f"{type(self).__qualname__}() takes no arguments")

    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    if shown is not None:
        self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
        __init__.__signature__ = shown.replace(  # type: ignore[attr-defined]
            parameters=[self_param, *shown.parameters.values()]
        )
    return __init__
