"""Redirect objects: what to change, activated any number of times at once.

A :class:`Redirect` holds no per-activation state: each ``with``, decorated
call or :meth:`Redirect.start` creates its own handle (an
:class:`~patchscope.Activation` or an :class:`~patchscope.ActivationGroup`).
``with`` blocks find their handle again by the frame of their ``with``
statement (see ``_pairing``), so the same object works nested, recursively,
from many threads, asyncio tasks and suspended generators (``mock.patch``
keeps that state on the patcher: the same patcher entered twice at once leaks
its patch, or raises "Patch is already started" on newer CPython).

Single-attribute redirects (``redirect_attr``, ``redirect_construction``,
``during``) keep their fields in :class:`RedirectCore`, groups
(``combine``) in :class:`GroupCore`; with the C accelerator both are C
records, and the ``with``/``start()`` operations of redirects with a fixed
target, and of groups of them, are the C twins of the functions below: one
C call from the ``with`` statement to the registry, so that Ctrl-C can only
land before or after it.

Twins: ``activate``, ``with_enter``, ``with_exit``, ``group_activate``,
``group_enter``, ``group_exit``: the ``_c_*`` methods of the C records
(``_c/redirect.c``); keep them in sync.
"""

from __future__ import annotations

import contextvars
import functools
import keyword
import sys
import types
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

from . import _registry
from ._accel import ACCELERATED, speedups
from ._decorate import decorate, wrap_raw
from ._entry import NO_CONFLICT, enter_first, exit_last
from ._errors import AttributeMissingError
from ._handles import Activation, ActivationGroup, stop_all
from ._pairing import ENTER_CONTEXT, pair_enter, pair_exit, push, site_of
from ._registry import (
    _py_enter,
    after,
    enter_locked,
    entries,
    exit_locked,
    section,
    undo_entered,
)
from ._resolve import ABSENT, ONE_PATH, check_name, describe, lookup_mro, resolve, split_path
from ._slots import inherited_new

_T = TypeVar("_T")
_SCOPES = ("process", "context")
_getframe = sys._getframe


def check_scope(scope: object) -> str:
    """Return *scope* if valid, else raise a ValueError listing the valid ones."""
    if scope not in _SCOPES:
        raise ValueError(f"scope must be 'process' or 'context', got {scope!r}")
    assert isinstance(scope, str)
    return scope


# ---------------------------------------------------------------------------
# records


class _PyRedirectCore:
    """The fields of a single-attribute redirect (see ``_py_activate`` for their use)."""

    __slots__ = (
        "__weakref__",
        "_create",
        "_ctx",
        "_handles",
        "_key",
        "_name",
        "_plain",
        "_prepared",
        "_replacement",
        "_scope",
        "_slot",
        "_spare",
        "_spec",
        "_target",
        "_value",
    )

    def __init__(self) -> None:
        self._handles: list[Any] = []  # live with-handles, guarded by the registry lock
        self._key: tuple[int, str] | None = None  # registry key, when the target is fixed
        self._target: Any = None
        self._name: Any = None
        self._value: Any = None  # what an activation installs
        self._replacement: Any = None  # what ``with`` gives and active() shows
        self._scope: Any = None
        self._ctx = False  # activations install through a context slot
        self._create = False
        self._slot: Any = None  # constructions: the dispatcher this context's acts go on
        self._spec: Any = None  # constructions: what is built, and for which classes
        # A plain module or class attribute in process scope: the first and the
        # last activation take the specialized path (see _entry.enter_first).
        self._plain = False
        self._spare: Any = None  # the entry of the last activation, for the next first one
        self._prepared: Any = None  # the slot(s) its context activations installed last


class _PyGroupCore:
    """The fields of a group of redirects."""

    __slots__ = ("__weakref__", "_handles", "_parts", "_value")

    def __init__(self) -> None:
        self._handles: list[Any] = []
        self._parts: tuple[Any, ...] = ()
        self._value: Any = None  # what ``with`` gives, when no part decides it per activation


