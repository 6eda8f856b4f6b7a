"""patchscope._pairing: each ``__exit__`` ends the activation its own ``__enter__`` made.

A Redirect keeps no per-activation state, so these check, through the public
API, which activation an exit ends: by frame (nesting, recursion, generators,
coroutines, other threads), through ``contextlib.ExitStack``, out of order,
and the error an exit that matches nothing raises.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import sys
import threading
import types
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from _threads import JOIN, in_other_thread

import patchscope
from patchscope import Activation, combine, redirect_attr, redirect_construction
from patchscope._pairing import pair_enter, pair_exit, push, site_of, with_stack

UNPAIRED = "__exit__ without a matching __enter__ in this thread"  # the documented error


def _module() -> types.ModuleType:
    mod = types.ModuleType("m")
    mod.value = "orig"
    return mod


def _live() -> set[int]:
    return {id(a) for a in patchscope.active()}


def _entered(enter: Callable[[], object]) -> Activation:
    """Call *enter* and return the one activation it added."""
    before = _live()
    enter()
    (added,) = [a for a in patchscope.active() if id(a) not in before]
    return added


def test_same_redirect_nested_and_recursive() -> None:
    """One Redirect object entered many times at once: each with is independent."""
    mod = types.ModuleType("m")
    mod.value = "orig"
    r = redirect_attr(mod, "value", "new")

    def recurse(n: int) -> int:
        with r:
            assert mod.value == "new"
            return n if n == 0 else recurse(n - 1) + 1

    assert recurse(20) == 20
    assert mod.value == "orig"
    assert patchscope.active() == ()


def test_exit_without_enter_is_an_error() -> None:
    """__exit__ with no matching __enter__ is a RuntimeError, not a silent no-op."""
    r = redirect_attr(types.ModuleType("m"), "x", 1, create=True)
    with pytest.raises(RuntimeError, match="without a matching"):
        r.__exit__(None, None, None)


def test_exitstack_pairs_nested_activations_of_one_redirect() -> None:
    """enter_context() from ExitStack (enter and exit in other frames) still pairs exactly."""

    mod = types.ModuleType("m")
    mod.value = "orig"
    r = redirect_attr(mod, "value", "r")
    s = redirect_attr(mod, "value", "s")
    with contextlib.ExitStack() as stack:
        stack.enter_context(r)
        stack.enter_context(s)
        stack.enter_context(r)
        assert mod.value == "r"
        assert len(patchscope.active()) == 3
    assert mod.value == "orig" and patchscope.active() == ()


def test_exitstack_exit_from_another_thread_ends_the_exitstack_activation() -> None:
    """An ExitStack entered in a worker and closed elsewhere ends its own activation only."""

    mod = types.ModuleType("m")
    mod.value = "orig"
    r = redirect_attr(mod, "value", "new", scope="context")
    stack = contextlib.ExitStack()
    worker = threading.Thread(target=lambda: stack.enter_context(r))
    worker.start()
    worker.join(10)
    assert not worker.is_alive()
    with r:
        assert mod.value == "new"
        stack.close()
        assert mod.value == "new"  # this block's activation is still live
        (act,) = patchscope.active()
        assert act.site.startswith(__file__)  # not contextlib.py
    assert mod.value == "orig" and patchscope.active() == ()


def test_exitstack_entry_site_is_the_callers_line() -> None:
    """Entered through ExitStack.enter_context, the site is the caller's line, not contextlib's."""

    mod = types.ModuleType("m")
    mod.value = 1
    with contextlib.ExitStack() as stack:
        stack.enter_context(redirect_attr(mod, "value", 2))
        line = sys._getframe().f_lineno - 1
        assert patchscope.active()[0].site == f"{__file__}:{line}"


class _Built:
    """A class whose constructions are redirected."""


def _redirect(kind: str, mod: types.ModuleType) -> patchscope.Redirect:
    """A redirect of each kind that enters one activation (and sets ``mod.value`` if it can)."""
    if kind == "attr":
        return redirect_attr(mod, "value", "new")
    if kind == "combined":
        return combine(redirect_attr(mod, "value", "new"))
    return redirect_construction(_Built, dict)


KINDS = ["attr", "combined", "construction"]


@pytest.mark.parametrize("kind", KINDS)
def test_blocks_nested_in_one_frame_exit_innermost_first(kind: str) -> None:
    """Two entries from one frame: the first exit ends the newer activation."""
    mod = _module()
    r = _redirect(kind, mod)
    outer = _entered(r.__enter__)
    inner = _entered(r.__enter__)
    r.__exit__(None, None, None)
    assert not inner.open and outer.open
    assert patchscope.active() == (outer,)
    r.__exit__(None, None, None)
    assert not outer.open and patchscope.active() == ()
    assert mod.value == "orig" and type(_Built()) is _Built


def test_an_exception_leaving_the_block_ends_its_activation_and_propagates() -> None:
    """``__exit__`` pairs on the way out of a failing block and does not swallow the error."""
    mod = _module()
    r = redirect_attr(mod, "value", "new")
    with r:
        outer = patchscope.active()[0]
        with pytest.raises(KeyError):
            with r:
                raise KeyError("boom")
        assert patchscope.active() == (outer,)
    assert patchscope.active() == () and mod.value == "orig"


def _holding(r: patchscope.Redirect) -> Iterator[Activation]:
    """A generator that stays suspended inside ``with r`` and yields its activation."""
    before = _live()
    with r:
        (mine,) = [a for a in patchscope.active() if id(a) not in before]
        yield mine
        yield mine


def _holding_too(r: patchscope.Redirect) -> Iterator[Activation]:
    """The same as _holding, from another code object."""
    yield from _holding(r)


def test_a_generator_resumed_in_another_thread_ends_its_own_activation() -> None:
    """A with-block suspended in a generator exits from its frame, wherever it is resumed."""
    mod = _module()
    r = redirect_attr(mod, "value", "new")
    gen = _holding(r)
    held = next(gen)
    with r:
        (mine,) = [a for a in patchscope.active() if a is not held]
        assert in_other_thread(lambda: list(gen)) == [held]
        assert not held.open and mine.open
        assert patchscope.active() == (mine,) and mod.value == "new"
    assert patchscope.active() == () and mod.value == "orig"


@pytest.mark.parametrize("dotted", [False, True], ids=["object", "dotted-path"])
@pytest.mark.parametrize("first", [0, 1])
def test_generators_ending_out_of_order_each_end_their_own(first: int, dotted: bool) -> None:
    """Interleaved generators inside one redirect end in any order, each its own activation.

    A dotted path is a redirect that activates itself: its exit pairs by frame too.
    """
    mod = _module()
    mod.__name__ = "ps_pairing_dotted"
    sys.modules[mod.__name__] = mod
    try:
        if dotted:
            r = redirect_attr("ps_pairing_dotted.value", "new")
        else:
            r = redirect_attr(mod, "value", "new")
        gens = [_holding(r), _holding_too(r)]
        held = [next(g) for g in gens]
        assert held[0] is not held[1] and len(patchscope.active()) == 2
        list(gens[first])
        assert not held[first].open and held[1 - first].open
        assert patchscope.active() == (held[1 - first],)
        list(gens[1 - first])
        assert patchscope.active() == () and mod.value == "orig"
    finally:
        del sys.modules[mod.__name__]


def test_tasks_exiting_out_of_order_each_end_their_own() -> None:
    """Two asyncio tasks inside one redirect across awaits: the first to exit ends its own."""
    mod = _module()
    r = redirect_attr(mod, "value", "new", scope="context")
    seen: dict[str, object] = {}

    async def main() -> None:
        a_in, b_in, a_out = asyncio.Event(), asyncio.Event(), asyncio.Event()

        async def first() -> None:
            before = _live()
            with r:
                (seen["a"],) = [x for x in patchscope.active() if id(x) not in before]
                a_in.set()
                await b_in.wait()
            a_out.set()

        async def second() -> None:
            await a_in.wait()
            before = _live()
            with r:
                (seen["b"],) = [x for x in patchscope.active() if id(x) not in before]
                b_in.set()
                await a_out.wait()
                seen["after a"] = patchscope.active()
                seen["value"] = mod.value

        await asyncio.wait_for(asyncio.gather(first(), second()), JOIN)

    asyncio.run(main())
    assert seen["after a"] == (seen["b"],) and seen["value"] == "new"
    assert patchscope.active() == () and mod.value == "orig"


def test_threads_in_one_redirect_exit_in_any_order() -> None:
    """Blocks of one redirect in several threads end their own activations, in any order."""
    mod = _module()
    r = redirect_attr(mod, "value", "new")
    entered = threading.Barrier(3, timeout=JOIN)
    release = [threading.Event(), threading.Event()]
    mine: list[Activation | None] = [None, None]
    left: list[tuple[Activation, ...]] = [(), ()]

    def block(i: int) -> None:
        with r:
            me = threading.get_ident()
            (mine[i],) = [a for a in patchscope.active() if a.thread_id == me]
            entered.wait()  # both threads are inside and know their activation
            assert release[i].wait(JOIN)
        left[i] = patchscope.active()

    workers = [threading.Thread(target=block, args=(i,)) for i in (0, 1)]
    for w in workers:
        w.start()
    try:
        entered.wait()
        release[1].set()  # the second thread leaves first
        workers[1].join(JOIN)
        assert not workers[1].is_alive()
        assert mine[0] is not None and left[1] == (mine[0],)
    finally:
        release[0].set()
        release[1].set()
        for w in workers:
            w.join(JOIN)
    assert not any(w.is_alive() for w in workers)
    assert left[0] == () and mod.value == "orig"


def test_an_exitstack_and_a_with_block_in_one_frame_each_end_their_own() -> None:
    """A with-block inside an ExitStack's scope pairs by frame; the stack ends the other one."""
    mod = _module()
    r = redirect_attr(mod, "value", "new")
    with contextlib.ExitStack() as stack:
        by_stack = _entered(lambda: stack.enter_context(r))
        with r:
            assert len(patchscope.active()) == 2
        assert patchscope.active() == (by_stack,)
    assert patchscope.active() == () and mod.value == "orig"


