"""Decorator forms: functions, coroutines, generators, classes, raw class attributes.

Each call of a decorated callable is a fresh activation, so recursion and
concurrent calls are independent (``mock.patch`` shares one patcher state, so
a decorated function run concurrently or recursively leaks the patch or
raises). Generators and async generators are activated only while
their own code runs: the caller never sees the redirect between items
(``mock.patch`` is already gone before the body runs; cpython gh-88893).
A function (plain, generator, coroutine, async generator; so also a class's
``__init__``) is wrapped by a real function, which pickle finds by name and
cloudpickle ships by value with its redirect (Ray, Dask, notebooks); other
callables get a ``wrapt.FunctionWrapper``, pickled by name. Either way binding
(instance, class and static methods), ``__wrapped__``, ``inspect.signature``
and the ``inspect.is*function`` predicates stay those of the wrapped function.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import AsyncGenerator, Callable, Generator
from typing import TYPE_CHECKING, Any

import wrapt

from ._accel import twin
from ._resolve import ABSENT, OBJECT_INIT, OBJECT_NEW, lookup_mro

if TYPE_CHECKING:
    from ._redirect import Redirect


class _PyGuard:
    """A single-use context manager: activates *redirect* at entry (reported at *code*).

    The decorators' drivers run each step of a generator, and a coroutine's
    whole run, inside ``with guard:``, so the activation and its end are each
    one step the ``with`` statement takes (with the C twin, no signal handler
    can run between the registry change and the ``with`` taking it over).
    """

    __slots__ = ("code", "handle", "redirect")

    def __init__(self, redirect: Redirect, code: Any) -> None:
        self.redirect = redirect
        self.code = code
        self.handle: Any = None

    def __enter__(self) -> None:
        if self.handle is not None:
            raise RuntimeError("a guard holds one activation at a time")
        self.handle = self.redirect._activate(self.code, 0)

    def __exit__(self, *exc_info: object) -> None:
        handle, self.handle = self.handle, None
        handle.stop()


class _PyCallWrapper:
    """The wrapt wrapper of a decorated callable: *redirect* is active for each whole call."""

    __slots__ = ("code", "redirect")

    def __init__(self, redirect: Redirect, code: Any) -> None:
        self.redirect = redirect
        self.code = code

    def __call__(
        self, wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        handle = self.redirect._activate(self.code, 0)
        try:
            return wrapped(*args, **kwargs)
        finally:
            handle.stop()


# Twins: the C accelerator's Guard and CallWrapper (decorate.c), which take
# only the redirects the core runs (``_group.core_runs``); keep in sync.
_Guard: Any = twin(_PyGuard, "Guard")
_CallWrapper: Any = twin(_PyCallWrapper, "CallWrapper")


def _twins(redirect: Redirect) -> tuple[Any, Any]:
    """(Guard, CallWrapper): the twins for redirects the core runs, else Python's."""
    from ._group import core_runs  # that module imports this one

    if core_runs(redirect):
        return _Guard, _CallWrapper
    return _PyGuard, _PyCallWrapper


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


def wrap_callable(redirect: Redirect, fn: Callable[..., Any]) -> Any:
    """A callable that activates *redirect* around each call of *fn* (each step of a generator)."""
    code = getattr(inspect.unwrap(fn), "__code__", None)
    if type(fn) is types.FunctionType:
        return _redirected_function(redirect, fn, code)
    # Anything else callable (a bound method, a callable object, a builtin):
    # a wrapt proxy, which keeps its attributes and binding.
    guard, call_wrapper = _twins(redirect)
    driver = _driver_of(fn)
    if driver is None:
        return _Wrapper(fn, call_wrapper(redirect, code))
    drive = driver

    def step_wrapper(
        wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        # Call now (it runs none of the body), so bad arguments raise at
        # the call, as they would undecorated.
        return drive(guard(redirect, code), wrapped(*args, **kwargs))

    return _Wrapper(fn, step_wrapper)


def _driver_of(fn: Any) -> Callable[..., Any] | None:
    """How *fn*'s result is run with the redirect: per step (generators), awaited, or None."""
    # Generators, async generators and coroutines get a driver that activates
    # the redirect around each step of their own code; plain callables around
    # the call.
    if inspect.isasyncgenfunction(fn):
        return _drive_async
    if inspect.isgeneratorfunction(fn):
        return _drive
    if inspect.iscoroutinefunction(fn):
        return _run_activated
    return None


class _Activator:
    """What a decorated function keeps: its redirect, the code reported, and their twins.

    Pickled as its redirect and code, and built again where it is unpickled,
    so a function decorated where the C accelerator runs also works in a
    pure-Python worker, and the other way round.
    """

    __slots__ = ("call", "code", "guard", "redirect")

    def __init__(self, redirect: Redirect, code: Any) -> None:
        self.redirect = redirect
        self.code = code
        guard, call_wrapper = _twins(redirect)
        self.guard = guard
        self.call = call_wrapper(redirect, code)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_Activator, (self.redirect, self.code))


