"""Decorator forms: functions, methods, coroutines, generators, classes."""

from __future__ import annotations

import asyncio
import copy
import functools
import gc
import inspect
import os
import pickle
import subprocess
import sys
import threading
import types
import warnings
from typing import Any

import pytest

import patchscope
from patchscope import redirect_attr

JOIN = 10

state = types.ModuleType("decorate_state")
state.flag = "orig"
flag_on = redirect_attr(state, "flag", "on")


@flag_on
def module_level(a: int, b: int = 2) -> tuple[int, str]:
    """Docstring kept."""
    return a + b, state.flag


@flag_on
class Decorated:
    """A module-level decorated class (picklable)."""

    def __init__(self, x: int, *, y: int = 0) -> None:
        self.x, self.y = x, y
        self.seen = state.flag


@flag_on
def module_generator() -> Any:
    """A module-level decorated generator function (picklable by name)."""
    yield state.flag


class Child(Decorated):
    """Inherits the decorated __init__."""


class ChildSuper(Decorated):
    """Reaches the decorated __init__ through super()."""

    def __init__(self) -> None:
        self.before = state.flag
        super().__init__(1)


def test_function_metadata_preserved() -> None:
    """Name, docstring, __wrapped__ and signature are those of the function."""
    assert module_level.__name__ == "module_level"
    assert module_level.__doc__ == "Docstring kept."
    assert str(inspect.signature(module_level)) == "(a: 'int', b: 'int' = 2) -> 'tuple[int, str]'"
    assert module_level.__wrapped__(1) == (3, "orig")


def test_function_active_only_during_call() -> None:
    """The redirect is active inside the call and gone after, also after an exception."""
    assert module_level(1) == (3, "on")
    assert state.flag == "orig"

    @flag_on
    def boom() -> None:
        assert state.flag == "on"
        raise KeyError("x")

    with pytest.raises(KeyError):
        boom()
    assert state.flag == "orig" and patchscope.active() == ()


def test_recursive_and_concurrent_calls_are_independent() -> None:
    """Recursion and many threads calling at once: each call its own activation."""

    @flag_on
    def depth(n: int) -> int:
        assert state.flag == "on"
        return 0 if n == 0 else depth(n - 1) + 1

    assert depth(30) == 30
    barrier = threading.Barrier(8, timeout=JOIN)
    errors: list[BaseException] = []

    @flag_on
    def inside() -> None:
        barrier.wait()  # all 8 calls overlap here
        assert state.flag == "on"
        barrier.wait()

    def run() -> None:
        try:
            inside()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN)
        assert not t.is_alive()
    assert errors == [] and state.flag == "orig" and patchscope.active() == ()


def test_methods_bind_correctly() -> None:
    """Instance, class and static methods keep binding."""

    class C:
        @flag_on
        def inst(self) -> tuple[object, str]:
            return self, state.flag

        @classmethod
        @flag_on
        def cls_m(cls) -> tuple[object, str]:
            return cls, state.flag

        @staticmethod
        @flag_on
        def stat(x: int) -> tuple[int, str]:
            return x, state.flag

        @flag_on
        @staticmethod
        def stat_outer(x: int) -> tuple[int, str]:
            return x, state.flag

    c = C()
    assert c.inst() == (c, "on")
    assert C.cls_m() == (C, "on") and c.cls_m() == (C, "on")
    assert C.stat(1) == (1, "on") and c.stat(2) == (2, "on")
    assert C.stat_outer(3) == (3, "on")
    assert state.flag == "orig"


def test_coroutine_active_across_awaits() -> None:
    """A coroutine function is active for the whole call, across awaits."""

    @flag_on
    async def work() -> list[str]:
        seen = [state.flag]
        await asyncio.sleep(0)
        seen.append(state.flag)
        return seen

    assert inspect.iscoroutinefunction(work)
    assert asyncio.run(work()) == ["on", "on"]
    assert state.flag == "orig"


@pytest.mark.parametrize("how", ["function", "method"])
def test_a_coroutine_whose_redirect_cannot_be_entered_was_not_left_unawaited(how: str) -> None:
    """The entry's error is what awaiting raises; the coroutine is closed, not left unawaited.

    Nothing of it ran, and finalizing a coroutine that was never awaited
    would warn "coroutine ... was never awaited", which the caller did.
    """
    missing = redirect_attr(state, "missing", "on")

    class Owner:
        async def work(self) -> str:
            return str(state.flag)

    # A bound method is not a plain function: a wrapt proxy runs it.
    work = missing(Owner.work) if how == "function" else missing(Owner().work)
    args = (Owner(),) if how == "function" else ()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(patchscope.AttributeMissingError, match="'missing'") as raised:
            asyncio.run(work(*args))
        del raised  # its traceback holds the coroutine
        gc.collect()
    assert [str(w.message) for w in caught] == []


