"""What context redirects and constructions put on their targets (patchscope._slots).

Module class switching and its records, the class slots and their cache,
and the construction dispatcher at the edges of an activation. Run in both
builds (see test_accel).
"""

from __future__ import annotations

import contextvars
import gc
import sys
import types
import warnings
import weakref
from typing import Any

import pytest
from _threads import in_other_thread

import patchscope
from patchscope import _registry, _slots


def test_a_modules_switch_record_goes_with_the_module() -> None:
    """A module's switch record says "not switched" between scopes, and dies with it."""
    mod = types.ModuleType("m")
    mod.a, mod.b = 1, 2
    ra = patchscope.redirect_attr(mod, "a", 10, scope="context")
    rb = patchscope.redirect_attr(mod, "b", 20, scope="context")
    with ra:
        assert _slots.module_swaps[id(mod)][2] == {"a"}
        with rb:
            assert _slots.module_swaps[id(mod)][2] == {"a", "b"}
        assert type(mod) is not types.ModuleType  # a's slot is still on
    assert type(mod) is types.ModuleType
    assert _slots.module_swaps[id(mod)][2] == set()
    with ra:  # and the next switch starts from it again
        assert mod.a == 10
    key = id(mod)
    del mod, ra, rb
    gc.collect()
    assert key not in _slots.module_swaps


class _ModuleKind(types.ModuleType):
    """A module class of the user's own (lazy loaders and the like)."""


def test_a_module_whose_class_changed_between_activations_gets_that_class_back() -> None:
    mod = types.ModuleType("m")
    mod.attr = "orig"
    redirect = patchscope.redirect_attr(mod, "attr", "new", scope="context")
    with redirect:
        assert mod.attr == "new"
    mod.__class__ = _ModuleKind
    with redirect:
        assert mod.attr == "new"
        assert isinstance(mod, _ModuleKind)
    assert type(mod) is _ModuleKind
    assert mod.attr == "orig"


def test_a_class_given_to_a_module_during_a_scope_stays() -> None:
    """The exit switches a module back only from our class, never from somebody else's."""
    mod = types.ModuleType("m")
    mod.attr = "orig"
    with patchscope.redirect_attr(mod, "attr", "new", scope="context"):
        mod.__class__ = _ModuleKind
    assert type(mod) is _ModuleKind
    assert mod.attr == "orig"


def test_an_ended_class_slot_keeps_no_class_alive() -> None:
    """A method that uses super() refers to its class: the cached slot must not keep it."""

    class Base:
        def method(self) -> str:
            return "base"

    class Klass(Base):
        def method(self) -> str:
            return "klass+" + super().method()

    with patchscope.redirect_attr(Klass, "method", lambda self: "new", scope="context"):
        assert Klass().method() == "new"
    assert Klass().method() == "klass+base"
    ref = weakref.ref(Klass)
    unraisable: list[Any] = []
    previous, sys.unraisablehook = sys.unraisablehook, unraisable.append
    try:
        del Klass
        gc.collect()
    finally:
        sys.unraisablehook = previous
    assert ref() is None
    assert unraisable == []  # the cache forgets it quietly


def test_deleting_a_module_attribute_under_a_context_slot_deletes_the_process_value() -> None:
    """``del mod.name`` while a context redirect of it is live takes the module's own value
    away, for every context; a second ``del`` is an AttributeError, as without the slot."""
    mod = types.ModuleType("m")
    mod.x = 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", patchscope.RedirectConflictWarning)
        with patchscope.redirect_attr(mod, "x", 2, scope="context"):
            del mod.x
            assert in_other_thread(lambda: hasattr(mod, "x")) is False
            with pytest.raises(AttributeError, match="x"):
                del mod.x
    assert patchscope.active() == ()


def test_a_slot_read_through_an_unrelated_class_is_an_attribute_error() -> None:
    """No recursion when a slot is found through a class its own class is not a base of."""

    class Klass:
        pass

    with patchscope.redirect_attr(Klass, "attr", 1, scope="context", create=True):
        slot = vars(Klass)["attr"]
        Other = type("Other", (), {"attr": slot})

        def read() -> object:
            return Other.attr

        with pytest.raises(AttributeError):
            contextvars.Context().run(read)  # no value of ours in a fresh context
        with pytest.raises(TypeError, match="owner must be a class"):
            contextvars.Context().run(slot.__get__, None, 5)
        assert Klass.attr == 1


