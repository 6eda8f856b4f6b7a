"""Snapshots of raw attribute dictionaries, compared by identity.

A snapshot copies ``vars(obj)`` shallowly: it is cheap enough to take before
every test (the pytest plugin does) and it sees every rebinding, whichever tool
made it (``mock.patch(...).start()``, ``monkeypatch``, a bare assignment).
Values are compared with ``is``: a patch that installs an equal but different
object is still a patch. The one exception is a value of an immutable builtin
type (``str``, ``bytes``, ``int``, ``float``, ``complex``, ``bool``, ``None``,
and tuples and frozensets of those): rebound to an equal value of the same
type, nothing anyone can observe changed (``time.tzset()`` rebinds
``time.tzname`` to an equal tuple), so it is not a difference; nor is a bound
method rebound to an equal bound method (the same ``__self__`` and the same
``__func__``).

A module's own lazy state is not a difference either (see
:func:`_lazy_state`): a global going from None (or absent) to the module of
its own name in ``sys.modules`` (``global parser; from dateutil import
parser`` inside a function), or, when one of the module's own functions
assigns that global, from None (or absent) to any value or from a value back
to None (a first-use cache such as ``tempfile.tempdir``, filled or cleared).
"""

from __future__ import annotations

import dataclasses
import dis
import sys
import types
from collections.abc import Iterable, Iterator
from operator import is_
from typing import Any, Final

from .._accel import twin
from .._resolve import ABSENT, describe

#: Names the interpreter itself writes as caches, which are not patches: the
#: ``warnings`` machinery adds ``__warningregistry__`` to the module that
#: triggered a warning, and ``copy``, ``copy.deepcopy`` and ``pickle``
#: (protocol 2 and up) all go through ``copyreg._slotnames``, which stores
#: ``__slotnames__`` on the class of the object copied. Those two are all
#: that the copy and pickle machinery caches.
_IGNORED: Final = frozenset({"__warningregistry__", "__slotnames__"})

#: Added names holding a dict that reading annotations creates: 3.10 to 3.13
#: store an empty ``__annotations__`` on a class or module that had none the
#: first time it is read (``typing.get_type_hints``, dataclasses, attrs), and
#: 3.14 caches what ``__annotate__`` computes in a class's
#: ``__annotations_cache__``, and a class without annotations gets
#: ``__annotate_func__ = None`` (PEP 649).
_ANNOTATION_CACHES: Final = frozenset({"__annotations__", "__annotations_cache__"})
_ANNOTATE_FUNC: Final = "__annotate_func__"

#: Immutable builtin types whose equal values are interchangeable; float and
#: complex compare by ``repr`` so that ``-0.0`` and ``0.0`` differ and a NaN
#: equals itself.
_SCALARS: Final = frozenset({type(None), bool, int, str, bytes})
_BY_REPR: Final = frozenset({float, complex})
#: Deeper tuples are compared by identity (and reported if rebound).
_MAX_DEPTH: Final = 8


def _value_key(value: object, depth: int = 0) -> object:
    """A key equal for two values of the immutable builtin types exactly when
    they are interchangeable; None for any other value."""
    cls = type(value)
    if cls in _SCALARS:
        return (cls, value)
    if cls in _BY_REPR:
        return (cls, repr(value))
    if (cls is tuple or cls is frozenset) and depth < _MAX_DEPTH:
        keys = [_value_key(item, depth + 1) for item in value]  # type: ignore[attr-defined]
        if any(key is None for key in keys):
            return None
        return (cls, tuple(keys) if cls is tuple else frozenset(keys))
    return None


def _same(old: object, new: object) -> bool:
    """Whether rebinding *old* to *new* changed nothing anyone can observe."""
    if old is new:
        return True
    cls = type(old)
    if cls is types.MethodType and type(new) is cls:
        # obj.method creates a new bound method each time it is read.
        return old.__self__ is new.__self__ and old.__func__ is new.__func__  # type: ignore[attr-defined]
    if cls is types.BuiltinMethodType and type(new) is cls:
        # The same C function bound to the same object (random.random).
        return old.__self__ is new.__self__ and old == new  # type: ignore[attr-defined]
    key = _value_key(old)
    return key is not None and key == _value_key(new)


