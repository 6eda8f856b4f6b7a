"""redirect_call: every call of a Python function through any name, the function unchanged."""

from __future__ import annotations

import asyncio
import copy
import functools
import gc
import inspect
import pickle
import sys
import threading
import types
import warnings
import weakref
from collections.abc import AsyncGenerator, Generator, Iterator
from typing import Any

import pytest
from _threads import in_other_thread
from hypothesis import given
from hypothesis import strategies as st

import patchscope
from patchscope import (
    RedirectConflictWarning,
    UnsupportedTargetError,
    original,
    redirect_call,
)

JOIN = 10


def target(a: int, b: int = 2, /, c: int = 3, *args: int, d: int, e: int = 5, **kw: int) -> Any:
    """The target's doc."""
    return ("original", a, b, c, args, d, e, kw)


def record(*args: Any, **kwargs: Any) -> Any:
    return ("replacement", args, kwargs)


def simple(x: int) -> int:
    return x + 1


def negate(x: int) -> int:
    return -x


class Owner:
    def method(self, x: int) -> int:
        return x + 1

    @staticmethod
    def static(x: int) -> int:
        return x + 1

    @classmethod
    def klass(cls, x: int) -> int:
        return x + 1


def fresh(body: str = "return x + 1", params: str = "x") -> types.FunctionType:
    """A new module-level-like function, so tests never share a target."""
    namespace: dict[str, Any] = {}
    exec(f"def f({params}):\n    {body}\n", namespace)
    return namespace["f"]  # type: ignore[no-any-return]


# ---------------------------------------------------------------------------
# reaching every name


def test_reaches_every_name_bound_to_the_function() -> None:
    """Module attribute, alias, stored reference, bound method and staticmethod's function."""
    alias = simple
    stored = {"f": simple}
    func = Owner.method
    bound = Owner().method
    static = Owner.static
    klass = Owner.klass
    replacement = lambda *args: "r"  # noqa: E731
    with redirect_call(simple, replacement), redirect_call(func, replacement):
        with redirect_call(static, replacement), redirect_call(klass.__func__, replacement):
            assert simple(1) == alias(1) == stored["f"](1) == "r"
            assert bound(1) == Owner().method(1) == "r"
            assert static(1) == Owner.static(1) == "r"
            assert klass(1) == Owner.klass(1) == "r"
    assert simple(1) == alias(1) == bound(1) == static(1) == klass(1) == 2


def test_replacement_gets_the_parameters_as_the_signature_binds_them() -> None:
    """Defaults filled in; positional parameters positionally, keyword-only by keyword."""
    with redirect_call(target, record):
        assert target(1, d=4) == ("replacement", (1, 2, 3), {"d": 4, "e": 5})
        assert target(1, 7, 8, 9, 10, d=4, e=6, z=0) == (
            "replacement",
            (1, 7, 8, 9, 10),
            {"d": 4, "e": 6, "z": 0},
        )
        assert target(1, c=8, d=4) == ("replacement", (1, 2, 8), {"d": 4, "e": 5})
    assert target(1, d=4) == ("original", 1, 2, 3, (), 4, 5, {})


def test_bad_arguments_raise_as_without_the_redirect() -> None:
    """The trampoline binds like the function: a missing argument is a TypeError naming it."""
    with redirect_call(target, record):
        with pytest.raises(TypeError, match="'d'"):
            target(1)  # type: ignore[call-arg]
        with pytest.raises(TypeError):
            target(d=1)  # type: ignore[call-arg]


def test_defaults_changed_during_the_scope_are_used() -> None:
    """The function's own defaults are what the trampoline fills in, as they are at the call."""
    func = fresh("return x", "x=1")
    with redirect_call(func, lambda x: ("r", x)):
        func.__defaults__ = (5,)
        assert func() == ("r", 5)
    assert func() == 5


# ---------------------------------------------------------------------------
# what never changes


def _looks(func: Any) -> tuple[Any, ...]:
    return (
        inspect.signature(func),
        func.__name__,
        func.__qualname__,
        func.__doc__,
        func.__defaults__,
        func.__kwdefaults__,
        dict(func.__dict__),
        func.__code__.co_freevars,
        inspect.isgeneratorfunction(func),
        inspect.iscoroutinefunction(func),
        inspect.isasyncgenfunction(func),
    )


async def _agen(x: int) -> AsyncGenerator[int, None]:
    yield x


