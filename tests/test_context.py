"""scope="context": visible only to the activating thread / asyncio task."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import pickle
import subprocess
import sys
import textwrap
import threading
import types
from typing import Any

import pytest
from _targets import CONTEXT_KINDS, FACTORIES
from _threads import in_other_thread

import patchscope
from patchscope import UnsupportedTargetError, redirect_attr

JOIN = 10  # seconds; every join has a timeout


class Model:
    """A module-level class so that pickle can find it."""

    def __init__(self, x: int = 1) -> None:
        self.x = x

    @classmethod
    def make(cls) -> Model:
        return cls(5)


class Fake:
    """The replacement class."""

    def __init__(self, *args: object) -> None:
        self.args = args


@pytest.fixture
def mod() -> types.ModuleType:
    """A module registered in sys.modules holding a class, a function and a value."""
    m = types.ModuleType("ctx_target_mod")
    m.Model = Model
    m.func = len
    m.value = 10
    sys.modules[m.__name__] = m
    Model.__module__ = m.__name__
    yield m
    del sys.modules[m.__name__]
    Model.__module__ = __name__


@pytest.mark.parametrize("kind", CONTEXT_KINDS)
def test_zero_residue_for_every_kind(kind: str) -> None:
    """After a context activation, vars() holds the original objects by identity."""
    case = FACTORIES[kind]()
    before = case.raw()
    cls_before = type(case.target)
    with redirect_attr(case.target, case.name, "R", create=case.create, scope="context"):
        if isinstance(case.target, types.ModuleType):
            # Modules keep the original in their dict even during the window.
            assert vars(case.target).get(case.name, "-") is before.get(case.name, "-")
        assert getattr(case.target, case.name) == "R"
    after = case.raw()
    assert after.keys() == before.keys() and all(after[k] is before[k] for k in before)
    assert type(case.target) is cls_before
    assert patchscope.active() == ()


def test_other_thread_sees_original_at_the_same_time(mod: types.ModuleType) -> None:
    """Thread A inside the scope and thread B outside, sampled many times together."""
    original = mod.Model
    barrier = threading.Barrier(2, timeout=JOIN)
    rounds = 200
    seen_a: list[bool] = []
    seen_b: list[bool] = []

    def a() -> None:
        with redirect_attr(mod, "Model", Fake, scope="context"):
            for _ in range(rounds):
                barrier.wait()
                seen_a.append(mod.Model is Fake)
                barrier.wait()

    def b() -> None:
        for _ in range(rounds):
            barrier.wait()
            seen_b.append(mod.Model is original)
            barrier.wait()

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN)
        assert not t.is_alive()
    assert seen_a == [True] * rounds and seen_b == [True] * rounds
    assert mod.Model is original and type(mod) is types.ModuleType


def read_model(m: types.ModuleType) -> object:
    """One attribute-read site, shared by every thread of the warm-site tests."""
    return m.Model


def test_warm_read_site_in_both_threads_at_once(mod: types.ModuleType) -> None:
    """One read site, warmed before the scope, answers per thread while both read in loops.

    Since 3.14 a warm site reading a module attribute may be rewritten to read
    the module's ``__dict__`` directly (CPython gh-156399): the activating
    thread must still see its replacement on every read, the other thread the
    original.
    """
    original = mod.Model
    for _ in range(1000):  # warm (specialize) the site on the plain module first
        assert read_model(mod) is original
    barrier = threading.Barrier(2, timeout=JOIN)
    rounds, reads = 50, 20
    seen_a: list[object] = []
    seen_b: list[object] = []

    def a() -> None:
        with redirect_attr(mod, "Model", Fake, scope="context"):
            for _ in range(rounds):
                barrier.wait()
                seen_a.extend(read_model(mod) for _ in range(reads))
                barrier.wait()

    def b() -> None:
        for _ in range(rounds):
            barrier.wait()
            seen_b.extend(read_model(mod) for _ in range(reads))
            barrier.wait()

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN)
        assert not t.is_alive()
    assert len(seen_a) == len(seen_b) == rounds * reads
    assert all(v is Fake for v in seen_a), f"{seen_a.count(original)} reads saw the original"
    assert all(v is original for v in seen_b), f"{seen_b.count(Fake)} reads saw the replacement"
    assert read_model(mod) is original and type(mod) is types.ModuleType


def test_warm_loop_sees_the_replacement_every_time() -> None:
    """The loop from the 3.14 report: five reads in a row, all of the replacement."""
    m = types.ModuleType("m")
    m.X = "orig"
    with redirect_attr(m, "X", "new", scope="context"):
        assert [m.X for _ in range(5)] == ["new"] * 5
        assert in_other_thread(lambda: [m.X for _ in range(5)]) == ["orig"] * 5
    assert [m.X for _ in range(5)] == ["orig"] * 5


def test_the_modules_own_functions_read_their_globals_unredirected() -> None:
    """Reads through the module see a context redirect; the module's globals keep the original."""
    mod = types.ModuleType("helpers")
    exec("def helper():\n    return 'original'\ndef caller():\n    return helper()\n", vars(mod))
    with redirect_attr(mod, "helper", lambda: "replacement", scope="context"):
        assert mod.helper() == "replacement"
        assert mod.caller() == "original"
    with redirect_attr(mod, "helper", lambda: "replacement", scope="process"):
        assert mod.caller() == "replacement"
    assert mod.caller() == "original" and patchscope.active() == ()


