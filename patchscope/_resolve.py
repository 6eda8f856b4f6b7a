"""Dotted paths, raw attribute lookups along the MRO, and how targets are named.

Raw lookups read ``vars()`` along the MRO, never what ``getattr`` returns:
``getattr`` turns a staticmethod into a plain function and finds inherited
attributes (pytest #10644), and the registry saves and restores raw values.
"""

from __future__ import annotations

import enum
import importlib
import keyword
import types
from typing import Any, Final

from ._errors import TargetResolutionError


class _Absent(enum.Enum):
    """Typed marker for "no such attribute"."""

    ABSENT = "ABSENT"

    def __repr__(self) -> str:
        return "<absent>"


ABSENT: Final = _Absent.ABSENT


class _OnePath(enum.Enum):
    """Typed marker for "``redirect_attr`` was given one dotted path, not a target and a name"."""

    ONE_PATH = "ONE_PATH"

    def __repr__(self) -> str:
        return "<one dotted path>"


ONE_PATH: Final = _OnePath.ONE_PATH


# How an attribute is restored when the last activation ends (the records
# keep these plain ints; see _entry).
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
        name = target.__dict__.get("__name__")
        return f"<module {name if isinstance(name, str) else '?'!r}>"
    if isinstance(target, type):
        # getattr with a default: a class can lose its __module__ (del C.__module__).
        return f"<class '{getattr(target, '__module__', '?')}.{target.__qualname__}'>"
    plain = f"<{type(target).__name__} object at {id(target):#x}>"
    if type(target).__repr__ is object.__repr__:
        return plain  # the default repr, without the long qualified name
    try:
        text = repr(target)
    except Exception:
        text = plain
    return text if len(text) <= 80 else text[:77] + "..."


_KEYWORDS = frozenset(keyword.kwlist)


def check_name(name: object) -> str:
    """Return *name* if it is a plain identifier, else raise naming what was passed."""
    if type(name) is str and name.isidentifier() and name not in _KEYWORDS:
        return name
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


def split_path(
    path: object, replacement: object, caller: str = "redirect_attr", what: str = "replacement"
) -> tuple[str, str]:
    """``caller(path, replacement)``'s *path* as (owner path, attribute name).

    As ``mock.patch("pkg.mod.name")`` splits it: the last component is the
    attribute, the rest is resolved (and imported) at each activation by
    :func:`resolve`. Raises naming what was passed and *caller* (the function
    the user called: ``redirect_attr``, the fixture's ``redirect.attr``) and
    *what* its value parameter is called; nothing is imported here.
    """
    if not isinstance(path, str):
        raise TypeError(
            f"{caller}({describe(path)}, {replacement!r}) has no value to install: pass "
            f"{caller}(target, name, {what}), or one dotted string and the "
            f"{what}, {caller}('pkg.mod.name', {what})"
        )
    owner, _, name = path.rpartition(".")
    parts = path.split(".")
    if len(parts) < 2 or not all(p.isidentifier() and not keyword.iskeyword(p) for p in parts):
        raise ValueError(
            f"{caller}({path!r}, {what}): a single target must be a dotted path "
            "'module.name' of identifiers (e.g. 'os.getcwd'); or pass the target and the "
            f"name apart: {caller}(target, name, {what})"
        )
    return owner, name


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
