"""Redirect objects: what to change, activated any number of times at once.

A :class:`Redirect` holds no per-activation state: each ``with``, decorated
call or :meth:`Redirect.start` creates its own handle (an
:class:`~patchscope._registry.Activation` or an :class:`ActivationGroup`).
``with`` blocks find their handle again by the frame of their ``with``
statement (see ``_registry``), so the same object works nested, recursively,
from many threads, asyncio tasks and suspended generators (``mock.patch``
keeps that state on the patcher and breaks; ANCHORS).
"""

from __future__ import annotations

import sys
import threading
import types
from collections.abc import Callable
from typing import Any, TypeVar, overload

from ._errors import RestoreError
from ._records import RedirectBase
from ._registry import (
    Activation,
    activate,
    enter_activation,
    enter_with,
    exit_activation,
    exit_with,
    generic_enter,
    generic_exit,
)
from ._resolve import ABSENT, check_name, describe, resolve

_T = TypeVar("_T")
_SCOPES = ("process", "context")
_getframe = sys._getframe


def check_scope(scope: object) -> str:
    """Return *scope* if valid, else raise a ValueError listing the valid ones."""
    if scope not in _SCOPES:
        raise ValueError(f"scope must be 'process' or 'context', got {scope!r}")
    assert isinstance(scope, str)
    return scope


class ActivationGroup:
    """The handle of a combined (or deferred) redirect: several activations.

    :meth:`stop` ends the parts in reverse order, from any thread, any number
    of times; if restores fail, every part is still ended and a
    :class:`~patchscope.RestoreError` is raised afterwards.
    """

    __slots__ = ("_frame", "_parts", "_pushed", "thread_id", "value")

    def __init__(self, parts: list[Activation | ActivationGroup], value: object) -> None:
        self._parts = parts
        self.value = value
        self.thread_id = threading.get_ident()
        self._pushed = False
        self._frame: Any = None

    @property
    def activations(self) -> tuple[Activation, ...]:
        """Every leaf activation in this group, in entry order."""
        return tuple(a for part in self._parts for a in part.activations)

    def stop(self) -> None:
        """End every part (reverse order); harmless if already stopped."""
        stop_all(self._parts)

    def __repr__(self) -> str:
        return f"<ActivationGroup of {len(self.activations)} activation(s)>"


def stop_all(handles: list[Activation | ActivationGroup]) -> None:
    """Stop *handles* in reverse order; raise one RestoreError after all ran."""
    errors: list[BaseException] = []
    messages: list[str] = []
    for handle in reversed(handles):
        try:
            if handle.__class__ is Activation:
                exit_activation(handle)
            else:
                handle.stop()
        except RestoreError as exc:
            errors.extend(exc.errors)
            messages.append(str(exc))  # names the target and attribute
    if errors:
        raise RestoreError(f"{len(errors)} restore(s) failed: " + "; ".join(messages), errors)


def _handle_value(handle: Activation | ActivationGroup) -> object:
    if isinstance(handle, Activation):
        return handle.replacement
    return handle.value


class Redirect(RedirectBase):
    """A reusable description of a redirect; activate it as often as you like.

    Use it as a context manager (``with r as value:``), as a decorator of
    functions, methods, coroutine functions, generator functions and classes,
    or through :meth:`start`/``stop()``.

    Thread safety: a ``Redirect`` is immutable. Any number of activations of
    the same object may be live at once, from any threads and asyncio tasks;
    each ``with``, decorated call and :meth:`start` is independent, and they
    may end in any order.
    """

    # The per-redirect fields (the live with-handles, the registry key, what
    # an activation installs, ...) live in RedirectBase.
    __slots__ = ("__weakref__",)

    def _activate(self, code: Any, lasti: int) -> Activation | ActivationGroup:
        raise NotImplementedError

    def _args(self) -> tuple[Any, ...]:
        """The constructor arguments that make an equal, independent redirect."""
        raise NotImplementedError

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickles are new redirects made from the same arguments: live
        # with-handles and recycled registry entries stay with this one.
        return (type(self), self._args())

    def __copy__(self) -> Redirect:
        # A Redirect is immutable: a copy is a new one with the same target
        # and replacement (not copies of them), and no live handles.
        return type(self)(*self._args())

    def __deepcopy__(self, memo: dict[int, Any]) -> Redirect:
        return self.__copy__()

    def start(self, *, stacklevel: int = 1) -> Activation | ActivationGroup:
        """Activate now and return the handle; call ``handle.stop()`` to end it.

        The entry site that :func:`patchscope.active` reports is the caller's
        line; helpers that start redirects for their callers pass
        ``stacklevel=2`` (as for :func:`warnings.warn`).

        Thread-safe. The activation lasts until ``stop()``, whichever thread
        calls it; ``stop()`` twice is harmless.
        """
        frame = _getframe(stacklevel)
        return self._activate(frame.f_code, frame.f_lasti)

    def __enter__(self) -> Any:
        return generic_enter(self, _getframe(1))

    def __exit__(self, *exc_info: object) -> None:
        generic_exit(self, _getframe(1))

    @overload
    def __call__(self, obj: type[_T]) -> type[_T]: ...

    @overload
    def __call__(self, obj: Callable[..., _T]) -> Callable[..., _T]: ...

    def __call__(self, obj: Any) -> Any:
        """Decorate a function, method, coroutine/generator function or class."""
        from ._decorate import decorate

        return decorate(self, obj)


