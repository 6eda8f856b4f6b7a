"""The schedule model: what the hypothesis strategies generate and how it runs.

A :class:`Schedule` is one program of operations per thread plus the global
order in which their steps run; schedules and operations are immutable
values, safe to share between threads. Every step waits for its turn at a turnstile,
so a schedule is a deterministic interleaving, not a race: it replays the same
way every time, which is what lets hypothesis shrink a failure.

The executor needs nothing from patchscope's core: a "redirect" is anything
with ``start()`` (returning a handle with ``stop()``), the context-manager
protocol and decorator use; a "callable" is called with no arguments.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol, TypeAlias

from ._snapshot import Snapshot


class ScheduledError(Exception):
    """The exception a schedule raises inside a ``with`` block or a decorated call.

    The executor catches exactly this type; any other exception from a step is
    a failure of the schedule.
    """


class _Handle(Protocol):
    def stop(self) -> object: ...


@dataclasses.dataclass(frozen=True)
class Start:
    """``redirects[redirect].start()``; the handle joins the pool of live handles."""

    redirect: int


@dataclasses.dataclass(frozen=True)
class Stop:
    """Stop live handle number ``handle % len(pool)`` (0 is the oldest), whichever
    thread started it; nothing when the pool is empty."""

    handle: int


@dataclasses.dataclass(frozen=True)
class With:
    """``with redirects[redirect]:`` around ``body``, then raise
    :class:`ScheduledError` inside the block if ``raises``."""

    redirect: int
    body: tuple[Op, ...] = ()
    raises: bool = False


@dataclasses.dataclass(frozen=True)
class Decorated:
    """Call a function decorated with ``redirects[redirect]`` whose code runs
    ``body``, then raises :class:`ScheduledError` if ``raises``."""

    redirect: int
    body: tuple[Op, ...] = ()
    raises: bool = False


@dataclasses.dataclass(frozen=True)
class Call:
    """``callables[callable]()``: e.g. construct a decorated class."""

    callable: int


Op: TypeAlias = Start | Stop | With | Decorated | Call


def _steps(ops: Sequence[Op]) -> int:
    """Scheduling points in *ops*: one per atomic op, enter and exit per block."""
    return sum(2 + _steps(op.body) if isinstance(op, (With, Decorated)) else 1 for op in ops)


@dataclasses.dataclass(frozen=True)
class Schedule:
    """Programs for one or more threads and the order their steps run in.

    ``order`` lists, for each global step, the index of the thread that takes
    it; thread ``t`` must appear exactly as many times as its program has
    steps (one per :class:`Start`, :class:`Stop`, :class:`Call`; two, enter and
    exit, per :class:`With` and :class:`Decorated`, plus their bodies). The
    ``repr`` is valid Python, so a shrunk schedule can be pasted into a
    regression test.

    Immutable; :meth:`run` may be called from any thread, and concurrently on
    different redirects.
    """

    threads: tuple[tuple[Op, ...], ...]
    order: tuple[int, ...]

    def __post_init__(self) -> None:
        expected = [_steps(program) for program in self.threads]
        actual = [self.order.count(t) for t in range(len(self.threads))]
        if not self.threads or expected != actual or len(self.order) != sum(expected):
            raise ValueError(
                f"order {self.order!r} does not match the programs: thread t must appear "
                f"once per step of its program, i.e. {expected!r} times"
            )

    def __str__(self) -> str:
        steps = iter(self._numbered())
        lines = []
        for t, program in enumerate(self.threads):
            lines.append(f"thread {t}:")
            lines.extend(_render(program, steps, depth=1))
        return "\n".join(lines)

    def _numbered(self) -> Iterator[int]:
        """Global step numbers, thread by thread in program order."""
        for t in range(len(self.threads)):
            yield from (step for step, owner in enumerate(self.order) if owner == t)

    def run(
        self,
        redirects: Sequence[Any],
        callables: Sequence[Callable[[], object]] = (),
        *,
        watch: Iterable[object] = (),
        timeout: float = 10.0,
    ) -> list[str]:
        """Run the schedule, check that it restored; return the steps as they ran.

        Each thread's program runs in a new thread; handles still live at the
        end are stopped by the calling thread, oldest first. Then the objects
        in *watch* (modules, classes, instances) must be back to their
        snapshot taken before the run, and no patchscope activation the run
        started may still be live: otherwise they are put back and an
        :class:`AssertionError` lists what was not restored and the steps as
        they ran. That makes ``schedule.run(redirects, callables, watch=...)``,
        pasted from a :func:`~patchscope.testing.check_restores` failure, a
        complete regression test.

        An exception from a step (other than the :class:`ScheduledError` the
        schedule raises itself) aborts the other threads at their next step
        and is re-raised here after the cleanup (chained from the
        :class:`AssertionError` if something was also not restored); a step
        that does not finish within *timeout* seconds raises
        :class:`TimeoutError` (its thread is left behind).
        """
        run = _Run(self, redirects, callables, timeout)
        error, problems = run.checked(Snapshot(watch))
        if problems:
            report = _report(self, redirects, callables, run.trace, problems)
            raise AssertionError(report) from error
        if error is not None:
            raise error
        return run.trace


def _render(ops: Sequence[Op], steps: Iterator[int], depth: int) -> Iterator[str]:
    pad = "  " * depth
    for op in ops:
        if isinstance(op, (With, Decorated)):
            how = "with" if isinstance(op, With) else "call decorated by"
            yield f"{next(steps):>3}{pad}{how} r{op.redirect}:"
            yield from _render(op.body, steps, depth + 1)
            yield f"{next(steps):>3}{pad}exit r{op.redirect}" + (
                " raising ScheduledError" if op.raises else ""
            )
        elif isinstance(op, Start):
            yield f"{next(steps):>3}{pad}start r{op.redirect}"
        elif isinstance(op, Stop):
            yield f"{next(steps):>3}{pad}stop live handle #{op.handle}"
        else:
            yield f"{next(steps):>3}{pad}call c{op.callable}"


def _report(
    schedule: Schedule,
    redirects: Sequence[object],
    callables: Sequence[object],
    trace: Sequence[str],
    problems: Sequence[str],
    *,
    regression: bool = False,
) -> str:
    lines = ["restore check failed:"]
    lines += [f"  {problem}" for problem in problems]
    lines.append("schedule:")
    lines += [f"  {line}" for line in str(schedule).splitlines()]
    lines += [f"  r{i} = {r!r}" for i, r in enumerate(redirects)]
    lines += [f"  c{i} = {c!r}" for i, c in enumerate(callables)]
    if trace:
        lines.append("steps as they ran:")
        lines += [f"  {line}" for line in trace]
    if regression:
        lines.append(f"regression test: {schedule!r}.run(redirects, callables, watch=watch)")
    return "\n".join(lines)


class _Aborted(BaseException):
    """Unwinds a thread's program after another thread's step failed.

    A BaseException so that user code catching ``Exception`` does not stop it.
    """


class _Run:
    """One execution of a schedule: the turnstile, the handle pool, the trace."""

    def __init__(
        self,
        schedule: Schedule,
        redirects: Sequence[Any],
        callables: Sequence[Callable[[], object]],
        timeout: float,
    ) -> None:
        self._schedule = schedule
        self._redirects = redirects
        self._callables = callables
        self._timeout = timeout
        self._cond = threading.Condition()
        self._position = 0
        self._failure: BaseException | None = None
        # Only the thread whose turn it is touches these, and the turnstile's
        # condition orders those touches, so they need no lock of their own.
        self._pool: list[tuple[int, _Handle]] = []
        #: the steps as they ran, one line each
        self.trace: list[str] = []

    def checked(self, before: Snapshot) -> tuple[Exception | None, list[str]]:
        """Execute, then check the restore guarantees against *before*.

        Returns the step's exception (if one failed) and the problems found;
        activations left live are stopped and *before* is restored.
        """
        import patchscope

        # Held, not just their ids: an id is only unique while its object lives.
        live = {id(activation): activation for activation in patchscope.active()}
        error: Exception | None = None
        try:
            self.execute()
        except Exception as raised:
            error = raised
        leftover = [a for a in patchscope.active() if id(a) not in live]
        differences = before.diff()
        problems = [f"still live: {a!r}" for a in leftover]
        problems += [f"not restored: {difference}" for difference in differences]
        for activation in leftover:
            activation.stop()
        before.restore()
        return error, problems

    def execute(self) -> list[str]:
        # Every program runs in a thread of its own, so that the calling
        # thread can give up on a stuck step instead of hanging with it.
        workers = [
            threading.Thread(
                target=self._program, args=(t,), name=f"patchscope-schedule-{t}", daemon=True
            )
            for t in range(len(self._schedule.threads))
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(self._timeout)
            if worker.is_alive():
                self._fail(TimeoutError(f"{worker.name} did not finish within {self._timeout} s"))
        for started, handle in self._pool:
            self.trace.append(f"end: stop handle h{started}")
            try:
                handle.stop()
            except Exception as error:
                self._fail(error)
        self._pool.clear()
        if self._failure is not None:
            raise self._failure
        return self.trace

    # -- the turnstile -------------------------------------------------------

    def _wait(self, thread: int) -> int:
        """Block until the next step is *thread*'s; return the step number."""
        order = self._schedule.order
        with self._cond:
            ready = self._cond.wait_for(
                lambda: (
                    self._failure is not None
                    or (self._position < len(order) and order[self._position] == thread)
                ),
                timeout=self._timeout,
            )
            if not ready:
                self._failure = TimeoutError(
                    f"step {self._position} did not finish within {self._timeout} s"
                )
                self._cond.notify_all()
            if self._failure is not None:
                raise _Aborted
            return self._position

    def _advance(self) -> None:
        with self._cond:
            self._position += 1
            self._cond.notify_all()

    def _fail(self, error: BaseException) -> None:
        with self._cond:
            if self._failure is None:
                self._failure = error
            self._cond.notify_all()

    # -- the programs --------------------------------------------------------

    def _program(self, thread: int) -> None:
        try:
            self._ops(thread, self._schedule.threads[thread])
        except _Aborted:
            pass
        except BaseException as error:  # re-raised by execute()
            self._fail(error)

    def _log(self, step: int, thread: int, text: str) -> None:
        self.trace.append(f"{step:>3} thread {thread}: {text}")

    def _ops(self, thread: int, ops: Sequence[Op]) -> None:
        for op in ops:
            if isinstance(op, With):
                self._with(thread, op)
            elif isinstance(op, Decorated):
                self._decorated(thread, op)
            else:
                step = self._wait(thread)
                if isinstance(op, Start):
                    self._log(step, thread, f"start r{op.redirect} -> handle h{step}")
                    self._pool.append((step, self._redirects[op.redirect].start()))
                elif isinstance(op, Stop):
                    if self._pool:
                        started, handle = self._pool.pop(op.handle % len(self._pool))
                        self._log(step, thread, f"stop handle h{started}")
                        handle.stop()
                    else:
                        self._log(step, thread, "stop: no live handle")
                else:
                    self._log(step, thread, f"call c{op.callable}")
                    self._callables[op.callable]()
                self._advance()

    def _with(self, thread: int, op: With) -> None:
        redirect = self._redirects[op.redirect]
        step = self._wait(thread)
        self._log(step, thread, f"enter r{op.redirect}")
        try:
            with redirect:
                self._advance()
                self._ops(thread, op.body)
                self._exit(thread, op)
        except ScheduledError:
            pass
        else:
            if op.raises:
                raise AssertionError(f"r{op.redirect}.__exit__ swallowed the exception")
        self._advance()

    def _decorated(self, thread: int, op: Decorated) -> None:
        result = object()
        ran = False

        def body() -> object:
            nonlocal ran
            ran = True
            self._advance()  # the enter step is done once the function runs
            self._ops(thread, op.body)
            self._exit(thread, op)
            return result

        step = self._wait(thread)
        self._log(step, thread, f"call a function decorated by r{op.redirect}")
        try:
            returned = self._redirects[op.redirect](body)()
        except ScheduledError:
            pass
        else:
            if not ran:
                raise AssertionError(f"r{op.redirect}'s wrapper did not call the function")
            if op.raises:
                raise AssertionError(f"r{op.redirect}'s wrapper swallowed the exception")
            if returned is not result:
                raise AssertionError(
                    f"r{op.redirect}'s wrapper returned {returned!r}, not the function's result"
                )
        self._advance()

    def _exit(self, thread: int, op: With | Decorated) -> None:
        step = self._wait(thread)
        if op.raises:
            self._log(step, thread, f"exit r{op.redirect} raising ScheduledError")
            raise ScheduledError(f"raised inside r{op.redirect} by the schedule")
        self._log(step, thread, f"exit r{op.redirect}")