if TYPE_CHECKING or speedups is None:
    RedirectCore = _PyRedirectCore
    GroupCore = _PyGroupCore
else:
    RedirectCore = speedups.RedirectCore
    GroupCore = speedups.GroupCore


# ---------------------------------------------------------------------------
# the operations (Python twins)


def _target(redirect: Any) -> object:
    """The redirect's target for this activation: fixed, or its dotted path resolved now."""
    if redirect._key is not None:
        return redirect._target
    return resolve(redirect._target)


def _new_activation(redirect: Any, target: object, code: Any, lasti: int) -> Any:
    act = Activation(redirect, redirect._value, code, lasti)
    spec = redirect._spec
    if spec is not None:
        # Constructions: what the dispatcher falls back to, refreshed now.
        spec.base[0] = inherited_new(target)  # type: ignore[arg-type]
        act._slot = redirect._slot
    return act


def _py_activate(redirect: Any, code: Any, lasti: int) -> Any:
    """``_activate`` of single-attribute redirects: a new live Activation."""
    target = _target(redirect)
    act = _new_activation(redirect, target, code, lasti)
    _py_enter(act, target)
    return act


def _py_with_enter(redirect: Any) -> Any:
    """``__enter__`` of single-attribute redirects: registry and pairing in one lock section."""
    frame: Any = _getframe(1)
    site = frame.f_back if frame.f_code is ENTER_CONTEXT else frame
    handles = redirect._handles
    if redirect._plain:
        # A plain module or class attribute in process scope: the first
        # activation takes the specialized path, with no follow-up work.
        target = redirect._target
        act = Activation(redirect, redirect._value, site.f_code, site.f_lasti)
        with section:
            if enter_first(entries, redirect._key, act, target):
                if handles:
                    pair_enter(handles, act, frame)
                else:
                    act._frame = frame
                    handles.append(act)
                return redirect._replacement
            conflict = enter_locked(act, target)
            pair_enter(handles, act, frame)
    else:
        target = _target(redirect)
        act = _new_activation(redirect, target, site.f_code, site.f_lasti)
        with section:
            conflict = enter_locked(act, target)
            pair_enter(handles, act, frame)
    if act._slot is not None or conflict is not NO_CONFLICT:
        try:
            after(act, True, conflict, None)
        except BaseException:
            undo_entered(act, handles)
            raise
    if act._pushed:
        push(handles, act)
    return redirect._replacement


def _py_with_exit(redirect: Any, typ: object, value: object, tb: object) -> None:
    """``__exit__`` of single-attribute redirects: pairing and registry in one lock section."""
    frame = _getframe(1)
    handles = redirect._handles
    error = None
    with section:
        if len(handles) == 1 and handles[0]._frame is frame:
            act = handles.pop()
            act._frame = None
        else:
            act = pair_exit(handles, frame)
        conflict = exit_last(entries, act) if redirect._plain and act.open else None
        if conflict is None:
            conflict, error = exit_locked(act)
    if conflict is not NO_CONFLICT or error is not None or act._slot is not None:
        after(act, False, conflict, error)


def _py_group_activate(group: Any, code: Any, lasti: int) -> Any:
    """``_activate`` of a group: every part, in order, all or nothing."""
    handles: list[Any] = []
    try:
        for part in group._parts:
            handles.append(part._activate(code, lasti))
    except BaseException:
        try:
            stop_all(handles)
        except BaseException:
            # What undoing the parts met (a conflict, a failed restore) is
            # dropped, as the C twin (undo_locked) drops it: the caller gets
            # why the group could not be entered.
            pass
        raise
    value = group._value
    if value is None:
        value = tuple(_handle_value(h) for h in handles)
    if all(type(h) is Activation or type(h) is ActivationGroup for h in handles):
        return ActivationGroup(handles, value)
    return _OwnHandlesGroup(handles, value)


class _OwnHandlesGroup(ActivationGroup):
    """A group with a part whose handle is its own (a Redirect subclass's ``_activate``).

    Such a handle ends through its own ``stop()``, which the C accelerator's
    group stop cannot call under the registry lock, so this group always
    stops its parts one by one, in reverse order, as the Python twin does.
    """

    __slots__ = ()

    def stop(self) -> None:
        """End every part (reverse order); harmless if already stopped."""
        stop_all(self._parts)


