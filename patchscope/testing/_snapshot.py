"""Snapshots of raw attribute dictionaries, compared by identity.

A snapshot copies ``vars(obj)`` shallowly: it is cheap enough to take before
every test (the pytest plugin does) and it sees every rebinding, whichever tool
made it (``mock.patch(...).start()``, ``monkeypatch``, a bare assignment).
Values are compared with ``is``, never ``==``: a patch that installs an equal
but different object is still a patch.
"""

from __future__ import annotations

import dataclasses
import sys
import types
from collections.abc import Iterable
from typing import Final

from .._resolve import ABSENT, describe

#: Names the interpreter itself writes into module dictionaries: the
#: ``warnings`` machinery adds ``__warningregistry__`` to the module that
#: triggered a warning, which is not a patch.
_IGNORED: Final = frozenset({"__warningregistry__"})


def _submodule(obj: object, name: str, value: object) -> bool:
    """True if *value* is the submodule ``obj.name`` that an import bound on its parent.

    Importing ``pkg.sub`` for the first time sets ``pkg.sub``; that is the
    import system at work (often a lazy import inside a library), not a patch.
    """
    if not isinstance(obj, types.ModuleType) or not isinstance(value, types.ModuleType):
        return False
    return value.__name__ == f"{obj.__name__}.{name}" and sys.modules.get(value.__name__) is value


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
    copies value by value with ``is``. Attributes kept outside ``__dict__``
    (``__slots__``, the contents of mutable values) are not recorded.

    Thread safety: taking a snapshot while another thread rebinds attributes of
    the same objects records one of the two states per name; ``diff`` and
    ``restore`` read and write the live dictionaries without a lock, so call
    them when no other thread is patching those objects.
    """

    __slots__ = ("_saved",)

    def __init__(self, objects: Iterable[object]) -> None:
        saved: list[tuple[object, type, dict[str, object]]] = []
        for obj in objects:
            try:
                namespace = vars(obj)
            except TypeError:
                raise TypeError(
                    f"cannot snapshot {describe(obj)}: it has no __dict__; "
                    "snapshot its module or class instead"
                ) from None
            saved.append((obj, type(obj), dict(namespace)))
        self._saved = saved

    @property
    def objects(self) -> tuple[object, ...]:
        """The snapshotted objects, in the order given."""
        return tuple(obj for obj, _, _ in self._saved)

    def diff(self) -> list[Difference]:
        """Return every name whose value is not, by identity, the recorded one.

        Per object, changed and removed names come first in recorded order,
        then added names in current order.
        """
        differences: list[Difference] = []
        for obj, cls, old in self._saved:
            # patchscope's context scope swaps a module's class (its __dict__
            # stays as it was), so a leaked swap only shows here.
            if type(obj) is not cls:
                differences.append(Difference(obj, "__class__", cls, type(obj)))
            new = vars(obj)
            if len(new) == len(old) and all(new.get(k, ABSENT) is v for k, v in old.items()):
                continue  # the common case: nothing changed, one pass, no allocations
            for name, value in old.items():
                current = new.get(name, ABSENT)
                if current is not value and name not in _IGNORED:
                    differences.append(Difference(obj, name, value, current))
            for name, value in new.items():
                if name not in old and name not in _IGNORED and not _submodule(obj, name, value):
                    differences.append(Difference(obj, name, ABSENT, value))
        return differences

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
        saved = {id(obj): index for index, (obj, _, _) in enumerate(self._saved)}
        for difference in differences:
            index = saved[id(difference.owner)]
            obj, _, namespace = self._saved[index]
            if difference.name == "__class__" and isinstance(difference.new, type):
                self._saved[index] = (obj, difference.new, namespace)
            elif difference.new is ABSENT:
                namespace.pop(difference.name, None)
            else:
                namespace[difference.name] = difference.new


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
