"""redirect_construction: every construction of a class, through any name.

Rebinding ``torch.cuda.Event`` does not reach ``from torch.cuda import Event``,
``torch.cuda.streams.Event`` or references stored elsewhere: each is its own
binding of the class, which a ``setattr`` on ``torch.cuda`` leaves alone. The
class object itself is the one thing every alias shares, so the class's own
``__new__`` is replaced by one shared dispatcher per class (see ``_slots``)
while any construction redirect of it is live. The dispatcher asks, per
call, whether an activation applies in the calling context and otherwise
constructs the class as before. The class keeps its identity, so
``pickle``, ``isinstance`` and ``is`` keep working everywhere.

To the registry a construction redirect is a process-scope redirect of
``cls.__new__`` to the dispatcher; in context scope each activation is also
pushed onto the dispatcher's context variable.
"""

from __future__ import annotations

from typing import Any

from ._cpython import IMMUTABLE
from ._errors import TargetNotWritableError
from ._redirect import Redirect, RedirectCore, activate, check_scope, with_enter, with_exit
from ._registry import entries, section
from ._resolve import describe
from ._slots import dispatcher


class _Construction:
    """What one construction redirect builds, and for which classes (read by the dispatcher)."""

    __slots__ = (
        "base",
        "include_subclasses",
        "process",
        "replacement",
        "subclass_replacement",
    )

    def __init__(
        self, cls: type, replacement: Any, include_subclasses: bool, scope: str, base: list[Any]
    ) -> None:
        self.replacement = replacement
        self.include_subclasses = include_subclasses
        self.process = scope == "process"
        self.subclass_replacement = isinstance(replacement, type) and issubclass(
            replacement, cls
        )
        # The dispatcher's fallback, [the __new__ cls inherits], refreshed at
        # each activation.
        self.base = base


class ConstructionRedirect(Redirect, RedirectCore):
    """Constructions of a class build the replacement while active."""

    __slots__ = ()

    def __init__(self, cls: type, replacement: Any, scope: str, include_subclasses: bool) -> None:
        RedirectCore.__init__(self)
        self._name = "__new__"
        self._create = True
        # Context scope is the dispatcher's business: the registry installs it
        # process-wide and pushes each activation onto the dispatcher's variable.
        self._ctx = False
        self._target = cls
        self._replacement = replacement
        self._scope = scope
        self._value = dispatcher(cls, entries, section)
        disp = self._value.__func__
        # The dispatcher's own key object: its lookups then compare by identity.
        self._key = disp.key
        self._spec = _Construction(cls, replacement, include_subclasses, scope, disp.base)
        if scope == "context":
            self._slot = disp

    def _args(self) -> tuple[Any, ...]:
        return (self._target, self._replacement, self._scope, self._spec.include_subclasses)

    _activate = activate
    __enter__ = with_enter
    __exit__ = with_exit

    def __repr__(self) -> str:
        return (
            f"redirect_construction({describe(self._target)}, {self._replacement!r}, "
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
