"""patchscope._handles: what an Activation and an ActivationGroup report, and how they stop.

Handles are reached through the public API only: ``Redirect.start()``,
``patchscope.active()`` and ``combine``.
"""

from __future__ import annotations

import json
import sys
import threading
import types
import warnings
from typing import Any

import pytest
from _targets import FailingWrites
from _threads import JOIN, in_other_thread

import patchscope
from patchscope import (
    Activation,
    ActivationGroup,
    RedirectConflictWarning,
    RestoreError,
    combine,
    redirect_attr,
    redirect_construction,
)


def _module(**values: object) -> types.ModuleType:
    mod = types.ModuleType("handles_target")
    for name, value in values.items():
        setattr(mod, name, value)
    return mod


# -- Activation ------------------------------------------------------------


def test_active_reports_target_name_scope_site_thread() -> None:
    """active() lists live activations with where and by whom they were entered."""
    mod = types.ModuleType("m")
    mod.value = 1
    handle = redirect_attr(mod, "value", 2).start()
    line = sys._getframe().f_lineno - 1
    try:
        (act,) = patchscope.active()
        assert act.target is mod and act.name == "value" and act.replacement == 2
        assert act.scope == "process"
        assert act.site == f"{__file__}:{line}"
        assert act.thread_name == "MainThread"
        assert act.thread is threading.current_thread()
        assert "live" in repr(act)
    finally:
        handle.stop()
    assert patchscope.active() == ()
    assert "ended" in repr(act)


def test_handles_take_no_attributes_of_their_own() -> None:
    """Handles are records with fixed fields, in both builds: a typo'd field is an error."""
    mod = _module(a=1, b=2)
    single = redirect_attr(mod, "a", 10).start()
    group = combine(redirect_attr(mod, "b", 20)).start()
    try:
        for handle in (single, group):
            with pytest.raises(AttributeError):
                handle.stoped = True  # type: ignore[union-attr]
            assert not hasattr(handle, "__dict__")
    finally:
        group.stop()
        single.stop()
    assert (mod.a, mod.b) == (1, 2)


def test_active_stop_from_listing_ends_it() -> None:
    """An activation found through active() can be stopped; the with-block exit is then a no-op."""
    mod = types.ModuleType("m")
    mod.value = original = object()
    with redirect_attr(mod, "value", 2):
        patchscope.active()[0].stop()
        assert mod.value is original
    assert mod.value is original


def test_start_returns_the_activation_active_lists_while_it_is_live() -> None:
    """A single redirect's start() handle is the very object active() lists, call after call."""
    handle = redirect_attr(_module(value=1), "value", 2).start()
    try:
        assert isinstance(handle, Activation)
        assert patchscope.active() == (handle,) and patchscope.active()[0] is handle
        assert handle.open is True and handle.activations == (handle,)
    finally:
        handle.stop()
    assert handle.open is False and handle.activations == (handle,)


def test_a_dotted_path_activation_reports_the_resolved_target_in_context_scope() -> None:
    """target is the object the path named; scope is what the redirect was given."""
    handle = redirect_attr("json", "dumps", "patched", scope="context").start()
    try:
        assert handle.target is json and handle.name == "dumps"
        assert handle.replacement == "patched" and handle.scope == "context"
    finally:
        handle.stop()


class _Built:
    """A class whose constructions are redirected."""


class _Replacement:
    """What is built instead."""


def test_a_construction_activation_reports_the_class_and_what_is_built() -> None:
    """For constructions, name is ``__new__`` and replacement is what is built in its place."""
    handle = redirect_construction(_Built, _Replacement).start()
    try:
        assert isinstance(handle, Activation)
        assert handle.target is _Built and handle.name == "__new__"
        assert handle.replacement is _Replacement and handle.scope == "context"  # its default
    finally:
        handle.stop()


def test_repr_names_target_attribute_replacement_scope_and_site() -> None:
    """A live activation's repr says everything a reader needs to find it; an ended one says so."""
    mod = _module(value=1)
    handle = redirect_attr(mod, "value", "two", scope="context").start()
    line = sys._getframe().f_lineno - 1
    try:
        assert repr(handle) == (
            f"<Activation live <module 'handles_target'>.value -> 'two' "
            f"scope='context' at {__file__}:{line}>"
        )
    finally:
        handle.stop()
    assert repr(handle).startswith("<Activation ended <module 'handles_target'>.value -> 'two'")