def _generic_enter(redirect: Any) -> Any:
    """``__enter__`` from a redirect's ``_activate``: activate, then pair the handle."""
    frame = _getframe(1)
    site = site_of(frame)
    handle = redirect._activate(site.f_code, site.f_lasti)
    handles = redirect._handles
    with section:
        pair_enter(handles, handle, frame)
    if handle._pushed:
        push(handles, handle)
    return _handle_value(handle)


def _generic_exit(redirect: Any, typ: object, value: object, tb: object) -> None:
    """``__exit__`` matching :func:`_generic_enter`: find this with-block's handle and stop it."""
    frame = _getframe(1)
    with section:
        handle = pair_exit(redirect._handles, frame)
    handle.stop()


def _handle_value(handle: Any) -> object:
    if isinstance(handle, Activation):
        return handle.replacement
    return handle.value


if speedups is not None:
    activate: Any = speedups.RedirectCore._c_activate
    with_enter: Any = speedups.RedirectCore._c_with_enter
    with_exit: Any = speedups.RedirectCore._c_with_exit
    group_activate: Any = speedups.GroupCore._c_activate
    group_enter: Any = speedups.GroupCore._c_with_enter
    group_exit: Any = speedups.GroupCore._c_with_exit
else:
    activate = _py_activate
    with_enter = _py_with_enter
    with_exit = _py_with_exit
    group_activate = _py_group_activate
    group_enter = _generic_enter
    group_exit = _generic_exit


def _py_attr_init(
    self: Any, target: object, name: str, replacement: object, create: bool, scope: str
) -> None:
    """``AttrRedirect.__init__``: every field, without RedirectCore.__init__.

    Building one inline in a ``with`` statement is the common form. Twin: the
    constructor of the C RedirectCore, given these arguments.
    """
    self._handles = []
    self._target = target
    self._name = sys.intern(name)  # as setattr interns the names it stores
    self._value = replacement
    self._replacement = replacement
    self._create = create
    self._scope = scope
    ctx = self._ctx = scope == "context"
    self._slot = self._spec = self._spare = self._prepared = None
    if type(target) is str:
        self._key = None
        self._plain = False
    else:
        self._key = (id(target), name)
        tp = type(target)
        self._plain = (tp is types.ModuleType or tp is type) and not ctx and name[:2] != "__"


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
    #: Whether the C accelerator runs this kind's operations (a fixed target).
    _fast = False

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
    _fast = ACCELERATED

    if speedups is None:
        # With the accelerator, RedirectCore's constructor does this (its twin).
        __init__ = _py_attr_init

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


#: AttrRedirect(...) for arguments redirect_attr checked (in C, without parsing them again).
_new_attr: Any = AttrRedirect._new if speedups is not None else AttrRedirect


class PathAttrRedirect(AttrRedirect):
    """A redirect_attr whose target is a dotted path, imported and resolved at each activation."""

    __slots__ = ()
    _fast = False
    _activate = _py_activate
    __enter__ = _py_with_enter
    __exit__ = _py_with_exit


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
    if type(name) is not str or name not in _checked_names:
        _checked_names.add(check_name(name))
    if scope != "process" and scope != "context":
        check_scope(scope)
    redirect: Redirect
    if type(target) is str:
        redirect = PathAttrRedirect(target, name, replacement, bool(create), scope)
        return redirect
    redirect = _new_attr(target, name, replacement, create is True or bool(create), scope)
    return redirect


#: Attribute names that passed check_name (a set lookup is cheaper than the check).
_checked_names: set[str] = set()

if speedups is not None and not TYPE_CHECKING:
    # The same function in C (it is the form users write in every ``with``):
    # same arguments, checks and messages; __doc__, __signature__ and
    # __wrapped__ are this one's.
    redirect_attr = functools.update_wrapper(
        speedups.AttrFactory(
            redirect_attr, AttrRedirect, PathAttrRedirect, frozenset(keyword.kwlist)
        ),
        redirect_attr,
    )


