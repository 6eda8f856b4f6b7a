"""The handles of live activations: Activation and ActivationGroup.

``Redirect.start()`` returns one, ``patchscope.active()`` lists the
:class:`Activation` objects, and every ``with`` block and decorated call has
its own behind the scenes. A handle's fields live in a record base class
(C twins in ``_c/records.c`` when the accelerator is built);
these public classes add what users read.

Ending handles under the registry's lock is here too
(:func:`stop_handle_locked`, which ends a group's parts in one lock
section, and :func:`undo_entered`); the C twins are in ``registry.c`` and
``redirect.c``.

An activation is *open* from the moment it is registered until it ends;
``stop()`` ends it from any thread, any number of times. An activation whose
exit was interrupted (pure Python: a signal between two bytecodes) is no
longer open but still listed by ``active()``; stopping it again finishes it.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from . import _accel, _registry
from ._accel import twin
from ._entry import NO_CONFLICT
from ._errors import RestoreError
from ._resolve import ABSENT, describe

_get_ident = threading.get_ident


class _PyActivationBase:
    """The fields of an activation (see :class:`Activation`)."""

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
        "_value",
        "open",
        "thread_id",
    )

    def __init__(self, redirect: Any, value: object, code: Any, lasti: int) -> None:
        self._redirect = redirect
        self._value = value  # what the registry installs
        self._code = code  # where it was entered, for ``site``
        self._lasti = lasti
        self.thread_id = _get_ident()
        self.open = False  # registered and visible
        self._entry: Any = None  # the registry entry, once registered
        self._ctx = redirect._ctx  # installed through a context slot
        self._slot: Any = None  # what holds this context's activations (a ``var``)
        self._pushed = False  # paired through the context's with-stack
        self._frame: Any = None  # the frame of the with-statement that entered it

    def stop(self) -> None:
        """End this activation; harmless if it has ended already.

        Raises :class:`RestoreError` if putting the original back failed
        (the registry is consistent either way).
        """
        _registry.exit(self)


class _PyGroupBase:
    """The fields of a group handle (see :class:`ActivationGroup`)."""

    __slots__ = ("__weakref__", "_frame", "_parts", "_pushed", "thread_id", "value")

    def __init__(self, parts: list[Any], value: object) -> None:
        self._parts = parts
        self.value = value
        self.thread_id = threading.get_ident()
        self._pushed = False
        self._frame: Any = None

    def stop(self) -> None:
        """End every part (reverse order) under one lock, then the work after it once.

        Harmless if already stopped. If restores fail, every part is still
        ended and one RestoreError is raised afterwards.
        """
        outcomes: list[Any] = []
        try:
            with _registry.section:
                stop_handle_locked(self, outcomes)
        except BaseException:
            after_all_quietly(outcomes)
            raise
        _registry.after_all(outcomes, True)


# Twins: the C accelerator's records (records.c), whose ``stop`` is
# registry.c's; keep in sync.
if TYPE_CHECKING:
    ActivationBase = _PyActivationBase
    GroupBase = _PyGroupBase
else:
    ActivationBase = twin(_PyActivationBase, "ActivationBase")
    GroupBase = twin(_PyGroupBase, "GroupBase")


class Activation(ActivationBase):
    """One live (or ended) activation of one ``(target, name)``.

    Returned by :meth:`Redirect.start` for a single redirect and by
    :func:`patchscope.active`, which returns the same object for as long as
    the activation is live. ``open`` is true until it ends. :meth:`stop` may
    be called from any thread, any number of times; attribute reads are safe
    at any time.
    """

    __slots__ = ()

    # The record's own (in C, one call with no Python-level step), named here
    # so that it is documented with the class.
    stop = ActivationBase.stop

    @property
    def target(self) -> object:
        """The object whose attribute is redirected."""
        return self._entry.target

    @property
    def name(self) -> str:
        """The redirected attribute's name (``"__new__"`` for constructions)."""
        return self._redirect._name  # type: ignore[no-any-return]

    @property
    def replacement(self) -> object:
        """What the redirect puts in place (for constructions: what is built)."""
        shown = self._redirect._replacement
        return self._value if shown is ABSENT else shown

    @property
    def scope(self) -> str:
        """``"process"`` or ``"context"``."""
        return self._redirect._scope  # type: ignore[no-any-return]

    @property
    def activations(self) -> tuple[Activation, ...]:
        """``(self,)``: the same shape as a combined activation's handle."""
        return (self,)

    @property
    def thread(self) -> threading.Thread | None:
        """The thread that entered this activation, or None if it has ended."""
        for thread in threading.enumerate():
            if thread.ident == self.thread_id:
                return thread
        return None

    @property
    def thread_name(self) -> str:
        """Name of the thread that entered this activation."""
        thread = self.thread
        return thread.name if thread is not None else f"<ended thread {self.thread_id}>"

    @property
    def site(self) -> str:
        """``"path/to/file.py:LINE"`` where the activation was entered."""
        code = self._code
        if code is None:
            return "<unknown>"
        line = code.co_firstlineno
        for start, end, lineno in code.co_lines():
            if start <= self._lasti < end and lineno is not None:
                line = lineno
                break
        return f"{code.co_filename}:{line}"

    def __repr__(self) -> str:
        state = "live" if self.open else "ended"
        if self._entry is None:
            return f"<Activation {state}>"
        return (
            f"<Activation {state} {describe(self._entry.target)}.{self.name} -> "
            f"{self.replacement!r} scope={self.scope!r} at {self.site}>"
        )


