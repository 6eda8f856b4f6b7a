"""patchscope._pairing: which handle a ``with`` block's ``__exit__`` belongs to."""

from __future__ import annotations

import contextlib
import contextvars
import sys
import threading
from typing import Any

from patchscope._pairing import pair_enter, push, site_of, with_stack


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