class AttrRedirect(Redirect):
    """``target.name`` becomes ``replacement`` while active (see redirect_attr)."""

    __slots__ = ()

    def __init__(
        self, target: object, name: str, replacement: object, create: bool, scope: str
    ) -> None:
        super().__init__()
        self._target = target
        self._name = name
        self._value = replacement
        self._replacement = replacement
        self._create = create
        self._scope = scope
        self._ctx = scope == "context"
        # Registry key, fixed unless the target is a path resolved per activation.
        self._key = None if isinstance(target, str) else (id(target), name)
        # A plain module/class attribute: its original is re-read cheaply and
        # the registry entry is recycled between activations.
        self._plain = type(target) in (types.ModuleType, type) and name[:2] != "__"

    def _args(self) -> tuple[Any, ...]:
        return (self._target, self._name, self._replacement, self._create, self._scope)

    # The hot path: one lock section on entry and one on exit (see _registry).
    _activate = activate
    __enter__ = enter_with
    __exit__ = exit_with

    def __repr__(self) -> str:
        target = self._target if isinstance(self._target, str) else describe(self._target)
        return (
            f"redirect_attr({target}, {self._name!r}, {self._replacement!r}, "
            f"scope={self._scope!r})"
        )


def redirect_attr(
    target: object,
    name: str,
    replacement: object,
    *,
    create: bool = False,
    scope: str = "process",
) -> Redirect:
    """Redirect ``target.name`` to *replacement* while active.

    *target* is a module, class or instance, or a dotted import path resolved
    (and imported) at each activation. The original raw value is restored by
    identity when the last activation of ``(target, name)`` ends, whatever the
    order of exits; an attribute that was inherited, served by a module
    ``__getattr__`` or created (``create=True``) is deleted again.

    ``scope="process"`` rebinds the attribute for every thread (like
    ``mock.patch``, with exact restoration). ``scope="context"`` makes the
    replacement visible only to the activating thread or asyncio task (and
    tasks it creates while the scope is open); other threads see the original
    by identity at the same time. Context scope works on module and class
    attributes.

    Thread safety: activations may be entered and ended from any threads in any
    order; all bookkeeping is under one lock. Nothing changes if entry fails.
    """
    name = check_name(name)
    scope = check_scope(scope)
    return AttrRedirect(target, name, replacement, bool(create), scope)


class Combined(Redirect):
    """Several redirects entered in order (all or nothing), ended in reverse."""

    __slots__ = ("_parts",)

    def __init__(self, parts: tuple[Redirect, ...]) -> None:
        super().__init__()
        self._parts = parts
        # What ``with`` gives, when no part decides it per activation.
        if all(isinstance(p, (AttrRedirect, _construction_redirect())) for p in parts):
            self._value = tuple(p._replacement for p in parts)

    def _args(self) -> tuple[Any, ...]:
        return (self._parts,)

    def _activate(self, code: Any, lasti: int) -> ActivationGroup:
        handles: list[Activation | ActivationGroup] = []
        try:
            for part in self._parts:
                handles.append(part._activate(code, lasti))
        except BaseException:
            stop_all(handles)
            raise
        value = self._value
        if value is None:
            value = tuple(_handle_value(h) for h in handles)
        return ActivationGroup(handles, value)

    def __repr__(self) -> str:
        return f"combine({', '.join(map(repr, self._parts))})"


