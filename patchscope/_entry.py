"""Restoration semantics, in one place: what an original is and what a target shows.

One :class:`Entry` exists per ``(target, name)`` while anything redirects
it. It records the original once, when the first activation begins, so exits
may come in any order from any thread: after every change to the entry's
stack of activations, :func:`show` recomputes what the target must hold from
the open activations alone and writes that. (``mock.patch`` and
``monkeypatch`` have each patcher save "the original" itself, so a non-LIFO
exit reinstalls a replacement forever.)

What the target must hold:

* the *process value*: the value of the most recently entered open
  process-scope activation; else the original (deleted again where it was
  inherited, served by a module ``__getattr__`` or created);
* while any context-scope activation is open, a slot (see ``_slots``):
  a module keeps the process value in its ``__dict__`` and is switched to
  its private subclass; a class holds the slot, whose fallback is the
  process value.

Before writing, :func:`show` compares what the target holds with what it
last wrote there; a difference means somebody else rebound the name, and is
returned so the caller can warn.

Twins: the C accelerator's ``Entry`` record (``records.c``), and
``capture``/``show`` (``entry.c``), which the registry's C operations run so
that they never step back into Python; keep them in sync. This module is the
reference.
"""

from __future__ import annotations

import types
from typing import Any

from . import _slots
from ._accel import twin
from ._cpython import delete_new
from ._errors import AttributeMissingError
from ._resolve import ABSENT, OWN, SETATTR, SHADOW, describe, is_data_descriptor, lookup_mro
from ._slots import displaced

#: "nobody else rebound the name" (ABSENT is a possible conflicting value: a deletion)
NO_CONFLICT: Any = object()


class _PyEntry:
    """One per ``(target, name)`` while anything redirects it.

    ``stack`` holds the activations in the order they were entered (open
    ones, and ones whose exit is under way); ``installed`` is what
    ``vars(target)[name]`` was last made to hold (ABSENT: nothing), or for
    ``SETATTR`` entries what ``getattr`` was made to give; ``slot`` is the
    context slot while one is in place.
    """

    __slots__ = ("installed", "key", "kind", "name", "original", "slot", "stack", "target")

    def __init__(
        self, target: object, name: str, kind: int, original: object, installed: object
    ) -> None:
        self.target = target
        self.name = name
        self.key = (id(target), name)  # the registry's key
        self.kind = kind
        self.original = original
        self.installed = installed
        self.stack: list[Any] = []
        self.slot: Any = None


Entry: Any = twin(_PyEntry, "Entry")


def capture(target: object, name: str, create: bool) -> tuple[int, object, object]:
    """How *target*.*name* is to be restored: ``(kind, raw original, what the target holds)``.

    The saved original is a raw value (what ``vars(target)`` holds), never
    what ``getattr`` returns: ``getattr`` would turn a staticmethod into a
    plain function and copy an inherited attribute onto the target on
    restore (pytest #10644). Attributes that live outside ``__dict__`` are the
    exception (``SETATTR``). A slot or dispatcher of ours found there that
    nothing accounts for (left by a fault) is not an original: what it
    stood in place of is, and the first write replaces it. Raises
    :class:`AttributeMissingError` when the attribute does not exist and
    *create* is false. Changes nothing.
    """
    own = getattr(target, "__dict__", None)
    tp = type(target)
    meta: object = ABSENT
    if (tp is _MODULE or tp is type) and name[:2] != "__":
        # No data descriptor of ModuleType or type has a plain name.
        raw = own.get(name, ABSENT)  # type: ignore[union-attr]
    else:
        if isinstance(target, types.ModuleType):
            tp = _slots.own_class(target)  # our per-name slots are not the target's
        meta = lookup_mro(tp, name)
        if meta is not ABSENT and is_data_descriptor(meta):
            # __slots__ members, properties with setters, type.__doc__ ...: the
            # object's own setattr is the only correct way back.
            try:
                value = getattr(target, name)
            except AttributeError:
                if not create:
                    raise _missing(target, name) from None
                return SETATTR, ABSENT, ABSENT
            return SETATTR, value, value
        found = isinstance(own, (dict, types.MappingProxyType)) and name in own
        raw = own[name] if found else ABSENT  # type: ignore[index]
    if raw is not ABSENT:
        original = displaced(raw)
        if original is raw:
            return OWN, raw, raw
        return (OWN if original is not ABSENT else SHADOW), original, raw
    try:
        value = getattr(target, name)
    except AttributeError:
        if not create:
            raise _missing(target, name) from None
        if not isinstance(target, (type, types.ModuleType)) and _own_setattr(tp):
            # Created through the object's own setattr (an nn.Module parameter):
            # deleted again through its delattr, wherever it put it.
            return SETATTR, ABSENT, ABSENT
        return SHADOW, ABSENT, ABSENT
    if meta is ABSENT and not isinstance(target, (type, types.ModuleType)):
        # An instance attribute served by the class's __getattr__ (nn.Module
        # parameters, buffers and sub-modules; a __slots__ class's store):
        # the class's setattr owns it.
        return SETATTR, value, value
    return SHADOW, ABSENT, ABSENT