def test_generator_active_only_while_running() -> None:
    """The caller never sees the redirect between items; send/throw/return pass through."""

    @flag_on
    def gen(n: int) -> Any:
        got = []
        for _ in range(n):
            try:
                got.append((yield state.flag))
            except ValueError as exc:
                got.append(str(exc))
        return got

    assert inspect.isgeneratorfunction(gen)
    g = gen(3)
    assert next(g) == "on"
    assert state.flag == "orig"
    assert g.send("a") == "on"
    assert state.flag == "orig"
    assert g.throw(ValueError("boom")) == "on"
    with pytest.raises(StopIteration) as stop:
        g.send("c")
    assert stop.value.value == ["a", "boom", "c"]
    assert state.flag == "orig" and patchscope.active() == ()


def test_generator_close_runs_finally_under_redirect() -> None:
    """Closing a suspended generator runs its cleanup with the redirect active."""
    seen: list[str] = []

    @flag_on
    def gen() -> Any:
        try:
            yield 1
        finally:
            seen.append(state.flag)

    g = gen()
    next(g)
    g.close()
    assert seen == ["on"] and state.flag == "orig" and patchscope.active() == ()


def test_mock_patch_generator_bug_not_repeated() -> None:
    """unittest.mock.patch is gone before the body runs (gh-88893); patchscope is not."""
    import unittest.mock

    @unittest.mock.patch.object(state, "flag", "mock")
    def mock_gen() -> Any:
        yield state.flag

    @flag_on
    def our_gen() -> Any:
        yield state.flag

    assert list(mock_gen()) == ["orig"]  # mock's bug
    assert list(our_gen()) == ["on"]


def test_async_generator_active_only_while_running() -> None:
    """An async generator sees the redirect; the consumer between items does not."""

    @flag_on
    async def agen() -> Any:
        yield state.flag
        await asyncio.sleep(0)
        yield state.flag

    assert inspect.isasyncgenfunction(agen)

    async def consume() -> list[str]:
        out = []
        async for item in agen():
            out.append(item)
            out.append(state.flag)
        return out

    assert asyncio.run(consume()) == ["on", "orig", "on", "orig"]
    assert patchscope.active() == ()


def test_class_decorator_active_during_init_only() -> None:
    """A decorated class sees the redirect during __init__, returns the same class."""
    obj = Decorated(1, y=2)
    assert obj.seen == "on" and state.flag == "orig"
    assert Decorated.__name__ == "Decorated" and type(obj) is Decorated
    assert str(inspect.signature(Decorated)) == "(x: 'int', *, y: 'int' = 0) -> 'None'"


def test_class_decorator_returns_same_object() -> None:
    """The decorator returns the class it was given."""

    class Local:
        pass

    assert flag_on(Local) is Local


def test_subclasses_reaching_init_are_covered() -> None:
    """Inheritance and super().__init__() both reach the decorated __init__."""
    assert Child(1).seen == "on"
    c = ChildSuper()
    assert c.before == "orig" and c.seen == "on"


def test_decorated_class_pickles_and_copies() -> None:
    """The class and its instances pickle, copy and deep-copy."""
    obj = Decorated(3)
    assert pickle.loads(pickle.dumps(Decorated)) is Decorated
    for clone in (pickle.loads(pickle.dumps(obj)), copy.copy(obj), copy.deepcopy(obj)):
        assert type(clone) is Decorated and clone.x == 3


def test_decorated_functions_pickle_by_name() -> None:
    """pickle finds a decorated function by module and name, as it finds the function."""
    assert pickle.loads(pickle.dumps(module_level)) is module_level
    assert pickle.loads(pickle.dumps(module_generator)) is module_generator
    assert inspect.isfunction(module_level) and inspect.isgeneratorfunction(module_generator)


# Run in a fresh interpreter that has never seen the shipped code: what a Ray
# or Dask worker does with a class or function defined in a driver script.
_WORKER = """
import asyncio, pickle, string, sys
Model, probe, gen, agen = pickle.loads(sys.stdin.buffer.read())

async def gather():
    return [item async for item in agen()] + [await Model().coro()]

seen = [Model().seen, probe(), *gen(), *Model().gen(), *asyncio.run(gather())]
print(" ".join(seen), string.digits)
"""

_SHIPPED = """
import string
import patchscope

patched = patchscope.redirect_attr(string, "digits", "patched", scope="context")

@patched
class Model:
    def __init__(self):
        self.seen = string.digits

    @patched
    def gen(self):
        yield string.digits

    @patched
    async def coro(self):
        return string.digits

@patched
def probe():
    return string.digits

@patched
def gen():
    yield string.digits

@patched
async def agen():
    yield string.digits
"""