#: Per module (by id, the module held), the globals its own functions assign.
_WRITTEN: dict[int, tuple[types.ModuleType, frozenset[str]]] = {}
_STORES: Final = frozenset({"STORE_GLOBAL", "DELETE_GLOBAL"})


def _codes(value: object, namespace: dict[str, object], depth: int = 0) -> Iterator[types.CodeType]:
    """The code objects of the functions *value* is or holds, defined in *namespace*."""
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    if isinstance(value, property):
        for part in (value.fget, value.fset, value.fdel):
            yield from _codes(part, namespace, depth)
    elif isinstance(value, types.FunctionType):
        if value.__globals__ is namespace:
            yield value.__code__
    elif isinstance(value, type) and depth < 2 and value.__module__ == namespace.get("__name__"):
        for member in list(vars(value).values()):
            yield from _codes(member, namespace, depth + 1)


def _globals_written(module: types.ModuleType) -> frozenset[str]:
    """The names that a ``global`` statement in the module's own code assigns or deletes."""
    cached = _WRITTEN.get(id(module))
    if cached is not None and cached[0] is module:
        return cached[1]
    namespace = vars(module)
    names: set[str] = set()
    pending = [code for value in list(namespace.values()) for code in _codes(value, namespace)]
    seen: set[int] = set()
    while pending:
        code = pending.pop()
        if id(code) in seen:
            continue
        seen.add(id(code))
        names.update(i.argval for i in dis.get_instructions(code) if i.opname in _STORES)
        pending += (const for const in code.co_consts if isinstance(const, types.CodeType))
    written = frozenset(names)
    _WRITTEN[id(module)] = (module, written)
    return written


def _lazy_state(obj: object, name: str, old: object, new: object) -> bool:
    """True if ``obj.name`` going from *old* to *new* is the module's own lazy state.

    Only a module global qualifies. It is lazy state when it goes from None
    or absent to the module of its own name in ``sys.modules`` (a lazy
    import: ``global parser; from dateutil import parser``), or when one of
    the module's own functions assigns or deletes that global through a
    ``global`` statement and it goes from None or absent to a value, or from
    a value back to None (a first-use cache, filled or cleared:
    ``tempfile.gettempdir()`` sets ``tempfile.tempdir``). A patch that makes
    such a change is not seen.
    """
    if not isinstance(obj, types.ModuleType):
        return False
    unset, reset = old is None or old is ABSENT, new is None and old is not ABSENT
    if unset == reset:  # neither filled nor cleared (or None to None)
        return False
    if unset and isinstance(new, types.ModuleType):
        full = vars(new).get("__name__")
        if (
            isinstance(full, str)
            and full.rpartition(".")[2] == name
            and sys.modules.get(full) is new
        ):
            return True
    try:
        return name in _globals_written(obj)
    except Exception:  # a module whose code cannot be read: compare as usual
        return False


def _expected_addition(obj: object, name: str, value: object) -> bool:
    """True if adding ``obj.name = value`` is the interpreter at work, not a patch.

    Importing ``pkg.sub`` for the first time sets ``pkg.sub`` (often a lazy
    import inside a library); reading annotations caches them.
    """
    if name in _ANNOTATION_CACHES:
        return type(value) is dict
    if name == _ANNOTATE_FUNC:
        return value is None and isinstance(obj, type)
    if not isinstance(obj, types.ModuleType) or not isinstance(value, types.ModuleType):
        return False
    # vars(), not getattr: a watched module may have lost its __name__.
    parent, child = vars(obj).get("__name__"), vars(value).get("__name__")
    return (
        isinstance(child, str)
        and child == f"{parent}.{name}"
        and sys.modules.get(child) is value
    )


@dataclasses.dataclass(frozen=True)
class Difference:
    """One attribute that is not what the snapshot recorded.

    ``old`` is :data:`ABSENT` when the name was added, ``new`` is
    :data:`ABSENT` when it was removed. Immutable, so safe to share between
    threads.
    """

    owner: object
    name: str
    old: object
    new: object

    @property
    def kind(self) -> str:
        """``"added"``, ``"removed"`` or ``"changed"``."""
        if self.old is ABSENT:
            return "added"
        if self.new is ABSENT:
            return "removed"
        return "changed"

    def __str__(self) -> str:
        where = f"{describe(self.owner)}.{self.name}"
        if self.old is ABSENT:
            return f"{where}: added {describe(self.new)}"
        if self.new is ABSENT:
            return f"{where}: removed (was {describe(self.old)})"
        return f"{where}: {describe(self.old)} -> {describe(self.new)}"


