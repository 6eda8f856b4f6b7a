"""Groups of redirects: ``combine``, entered in order, all or nothing, and ended in reverse.

A group's fields live in :class:`GroupCore` (a C record with the
accelerator). Where every part is a redirect the accelerator runs (a fixed
target), the group's ``with``/``start()`` operations are the C twins of the
functions here: one C call enters every part, so that Ctrl-C lands before
or after the whole group.

Twins: ``group_activate``, ``group_enter``, ``group_exit``: the ``_c_*``
methods of the C ``GroupCore`` (``_c/redirect.c``); keep them in sync.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._accel import ACCELERATED, twin
from ._handles import Activation, ActivationGroup, stop_all
from ._redirect import Redirect, RedirectCore, _generic_enter, _generic_exit, handle_value
from ._resolve import ABSENT


# Twin: the C accelerator's GroupCore record (records.c); keep in sync.
class _PyGroupCore:
    """The fields of a group of redirects."""

    __slots__ = ("__weakref__", "_handles", "_parts", "_value")

    def __init__(self) -> None:
        self._handles: list[Any] = []
        self._parts: tuple[Any, ...] = ()
        self._value: Any = None  # what ``with`` gives, when no part decides it per activation


if TYPE_CHECKING:
    GroupCore = _PyGroupCore
else:
    GroupCore = twin(_PyGroupCore, "GroupCore")


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
            # why the group could not be entered. A conflict a part met
            # entering was reported as it entered (what it overwrote stays
            # lost); the C twin reports those after undoing (after_undo).
            pass
        raise
    value = group._value
    if value is None:
        value = tuple(handle_value(h) for h in handles)
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


# Twins: the C accelerator's GroupCore._c_* (redirect.c); keep in sync.
group_activate: Any = twin(_py_group_activate, "GroupCore._c_activate")
group_enter: Any = twin(_generic_enter, "GroupCore._c_with_enter")
group_exit: Any = twin(_generic_exit, "GroupCore._c_with_exit")


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
    _fast = ACCELERATED
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
    fast = all(type(r)._fast for r in redirects)
    return (FastCombined if fast else Combined)(tuple(redirects))