class _Built:
    """A class with a __new__ of its own."""

    def __new__(cls, *args: object) -> _Built:
        obj = super().__new__(cls)
        obj.by_own_new = True
        return obj


class _Replacement:
    pass


@pytest.mark.parametrize("scope", ["process", "context"])
def test_a_dispatcher_called_after_the_last_activation_ended_uses_the_classs_own_new(
    scope: str,
) -> None:
    """A thread that fetched the dispatcher just before the end still constructs correctly."""
    with patchscope.redirect_construction(_Built, _Replacement, scope=scope):
        fetched = vars(_Built)["__new__"]
    assert vars(_Built)["__new__"] is not fetched
    built = fetched.__func__(_Built)
    assert type(built) is _Built
    assert built.by_own_new


class _Refusing(type):
    """A metaclass whose setattr fails while armed."""

    armed = False

    def __setattr__(cls, name: str, value: object) -> None:
        if _Refusing.armed:
            raise RuntimeError("refused")
        super().__setattr__(name, value)


def test_a_dispatcher_a_failed_restore_left_still_knows_the_original() -> None:
    """The next activation's exit puts the class's own __new__ back, not nothing."""

    class Klass(metaclass=_Refusing):
        def __new__(cls) -> Klass:
            obj = super().__new__(cls)
            obj.by_own_new = True
            return obj

    own = vars(Klass)["__new__"]
    redirect = patchscope.redirect_construction(Klass, _Replacement, scope="process")
    act = redirect.start()
    _Refusing.armed = True
    try:
        with pytest.raises(patchscope.RestoreError):
            act.stop()
    finally:
        _Refusing.armed = False
    assert vars(Klass)["__new__"] is not own  # the dispatcher stayed
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", patchscope.RedirectConflictWarning)
        with redirect:
            assert type(Klass()) is _Replacement
    assert vars(Klass)["__new__"] is own
    assert Klass().by_own_new


def test_a_dispatcher_left_on_a_class_is_never_taken_for_its_original() -> None:
    """A dispatcher in vars(cls) that the registry lost: the class's own __new__ comes back."""

    class Klass:
        def __new__(cls) -> Klass:
            return super().__new__(cls)

    own = vars(Klass)["__new__"]
    first = patchscope.redirect_construction(Klass, _Replacement, scope="process")
    act = first.start()
    key = (id(Klass), "__new__")
    lost = _registry.entries.pop(key)  # what a registry that lost its record looks like
    try:
        with patchscope.redirect_construction(Klass, _Replacement, scope="process"):
            assert type(Klass()) is _Replacement
        assert vars(Klass)["__new__"] is own
        assert type(Klass()) is Klass
    finally:
        _registry.entries.setdefault(key, lost)
        with warnings.catch_warnings():
            # The lost record still says the dispatcher is installed: it is not.
            warnings.simplefilter("ignore", patchscope.RedirectConflictWarning)
            act.stop()
    assert vars(Klass)["__new__"] is own


class _Methods:
    def plain(self, a: int, b: int = 2, *, c: int = 3) -> tuple[object, ...]:
        return ("plain", self, a, b, c)

    @classmethod
    def klass(cls, a: int) -> tuple[object, ...]:
        return ("klass", cls, a)

    @staticmethod
    def static(a: int) -> tuple[object, ...]:
        return ("static", a)


class _CallableValue:
    """A replacement that is not a function: called as it is, without binding."""

    def __call__(self, *args: object) -> tuple[object, ...]:
        return ("callable", *args)


@pytest.mark.parametrize("name", ["plain", "klass", "static"])
def test_calls_through_a_class_slot_match_the_unredirected_ones(name: str) -> None:
    """``obj.m(...)`` and ``Class.m(...)`` in a context the slot does not redirect.

    Each gives what it gave before the slot, for every kind of original, by
    instance and by class (the interpreter specializes both call forms), with
    keyword arguments, and an instance's own attribute still wins.
    """
    obj = _Methods()

    def calls() -> list[object]:
        if name == "plain":
            return [obj.plain(1), _Methods.plain(obj, 1), obj.plain(1, c=9), obj.plain(a=1, b=5)]
        if name == "klass":
            return [obj.klass(1), _Methods.klass(1), _Methods.klass(a=1)]
        return [obj.static(1), _Methods.static(1), _Methods.static(a=1)]

    def warm() -> list[object]:
        for _ in range(64):  # past the interpreter's specializing threshold
            seen = calls()
        return seen

    before = warm()
    raw = vars(_Methods)[name]
    redirect = patchscope.redirect_attr(_Methods, name, _CallableValue(), scope="context")
    with redirect:
        assert vars(_Methods)[name] is not raw
        assert getattr(obj, name)(1) == ("callable", 1)  # this context's value: no binding
        assert in_other_thread(warm) == before
        obj.__dict__[name] = lambda *a: ("own", a)  # an instance's own attribute still wins
        assert in_other_thread(lambda: getattr(obj, name)(7)) == ("own", (7,))
        del obj.__dict__[name]
    assert warm() == before
    assert vars(_Methods)[name] is raw