def _construction_redirect() -> type:
    from ._construct import ConstructionRedirect

    return ConstructionRedirect


def combine(*redirects: Redirect) -> Redirect:
    """One redirect made of several: entered in order, all or nothing; ended in reverse.

    ``with combine(a, b) as (va, vb):``. If entering a part fails, the parts
    already entered are ended before the error propagates.

    Thread safety: as for every :class:`Redirect`.
    """
    for r in redirects:
        if not isinstance(r, Redirect):
            raise TypeError(f"combine() takes Redirect objects, got {type(r).__name__} {r!r}")
    return Combined(tuple(redirects))


class Deferred(Redirect):
    """A redirect chosen afresh at each activation by a factory (None: install nothing)."""

    __slots__ = ("_factory",)

    def __init__(self, factory: Callable[[], Redirect | None]) -> None:
        super().__init__()
        self._factory = factory

    def _args(self) -> tuple[Any, ...]:
        return (self._factory,)

    def _activate(self, code: Any, lasti: int) -> Activation | ActivationGroup:
        redirect = self._factory()
        if redirect is None:
            return ActivationGroup([], None)
        return redirect._activate(code, lasti)

    def __repr__(self) -> str:
        return f"deferred({self._factory!r})"


def deferred(factory: Callable[[], Redirect | None]) -> Redirect:
    """A Redirect that calls *factory* at each activation and activates its result.

    Used where what to redirect depends on run-time state (the active device);
    ``None`` from the factory means "install nothing this time".
    """
    return Deferred(factory)


class During(Redirect):
    """``owner.method_name`` is wrapped so that *inner* is active while it runs."""

    __slots__ = ("_inner", "_owner")

    def __init__(self, owner: object, name: str, inner: Redirect) -> None:
        super().__init__()
        self._owner = owner
        self._name = name
        self._inner = inner
        self._replacement = ABSENT  # activations show their wrapper
        self._scope = "process"

    def _args(self) -> tuple[Any, ...]:
        return (self._owner, self._name, self._inner)

    def _activate(self, code: Any, lasti: int) -> Activation:
        from ._decorate import wrap_raw
        from ._resolve import lookup_mro

        owner = self._owner
        if isinstance(owner, str):
            owner = resolve(owner)
        if isinstance(owner, type):
            raw = lookup_mro(owner, self._name)
        else:
            raw = getattr(owner, "__dict__", {}).get(self._name, ABSENT)
            if raw is ABSENT:
                raw = getattr(owner, self._name, ABSENT)
        if raw is ABSENT:
            from ._errors import AttributeMissingError

            raise AttributeMissingError(
                f"{describe(owner)} has no attribute {self._name!r} to wrap; "
                "during() wraps an existing method or constructor: check the name"
            )
        wrapper = wrap_raw(self._inner, raw)
        act = Activation(self, wrapper, code, lasti)
        enter_activation(self, owner, act)
        return act

    def __repr__(self) -> str:
        owner = self._owner if isinstance(self._owner, str) else describe(self._owner)
        return f"during({owner}, {self._name!r}, {self._inner!r})"


def during(owner: object, method_name: str, *redirects: Redirect) -> Redirect:
    """Wrap ``owner.method_name`` so that *redirects* are active while it runs.

    For code you do not own: ``with during(ThirdPartyModel, "__init__",
    device_events()): ...`` makes every construction inside the block run with
    the redirects. Ending it restores the exact original (by identity in
    ``vars(owner)``, or deletes the wrapper if the method was inherited).

    Thread safety: as for every :class:`Redirect`; the wrapper is installed
    process-wide, the redirects it activates keep their own scope.
    """
    method_name = check_name(method_name)
    if not redirects:
        raise TypeError(f"during({describe(owner)}, {method_name!r}) needs at least one redirect")
    inner = redirects[0] if len(redirects) == 1 else combine(*redirects)
    if not isinstance(inner, Redirect):
        raise TypeError(f"during() takes Redirect objects, got {type(inner).__name__} {inner!r}")
    return During(owner, method_name, inner)
