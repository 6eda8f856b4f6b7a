"""Fork: a child forked while other threads use patchscope can still redirect.

The child runs its checks and leaves with ``os._exit``; an alarm turns a hang
(a registry lock inherited in the "held" state) into a failure instead of a
stuck test run. The child's traceback comes back through a pipe.
"""

from __future__ import annotations

import os
import signal
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


def test_child_can_redirect_after_fork_while_another_thread_holds_the_lock() -> None:
    """Forking while another thread holds the registry lock leaves the child a usable lock."""
    mod = types.ModuleType("patchscope_fork_target")
    mod.attr = original = Token("mod.attr")

    class Target:
        attr = Token("Target.attr")

    held, release = threading.Event(), threading.Event()

    def hold_lock() -> None:
        lock = _registry._lock
        with lock:
            held.set()
            release.wait(TIMEOUT)

    def child() -> None:
        replacement = Token("child")
        with patchscope.redirect_attr(mod, "attr", replacement):
            assert mod.attr is replacement
        assert mod.attr is original
        handle = patchscope.redirect_attr(Target, "attr", replacement, scope="context").start()
        assert Target.attr is replacement
        handle.stop()
        assert patchscope.active() == ()

    holder = threading.Thread(target=hold_lock, name="lock-holder")
    holder.start()
    try:
        assert held.wait(TIMEOUT), "the holder thread did not take the lock"
        run_in_child(child)
    finally:
        release.set()
        holder.join(TIMEOUT)
    assert not holder.is_alive()
    assert mod.attr is original


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