def test_module_getattr_runs_once_per_miss_while_a_slot_is_live() -> None:
    """PEP 562: a module ``__getattr__`` answers missing names exactly once per read."""
    m = types.ModuleType("m")
    m.X = "orig"
    calls: list[str] = []

    def __getattr__(name: str) -> str:
        calls.append(name)
        if name == "lazy":
            return "served"
        raise AttributeError(f"custom message for {name}")

    m.__getattr__ = __getattr__
    with redirect_attr(m, "X", "new", scope="context"):
        assert [m.lazy for _ in range(3)] == ["served"] * 3
        with pytest.raises(AttributeError, match="custom message for nothing"):
            m.nothing  # noqa: B018
        assert m.__getattr__ is __getattr__
    assert calls == ["lazy", "lazy", "lazy", "nothing"]


def test_missing_module_attribute_message_is_unchanged_while_a_slot_is_live() -> None:
    """Without a module ``__getattr__``, a missing name raises the module's own message."""
    m = types.ModuleType("plainmod")
    m.X = "orig"
    with pytest.raises(AttributeError) as outside:
        m.nothing  # noqa: B018
    with redirect_attr(m, "X", "new", scope="context"):
        with pytest.raises(AttributeError) as inside:
            m.nothing  # noqa: B018
        assert in_other_thread(lambda: hasattr(m, "nothing")) is False
        assert m.__dict__ is vars(m) and m.__name__ == "plainmod"
    assert str(inside.value) == str(outside.value)


def test_module_class_with_hooks_of_its_own_keeps_them() -> None:
    """A module whose class defines ``__getattr__`` (lazy modules) keeps that hook."""

    class LazyModule(types.ModuleType):
        def __getattr__(self, name: str) -> str:
            return f"lazy {name}"

    m = LazyModule("lazymod")
    m.X = "orig"
    with redirect_attr(m, "X", "new", scope="context"):
        assert [m.X for _ in range(5)] == ["new"] * 5
        assert m.anything == "lazy anything"
        assert type(m).__getattr__ is LazyModule.__getattr__
    assert type(m) is LazyModule and m.X == "orig"


def test_asyncio_tasks_see_their_own_replacement(mod: types.ModuleType) -> None:
    """Two tasks redirect the same attribute concurrently; each sees its own value."""

    async def task(value: int, ready: asyncio.Event, go: asyncio.Event) -> list[int]:
        seen = []
        with redirect_attr(mod, "value", value, scope="context"):
            ready.set()
            await go.wait()
            for _ in range(5):
                seen.append(mod.value)
                await asyncio.sleep(0)
        return seen

    async def main() -> tuple[list[int], list[int], int]:
        r1, r2, go = asyncio.Event(), asyncio.Event(), asyncio.Event()
        t1 = asyncio.create_task(task(1, r1, go))
        t2 = asyncio.create_task(task(2, r2, go))
        await r1.wait()
        await r2.wait()
        outside = mod.value
        go.set()
        s1, s2 = await asyncio.gather(t1, t2)
        return s1, s2, outside

    s1, s2, outside = asyncio.run(main())
    assert s1 == [1] * 5 and s2 == [2] * 5 and outside == 10
    assert mod.value == 10