# ---------------------------------------------------------------------------
# combine


class Combined(Redirect, GroupCore):
    """Several redirects entered in order (all or nothing), ended in reverse."""

    __slots__ = ()

    def __init__(self, parts: tuple[Redirect, ...]) -> None:
        GroupCore.__init__(self)
        self._parts = parts
        # What ``with`` gives, when no part decides it per activation.
        cores: list[Any] = [p for p in parts if isinstance(p, RedirectCore)]
        if len(cores) == len(parts) and all(p._replacement is not ABSENT for p in cores):
            self._value = tuple(p._replacement for p in cores)

    def _args(self) -> tuple[Any, ...]:
        return (self._parts,)

    _activate = _py_group_activate

    def __repr__(self) -> str:
        return f"combine({', '.join(map(repr, self._parts))})"


class FastCombined(Combined):
    """A group whose parts all have fixed targets: entered and ended by the C accelerator."""

    __slots__ = ()
    _fast = True
    _activate = group_activate
    __enter__ = group_enter
    __exit__ = group_exit


def combine(*redirects: Redirect) -> Redirect:
    """One redirect made of several: entered in order, all or nothing; ended in reverse.

    ``with combine(a, b) as (va, vb):``. If entering a part fails, the parts
    already entered are ended before the error propagates.

    Thread safety: as for every :class:`Redirect`.
    """
    for r in redirects:
        if not isinstance(r, Redirect):
            raise TypeError(f"combine() takes Redirect objects, got {type(r).__name__} {r!r}")
    fast = ACCELERATED and all(type(r)._fast for r in redirects)
    return (FastCombined if fast else Combined)(tuple(redirects))


# ---------------------------------------------------------------------------
# deferred and during


class Deferred(Redirect):
    """A redirect chosen afresh at each activation by a factory (None: install nothing)."""

    __slots__ = ("__weakref__", "_factory", "_handles", "_scope")

    def __init__(self, factory: Callable[[], Redirect | None], scope: str = "process") -> None:
        self._factory = factory
        self._handles: list[Any] = []
        self._scope = scope

    def _args(self) -> tuple[Any, ...]:
        return (self._factory, self._scope)

    def _activate(self, code: Any, lasti: int) -> Activation | ActivationGroup:
        redirect = self._factory()
        if redirect is None:
            return ActivationGroup([], None)
        return redirect._activate(code, lasti)  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"deferred({self._factory!r})"


def deferred(factory: Callable[[], Redirect | None], scope: str = "process") -> Redirect:
    """A Redirect that calls *factory* at each activation and activates its result.

    Used where what to redirect depends on run-time state (the active device);
    ``None`` from the factory means "install nothing this time". *scope* is
    the scope of what the factory returns, for :func:`during`.
    """
    return Deferred(factory, check_scope(scope))


def scope_of(redirect: Redirect) -> str:
    """``"context"`` when everything *redirect* installs is context-scoped, else ``"process"``."""
    if isinstance(redirect, Combined):
        parts = {scope_of(part) for part in redirect._parts}
        return "context" if parts == {"context"} else "process"
    scope = getattr(redirect, "_scope", None)
    return "context" if scope == "context" else "process"


