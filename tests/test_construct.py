"""redirect_construction: every construction through any alias, identity kept."""

from __future__ import annotations

import copy
import inspect
import pickle
import threading
from typing import Any

import pytest
from _threads import in_other_thread

import patchscope
from patchscope import TargetNotWritableError, redirect_attr, redirect_construction

JOIN = 10


class Event:
    """Stands for torch.cuda.Event: defines its own __new__."""

    def __new__(cls, enable_timing: bool = False) -> Event:
        return super().__new__(cls)

    def __init__(self, enable_timing: bool = False) -> None:
        self.enable_timing = enable_timing


class Plain:
    """No __new__ of its own: inherits object.__new__."""

    def __init__(self, x: int, y: int = 2) -> None:
        self.x, self.y = x, y


class PlainChild(Plain):
    pass


class HostEvent:
    """The replacement."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args, self.kwargs = args, kwargs


def test_reaches_alias_bound_before_the_scope() -> None:
    """A name bound with `from ... import` earlier is reached, identity unchanged."""
    Alias = Event  # as `from torch.cuda import Event` would bind it
    holder = {"cls": Event}
    with redirect_construction(Event, HostEvent) as value:
        assert value is HostEvent
        a, b = Alias(enable_timing=True), holder["cls"]()
        assert isinstance(a, HostEvent) and a.kwargs == {"enable_timing": True}
        assert isinstance(b, HostEvent)
        assert Alias is Event
    assert type(Event()) is Event and patchscope.active() == ()


def test_restores_own_new_by_identity() -> None:
    """A class's own __new__ comes back by identity."""
    raw = vars(Event)["__new__"]
    with redirect_construction(Event, HostEvent):
        pass
    assert vars(Event)["__new__"] is raw
    assert Event(True).enable_timing is True


def test_inherited_new_class_still_takes_arguments_afterwards() -> None:
    """A class using object.__new__ constructs with arguments after the scope (CPython quirk)."""
    with redirect_construction(Plain, HostEvent):
        assert isinstance(Plain(1), HostEvent)
    p = Plain(1, y=3)
    assert (p.x, p.y) == (1, 3)
    with pytest.raises(TypeError):
        type("NoInit", (), {})(1)  # unaffected classes still reject arguments


def test_subclasses_unaffected_by_default() -> None:
    """Subclasses construct normally unless include_subclasses=True."""
    with redirect_construction(Plain, HostEvent):
        assert type(PlainChild(1)) is PlainChild
    with redirect_construction(Plain, HostEvent, include_subclasses=True):
        assert isinstance(PlainChild(1), HostEvent)
    assert type(PlainChild(1)) is PlainChild


def test_subclass_replacement_initialised_once() -> None:
    """A replacement that subclasses the class runs its own __init__ exactly once."""
    calls: list[int] = []

    class Better(Plain):
        def __init__(self, x: int, y: int = 2) -> None:
            calls.append(x)
            super().__init__(x * 10, y)

    for include in (False, True):
        calls.clear()
        with redirect_construction(Plain, Better, include_subclasses=include):
            obj = Plain(1)
        assert type(obj) is Better and obj.x == 10 and calls == [1]


def test_other_thread_constructs_and_pickles_real_class() -> None:
    """While one thread's scope is open, another builds and pickles the real class."""
    entered, done = threading.Event(), threading.Event()

    def holder() -> None:
        with redirect_construction(Plain, HostEvent):
            assert isinstance(Plain(1), HostEvent)
            entered.set()
            assert done.wait(JOIN)

    t = threading.Thread(target=holder)
    t.start()
    assert entered.wait(JOIN)
    try:
        obj = Plain(4)
        assert type(obj) is Plain
        clone = pickle.loads(pickle.dumps(obj))
        assert type(clone) is Plain and clone.x == 4
        assert pickle.loads(pickle.dumps(Plain)) is Plain
    finally:
        done.set()
        t.join(JOIN)
    assert not t.is_alive()


def test_process_scope_reaches_other_threads() -> None:
    """scope='process' redirects constructions in every thread."""
    with redirect_construction(Plain, HostEvent, scope="process"):
        assert isinstance(in_other_thread(lambda: Plain(1)), HostEvent)
    assert type(in_other_thread(lambda: Plain(1))) is Plain


def test_copy_inside_scope_builds_real_class() -> None:
    """copy/deepcopy of an existing instance inside the scope give real copies."""
    original = Plain(3)
    with redirect_construction(Plain, HostEvent):
        for clone in (copy.copy(original), copy.deepcopy(original)):
            assert type(clone) is Plain and clone.x == 3


