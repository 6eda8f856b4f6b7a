"""Redirects built around others: ``deferred`` (chosen at each activation) and ``during``.

``deferred(factory)`` activates whatever its factory returns at that moment
(the active device decides, in ``patchscope.torch``). ``during(owner,
name, *redirects)`` wraps an existing method or constructor in place, so
that the redirects are active while it runs, for code you do not own.
"""

from __future__ import annotations

import contextvars
import functools
import types
import weakref
from collections.abc import Callable
from typing import Any

from . import _registry
from ._decorate import wrap_raw
from ._errors import AttributeMissingError
from ._group import Combined, combine
from ._handles import Activation, ActivationGroup
from ._redirect import Redirect, RedirectCore, check_scope
from ._resolve import ABSENT, check_name, describe, lookup_mro, resolve
from ._slots import seen_through


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

    For redirects whose target or replacement depends on run-time state (the
    active device, a setting read at call time): ``deferred(lambda:
    redirect_attr(mod, "name", pick()))``. ``None`` from the factory means
    "install nothing this time" (the handle is an empty
    :class:`ActivationGroup`). *scope* is the scope of what the factory
    returns; :func:`during` uses it to decide where its wrapper is installed.

    Thread safety: as for every :class:`Redirect`. *factory* is called once
    per activation, in the activating thread, outside the registry's lock;
    it may run in several threads at once.
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
            # Through a context slot of ours (a context-scoped during() of the
            # same method is live): what the method is where this wrapper
            # will be seen, this context or every context.
            raw = seen_through(lookup_mro(owner, self._name), self._ctx)
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
