"""Redirect objects: what to change, activated any number of times at once.

A :class:`Redirect` holds no per-activation state: each ``with``, decorated
call or :meth:`Redirect.start` creates its own handle (an
:class:`~patchscope.Activation` or an :class:`~patchscope.ActivationGroup`).
``with`` blocks find their handle again by the frame of their ``with``
statement (see ``_pairing``), so the same object works nested, recursively,
from many threads, asyncio tasks and suspended generators (``mock.patch``
keeps that state on the patcher: the same patcher entered twice at once leaks
its patch, or raises "Patch is already started" on newer CPython).

This module holds the public base class, ``redirect_attr``, the records and
the core's own operations. Single-attribute redirects (``redirect_attr``
here, ``redirect_construction`` in ``_construct``, ``during`` in
``_during``) keep their fields in :class:`RedirectCore`, groups (``_group``)
in :class:`GroupCore`. The core enters a redirect with a fixed target, or a
group of such, with :func:`activate_locked`: every activation under one
lock section, then the registry's ``after_all`` once. With the C
accelerator the records are C types and these operations are their C
twins: one C call from the ``with`` statement to the registry, so that
Ctrl-C can only land before or after it. Redirects that activate
themselves (a dotted path, ``during``, ``deferred``) have their own
``_activate`` and enter through ``_registry.enter``.

Twins: ``activate_locked``, ``activate``, ``with_enter``, ``with_exit``:
``activate_locked`` and the ``_c_*`` methods of the C ``RedirectCore`` and
``GroupCore`` (``_c/redirect.c``); ``redirect_attr``: ``AttrFactory``; keep
them in sync.
"""

from __future__ import annotations

import keyword
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

from ._accel import twin, twin_function
from ._decorate import decorate
from ._handles import (
    Activation,
    ActivationGroup,
    after_all_quietly,
    stop_handle_locked,
    undo_entered,
)
from ._pairing import pair_enter, pair_exit, push, site_of
from ._registry import after_all, after_undo, enter, enter_locked, section, undo_locked
from ._resolve import ONE_PATH, check_name, describe, resolve, split_path
from ._slots import inherited_new

_T = TypeVar("_T")
_SCOPES = ("process", "context")
_getframe = sys._getframe
_intern = sys.intern


def check_scope(scope: object) -> str:
    """Return *scope* if valid, else raise a ValueError listing the valid ones."""
    if scope not in _SCOPES:
        raise ValueError(f"scope must be 'process' or 'context', got {scope!r}")
    assert isinstance(scope, str)
    return scope


# ---------------------------------------------------------------------------
# records


class _PyRedirectCore:
    """The fields of a single-attribute redirect (see ``_py_activate`` for their use).

    ``RedirectCore()`` leaves every field at its default (the kinds fill in
    their own); ``RedirectCore(target, name, replacement, create, scope)``,
    with arguments ``redirect_attr`` checked, is an attribute redirect.
    """

    __slots__ = (
        "__weakref__",
        "_create",
        "_ctx",
        "_handles",
        "_key",
        "_name",
        "_prepared",
        "_replacement",
        "_scope",
        "_slot",
        "_spec",
        "_target",
        "_value",
    )

    def __init__(
        self,
        target: Any = None,
        name: Any = None,
        replacement: Any = None,
        create: bool = False,
        scope: Any = None,
    ) -> None:
        self._handles: list[Any] = []  # live with-handles, guarded by the registry lock
        self._target = target
        if name is not None:
            name = _intern(name)  # as setattr interns the names it stores
        self._name = name
        self._value = replacement  # what an activation installs
        self._replacement = replacement  # what ``with`` gives and active() shows
        self._scope = scope
        self._ctx = scope == "context"  # activations install through a context slot
        self._create = bool(create)
        # The registry key, where the target is fixed (a dotted path is
        # resolved at each activation).
        self._key: tuple[int, str] | None = (
            None if name is None or type(target) is str else (id(target), name)
        )
        self._slot: Any = None  # constructions, calls: the dispatcher this context's acts go on
        self._spec: Any = None  # constructions: what is built, and for which classes
        self._prepared: Any = None  # the slot(s) its context activations installed last


class _PyGroupCore:
    """The fields of a group of redirects (see ``_group.combine``)."""

    __slots__ = ("__weakref__", "_handles", "_parts", "_value")

    def __init__(self) -> None:
        self._handles: list[Any] = []
        self._parts: tuple[Any, ...] = ()
        self._value: Any = None  # what ``with`` gives, when no part decides it per activation


# Twins: the C accelerator's records (records.c); keep in sync.
if TYPE_CHECKING:
    RedirectCore = _PyRedirectCore
    GroupCore = _PyGroupCore
else:
    RedirectCore = twin(_PyRedirectCore, "RedirectCore")
    GroupCore = twin(_PyGroupCore, "GroupCore")


# ---------------------------------------------------------------------------
# the operations (Python twins)


