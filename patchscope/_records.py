"""The registry's records: activations, entries, redirect state, module slots.

They are defined here in Python. When the optional C extension
``patchscope._speedups`` is built (``pip install`` builds it where a C
compiler is available), its classes of the same shape are used instead, and
the registry's ``with`` fast path runs in C too (see ``_speedups.c``); the
environment variable ``PATCHSCOPE_PURE_PYTHON=1`` keeps the Python ones.
Both behave identically and the test suite runs against both.
:data:`ACCELERATED` says which are in use.
"""

from __future__ import annotations

import contextvars
import importlib
import os
import threading
import types
import weakref
from typing import TYPE_CHECKING, Any

from ._resolve import ABSENT, bind

_get_ident = threading.get_ident


class _PyActivationBase:
    """The fields of an activation (see ``_registry.Activation``)."""

    __slots__ = (
        "__weakref__",
        "_code",
        "_ctx",
        "_entry",
        "_frame",
        "_lasti",
        "_pushed",
        "_redirect",
        "_slot",
        "_spec",
        "_value",
        "open",
        "thread_id",
    )

    def __init__(self, redirect: Any, value: object, code: Any, lasti: int) -> None:
        self._redirect = redirect
        self._value = value  # what the registry installs
        self._code = code
        self._lasti = lasti
        self.thread_id = _get_ident()
        self.open = True
        self._entry: _PyEntry | None = None
        self._slot: Any = None  # the context-local holder (anything with a ``var``)
        self._spec: Any = None  # extra data of the redirect kind (constructions)
        self._ctx = False  # installed through a context slot
        self._pushed = False  # paired through the context's with-stack
        self._frame: Any = None  # the frame of the with-statement that entered it


class _PyEntry:
    """One per ``(target, name)`` while anything redirects it."""

    __slots__ = (
        "installed",
        "key",
        "kind",
        "n_context",
        "name",
        "original",
        "parked",
        "slot",
        "stack",
        "target",
        "written",
    )

    def __init__(self, target: object, name: str, kind: int, original: object) -> None:
        self.target = target
        self.name = name
        self.key = (id(target), name)  # the registry's key
        self.kind = kind
        self.original = original
        self.stack: list[Any] = []
        self.n_context = 0
        self.slot: Any = None
        self.written = False  # a process value was written into the target
        self.installed: object = ABSENT  # what we last wrote, for conflict checks
        # A module's (own class, private subclass, slot) from the last context
        # activation, so the next one of a recycled entry installs cheaply.
        self.parked: tuple[type, type, Any] | None = None


class _PyRedirectBase:
    """The state every Redirect has; subclasses fill in what applies to them."""

    __slots__ = (
        "_base",
        "_create",
        "_ctx",
        "_handles",
        "_key",
        "_name",
        "_plain",
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
        self._key: tuple[int, str] | None = None  # registry key, when fixed
        self._target: Any = None
        self._value: Any = None  # what an activation installs
        self._spare: Any = None  # a recycled registry entry (single attributes)
        self._spec: Any = None  # set by redirects that prepare each activation
        self._replacement: Any = None
        self._name: Any = None
        self._scope: Any = None
        self._slot: Any = None  # what each activation is pushed onto in its context
        self._base: Any = None  # constructions: [the __new__ the class inherits]
        self._ctx = False
        self._plain = False  # a plain module/class attribute: entries are recycled
        self._create = False


class _PyModuleSlot:
    """Data descriptor on a module's private subclass; the value stays in its dict."""

    __slots__ = ("dict", "name", "var")

    def __init__(self, module: types.ModuleType, name: str) -> None:
        self.dict = module.__dict__
        self.name = name
        self.var: contextvars.ContextVar[tuple[Any, ...]] = contextvars.ContextVar(
            f"patchscope:{module.__name__}.{name}", default=()
        )

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        acts = self.var.get()
        if acts:
            for act in reversed(acts):
                if act.open:
                    return act._value
        try:
            return self.dict[self.name]
        except KeyError:
            # module_getattro turns this into the usual message, or calls the
            # module's __getattr__ exactly as without the slot.
            raise AttributeError(self.name) from None

    def __set__(self, instance: object, value: object) -> None:
        self.dict[self.name] = value

    def __delete__(self, instance: object) -> None:
        try:
            del self.dict[self.name]
        except KeyError:
            raise AttributeError(self.name) from None


class _PyClassSlotBase:
    """Non-data descriptor in a class's ``__dict__``; binds like the raw value would.

    Subclasses provide ``_chosen(instance, owner)``, the raw value this
    context sees (ABSENT when none), and ``_inherited_get(instance, owner)``,
    what reading gives then (the C version calls only the latter).
    """

    __slots__ = ("cls_ref", "fallback", "name", "var")

    def __init__(self, cls: type, name: str) -> None:
        self.cls_ref = weakref.ref(cls)  # the class may die; its slots die with it
        self.name = name
        self.fallback: object = ABSENT  # the process value: a replacement or the original
        self.var: contextvars.ContextVar[tuple[Any, ...]] = contextvars.ContextVar(
            f"patchscope:{cls.__qualname__}.{name}", default=()
        )

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        value = self._chosen(instance, owner)
        if value is ABSENT:
            return self._inherited_get(instance, owner)
        return bind(value, instance, owner)

    def _chosen(self, instance: object, owner: type | None) -> Any:
        raise NotImplementedError

    def _inherited_get(self, instance: object, owner: type | None) -> Any:
        raise NotImplementedError


def _load_speedups() -> Any:
    if os.environ.get("PATCHSCOPE_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        return importlib.import_module("patchscope._speedups")
    except ImportError:  # not built: the Python classes above serve
        return None


#: The C extension module when it is in use, else None.
speedups: Any = _load_speedups()
#: Whether the C accelerator is in use.
ACCELERATED = speedups is not None

if TYPE_CHECKING or not ACCELERATED:
    ActivationBase = _PyActivationBase
    Entry = _PyEntry
    RedirectBase = _PyRedirectBase
    ModuleSlot = _PyModuleSlot
    ClassSlotBase = _PyClassSlotBase
else:
    ActivationBase = speedups.ActivationBase
    Entry = speedups.Entry
    RedirectBase = speedups.RedirectBase
    ModuleSlot = speedups.ModuleSlot
    ClassSlotBase = speedups.ClassSlotBase