async def _coro(x: int) -> int:
    return x


def _gen(x: int) -> Generator[int, None, None]:
    yield x


@pytest.mark.parametrize("func", [target, simple, _agen, _coro, _gen, Owner.method])
@pytest.mark.parametrize("scope", ["context", "process"])
def test_the_function_looks_the_same_everywhere(func: Any, scope: str) -> None:
    """Signature, names, doc, defaults, __dict__ and kind, here and in another thread."""
    func.marker = 1
    try:
        before = _looks(func)
        code = func.__code__
        with redirect_call(func, record, scope=scope):
            assert func.__code__ is not code
            assert _looks(func) == before
            assert in_other_thread(lambda: _looks(func)) == before
        assert func.__code__ is code
        assert _looks(func) == before
    finally:
        del func.marker


def test_getsource_and_tracebacks_still_point_at_the_function() -> None:
    """The trampoline carries the function's file, first line and name."""
    source = inspect.getsource(simple)
    with redirect_call(simple, negate):
        assert inspect.getsource(simple) == source
        assert simple.__code__.co_name == "simple"
        assert simple.__code__.co_filename == __file__


def test_closures_work() -> None:
    """A closure's cells are shared: the original sees and changes them, redirected or not."""

    def make() -> Any:
        count = 0

        def bump() -> int:
            nonlocal count
            count += 1
            return count

        return bump

    bump = make()
    bump()
    with redirect_call(bump, lambda: patchscope.original(bump)() * 10):
        assert bump() == 20
        assert in_other_thread(bump) == 3
    assert bump() == 4


def test_a_closure_generator_gets_a_trampoline_sharing_its_cells() -> None:
    """A generator function with free variables: redirected, and elsewhere its cells as they are."""

    def make() -> Any:
        step = 10

        def gen(n: int) -> Generator[int, None, None]:
            for i in range(n):
                yield i * step

        def set_step(value: int) -> None:
            nonlocal step
            step = value

        return gen, set_step

    gen, set_step = make()
    with redirect_call(gen, lambda n: iter(["new"] * n)):
        assert gen.__code__.co_freevars == ("step",)
        assert list(gen(2)) == ["new", "new"]
        assert in_other_thread(lambda: list(gen(3))) == [0, 10, 20]
        set_step(3)
        assert in_other_thread(lambda: list(gen(3))) == [0, 3, 6]
    assert list(gen(3)) == [0, 3, 6]


def test_super_in_a_method_keeps_working() -> None:
    """The implicit __class__ cell is a free variable: the trampoline has one too."""

    class Base:
        def hello(self) -> str:
            return "base"

    class Child(Base):
        def hello(self) -> str:
            return "child+" + super().hello()

    func = Child.hello
    with redirect_call(func, lambda self: "r+" + original(func)(self)):
        assert Child().hello() == "r+child+base"
        assert in_other_thread(lambda: Child().hello()) == "child+base"


# ---------------------------------------------------------------------------
# original()


def test_original_runs_the_original_code_while_redirected() -> None:
    """For replacements that wrap the function; defaults are the function's."""
    with redirect_call(target, lambda *a, **k: ("wrapped", original(target)(*a, **k))):
        assert target(1, d=4) == ("wrapped", ("original", 1, 2, 3, (), 4, 5, {}))
        assert original(target)(1, d=0) == ("original", 1, 2, 3, (), 0, 5, {})
        made = original(target)
        assert made.__name__ == "target" and made.__doc__ == target.__doc__
        assert inspect.signature(made) == inspect.signature(target)
    assert original(target)(1, d=0) == target(1, d=0)


def test_original_of_a_function_nothing_redirects() -> None:
    """It runs what the function runs."""
    assert original(simple)(1) == 2
    assert original(simple) is not simple


def test_recursion_through_the_name_is_redirected() -> None:
    """The original's own calls of the function go through the trampoline."""
    func = fresh("return 0 if x == 0 else 1 + f(x - 1)")
    with redirect_call(func, lambda x: 100 if x == 1 else original(func)(x)):
        assert func(3) == 102
    assert func(3) == 3


# ---------------------------------------------------------------------------
# scopes


