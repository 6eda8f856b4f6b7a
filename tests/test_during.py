"""deferred and during (patchscope._during): a redirect chosen per activation, a wrapped method."""

from __future__ import annotations

import sys
import types

import pytest
from _threads import in_other_thread

import patchscope
from patchscope import (
    AttributeMissingError,
    during,
    redirect_attr,
)


def test_during_wraps_a_third_party_constructor() -> None:
    """during(owner, '__init__', r): r is active while the constructor runs, then gone."""
    mod = types.ModuleType("device")
    mod.kind = "cuda"

    class ThirdParty:
        def __init__(self) -> None:
            self.seen = mod.kind

    raw = vars(ThirdParty)["__init__"]
    with during(ThirdParty, "__init__", redirect_attr(mod, "kind", "cpu")):
        assert ThirdParty().seen == "cpu"
        assert mod.kind == "cuda"
    assert vars(ThirdParty)["__init__"] is raw
    assert ThirdParty().seen == "cuda"


def test_during_inherited_method_deletes_the_shadow() -> None:
    """Wrapping an inherited method puts a shadow in the owner, deleted on exit."""
    mod = types.ModuleType("m")
    mod.flag = False

    class Base:
        def run(self) -> bool:
            return bool(mod.flag)

    class Sub(Base):
        pass

    handle = during(Sub, "run", redirect_attr(mod, "flag", True)).start()
    assert Sub().run() is True and Base().run() is False
    handle.stop()
    assert "run" not in vars(Sub) and Sub().run() is False


def test_during_staticmethod_keeps_binding() -> None:
    """A wrapped staticmethod still binds as one."""
    mod = types.ModuleType("m")
    mod.x = 1

    class C:
        @staticmethod
        def f(a: int) -> int:
            return a + int(mod.x)

    with during(C, "f", redirect_attr(mod, "x", 10)):
        assert C.f(1) == 11 and C().f(1) == 11
    assert C.f(1) == 2


@pytest.mark.parametrize("owner_kind", ["class", "inherited", "staticmethod"])
def test_during_with_context_redirects_leaves_other_threads_alone(owner_kind: str) -> None:
    """Context-scoped redirects: only the activating context's calls are wrapped."""
    mod = types.ModuleType("m")
    mod.kind = "orig"

    class Base:
        def __init__(self) -> None:
            self.seen = mod.kind

        @staticmethod
        def probe() -> str:
            return str(mod.kind)

    class Sub(Base):
        pass

    owner, name = {
        "class": (Base, "__init__"),
        "inherited": (Sub, "__init__"),
        "staticmethod": (Base, "probe"),
    }[owner_kind]
    call = (lambda: owner().seen) if name == "__init__" else (lambda: owner.probe())
    before = dict(vars(owner))
    wrapped = during(owner, name, redirect_attr(mod, "kind", "new", scope="context"))
    with wrapped:
        assert call() == "new"
        assert in_other_thread(call) == "orig"
    assert dict(vars(owner)) == before
    assert call() == "orig" and patchscope.active() == ()


def test_during_scope_follows_its_redirects() -> None:
    """The wrapper is context-scoped only when everything it activates is."""
    mod = types.ModuleType("m")
    mod.x = mod.y = 0

    class C:
        def run(self) -> int:
            return int(mod.x) + int(mod.y)

    ctx = redirect_attr(mod, "x", 1, scope="context")
    proc = redirect_attr(mod, "y", 2)
    with during(C, "run", ctx):
        assert C().run() == 1 and in_other_thread(lambda: C().run()) == 0
    with during(C, "run", ctx, proc):  # a process-scoped part reaches every thread
        assert C().run() == 3 and in_other_thread(lambda: C().run()) == 3
    instance = C()
    with during(instance, "run", ctx):  # on the instance for every thread, gated
        assert instance.run() == 1 and in_other_thread(instance.run) == 0
        with during(instance, "run", proc):  # a process-scoped one runs everywhere
            assert instance.run() == 3 and in_other_thread(instance.run) == 2
    assert C().run() == 0 and "run" not in vars(instance)
    holder = types.ModuleType("patchscope_during_holder")
    holder.C, holder.instance = C, instance
    sys.modules[holder.__name__] = holder
    try:  # a path: the scope follows what it names at each activation
        with during(f"{holder.__name__}.C", "run", ctx):
            assert C().run() == 1 and in_other_thread(lambda: C().run()) == 0
        with during(f"{holder.__name__}.instance", "run", ctx):
            assert instance.run() == 1 and in_other_thread(instance.run) == 0
    finally:
        del sys.modules[holder.__name__]
    assert C().run() == 0 and patchscope.active() == ()