def test_a_combined_redirect_nests_and_recurses_like_a_single_one() -> None:
    """Group handles pair with their with-blocks as single ones do."""
    mod = _module()
    mod.other = 0
    c = combine(redirect_attr(mod, "value", "new"), redirect_attr(mod, "other", 1))

    def recurse(n: int) -> int:
        with c as values:
            assert values == ("new", 1) and len(patchscope.active()) == 2 * (n + 1)
            return n if n == 5 else recurse(n + 1)

    assert recurse(0) == 5
    assert patchscope.active() == () and (mod.value, mod.other) == ("orig", 0)


def test_an_exit_matching_no_enter_raises_and_changes_nothing() -> None:
    """An exit from a thread that entered nothing, while others' blocks run, raises."""
    mod = _module()
    r = redirect_attr(mod, "value", "new")
    entered = threading.Barrier(3, timeout=JOIN)
    release = threading.Event()

    def block() -> None:
        with r:
            entered.wait()
            assert release.wait(JOIN)

    workers = [threading.Thread(target=block) for _ in range(2)]
    for w in workers:
        w.start()
    try:
        entered.wait()
        live = patchscope.active()
        with pytest.raises(RuntimeError, match=UNPAIRED):
            r.__exit__(None, None, None)
        assert patchscope.active() == live and all(a.open for a in live) and mod.value == "new"
    finally:
        release.set()
        for w in workers:
            w.join(JOIN)
    assert not any(w.is_alive() for w in workers)
    assert patchscope.active() == () and mod.value == "orig"