def test_task_created_in_scope_inherits_then_loses_it(mod: types.ModuleType) -> None:
    """A task created inside the scope sees the replacement, and stops once the scope ends."""

    async def main() -> tuple[int, int]:
        scope_closed = asyncio.Event()
        inside = asyncio.Event()
        results: list[int] = []

        async def child() -> None:
            results.append(mod.value)
            inside.set()
            await scope_closed.wait()
            results.append(mod.value)

        with redirect_attr(mod, "value", 99, scope="context"):
            task = asyncio.create_task(child())
            await inside.wait()
        scope_closed.set()
        await task
        return results[0], results[1]

    assert asyncio.run(main()) == (99, 10)


def test_copy_context_run_and_to_thread_inherit(mod: types.ModuleType) -> None:
    """contextvars.copy_context().run and asyncio.to_thread carry the scope."""
    with redirect_attr(mod, "value", 7, scope="context"):
        ctx = contextvars.copy_context()
        assert in_other_thread(lambda: ctx.run(lambda: mod.value)) == 7
        assert in_other_thread(lambda: mod.value) == 10  # a plain Thread does not

        async def via_to_thread() -> int:
            return await asyncio.to_thread(lambda: mod.value)

        assert asyncio.run(via_to_thread()) == 7


def _thread_read(fn: Any, **thread_kwargs: Any) -> Any:
    """``fn()`` in a fresh ``threading.Thread(**thread_kwargs)``; its result."""
    results: list[Any] = []
    thread = threading.Thread(target=lambda: results.append(fn()), **thread_kwargs)
    thread.start()
    thread.join(JOIN)
    assert not thread.is_alive()
    return results[0]


@pytest.mark.skipif(sys.version_info < (3, 14), reason="Thread(context=...) is new in 3.14")
def test_thread_started_with_a_copy_of_the_context_sees_the_scope(mod: types.ModuleType) -> None:
    """3.14's ``Thread(context=...)``: a copy of this context carries the scope, until it ends."""
    started, scope_closed = threading.Event(), threading.Event()
    late: list[int] = []

    def outlives_the_scope() -> None:
        late.append(mod.value)
        started.set()
        assert scope_closed.wait(JOIN)
        late.append(mod.value)

    with redirect_attr(mod, "value", 7, scope="context"):
        assert _thread_read(lambda: mod.value, context=contextvars.copy_context()) == 7
        assert _thread_read(lambda: mod.value, context=contextvars.Context()) == 10
        thread = threading.Thread(target=outlives_the_scope, context=contextvars.copy_context())
        thread.start()
        assert started.wait(JOIN)
    scope_closed.set()
    thread.join(JOIN)
    assert not thread.is_alive()
    assert late == [7, 10]