def test_during_missing_method() -> None:
    """during() on a missing method names owner and method."""

    class C:
        pass

    with pytest.raises(AttributeMissingError, match="'nope'") as info:
        during(C, "nope", redirect_attr(types.ModuleType("m"), "x", 1, create=True)).start()
    assert "create=True" not in str(info.value)


def test_deferred_activates_what_its_factory_returns_each_time() -> None:
    """patchscope.deferred() calls its factory at each activation; None installs nothing."""
    target = types.ModuleType("deferred_target")
    target.attr = "original"
    choices = ["first", None, "third"]

    def factory() -> patchscope.Redirect | None:
        value = choices.pop(0)
        return None if value is None else patchscope.redirect_attr(target, "attr", value)

    redirect = patchscope.deferred(factory)
    with redirect:
        assert target.attr == "first"
    handle = redirect.start()
    assert handle.activations == () and target.attr == "original"
    handle.stop()
    with redirect:
        assert target.attr == "third"
    assert target.attr == "original" and choices == []
    with pytest.raises(ValueError, match="scope must be"):
        patchscope.deferred(factory, scope="thread")


@pytest.mark.parametrize("second_scope", ["process", "context"])
def test_a_during_beside_a_live_context_during_of_the_same_method(second_scope: str) -> None:
    """A second during() of a method a context during() holds wraps what the method is there."""
    mod = types.ModuleType("m")
    mod.attr = 1

    class Built:
        def __init__(self) -> None:
            self.seen = mod.attr

    raw = vars(Built)["__init__"]
    first = during(Built, "__init__", redirect_attr(mod, "attr", 2, scope="context"))
    second = during(Built, "__init__", redirect_attr(mod, "attr", 3, scope=second_scope))
    with first:
        with second:
            # Nested in one context the inner wrapper runs the outer (whose
            # redirect is entered last, as with nested process-scoped ones);
            # a process-scoped one wraps what every other context sees.
            assert Built().seen == 2
            other = in_other_thread(lambda: Built().seen)
            assert other == (3 if second_scope == "process" else 1)
        assert Built().seen == 2
    assert vars(Built)["__init__"] is raw and Built().seen == 1
    assert patchscope.active() == ()


def test_a_nested_context_during_wraps_the_method_past_other_slots_activations() -> None:
    """What this context sees of the method is its own slot's activation, not the most
    recent context activation of another class's slot."""
    mod = types.ModuleType("m")
    mod.attr = 1

    class Built:
        def __init__(self) -> None:
            self.seen = mod.attr

    class Unrelated:
        value = "unrelated"

    with during(Built, "__init__", redirect_attr(mod, "attr", 2, scope="context")):
        with redirect_attr(Unrelated, "value", "other", scope="context"):
            with during(Built, "__init__", redirect_attr(mod, "attr", 3, scope="context")):
                assert Built().seen == 2 and Unrelated.value == "other"
            assert Built().seen == 2
    assert Built().seen == 1 and Unrelated.value == "unrelated"
    assert patchscope.active() == ()


def test_during_of_an_inherited_method_behind_another_contexts_slot_wraps_the_base_method() -> None:
    """Another context's redirect put a slot on the subclass for a method it inherits: during()
    here wraps what this context sees there, the base class's method."""
    mod = types.ModuleType("m")
    mod.kind = "cuda"

    class Base:
        def method(self) -> str:
            return mod.kind

    class Sub(Base):
        pass

    other = in_other_thread(
        lambda: redirect_attr(Sub, "method", lambda self: "other", scope="context").start()
    )
    try:
        assert Sub().method() == "cuda"  # the other context's redirect is not seen here
        with during(Sub, "method", redirect_attr(mod, "kind", "cpu", scope="context")):
            assert Sub().method() == "cpu"
        assert Sub().method() == "cuda"
    finally:
        other.stop()
    assert "method" not in vars(Sub) and patchscope.active() == ()


