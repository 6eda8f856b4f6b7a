"""Fork: a child forked while other threads use patchscope can still redirect.

The child runs its checks and leaves with ``os._exit``; an alarm turns a hang
(a registry lock inherited in the "held" state) into a failure instead of a
stuck test run. The child's traceback comes back through a pipe.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import traceback
import types
from collections.abc import Callable

import pytest

import patchscope
from patchscope import _registry

pytestmark = [
    pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork"),
    # Forking with other threads alive is exactly what these tests exercise.
    pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning"),
]

TIMEOUT = 10.0  # seconds; only reached when something hangs
CHILD_ALARM = 20  # seconds before SIGALRM kills a hung child


class Token:
    """A replacement or original value; only its identity matters."""

    def __init__(self, label: str) -> None:
        self.label = label

    def __repr__(self) -> str:
        return f"<{self.label}>"


def run_in_child(check: Callable[[], None]) -> None:
    """Fork, run *check* in the child, and fail here if it failed, hung or crashed there."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns
        code = 1
        try:
            os.close(read_end)
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            signal.alarm(CHILD_ALARM)
            check()
            code = 0
        except BaseException:
            os.write(write_end, traceback.format_exc().encode())
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        report = pipe.read().decode()  # EOF once the child has exited
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        pytest.fail(f"child killed by signal {os.WTERMSIG(status)} (hung?)\n{report}")
    assert os.WEXITSTATUS(status) == 0, f"child failed:\n{report}"


#: Set by a fork hook that runs before patchscope's own (hooks registered later
#: run first), so a test sees that a fork has begun.
_forking = threading.Event()
os.register_at_fork(before=_forking.set)


def test_fork_waits_for_a_registry_change_under_way_in_another_thread() -> None:
    """A fork while another thread holds the registry lock waits until it lets go.

    The holder changes the target in two steps under the lock and only takes
    the second once the fork has begun: a child forked between them would
    see the first step. It sees the second, and its lock works.
    """
    mod = types.ModuleType("patchscope_fork_target")
    mod.attr = Token("mod.attr")
    halfway, done = Token("halfway"), Token("done")

    class Target:
        attr = Token("Target.attr")

    held = threading.Event()

    def hold_lock() -> None:
        with _registry.lock:
            mod.attr = halfway
            held.set()
            assert _forking.wait(TIMEOUT), "the fork did not begin"
            mod.attr = done

    def child() -> None:
        assert vars(mod)["attr"] is done, "forked half way through a registry change"
        replacement = Token("child")
        with patchscope.redirect_attr(mod, "attr", replacement):
            assert mod.attr is replacement
        assert mod.attr is done
        handle = patchscope.redirect_attr(Target, "attr", replacement, scope="context").start()
        assert Target.attr is replacement
        handle.stop()
        assert patchscope.active() == ()

    _forking.clear()
    holder = threading.Thread(target=hold_lock, name="lock-holder")
    holder.start()
    try:
        assert held.wait(TIMEOUT), "the holder thread did not take the lock"
        run_in_child(child)
    finally:
        _forking.set()
        holder.join(TIMEOUT)
    assert not holder.is_alive()
    assert mod.attr is done


def test_child_sees_and_can_end_activations_of_a_thread_it_did_not_inherit() -> None:
    """A child forked while another thread holds activations sees them and can end them."""
    mod = types.ModuleType("patchscope_fork_target")
    mod.attr = original = Token("mod.attr")

    class Target:
        attr = Token("Target.attr")

    class_original = Target.attr
    held_process, held_context = Token("held:process"), Token("held:context")
    handles: list[patchscope.Activation] = []
    held, release = threading.Event(), threading.Event()

    def hold_activations() -> None:
        handles.append(patchscope.redirect_attr(mod, "attr", held_process).start())
        handles.append(
            patchscope.redirect_attr(Target, "attr", held_context, scope="context").start()
        )
        held.set()
        release.wait(TIMEOUT)
        for handle in handles:
            handle.stop()

    def child() -> None:
        # The holder thread does not exist here; its activations still do.
        assert mod.attr is held_process
        assert Target.attr is class_original  # its context is not this one
        replacement = Token("child")
        with patchscope.redirect_attr(mod, "attr", replacement):
            assert mod.attr is replacement
        assert mod.attr is held_process
        with patchscope.redirect_attr(Target, "attr", replacement, scope="context"):
            assert Target.attr is replacement
        assert Target.attr is class_original
        for handle in handles:
            handle.stop()
        assert patchscope.active() == ()
        assert vars(mod)["attr"] is original
        assert vars(Target)["attr"] is class_original

    holder = threading.Thread(target=hold_activations, name="activation-holder")
    holder.start()
    try:
        assert held.wait(TIMEOUT), "the holder thread did not start its activations"
        run_in_child(child)
    finally:
        release.set()
        holder.join(TIMEOUT)
    assert not holder.is_alive()
    assert patchscope.active() == ()
    assert vars(mod)["attr"] is original
    assert vars(Target)["attr"] is class_original