class ActivationGroup(GroupBase):
    """The handle of a combined (or deferred) redirect: several activations.

    :meth:`stop` ends the parts in reverse order, from any thread, any number
    of times; if restores fail, every part is still ended and a
    :class:`~patchscope.RestoreError` is raised afterwards.
    """

    __slots__ = ()

    stop = GroupBase.stop  # the record's own, as Activation.stop

    @property
    def activations(self) -> tuple[Activation, ...]:
        """Every leaf activation in this group, in entry order."""
        return tuple(a for part in self._parts for a in part.activations)

    def __repr__(self) -> str:
        return f"<ActivationGroup of {len(self.activations)} activation(s)>"


def stop_handle_locked(handle: Any, outcomes: list[Any]) -> None:
    """End *handle* (an activation, or a group's parts in reverse order) under the lock.

    Each ended activation's outcome is added to *outcomes* for
    :func:`~patchscope._registry.after_all`.
    """
    if isinstance(handle, ActivationBase):
        conflict, error = _registry.exit_locked(handle)
        outcomes.append((handle, False, conflict, error))
    elif isinstance(handle, GroupBase):
        for part in reversed(handle._parts):
            stop_handle_locked(part, outcomes)
    else:
        raise TypeError(f"patchscope: not a handle: {handle!r}")


def after_all_quietly(outcomes: list[Any], warn: bool = True) -> None:
    """``after_all`` of a group's *outcomes* where an exception is on its way already.

    What it meets is dropped: the caller raises what came first. Without
    *warn*, conflicts are not reported (a warning that raised said it).
    """
    if not warn:
        outcomes = [(act, entered, NO_CONFLICT, None) for act, entered, _, _ in outcomes]
    try:
        _registry.after_all(outcomes, True)
    except Exception:
        pass


def undo_entered(handle: Any, handles: list[Any] | None = None) -> None:
    """End *handle* after the work following its entry raised (a warning made an error).

    Nothing it entered stays installed, and nothing more is reported: the
    caller raises that error. *handles*: the with-handles it was paired in.
    """
    outcomes: list[Any] = []
    with _registry.section:
        if handles is not None and handle in handles:
            handles.remove(handle)
            handle._frame = None
        try:
            stop_handle_locked(handle, outcomes)
        except Exception:
            pass  # what raised first is what the caller reports
    after_all_quietly(outcomes, warn=False)


def stop_all(handles: list[Any]) -> None:
    """Stop *handles* in reverse order; raise one RestoreError after all ran.

    Any other exception from a handle's end (a conflict warning that the
    warnings filter turns into an error, a KeyboardInterrupt) also waits
    until every handle has been stopped, and then the first one is raised
    in place of the RestoreError.

    Twin: ``GroupBase.stop`` of the C accelerator does the same.
    """
    errors: list[BaseException] = []
    messages: list[str] = []
    pending: BaseException | None = None
    for handle in reversed(handles):
        try:
            handle.stop()
        except RestoreError as exc:
            errors.extend(exc.errors)
            messages.append(str(exc))  # names the target and attribute
        except BaseException as exc:
            if pending is None:
                pending = exc
    if pending is not None:
        raise pending
    if errors:
        raise RestoreError(f"{len(errors)} restore(s) failed: " + "; ".join(messages), errors)


# The C accelerator, where it is in use, is given the objects it works with
# once the handle classes it creates exist: every record a C operation can
# meet is made by a module that imports this one (see _accel.configure).
_accel.configure()