def test_during_of_several_context_redirects_leaves_other_threads_alone() -> None:
    """Several context-scoped redirects (combined) give the wrapper their scope: calls from
    another thread run the original while the activating thread's run with them."""
    mod = types.ModuleType("m")
    mod.a, mod.b = "a", "b"

    class Owner:
        def read(self) -> tuple[str, str]:
            return (mod.a, mod.b)

    first = redirect_attr(mod, "a", "A", scope="context")
    second = redirect_attr(mod, "b", "B", scope="context")
    with during(Owner, "read", first, second):
        assert Owner().read() == ("A", "B")
        assert in_other_thread(lambda: Owner().read()) == ("a", "b")
    assert Owner().read() == ("a", "b")


def test_during_refuses_a_name_that_is_not_an_identifier() -> None:
    """A keyword or a dotted path as the method's name is refused, naming it, before any
    lookup; nothing changes."""

    class Owner:
        def run(self) -> None:
            pass

    mod = types.ModuleType("m")
    mod.x = 1
    before = dict(vars(Owner))
    for name in ("class", "run.inner"):
        with pytest.raises(ValueError, match=rf"plain identifier, got '{name}'"):
            during(Owner, name, redirect_attr(mod, "x", 2))
    assert dict(vars(Owner)) == before and patchscope.active() == ()


def test_during_without_redirects_is_refused() -> None:
    class Owner:
        def method(self) -> None:
            pass

    with pytest.raises(TypeError, match=r"during\(.*Owner.*'method'\) needs at least one redirect"):
        during(Owner, "method")
    assert "method" in vars(Owner) and patchscope.active() == ()


def test_during_refuses_what_is_not_a_redirect_naming_it() -> None:
    """A plain value in place of the one redirect is refused at the call, naming its type
    and value; the method is untouched."""

    class Owner:
        def method(self) -> None:
            pass

    own = vars(Owner)["method"]
    with pytest.raises(TypeError, match=r"during\(\) takes Redirect objects, got str 'cuda'"):
        during(Owner, "method", "cuda")  # type: ignore[arg-type]
    assert vars(Owner)["method"] is own and patchscope.active() == ()


def test_copies_and_pickles_of_a_during_wrap_the_same_method() -> None:
    """A copy or an unpickled during() is a new, equal redirect: same owner, name, redirects."""
    import copy
    import pickle

    made = during(_PickledOwner, "method", redirect_attr("_pickled_during_target.kind", "cpu"))
    for again in (copy.copy(made), copy.deepcopy(made), pickle.loads(pickle.dumps(made))):
        assert again is not made
        with again:
            assert _PickledOwner().method() == "cpu"
        assert _PickledOwner().method() == "cuda"


def test_ended_gates_on_an_instance_are_pruned_at_the_next_opening() -> None:
    """A context during() of an instance's method opens a gate per activation; the gates of
    ended activations are not kept in the context."""
    import gc

    from patchscope._during import _ContextGate

    mod = types.ModuleType("m")
    mod.kind = "cuda"

    class Owner:
        def method(self) -> str:
            return mod.kind

    obj = Owner()
    redirect = during(obj, "method", redirect_attr(mod, "kind", "cpu", scope="context"))
    for _ in range(3):
        gc.collect()
        with redirect:
            assert obj.method() == "cpu"
            assert in_other_thread(obj.method) == "cuda"
    assert len(_ContextGate._opened.get()) == 1
    assert patchscope.active() == ()


_PICKLED = types.ModuleType("_pickled_during_target")
_PICKLED.kind = "cuda"
sys.modules[_PICKLED.__name__] = _PICKLED


class _PickledOwner:
    def method(self) -> str:
        return str(_PICKLED.kind)