def test_context_scope_other_threads_call_the_original() -> None:
    """While one thread holds a context redirect, another calls the original at the same time."""
    entered, release = threading.Event(), threading.Event()
    seen: list[int] = []

    def holder() -> None:
        with redirect_call(simple, negate):
            seen.append(simple(1))
            entered.set()
            release.wait(JOIN)
            seen.append(simple(1))

    thread = threading.Thread(target=holder)
    thread.start()
    assert entered.wait(JOIN)
    try:
        assert simple(1) == 2
    finally:
        release.set()
        thread.join(JOIN)
    assert not thread.is_alive()
    assert seen == [-1, -1]


def test_process_scope_every_thread_calls_the_replacement() -> None:
    """scope="process" is seen by every thread."""
    with redirect_call(simple, negate, scope="process"):
        assert in_other_thread(lambda: simple(1)) == -1
        assert simple(1) == -1
    assert in_other_thread(lambda: simple(1)) == 2


def test_asyncio_tasks_see_only_their_own_scope() -> None:
    """A task created inside the scope inherits it; a task running alongside does not."""

    async def main() -> list[int]:
        started, proceed = asyncio.Event(), asyncio.Event()
        out: list[int] = []

        async def other() -> None:
            started.set()
            await proceed.wait()
            out.append(simple(1))

        task = asyncio.create_task(other())
        await started.wait()
        with redirect_call(simple, negate):
            inner = asyncio.create_task(asyncio.sleep(0, simple(1)))
            proceed.set()
            await task
            out.append(await inner)
        return out

    assert asyncio.run(main()) == [2, -1]


def test_context_activation_wins_over_process_in_its_context() -> None:
    """Precedence: this context's innermost, else the newest process one, else the original."""
    with redirect_call(simple, lambda x: "process", scope="process"):
        with redirect_call(simple, lambda x: "ctx"):
            assert simple(1) == "ctx"
            assert in_other_thread(lambda: simple(1)) == "process"
            with redirect_call(simple, lambda x: "ctx2"):
                assert simple(1) == "ctx2"
            assert simple(1) == "ctx"
        assert simple(1) == "process"
    assert simple(1) == 2


def test_out_of_order_stops_are_exact() -> None:
    """Stops in any order: the newest open process activation shows; then the original."""
    code = simple.__code__
    handles = [redirect_call(simple, lambda x, i=i: i, scope="process").start() for i in range(4)]
    handles[3].stop()
    assert simple(0) == 2
    handles[0].stop()
    assert simple(0) == 2
    handles[2].stop()
    assert simple(0) == 1
    handles[1].stop()
    assert simple(0) == 1 and simple.__code__ is code


def test_many_threads_churning_restore_exactly() -> None:
    """Threads entering and leaving both scopes at once leave the original code by identity."""
    func = fresh()
    code = func.__code__
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def churn(i: int) -> None:
        try:
            barrier.wait(JOIN)
            for n in range(200):
                scope = "context" if (i + n) % 2 else "process"
                with redirect_call(func, lambda x, i=i: ("r", i), scope=scope):
                    got = func(0)
                    if scope == "context" and got != ("r", i):
                        raise AssertionError(f"thread {i} saw {got!r}")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=churn, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN * 6)
    assert not any(t.is_alive() for t in threads)
    assert not errors, errors[:3]
    assert func.__code__ is code and func(0) == 1
    assert not patchscope.active()


# ---------------------------------------------------------------------------
# usage like every redirect


def test_decorator_start_stop_combine_and_active() -> None:
    """Decorated functions, start()/stop(), combine() and active() all work as for attributes."""
    r = redirect_call(simple, negate)

    @r
    def decorated() -> int:
        return simple(1)

    assert decorated() == -1 and simple(1) == 2
    handle = r.start()
    try:
        (act,) = patchscope.active()
        assert act is handle and act.target is simple and act.replacement is negate
    finally:
        handle.stop()
    handle.stop()  # harmless
    with patchscope.combine(r, redirect_call(target, record)) as values:
        assert values == (negate, record)
        assert simple(1) == -1 and target(0, d=0)[0] == "replacement"
    assert not patchscope.active()


def test_decorated_generator_is_redirected_only_while_it_runs() -> None:
    """The decorator contract of generators holds for call redirects too."""

    @redirect_call(simple, negate)
    def numbers() -> Generator[int, None, None]:
        yield simple(1)
        yield simple(1)

    gen = numbers()
    assert next(gen) == -1
    assert simple(1) == 2
    assert next(gen) == -1


