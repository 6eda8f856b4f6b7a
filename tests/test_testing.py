"""Tests of patchscope.testing: snapshots, the schedule model and strategies, check_restores."""

from __future__ import annotations

import subprocess
import sys
import threading
import types
from unittest import mock

import pytest
from hypothesis import given, settings

import patchscope
from patchscope.testing import ABSENT, Difference, check_restores, snapshot
from patchscope.testing.strategies import (
    Call,
    Decorated,
    Schedule,
    Start,
    Stop,
    With,
    schedules,
)


def _module() -> types.ModuleType:
    mod = types.ModuleType("fake_mod")
    mod.value = 1  # type: ignore[attr-defined]
    mod.other = "x"  # type: ignore[attr-defined]
    return mod


class _Owner:
    @staticmethod
    def static() -> int:
        return 1

    @classmethod
    def klass(cls) -> int:
        return 2

    plain = 3


# -- snapshot -----------------------------------------------------------------


def test_unchanged_objects_have_no_differences() -> None:
    """A snapshot of untouched module, class and instance diffs empty."""
    instance = _Owner()
    instance.attr = 1  # type: ignore[attr-defined]
    snap = snapshot(_module(), _Owner, instance)
    assert snap.diff() == []
    snap.assert_unchanged()


def test_diff_reports_changed_added_and_removed() -> None:
    """diff() lists old and new value of a rebinding, and added and removed names."""
    mod = _module()
    snap = snapshot(mod)
    original = mod.value
    replacement = object()
    mod.value = replacement  # type: ignore[attr-defined]
    mod.new = 5  # type: ignore[attr-defined]
    del mod.other
    by_name = {d.name: d for d in snap.diff()}
    assert by_name["value"] == Difference(mod, "value", original, replacement)
    assert by_name["value"].kind == "changed"
    assert (by_name["new"].kind, by_name["new"].old, by_name["new"].new) == ("added", ABSENT, 5)
    assert (by_name["other"].kind, by_name["other"].new) == ("removed", ABSENT)


def test_diff_compares_by_identity() -> None:
    """An equal but different object is a change."""
    mod = _module()
    mod.value = [1]  # type: ignore[attr-defined]
    snap = snapshot(mod)
    mod.value = [1]  # type: ignore[attr-defined]
    assert [d.name for d in snap.diff()] == ["value"]


def test_diff_sees_raw_class_attributes() -> None:
    """Replacing a staticmethod by its plain function is a change (raw values compared)."""

    class Local(_Owner):
        pass

    Local.static = staticmethod(_Owner.static)  # type: ignore[method-assign]
    snap = snapshot(Local)
    Local.static = Local.static  # type: ignore[method-assign]
    assert [d.name for d in snap.diff()] == ["static"]


def test_assert_unchanged_lists_every_difference() -> None:
    """assert_unchanged() raises AssertionError naming owner, attribute, old and new values."""
    mod = _module()
    snap = snapshot(mod)
    mod.value = 2  # type: ignore[attr-defined]
    mod.added = "new"  # type: ignore[attr-defined]
    with pytest.raises(AssertionError) as info:
        snap.assert_unchanged()
    message = str(info.value)
    assert "2 attributes differ" in message
    assert "<module 'fake_mod'>.value: 1 -> 2" in message
    assert "<module 'fake_mod'>.added: added 'new'" in message


def test_restore_puts_raw_values_back() -> None:
    """restore() brings back staticmethod/classmethod objects by identity, deletes added names."""

    class Local(_Owner):
        pass

    Local.static = _Owner.__dict__["static"]  # type: ignore[method-assign]
    Local.klass = _Owner.__dict__["klass"]  # type: ignore[method-assign]
    raw = dict(vars(Local))
    snap = snapshot(Local)
    Local.static = lambda: 0  # type: ignore[method-assign,assignment]
    del Local.klass
    Local.extra = 1  # type: ignore[attr-defined]
    snap.restore()
    assert dict(vars(Local)) == raw
    assert vars(Local)["static"] is raw["static"]
    assert not hasattr(Local, "extra")
    assert snap.diff() == []