class Snapshot:
    """The raw attribute dictionaries of some objects at one moment.

    Objects are held by identity (and kept alive) together with a shallow copy
    of ``vars(obj)``; :meth:`diff` compares the current dictionaries with the
    copies value by value with ``is`` (with the exceptions :meth:`diff` lists:
    equal immutable builtins, equal bound methods, a module's own lazy state).
    Attributes kept outside ``__dict__``
    (``__slots__``, the contents of mutable values) are not recorded.

    Thread safety: taking a snapshot while another thread rebinds attributes of
    the same objects records one of the two states per name; ``diff`` and
    ``restore`` read and write the live dictionaries without a lock, so call
    them when no other thread is patching those objects.
    """

    __slots__ = ("_identical", "_saved")

    def __init__(self, objects: Iterable[object]) -> None:
        saved: list[tuple[object, type, dict[str, object], list[str]]] = []
        for obj in objects:
            try:
                namespace = vars(obj)
            except TypeError:
                raise TypeError(
                    f"cannot snapshot {describe(obj)}: it has no __dict__; "
                    "snapshot its module or class instead"
                ) from None
            saved.append((obj, type(obj), dict(namespace), list(namespace)))
        self._saved = saved
        #: whether the last comparison found every object exactly as recorded
        self._identical = True

    @property
    def objects(self) -> tuple[object, ...]:
        """The snapshotted objects, in the order given."""
        return tuple(entry[0] for entry in self._saved)

    def diff(self) -> list[Difference]:
        """Return every name whose value is not the recorded one.

        Values are compared by identity, except that a name rebound to an
        equal value of the same immutable builtin type (``str``, ``bytes``,
        ``int``, ``float``, ``complex``, ``bool``, ``None``, and tuples and
        frozensets of those), or to an equal bound method, counts as
        unchanged, and so does a module's own lazy state (a module global
        going from None or absent to the module of its own name in
        ``sys.modules``, or, when the module's own code assigns that global
        with a ``global`` statement, from None or absent to a value or from a
        value back to None). Per object, changed and removed
        names come first in recorded order, then added names in current
        order.
        """
        differences: list[Difference] = []
        for _, found in self._compare():
            if isinstance(found, Exception):
                raise found
            differences += found
        return differences

    def _compare(self) -> Iterator[tuple[object, list[Difference] | Exception]]:
        """Per object, its differences, or the exception comparing it raised."""
        identical = True
        for obj, cls, old, keys in self._saved:
            try:
                differences, same = _differences(obj, cls, old, keys)
            except Exception as error:
                identical = False
                yield obj, error
            else:
                identical = identical and same
                yield obj, differences
        self._identical = identical

    def _recorded(self, owner: object, name: str) -> object:
        """The value recorded for ``owner.name`` (ABSENT if it had none)."""
        for obj, cls, namespace, _ in self._saved:
            if obj is owner:
                return cls if name == "__class__" else namespace.get(name, ABSENT)
        raise KeyError(f"{describe(owner)} is not in this snapshot")

    def assert_unchanged(self) -> None:
        """Raise :class:`AssertionError` listing every difference, if there is any."""
        differences = self.diff()
        if differences:
            raise AssertionError(_format(differences))

    def restore(self) -> None:
        """Put every recorded raw value back and delete every added name.

        Writes go to the raw dictionary (``type.__setattr__`` for classes,
        which keeps the method cache right), so a staticmethod comes back as
        the staticmethod object, not as the function ``getattr`` would return.
        """
        for difference in self.diff():
            _put(difference.owner, difference.name, difference.old)

    def _accept(self, differences: Iterable[Difference]) -> None:
        """Record each difference's ``new`` as the expected value from now on."""
        saved = {id(entry[0]): index for index, entry in enumerate(self._saved)}
        for difference in differences:
            index = saved[id(difference.owner)]
            obj, cls, namespace, _ = self._saved[index]
            if difference.name == "__class__" and isinstance(difference.new, type):
                cls = difference.new
            elif difference.new is ABSENT:
                namespace.pop(difference.name, None)
            else:
                namespace[difference.name] = difference.new
            # The order of names only serves diff's quick check; what it
            # cannot confirm it compares name by name.
            self._saved[index] = (obj, cls, namespace, list(namespace))