def test_with_gives_the_replacement_and_repr_names_the_function() -> None:
    """``with r as value`` gives the replacement; the repr is what was passed."""
    r = redirect_call(simple, negate, scope="process")
    with r as value:
        assert value is negate
    assert repr(r).startswith("redirect_call(<function simple")
    assert "scope='process'" in repr(r)


def test_redirects_copy_and_pickle_as_new_equal_redirects() -> None:
    """copy and pickle give independent redirects of the same function."""
    r = redirect_call(simple, negate, scope="process")
    for twin in (copy.copy(r), copy.deepcopy(r), pickle.loads(pickle.dumps(r))):
        with twin:
            assert simple(1) == -1
        assert simple(1) == 2


def test_two_redirects_of_one_function_share_its_trampoline() -> None:
    """Nested activations of different redirects install the identical code object."""
    a, b = redirect_call(simple, negate), redirect_call(simple, record, scope="process")
    with a:
        code = simple.__code__
        with b:
            assert simple.__code__ is code
            assert simple(1) == -1
            assert in_other_thread(lambda: simple(1)) == ("replacement", (1,), {})


# ---------------------------------------------------------------------------
# generators, coroutines, async generators


def test_generator_delegates_send_throw_and_close() -> None:
    """The trampoline is a generator that delegates to what the replacement returns."""
    log: list[Any] = []

    def replacement(x: int) -> Generator[int, Any, str]:
        try:
            got = yield x
            log.append(got)
            try:
                yield -1
            except ValueError as exc:
                log.append(exc.args)
                yield -2
            yield -3
        finally:
            log.append("closed")
        return "done"

    with redirect_call(_gen, replacement):
        gen = _gen(5)
        assert inspect.isgenerator(gen)
        assert next(gen) == 5
        assert gen.send("hi") == -1
        assert gen.throw(ValueError("boom")) == -2
        gen.close()
        assert log == ["hi", ("boom",), "closed"]
        assert list(_gen(1)) == [1, -1, -3]

    def finishing(x: int) -> Generator[int, None, str]:
        yield x
        return "done"

    with redirect_call(_gen, finishing):
        gen = _gen(1)
        next(gen)
        with pytest.raises(StopIteration) as stop:
            next(gen)
        assert stop.value.value == "done"
    assert list(_gen(3)) == [3]


def test_generator_choice_is_made_when_its_body_starts() -> None:
    """Calling runs none of the body: the context that starts it decides."""
    r = redirect_call(_gen, lambda x: iter(["r"]))
    with r:
        started_after = _gen(1)
        started_elsewhere = _gen(1)
        assert in_other_thread(lambda: list(started_elsewhere)) == [1]
        assert list(_gen(1)) == ["r"]
    assert list(started_after) == [1]
    made_before = _gen(1)  # the original code: nothing redirected it when it was made
    with r:
        assert list(made_before) == [1]


def test_coroutine_awaits_what_the_replacement_returns() -> None:
    """Coroutine functions stay coroutine functions; the result is the replacement's."""

    async def replacement(x: int) -> int:
        await asyncio.sleep(0)
        return -x

    async def main() -> tuple[int, int]:
        with redirect_call(_coro, replacement):
            coro = _coro(3)
            assert inspect.iscoroutine(coro)
            inside = await coro
        return inside, await _coro(3)

    assert asyncio.run(main()) == (-3, 3)


def test_types_coroutine_generators_stay_awaitable() -> None:
    """A types.coroutine generator function's trampoline is awaitable too."""

    @types.coroutine
    def legacy(x: int) -> Generator[Any, None, int]:
        yield
        return x

    def replacement(x: int) -> Generator[Any, None, int]:
        yield
        return -x

    async def main() -> int:
        return await legacy(2)

    with redirect_call(legacy, replacement):
        assert asyncio.run(main()) == -2
    assert asyncio.run(main()) == 2


def test_async_generator_forwards_asend_athrow_and_aclose() -> None:
    """The trampoline is an async generator that forwards every operation."""
    log: list[Any] = []

    async def replacement(x: int) -> AsyncGenerator[int, Any]:
        try:
            got = yield x
            log.append(got)
            try:
                yield -1
            except KeyError as exc:
                log.append(exc.args)
                yield -2
            yield -3
        finally:
            log.append("closed")

    async def main() -> list[int]:
        with redirect_call(_agen, replacement):
            agen = _agen(5)
            assert inspect.isasyncgen(agen)
            assert await agen.__anext__() == 5
            assert await agen.asend("hi") == -1
            assert await agen.athrow(KeyError("k")) == -2
            await agen.aclose()
            return [i async for i in _agen(7)]

    assert asyncio.run(main()) == [7, -1, -3]
    assert log == ["hi", ("k",), "closed", None, "closed"]