def test_a_second_exit_after_the_last_block_raises() -> None:
    """Once every entry has exited, one more ``__exit__`` raises instead of passing silently."""
    r = redirect_attr(_module(), "value", "new")
    with r:
        pass
    with pytest.raises(RuntimeError, match="without a matching"):
        r.__exit__(None, None, None)
    assert patchscope.active() == ()


@pytest.mark.parametrize("kind", KINDS)
def test_an_exitstack_entry_reports_the_caller_even_when_nested(kind: str) -> None:
    """Entries through enter_context report the line that called it, each at its own line."""
    r = _redirect(kind, _module())
    with contextlib.ExitStack() as stack:
        first = _entered(lambda: stack.enter_context(r))
        line = sys._getframe().f_lineno - 1
        second = _entered(lambda: stack.enter_context(r))
        assert first.site == f"{__file__}:{line}" and second.site == f"{__file__}:{line + 2}"
    assert patchscope.active() == ()


class _Handle:
    """What pairing reads and writes on a handle."""

    def __init__(self, thread_id: int | None = None) -> None:
        self.thread_id = threading.get_ident() if thread_id is None else thread_id
        self._frame: Any = None
        self._pushed = False


class _Site:
    def __enter__(self) -> _Site:
        self.site = site_of(sys._getframe(1))
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def test_site_of_a_with_statement_is_its_frame() -> None:
    """An entry from a with statement is reported at the frame of the statement."""
    with _Site() as probe:
        assert probe.site is sys._getframe()