def test_thread_and_thread_name_follow_the_entering_thread() -> None:
    """While its thread runs, thread is that thread; once it has ended, thread_name says so."""
    mod = _module(value=1)
    r = redirect_attr(mod, "value", 2)
    entered = threading.Barrier(2, timeout=JOIN)
    release = threading.Event()
    handles: list[Activation | ActivationGroup] = []

    def enter() -> None:
        handles.append(r.start())
        entered.wait()
        assert release.wait(JOIN)

    worker = threading.Thread(target=enter, name="handles-worker")
    worker.start()
    try:
        entered.wait()
        (handle,) = handles
        assert isinstance(handle, Activation)
        assert handle.thread is worker and handle.thread_name == "handles-worker"
    finally:
        release.set()
        worker.join(JOIN)
    assert not worker.is_alive()
    try:
        assert handle.open  # a process-scope activation outlives its thread
        assert handle.thread is None
        assert handle.thread_name.startswith("<ended thread ") and handle.thread_name.endswith(">")
        assert str(worker.ident) in handle.thread_name
    finally:
        handle.stop()


@pytest.mark.parametrize("scope", ["process", "context"])
def test_stop_from_another_thread_ends_it_and_again_is_harmless(scope: str) -> None:
    """stop() works from any thread, any number of times, and restores the original once."""
    original = object()
    mod = _module(value=original)
    handle = redirect_attr(mod, "value", 2, scope=scope).start()
    assert mod.value == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second restore would be a conflict
        in_other_thread(handle.stop)
        assert handle.open is False and patchscope.active() == ()
        assert mod.value is original and vars(mod)["value"] is original
        handle.stop()
        in_other_thread(handle.stop)
    assert mod.value is original


def test_stops_racing_in_two_threads_end_it_once() -> None:
    """Two threads stopping one activation at once both return; the restore happens once."""
    log: list[str] = []
    obj = FailingWrites(log, value=1)
    handle = redirect_attr(obj, "value", 2).start()
    log.clear()
    ready = threading.Barrier(2, timeout=JOIN)
    failures: list[BaseException] = []

    def stop() -> None:
        ready.wait()
        try:
            handle.stop()
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=stop) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN)
    assert not any(t.is_alive() for t in threads)
    assert failures == [] and log == ["value"]
    assert vars(obj)["value"] == 1 and patchscope.active() == ()


# -- ActivationGroup -------------------------------------------------------


def test_a_group_lists_its_activations_in_entry_order_flattened() -> None:
    """activations is every leaf, nested groups included, in the order they were entered."""
    mod = _module(a=1, b=2, c=3, d=4)
    inner = combine(redirect_attr(mod, "b", 20), redirect_attr(mod, "c", 30))
    handle = combine(redirect_attr(mod, "a", 10), inner, redirect_attr(mod, "d", 40)).start()
    try:
        assert isinstance(handle, ActivationGroup)
        assert [a.name for a in handle.activations] == ["a", "b", "c", "d"]
        assert all(isinstance(a, Activation) and a.open for a in handle.activations)
        assert set(map(id, handle.activations)) == set(map(id, patchscope.active()))
        assert repr(handle) == "<ActivationGroup of 4 activation(s)>"
    finally:
        handle.stop()
    assert not any(a.open for a in handle.activations)


def test_a_group_stops_its_parts_in_reverse_order() -> None:
    """The last part entered is the first restored."""
    log: list[str] = []
    obj = FailingWrites(log, a=1, b=2, c=3)
    handle = combine(*(redirect_attr(obj, n, n * 2) for n in "abc")).start()
    assert log == ["a", "b", "c"]
    log.clear()
    handle.stop()
    assert log == ["c", "b", "a"]
    assert (vars(obj)["a"], vars(obj)["b"], vars(obj)["c"]) == (1, 2, 3)


@pytest.mark.parametrize("scope", ["process", "context"])
def test_a_group_stop_from_another_thread_and_again_is_harmless(scope: str) -> None:
    """A group's stop() ends every part from any thread; further stops do nothing."""
    mod = _module(a=1, b=2)
    handle = combine(
        redirect_attr(mod, "a", 10, scope=scope), redirect_attr(mod, "b", 20, scope=scope)
    ).start()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        in_other_thread(handle.stop)
        assert patchscope.active() == () and (mod.a, mod.b) == (1, 2)
        handle.stop()
        in_other_thread(handle.stop)
    assert (vars(mod)["a"], vars(mod)["b"]) == (1, 2)