def test_async_generator_helper_names_never_shadow_parameters() -> None:
    """Parameters named like the trampoline's own locals still reach the replacement."""
    namespace: dict[str, Any] = {}
    exec("async def f(agen, value, sent, exc):\n    yield agen\n", namespace)
    func = namespace["f"]

    async def replacement(*args: Any) -> AsyncGenerator[Any, None]:
        yield args

    async def main() -> list[Any]:
        with redirect_call(func, replacement):
            return [i async for i in func(1, 2, 3, 4)]

    assert asyncio.run(main()) == [(1, 2, 3, 4)]


# ---------------------------------------------------------------------------
# conflicts and changes of __code__


def test_someone_else_replacing_the_code_is_a_conflict() -> None:
    """Assigning __code__ during a scope warns at the exit, and the original is restored."""
    func = fresh()
    code = func.__code__
    with pytest.warns(RedirectConflictWarning, match="__code__"):
        with redirect_call(func, negate):
            func.__code__ = fresh("return 0").__code__
    assert func.__code__ is code


def test_code_replaced_between_scopes_is_the_new_original() -> None:
    """A function whose code changed outside any scope is redirected and restored with it."""
    func = fresh()
    r = redirect_call(func, negate, scope="process")
    with r:
        pass
    func.__code__ = new = fresh("return x * 10").__code__
    with redirect_call(func, lambda x: original(func)(x) + 1):
        assert func(2) == 21
        with r:
            assert in_other_thread(lambda: func(2)) == -2
        assert in_other_thread(lambda: func(2)) == 20
    assert func.__code__ is new


def test_a_redirect_made_before_the_code_changed_never_runs_the_old_body() -> None:
    """Its code holds the body it was made from: other threads still run the current original."""
    func = fresh()
    r = redirect_call(func, negate)
    func.__code__ = new = fresh("return x * 10").__code__
    with r:
        assert func(2) == -2
        assert in_other_thread(lambda: func(2)) == 20
        assert original(func)(2) == 20
    assert func.__code__ is new
    with r:
        assert in_other_thread(lambda: func(3)) == 30


@pytest.mark.parametrize("body", ["return x + 1", "yield x + 1"], ids=["plain", "generator"])
def test_our_code_saved_in_a_scope_and_assigned_back_later_is_the_original(body: str) -> None:
    """``f.__code__`` saved while redirected and assigned back afterwards runs the original.

    The next scope restores that code by identity; meanwhile other threads
    and ``original()`` run the body it was made from, never the replacement
    and never itself again.
    """
    func = fresh(body)
    code = func.__code__

    def result(x: int) -> Any:
        out = func(x)
        return out if isinstance(out, int) else list(out)

    def wrap(x: int) -> Any:
        return ("wrapped", original(func)(x))

    def wrap_gen(x: int) -> Generator[Any, None, None]:
        yield "wrapped"
        yield from original(func)(x)

    expected = result(1)
    with redirect_call(func, negate):
        saved = func.__code__
    assert func.__code__ is code
    func.__code__ = saved
    try:
        assert result(1) == expected
        plain = isinstance(expected, int)
        with redirect_call(func, wrap if plain else wrap_gen):
            assert in_other_thread(lambda: result(1)) == expected
            if plain:
                assert func(1) == ("wrapped", expected)
            else:
                assert list(func(1)) == ["wrapped", *expected]
        assert func.__code__ is saved
        assert in_other_thread(lambda: result(1)) == expected
    finally:
        func.__code__ = code


def test_saved_code_assigned_back_runs_its_body_in_its_own_frame() -> None:
    """Other threads run the body behind the saved code's check, not through the shadow."""
    func = fresh("import sys\n    return sys._getframe().f_code")
    with redirect_call(func, negate):
        saved = func.__code__
    func.__code__ = saved
    with redirect_call(func, negate):
        assert func.__code__ is saved
        assert in_other_thread(lambda: func(1)) is saved
    assert func.__code__ is saved


