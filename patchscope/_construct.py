"""redirect_construction: every construction of a class, through any name.

Rebinding ``torch.cuda.Event`` does not reach ``from torch.cuda import Event``,
``torch.cuda.streams.Event`` or references stored elsewhere (ANCHORS). The
class object itself is the one thing every alias shares, so the class's own
``__new__`` is replaced by one shared dispatcher per class while any
construction redirect of it is live. The dispatcher asks, per call, whether an
activation applies in the calling context and otherwise runs the original
``__new__``. The class keeps its identity, so ``pickle``, ``isinstance`` and
``is`` keep working everywhere.
"""

from __future__ import annotations

import contextvars
import copyreg
import inspect
import sys
import weakref
from typing import Any

from . import _registry
from ._cpython import IMMUTABLE
from ._errors import TargetNotWritableError
from ._records import speedups
from ._redirect import Redirect, check_scope
from ._registry import Activation, activate, enter_with, exit_with, object_new
from ._resolve import OBJECT_NEW, OWN, describe

# Python-level callers of cls.__new__(cls) that rebuild an existing object:
# copy.copy/deepcopy and the pure-Python pickler go through these.
_REBUILDERS = frozenset(
    {copyreg.__newobj__.__code__, copyreg.__newobj_ex__.__code__}  # type: ignore[attr-defined]
)

_NewDispatcher: Any = speedups.NewDispatcher if speedups is not None else None

_dispatchers: weakref.WeakKeyDictionary[type, _Dispatcher] = weakref.WeakKeyDictionary()


class _Construction:
    """What one construction redirect builds, and for which classes."""

    __slots__ = ("include_subclasses", "process", "replacement", "subclass_replacement")

    def __init__(self, cls: type, replacement: Any, include_subclasses: bool, scope: str) -> None:
        self.replacement = replacement
        self.include_subclasses = include_subclasses
        self.process = scope == "process"
        self.subclass_replacement = isinstance(replacement, type) and issubclass(
            replacement, cls
        )


class _Dispatcher:
    """The ``__new__`` installed on a class while any construction redirect is live.

    One per class, shared by all activations, so nested and concurrent
    activations install the identical object and never stack wrappers.
    """

    __slots__ = ("__weakref__", "base", "new", "var")

    def __init__(self, cls: type) -> None:
        self.var: contextvars.ContextVar[tuple[Activation, ...]] = contextvars.ContextVar(
            f"patchscope:{cls.__qualname__}.__new__", default=()
        )
        # [the __new__ that cls inherits]; refreshed at each activation.
        self.base: list[Any] = [object.__new__]
        var_get = self.var.get
        entries_get = _registry._entries.get
        key = (id(cls), "__new__")
        base = self.base
        # Weak: the dispatcher is cached per class and must not keep it alive.
        cls_ref = weakref.ref(cls)
        shown_cls = cls
        del cls

        def __new__(klass: type, *args: Any, **kwargs: Any) -> Any:
            cls: Any = cls_ref()
            entry = entries_get(key)
            acts = var_get()
            # This context's innermost live activation wins, then the most
            # recent process-scope one, then the original __new__.
            if acts:
                for act in reversed(acts):
                    if act.open:
                        built = _build(cls, act._spec, klass, args, kwargs)
                        if built is not _NOT_APPLIED:
                            return built
                        break
            if entry is not None:
                for act in reversed(entry.stack):
                    if act.open and act._spec.process:
                        built = _build(cls, act._spec, klass, args, kwargs)
                        if built is not _NOT_APPLIED:
                            return built
                        break
                if entry.kind == OWN:
                    raw = entry.original
                    func: Any = raw.__func__ if isinstance(raw, staticmethod) else raw
                    return func(klass, *args, **kwargs)
            base_new = base[0] if klass is cls else super(cls, klass).__new__  # type: ignore[misc]
            if base_new is OBJECT_NEW:
                if args or kwargs:
                    # With a __new__ installed, object.__new__ rejects extra
                    # arguments; without one it ignores them when __init__
                    # is overridden.
                    return object_new(klass, *args, **kwargs)
                return OBJECT_NEW(klass)
            return base_new(klass, *args, **kwargs)

        __new__.__qualname__ = f"{shown_cls.__qualname__}.__new__"
        try:
            shown = inspect.signature(shown_cls)
        except (TypeError, ValueError):
            pass
        else:
            # inspect.signature(cls) reads __new__'s signature minus its first
            # parameter: keep showing the class's own signature everywhere.
            first = inspect.Parameter("cls", inspect.Parameter.POSITIONAL_ONLY)
            __new__.__signature__ = shown.replace(  # type: ignore[attr-defined]
                parameters=[first, *shown.parameters.values()]
            )
        del shown_cls
        installed: Any = __new__
        if _NewDispatcher is not None:
            # The same dispatch, in C for calls no activation applies to.
            installed = _NewDispatcher(__new__, cls_ref, key, self.var, base, _REBUILDERS)
            for attr in ("__name__", "__qualname__", "__module__", "__doc__"):
                setattr(installed, attr, getattr(__new__, attr))
            installed.__signature__ = inspect.signature(__new__)
        self.new: staticmethod[..., Any] = staticmethod(installed)