FORKS = 30  # per run of the churn test; ``census_forks`` takes a count of its own


def census_forks(forks: int) -> list[str]:
    """Fork *forks* times while threads churn every shape of redirect; the children's reports.

    Each child lists what is inconsistent in what it inherited: an activation
    that cannot be read, anything left installed once it stopped every
    activation ``active()`` lists, or a redirect that no longer works. An
    empty report is a consistent child.
    """
    from _interrupt_child import Targets, shapes

    t = Targets()
    bodies = list(shapes(t).values())
    stop = threading.Event()
    failures: list[BaseException] = []

    def churn(offset: int) -> None:
        try:
            i = offset
            while not stop.is_set():
                bodies[i % len(bodies)]()
                i += 1
        except BaseException as exc:
            failures.append(exc)

    def check() -> list[str]:
        found = []
        for act in patchscope.active():
            try:
                act.target, act.name, act.site  # noqa: B018 - readable
            except Exception as exc:
                found.append(f"an inherited activation cannot be read: {exc!r}")
        for act in patchscope.active():
            act.stop()
        found += t.problems()
        replacement = Token("child")
        with patchscope.redirect_attr(t.mod, "attr", replacement, scope="context"):
            if t.mod.attr is not replacement:
                found.append("a new redirect does not show in the child")
        found += t.problems()
        return found

    threads = [threading.Thread(target=churn, args=(k * 5,)) for k in range(3)]
    # Switch threads every few bytecodes, so a fork meets the others anywhere.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    for thread in threads:
        thread.start()
    reports = []
    try:
        for _ in range(forks):
            read_end, write_end = os.pipe()
            pid = os.fork()
            if pid == 0:  # child: never returns
                try:
                    os.close(read_end)
                    signal.alarm(CHILD_ALARM)
                    report = "; ".join(check())
                except BaseException:
                    report = traceback.format_exc()
                os.write(write_end, report.encode())
                os._exit(0)
            os.close(write_end)
            with os.fdopen(read_end, "rb") as pipe:
                reports.append(pipe.read().decode())
            _, status = os.waitpid(pid, 0)
            if not os.WIFEXITED(status):
                reports[-1] += f" (child killed by signal {os.WTERMSIG(status)})"
    finally:
        stop.set()
        for thread in threads:
            thread.join(TIMEOUT)
        sys.setswitchinterval(interval)
    assert not any(thread.is_alive() for thread in threads)
    assert not failures, failures
    for act in patchscope.active():
        act.stop()
    assert t.problems() == []
    return reports


@pytest.mark.slow
def test_fork_under_churn_gives_consistent_children() -> None:
    """Children forked at random moments of other threads' redirects inherit a sound registry."""
    bad = [report for report in census_forks(FORKS) if report]
    assert bad == [], bad[:3]


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    results = census_forks(count)
    inconsistent = [r for r in results if r]
    build = "accelerated" if patchscope.ACCELERATED else "pure Python"
    print(
        f"Python {sys.version.split()[0]}, {build}: "
        f"{len(inconsistent)} of {count} children inconsistent"
    )
    for report in inconsistent[:3]:
        print("   ", report[:300])


def test_child_calls_through_call_redirects_it_inherited_and_ends_them() -> None:
    """A child forked while another thread holds call redirects calls what the parent would."""

    def func() -> str:
        return "original"

    code = func.__code__
    handles: list[patchscope.Activation] = []
    held, release = threading.Event(), threading.Event()

    def hold_activations() -> None:
        handles.append(patchscope.redirect_call(func, lambda: "process", scope="process").start())
        handles.append(patchscope.redirect_call(func, lambda: "context").start())
        held.set()
        release.wait(TIMEOUT)
        for handle in handles:
            handle.stop()

    def child() -> None:
        # The holder's context activation is not this context's.
        assert func() == "process"
        with patchscope.redirect_call(func, lambda: "child"):
            assert func() == "child"
        assert func() == "process"
        for handle in handles:
            handle.stop()
        assert patchscope.active() == ()
        assert func.__code__ is code and func() == "original"

    holder = threading.Thread(target=hold_activations, name="call-holder")
    holder.start()
    try:
        assert held.wait(TIMEOUT), "the holder thread did not start its activations"
        run_in_child(child)
    finally:
        release.set()
        holder.join(TIMEOUT)
    assert not holder.is_alive()
    assert func.__code__ is code and patchscope.active() == ()