def test_saved_code_made_from_a_later_original_runs_that_body() -> None:
    """Code made after the original changed, assigned back, runs the body it was made from.

    The dispatcher outlives the change (a redirect object is kept), so its
    shadow still holds the first original: neither other threads nor
    ``original()`` may run that.
    """
    func = fresh("return ('v0', x)")
    kept = redirect_call(func, negate)
    with kept:
        pass
    func.__code__ = v1 = fresh("return ('v1', x)").__code__
    with redirect_call(func, negate):
        saved = func.__code__
    func.__code__ = saved
    try:
        assert func(1) == ("v1", 1)
        for redirect in (redirect_call(func, negate), kept):
            with redirect:
                assert func(1) == -1
                assert in_other_thread(lambda: func(1)) == ("v1", 1)
                assert original(func)(1) == ("v1", 1)
            assert func.__code__ is saved
    finally:
        func.__code__ = v1


def test_code_of_another_shape_between_scopes_gets_its_own_trampoline() -> None:
    """New parameters after a scope: the next redirect passes those, and restores that code."""
    func = fresh("return x", "x")
    with redirect_call(func, record):
        assert func(1) == ("replacement", (1,), {})
    func.__code__ = new = fresh("return (x, y)", "x, *, y").__code__
    func.__kwdefaults__ = {"y": 2}
    with redirect_call(func, record):
        assert func(1) == ("replacement", (1,), {"y": 2})
        assert in_other_thread(lambda: func(1)) == (1, 2)
    assert func.__code__ is new


def test_original_sees_through_a_trampoline_nothing_accounts_for() -> None:
    """A trampoline left on a function (after a fault) still leads original() to the real code."""
    func = fresh()
    code = func.__code__
    with redirect_call(func, negate):
        trampoline = func.__code__
    func.__code__ = trampoline
    try:
        assert original(func)(1) == 2
        assert original(func).__code__ is code
    finally:
        func.__code__ = code


def test_original_carries_the_function_names() -> None:
    """Its name, qualified name and module are the function's."""
    made = original(Owner.method)
    assert (made.__name__, made.__qualname__, made.__module__) == (
        "method",
        "Owner.method",
        __name__,
    )


def test_original_carries_a_module_set_after_definition() -> None:
    """A __module__ set after the def (as torch sets its public functions'), not the globals'."""

    def func() -> int:
        return 1

    func.__module__ = "torch.cuda"
    assert original(func).__module__ == "torch.cuda"


def test_original_carries_the_function_annotations() -> None:
    """Its annotations are the function's (3.14+: evaluated lazily, as the function's are)."""
    namespace: dict[str, Any] = {}
    source = "def f(x: int, *, y: 'Later' = 1) -> str:\n    return str(x)\n"
    exec(compile(source, "<annotated>", "exec", dont_inherit=True), namespace)
    func = namespace["f"]
    expected = {"x": int, "y": "Later", "return": str}
    assert func.__annotations__ == expected
    assert original(func).__annotations__ == expected


@pytest.mark.skipif(sys.version_info < (3, 11), reason="co_qualname is new in 3.11")
def test_trampoline_carries_the_qualified_name_for_tracebacks() -> None:
    """Tracebacks through the trampoline name the function as its own code does."""
    with redirect_call(Owner.method, negate):
        assert Owner.method.__code__.co_qualname == "Owner.method"


@pytest.mark.skipif(sys.version_info < (3, 11), reason="co_qualname is new in 3.11")
def test_a_generator_trampoline_carries_the_qualified_name() -> None:
    """A generator method gets a compiled trampoline, not a spliced check: it keeps the name too."""

    class Gen:
        def items(self) -> Iterator[int]:
            yield 1

    def other(self: Any) -> Iterator[int]:
        yield 2

    qualname = Gen.items.__code__.co_qualname
    with redirect_call(Gen.items, other):
        assert Gen.items.__code__.co_qualname == qualname
        assert list(Gen().items()) == [2]


def test_parameters_a_call_cannot_pass_are_refused() -> None:
    """A generator expression's code takes '.0': no call can pass it by name."""
    made = types.FunctionType((x for x in ()).gi_code, {})
    with pytest.raises(UnsupportedTargetError, match=r"'\.0'"):
        redirect_call(made, negate)


def test_a_dead_function_takes_its_dispatcher_and_trampoline_with_it() -> None:
    """Nothing of a redirect outlives the function and the redirect (code objects are not GC'd)."""
    from patchscope._call import dispatcher_of

    def make() -> Any:
        def inner(x: int) -> int:
            return x

        return inner

    func = make()
    redirect = redirect_call(func, negate)
    with redirect:
        disp = weakref.ref(dispatcher_of(func.__code__))  # type: ignore[arg-type]
        trampoline = weakref.ref(func.__code__)
        assert func(1) == -1
    del func, redirect
    gc.collect()
    assert disp() is None and trampoline() is None


