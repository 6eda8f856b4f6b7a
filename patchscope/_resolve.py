"""Dotted paths, raw attribute lookups along the MRO, and what "original" means.

The saved original is always a *raw* value (what ``vars(owner)`` holds), never
what ``getattr`` returns: ``getattr`` would turn a staticmethod into a plain
function and copy an inherited attribute onto the target on restore
(pytest #10644). Attributes that live outside ``__dict__`` are the exception:
they are saved with ``getattr`` and restored through the object's own
``setattr`` so objects such as ``nn.Module`` keep their registration order.
"""

from __future__ import annotations

import enum
import importlib
import keyword
import types
import weakref
from typing import Any, Final

from ._errors import AttributeMissingError, TargetResolutionError


class _Absent(enum.Enum):
    """Typed marker for "no such attribute"."""

    ABSENT = "ABSENT"

    def __repr__(self) -> str:
        return "<absent>"


ABSENT: Final = _Absent.ABSENT


# How an attribute is restored when the last activation ends (plain ints: the
# enter/exit path reads them on every activation).
#: the raw value was in ``vars(target)``: write it back by identity
OWN: Final = 0
#: inherited, served by a module ``__getattr__``, or absent: delete the shadow
SHADOW: Final = 1
#: outside ``__dict__`` (slots, data descriptors, ``nn.Module`` registries):
#: write back the ``getattr`` value through the object's own ``setattr``
SETATTR: Final = 2


def describe(target: object) -> str:
    """Render *target* for error messages: ``<module 'torch.cuda'>``, ``<class 'a.B'>``."""
    if isinstance(target, types.ModuleType):
        return f"<module {target.__name__!r}>"
    if isinstance(target, type):
        return f"<class '{target.__module__}.{target.__qualname__}'>"
    plain = f"<{type(target).__name__} object at {id(target):#x}>"
    if type(target).__repr__ is object.__repr__:
        return plain  # the default repr, without the long qualified name
    try:
        text = repr(target)
    except Exception:
        text = plain
    return text if len(text) <= 80 else text[:77] + "..."


def check_name(name: object) -> str:
    """Return *name* if it is a plain identifier, else raise naming what was passed."""
    if not isinstance(name, str):
        raise TypeError(
            f"attribute name must be a str, got {type(name).__name__} {name!r}"
        )
    if not name.isidentifier() or keyword.iskeyword(name):
        raise ValueError(
            f"attribute name must be a plain identifier, got {name!r}; "
            "dotted paths go in the target (redirect_attr('pkg.mod', 'name', ...))"
        )
    return name


def resolve(target: object) -> object:
    """Return the object *target* names; strings are dotted import paths.

    ``"torch.cuda"`` imports ``torch.cuda``; ``"pkg.mod.Class"`` imports the
    longest importable prefix and walks the rest with ``getattr``.
    """
    if not isinstance(target, str):
        return target
    parts = target.split(".")
    if not target or not all(p.isidentifier() for p in parts):
        raise TargetResolutionError(
            f"target path {target!r} is not a dotted path of identifiers "
            "(expected e.g. 'torch.cuda' or 'package.module.Class')"
        )
    obj: Any = None
    imported = 0
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError as exc:
            if exc.name is not None and not ".".join(parts[:i]).startswith(exc.name):
                raise TargetResolutionError(
                    f"target path {target!r}: importing {'.'.join(parts[:i])!r} failed: {exc}"
                ) from exc
            continue
        except ImportError as exc:
            raise TargetResolutionError(
                f"target path {target!r}: importing {'.'.join(parts[:i])!r} failed: {exc}"
            ) from exc
        imported = i
        break
    if not imported:
        raise TargetResolutionError(
            f"target path {target!r}: no module named {parts[0]!r}; check the spelling "
            "or install the package"
        )
    for i in range(imported, len(parts)):
        try:
            obj = getattr(obj, parts[i])
        except AttributeError as exc:
            raise TargetResolutionError(
                f"target path {target!r}: {describe(obj)} has no attribute {parts[i]!r}"
            ) from exc
    return obj


#: Private module subclasses installed by context-scope redirects; capture
#: looks through them to the module's own class.
private_module_classes: weakref.WeakSet[type] = weakref.WeakSet()


#: ``object``'s raw ``__new__`` and ``__init__``, as ``vars(object)`` holds them.
OBJECT_NEW: Final[Any] = object.__dict__["__new__"]
OBJECT_INIT: Final[Any] = object.__dict__["__init__"]


def lookup_mro(tp: type, name: str) -> object:
    """Raw value of *name* in the first class of ``tp.__mro__`` defining it, else ABSENT."""
    for klass in tp.__mro__:
        d = klass.__dict__
        if name in d:
            return d[name]
    return ABSENT


def is_data_descriptor(value: object) -> bool:
    """True if the type of *value* (not its metaclass) defines ``__set__`` or ``__delete__``."""
    tp = type(value)
    return lookup_mro(tp, "__set__") is not ABSENT or lookup_mro(tp, "__delete__") is not ABSENT


def bind(value: object, instance: object, owner: type | None) -> Any:
    """What attribute lookup gives for *value* found raw in a class's ``__dict__``."""
    get: Any = lookup_mro(type(value), "__get__")
    return value if get is ABSENT else get(value, instance, owner)


def capture(target: object, name: str, create: bool) -> tuple[int, object]:
    """Record how *target*.*name* is to be restored, and the raw original.

    Raises :class:`AttributeMissingError` when the attribute does not exist and
    *create* is false. Changes nothing.
    """
    own = getattr(target, "__dict__", None)
    tp = type(target)
    if (tp is types.ModuleType or tp is type) and name[:2] != "__":
        # Fast path: no data descriptor of ModuleType or type has a plain name.
        if name in own:  # type: ignore[operator]
            return OWN, own[name]  # type: ignore[index]
        meta: object = ABSENT
    else:
        if tp in private_module_classes:
            tp = tp.__mro__[1]  # our own per-name slots are not the target's
        meta = lookup_mro(tp, name)
        if meta is not ABSENT and is_data_descriptor(meta):
            # __slots__ members, properties with setters, type.__doc__ ...: the
            # object's own setattr is the only correct way back.
            try:
                return SETATTR, getattr(target, name)
            except AttributeError:
                if not create:
                    raise _missing(target, name) from None
                return SETATTR, ABSENT
        if isinstance(own, (dict, types.MappingProxyType)) and name in own:
            return OWN, own[name]
    try:
        value = getattr(target, name)
    except AttributeError:
        if not create:
            raise _missing(target, name) from None
        return SHADOW, ABSENT
    if (
        meta is ABSENT
        and not isinstance(target, (type, types.ModuleType))
        and own is not None
    ):
        # An instance attribute served by the class's __getattr__ (nn.Module
        # parameters, buffers and sub-modules): the class's setattr owns it.
        return SETATTR, value
    return SHADOW, ABSENT


def _missing(target: object, name: str) -> AttributeMissingError:
    return AttributeMissingError(
        f"{describe(target)} has no attribute {name!r}; "
        "pass create=True to add it for the duration of the redirect"
    )
