"""patchscope._pairing: which handle a ``with`` block's ``__exit__`` belongs to."""

from __future__ import annotations

import contextlib
import contextvars
import sys
import threading
from typing import Any

import pytest

from patchscope._pairing import pair_enter, pair_exit, push, site_of, with_stack


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


def _entered(*handles: _Handle) -> list[Any]:
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
    handles = _entered(first, second, elsewhere)
    assert pair_exit(handles, sys._getframe()) is second
    assert handles == [first, elsewhere]
    assert second._frame is None
    assert pair_exit(handles, sys._getframe()) is first
    assert handles == [elsewhere]


def test_pair_exit_by_frame_drops_the_handles_with_stack_node() -> None:
    """A pushed handle paired by its frame leaves the context's with-stack."""
    handles = _entered(_Handle(), _Handle())
    handles[1]._pushed = True
    frame, pushed = sys._getframe(), handles[1]

    def run() -> object:
        push(handles, pushed)
        return pair_exit(handles, frame), with_stack.get()

    assert _in_fresh_context(run) == (pushed, None)


def test_pair_exit_from_a_foreign_frame_uses_the_with_stack() -> None:
    """An exit from another frame pairs with this thread's newest pushed handle."""
    other_handles = _entered(_Handle())
    first, pushed = _Handle(), _Handle()
    handles = _entered(first, pushed)
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
    handles = _entered(theirs, mine)

    def run() -> object:
        push(handles, theirs)
        push(handles, ended)
        return pair_exit(handles, _returned_frame())

    assert _in_fresh_context(run) is mine
    assert handles == [theirs]


def test_pair_exit_takes_the_only_handle() -> None:
    """With one live handle, an exit from any frame pairs with it."""
    only = _Handle(thread_id=threading.get_ident() + 1)
    handles = _entered(only)
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
    handles = _entered(helper, running, suspended)
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
    handles = _entered(older, newer, pushed, theirs)
    assert _in_fresh_context(lambda: pair_exit(handles, _returned_frame())) is newer
    assert handles == [older, pushed, theirs]


def test_pair_exit_without_a_match_raises() -> None:
    """An exit with no handle of this thread to pair with raises RuntimeError."""
    other = threading.get_ident() + 1
    handles = _entered(_Handle(thread_id=other), _Handle(thread_id=other))
    with pytest.raises(RuntimeError, match="__exit__ without a matching __enter__"):
        _in_fresh_context(lambda: pair_exit(handles, _returned_frame()))
    assert len(handles) == 2


def test_pair_exit_forgets_only_the_paired_handles_node() -> None:
    """Pairing a pushed handle removes its own with-stack node and keeps the newer ones."""
    first, second = _Handle(), _Handle()
    first._pushed = second._pushed = True
    handles = _entered(first)
    first._frame = frame = _returned_frame()
    handles += _entered(second)

    def run() -> object:
        push(handles, first)
        push(handles, second)
        return pair_exit(handles, frame), with_stack.get()

    assert _in_fresh_context(run) == (first, (handles, second, None))


def test_pair_exit_of_a_pushed_handle_whose_node_is_elsewhere() -> None:
    """A pushed handle paired by frame in a context without its node leaves that stack alone."""
    pushed = _Handle()
    pushed._pushed = True
    handles = _entered(pushed)
    frame = sys._getframe()
    assert _in_fresh_context(lambda: (pair_exit(handles, frame), with_stack.get())) == (
        pushed,
        None,
    )
    assert handles == []