def test_site_of_enter_context_is_its_caller() -> None:
    """An entry through ExitStack.enter_context is reported at enter_context's caller."""
    with contextlib.ExitStack() as stack:
        probe = stack.enter_context(_Site())
        assert probe.site is sys._getframe()


def test_pair_enter_pushes_a_second_handle_of_the_same_thread() -> None:
    """A handle entered while its thread has a live one is marked for the with-stack."""
    first, second = _Handle(), _Handle()
    handles: list[Any] = []
    frame = sys._getframe()
    pair_enter(handles, first, frame)
    pair_enter(handles, second, frame)
    assert (first._pushed, second._pushed) == (False, True)
    assert handles == [first, second]
    assert second._frame is frame


def test_pair_enter_does_not_push_beside_another_threads_handle() -> None:
    """A live handle of another thread does not make a new handle pushed."""
    other, mine = _Handle(thread_id=threading.get_ident() + 1), _Handle()
    handles: list[Any] = [other]
    pair_enter(handles, mine, sys._getframe())
    assert mine._pushed is False


def test_push_puts_the_handle_on_this_contexts_with_stack() -> None:
    """push links the handle on top of the context's with-stack, and only there."""
    handles: list[Any] = []
    first, second = _Handle(), _Handle()

    def run() -> object:
        push(handles, first)
        push(handles, second)
        return with_stack.get()

    before = with_stack.get()
    stack = contextvars.Context().run(run)
    assert stack == (handles, second, (handles, first, None))
    assert with_stack.get() is before


def _returned_frame() -> Any:
    return sys._getframe()


def _suspended_generator() -> Any:
    def gen() -> Any:
        yield sys._getframe()

    g = gen()
    return g, next(g)


def _with_frames(*handles: _Handle) -> list[Any]:
    """The handles as a live list, each entered from the calling test's frame."""
    frame = sys._getframe(1)
    for h in handles:
        if h._frame is None:
            h._frame = frame
    return list(handles)


def _in_fresh_context(fn: Any) -> Any:
    return contextvars.Context().run(fn)


def test_pair_exit_takes_the_newest_handle_of_the_exiting_frame() -> None:
    """An exit pairs with the newest handle entered from the same frame, and forgets it."""
    first, second, elsewhere = _Handle(), _Handle(), _Handle()
    elsewhere._frame = _returned_frame()
    handles = _with_frames(first, second, elsewhere)
    assert pair_exit(handles, sys._getframe()) is second
    assert handles == [first, elsewhere]
    assert second._frame is None
    assert pair_exit(handles, sys._getframe()) is first
    assert handles == [elsewhere]


def test_pair_exit_by_frame_drops_the_handles_with_stack_node() -> None:
    """A pushed handle paired by its frame leaves the context's with-stack."""
    handles = _with_frames(_Handle(), _Handle())
    handles[1]._pushed = True
    frame, pushed = sys._getframe(), handles[1]

    def run() -> object:
        push(handles, pushed)
        return pair_exit(handles, frame), with_stack.get()

    assert _in_fresh_context(run) == (pushed, None)


def test_pair_exit_from_a_foreign_frame_uses_the_with_stack() -> None:
    """An exit from another frame pairs with this thread's newest pushed handle."""
    other_handles = _with_frames(_Handle())
    first, pushed = _Handle(), _Handle()
    handles = _with_frames(first, pushed)
    pushed._pushed = True

    def run() -> object:
        push(handles, pushed)
        push(other_handles, other_handles[0])
        found = pair_exit(handles, _returned_frame())
        return found, with_stack.get()

    found, stack = _in_fresh_context(run)
    assert found is pushed
    assert handles == [first]
    assert stack == (other_handles, other_handles[0], None)


def test_pair_exit_skips_stack_nodes_of_other_threads_and_ended_handles() -> None:
    """With-stack nodes of another thread's handle, or of an ended one, are not taken."""
    theirs = _Handle(thread_id=threading.get_ident() + 1)
    ended, mine = _Handle(), _Handle()
    handles = _with_frames(theirs, mine)

    def run() -> object:
        push(handles, theirs)
        push(handles, ended)
        return pair_exit(handles, _returned_frame())

    assert _in_fresh_context(run) is mine
    assert handles == [theirs]


def test_pair_exit_takes_the_only_handle() -> None:
    """With one live handle, an exit from any frame pairs with it."""
    only = _Handle(thread_id=threading.get_ident() + 1)
    handles = _with_frames(only)
    assert _in_fresh_context(lambda: pair_exit(handles, _returned_frame())) is only
    assert handles == []
    assert only._frame is None  # the handle no longer keeps its entering frame alive


