"""Pairing ``with`` blocks with their handles.

A Redirect holds no per-activation state, so ``__exit__`` must find the
handle its ``__enter__`` made. Each Redirect keeps the list of its live
with-handles, each remembering the frame of its with-statement: a with
statement calls ``__enter__`` and ``__exit__`` from the same frame object,
also in a generator that is suspended inside the block and resumed later,
in any thread. Within one frame, blocks nest, so the newest handle of that
frame is the one.

Only callers that enter and exit from different frames
(``contextlib.ExitStack``, fixtures that call ``__enter__`` and ``__exit__``
by hand) need more: a handle is pushed onto the context's with-stack when
its thread already had a live with-handle of the same Redirect, so nested
exits pair exactly; otherwise the newest handle whose entering frame has
returned is the one. Everything here runs under the registry lock.

Twin: ``pairing.c`` of the C accelerator; keep them in sync. This module is
the reference.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import sys
import threading
from typing import Any

# The with-blocks that could not be paired cheaply: a linked list of
# (handles list, handle, next) for this context.
with_stack: contextvars.ContextVar[tuple[Any, ...] | None] = contextvars.ContextVar(
    "patchscope.with_stack", default=None
)
# ExitStack.enter_context calls __enter__ for its caller: report the caller.
ENTER_CONTEXT = contextlib.ExitStack.enter_context.__code__
_SUSPENDABLE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
_get_ident = threading.get_ident


def site_of(frame: Any) -> Any:
    """The frame an entry is reported at: the caller's, through ``ExitStack.enter_context``."""
    return frame.f_back if frame.f_code is ENTER_CONTEXT else frame


def pair_enter(handles: list[Any], handle: Any, frame: Any) -> None:
    """Record *handle* as a live with-handle entered from *frame*."""
    handle._frame = frame
    if handles:
        me = handle.thread_id
        for other in handles:
            if other.thread_id == me:
                handle._pushed = True
                break
    handles.append(handle)


def push(handles: list[Any], handle: Any) -> None:
    """After the lock: put a pushed handle on this context's with-stack."""
    with_stack.set((handles, handle, with_stack.get()))


def pair_exit(handles: list[Any], frame: Any) -> Any:
    """Find and forget the handle the ``__exit__`` called from *frame* belongs to."""
    for i in range(len(handles) - 1, -1, -1):
        handle = handles[i]
        if handle._frame is frame:
            del handles[i]
            handle._frame = None
            if handle._pushed:
                _forget_node(handles, handle)
            return handle
    handle = None
    me = _get_ident()
    node = with_stack.get()
    # A node counts if it is this redirect's, live, and this thread's (a
    # context copied into another thread carries the parent's nodes).
    while node is not None and not (
        node[0] is handles and node[1].thread_id == me and node[1] in handles
    ):
        node = node[2]
    if node is not None:
        handle = node[1]
        _forget_node(handles, handle)
    if handle is None and len(handles) == 1:
        handle = handles[0]
    if handle is None:
        handle = _entered_by_helper(handles, me)
    if handle is None:
        for other in reversed(handles):
            if other.thread_id == me and not other._pushed:
                handle = other
                break
    if handle is None:
        raise RuntimeError("__exit__ without a matching __enter__ in this thread")
    handles.remove(handle)
    handle._frame = None
    return handle


def _entered_by_helper(handles: list[Any], me: int) -> Any:
    """The newest handle entered from a frame that has returned (ExitStack and the like).

    A with-block still running, or suspended in a generator, exits from its own
    frame, so it is never the one an exit from a foreign frame belongs to.
    """
    running: set[int] = set()
    for top in sys._current_frames().values():
        frame: Any = top
        while frame is not None:
            running.add(id(frame))
            frame = frame.f_back
    candidates = [
        h
        for h in handles
        if h._frame is not None
        and id(h._frame) not in running
        and not h._frame.f_code.co_flags & _SUSPENDABLE
    ]
    for handle in reversed(candidates):
        if handle.thread_id == me:
            return handle
    return candidates[-1] if candidates else None


def _forget_node(handles: list[Any], handle: Any) -> None:
    """Drop *handle*'s node from this context's with-stack, if it is there."""
    node = with_stack.get()
    skipped = []
    while node is not None and not (node[0] is handles and node[1] is handle):
        skipped.append(node)
        node = node[2]
    if node is None:
        return
    rest = node[2]
    for other in reversed(skipped):
        rest = (other[0], other[1], rest)
    with_stack.set(rest)