# ---------------------------------------------------------------------------
# refusals


def _state(*funcs: Any) -> list[Any]:
    return [getattr(f, "__code__", None) for f in funcs]


@pytest.mark.parametrize(
    ("func", "error", "match"),
    [
        (len, UnsupportedTargetError, "builtin or C function"),
        ("".join, UnsupportedTargetError, "builtin or C function"),
        (str.join, UnsupportedTargetError, "builtin or C function"),
        (object.__init__, UnsupportedTargetError, "builtin or C function"),
        (Owner, TypeError, "redirect_construction"),
        (Owner().method, TypeError, r"__func__"),
        (vars(Owner)["static"], TypeError, r"__func__"),
        (vars(Owner)["klass"], TypeError, r"__func__"),
        (functools.partial(simple, 1), TypeError, "Python function it calls"),
        (42, TypeError, "not callable"),
    ],
)
def test_refused_with_what_to_use_instead(func: Any, error: type, match: str) -> None:
    """Builtins, classes, methods and other callables are refused, naming the object."""
    with pytest.raises(error, match=match):
        redirect_call(func, negate)
    with pytest.raises(error, match=match):
        original(func)


def test_refusals_change_nothing() -> None:
    """A refused replacement or scope leaves the function as it was."""
    code = simple.__code__
    with pytest.raises(TypeError, match="must be callable"):
        redirect_call(simple, 42)
    with pytest.raises(ValueError, match="scope must be"):
        redirect_call(simple, negate, scope="thread")
    assert simple.__code__ is code and not patchscope.active()


def test_redirecting_the_same_function_by_attribute_and_call() -> None:
    """redirect_attr on the function's module name and redirect_call compose."""
    mod = types.ModuleType("calls")
    mod.f = simple
    with patchscope.redirect_attr(mod, "f", negate, scope="context"):
        with redirect_call(simple, lambda x: "call"):
            assert mod.f(1) == -1
            assert simple(1) == "call"


# ---------------------------------------------------------------------------
# properties


@given(
    st.lists(
        st.sampled_from(["context", "process"]),
        min_size=1,
        max_size=8,
    ),
    st.lists(st.integers(0, 7), min_size=8, max_size=8),
)
def test_any_schedule_calls_what_the_precedence_rule_says(
    starts: list[str], stops: list[int]
) -> None:
    """Start a list of activations, stop them in random order; every call follows the rule."""
    func = fresh()
    code = func.__code__
    live: list[tuple[int, str, Any]] = []

    def expected(context: bool) -> Any:
        for index, scope, _ in reversed(live):
            if scope == "context" and context:
                return index
        for index, scope, _ in reversed(live):
            if scope == "process":
                return index
        return 1

    def check() -> None:
        assert func(0) == expected(True)
        assert in_other_thread(lambda: func(0)) == expected(False)

    for index, scope in enumerate(starts):
        handle = redirect_call(func, lambda x, index=index: index, scope=scope).start()
        live.append((index, scope, handle))
        check()
    for pick in stops[: len(live)]:
        _, _, handle = live.pop(pick % len(live))
        handle.stop()
        check()
    assert func.__code__ is code


# ---------------------------------------------------------------------------
# torch.compile


def test_torch_compile_gives_eager_results() -> None:
    """Code compiled with torch.compile calls what the eager code calls, redirected or not."""
    torch = pytest.importorskip("torch")

    def scale(x: Any) -> Any:
        return x * 2

    def triple(x: Any) -> Any:
        return x * 3

    def model(x: Any) -> Any:
        return scale(x) + 1

    x = torch.arange(4.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = torch.compile(model, backend="eager")
        assert torch.equal(compiled(x), model(x))
        with redirect_call(scale, triple):
            assert torch.equal(model(x), x * 3 + 1)
            assert torch.equal(compiled(x), model(x))
        assert torch.equal(compiled(x), x * 2 + 1)
        fresh_compiled = torch.compile(model, backend="aot_eager")
        with redirect_call(scale, triple, scope="process"):
            assert torch.equal(fresh_compiled(x), x * 3 + 1)
        assert torch.equal(fresh_compiled(x), x * 2 + 1)


# ---------------------------------------------------------------------------
# parity of the two builds


_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("start"), st.sampled_from(["context", "process"])),
        st.tuples(st.just("stop"), st.integers(0, 7)),
        st.tuples(st.just("rebind"), st.just(0)),
        # Somebody saving the function's code and assigning it back later.
        st.tuples(st.just("save"), st.just(0)),
        st.tuples(st.just("assign saved"), st.just(0)),
    ),
    max_size=12,
)