def test_class_attributes_read_through_a_class_slot_are_the_values() -> None:
    """``Class.attr`` in a context the slot does not redirect: the value, never the slot.

    Read often enough for the interpreter to specialize the read.
    """

    class Owner:
        number = 1

        def method(self) -> int:
            return 1

    def reads() -> list[object]:
        for _ in range(64):
            seen = [Owner.number, Owner.method, Owner().number]
        return seen

    before = reads()
    with patchscope.combine(
        patchscope.redirect_attr(Owner, "number", 2, scope="context"),
        patchscope.redirect_attr(Owner, "method", lambda self: 2, scope="context"),
    ):
        assert reads()[0] == 2
        assert in_other_thread(reads) == before
    assert reads() == before


def test_a_method_call_through_a_data_slot_keeps_the_data_descriptors_rules() -> None:
    """A property redirected in context scope: the instance's ``__dict__`` never wins."""

    class Owner:
        @property
        def value(self) -> str:
            return "property"

    obj = Owner()
    obj.__dict__["value"] = "own"
    with patchscope.redirect_attr(Owner, "value", property(lambda self: "new"), scope="context"):
        assert obj.value == "new"
        assert in_other_thread(lambda: obj.value) == "property"
    assert obj.value == "property"


def test_every_slot_reads_one_context_variable() -> None:
    """Context redirects of modules, classes and a construction share one ContextVar.

    A group sets it once however many targets its parts redirect, and a
    context holds one variable of the slots whatever it redirected.
    """

    class Built:
        attr = 1

    one, two = types.ModuleType("one"), types.ModuleType("two")
    one.a = two.b = "orig"
    group = patchscope.combine(
        patchscope.redirect_attr(one, "a", "new", scope="context"),
        patchscope.redirect_attr(two, "b", "new", scope="context"),
        patchscope.redirect_attr(Built, "attr", 2, scope="context"),
        patchscope.redirect_construction(Built, object),
    )

    def slot_vars() -> list[contextvars.ContextVar[object]]:
        return [var for var in contextvars.copy_context() if var.name.startswith("patchscope:")]

    def run() -> list[object]:
        before = slot_vars()
        with group:
            seen = [one.a, two.b, Built.attr, type(Built())]
            inside = slot_vars()
        return [before, inside, seen]

    before, inside, seen = contextvars.Context().run(run)
    assert seen == ["new", "new", 2, object]
    assert before == []
    assert inside == [_slots.ACTIVATIONS]


def test_prepare_makes_the_slots_of_a_target_and_name_once() -> None:
    """The slots are cached per target and name, and making them changes nothing shown."""

    class Klass:
        attr = 1

    mod = types.ModuleType("m")
    mod.a = 1
    slot = _slots.prepare(mod, "a")
    assert _slots.prepare(mod, "a") is slot
    assert _slots.prepare(mod, "b") is not slot
    assert type(mod) is types.ModuleType
    assert mod.a == 1
    pair = _slots.prepare(Klass, "attr")
    assert _slots.prepare(Klass, "attr") is pair
    assert _slots.prepare(Klass, "other") is not pair
    assert vars(Klass)["attr"] == 1


def test_class_slots_take_no_attributes_of_their_own() -> None:
    """Plain and data slots have no instance ``__dict__`` (as their C twins)."""

    class Owner:
        plain = 1

        @property
        def data(self) -> int:
            return 1

    with patchscope.combine(
        patchscope.redirect_attr(Owner, "plain", 2, scope="context"),
        patchscope.redirect_attr(Owner, "data", property(lambda self: 2), scope="context"),
    ):
        slots = [vars(Owner)["plain"], vars(Owner)["data"]]
        assert type(slots[0]) is _slots.ClassSlot
        assert type(slots[1]) is _slots.DataClassSlot
        for slot in slots:
            assert not hasattr(slot, "__dict__")
            with pytest.raises(AttributeError):
                slot.extra = 1


