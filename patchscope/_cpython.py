"""Repair of a CPython type slot that Python code cannot reach.

Setting ``cls.__new__`` on a class that inherits ``object.__new__`` switches
its ``tp_new`` slot to the generic "look ``__new__`` up" slot, and deleting the
attribute again does not switch it back (CPython keeps the current slot for
``__new__``; see ``update_one_slot`` in ``Objects/typeobject.c``). From then
on ``cls(arg)`` fails with "object.__new__() takes exactly one argument",
on 3.10 to 3.13 alike, with or without patchscope. A construction redirect
must leave the class exactly as it was, so after deleting ``__new__`` this
module writes ``object``'s own ``tp_new`` back into the class (and into the
subclasses that inherited the change), then calls ``PyType_Modified``.

The slot's offset is not hard-coded: it is found once by looking for
``object``'s ``tp_new`` in a fresh class that inherits it. Where that is not
possible (another interpreter, an unexpected layout) :func:`repair_new`
returns False and the caller keeps the class working another way. Where the
C accelerator is built, it writes the slot directly instead.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from typing import Any

from ._accel import twin
from ._resolve import ABSENT, OBJECT_INIT, OBJECT_NEW, lookup_mro

#: Py_TPFLAGS_IMMUTABLETYPE: builtin and extension types whose slots stay as they are.
IMMUTABLE = 1 << 8

_PY_TP_NEW = 65  # Py_tp_new in Include/typeslots.h


def _locate() -> tuple[Any, int, int, Any] | None:
    """(view of a type object's words, object's tp_new, its word index, PyType_Modified).

    None where the slot cannot be found.
    """
    if sys.implementation.name != "cpython":
        return None
    try:
        get_slot = ctypes.pythonapi.PyType_GetSlot
        get_slot.restype = ctypes.c_void_p
        get_slot.argtypes = [ctypes.py_object, ctypes.c_int]
        object_new = get_slot(object, _PY_TP_NEW)
        modified = ctypes.pythonapi.PyType_Modified
        modified.argtypes = [ctypes.py_object]
        modified.restype = None
        size: int = type.__dict__["__basicsize__"].__get__(type)
        view = ctypes.c_void_p * (size // ctypes.sizeof(ctypes.c_void_p))
        probe = type("_Probe", (), {})
        found = [i for i, w in enumerate(view.from_address(id(probe))) if w == object_new]
    except (AttributeError, OSError, ValueError):
        return None
    if len(found) != 1 or not object_new:
        return None
    return view, object_new, found[0], modified


def inherits_object_new(cls: type) -> bool:
    """True if *cls* resolves ``__new__`` to ``object.__new__``."""
    return lookup_mro(cls, "__new__") is OBJECT_NEW


#: The slot writer, located at the first repair and kept (None where not possible).
_slot_writer = functools.cache(_locate)


def _new_after(sub: type, cls: type) -> object:
    """The raw ``__new__`` *sub* gets from the classes after *cls* in its MRO."""
    mro = sub.__mro__
    for klass in mro[mro.index(cls) + 1 :]:
        if "__new__" in klass.__dict__:
            return klass.__dict__["__new__"]
    return ABSENT


def _builtin_owner(raw: object) -> type | None:
    """The builtin type whose own ``__new__`` *raw* is (object, dict, ...), else None."""
    owner = getattr(raw, "__self__", None)
    if type(raw) is type(OBJECT_NEW) and isinstance(owner, type) and owner.__new__ is raw:
        return owner
    return None


def _py_preset_new(cls: type) -> bool:
    """Before ``del cls.__new__``: if *cls* then inherits a builtin's ``__new__``, prepare.

    Gives *cls*, and the subclasses that get their ``__new__`` from it, the
    tp_new of the builtin ``__new__`` each inherits once it is gone. Deleting
    ``__new__`` keeps a tp_new that is already right (``update_one_slot``),
    so no construction in another thread ever meets the generic slot that
    rejects arguments, and the classes end with the slot they had before.
    True if done.
    """
    owner = _builtin_owner(_new_after(cls, cls))
    probe = _slot_writer()
    if owner is None or probe is None:
        return False
    view, _, index, modified = probe
    removed = lookup_mro(cls, "__new__")
    pending = [(cls, owner)]
    while pending:
        klass, owner = pending.pop()
        if klass.__flags__ & IMMUTABLE:
            continue
        tp_new = view.from_address(id(owner))[index]
        words = view.from_address(id(klass))
        if words[index] != tp_new:
            words[index] = tp_new
            modified(klass)
        # type's own method: a metaclass may define __subclasses__ otherwise
        subclasses: list[type] = type.__subclasses__(klass)
        for sub in subclasses:
            if lookup_mro(sub, "__new__") is removed:
                sub_owner = _builtin_owner(_new_after(sub, cls))
                if sub_owner is not None:
                    pending.append((sub, sub_owner))
    return True


def _py_repair_new(cls: type) -> bool:
    """Give *cls* (and subclasses that follow it) ``object``'s tp_new back; True if done.

    *cls* must resolve ``__new__`` to ``object.__new__`` (the caller checked).
    Runs at the end of every construction redirect of such a class, so it
    reads the slot through a cached view instead of calling into the C API
    more than the one ``PyType_Modified`` a changed slot needs.
    """
    probe = _slot_writer()
    if probe is None:
        return False
    view, object_new, index, modified = probe
    words = view.from_address(id(cls))
    if words[index] != object_new:
        words[index] = object_new
        modified(cls)
    subclasses: list[type] = type.__subclasses__(cls)
    while subclasses:
        klass = subclasses.pop()
        if klass.__flags__ & IMMUTABLE or not inherits_object_new(klass):
            continue
        words = view.from_address(id(klass))
        if words[index] != object_new:
            words[index] = object_new
            modified(klass)
        subclasses.extend(type.__subclasses__(klass))
    return True


# Twins: ``preset_new`` and ``repair_new`` of the C accelerator (cpython.c); keep in sync.
preset_new: Any = twin(_py_preset_new, "preset_new")
repair_new: Any = twin(_py_repair_new, "repair_new")


def object_new(cls: type, *args: Any, **kwargs: Any) -> Any:
    """``object.__new__`` as ``type.__call__`` uses it, for classes given a ``__new__``."""
    if (args or kwargs) and lookup_mro(cls, "__init__") is OBJECT_INIT:
        raise TypeError(f"{cls.__name__}() takes no arguments")
    return object.__new__(cls)


#: Left in a class whose inherited ``object.__new__`` was redirected and could
#: not be repaired (see :func:`delete_new`); also what a class slot standing
#: for ``__new__`` gives where the class inherits ``object.__new__``.
OBJECT_NEW_STANDIN = staticmethod(object_new)


def delete_new(cls: type) -> None:
    """Delete a class's ``__new__`` so that it constructs exactly as before it had one.

    CPython cannot take a ``__new__`` away again by itself (see above):
    where the class then inherits a builtin's ``__new__`` (``object``'s,
    ``dict``'s, ...), its tp_new slot is set first, so no construction in
    another thread meets the generic slot in between; where that is not
    possible, a repair follows, or else a stand-in that behaves exactly like
    ``object.__new__`` keeps the class working.
    """
    preset = preset_new(cls)
    delattr(cls, "__new__")
    if not preset and inherits_object_new(cls) and not repair_new(cls):
        setattr(cls, "__new__", OBJECT_NEW_STANDIN)  # noqa: B010 (mypy: no assigning methods)
