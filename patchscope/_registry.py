"""The table of live activations, its lock, and entering and ending activations.

``entries`` maps ``(id(target), name)`` to the :class:`~patchscope._entry.Entry`
of every attribute something redirects; ``lock`` guards it, the entries,
the targets' redirected attributes and the with-block pairing. It is
re-entrant, since reading an attribute can run a module ``__getattr__`` that
imports code that patches.

Fault safety, in the order things happen:

* entering registers the activation (and its entry) *before* the target is
  changed, and ending changes the target back *before* the activation is
  unregistered, so the registry always lists everything that is installed:
  stopping what :func:`active` lists restores everything, even after a
  signal landed between two bytecodes of this code (pure Python);
* the lock is only taken by ``with section:`` statements here, which take
  it and arrange its release in one step, so a signal never leaves it held;
* the C twins of :func:`enter` and :func:`exit` (``registry.c``) run without
  a Python-level step, so no signal handler runs half way through them, and
  an exit that waits for the lock finishes before a signal's exception is
  raised;
* the lock is held across ``fork()``, so a child never inherits a registry
  that another thread was half way through changing.

Twins: ``enter`` and ``exit`` are implemented in C as well; keep them in
sync. This module is the reference.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import types
import warnings
from typing import Any

from ._accel import twin
from ._entry import NO_CONFLICT, Entry, capture, show
from ._errors import (
    RedirectConflictWarning,
    RestoreError,
    TargetNotWritableError,
    UnsupportedTargetError,
)
from ._resolve import ABSENT, OWN, SETATTR, describe

# Twin: the C accelerator's RLock (lock.c), which its operations take without
# a Python-level step.
lock: Any = twin(threading.RLock, "RLock")()
entries: dict[tuple[int, str], Any] = {}


class _Section:
    """``with section:`` takes *lock* and never leaves it held after a signal.

    CPython 3.14 calls ``__enter__`` with a plain CALL that runs pending
    signal handlers when it returns, before the ``with`` statement's handler
    is in place (CPython gh-148874, fixed in 3.15): a KeyboardInterrupt there
    would leave ``with lock:`` holding the lock with no ``__exit__`` to come.
    Here the acquire happens inside this Python ``__enter__``, where such an
    exception is caught and the acquire undone; returning from a Python
    ``__enter__`` runs no handlers.
    """

    __slots__ = ("lock",)

    def __init__(self, lock: Any) -> None:
        self.lock = lock

    def __enter__(self) -> None:
        lock = self.lock
        held = lock._recursion_count()
        try:
            lock.acquire()
        except BaseException:
            if lock._recursion_count() > held:  # acquired, then interrupted
                lock.release()
            raise

    def __exit__(self, *exc_info: object) -> None:
        self.lock.release()


#: What the Python twins take the lock with: the lock itself, or on 3.14 a
#: section that copes with the interpreter's gap (see _Section).
section: Any = _Section(lock) if sys.version_info[:2] == (3, 14) else lock
_getframe = sys._getframe


# The parent holds the lock while it forks, so no other thread is half way
# through a registry change; both sides let go of it afterwards (the child
# has only the forking thread, which is the holder).
os.register_at_fork(before=lock.acquire, after_in_parent=lock.release, after_in_child=lock.release)


def enter_locked(act: Any, target: object) -> object:
    """Register *act* on ``target.<its redirect's name>`` and show it; under the lock.

    All-or-nothing: if the target refuses the change, everything is undone
    and TargetNotWritableError is raised. Returns a conflicting value found
    in the target, or NO_CONFLICT.
    """
    redirect = act._redirect
    name = redirect._name
    key = redirect._key
    if key is None or target is not redirect._target:
        key = (id(target), name)
    entry = entries.get(key)
    if entry is not None and not entry.stack:
        # Left empty by an exit a signal interrupted (pure Python): finish it.
        if entry.slot is not None:
            show(entry)
        if entries.get(key) is entry:
            del entries[key]
        entry = None
    if entry is None:
        kind, original, installed = capture(target, name, redirect._create)
        entry = Entry(target, name, kind, original, installed)
        fresh = True
    else:
        fresh = False
    if act._ctx and (not isinstance(target, (types.ModuleType, type)) or entry.kind == SETATTR):
        raise UnsupportedTargetError(
            f"cannot redirect attribute {name!r} of {describe(target)} with "
            "scope='context': context-local redirects work on module and class "
            "attributes stored in __dict__; redirect the class attribute instead, "
            "or use scope='process'"
        )
    if redirect._spec is not None:
        # What the dispatcher stands in place of while it is on the class.
        redirect._value.__func__.displaced = entry.original if entry.kind == OWN else ABSENT
    # Registered first: the registry lists whatever may be installed.
    if fresh:
        entries[key] = entry
    act._entry = entry
    entry.stack.append(act)
    act.open = True
    try:
        conflict = show(entry)
    except BaseException as exc:
        _unregister(act)
        try:
            show(entry)
        except Exception:
            pass  # the target refuses writes; nothing of ours got in
        if not isinstance(exc, Exception):
            raise  # KeyboardInterrupt, SystemExit ... from the target's setattr: undone
        raise TargetNotWritableError(
            f"cannot redirect attribute {name!r} of {describe(target)}: the target refuses "
            f"the write ({type(exc).__name__}: {exc}); redirect the attribute where it is "
            "defined or on an object that accepts writes"
        ) from exc
    if act._ctx:
        act._slot = entry.slot
    return conflict


def _unregister(act: Any) -> None:
    """Take *act* off its entry's stack, and the entry out of the table once it is empty."""
    act.open = False
    entry: Any = act._entry
    stack = entry.stack
    if stack and stack[-1] is act:
        stack.pop()
    elif act in stack:
        stack.remove(act)
    key = entry.key
    if not stack and entries.get(key) is entry:
        del entries[key]