def test_a_plain_value_in_place_of_a_property_yields_to_the_instance_dict() -> None:
    """The value this context sees is not a data descriptor: an instance's own attribute wins.

    Exactly as with that value in the class; other contexts keep the property.
    """

    class Owner:
        @property
        def value(self) -> str:
            return "property"

    obj, bare = Owner(), Owner()
    obj.__dict__["value"] = "own"
    with patchscope.redirect_attr(Owner, "value", "plain", scope="context"):
        assert type(vars(Owner)["value"]) is _slots.DataClassSlot
        assert obj.value == "own"
        assert bare.value == "plain"
        assert Owner.value == "plain"
        assert in_other_thread(lambda: (obj.value, bare.value)) == ("property", "property")
    assert obj.value == "property"


def test_a_plain_value_in_place_of_a_property_writes_and_deletes_the_instance_dict() -> None:
    """Writes and deletions through the instance go to its ``__dict__``, as with that value
    in the class: deleting what the instance does not hold is an AttributeError."""

    class Owner:
        @property
        def value(self) -> str:
            return "property"

        @value.setter
        def value(self, new: str) -> None:
            raise AssertionError("the property's setter runs only in other contexts")

    obj = Owner()
    with patchscope.redirect_attr(Owner, "value", "plain", scope="context"):
        obj.value = "own"
        assert vars(obj) == {"value": "own"} and obj.value == "own"
        del obj.value
        assert vars(obj) == {} and obj.value == "plain"
        with pytest.raises(AttributeError, match="value"):
            del obj.value
    assert obj.value == "property"


def test_a_plain_value_in_place_of_a_slots_member_is_read_only_on_instances() -> None:
    """An instance without a ``__dict__`` refuses the write and the deletion as CPython does."""

    class Slotted:
        __slots__ = ("x",)

    obj = Slotted()
    obj.x = 1
    with patchscope.redirect_attr(Slotted, "x", 5, scope="context"):
        assert obj.x == 5
        with pytest.raises(AttributeError, match="'Slotted' object attribute 'x' is read-only"):
            obj.x = 2
        with pytest.raises(AttributeError, match="'Slotted' object attribute 'x' is read-only"):
            del obj.x
        assert in_other_thread(lambda: obj.x) == 1
    assert obj.x == 1


@pytest.mark.parametrize("scope", ["context", "process"])
def test_the_innermost_construction_redirect_decides_for_a_subclass(scope: str) -> None:
    """An inner redirect that leaves subclasses alone is not passed over for an outer one."""

    class Base:
        pass

    class Sub(Base):
        pass

    class Outer:
        pass

    class Inner:
        pass

    with patchscope.redirect_construction(Base, Outer, include_subclasses=True, scope=scope):
        assert type(Sub()) is Outer
        with patchscope.redirect_construction(Base, Inner, scope=scope):
            assert type(Base()) is Inner
            assert type(Sub()) is Sub
        assert type(Sub()) is Outer
    assert type(Sub()) is Sub


def test_other_contexts_construct_through_the_classs_own_new() -> None:
    """While a context construction redirect is on, other threads run the class's ``__new__``."""
    with patchscope.redirect_construction(_Built, _Replacement, scope="context"):
        assert type(_Built()) is _Replacement
        built = in_other_thread(_Built)
    assert type(built) is _Built
    assert built.by_own_new


def test_nested_construction_redirects_leave_other_contexts_the_inherited_new() -> None:
    """The second activation finds the dispatcher on the class: it never falls back to itself."""

    class Klass(_Built):
        pass

    with patchscope.redirect_construction(Klass, _Replacement):
        with patchscope.redirect_construction(Klass, _Replacement):
            assert type(Klass()) is _Replacement
            built = in_other_thread(Klass)
    assert type(built) is Klass
    assert built.by_own_new


def test_a_class_that_had_slots_dies_quietly() -> None:
    """A class given context slots, then dropped: its cache record goes, nothing is reported."""
    reported: list[object] = []
    previous = sys.unraisablehook
    sys.unraisablehook = reported.append
    try:

        class Klass:
            attr = 1

        with patchscope.redirect_attr(Klass, "attr", 2, scope="context"):
            assert Klass.attr == 2
        # The Python twin's cache (the C twin keeps its own).
        cache = _slots._class_slots._items if _slots.prepare is _slots._py_prepare else None
        key = id(Klass)
        assert cache is None or key in cache
        ref = weakref.ref(Klass)
        del Klass
        gc.collect()
        assert ref() is None
        assert cache is None or key not in cache
    finally:
        sys.unraisablehook = previous
    assert reported == []