def test_restore_instance_and_module() -> None:
    """restore() writes an instance's and a module's __dict__ back."""
    mod, instance = _module(), _Owner()
    instance.own = 1  # type: ignore[attr-defined]
    snap = snapshot(mod, instance)
    mod.value = 9  # type: ignore[attr-defined]
    instance.own = 2  # type: ignore[attr-defined]
    instance.more = 3  # type: ignore[attr-defined]
    snap.restore()
    assert (mod.value, instance.own, hasattr(instance, "more")) == (1, 1, False)


def test_module_class_swap_is_a_difference() -> None:
    """A module whose class was swapped (not its __dict__) differs, and restore() swaps back."""
    mod = _module()
    snap = snapshot(mod)

    class Swapped(types.ModuleType):
        pass

    mod.__class__ = Swapped
    assert [(d.name, d.old, d.new) for d in snap.diff()] == [
        ("__class__", types.ModuleType, Swapped)
    ]
    snap.restore()
    assert type(mod) is types.ModuleType


def test_warning_registry_is_ignored() -> None:
    """The __warningregistry__ that the warnings machinery adds is not reported."""
    mod = _module()
    snap = snapshot(mod)
    mod.__warningregistry__ = {}  # type: ignore[attr-defined]
    assert snap.diff() == []


def _fresh(value: object) -> object:
    """An equal value that is not the same object (where the type allows it)."""
    import pickle

    return pickle.loads(pickle.dumps(value))


@pytest.mark.parametrize(
    "value",
    ["tz" * 40, b"x" * 40, 10**30, 2.5, float("nan"), 1 + 2j, ("UTC", ("UTC", 3.0)),
     frozenset({"a", 10**30}), None, True],
    ids=["str", "bytes", "int", "float", "nan", "complex", "tuple", "frozenset", "None", "bool"],
)
def test_an_equal_immutable_builtin_rebound_is_unchanged(value: object) -> None:
    """Rebinding to an equal value of an immutable builtin type (time.tzset does) is no change."""
    mod = _module()
    mod.value = value  # type: ignore[attr-defined]
    snap = snapshot(mod)
    mod.value = _fresh(value)  # type: ignore[attr-defined]
    assert snap.diff() == []


@pytest.mark.parametrize(
    ("old", "new"),
    [(0.0, -0.0), (1, True), (1, 1.0), ((1, [2]), (1, [2])), ("a", type("S", (str,), {})("a")),
     (frozenset({1}), frozenset({1.0}))],
    ids=["signed-zero", "int-bool", "int-float", "tuple-of-list", "str-subclass", "set-types"],
)
def test_other_equal_values_are_still_changes(old: object, new: object) -> None:
    """An equal value of another type, a mutable part or a subclass is a change."""
    mod = _module()
    mod.value = old  # type: ignore[attr-defined]
    snap = snapshot(mod)
    mod.value = new  # type: ignore[attr-defined]
    assert [d.name for d in snap.diff()] == ["value"]


def test_copy_pickle_and_annotation_caches_are_ignored() -> None:
    """__slotnames__ from copy/pickle and a lazily created __annotations__ are not differences."""
    import copy
    import pickle
    import typing

    class Plain:
        pass

    class Slotted:
        __slots__ = ("x",)

        def __getstate__(self) -> object:
            return None, {"x": 1}

    snap = snapshot(Plain, Slotted)
    for obj in (Plain(), Slotted()):
        copy.copy(obj)
        copy.deepcopy(obj)
        for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
            obj.__reduce_ex__(protocol)  # what pickle.dumps calls
    typing.get_type_hints(Plain)
    assert "__slotnames__" in vars(Plain)
    assert snap.diff() == []


def test_a_module_that_lost_its_name_is_compared() -> None:
    """A module whose __name__ was deleted still diffs, and reports that as the difference."""
    mod = _module()
    snap = snapshot(mod)
    del mod.__name__
    mod.sub = types.ModuleType("fake_mod.sub")  # type: ignore[attr-defined]
    assert [(d.name, d.kind) for d in snap.diff()] == [("__name__", "removed"), ("sub", "added")]
    snap.restore()
    assert mod.__name__ == "fake_mod"


def test_snapshot_without_dict_names_the_object() -> None:
    """An object without __dict__ is refused with a TypeError saying what to do."""
    with pytest.raises(TypeError, match=r"cannot snapshot 3: it has no __dict__"):
        snapshot(3)


