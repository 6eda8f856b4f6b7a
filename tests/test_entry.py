"""Restoration semantics (patchscope._entry): what is captured, shown and put back.

Each case here once restored the wrong thing, or reported a conflict that
was not one. Run in both builds (see test_accel).
"""

from __future__ import annotations

import gc
import types
import weakref
from typing import Any

import pytest

import patchscope
from patchscope import _registry


def test_a_reused_entry_forgets_how_the_last_activation_restored() -> None:
    """First an inherited attribute, then the class's own: the own one comes back."""

    class Base:
        attr = "inherited"

    class Klass(Base):
        pass

    redirect = patchscope.redirect_attr(Klass, "attr", "new")
    with redirect:  # the attribute is inherited: the exit deletes the shadow
        assert Klass.attr == "new"
    assert "attr" not in vars(Klass)
    Klass.attr = own = "own"  # type: ignore[misc]
    with redirect:  # now the class's own: the exit must write it back
        assert Klass.attr == "new"
    assert vars(Klass)["attr"] is own
    assert patchscope.active() == ()


def test_an_ended_redirect_keeps_no_original_alive() -> None:
    """The entry a redirect keeps for its next activation lets go of the values it held."""

    class Value:
        pass

    mod = types.ModuleType("m")
    mod.attr = Value()
    redirect = patchscope.redirect_attr(mod, "attr", 1)
    with redirect:
        pass
    ref = weakref.ref(mod.attr)
    mod.attr = 2
    gc.collect()
    assert ref() is None
    with redirect:  # and the next activation captures afresh
        assert mod.attr == 1
    assert mod.attr == 2


class _TableAccess:
    """Keeps attributes in its own table, as torch.nn.Module keeps parameters."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return object.__getattribute__(self, "_table")[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self._table[name] = value

    def __delattr__(self, name: str) -> None:
        del self._table[name]


class _Store(_TableAccess):
    """The table in the instance's ``__dict__``."""

    def __init__(self) -> None:
        object.__setattr__(self, "_table", {})


def test_create_goes_through_the_objects_own_setattr_and_delattr() -> None:
    """An attribute created on such an object is deleted again from where it was put."""
    obj = _Store()
    with patchscope.redirect_attr(obj, "weight", 5, create=True):
        assert obj.weight == 5
        assert obj._table == {"weight": 5}
    assert obj._table == {}  # no conflict warning (an error in this suite), nothing left
    assert not hasattr(obj, "weight")


class _SlottedStore(_TableAccess):
    """The same with ``__slots__``: no ``__dict__`` at all, the table in a slot."""

    __slots__ = ("_table",)

    def __init__(self) -> None:
        object.__setattr__(self, "_table", {"weight": 1})


def test_an_attribute_a_slotted_objects_getattr_serves_is_written_through_its_setattr() -> None:
    """No ``__dict__`` to shadow it in: the object's setattr puts the value where
    ``__getattr__`` finds it, and restoring writes the original back there."""
    obj = _SlottedStore()
    with patchscope.redirect_attr(obj, "weight", 5):
        assert obj.weight == 5 and obj._table == {"weight": 5}
    assert obj._table == {"weight": 1}


class _Logging:
    """Its own setattr and delattr, no __getattr__: writes are logged and stored as text."""

    def __init__(self) -> None:
        object.__setattr__(self, "log", [])

    def __setattr__(self, name: str, value: Any) -> None:
        self.log.append(("set", name, value))
        object.__setattr__(self, name, str(value))

    def __delattr__(self, name: str) -> None:
        self.log.append(("del", name))
        object.__delattr__(self, name)


def test_create_goes_through_an_own_setattr_without_getattr() -> None:
    """A class with its own setattr (and no __getattr__) is asked to create and to delete;
    what it stores is its own business, no conflict (an error in this suite)."""
    obj = _Logging()
    with patchscope.redirect_attr(obj, "weight", 5, create=True):
        assert obj.weight == "5"
    assert obj.log == [("set", "weight", 5), ("del", "weight")]
    assert not hasattr(obj, "weight")