def test_failed_restores_are_collected_into_one_error_after_every_part_ran() -> None:
    """Two failing restores: the other parts still end, then one RestoreError holds both."""
    log: list[str] = []
    obj = FailingWrites(log, a=1, c=3)
    original = object()
    mod = _module(b=original)
    handle = combine(
        redirect_attr(obj, "a", 10), redirect_attr(mod, "b", 20), redirect_attr(obj, "c", 30)
    ).start()
    locked_a, locked_c = AttributeError("locked a"), ValueError("locked c")
    obj.fail("a", locked_a)
    obj.fail("c", locked_c)
    log.clear()
    with pytest.raises(RestoreError) as info:
        handle.stop()
    assert log == ["c", "a"]  # both restores were tried, last part first
    assert mod.b is original
    assert info.value.errors == [locked_c, locked_a]
    message = str(info.value)
    assert message.startswith("2 restore(s) failed: ")
    assert message.index("'c'") < message.index("'a'") and "FailingWrites" in message
    assert patchscope.active() == ()
    handle.stop()  # ended despite the failures: nothing is raised again


@pytest.mark.parametrize("also_failing", [False, True], ids=["alone", "with-restore-error"])
def test_another_error_is_raised_after_every_part_stopped_in_place_of_restore_errors(
    also_failing: bool,
) -> None:
    """Another error from a part's end (a warning made an error) waits for the rest, then wins."""
    log: list[str] = []
    obj = FailingWrites(log, a=1, b=2)
    original = object()
    mod = _module(x=original)
    handle = combine(
        redirect_attr(obj, "a", 10), redirect_attr(obj, "b", 20), redirect_attr(mod, "x", 5)
    ).start()
    mod.x = "intruder"  # ending the last part meets a conflict
    if also_failing:
        obj.fail("b", AttributeError("locked b"))  # and ending the middle part fails to restore
    log.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RedirectConflictWarning)
        with pytest.raises(RedirectConflictWarning, match=r"'x'.*'intruder'"):
            handle.stop()
    assert log == ["b", "a"]  # the parts after the conflict were still stopped
    assert vars(obj)["a"] == 1 and mod.x is original
    assert vars(obj)["b"] == (20 if also_failing else 2)
    assert patchscope.active() == ()


class _FailingStopHandle:
    """A handle of its own whose stop() raises *error* (after recording that it ran)."""

    def __init__(self, error: BaseException, log: list[str]) -> None:
        self._error, self._log = error, log
        self.value = "own"
        self.activations = ()
        self.thread_id = threading.get_ident()
        self._pushed, self._frame = False, None

    def stop(self) -> None:
        self._log.append(type(self._error).__name__)
        raise self._error


class _FailingStop(patchscope.Redirect):
    """A Redirect whose handle's stop() raises."""

    __slots__ = ("_error", "_log")

    def __init__(self, error: BaseException, log: list[str]) -> None:
        self._error, self._log = error, log

    def _args(self) -> tuple[object, ...]:
        return (self._error, self._log)

    def _activate(self, code: object, lasti: int) -> _FailingStopHandle:
        return _FailingStopHandle(self._error, self._log)


def test_a_group_stop_raises_the_first_error_of_its_parts_after_ending_them_all() -> None:
    """A part's stop() that raises (not a RestoreError) is raised once every part has ended."""
    mod = _module(a=1, b=2)
    log: list[str] = []
    group = combine(
        redirect_attr(mod, "a", 10),
        _FailingStop(KeyError("first"), log),
        _FailingStop(ValueError("second"), log),
        redirect_attr(mod, "b", 20),
    )
    handle = group.start()
    assert (mod.a, mod.b) == (10, 20)
    with pytest.raises(ValueError, match="second"):  # reverse order: the later part ends first
        handle.stop()
    assert log == ["ValueError", "KeyError"]
    assert (mod.a, mod.b) == (1, 2) and patchscope.active() == ()


def test_the_site_of_a_decorated_call_is_the_functions_first_line() -> None:
    """A decorated function's activations report its first line, even where its code opens
    with instructions of no line (a function with a cell: MAKE_CELL on 3.11)."""
    mod = _module(value=1)
    redirect = redirect_attr(mod, "value", 2)

    def with_cell() -> list[str]:
        cell = 1

        def inner() -> int:
            return cell

        return [act.site for act in patchscope.active()]

    def plain() -> list[str]:
        return [act.site for act in patchscope.active()]

    # 3.11+: the code starts on the def line (RESUME); 3.10: on the body's first line.
    below = 0 if sys.version_info >= (3, 11) else 1
    for fn in (with_cell, plain):
        assert redirect(fn)() == [f"{__file__}:{fn.__code__.co_firstlineno + below}"]
    assert patchscope.active() == ()