def activate_locked(redirect: Any, code: Any, lasti: int, outcomes: list[Any]) -> Any:
    """Activate *redirect* under the lock and return its new handle.

    *redirect* is a single-attribute redirect with a fixed target, or a
    group of such (recursively): every part is entered in this one lock
    section, each activation adding its outcome to *outcomes*, and
    :func:`~patchscope._registry.after_all` does the work after it once. If
    it raises, what it entered is in *outcomes*, for
    :func:`~patchscope._registry.undo_locked`.
    """
    if isinstance(redirect, GroupCore):
        handles = [activate_locked(part, code, lasti, outcomes) for part in redirect._parts]
        value = redirect._value
        if value is None:
            value = tuple(map(handle_value, handles))
        return ActivationGroup(handles, value)
    target = redirect._target
    act = Activation(redirect, redirect._value, code, lasti)
    spec = redirect._spec
    if spec is not None:
        # Constructions: what the dispatcher falls back to, refreshed now.
        spec.base[0] = inherited_new(target)
    if redirect._slot is not None:
        # Context-scope constructions and calls: the dispatcher this
        # context's activations go on.
        act._slot = redirect._slot
    outcomes.append((act, True, enter_locked(act, target), None))
    return act


def _enter_all(
    redirect: Any, code: Any, lasti: int, handles: list[Any] | None = None, frame: Any = None
) -> tuple[Any, list[Any]]:
    """The lock section of an entry: ``(new handle, outcomes)`` for :func:`after_all`.

    With *handles*, the handle is also paired with the with-statement of
    *frame*, in the same section. If anything fails, what was entered is
    undone and :func:`~patchscope._registry.after_undo` raises.
    """
    outcomes: list[Any] = []
    failure: BaseException | None = None
    with section:
        try:
            handle = activate_locked(redirect, code, lasti, outcomes)
            if handles is not None:
                pair_enter(handles, handle, frame)
        except BaseException as exc:
            undo_locked(outcomes)
            failure = exc
    if failure is not None:
        after_undo(outcomes, failure)
    return handle, outcomes


def _py_activate(redirect: Any, code: Any, lasti: int) -> Any:
    """``_activate`` of the redirects the core runs: a new live handle, all or nothing."""
    handle, outcomes = _enter_all(redirect, code, lasti)
    try:
        after_all(outcomes, False)
    except BaseException:
        undo_entered(handle)
        raise
    return handle


def _py_with_enter(redirect: Any) -> Any:
    """``__enter__`` of the redirects the core runs: registry and pairing in one lock section."""
    frame: Any = _getframe(1)
    site = site_of(frame)
    handles = redirect._handles
    handle, outcomes = _enter_all(redirect, site.f_code, site.f_lasti, handles, frame)
    try:
        after_all(outcomes, False)
    except BaseException:
        undo_entered(handle, handles)
        raise
    if handle._pushed:
        push(handles, handle)
    if isinstance(redirect, GroupCore):
        return handle.value
    return redirect._replacement


def _py_with_exit(redirect: Any, typ: object, value: object, tb: object) -> None:
    """``__exit__`` of the redirects the core runs: pairing and registry in one lock section."""
    frame = _getframe(1)
    outcomes: list[Any] = []
    try:
        with section:
            stop_handle_locked(pair_exit(redirect._handles, frame), outcomes)
    except BaseException:
        after_all_quietly(outcomes)
        raise
    after_all(outcomes, isinstance(redirect, GroupCore))


def _generic_enter(redirect: Any) -> Any:
    """``__enter__`` from a redirect's own ``_activate``: activate, then pair the handle."""
    frame = _getframe(1)
    site = site_of(frame)
    handle = redirect._activate(site.f_code, site.f_lasti)
    handles = redirect._handles
    with section:
        pair_enter(handles, handle, frame)
    if handle._pushed:
        push(handles, handle)
    return handle_value(handle)


def _generic_exit(redirect: Any, typ: object, value: object, tb: object) -> None:
    """``__exit__`` matching :func:`_generic_enter`: find this with-block's handle and stop it."""
    frame = _getframe(1)
    with section:
        handle = pair_exit(redirect._handles, frame)
    handle.stop()


def handle_value(handle: Any) -> object:
    """What ``with`` gives for *handle*: the replacement, or a group's values."""
    if isinstance(handle, Activation):
        return handle.replacement
    return handle.value


# Twins: the C accelerator's RedirectCore._c_* (redirect.c); keep in sync.
activate: Any = twin(_py_activate, "RedirectCore._c_activate")
with_enter: Any = twin(_py_with_enter, "RedirectCore._c_with_enter")
with_exit: Any = twin(_py_with_exit, "RedirectCore._c_with_exit")


# ---------------------------------------------------------------------------
# the public base