def exit_locked(act: Any) -> tuple[object, BaseException | None]:
    """End *act* under the lock: (conflicting value or NO_CONFLICT, restore error or None).

    Idempotent: an activation that is no longer registered is left alone;
    one whose earlier exit was interrupted is finished.
    """
    entry = act._entry
    if entry is None:
        return NO_CONFLICT, None
    if act not in entry.stack:
        return NO_CONFLICT, None
    act.open = False  # invisible in every context at once
    error: BaseException | None = None
    try:
        conflict = show(entry)
    except Exception as exc:
        conflict, error = NO_CONFLICT, exc
    _unregister(act)
    redirect = act._redirect
    if redirect._spec is not None and not entry.stack and error is None:
        # The dispatcher is off the class: it stands in place of nothing now.
        redirect._value.__func__.displaced = ABSENT
    return conflict, error


def after(act: Any, entered: bool, conflict: object, error: BaseException | None) -> None:
    """The work after the lock: this context's slot variable, the conflict warning, errors."""
    slot = act._slot
    if slot is not None:
        var = slot.var
        acts = var.get()
        if entered:
            var.set((*[a for a in acts if a.open and a is not act], act))
        elif act in acts:
            var.set(tuple(a for a in acts if a.open))
    if conflict is not NO_CONFLICT:
        found = "deleted" if conflict is ABSENT else f"rebound to {conflict!r}"
        warnings.warn(
            RedirectConflictWarning(
                f"{describe(act._entry.target)} attribute {act._redirect._name!r} was {found} "
                "by someone else while redirected; restoring the original anyway"
            ),
            stacklevel=_caller_level(),
        )
    if error is not None:
        raise RestoreError(
            f"restoring attribute {act._redirect._name!r} of {describe(act._entry.target)} "
            f"failed: {error}",
            [error],
        ) from error


#: The modules whose frames lie between a user's ``with`` or ``stop()`` and a warning.
CORE_MODULES = frozenset(
    f"{__name__.rpartition('.')[0]}.{name}"
    for name in (
        "_registry",
        "_handles",
        "_redirect",
        "_group",
        "_during",
        "_construct",
        "_call",
        "_decorate",
        "_pairing",
    )
)


def _caller_level() -> int:
    """The ``stacklevel`` that points a warning from the caller at the user's code.

    The first frame outside the core: the ``with`` statement or ``stop()``
    call that ended the activation, however many core frames (none, where
    the C accelerator ran) lie between.
    """
    level = 2
    frame: types.FrameType | None = _getframe(2)
    while frame is not None and frame.f_globals.get("__name__") in CORE_MODULES:
        level += 1
        frame = frame.f_back
    return level


def _py_enter(act: Any, target: object) -> None:
    """Register *act* on *target* and make it visible; all-or-nothing."""
    with section:
        conflict = enter_locked(act, target)
    try:
        after(act, True, conflict, None)
    except BaseException:
        undo_entered(act)
        raise


def undo_entered(act: Any, handles: list[Any] | None = None) -> None:
    """End *act* after the work following its entry raised (a warning made an error).

    Nothing it entered stays installed, and nothing more is reported: the
    caller raises that error. *handles*: the with-handles it was paired in.
    """
    with section:
        if handles is not None and act in handles:
            handles.remove(act)
            act._frame = None
        exit_locked(act)
    try:
        after(act, False, NO_CONFLICT, None)
    except Exception:
        pass  # what raised first is what the caller reports


def _py_exit(act: Any) -> None:
    """End *act*; idempotent. Warns on conflicts, raises RestoreError after cleanup."""
    with section:
        conflict, error = exit_locked(act)
    after(act, False, conflict, error)


def exclusive() -> contextlib.AbstractContextManager[Any]:
    """A context manager that holds the registry's lock for its block.

    While the block runs, no activation starts or ends in any other thread,
    so what :func:`active` lists and what the targets hold stay as they are:
    code that reads ``active()`` and then changes something the activations
    depend on (a cache bound to a replacement, say) does both as one step.
    Re-entrant: redirects may be started and stopped inside the block, in
    the same thread. Keep the block short; other threads that start or end
    a redirect wait for it.
    """
    return section  # type: ignore[no-any-return]


def active() -> tuple[Any, ...]:
    """Snapshot of every live activation, oldest first within each attribute.

    Thread-safe: taken under the registry lock; the activations may end right
    after it returns.
    """
    with section:
        return tuple(act for entry in entries.values() for act in entry.stack)


# Twins: ``enter`` and ``exit`` of the C accelerator (registry.c); keep in sync.
enter: Any = twin(_py_enter, "enter")
exit: Any = twin(_py_exit, "exit")

