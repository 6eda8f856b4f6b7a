"""Hypothesis strategies for schedules of activations.

``schedules(redirects=2, callables=1, threads=2)`` generates a
:class:`Schedule`: per thread, a program of starts, stops (of any thread's
handles, in any order), nested ``with`` blocks and decorated calls that may
raise inside, and calls of your callables; plus an interleaving of all their
steps across threads. Failures shrink towards fewer threads, fewer and
shallower operations, no exceptions, and running thread by thread.

Importing this module imports hypothesis; ``import patchscope.testing`` does
not. Thread safety: the strategies hold no state (draw from them as
hypothesis allows); schedules and their operations are immutable.
"""

from __future__ import annotations

from hypothesis import strategies as st

from ._schedule import Call, Decorated, Op, Schedule, ScheduledError, Start, Stop, With, _steps

__all__ = [
    "Call",
    "Decorated",
    "Op",
    "Schedule",
    "ScheduledError",
    "Start",
    "Stop",
    "With",
    "schedules",
]

#: Operations per block and nesting depth: enough for out-of-order exits of
#: overlapping activations in two threads, small enough to shrink quickly.
_MAX_OPS = 4
_MAX_DEPTH = 2


def _programs(redirects: int, callables: int, depth: int) -> st.SearchStrategy[tuple[Op, ...]]:
    atoms: list[st.SearchStrategy[Op]] = []
    if redirects:
        redirect = st.integers(0, redirects - 1)
        atoms.append(st.builds(Start, redirect))
        atoms.append(st.builds(Stop, st.integers(0, _MAX_OPS - 1)))
    if callables:
        atoms.append(st.builds(Call, st.integers(0, callables - 1)))
    op = st.one_of(atoms)
    if redirects and depth > 0:
        body = _programs(redirects, callables, depth - 1)
        op = st.one_of(
            op,
            st.builds(With, redirect, body, st.booleans()),
            st.builds(Decorated, redirect, body, st.booleans()),
        )
    return st.lists(op, max_size=_MAX_OPS).map(tuple)


def schedules(
    redirects: int, callables: int = 0, *, threads: int = 2
) -> st.SearchStrategy[Schedule]:
    """Schedules of ``redirects`` redirects and ``callables`` callables in 1 to ``threads`` threads.

    Operations refer to redirects and callables by index; pass the same
    sequences to :meth:`Schedule.run`.
    """
    if redirects < 0 or callables < 0 or redirects + callables == 0:
        raise ValueError(
            f"need at least one redirect or callable, got redirects={redirects!r}, "
            f"callables={callables!r}"
        )
    if threads < 1:
        raise ValueError(f"threads must be at least 1, got {threads!r}")
    program = _programs(redirects, callables, _MAX_DEPTH).filter(bool)

    @st.composite
    def build(draw: st.DrawFn) -> Schedule:
        count = draw(st.integers(1, threads))
        programs = tuple(draw(program) for _ in range(count))
        # The unshuffled order runs thread by thread; permutations shrink to it.
        sequential = [t for t, ops in enumerate(programs) for _ in range(_steps(ops))]
        order = draw(st.permutations(sequential))
        return Schedule(programs, tuple(order))

    return build()