@pytest.mark.parametrize("value", ["plain", "property"])
def test_a_slot_left_on_a_class_with_no_record_is_restored_to_what_it_displaced(
    value: str,
) -> None:
    """A class slot of ours whose registry record was lost (a fault): the next redirect of
    that attribute takes the value the slot stood in place of as the original."""
    original: object = 1 if value == "plain" else property(lambda self: 1)

    class Klass:
        pass

    Klass.attr = original  # type: ignore[attr-defined]
    handle = patchscope.redirect_attr(Klass, "attr", 2, scope="context").start()
    stray = vars(Klass)["attr"]
    assert stray is not original
    with _registry.section:  # the fault: the record is gone, the slot stays
        del _registry.entries[(id(Klass), "attr")]
        handle.open = False
    with patchscope.redirect_attr(Klass, "attr", 3, scope="context"):
        assert Klass.attr == 3
    assert vars(Klass)["attr"] is original
    assert patchscope.active() == ()


def test_a_module_class_somebody_else_set_during_a_scope_stays() -> None:
    """While a context redirect has switched a module to its private class, somebody else
    gives the module a class of their own: a second context redirect of the module leaves
    that class in place (it does not switch the module back to ours)."""
    mod = types.ModuleType("swapped_meanwhile")
    mod.a, mod.b = 1, 2

    class Theirs(types.ModuleType):
        pass

    first = patchscope.redirect_attr(mod, "a", 10, scope="context").start()
    try:
        mod.__class__ = Theirs
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", patchscope.RedirectConflictWarning)
            second = patchscope.redirect_attr(mod, "b", 20, scope="context").start()
            try:
                assert type(mod) is Theirs
            finally:
                second.stop()
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", patchscope.RedirectConflictWarning)
            first.stop()
    assert type(mod) is Theirs and (mod.a, mod.b) == (1, 2)


@pytest.mark.parametrize("scope", ["process", "context"])
def test_a_slot_read_with_only_the_instance_binds_to_its_class(scope: str) -> None:
    """``vars(K)[name].__get__(obj)``, with no owner (as a descriptor may be called),
    binds as Python does: a classmethod to ``type(obj)``, a function to *obj*."""

    class K:
        pass

    class Sub(K):
        pass

    K.cm = classmethod(lambda cls: cls)  # type: ignore[attr-defined]
    K.fn = lambda self: self  # type: ignore[attr-defined]
    K.dp = property(lambda self: 0)  # type: ignore[attr-defined]  # a data slot's place
    obj = Sub()
    with patchscope.redirect_attr(K, "cm", classmethod(lambda cls: ("new", cls)), scope=scope):
        with patchscope.redirect_attr(K, "fn", lambda self: ("new", self), scope=scope):
            with patchscope.redirect_attr(K, "dp", classmethod(lambda c: ("dp", c)), scope=scope):
                assert vars(K)["cm"].__get__(obj)() == ("new", Sub)
                assert vars(K)["fn"].__get__(obj)() == ("new", obj)
                assert vars(K)["dp"].__get__(obj)() == ("dp", Sub)


@pytest.mark.parametrize("call", ["positional", "keyword"])
def test_other_contexts_refuse_arguments_to_a_class_that_takes_none(call: str) -> None:
    """The installed ``__new__`` builds the class in other contexts as ``object`` would: a
    class with neither ``__init__`` nor ``__new__`` of its own refuses any argument."""

    class Bare:
        pass

    class Replacement:
        def __init__(self, *args: object, **kwargs: object) -> None:
            pass

    def build() -> object:
        return Bare(1) if call == "positional" else Bare(k=1)

    with pytest.raises(TypeError, match=r"Bare\(\) takes no arguments") as plain:
        build()
    with patchscope.redirect_construction(Bare, Replacement, scope="context"):
        assert type(build()) is Replacement
        with pytest.raises(TypeError) as ours:
            contextvars.Context().run(build)
        assert str(ours.value) == str(plain.value)
        assert type(contextvars.Context().run(Bare)) is Bare