@pytest.mark.skipif(
    sys.version_info < (3, 14), reason="sys.flags.thread_inherit_context is new in 3.14"
)
def test_scope_follows_thread_inherit_context() -> None:
    """With ``-X thread_inherit_context=1`` (free-threaded default) a plain Thread inherits it."""
    script = textwrap.dedent(
        """
        import sys, threading, types, patchscope
        m = types.ModuleType("m"); m.X = "orig"
        seen = []
        with patchscope.redirect_attr(m, "X", "new", scope="context"):
            t = threading.Thread(target=lambda: seen.append(m.X)); t.start(); t.join(60)
        t = threading.Thread(target=lambda: seen.append(m.X)); t.start(); t.join(60)
        print(sys.flags.thread_inherit_context, *seen)
        """
    )
    for flag, inside in (("1", "new"), ("0", "orig")):
        result = subprocess.run(
            [sys.executable, "-X", f"thread_inherit_context={flag}", "-c", script],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == [flag, inside, "orig"]


def test_precedence_context_over_process(mod: types.ModuleType) -> None:
    """Own innermost context activation wins; else the latest process one; else original."""
    p1 = redirect_attr(mod, "value", "p1").start()
    with redirect_attr(mod, "value", "c1", scope="context"):
        assert mod.value == "c1"
        assert in_other_thread(lambda: mod.value) == "p1"
        p2 = redirect_attr(mod, "value", "p2").start()
        assert mod.value == "c1"
        assert in_other_thread(lambda: mod.value) == "p2"
        with redirect_attr(mod, "value", "c2", scope="context"):
            assert mod.value == "c2"
        assert mod.value == "c1"
        p2.stop()
        assert in_other_thread(lambda: mod.value) == "p1"
    assert mod.value == "p1"
    p1.stop()
    assert mod.value == 10 and patchscope.active() == ()


def test_class_target_precedence_and_binding() -> None:
    """On a class, context wins over process and methods bind as before elsewhere."""

    class C:
        def m(self) -> str:
            return "orig"

    raw = vars(C)["m"]
    p = redirect_attr(C, "m", lambda self: "proc").start()
    with redirect_attr(C, "m", lambda self: "ctx", scope="context"):
        assert C().m() == "ctx"
        assert in_other_thread(lambda: C().m()) == "proc"
    p.stop()
    assert vars(C)["m"] is raw and C().m() == "orig"


def test_other_threads_get_full_behaviour_of_original(mod: types.ModuleType) -> None:
    """Calling, isinstance, subclassing, classmethods, signature and pickling work elsewhere."""
    original = mod.Model

    def elsewhere() -> dict[str, object]:
        cls = mod.Model
        obj = cls(3)

        class Child(mod.Model):  # type: ignore[name-defined, misc]
            pass

        return {
            "is": cls is original,
            "isinstance": isinstance(obj, original),
            "subclass": issubclass(Child, original),
            "classmethod": cls.make().x,
            "signature": str(inspect.signature(cls)),
            "pickle_cls": pickle.loads(pickle.dumps(cls)) is original,
            "pickle_obj": type(pickle.loads(pickle.dumps(obj))) is original,
        }

    with redirect_attr(mod, "Model", Fake, scope="context"):
        assert mod.Model is Fake
        result = in_other_thread(elsewhere)
    assert result == {
        "is": True,
        "isinstance": True,
        "subclass": True,
        "classmethod": 5,
        "signature": "(x: 'int' = 1) -> 'None'",
        "pickle_cls": True,
        "pickle_obj": True,
    }


def test_non_callable_values_are_supported(mod: types.ModuleType) -> None:
    """Plain values (ints, strings) can be redirected per context too."""
    with redirect_attr(mod, "value", "text", scope="context"):
        assert mod.value == "text"
        assert in_other_thread(lambda: mod.value) == 10


def test_instance_target_is_refused_with_hint() -> None:
    """Context scope on an instance attribute says what to do instead; nothing changes."""

    class C:
        pass

    obj = C()
    obj.x = 1
    with pytest.raises(UnsupportedTargetError, match="scope='process'"):
        redirect_attr(obj, "x", 2, scope="context").start()
    assert obj.x == 1 and patchscope.active() == ()


def test_module_getattr_still_serves_other_contexts() -> None:
    """A name served by module __getattr__ stays served elsewhere while redirected here."""
    case = FACTORIES["module __getattr__"]()
    served = case.target.value
    with redirect_attr(case.target, "value", "mine", scope="context"):
        assert case.target.value == "mine"
        assert in_other_thread(lambda: case.target.value) is served
    assert case.target.value is served


def test_created_attribute_absent_elsewhere() -> None:
    """create=True in context scope: other threads still get AttributeError."""
    m = types.ModuleType("m")
    with redirect_attr(m, "new", 1, create=True, scope="context"):
        assert m.new == 1
        assert in_other_thread(lambda: hasattr(m, "new")) is False
    assert not hasattr(m, "new")


def test_stop_from_another_thread_hides_it_everywhere(mod: types.ModuleType) -> None:
    """Ending a context activation from another thread ends it for its own context too."""
    handle = redirect_attr(mod, "value", 5, scope="context").start()
    assert mod.value == 5
    in_other_thread(lambda: handle.stop())
    assert mod.value == 10 and type(mod) is types.ModuleType


def test_generator_decorated_with_context_scope(mod: types.ModuleType) -> None:
    """A decorated generator sees the redirect while running, the caller never between items."""
    r = redirect_attr(mod, "value", 1, scope="context")

    @r
    def gen() -> Any:
        yield mod.value
        yield mod.value

    g = gen()
    assert next(g) == 1
    assert mod.value == 10
    assert next(g) == 1
    assert mod.value == 10


def test_repeated_activations_do_not_grow_the_context() -> None:
    """Fresh redirects in a loop reuse one ContextVar per attribute: the context stays small."""
    m = types.ModuleType("m")
    m.value = 1

    class C:
        value = 1

    for _ in range(3):
        with redirect_attr(m, "value", 2, scope="context"):
            pass
        with redirect_attr(C, "value", 2, scope="context"):
            pass
    size = len(contextvars.copy_context())
    for _ in range(200):
        with redirect_attr(m, "value", 2, scope="context"):
            pass
        with redirect_attr(C, "value", 2, scope="context"):
            pass
    assert len(contextvars.copy_context()) == size


def test_context_redirect_does_not_keep_class_alive() -> None:
    """A class redirected in context scope can be garbage collected afterwards."""
    import gc
    import weakref

    class Temp:
        value = 1

    with redirect_attr(Temp, "value", 2, scope="context"):
        assert Temp.value == 2
    ref = weakref.ref(Temp)
    del Temp
    gc.collect()
    assert ref() is None


def test_two_attributes_of_one_module_again_and_again() -> None:
    """Context redirects of two names of one module work after the module class came back."""
    m = types.ModuleType("m")
    m.value, m.other = 1, "x"

    def both() -> patchscope.Redirect:
        return patchscope.combine(
            redirect_attr(m, "value", 3, scope="context"),
            redirect_attr(m, "other", 4, scope="context"),
        )

    for _ in range(3):
        handle = in_other_thread(lambda: both().start())
        handle.stop()
        with both():
            assert (m.value, m.other) == (3, 4)
        assert (m.value, m.other) == (1, "x") and type(m) is types.ModuleType
    assert patchscope.active() == ()


def test_decorated_coroutine_in_context_scope_is_invisible_to_other_tasks(
    mod: types.ModuleType,
) -> None:
    """A context-scope decorated coroutine sees its value across awaits; a sibling task does not."""

    @redirect_attr(mod, "value", "mine", scope="context")
    async def decorated(entered: asyncio.Event, go: asyncio.Event) -> list[object]:
        seen = [mod.value]
        entered.set()
        await go.wait()
        seen.append(mod.value)
        return seen

    async def sibling(entered: asyncio.Event, go: asyncio.Event) -> object:
        await entered.wait()
        value = mod.value
        go.set()
        return value

    async def main() -> tuple[list[object], object]:
        entered, go = asyncio.Event(), asyncio.Event()
        return await asyncio.gather(decorated(entered, go), sibling(entered, go))

    seen, other = asyncio.run(main())
    assert seen == ["mine", "mine"] and other == 10 and mod.value == 10


@pytest.mark.parametrize("kind", ["module", "class"])
def test_rebinding_during_context_scope_warns_and_restores(kind: str) -> None:
    """Someone else rebinding a context-redirected name: warned, and the original returns."""
    case = FACTORIES[kind]()
    original = vars(case.target)[case.name]
    handle = redirect_attr(case.target, case.name, 2, scope="context").start()
    setattr(case.target, case.name, "intruder")
    with pytest.warns(patchscope.RedirectConflictWarning, match="'intruder'"):
        handle.stop()
    assert vars(case.target)[case.name] is original


def test_deletion_during_redirect_is_reported() -> None:
    """Deleting a redirected name is a conflict too; the original comes back."""
    m = types.ModuleType("m")
    m.value = original = object()
    handle = redirect_attr(m, "value", 2).start()
    del m.value
    with pytest.warns(patchscope.RedirectConflictWarning, match="deleted"):
        handle.stop()
    assert m.value is original


def test_other_threads_still_see_the_metaclass_attribute() -> None:
    """A context redirect of a name the metaclass provides leaves it to other threads as before."""

    class Meta(type):
        def create(cls) -> object:
            return cls()

    class Cls(metaclass=Meta):
        pass

    with redirect_attr(Cls, "create", classmethod(lambda cls: "fake"), scope="context"):
        assert Cls.create() == "fake"
        assert type(in_other_thread(lambda: Cls.create())) is Cls
        assert in_other_thread(lambda: hasattr(Cls(), "create")) is False
    assert type(Cls.create()) is Cls and not hasattr(Cls(), "create")


def test_context_redirect_of_new_leaves_other_threads_constructing_with_arguments() -> None:
    """redirect_attr(cls, "__new__", scope="context"): other threads still build cls(1)."""

    class Cls:
        def __init__(self, x: int) -> None:
            self.x = x

    with redirect_attr(Cls, "__new__", staticmethod(lambda cls, *a: "R"), scope="context"):
        assert Cls(1) == "R"
        built = in_other_thread(lambda: Cls(1))
        assert type(built) is Cls and built.x == 1  # type: ignore[attr-defined]
    assert Cls(2).x == 2