def test_signature_unchanged_during_window() -> None:
    """inspect.signature(cls) is the class's own, inside the scope and elsewhere."""
    before = inspect.signature(Plain)
    with redirect_construction(Plain, HostEvent):
        assert inspect.signature(Plain) == before
        assert in_other_thread(lambda: inspect.signature(Plain)) == before
    assert inspect.signature(Plain) == before


def test_inherited_new_leaves_no_residue() -> None:
    """A class inheriting object.__new__ has no __new__ of its own afterwards."""

    class Fresh:
        def __init__(self, a: int) -> None:
            self.a = a

    class FreshChild(Fresh):
        pass

    before = dict(vars(Fresh))
    with redirect_construction(Fresh, HostEvent):
        assert isinstance(Fresh(1), HostEvent)
    assert dict(vars(Fresh)) == before
    assert Fresh(2).a == 2 and FreshChild(3).a == 3


def test_nested_innermost_wins_and_context_beats_process() -> None:
    """Nested constructions: innermost context one, then latest process one."""

    class A(HostEvent):
        pass

    class B(HostEvent):
        pass

    with redirect_construction(Plain, A, scope="process"):
        with redirect_construction(Plain, B):
            assert type(Plain(1)) is B
            assert type(in_other_thread(lambda: Plain(1))) is A
        assert type(Plain(1)) is A
    assert type(Plain(1)) is Plain


def test_active_shows_the_construction() -> None:
    """active() shows the class, '__new__', the replacement and the scope."""
    with redirect_construction(Event, HostEvent):
        (act,) = patchscope.active()
        assert act.target is Event and act.name == "__new__"
        assert act.replacement is HostEvent and act.scope == "context"


def test_immutable_type_is_refused() -> None:
    """Builtin/extension types whose __new__ cannot be replaced get a clear error."""
    with pytest.raises(TargetNotWritableError, match=r"'builtins.int'.*immutable"):
        redirect_construction(int, HostEvent)


def test_non_class_and_non_callable_are_refused() -> None:
    """A function instead of a class, or a non-callable replacement, is a TypeError."""
    with pytest.raises(TypeError, match="needs a class"):
        redirect_construction(len, HostEvent)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="callable"):
        redirect_construction(Plain, 3)


def test_as_class_decorator_active_during_init() -> None:
    """@redirect_construction(...) on a model class: events built in __init__ are replaced."""

    @redirect_construction(Event, HostEvent)
    class Model:
        def __init__(self) -> None:
            self.event = Event(enable_timing=True)

    assert isinstance(Model().event, HostEvent)
    assert type(Event()) is Event


def test_construction_and_attr_redirect_combined() -> None:
    """A construction redirect and a name redirect on the same module compose."""
    import types

    mod = types.ModuleType("m")
    mod.Event = Event
    with patchscope.combine(
        redirect_construction(Event, HostEvent), redirect_attr(mod, "flag", 1, create=True)
    ):
        assert isinstance(mod.Event(), HostEvent) and mod.flag == 1
    assert not hasattr(mod, "flag") and type(mod.Event()) is Event


def test_construction_redirect_does_not_keep_class_alive() -> None:
    """A class whose construction was redirected can be garbage collected afterwards."""
    import gc
    import weakref

    class Temp:
        pass

    with redirect_construction(Temp, HostEvent):
        assert isinstance(Temp(), HostEvent)
    ref = weakref.ref(Temp)
    del Temp
    gc.collect()
    assert ref() is None


def test_unpickling_inside_the_activating_context_builds_the_replacement() -> None:
    """The documented edge: pickle.loads calls cls.__new__ from C, so it is redirected too."""
    data = pickle.dumps(Plain(5))
    with redirect_construction(Plain, HostEvent):
        inside = pickle.loads(data)
        elsewhere = in_other_thread(lambda: pickle.loads(data))
    assert isinstance(inside, HostEvent)
    assert type(elsewhere) is Plain and elsewhere.x == 5
    after = pickle.loads(data)
    assert type(after) is Plain and after.x == 5


class _Meta(type):
    """A metaclass: its classes take the registry's general (Python) path."""


class _PlainTakesArg:
    """Inherits object.__new__ and takes an argument: the registry's fast path."""

    def __init__(self, a: int) -> None:
        self.a = a


class _MetaTakesArg(metaclass=_Meta):
    """The same with a metaclass: the registry's general path."""

    def __init__(self, a: int) -> None:
        self.a = a


