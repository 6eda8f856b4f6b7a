"""``check_restores``: property-based testing of restore guarantees."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ._snapshot import Snapshot


def check_restores(
    make_activations: Callable[[], Sequence[Any]],
    *,
    watch: Iterable[object],
    threads: int = 2,
    max_examples: int = 100,
) -> None:
    """Run generated schedules of activations and check that each one restores.

    *make_activations* is called once per generated schedule and returns the
    things to activate: redirects (anything with ``start()``, e.g.
    ``patchscope.redirect_attr(...)`` or ``device_events()``), used with
    ``start()``/``stop()``, ``with`` and as decorators, and zero-argument
    callables such as a decorated class, which are called. Schedules nest them,
    exit them out of order, spread them over up to *threads* threads and raise
    exceptions inside them (see :mod:`patchscope.testing.strategies`).

    After each schedule, the objects in *watch* (modules, classes, instances)
    must be back, by identity, to their snapshot taken before it, and no
    activation the schedule started may still be live. On failure, the
    watched objects are put back and an :class:`AssertionError` reports the
    shrunk schedule, the steps as they ran and the differences.

    An exception from one of your callables fails the check; catch expected
    ones inside the callable. Thread safety: runs its own threads; do not
    patch the watched objects from other threads meanwhile.
    """
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from ._schedule import _report, _Run
    from .strategies import schedules

    watched = tuple(watch)
    if not watched:
        raise ValueError("watch= needs at least one module, class or instance to compare")

    # database=None: every check_restores call shares this inner function, so
    # a saved example from one call would be replayed against another's
    # activations. deadline=None: schedules start threads.
    @settings(max_examples=max_examples, deadline=None, database=None)
    @given(st.data())
    def check(data: st.DataObject) -> None:
        items = list(make_activations())
        redirects = [item for item in items if callable(getattr(item, "start", None))]
        callables = [item for item in items if not callable(getattr(item, "start", None))]
        for item in callables:
            if not callable(item):
                raise TypeError(
                    f"make_activations() returned {item!r}, which is neither a redirect "
                    "(with start()) nor a callable"
                )
        schedule = data.draw(schedules(len(redirects), len(callables), threads=threads))
        run = _Run(schedule, redirects, callables, timeout=10.0)
        error, problems = run.checked(Snapshot(watched))
        if error is None and not problems:
            return
        if error is not None:
            problems.insert(0, f"a step raised {error!r}")
        report = _report(schedule, redirects, callables, run.trace, problems, regression=True)
        raise AssertionError(report) from error

    check()