_NOT_APPLIED: Any = object()


def _build(
    cls: type, how: _Construction, klass: type, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """Build the replacement if *how* applies to *klass*, else _NOT_APPLIED."""
    if not (klass is cls or (how.include_subclasses and klass is not how.replacement)):
        return _NOT_APPLIED
    # copy/deepcopy rebuild an existing instance: build the real class. Frame
    # 2 is the caller of cls.__new__ (this helper is 0, the dispatcher 1).
    if sys._getframe(2).f_code in _REBUILDERS:
        return _NOT_APPLIED
    replacement = how.replacement
    if how.subclass_replacement:
        # type.__call__ then runs replacement.__init__ exactly once.
        return replacement.__new__(replacement, *args, **kwargs)
    return replacement(*args, **kwargs)


def _dispatcher_for(cls: type) -> _Dispatcher:
    # Under the registry lock: two dispatchers for one class would each watch
    # their own ContextVar while only one of them is installed.
    with _registry._lock:
        d = _dispatchers.get(cls)
        if d is None:
            d = _dispatchers[cls] = _Dispatcher(cls)
        return d


class ConstructionRedirect(Redirect):
    """Constructions of a class build the replacement while active."""

    __slots__ = ("_disp",)

    def __init__(self, cls: type, replacement: Any, scope: str, include_subclasses: bool) -> None:
        super().__init__()
        self._name = "__new__"
        self._create = True
        # Context scope is the dispatcher's business: the registry installs it
        # process-wide and pushes the activation onto the dispatcher's variable.
        self._ctx = False
        self._target = cls
        self._key = (id(cls), "__new__")
        self._replacement = replacement
        self._scope = scope
        self._spec = _Construction(cls, replacement, include_subclasses, scope)
        self._disp = _dispatcher_for(cls)
        self._value = self._disp.new
        self._base = self._disp.base
        if scope == "context":
            self._slot = self._disp  # the registry clears it from this context on exit
        # A class's own __new__ is re-read cheaply and the registry entry is
        # recycled between activations (see _registry._fresh_entry).
        self._plain = type(cls) is type

    def _args(self) -> tuple[Any, ...]:
        return (self._target, self._replacement, self._scope, self._spec.include_subclasses)

    def _prepare(self, act: Activation) -> None:
        """Refresh what the dispatcher falls back to, and tag *act* with what it builds.

        (The C accelerator does the same without calling this.)
        """
        base = self._base
        for klass in self._target.__mro__[1:]:
            if "__new__" in klass.__dict__:
                raw = klass.__dict__["__new__"]
                base[0] = raw.__func__ if isinstance(raw, staticmethod) else raw
                break
        act._spec = self._spec
        act._slot = self._slot

    # One lock section on entry and one on exit, as for redirect_attr. In
    # context scope the registry pushes each activation onto disp.var.
    _activate = activate
    __enter__ = enter_with
    __exit__ = exit_with

    def __repr__(self) -> str:
        return (
            f"redirect_construction({describe(self._target)}, {self._spec.replacement!r}, "
            f"scope={self._scope!r})"
        )


def redirect_construction(
    cls: type,
    replacement: Any,
    *,
    scope: str = "context",
    include_subclasses: bool = False,
) -> Redirect:
    """Every construction ``cls(*args, **kwargs)`` builds ``replacement(*args, **kwargs)``.

    Reaches every name bound to the class (``from torch.cuda import Event``,
    ``torch.cuda.streams.Event``, references stored on other objects), because
    it intercepts the class's own ``__new__``; the identity of *cls* never
    changes. Subclasses construct normally unless ``include_subclasses=True``.
    A *replacement* that is a subclass of *cls* is built with its own
    ``__init__`` run exactly once.

    Edges: copying an instance (``copy``/``deepcopy``) inside the scope builds
    the real class; ``pickle.loads`` of an instance of *cls* in the activating
    context calls ``cls.__new__`` from C and so builds the replacement (unpickle
    outside the scope). ``inspect.signature(cls)`` is unchanged throughout,
    in every context.

    Thread safety: ``scope="context"`` (default) affects only the activating
    thread/asyncio task; other threads construct the real class at the same
    time. ``scope="process"`` affects every thread. Activations may end in any
    order from any thread.
    """
    if not isinstance(cls, type):
        raise TypeError(
            f"redirect_construction() needs a class, got {type(cls).__name__} {cls!r}; "
            "use redirect_attr() for other callables"
        )
    if cls.__flags__ & IMMUTABLE:
        raise TargetNotWritableError(
            f"cannot intercept construction of {describe(cls)}: it is an immutable "
            "builtin or extension type whose __new__ cannot be replaced; redirect the "
            "name it is called through with redirect_attr() instead"
        )
    if not callable(replacement):
        raise TypeError(
            f"redirect_construction({describe(cls)}, ...): the replacement must be "
            f"callable, got {type(replacement).__name__} {replacement!r}"
        )
    return ConstructionRedirect(cls, replacement, check_scope(scope), bool(include_subclasses))