class Redirect:
    """A reusable description of a redirect; activate it as often as you like.

    Use it as a context manager (``with r as value:``), as a decorator of
    functions, methods, coroutine functions, generator functions and classes,
    or through :meth:`start`/``stop()``.

    Thread safety: a ``Redirect`` is immutable. Any number of activations of
    the same object may be live at once, from any threads and asyncio tasks;
    each ``with``, decorated call and :meth:`start` is independent, and they
    may end in any order.
    """

    __slots__ = ()

    def _activate(self, code: Any, lasti: int) -> Any:
        raise NotImplementedError

    def _args(self) -> tuple[Any, ...]:
        """The constructor arguments that make an equal, independent redirect."""
        raise NotImplementedError

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickles are new redirects made from the same arguments: live
        # with-handles stay with this one.
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
        return self._activate(frame.f_code, frame.f_lasti)  # type: ignore[no-any-return]

    __enter__ = _generic_enter
    __exit__ = _generic_exit

    @overload
    def __call__(self, obj: type[_T]) -> type[_T]: ...

    @overload
    def __call__(self, obj: Callable[..., _T]) -> Callable[..., _T]: ...

    def __call__(self, obj: Any) -> Any:
        """Decorate a function, method, coroutine/generator function or class."""
        return decorate(self, obj)


# ---------------------------------------------------------------------------
# redirect_attr


class AttrRedirect(Redirect, RedirectCore):
    """``target.name`` becomes ``replacement`` while active (see redirect_attr)."""

    __slots__ = ()

    def _args(self) -> tuple[Any, ...]:
        return (self._target, self._name, self._replacement, self._create, self._scope)

    _activate = activate
    __enter__ = with_enter
    __exit__ = with_exit

    def __repr__(self) -> str:
        target = self._target if isinstance(self._target, str) else describe(self._target)
        return (
            f"redirect_attr({target}, {self._name!r}, {self._replacement!r}, scope={self._scope!r})"
        )


class PathAttrRedirect(AttrRedirect):
    """A redirect_attr whose target is a dotted path, imported and resolved at each activation.

    The path is resolved before the registry's lock is taken (an import
    under it could wait for a thread that waits for the lock), so this kind
    enters through :func:`~patchscope._registry.enter`, not the core's
    group operations.
    """

    __slots__ = ()

    def _activate(self, code: Any, lasti: int) -> Activation:
        target = resolve(self._target)
        act = Activation(self, self._value, code, lasti)
        enter(act, target)
        return act

    __enter__ = _generic_enter
    __exit__ = _generic_exit


@overload
def redirect_attr(
    path: str, replacement: object, /, *, create: bool = ..., scope: str = ...
) -> Redirect: ...


@overload
def redirect_attr(
    target: object, name: str, replacement: object, *, create: bool = ..., scope: str = ...
) -> Redirect: ...


def redirect_attr(
    target: object,
    name: Any,
    replacement: object = ONE_PATH,
    *,
    create: bool = False,
    scope: str = "process",
) -> Redirect:
    """Redirect ``target.name`` to *replacement* while active.

    *target* is a module, class or instance, or a dotted import path resolved
    (and imported) at each activation. ``redirect_attr("pkg.mod.name",
    replacement)`` is ``redirect_attr("pkg.mod", "name", replacement)``, as
    ``mock.patch("pkg.mod.name", replacement)`` splits its target. The
    original raw value is restored by identity when the last activation of
    ``(target, name)`` ends, whatever the order of exits; an attribute that was
    inherited, served by a module ``__getattr__`` or created (``create=True``)
    is deleted again. A *replacement* of :data:`patchscope.DELETE` hides the
    attribute while active (reads raise ``AttributeError``), like
    ``monkeypatch.delattr``.

    ``scope="process"`` rebinds the attribute for every thread (like
    ``mock.patch``, with exact restoration). ``scope="context"`` makes the
    replacement visible only to the activating thread or asyncio task, and to
    what runs in copies of its :mod:`contextvars` context (tasks it creates,
    ``Thread(context=copy_context())``, threads that inherit the context under
    ``sys.flags.thread_inherit_context``) while the scope is open; other
    threads see the original by identity at the same time. Context scope
    works on module and class attributes.

    Thread safety: activations may be entered and ended from any threads in any
    order; all bookkeeping is under one lock. Nothing changes if entry fails.
    """
    if replacement is ONE_PATH:
        replacement = name
        target, name = split_path(target, replacement)
    name = check_name(name)
    if scope != "process" and scope != "context":
        check_scope(scope)
    kind = PathAttrRedirect if type(target) is str else AttrRedirect
    return kind(target, name, replacement, create, scope)


# Twin: the C accelerator's AttrFactory (redirect.c) makes the same redirects,
# with the same checks and messages, in one C call (the form users write in
# every ``with``); keep in sync.
if not TYPE_CHECKING:
    redirect_attr = twin_function(
        redirect_attr, "AttrFactory", AttrRedirect, PathAttrRedirect, frozenset(keyword.kwlist)
    )