@pytest.mark.skipif(not patchscope.ACCELERATED, reason="compares the C build with pure Python")
@given(_OPS)
def test_both_builds_call_the_same_things(ops: list[tuple[str, Any]]) -> None:
    """The same operations on twin functions, one per build, give the same observables."""
    from _pure import load as load_pure

    builds = (patchscope, load_pure())
    # The body says whether it runs in the function's own code (behind the
    # check) or elsewhere (through the shadow).
    body = "import sys\n    return (x + 1, sys._getframe().f_code is f.__code__)"
    funcs = [fresh(body) for _ in builds]
    codes = [f.__code__ for f in funcs]
    live: list[list[Any]] = [[], []]
    saved: list[Any] = [None, None]

    def observe(i: int) -> tuple[Any, ...]:
        func = funcs[i]
        ours = [a for a in builds[i].active() if a.target is func]
        return (
            func(0),
            in_other_thread(lambda: func(0)),
            func.__code__ is codes[i],
            [(a.scope, a.replacement(0)) for a in ours],
        )

    def apply(i: int, op: str, arg: Any, n: int) -> list[str]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if op == "start":
                redirect = builds[i].redirect_call(funcs[i], lambda x, n=n: n, scope=arg)
                live[i].append(redirect.start())
            elif op == "stop" and live[i]:
                live[i].pop(arg % len(live[i])).stop()
            elif op == "rebind":
                funcs[i].__code__ = fresh("return -1").__code__
            elif op == "save":
                saved[i] = funcs[i].__code__
            elif op == "assign saved" and saved[i] is not None:
                funcs[i].__code__ = saved[i]
        return [type(w.message).__name__ for w in caught]

    try:
        for n, (op, arg) in enumerate(ops):
            assert apply(0, op, arg, n) == apply(1, op, arg, n)
            assert observe(0) == observe(1)
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for i in (0, 1):
                for handle in live[i]:
                    handle.stop()


def test_original_keeps_the_qualified_name() -> None:
    """original(func) is named as func is now: a nested function's qualified name, and one
    set after the def (as functools.wraps and torch do), not the code's."""

    def func() -> int:
        return 1

    assert original(func).__qualname__ == func.__qualname__
    assert original(func).__qualname__.endswith("<locals>.func")
    func.__qualname__ = "Public.func"
    assert original(func).__qualname__ == "Public.func"


def test_a_plain_function_the_check_cannot_be_spliced_into_gets_a_trampoline() -> None:
    """Past 255 constants the check cannot go in front of the body: the function gets a
    trampoline of its own kind instead, and is redirected all the same."""
    source = "def many(x):\n" + "".join(f"    x += {i}.5\n" for i in range(300)) + "    return x\n"
    namespace: dict[str, Any] = {}
    exec(source, namespace)
    many = namespace["many"]
    expected, code = many(0), many.__code__
    with patchscope.redirect_call(many, lambda x: ("replaced", x)):
        assert many.__code__ is not code and len(many.__code__.co_consts) < 10
        assert many(1) == ("replaced", 1)
        assert in_other_thread(lambda: many(0)) == expected
    assert many.__code__ is code and many(0) == expected


def test_the_generator_a_trampoline_runs_is_named_as_the_function() -> None:
    """Where the original body runs under a generator's trampoline, the generator it
    delegates to carries the function's qualified name, as the function's own would
    (one set after the def, as functools.wraps does, included)."""

    class Holder:
        def gen(self, x: int) -> Generator[int, None, None]:
            yield x

    Holder.gen.__qualname__ = "Public.gen"
    with redirect_call(Holder.gen, lambda self, x: iter([-x]), scope="context"):

        def outer_and_inner() -> tuple[str, str, list[int]]:
            made = Holder().gen(3)
            first = next(made)
            inner = made.gi_yieldfrom
            return made.__qualname__, inner.__qualname__, [first]

        assert in_other_thread(outer_and_inner) == ("Public.gen", "Public.gen", [3])