@pytest.mark.parametrize("worker_build", ["same", "pure Python"])
def test_decorations_survive_cloudpickle_by_value(worker_build: str) -> None:
    """Functions, generators, coroutines and classes shipped by value (Ray, Dask) keep working."""
    cloudpickle = pytest.importorskip("cloudpickle")
    module = types.ModuleType("patchscope_shipped")
    exec(_SHIPPED, module.__dict__)
    sys.modules[module.__name__] = module
    try:
        cloudpickle.register_pickle_by_value(module)
        try:
            payload = cloudpickle.dumps((module.Model, module.probe, module.gen, module.agen))
        finally:
            cloudpickle.unregister_pickle_by_value(module)
    finally:
        del sys.modules[module.__name__]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    if worker_build == "pure Python":  # decorated by the accelerator, run without it
        env["PATCHSCOPE_PURE_PYTHON"] = "1"
    worker = subprocess.run(
        [sys.executable, "-c", _WORKER],
        input=payload,
        capture_output=True,
        timeout=JOIN * 6,
        env=env,
        check=False,
    )
    assert worker.returncode == 0, worker.stderr.decode()
    assert worker.stdout.decode().split() == ["patched"] * 6 + ["0123456789"]


def test_generated_parameters_forward_every_kind_of_argument() -> None:
    """Decorated generators and coroutines take exactly the function's parameters and defaults."""
    default = object()

    @flag_on
    def gen(a: int, /, b: Any = default, *rest: int, c: int, d: int = 4, **extra: int) -> Any:
        yield (a, b, rest, c, d, extra, state.flag)

    @flag_on
    async def coro(a: int, b: int = 2, *, c: int = 3) -> tuple[int, int, int, str]:
        return a, b, c, state.flag

    assert next(gen(1, c=3)) == (1, default, (), 3, 4, {}, "on")
    assert next(gen(1, 2, 5, 6, c=3, d=7, e=8)) == (1, 2, (5, 6), 3, 7, {"e": 8}, "on")
    assert asyncio.run(coro(1, c=9)) == (1, 2, 9, "on")
    assert str(inspect.signature(coro)) == "(a: 'int', b: 'int' = 2, *, c: 'int' = 3) -> " + (
        "'tuple[int, int, int, str]'"
    )
    with pytest.raises(TypeError):
        gen(a=1, c=3)  # positional-only, as undecorated
    assert state.flag == "orig" and patchscope.active() == ()


def test_class_without_own_init() -> None:
    """A class inheriting object.__init__ keeps its signature and argument checks."""
    seen: list[str] = []

    class Bare:
        pass

    with pytest.raises(TypeError) as plain:
        Bare(1)
    before = inspect.signature(Bare)
    flag_on(Bare)
    assert inspect.signature(Bare) == before
    Bare()
    for call in (lambda: Bare(1), lambda: Bare(k=1)):
        with pytest.raises(TypeError) as decorated:
            call()
        assert str(decorated.value) == str(plain.value) == "Bare() takes no arguments"

    class Base:
        def __init__(self, a: int) -> None:
            seen.append(state.flag)

    @flag_on
    class Derived(Base):
        pass

    Derived(1)
    assert seen == ["on"] and "__init__" in vars(Derived)
    assert inspect.signature(Derived) == inspect.signature(Base)


def test_class_defining_only_new() -> None:
    """A class that constructs in __new__ gets __new__ wrapped (it binds as a staticmethod)."""

    @flag_on
    class OnlyNew:
        def __new__(cls, value: int) -> OnlyNew:
            obj = super().__new__(cls)
            obj.seen = (value, state.flag)  # type: ignore[attr-defined]
            return obj

    assert OnlyNew(5).seen == (5, "on")  # type: ignore[attr-defined]
    assert state.flag == "orig"


def test_decorating_non_callable_is_an_error() -> None:
    """Decorating something that is neither callable nor a class says what to do."""
    with pytest.raises(TypeError, match="context manager"):
        flag_on(3)  # type: ignore[call-overload]


def test_functools_partial_is_decorated_as_callable() -> None:
    """Any callable works."""
    wrapped = flag_on(functools.partial(lambda a: (a, state.flag), 1))
    assert wrapped() == (1, "on")


def test_torch_module_subclass_decorated() -> None:
    """Works on torch.nn.Module subclasses: parameters registered, construction covered."""
    torch = pytest.importorskip("torch")

    @flag_on
    class Net(torch.nn.Module):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(2, 2)
            self.seen = state.flag

    net = Net()
    assert net.seen == "on" and list(net.state_dict()) == ["lin.weight", "lin.bias"]
    assert state.flag == "orig"
    clone = copy.deepcopy(net)
    assert type(clone) is Net