def test_an_inherited_value_read_with_only_the_instance_binds_to_it() -> None:
    """Where this context sees no value of ours, ``vars(K)[name].__get__(obj)`` with no
    owner gives what ``K`` inherits, bound to *obj*, as ``obj.name`` does."""

    class Base:
        def fn(self) -> tuple[str, object]:
            return ("inherited", self)

    class K(Base):
        pass

    obj = K()
    with patchscope.redirect_attr(K, "fn", lambda self: ("new", self), scope="context"):
        assert vars(K)["fn"].__get__(obj)() == ("new", obj)
        seen = contextvars.Context().run(lambda: vars(K)["fn"].__get__(obj)())
        assert seen == ("inherited", obj)
    assert "fn" not in vars(K)


def test_a_dotted_redirect_whose_class_was_replaced_prepares_the_new_one() -> None:
    """The slots kept on a redirect for its next activation are for the class it resolved
    last: when the path names another class now, that one gets slots of its own."""

    class First:
        attr = "first"

    class Second:
        attr = "second"

    mod = types.ModuleType("_replaced_class_target")
    mod.Klass = First
    sys.modules[mod.__name__] = mod
    try:
        redirect = patchscope.redirect_attr(f"{mod.__name__}.Klass.attr", "new", scope="context")
        with redirect:
            assert First.attr == "new"
        mod.Klass = Second
        with redirect:
            assert Second.attr == "new" and First.attr == "first"
            assert in_other_thread(lambda: Second.attr) == "second"
        assert (First.attr, Second.attr) == ("first", "second")
        assert vars(First)["attr"] == "first" and vars(Second)["attr"] == "second"
    finally:
        del sys.modules[mod.__name__]
    assert patchscope.active() == ()


def test_a_context_new_on_a_subclass_leaves_the_base_new_to_other_threads() -> None:
    """Other threads read and call the ``__new__`` a base class defines, itself, while a
    subclass's ``__new__`` is redirected in this context; only object's own is stood in for."""

    class Base:
        def __new__(cls, *args: object) -> Any:
            made = object.__new__(cls)
            made.made = "base"
            return made

    class Sub(Base):
        pass

    def replacement(cls: type, *args: object) -> Any:
        made = object.__new__(cls)
        made.made = "replacement"
        return made

    with patchscope.redirect_attr(Sub, "__new__", replacement, scope="context"):
        assert Sub().made == "replacement"
        assert in_other_thread(lambda: Sub(1).made) == "base"
        assert in_other_thread(lambda: Sub.__new__ is Base.__new__) is True
    assert Sub().made == "base" and "__new__" not in vars(Sub)


def test_a_module_whose_class_changed_gets_one_private_class_for_its_later_scopes() -> None:
    """When a module's class changes between context scopes, the private subclass made for
    the new class is kept: every later scope switches the module to that same class."""

    class Lazy(types.ModuleType):
        pass

    mod = types.ModuleType("_reclassed_module")
    mod.x = "x"
    redirect = patchscope.redirect_attr(mod, "x", "new", scope="context")
    with redirect:
        assert type(mod).__base__ is types.ModuleType
    mod.__class__ = Lazy
    seen = []
    for _ in range(2):
        with redirect:
            assert mod.x == "new" and in_other_thread(lambda: mod.x) == "x"
            seen.append(type(mod))
        assert type(mod) is Lazy
    assert seen[0] is seen[1] and seen[0].__base__ is Lazy


def test_deleting_through_a_context_slot_runs_the_deleter_this_context_sees() -> None:
    """``del obj.p`` of a context-redirected property runs the replacement's deleter here only."""
    log: list[str] = []

    def deleter(label: str) -> Any:
        return lambda self: log.append(label)

    class Owner:
        p = property(lambda self: "original", None, deleter("original"))

    obj = Owner()
    replacement = property(lambda self: "replacement", None, deleter("replacement"))
    with patchscope.redirect_attr(Owner, "p", replacement, scope="context"):
        del obj.p
        in_other_thread(lambda: obj.__delattr__("p"))
        assert obj.p == "replacement"
    assert log == ["replacement", "original"]
    del obj.p
    assert log == ["replacement", "original", "original"] and obj.p == "original"


@pytest.mark.parametrize("scope", ["process", "context"])
def test_a_class_keeps_its_signature_while_its_construction_is_redirected(scope: str) -> None:
    """The dispatcher standing in as ``__new__`` shows the class's own signature."""
    import inspect

    class Point:
        def __init__(self, x: int, y: int = 0) -> None:
            self.x, self.y = x, y

    class Other(Point):
        pass

    before = inspect.signature(Point)
    with patchscope.redirect_construction(Point, Other, scope=scope):
        assert inspect.signature(Point) == before
        assert type(Point(1)) is Other
    assert inspect.signature(Point) == before