def test_an_activation_never_entered_reads_as_ended() -> None:
    """An Activation made but never registered is not open; repr says so, stop() does nothing."""
    mod = _module(value=1)
    act = Activation(redirect_attr(mod, "value", 2), 2, None, 0)
    assert act.open is False
    assert repr(act) == "<Activation ended>" and act.site == "<unknown>"
    act.stop()
    assert act.open is False and mod.value == 1 and patchscope.active() == ()


def test_an_entry_a_warning_stopped_reports_nothing_its_undo_meets() -> None:
    """An entry's conflict warning raised as an error: the undo's own conflict is not warned."""
    mod = _module(value="orig")

    class Intruder:
        def __repr__(self) -> str:
            mod.value = "rebound while warning"  # what the undo then finds
            return "Intruder()"

    outer = redirect_attr(mod, "value", "outer").start()
    mod.value = Intruder()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("error", message=".*Intruder", category=RedirectConflictWarning)
        with pytest.raises(RedirectConflictWarning, match="Intruder"):
            redirect_attr(mod, "value", "inner").start()
    assert [str(w.message) for w in caught] == []
    assert mod.value == "outer" and len(patchscope.active()) == 1
    outer.stop()
    assert mod.value == "orig" and patchscope.active() == ()


def test_an_entry_a_warning_stopped_leaves_no_activation_in_the_context() -> None:
    """A context entry undone after its conflict warning raised is taken off this context again."""
    from patchscope import _slots

    mod = _module(value="orig")
    before = _slots.ACTIVATIONS.get()
    outer = redirect_attr(mod, "value", "outer", scope="context").start()
    mod.value = "rebound"
    with warnings.catch_warnings():
        warnings.simplefilter("error", RedirectConflictWarning)
        with pytest.raises(RedirectConflictWarning):
            redirect_attr(mod, "value", "inner", scope="context").start()
    assert mod.value == "outer" and len(patchscope.active()) == 1
    assert [act.open for act in _slots.ACTIVATIONS.get()] == [True] * (len(before) + 1)
    outer.stop()
    assert _slots.ACTIVATIONS.get() == before


def test_the_site_of_a_with_spanning_lines_is_the_line_cpython_gives_its_frame() -> None:
    """The line reported for an entry is the one the frame is at while ``__enter__`` runs,
    for a ``with`` whose expression is on a line of its own."""
    mod = _module(value=1)
    redirect = redirect_attr(mod, "value", 2)

    class Recorder:
        line = 0

        def __enter__(self) -> None:
            Recorder.line = sys._getframe(1).f_lineno

        def __exit__(self, *exc: object) -> None:
            pass

    # fmt: off
    def enter(cm: Any) -> list[str]:
        with (
            cm
        ):
            return [act.site for act in patchscope.active()]
    # fmt: on

    enter(Recorder())
    [site] = enter(redirect)
    assert site == f"{__file__}:{Recorder.line}"


def test_stopping_something_that_is_not_a_handle_is_refused() -> None:
    """The lock-held stop takes activations and groups only; anything else is a caller's bug."""
    from patchscope._handles import stop_handle_locked

    outcomes: list[Any] = []
    with pytest.raises(TypeError, match="not a handle: <object object"):
        stop_handle_locked(object(), outcomes)
    assert outcomes == []


def test_a_group_stop_collects_the_restore_errors_of_parts_with_handles_of_their_own() -> None:
    """A part's own stop() that raises RestoreError: the others end, then one error holds its."""
    mod = _module(a=1, b=2)
    log: list[str] = []
    failed = AttributeError("locked")
    group = combine(
        redirect_attr(mod, "a", 10),
        _FailingStop(RestoreError("cannot restore 'x' of thing", [failed]), log),
        redirect_attr(mod, "b", 20),
    )
    handle = group.start()
    with pytest.raises(RestoreError) as info:
        handle.stop()
    assert log == ["RestoreError"] and info.value.errors == [failed]
    assert str(info.value) == "1 restore(s) failed: cannot restore 'x' of thing"
    assert (mod.a, mod.b) == (1, 2) and patchscope.active() == ()