def test_bad_arguments_raise_at_the_call_for_every_kind() -> None:
    """Decorated generator/async generator/coroutine functions reject bad arguments at the call."""

    @flag_on
    def gen(a: int) -> Any:
        yield a

    @flag_on
    async def agen(a: int) -> Any:
        yield a

    @flag_on
    async def coro(a: int) -> int:
        return a

    for fn in (gen, agen, coro):
        with pytest.raises(TypeError):
            fn(1, 2, 3)
    assert patchscope.active() == ()


def test_async_generator_closed_early_runs_its_cleanup_under_the_redirect() -> None:
    """aclose() before the end closes the generator at once, its finally seeing the redirect."""
    log: list[str] = []

    @flag_on
    async def agen() -> Any:
        try:
            yield state.flag
            yield state.flag
        finally:
            log.append(state.flag)

    async def consume() -> list[str]:
        gen = agen()
        first = await gen.__anext__()
        await gen.aclose()
        return [first, *log, state.flag]

    assert asyncio.run(consume()) == ["on", "on", "orig"]
    assert patchscope.active() == ()


def test_decorated_callable_object_without_code_has_an_unknown_site() -> None:
    """An activation of a decorated callable that has no code object reports its site as unknown."""

    class Call:
        def __call__(self) -> tuple[list[str], str]:
            return [act.site for act in patchscope.active()], state.flag

    wrapped = flag_on(Call())
    assert wrapped() == (["<unknown>"], "on")
    assert state.flag == "orig" and patchscope.active() == ()


@pytest.mark.parametrize("twin", ["_PyGuard", "_Guard"])
def test_a_guard_holds_one_activation_at_a_time(twin: str) -> None:
    """Entering a guard that holds an activation is refused; the one it holds goes on."""
    from patchscope import _decorate

    guard = getattr(_decorate, twin)(redirect_attr(state, "flag", "on"), None)
    with guard:
        with pytest.raises(RuntimeError, match="one activation at a time"):
            guard.__enter__()
        assert state.flag == "on" and len(patchscope.active()) == 1
    assert state.flag == "orig" and patchscope.active() == ()


def test_async_generator_takes_a_thrown_exception_and_goes_on() -> None:
    """athrow() into a decorated async generator that handles it: that step, and the ones
    after it, run with the redirect."""

    @flag_on
    async def agen() -> Any:
        while True:
            try:
                yield state.flag
            except ValueError:
                yield ("caught", state.flag)

    async def drive() -> list[Any]:
        gen = agen()
        seen = [await gen.asend(None), await gen.athrow(ValueError("x"))]
        seen += [await gen.asend(None), await gen.asend(None), state.flag]
        await gen.aclose()
        return seen

    assert asyncio.run(drive()) == ["on", ("caught", "on"), "on", "on", "orig"]
    assert patchscope.active() == ()


def test_closing_a_generator_is_one_more_activation() -> None:
    """Each step of a decorated generator is one activation, and closing it one more: a
    deferred redirect's factory runs once per step and once for the close."""
    calls: list[str] = []

    def factory() -> patchscope.Redirect:
        calls.append(state.flag)
        return redirect_attr(state, "flag", "on")

    @patchscope.deferred(factory)
    def gen() -> Any:
        yield state.flag
        yield state.flag

    @patchscope.deferred(factory)
    async def agen() -> Any:
        yield state.flag
        yield state.flag

    sync = gen()
    assert next(sync) == "on"
    sync.close()
    assert len(calls) == 2

    async def drive() -> str:
        running = agen()
        first = await running.asend(None)
        await running.aclose()
        return first

    assert asyncio.run(drive()) == "on"
    assert len(calls) == 4 and patchscope.active() == ()


def test_decorated_functions_of_one_shape_keep_their_own_defaults() -> None:
    """Two generator functions with the same parameters and different defaults share one
    compiled wrapper shape: each keeps its own defaults and signature."""

    @flag_on
    def first(a: int, b: int = 1, *, c: int = 10) -> Any:
        yield (a, b, c, state.flag)

    @flag_on
    def second(a: int, b: int = 2, *, c: int = 20) -> Any:
        yield (a, b, c, state.flag)

    assert list(first(0)) == [(0, 1, 10, "on")] and list(second(0)) == [(0, 2, 20, "on")]
    assert list(first(0, c=5)) == [(0, 1, 5, "on")]
    assert str(inspect.signature(second)) == "(a: 'int', b: 'int' = 2, *, c: 'int' = 20) -> 'Any'"
    with pytest.raises(TypeError):
        first()