def test_snapshot_catches_mock_patch_start_without_stop() -> None:
    """A mock.patch started and never stopped shows up in the diff."""
    mod = _module()
    snap = snapshot(mod)
    patcher = mock.patch.object(mod, "value", 42)
    patcher.start()
    try:
        assert [(d.name, d.new) for d in snap.diff()] == [("value", 42)]
    finally:
        patcher.stop()
    assert snap.diff() == []


def test_import_does_not_import_pytest_or_hypothesis() -> None:
    """import patchscope.testing pulls in neither pytest nor hypothesis."""
    code = (
        "import sys, patchscope, patchscope.testing; "
        "print(sorted(m for m in ('pytest', 'hypothesis') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


# -- the schedule model -------------------------------------------------------


class _NaiveRedirect:
    """The save-on-enter, restore-on-exit patch mock.patch and try/finally use."""

    def __init__(self, target: object, name: str, value: object) -> None:
        self.target, self.name, self.value = target, name, value
        self._saved: list[object] = []

    def start(self) -> _NaiveRedirect.Handle:
        handle = self.Handle(self, getattr(self.target, self.name))
        setattr(self.target, self.name, self.value)
        return handle

    class Handle:
        def __init__(self, redirect: _NaiveRedirect, saved: object) -> None:
            self.redirect, self.saved = redirect, saved

        def stop(self) -> None:
            setattr(self.redirect.target, self.redirect.name, self.saved)

    def __enter__(self) -> object:
        self._saved.append(self.start())
        return self.value

    def __exit__(self, *exc_info: object) -> None:
        self._saved.pop().stop()  # type: ignore[attr-defined]

    def __call__(self, func: object) -> object:
        def wrapper() -> object:
            with self:
                return func()  # type: ignore[operator]

        return wrapper


def test_schedule_rejects_an_order_that_does_not_match() -> None:
    """A Schedule whose order does not count each thread's steps is refused."""
    with pytest.raises(ValueError, match="once per step"):
        Schedule(threads=((With(0),),), order=(0,))


def test_schedule_str_numbers_steps_in_global_order() -> None:
    """str(schedule) shows each thread's program with the global step numbers."""
    schedule = Schedule(
        threads=((With(0, (Call(0),), raises=True),), (Start(1),)), order=(0, 1, 0, 0)
    )
    assert str(schedule).splitlines() == [
        "thread 0:",
        "  0  with r0:",
        "  2    call c0",
        "  3  exit r0 raising ScheduledError",
        "thread 1:",
        "  1  start r1",
    ]


def test_out_of_order_exits_across_threads_run_in_the_given_order() -> None:
    """enter A, enter B, exit A, exit B across two threads happens exactly in that order."""
    mod = _module()
    seen: list[tuple[str, object]] = []
    redirects = [_NaiveRedirect(mod, "value", "A"), _NaiveRedirect(mod, "value", "B")]

    def look() -> None:
        seen.append((threading.current_thread().name, mod.value))

    schedule = Schedule(
        threads=((With(0, (Call(0),)),), (With(1, (Call(0),)),)),
        order=(0, 0, 1, 1, 0, 1),
    )
    snap = snapshot(mod)
    trace = schedule.run(redirects, [look])
    assert [value for _, value in seen] == ["A", "B"]
    assert seen[1][0] != threading.current_thread().name
    assert [line.split(": ", 1)[1] for line in trace] == [
        "enter r0",
        "call c0",
        "enter r1",
        "call c0",
        "exit r0",
        "exit r1",
    ]
    # The naive redirect leaks A's value here: the schedule exposes it.
    assert [(d.name, d.new) for d in snap.diff()] == [("value", "A")]


def test_stop_picks_any_live_handle_and_leftovers_are_stopped() -> None:
    """Stop(k) stops the k-th oldest live handle; handles left live are stopped at the end."""
    stopped: list[int] = []

    class Counting:
        def __init__(self, number: int) -> None:
            self.number = number

        def start(self) -> Counting:
            return self

        def stop(self) -> None:
            stopped.append(self.number)

    schedule = Schedule(threads=((Start(0), Start(1), Start(2), Stop(1)),), order=(0,) * 4)
    schedule.run([Counting(0), Counting(1), Counting(2)])
    assert stopped == [1, 0, 2]


def test_exceptions_are_raised_inside_and_must_propagate() -> None:
    """raises=True raises ScheduledError inside; a redirect that swallows it fails the run."""

    class Swallowing(_NaiveRedirect):
        def __exit__(self, *exc_info: object) -> bool:  # type: ignore[override]
            super().__exit__(*exc_info)
            return True

    mod = _module()
    Schedule(threads=((With(0, raises=True),),), order=(0, 0)).run(
        [_NaiveRedirect(mod, "value", 2)]
    )
    with pytest.raises(AssertionError, match="swallowed"):
        Schedule(threads=((With(0, raises=True),),), order=(0, 0)).run(
            [Swallowing(mod, "value", 2)]
        )
    assert mod.value == 1


def test_decorated_calls_run_the_body_inside_the_redirect() -> None:
    """Decorated runs its body inside the decorated function and passes its result through."""
    mod = _module()
    seen: list[object] = []
    schedule = Schedule(threads=((Decorated(0, (Call(0),)),),), order=(0, 0, 0))
    schedule.run([_NaiveRedirect(mod, "value", 7)], [lambda: seen.append(mod.value)])
    assert seen == [7]
    assert mod.value == 1


def test_a_failing_step_aborts_all_threads_and_is_raised() -> None:
    """An error in one thread's step stops the others and is re-raised by run()."""
    mod = _module()

    def boom() -> None:
        raise KeyError("boom")

    schedule = Schedule(
        threads=((With(0, (Call(0),)),), (With(0, (Call(1),)),)),
        order=(0, 1, 1, 0, 0, 1),
    )
    with pytest.raises(KeyError, match="boom"):
        schedule.run([_NaiveRedirect(mod, "value", 2)], [lambda: None, boom])


def test_run_checks_the_watched_objects_and_puts_them_back() -> None:
    """A pasted regression test fails by itself: run(watch=) reports and undoes what leaked."""
    mod = _module()
    schedule = Schedule(threads=((Start(0), Start(0)),), order=(0, 0))
    with pytest.raises(AssertionError) as info:
        schedule.run([_NaiveRedirect(mod, "value", 2)], watch=[mod])
    assert "not restored: <module 'fake_mod'>.value: 1 -> 2" in str(info.value)
    assert "steps as they ran:" in str(info.value)
    assert mod.value == 1


def test_run_reports_activations_left_live() -> None:
    """run() fails on a patchscope activation its callables left live, and stops it."""
    mod = _module()
    before = len(patchscope.active())

    def leak() -> None:
        patchscope.redirect_attr(mod, "value", 9).start()

    with pytest.raises(AssertionError, match=r"still live: <Activation live <module 'fake_mod'>"):
        Schedule(threads=((Call(0),),), order=(0,)).run([], [leak])
    assert (len(patchscope.active()), mod.value) == (before, 1)


@pytest.mark.parametrize(
    "schedule",
    [
        Schedule(threads=((Call(1),),), order=(0,)),
        Schedule(threads=((Call(0),), (Call(1),)), order=(1, 0)),
    ],
    ids=["alone", "waited-for"],
)
def test_a_stuck_step_times_out(schedule: Schedule) -> None:
    """A step that never finishes makes run() raise TimeoutError instead of hanging."""
    release = threading.Event()
    try:
        with pytest.raises(TimeoutError):
            schedule.run([], [lambda: None, lambda: release.wait(5)], timeout=0.2)
    finally:
        release.set()


@settings(max_examples=50, deadline=None)
@given(schedules(redirects=2, callables=1, threads=3))
def test_generated_schedules_are_valid_and_run(schedule: Schedule) -> None:
    """Every generated schedule is consistent and runs to completion against redirects that nest."""
    assert 1 <= len(schedule.threads) <= 3
    counter = types.SimpleNamespace(n=0)

    class Counting:
        def start(self) -> Counting:
            counter.n += 1
            return self

        def stop(self) -> None:
            counter.n -= 1

        def __enter__(self) -> None:
            counter.n += 1

        def __exit__(self, *exc_info: object) -> None:
            counter.n -= 1

        def __call__(self, func: object) -> object:
            def wrapper() -> object:
                with self:
                    return func()  # type: ignore[operator]

            return wrapper

    trace = schedule.run([Counting(), Counting()], [lambda: None])
    assert len([line for line in trace if not line.startswith("end:")]) == len(schedule.order)
    assert counter.n == 0


def test_schedules_validates_its_arguments() -> None:
    """schedules() needs something to schedule and at least one thread."""
    with pytest.raises(ValueError, match="at least one redirect"):
        schedules(0)
    with pytest.raises(ValueError, match="threads"):
        schedules(1, threads=0)


# -- check_restores -----------------------------------------------------------


class _Base:
    def __init__(self, value: int = 0) -> None:
        self.value = value


class _Replacement(_Base):
    pass


@pytest.mark.parametrize("scope", ["process", "context"])
def test_check_restores_passes_for_patchscope_redirects(scope: str) -> None:
    """Schedules of redirect_attr and combine, in both scopes, restore module and class exactly."""
    mod = _module()

    class Owner(_Owner):
        pass

    check_restores(
        lambda: [
            patchscope.redirect_attr(mod, "value", 2, scope=scope),
            patchscope.combine(
                patchscope.redirect_attr(mod, "value", 3, scope=scope),
                patchscope.redirect_attr(Owner, "plain", 4, scope=scope),
            ),
        ],
        watch=[mod, Owner],
        threads=3,
        max_examples=40,
    )


def test_check_restores_on_two_context_attributes_of_one_module() -> None:
    """Combined context redirects of two attributes of one module keep working in any schedule."""
    mod = _module()
    check_restores(
        lambda: [
            patchscope.combine(
                patchscope.redirect_attr(mod, "value", 3, scope="context"),
                patchscope.redirect_attr(mod, "other", 4, scope="context"),
            )
        ],
        watch=[mod],
        max_examples=40,
    )


def test_check_restores_passes_for_a_decorated_class_and_constructions() -> None:
    """A decorated class, built amid redirect_construction, leaves both classes as they were."""

    class Base(_Base):
        pass

    class Holder:
        cls = Base

    holder = Holder
    during_init = patchscope.redirect_attr(holder, "cls", _Replacement, scope="context")

    @during_init
    class Model:
        def __init__(self) -> None:
            self.seen = holder.cls

    def build() -> None:
        assert Model().seen is _Replacement

    check_restores(
        lambda: [
            during_init,
            patchscope.redirect_construction(Base, _Replacement),
            build,
        ],
        watch=[holder, Base, Model],
        max_examples=40,
    )


def test_check_restores_finds_and_shrinks_the_mock_patch_leak() -> None:
    """A save-on-enter redirect fails with the shrunk schedule, and the module is put back."""
    mod = _module()
    with pytest.raises(AssertionError) as info:
        check_restores(lambda: [_NaiveRedirect(mod, "value", 2)], watch=[mod], max_examples=200)
    message = str(info.value)
    assert "restore check failed" in message
    assert "not restored: <module 'fake_mod'>.value: 1 -> 2" in message
    assert "steps as they ran:" in message
    # The smallest leak: two starts, stopped oldest first at the end.
    assert "Schedule(threads=((Start(redirect=0), Start(redirect=0)),), order=(0, 0))" in message
    assert ".run(redirects, callables, watch=watch)" in message
    assert mod.value == 1


def test_check_restores_fails_when_a_callable_raises() -> None:
    """An exception from a user callable fails the check and names the exception."""
    mod = _module()

    def broken() -> None:
        raise LookupError("user code failed")

    with pytest.raises(AssertionError, match=r"a step raised LookupError\('user code failed'\)"):
        check_restores(lambda: [broken], watch=[mod], max_examples=5)


def test_check_restores_stops_activations_left_live() -> None:
    """A callable that starts and never stops an activation fails, and the activation is stopped."""
    mod = _module()
    before = len(patchscope.active())

    def leak() -> None:
        patchscope.redirect_attr(mod, "value", 9).start()

    live = r"still live: <Activation live <module 'fake_mod'>\.value"
    with pytest.raises(AssertionError, match=live):
        check_restores(lambda: [leak], watch=[mod], max_examples=5)
    assert len(patchscope.active()) == before
    assert mod.value == 1


def test_check_restores_validates_its_arguments() -> None:
    """Empty watch= and items that are neither redirects nor callables are refused."""
    with pytest.raises(ValueError, match="watch="):
        check_restores(lambda: [lambda: None], watch=[])
    with pytest.raises(TypeError, match="neither a redirect"):
        check_restores(lambda: [3], watch=[_module()], max_examples=1)


def test_snapshot_ignores_a_submodule_bound_by_its_first_import() -> None:
    """Importing pkg.sub for the first time binds pkg.sub; that is not a leak."""
    import importlib
    import sys
    import types

    parent = types.ModuleType("snap_parent_pkg")
    parent.__path__ = []  # a package
    sys.modules["snap_parent_pkg"] = parent
    try:
        snap = patchscope.testing.snapshot(parent)
        child = types.ModuleType("snap_parent_pkg.child")
        sys.modules["snap_parent_pkg.child"] = child
        parent.child = child  # what the import system does
        parent.other = types.ModuleType("unrelated")  # a real change
        names = [d.name for d in snap.diff()]
        assert names == ["other"]
        assert importlib.import_module("snap_parent_pkg.child") is child
    finally:
        sys.modules.pop("snap_parent_pkg", None)
        sys.modules.pop("snap_parent_pkg.child", None)


class _Bound:
    def method(self) -> int:
        return 1


def test_an_equal_bound_method_rebound_is_unchanged() -> None:
    """A bound method rebound to one of the same __self__ and __func__ is no change; others are."""
    import random

    first, second = _Bound(), _Bound()
    mod = types.ModuleType("bound_mod")
    mod.method = first.method  # type: ignore[attr-defined]
    mod.builtin = random.random  # type: ignore[attr-defined]
    snap = snapshot(mod)
    mod.method = first.method  # type: ignore[attr-defined]  # a new, equal bound method
    mod.builtin = random._inst.random  # type: ignore[attr-defined]
    assert mod.method is not snap._recorded(mod, "method")  # type: ignore[attr-defined]
    assert snap.diff() == []
    mod.method = second.method  # type: ignore[attr-defined]
    mod.builtin = random.Random().random  # type: ignore[attr-defined]
    assert [d.name for d in snap.diff()] == ["method", "builtin"]


_LAZY_SOURCE = '''
parser = None
cache = None
patched = None


def lazy_import():
    global parser, late
    import json as parser
    import json.decoder as late


def first_use():
    global cache
    cache = object()
'''


def _lazy_module() -> types.ModuleType:
    mod = types.ModuleType("lazy_mod")
    exec(_LAZY_SOURCE, vars(mod))
    return mod


def test_a_modules_own_lazy_state_is_unchanged() -> None:
    """None/absent to the module of the same name, or to the module's own cache, is no change."""
    mod = _lazy_module()
    snap = snapshot(mod)
    mod.lazy_import()
    mod.first_use()
    assert mod.parser is sys.modules["json"]
    assert snap.diff() == []


def test_other_changes_from_none_are_still_changes() -> None:
    """None to a value the module's code never assigns, or to another-named module, is a change."""
    import json

    mod = _lazy_module()
    snap = snapshot(mod)
    mod.patched = object()  # type: ignore[attr-defined]
    mod.other_name = json  # type: ignore[attr-defined]  # not the module of that name
    mod.cache = "set"  # type: ignore[attr-defined]  # assigned by first_use: lazy state
    found = [(d.name, d.kind) for d in snap.diff()]
    assert found == [("patched", "changed"), ("other_name", "added")]
    mod.first_use()
    after = snapshot(mod)
    mod.cache = "other"  # type: ignore[attr-defined]  # from one value to another
    mod.patched = None  # type: ignore[attr-defined]  # a global its code never assigns
    assert [d.name for d in after.diff()] == ["cache", "patched"]


def test_a_first_use_cache_cleared_back_to_none_is_unchanged() -> None:
    """A global the module's own code assigns, going from a value back to None, is no change."""
    mod = _lazy_module()
    mod.first_use()
    snap = snapshot(mod)
    mod.cache = None  # type: ignore[attr-defined]  # the cache cleared
    assert snap.diff() == []