def _own_setattr(tp: type) -> bool:
    """Whether instances of *tp* keep attributes their own way (a __setattr__ or __getattr__)."""
    return (
        lookup_mro(tp, "__setattr__") is not _OBJECT_SETATTR
        or lookup_mro(tp, "__getattr__") is not ABSENT
    )


_OBJECT_SETATTR = vars(object)["__setattr__"]
_MODULE = types.ModuleType


def _missing(target: object, name: str) -> AttributeMissingError:
    return AttributeMissingError(
        f"{describe(target)} has no attribute {name!r}; "
        "pass create=True to add it for the duration of the redirect"
    )


def show(entry: Any) -> object:
    """Make the target show what *entry*'s open activations say; under the registry lock.

    What they say: the *process value*, which the target shows outside any
    context activation, is the value of the most recently entered open
    process-scope activation, else the original (ABSENT: nothing, where the
    original was inherited, served by a module ``__getattr__`` or created);
    while a context activation is open, a slot is in place as well (see
    ``_slots``): a module keeps the process value in its ``__dict__``, a
    class holds the slot, whose fallback is the process value.

    Returns what the target held instead of what was last written there
    (somebody else's value, or ABSENT for a deletion), else NO_CONFLICT.
    Raises what the target's own ``setattr``/``delattr`` raises.
    """
    target = entry.target
    name = entry.name
    kind = entry.kind
    value = ABSENT if kind == SHADOW else entry.original
    first_context = None
    for act in entry.stack:
        if act.open:
            if not act._ctx:
                value = act._value
            elif first_context is None:
                first_context = act
    if kind == SETATTR:
        # Context scope is refused for these; the object's own setattr rules.
        current = getattr(target, name, ABSENT)
        conflict = NO_CONFLICT if current is entry.installed else current
        if current is not value:
            _write(target, name, value)
            # What the object now gives, which its setter may have converted.
            current = getattr(target, name, ABSENT)
        entry.installed = current
        return conflict
    current = target.__dict__.get(name, ABSENT)
    conflict = NO_CONFLICT if current is entry.installed else current
    slot = entry.slot
    desired = value
    if first_context is not None:
        if slot is None:
            slot = _slots.install(entry, first_context, value)
        if not isinstance(target, types.ModuleType):
            slot.fallback = value
            desired = slot
    if current is not desired:
        _write(target, name, desired)
    entry.installed = desired
    if first_context is None and slot is not None:
        # After the write: a class never holds a slot that has let go.
        _slots.uninstall(entry)
    return conflict


def _write(target: object, name: str, value: object) -> None:
    """``setattr``, or for ABSENT the deletion that takes a shadow away again."""
    if value is not ABSENT:
        setattr(target, name, value)
    elif name == "__new__" and isinstance(target, type):
        delete_new(target)
    else:
        delattr(target, name)
