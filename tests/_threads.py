"""Running a callable in a fresh thread, for tests of what other threads see."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

_T = TypeVar("_T")
JOIN = 60.0  # seconds; a join that times out fails the test instead of hanging


def in_other_thread(fn: Callable[[], _T]) -> _T:
    """``fn()`` run in a fresh thread (no activation of its own): its result, or what it raised."""
    results: list[_T] = []
    failures: list[BaseException] = []

    def run() -> None:
        try:
            results.append(fn())
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(JOIN)
    assert not thread.is_alive(), "the thread did not finish"
    if failures:
        raise failures[0]
    return results[0]