def _same_name(name: object, saved: object) -> bool:
    """Whether *name* is the saved name: the same object, or an equal exact str.

    Other keys (a str subclass, a non-str key put in a module's dict) are
    compared by identity only: comparing them by value could run their
    ``__eq__``. Keep in sync with ``same_name`` in ``_c/snapshot.c``.
    """
    return name is saved or (type(name) is str and type(saved) is str and name == saved)


def _py_same_namespace(
    current: dict[str, object], saved: dict[str, object], names: list[str]
) -> bool | None:
    """Whether *current* holds the names of *saved*, in order, bound to the same objects.

    The quick check before comparing name by name; False only means "compare".
    Keep in sync with ``py_same_namespace`` in ``_c/snapshot.c``, which
    answers None (refuses) for anything but a plain dict.
    """
    return (
        len(current) == len(saved)
        and all(map(is_, current.values(), saved.values()))
        # The same key objects, as almost always; else one by one.
        and (all(map(is_, current, names)) or all(map(_same_name, current, names)))
    )


#: The C twin's quick check (None where it cannot tell, or where pure Python runs).
_c_same_namespace: Any = twin(None, "same_namespace")


def _same_namespace(current: Any, saved: dict[str, object], names: list[str]) -> bool:
    if _c_same_namespace is not None:
        same = _c_same_namespace(current, saved, names)
        if same is not None:
            return same  # type: ignore[no-any-return]
    return bool(_py_same_namespace(current, saved, names))


def _differences(
    obj: object, cls: type, old: dict[str, object], keys: list[str]
) -> tuple[list[Difference], bool]:
    """The differences of one object, and whether its namespace is the recorded one exactly."""
    differences: list[Difference] = []
    # patchscope's context scope swaps a module's class (its __dict__ stays
    # as it was), so a leaked swap only shows here.
    if type(obj) is not cls:
        differences.append(Difference(obj, "__class__", cls, type(obj)))
    new = vars(obj)
    # The common case, nothing changed: the same names in the same order
    # holding the same objects, checked without allocating per name.
    if _same_namespace(new, old, keys):
        return differences, not differences
    for name, value in old.items():
        current = new.get(name, ABSENT)
        if (
            name not in _IGNORED
            and not _same(value, current)
            and not _lazy_state(obj, name, value, current)
        ):
            differences.append(Difference(obj, name, value, current))
    for name, value in new.items():
        if (
            name not in old
            and name not in _IGNORED
            and not _expected_addition(obj, name, value)
            and not _lazy_state(obj, name, ABSENT, value)
        ):
            differences.append(Difference(obj, name, ABSENT, value))
    return differences, False


def _current(owner: object, name: str) -> object:
    """What a snapshot would record for ``owner.name`` now."""
    return type(owner) if name == "__class__" else vars(owner).get(name, ABSENT)


def _put(owner: object, name: str, value: object) -> None:
    """Write *value* raw into ``vars(owner)``, or delete *name* for ABSENT."""
    if name == "__class__" and isinstance(value, type):
        owner.__class__ = value
        return
    if isinstance(owner, type):
        # vars(cls) is a read-only mappingproxy; type.__setattr__ stores the raw
        # object and bypasses a metaclass __setattr__.
        if value is ABSENT:
            type.__delattr__(owner, name)
        else:
            type.__setattr__(owner, name, value)
        return
    namespace = vars(owner)
    if value is ABSENT:
        namespace.pop(name, None)
    else:
        namespace[name] = value


def _format(differences: list[Difference]) -> str:
    count = len(differences)
    noun = "attribute differs" if count == 1 else "attributes differ"
    lines = [f"{count} {noun} from the snapshot:"]
    lines.extend(f"  {difference}" for difference in differences)
    return "\n".join(lines)


def snapshot(*objects: object) -> Snapshot:
    """Record the raw attribute dictionaries of modules, classes and instances.

    ``snapshot(torch.cuda, MyModel)`` copies ``vars()`` of each object; later,
    ``.diff()`` lists what changed and ``.assert_unchanged()`` fails with the
    list. Thread safety: see :class:`Snapshot`.
    """
    return Snapshot(objects)