def _redirected_function(redirect: Redirect, fn: types.FunctionType, code: Any) -> Any:
    """A real function that runs *fn* with *redirect* active: what decorating a function gives.

    A real function, not a proxy: pickle finds it by its module and qualified
    name, and cloudpickle (Ray, Dask, ``torch.multiprocessing`` with a
    driver-defined class) ships it by value with its closure, so the copy
    still activates the redirect. (A proxy looks like the wrapped function
    to cloudpickle, which would ship that function alone, undecorated.)

    A plain function takes ``*args, **kwargs``. A generator, coroutine or
    async generator function gets *fn*'s own parameters, so that it is one
    too (``inspect.isgeneratorfunction`` and the others hold) and bad
    arguments still raise at the call, before its body would start.
    """
    activator = _Activator(redirect, code)
    driver = _driver_of(fn)
    if driver is None:

        def redirected(*args: Any, **kwargs: Any) -> Any:
            return activator.call(fn, None, args, kwargs)

    else:
        redirected = _same_parameters(fn, driver)(activator, fn, driver)
        redirected.__defaults__ = fn.__defaults__
        redirected.__kwdefaults__ = fn.__kwdefaults__
    return functools.update_wrapper(redirected, fn)


# What a generated function does with its parameters once bound, by driver
# name. The names below start with _ps_ and are checked not to collide with a
# parameter.
_BODIES = {
    "_drive": (
        "def",
        "return (yield from _ps_drive(_ps.guard(_ps.redirect, _ps.code), _ps_fn({call})))",
    ),
    "_run_activated": (
        "async def",
        "return await _ps_drive(_ps.guard(_ps.redirect, _ps.code), _ps_fn({call}))",
    ),
    "_drive_async": (
        "async def",
        """_ps_it = _ps_drive(_ps.guard(_ps.redirect, _ps.code), _ps_fn({call}))
        _ps_step = _ps_it.asend(None)
        while True:
            try:
                _ps_item = await _ps_step
            except StopAsyncIteration:
                return
            try:
                _ps_sent = yield _ps_item
            except GeneratorExit:
                await _ps_it.aclose()
                raise
            except BaseException as _ps_exc:
                _ps_step = _ps_it.athrow(_ps_exc)
            else:
                _ps_step = _ps_it.asend(_ps_sent)""",
    ),
}


def _same_parameters(fn: types.FunctionType, driver: Any) -> Callable[..., Any]:
    """A factory ``(activator, fn, driver) -> function`` with *fn*'s parameters, for *driver*."""
    code = fn.__code__
    n_pos, n_kw = code.co_argcount, code.co_kwonlyargcount
    names = code.co_varnames
    varargs = names[n_pos + n_kw] if code.co_flags & inspect.CO_VARARGS else None
    varkw = (
        names[n_pos + n_kw + (varargs is not None)]
        if code.co_flags & inspect.CO_VARKEYWORDS
        else None
    )
    clash = [name for name in (*names[: n_pos + n_kw], varargs, varkw) if _reserved(name)]
    if clash:
        raise TypeError(
            f"cannot decorate {fn.__qualname__!r}: its parameter {clash[0]!r} uses a name "
            "the generated wrapper needs ('_ps' or '_ps_...'); rename the parameter"
        )
    shape = (
        names[:n_pos],
        code.co_posonlyargcount,
        names[n_pos : n_pos + n_kw],
        varargs,
        varkw,
        driver,
    )
    return _compile_factory(shape)


def _reserved(name: str | None) -> bool:
    return name is not None and (name == "_ps" or name.startswith("_ps_"))


