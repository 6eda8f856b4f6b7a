"""Groups of redirects: ``combine``, entered in order, all or nothing, and ended in reverse.

A group's fields live in :class:`~patchscope._redirect.GroupCore` (a C
record with the accelerator). Where the core runs every part (a
single-attribute redirect with a fixed target, or a group of such), the
group is entered by the core's own operations (``_redirect.activate_locked``
and its C twin): every part under one lock section, then the work after it
once (one write per context variable, the conflict warnings, the restore
errors); with the accelerator that is one C call, so Ctrl-C lands before or
after the whole group. A group with a part that activates itself (its own
``_activate``: ``deferred``, ``during``, a dotted path, a Redirect subclass)
enters its parts one by one instead, each through its own ``_activate``;
:func:`core_runs` is where that is decided.

Twins: ``group_activate``, ``group_enter``, ``group_exit``: the ``_c_*``
methods of the C ``GroupCore`` (``_c/redirect.c``), twins of
``_redirect._py_activate``, ``_py_with_enter`` and ``_py_with_exit``; keep
them in sync.
"""

from __future__ import annotations

from typing import Any

from ._accel import twin
from ._handles import Activation, ActivationGroup, stop_all
from ._redirect import (
    GroupCore,
    Redirect,
    RedirectCore,
    _generic_enter,
    _generic_exit,
    _py_activate,
    _py_with_enter,
    _py_with_exit,
    activate,
    handle_value,
)
from ._resolve import ABSENT

# Twins: the C accelerator's GroupCore._c_* (redirect.c); keep in sync.
group_activate: Any = twin(_py_activate, "GroupCore._c_activate")
group_enter: Any = twin(_py_with_enter, "GroupCore._c_with_enter")
group_exit: Any = twin(_py_with_exit, "GroupCore._c_with_exit")


def core_runs(redirect: Redirect) -> bool:
    """Whether the core's own operations enter *redirect* (see the module docstring).

    True for the kinds whose ``_activate`` is the core's: a single-attribute
    redirect with a fixed target, and a group all of whose parts are such.
    The one place that decides it; the decorators ask it too (the C twins of
    their guards take only such redirects).
    """
    run = type(redirect)._activate
    return run is activate or run is group_activate


class Combined(Redirect, GroupCore):
    """Several redirects entered in order (all or nothing), ended in reverse.

    Every part is run by the core (see :func:`core_runs`): entered under one
    lock section, with one round of work after it.
    """

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

    _activate = group_activate
    __enter__ = group_enter
    __exit__ = group_exit

    def __repr__(self) -> str:
        return f"combine({', '.join(map(repr, self._parts))})"


class PartwiseCombined(Combined):
    """A group with a part that activates itself: its parts are entered one by one."""

    __slots__ = ()

    def _activate(self, code: Any, lasti: int) -> Any:
        """Every part through its own ``_activate``, in order, all or nothing."""
        handles: list[Any] = []
        try:
            for part in self._parts:
                handles.append(part._activate(code, lasti))
        except BaseException:
            try:
                stop_all(handles)
            except BaseException:
                # What undoing the parts met (a conflict, a failed restore) is
                # dropped, as the core's undo_locked drops it: the caller gets
                # why the group could not be entered.
                pass
            raise
        value = self._value
        if value is None:
            value = tuple(handle_value(h) for h in handles)
        if all(type(h) is Activation or type(h) is ActivationGroup for h in handles):
            return ActivationGroup(handles, value)
        return _OwnHandlesGroup(handles, value)

    __enter__ = _generic_enter
    __exit__ = _generic_exit


class _OwnHandlesGroup(ActivationGroup):
    """A group with a part whose handle is its own (a Redirect subclass's ``_activate``).

    Such a handle ends through its own ``stop()``, which the registry cannot
    call under its lock, so this group stops its parts one by one, in
    reverse order.
    """

    __slots__ = ()

    def stop(self) -> None:
        """End every part (reverse order); harmless if already stopped."""
        stop_all(self._parts)


def combine(*redirects: Redirect) -> Redirect:
    """One redirect made of several: entered in order, all or nothing; ended in reverse.

    ``with combine(a, b) as (va, vb):``. If entering a part fails, the parts
    already entered are ended before the error propagates.

    Thread safety: as for every :class:`Redirect`.
    """
    for r in redirects:
        if not isinstance(r, Redirect):
            raise TypeError(f"combine() takes Redirect objects, got {type(r).__name__} {r!r}")
    kind = Combined if all(core_runs(r) for r in redirects) else PartwiseCombined
    return kind(tuple(redirects))