@pytest.mark.parametrize("cls", [_PlainTakesArg, _MetaTakesArg], ids=["plain", "metaclass"])
def test_other_threads_never_see_a_half_removed_new(cls: type) -> None:
    """While activations of an inherited-__new__ class end, cls(1) keeps working elsewhere."""
    import sys

    redirect = redirect_construction(cls, dict)
    started, done = threading.Event(), threading.Event()
    errors: list[str] = []
    built = 0

    def construct() -> None:
        nonlocal built
        started.set()
        while not done.is_set():
            try:
                obj = cls(1)
            except Exception as exc:  # e.g. "object.__new__() takes exactly one argument"
                errors.append(repr(exc))
            else:
                if type(obj) is not cls or obj.a != 1:
                    errors.append(f"built {obj!r}")
            built += 1

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    worker = threading.Thread(target=construct)
    worker.start()
    try:
        assert started.wait(60)
        for _ in range(3000):
            with redirect:
                pass
    finally:
        done.set()
        worker.join(60)
        sys.setswitchinterval(interval)
    assert not worker.is_alive()
    assert built > 0
    assert errors == []
    assert "__new__" not in vars(cls) and cls(2).a == 2


def test_dispatcher_called_after_its_class_died_raises() -> None:
    """A dispatcher kept past its class's death raises TypeError instead of crashing."""
    import gc
    import weakref

    class Short:
        pass

    class Other:
        pass

    with redirect_construction(Short, dict):
        new = Short.__dict__["__new__"].__func__
    ref = weakref.ref(Short)
    del Short
    gc.collect()
    assert ref() is None
    with pytest.raises(TypeError, match="no longer exists"):
        new(None)
    with pytest.raises(TypeError, match="no longer exists"):
        new(Other)


@pytest.mark.parametrize("base", [dict, set, int, tuple, str], ids=lambda b: b.__name__)
def test_subclass_with_a_builtin_base_constructs_as_before_afterwards(base: type) -> None:
    """class S(T, builtin): once T's redirect ends, S builds through the builtin's __new__ again."""

    class T:
        pass

    class S(T, base):  # type: ignore[misc, valid-type]
        pass

    class G(S):
        pass

    args = {dict: ({"a": 1},), set: ([1],), int: (5,), tuple: ([1, 2],), str: ("x",)}[base]
    expected = base(*args)
    with redirect_construction(T, dict):
        assert T() == {}
    for cls in (S, G):
        built = cls(*args)
        assert type(built) is cls and built == expected
    assert "__new__" not in vars(T) and type(T()) is T


def test_metaclass_defining_subclasses_is_harmless() -> None:
    """A metaclass whose __subclasses__ returns a tuple does not upset the restore."""

    class Meta(type):
        def __subclasses__(cls) -> tuple[type, ...]:  # type: ignore[override]
            return tuple(type.__subclasses__(cls))

    class T(metaclass=Meta):
        def __init__(self, x: int = 0) -> None:
            self.x = x

    class S(T):
        pass

    with redirect_construction(T, dict):
        assert T() == {}
    assert T(1).x == 1 and S(2).x == 2 and type(S()) is S


def test_a_construction_beside_other_context_redirects_builds_its_own_replacement() -> None:
    """The construction's dispatcher finds its own activation among this context's others.

    Every context slot reads one variable: the innermost activation there may
    be an attribute redirect's, or another class's construction.
    """

    class Made:
        pass

    class Other:
        pass

    class MadeStandIn:
        pass

    class OtherStandIn:
        pass

    holder = type(inspect)("holder")
    holder.value = "orig"
    with redirect_construction(Made, MadeStandIn):
        with redirect_attr(holder, "value", "new", scope="context"):
            with redirect_construction(Other, OtherStandIn):
                with redirect_attr(Made, "tag", 1, scope="context", create=True):
                    assert type(Made()) is MadeStandIn
                    assert type(Other()) is OtherStandIn
                    assert holder.value == "new"
                    assert in_other_thread(lambda: (type(Made()), type(Other()))) == (Made, Other)
            assert type(Other()) is Other
            assert type(Made()) is MadeStandIn
    assert type(Made()) is Made


def test_a_construction_redirect_takes_no_new_attributes() -> None:
    """A Redirect is immutable: a construction redirect has no instance dict to add to."""
    redirect = redirect_construction(Plain, lambda x, y=2: (x, y))
    with pytest.raises(AttributeError):
        redirect.extra = 1  # type: ignore[attr-defined]
    assert not hasattr(redirect, "__dict__")
    with redirect:
        assert Plain(1) == (1, 2)  # type: ignore[comparison-overlap]
    assert isinstance(Plain(1), Plain)