class _Coercing:
    """A property whose setter stores a converted value."""

    def __init__(self) -> None:
        self._size = 1

    @property
    def size(self) -> int:
        return self._size

    @size.setter
    def size(self, value: object) -> None:
        self._size = int(value)  # type: ignore[call-overload]


def test_a_setter_that_converts_is_no_conflict() -> None:
    """What the setter made of the replacement counts as what was installed."""
    obj = _Coercing()
    with patchscope.redirect_attr(obj, "size", "5"):
        assert obj.size == 5
    assert obj.size == 1  # no conflict warning (an error in this suite)


class _Refusing(type):
    """A metaclass whose setattr raises a BaseException that is no Exception, once armed."""

    armed = False

    def __setattr__(cls, name: str, value: object) -> None:
        if _Refusing.armed and name == "attr":
            raise KeyboardInterrupt
        super().__setattr__(name, value)


def test_an_interrupt_from_the_targets_setattr_undoes_the_entry_and_goes_on() -> None:
    """KeyboardInterrupt from the target's own setattr: raised as is, nothing left."""

    class Klass(metaclass=_Refusing):
        attr = "orig"

    redirect = patchscope.redirect_attr(Klass, "attr", "new")
    _Refusing.armed = True
    try:
        with pytest.raises(KeyboardInterrupt):
            redirect.start()
    finally:
        _Refusing.armed = False
    assert vars(Klass)["attr"] == "orig"
    assert patchscope.active() == ()
    with redirect:  # and the redirect works afterwards
        assert Klass.attr == "new"
    assert Klass.attr == "orig"


@pytest.mark.parametrize("scope", ["process", "context"])
def test_an_entry_left_empty_by_an_interrupted_exit_is_finished(scope: str) -> None:
    """An entry still in the table with no activation: an exit cut short before its last step."""
    mod = types.ModuleType("m")
    mod.attr = orig = object()
    first = patchscope.redirect_attr(mod, "attr", "first", scope=scope)
    act = first.start()
    entry = act._entry
    act.stop()
    # What an exit interrupted between emptying the entry and dropping it leaves.
    _registry.entries[(id(mod), "attr")] = entry
    try:
        with patchscope.redirect_attr(mod, "attr", "second", scope=scope):
            assert mod.attr == "second"
            assert len(patchscope.active()) == 1
    finally:
        stale = _registry.entries.pop((id(mod), "attr"), None)
    assert stale is None
    assert vars(mod)["attr"] is orig
    assert type(mod) is types.ModuleType


@pytest.mark.parametrize("kind", ["module", "slots"])
def test_a_missing_attribute_is_raised_from_none(kind: str) -> None:
    """The error names the attribute; its traceback shows nothing it was raised during.

    As ``raise ... from None``: neither the failed lookup nor an exception
    being handled at the time (a generator's GeneratorExit, say) is shown
    as where it came from.
    """

    class Slotted:
        __slots__ = ("slot",)

    target = types.ModuleType("m") if kind == "module" else Slotted()
    name = "nope" if kind == "module" else "slot"
    with pytest.raises(patchscope.AttributeMissingError, match=f"'{name}'") as raised:
        try:
            raise KeyError("being handled")
        except KeyError:
            patchscope.redirect_attr(target, name, 1).start()
    assert raised.value.__cause__ is None
    assert raised.value.__suppress_context__


def test_an_unset_slot_is_created_for_the_redirect_and_left_unset_after() -> None:
    """A __slots__ member with no value: create=True sets it while active and unsets it after."""

    class Slotted:
        __slots__ = ("slot",)

    obj = Slotted()
    with pytest.raises(patchscope.AttributeMissingError):
        patchscope.redirect_attr(obj, "slot", 5).start()
    with patchscope.redirect_attr(obj, "slot", 5, create=True):
        assert obj.slot == 5
    assert not hasattr(obj, "slot")
    assert patchscope.active() == ()
