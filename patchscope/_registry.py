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

Every entry and end has two halves: the change under the lock
(:func:`enter_locked`, :func:`exit_locked`, for a whole group at once), and
the work after it, done once for all the activations it touched
(:func:`after_all`: this context's slot variables, one write each, then the
conflict warnings, then one RestoreError).

Twins: ``enter`` and ``exit`` are implemented in C as well, and so are
``enter_locked``, ``exit_locked``, ``undo_locked``, ``update_vars`` and
``after_all``, which the C operations run (``registry.c``,
``redirect.c``); keep them in sync. This module is the reference.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import types
import warnings
from typing import Any, NoReturn

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
        # Undone as any exit is; what it meets is dropped (the target refuses
        # writes: nothing of ours got in).
        exit_locked(act)
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


def exit_locked(act: Any) -> tuple[object, BaseException | None]:
    """End *act* under the lock: (conflicting value or NO_CONFLICT, restore error or None).

    Idempotent: an activation that is no longer registered is left alone;
    one whose earlier exit was interrupted is finished.
    """
    entry = act._entry
    if entry is None:
        return NO_CONFLICT, None
    stack = entry.stack
    if act not in stack:
        return NO_CONFLICT, None
    act.open = False  # invisible in every context at once
    error: BaseException | None = None
    try:
        conflict = show(entry)
    except Exception as exc:
        conflict, error = NO_CONFLICT, exc
    # Unregistered after the target changed back: the registry lists
    # whatever may be installed.
    if stack[-1] is act:
        stack.pop()
    else:
        stack.remove(act)
    if not stack:
        key = entry.key
        if entries.get(key) is entry:
            del entries[key]
        redirect = act._redirect
        if redirect._spec is not None and error is None:
            # The dispatcher is off the class: it stands in place of nothing now.
            redirect._value.__func__.displaced = ABSENT
    return conflict, error


def update_vars(outcomes: list[Any]) -> None:
    """This context's slot variables after the outcomes' activations began or ended.

    One write per variable, however many outcomes share it (every slot
    reads ``_slots.ACTIVATIONS``; a slot of another kind may read its own):
    every open activation it held, then the entered ones, in order. The
    ended ones are closed already, and the entered ones are new, so neither
    is among those kept.
    """
    done: list[Any] = []
    for act, _, _, _ in outcomes:
        slot = act._slot
        if slot is None or slot.var in done:
            continue
        var = slot.var
        done.append(var)
        kept = []
        changed = False
        for other in var.get():
            if other.open:
                kept.append(other)
            else:
                changed = True
        for other, entered, _, _ in outcomes:
            if entered and other._slot is not None and other._slot.var is var:
                kept.append(other)
                changed = True
        if changed:
            var.set(tuple(kept))


def after_all(outcomes: list[Any], group: bool) -> None:
    """The work after the lock, once for all *outcomes*: slot variables, warnings, errors.

    *outcomes* are ``(activation, entered, conflict, restore error)``, in
    the order the lock section entered or ended them. First this context's
    slot variables (one write per variable), then one conflict warning per
    conflict, then one RestoreError for the failed restores: the
    activation's own message where one activation ended on its own, else
    one that counts them (*group*: a group's handle ended). An exception
    from the work itself (a warning the filters turn into an error) is
    raised in place of the RestoreError, after all of it ran.
    """
    for act, _, conflict, error in outcomes:
        if act._slot is not None or conflict is not NO_CONFLICT or error is not None:
            break
    else:
        return  # nothing to do: no context slot, no conflict, no failed restore
    pending: BaseException | None = None
    try:
        update_vars(outcomes)
    except BaseException as exc:
        pending = exc
    level = 0
    failed = False
    for act, _, conflict, error in outcomes:
        if error is not None:
            failed = True
        if conflict is not NO_CONFLICT:
            level = level or _caller_level()
            try:
                _warn_conflict(act, conflict, level)
            except BaseException as exc:
                if pending is None:
                    pending = exc
    if pending is not None:
        raise pending
    if failed:
        _raise_restore_errors(outcomes, group)


def after_undo(outcomes: list[Any], failure: BaseException) -> NoReturn:
    """After a failed entry was undone, outside the lock: its parts' conflicts, then *failure*.

    What the parts entered before the failure overwrote stays lost, so each
    conflict they met entering is reported, in entry order (what undoing
    them meets is not: the caller gets why the entry failed). A warning the
    filters turn into an error is raised in place of *failure*, as entering
    the parts one by one would have stopped there.
    """
    level = 0
    for act, entered, conflict, _ in outcomes:
        if entered and conflict is not NO_CONFLICT:
            level = level or _caller_level()
            try:
                _warn_conflict(act, conflict, level)
            except BaseException as exc:
                failure = exc
                break
    raise failure


def _warn_conflict(act: Any, conflict: object, level: int) -> None:
    """The RedirectConflictWarning for *act*, whose target held *conflict* (ABSENT: deleted).

    *level*: what :func:`_caller_level` gave the caller.
    """
    found = "deleted" if conflict is ABSENT else f"rebound to {conflict!r}"
    warnings.warn(
        RedirectConflictWarning(
            f"{describe(act._entry.target)} attribute {act._redirect._name!r} was "
            f"{found} by someone else while redirected; restoring the original anyway"
        ),
        stacklevel=level + 1,
    )


def _raise_restore_errors(outcomes: list[Any], group: bool) -> None:
    """The RestoreError for the outcomes whose restore failed (see :func:`after_all`)."""
    errors: list[BaseException] = []
    messages: list[str] = []
    for act, _, _, error in outcomes:
        if error is not None:
            errors.append(error)
            messages.append(
                f"restoring attribute {act._redirect._name!r} of "
                f"{describe(act._entry.target)} failed: {error}"
            )
    if not group and len(errors) == 1:
        if len(outcomes) == 1:
            raise RestoreError(messages[0], errors) from errors[0]
        raise RestoreError(messages[0], errors)
    raise RestoreError(f"{len(errors)} restore(s) failed: " + "; ".join(messages), errors)


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
        after_all([(act, True, conflict, None)], False)
    except BaseException:
        from ._handles import undo_entered  # that module imports this one

        undo_entered(act)
        raise


def undo_locked(outcomes: list[Any]) -> None:
    """End the activations *outcomes* entered (a failed entry), newest first; under the lock.

    What ending them meets (a conflict, a failed restore) is dropped: the
    caller raises why the entry failed.
    """
    for outcome in reversed(outcomes):
        exit_locked(outcome[0])


def _py_exit(act: Any) -> None:
    """End *act*; idempotent. Warns on conflicts, raises RestoreError after cleanup."""
    with section:
        conflict, error = exit_locked(act)
    after_all([(act, False, conflict, error)], False)


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