class During(Redirect, RedirectCore):
    """``owner.method_name`` is wrapped so that *inner* is active while it runs."""

    __slots__ = ("_gated", "_inner")

    def __init__(self, owner: object, name: str, inner: Redirect) -> None:
        RedirectCore.__init__(self)
        self._target = owner
        self._name = name
        self._inner = inner
        self._replacement = ABSENT  # activations show their wrapper
        # Context-scoped redirects reach only calls made in the activating
        # context, so the wrapper that activates them is installed in the same
        # scope: other threads and tasks keep calling the original.
        # Context slots exist for module and class attributes only: on any
        # other object the wrapper is installed for every thread, and lets
        # only calls from the activating context through (see _ContextGate).
        slotted = isinstance(owner, (str, type, types.ModuleType))  # str: see _activate
        self._gated = not slotted and scope_of(inner) == "context"
        self._scope = scope_of(inner) if slotted else "process"
        self._ctx = self._scope == "context"

    def _args(self) -> tuple[Any, ...]:
        return (self._target, self._name, self._inner)

    def _activate(self, code: Any, lasti: int) -> Activation:
        owner = self._target
        if isinstance(owner, str):
            # Whether a context slot can hold the wrapper depends on what the
            # path names now (a class or module, or another object).
            return During(resolve(owner), self._name, self._inner)._activate(code, lasti)
        if isinstance(owner, type):
            raw = lookup_mro(owner, self._name)
        else:
            raw = getattr(owner, "__dict__", {}).get(self._name, ABSENT)
            if raw is ABSENT:
                raw = getattr(owner, self._name, ABSENT)
        if raw is ABSENT:
            raise AttributeMissingError(
                f"{describe(owner)} has no attribute {self._name!r} to wrap; "
                "during() wraps an existing method or constructor: check the name"
            )
        value = wrap_raw(self._inner, raw)
        if self._gated:
            value = _ContextGate.around(value, raw)
        act = Activation(self, value, code, lasti)
        _registry.enter(act, owner)
        return act

    def __repr__(self) -> str:
        owner = self._target if isinstance(self._target, str) else describe(self._target)
        return f"during({owner}, {self._name!r}, {self._inner!r})"


class _ContextGate:
    """Which gates the current context opened: a wrapper on an instance runs only there.

    An instance has no context slot, so ``during()`` installs its wrapper on
    it for every thread; the gate around the wrapper lets calls from the
    activating context (and copies of it) run the wrapper, and sends every
    other call to the original. The context holds weak references, so a gate
    whose activation ended and was dropped leaves nothing alive; dead ones are
    pruned at the context's next opening.
    """

    __slots__ = ("__weakref__",)

    _opened: contextvars.ContextVar[tuple[weakref.ref[_ContextGate], ...]] = contextvars.ContextVar(
        "patchscope_during_gates", default=()
    )

    @classmethod
    def around(cls, wrapper: Callable[..., Any], original: Any) -> Any:
        """Open a new gate in this context; the callable that goes through it."""
        token = cls()
        opened = cls._opened
        live = tuple(ref for ref in opened.get() if ref() is not None)
        opened.set((*live, weakref.ref(token)))

        def gated(*args: Any, **kwargs: Any) -> Any:
            for ref in opened.get():
                if ref() is token:
                    return wrapper(*args, **kwargs)
            return original(*args, **kwargs)

        return functools.update_wrapper(gated, original)


def during(owner: object, method_name: str, *redirects: Redirect) -> Redirect:
    """Wrap ``owner.method_name`` so that *redirects* are active while it runs.

    For code you do not own: ``with during(ThirdPartyModel, "__init__",
    device_events()): ...`` makes every construction inside the block run with
    the redirects. Ending it restores the exact original (by identity in
    ``vars(owner)``, or deletes the wrapper if the method was inherited).

    Thread safety: as for every :class:`Redirect`. The wrapper has the scope
    of *redirects*: when all of them are context-scoped (the default of
    ``redirect_attr`` with ``scope="context"``, of ``device_events()`` and
    ``device_namespace()``), only calls made in the activating thread or
    asyncio task run with them, and calls from other contexts run the
    original at the same time (on an instance, which has no context slot, the
    wrapper is on the instance for every thread and sends their calls to the
    original). If any of them is process-scoped, the wrapper is installed,
    and runs them, for every thread.
    """
    method_name = check_name(method_name)
    if not redirects:
        raise TypeError(f"during({describe(owner)}, {method_name!r}) needs at least one redirect")
    inner = redirects[0] if len(redirects) == 1 else combine(*redirects)
    if not isinstance(inner, Redirect):
        raise TypeError(f"during() takes Redirect objects, got {type(inner).__name__} {inner!r}")
    return During(owner, method_name, inner)