@functools.lru_cache(maxsize=512)
def _compile_factory(shape: tuple[Any, ...]) -> Callable[..., Any]:
    """Compile the factory for one parameter shape (decorators of many functions share them).

    The parameters carry no defaults: the made function gets *fn*'s own
    ``__defaults__`` and ``__kwdefaults__``, which are not part of its code.
    """
    positional, n_posonly, kwonly, varargs, varkw, driver = shape
    params: list[str] = []
    for i, name in enumerate(positional):
        params.append(name)
        if n_posonly and i == n_posonly - 1:
            params.append("/")
    if varargs is not None:
        params.append(f"*{varargs}")
    elif kwonly:
        params.append("*")
    params.extend(kwonly)
    if varkw is not None:
        params.append(f"**{varkw}")
    call = [*positional, *([f"*{varargs}"] if varargs else [])]
    call += [f"{name}={name}" for name in kwonly]
    call += [f"**{varkw}"] if varkw else []
    keyword, body = _BODIES[driver.__name__]
    source = (
        "def _ps_factory(_ps, _ps_fn, _ps_drive):\n"
        f"    {keyword} redirected({', '.join(params)}):\n"
        f"        {body.format(call=', '.join(call))}\n"
        "    return redirected\n"
    )
    namespace: dict[str, Any] = {}
    exec(compile(source, "<patchscope decorated function>", "exec"), namespace)
    factory: Callable[..., Any] = namespace["_ps_factory"]
    return factory


if TYPE_CHECKING:
    _FunctionWrapper = wrapt.FunctionWrapper[Any, Any]
else:  # wrapt before 2.0 cannot be subscripted at run time
    _FunctionWrapper = wrapt.FunctionWrapper


class _Wrapper(_FunctionWrapper):
    """The wrapt wrapper of what is not a plain function; pickled by its name, as functions are."""

    def __reduce_ex__(self, protocol: object) -> str:
        # pickle looks the name up in the module and checks it is this object.
        return str(self.__qualname__)


async def _run_activated(guard: Any, coro: Any) -> Any:
    # Activated when the coroutine starts running, in the awaiting task's context.
    try:
        with guard:
            return await coro
    finally:
        # Where the activation failed, *coro* never started: closed, it is not
        # reported "never awaited" (the caller awaited; the entry's error says
        # why it did not run). Once awaited, closing it does nothing.
        coro.close()


def _drive(guard: Any, gen: Generator[Any, Any, Any]) -> Generator[Any, Any, Any]:
    sent: Any = None
    thrown: BaseException | None = None
    while True:
        with guard:
            try:
                if thrown is not None:
                    exc, thrown = thrown, None
                    item = gen.throw(exc)
                else:
                    item = gen.send(sent)
            except StopIteration as stop:
                return stop.value
        try:
            sent = yield item
        except GeneratorExit:
            with guard:
                gen.close()
            raise
        except BaseException as exc:
            thrown = exc


async def _drive_async(guard: Any, agen: AsyncGenerator[Any, Any]) -> AsyncGenerator[Any, Any]:
    sent: Any = None
    thrown: BaseException | None = None
    while True:
        with guard:
            try:
                if thrown is not None:
                    exc, thrown = thrown, None
                    item = await agen.athrow(exc)
                else:
                    item = await agen.asend(sent)
            except StopAsyncIteration:
                return
        try:
            sent = yield item
        except GeneratorExit:
            with guard:
                await agen.aclose()
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

    The wrapper goes into the class's own ``__dict__`` (a wrapper in place of
    the class object would fail pickle's identity check, "not the same
    object", for the class's instances), so subclasses
    reaching this ``__init__`` are covered and the class keeps its identity.
    """
    name = "__init__"
    raw = cls.__dict__.get("__init__", ABSENT)
    if raw is ABSENT:
        raw = lookup_mro(cls, "__init__")
        new = lookup_mro(cls, "__new__")
        if raw is OBJECT_INIT and new is not OBJECT_NEW:
            # Construction happens in __new__: a class that defines only
            # __new__ needs __new__ wrapped, and __new__ binds as a staticmethod.
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
    make ``inspect.signature(cls)`` raise on 3.11), and once a class has its
    own ``__init__``, ``object.__init__`` rejects extra arguments, so check
    them here exactly as ``type.__call__`` would have.
    """
    try:
        shown: inspect.Signature | None = inspect.signature(cls)
    except (TypeError, ValueError):
        shown = None
    takes_args = lookup_mro(cls, "__new__") is not OBJECT_NEW

    def __init__(self: object, *args: Any, **kwargs: Any) -> None:
        if (args or kwargs) and not takes_args:
            raise TypeError(f"{type(self).__name__}() takes no arguments")

    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    if shown is not None:
        self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
        __init__.__signature__ = shown.replace(  # type: ignore[attr-defined]
            parameters=[self_param, *shown.parameters.values()]
        )
    return __init__