def test_pair_exit_prefers_a_handle_whose_entering_frame_returned() -> None:
    """An exit from a foreign frame pairs with a handle entered by a helper that returned."""
    helper, running = _Handle(), _Handle()
    helper._frame = _returned_frame()
    gen, suspended_frame = _suspended_generator()
    suspended = _Handle()
    suspended._frame = suspended_frame
    handles = _with_frames(helper, running, suspended)
    assert _in_fresh_context(lambda: pair_exit(handles, _returned_frame())) is helper
    assert handles == [running, suspended]
    gen.close()


def test_pair_exit_prefers_this_threads_helper_entered_handle() -> None:
    """Among handles entered by returned helpers, this thread's newest comes first."""
    mine, theirs = _Handle(), _Handle(thread_id=threading.get_ident() + 1)
    mine._frame, theirs._frame = _returned_frame(), _returned_frame()
    handles = [mine, theirs]
    assert _in_fresh_context(lambda: pair_exit(handles, _returned_frame())) is mine
    assert handles == [theirs]


def test_pair_exit_takes_another_threads_newest_helper_entered_handle() -> None:
    """Without one of this thread, the newest helper-entered handle of another thread pairs."""
    other = threading.get_ident() + 1
    older, newer = _Handle(thread_id=other), _Handle(thread_id=other)
    older._frame, newer._frame = _returned_frame(), _returned_frame()
    handles = [older, newer]
    assert _in_fresh_context(lambda: pair_exit(handles, _returned_frame())) is newer
    assert handles == [older]


def test_pair_exit_falls_back_to_this_threads_newest_unpushed_handle() -> None:
    """With every handle still running, the newest unpushed one of this thread pairs."""
    older, newer, pushed = _Handle(), _Handle(), _Handle()
    pushed._pushed = True
    theirs = _Handle(thread_id=threading.get_ident() + 1)
    handles = _with_frames(older, newer, pushed, theirs)
    assert _in_fresh_context(lambda: pair_exit(handles, _returned_frame())) is newer
    assert handles == [older, pushed, theirs]


def test_pair_exit_without_a_match_raises() -> None:
    """An exit with no handle of this thread to pair with raises RuntimeError."""
    other = threading.get_ident() + 1
    handles = _with_frames(_Handle(thread_id=other), _Handle(thread_id=other))
    with pytest.raises(RuntimeError, match="__exit__ without a matching __enter__"):
        _in_fresh_context(lambda: pair_exit(handles, _returned_frame()))
    assert len(handles) == 2


def test_pair_exit_forgets_only_the_paired_handles_node() -> None:
    """Pairing a pushed handle removes its own with-stack node and keeps the newer ones."""
    first, second = _Handle(), _Handle()
    first._pushed = second._pushed = True
    handles = _with_frames(first)
    first._frame = frame = _returned_frame()
    handles += _with_frames(second)

    def run() -> object:
        push(handles, first)
        push(handles, second)
        return pair_exit(handles, frame), with_stack.get()

    assert _in_fresh_context(run) == (first, (handles, second, None))


def test_pair_exit_of_a_pushed_handle_whose_node_is_elsewhere() -> None:
    """A pushed handle paired by frame in a context without its node leaves that stack alone."""
    pushed = _Handle()
    pushed._pushed = True
    handles = _with_frames(pushed)
    frame = sys._getframe()
    assert _in_fresh_context(lambda: (pair_exit(handles, frame), with_stack.get())) == (
        pushed,
        None,
    )
    assert handles == []


def test_a_with_entry_a_warning_undid_leaves_nothing_to_pair_with() -> None:
    """A with-entry undone because its conflict warning raised keeps no handle on its redirect."""
    mod = _module()
    outer = redirect_attr(mod, "value", "outer").start()
    mod.value = "rebound"
    inner = redirect_attr(mod, "value", "inner")
    with warnings.catch_warnings():
        warnings.simplefilter("error", patchscope.RedirectConflictWarning)
        with pytest.raises(patchscope.RedirectConflictWarning):
            with inner:
                pass
    assert mod.value == "outer" and patchscope.active() == (outer,)
    with inner:
        # The one live with-handle of *inner* pairs by frame: nothing pushed.
        assert with_stack.get() is None and mod.value == "inner"
    assert mod.value == "outer"
    outer.stop()
    assert patchscope.active() == () and mod.value == "orig"
