"""combine (patchscope._group): all or nothing under one lock, reverse ends, values, own handles."""

from __future__ import annotations

import threading
import types
import warnings

import pytest

import patchscope
from patchscope import (
    AttributeMissingError,
    RedirectConflictWarning,
    RestoreError,
    TargetNotWritableError,
    combine,
    redirect_attr,
)


@pytest.mark.parametrize("scope", ["process", "context"])
def test_a_conflict_warning_raised_as_an_error_ends_every_part_first(scope: str) -> None:
    """With warnings as errors, a group's end still restores every part, then raises."""
    mod = types.ModuleType("m")
    mod.a, mod.b, mod.c = originals = (object(), object(), object())
    group = combine(*(redirect_attr(mod, name, name, scope=scope) for name in "abc"))
    handle = group.start()
    mod.b = "intruder"
    with warnings.catch_warnings():
        warnings.simplefilter("error", RedirectConflictWarning)
        with pytest.raises(RedirectConflictWarning, match=r"'b'.*'intruder'"):
            handle.stop()
    assert patchscope.active() == ()
    assert (mod.a, mod.b, mod.c) == originals
    assert [vars(mod)[name] for name in "abc"] == list(originals)


def test_a_group_that_cannot_be_entered_raises_why_not_what_its_undo_met() -> None:
    """A failing part undoes the others; a conflict met undoing them does not replace the error."""
    mod = types.ModuleType("m")
    mod.a = original = object()

    class Refusing(type):
        def __setattr__(cls, name: str, value: object) -> None:
            if name == "b":
                mod.a = "intruder"  # so undoing the first part meets a conflict
                raise AttributeError("read-only here")
            type.__setattr__(cls, name, value)

    class Target(metaclass=Refusing):
        b = 0

    group = combine(redirect_attr(mod, "a", 9), redirect_attr(Target, "b", 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RedirectConflictWarning)
        with pytest.raises(TargetNotWritableError, match="'b'"):
            group.start()
    assert patchscope.active() == ()
    assert mod.a is original and vars(Target)["b"] == 0


@pytest.mark.parametrize("how", ["start", "with"])
@pytest.mark.parametrize("scope", ["process", "context"])
def test_a_group_that_cannot_be_entered_reports_what_its_parts_overwrote(
    scope: str, how: str
) -> None:
    """A part that overwrote someone else's value warns, though a later part fails.

    Undoing the group puts back what was there before the intrusion, so the
    intruder's value is gone: as a single redirect's entry would, the
    group's says so, before the error of the part that failed (or, with
    warnings as errors, in its place: the parts are entered in order).
    """
    mod = types.ModuleType("m")
    mod.a = original = object()
    held = redirect_attr(mod, "a", "held").start()
    group = combine(redirect_attr(mod, "a", 1, scope=scope), redirect_attr(mod, "missing", 2))

    def enter() -> None:
        if how == "start":
            group.start()
        else:
            with group:
                pass

    mod.a = "intruder"
    with pytest.warns(RedirectConflictWarning, match=r"'a' was rebound to 'intruder'") as seen:
        with pytest.raises(AttributeMissingError, match="'missing'"):
            enter()
    assert len(seen) == 1 and seen[0].filename == __file__
    assert vars(mod)["a"] == "held"
    mod.a = "intruder again"
    with warnings.catch_warnings():
        warnings.simplefilter("error", RedirectConflictWarning)
        with pytest.raises(RedirectConflictWarning, match="'intruder again'"):
            enter()
    assert vars(mod)["a"] == "held"
    assert [a.replacement for a in patchscope.active()] == ["held"]
    held.stop()
    assert vars(mod)["a"] is original and patchscope.active() == ()


def test_restore_failure_raises_after_other_restores() -> None:
    """A failing restore does not stop the others; RestoreError comes after all ran."""

    class Lockable:
        locked = False

        def __setattr__(self, name: str, value: object) -> None:
            if type(self).locked:
                raise AttributeError("locked")
            object.__setattr__(self, name, value)

    obj = Lockable()
    obj.a = 1
    mod = types.ModuleType("m")
    mod.b = original_b = object()
    with pytest.raises(RestoreError) as info:
        with combine(redirect_attr(mod, "b", 2), redirect_attr(obj, "a", 2)):
            Lockable.locked = True
    assert mod.b is original_b
    assert len(info.value.errors) == 1
    assert "attribute 'a'" in str(info.value) and "Lockable" in str(info.value)
    assert patchscope.active() == ()


def test_combine_is_all_or_nothing() -> None:
    """If a later part fails to enter, the earlier parts are undone first."""
    mod = types.ModuleType("m")
    mod.a = original = object()
    with pytest.raises(AttributeMissingError):
        with combine(redirect_attr(mod, "a", 1), redirect_attr(mod, "missing", 2)):
            pass
    assert mod.a is original and patchscope.active() == ()


def test_combine_values_and_reverse_exit() -> None:
    """with combine(a, b) as (va, vb); parts end in reverse order."""
    mod = types.ModuleType("m")
    mod.a, mod.b = 1, 2
    with combine(redirect_attr(mod, "a", 10), redirect_attr(mod, "b", 20)) as values:
        assert values == (10, 20) and (mod.a, mod.b) == (10, 20)
    assert (mod.a, mod.b) == (1, 2)


class _OwnHandle:
    """A handle that ends through its own stop(), as a Redirect subclass may return."""

    def __init__(self, inner: object, log: list[str], label: str) -> None:
        self._inner, self._log, self._label = inner, log, label
        self.value = label
        self.activations = inner.activations  # type: ignore[attr-defined]
        self.thread_id = threading.get_ident()
        self._pushed, self._frame, self._live = False, None, True

    def stop(self) -> None:
        if self._live:
            self._live = False
            self._log.append(f"stop {self._label}")
        self._inner.stop()  # type: ignore[attr-defined]


class _OwnHandleRedirect(patchscope.Redirect):
    """A Redirect whose activation wraps another's handle in one of its own."""

    __slots__ = ("__weakref__", "_handles", "_inner", "_label", "_log")

    def __init__(self, inner: patchscope.Redirect, log: list[str], label: str) -> None:
        self._inner, self._log, self._label = inner, log, label
        self._handles: list[object] = []

    def _args(self) -> tuple[object, ...]:
        return (self._inner, self._log, self._label)

    def _activate(self, code: object, lasti: int) -> _OwnHandle:
        return _OwnHandle(self._inner._activate(code, lasti), self._log, self._label)  # type: ignore[attr-defined]


def test_combine_ends_parts_with_handles_of_their_own() -> None:
    """A part whose handle is its own ends through its stop(), in every form, nested too."""
    mod = types.ModuleType("m")
    mod.a, mod.b, mod.c = 1, 2, 3
    log: list[str] = []
    own = _OwnHandleRedirect(redirect_attr(mod, "b", 20, scope="context"), log, "own")
    makers = [
        lambda: combine(own),
        lambda: combine(redirect_attr(mod, "a", 10), own, redirect_attr(mod, "c", 30)),
        lambda: combine(combine(own), redirect_attr(mod, "c", 30)),
    ]
    for make in makers:
        with make():
            assert mod.b == 20 and len(patchscope.active()) >= 1
        handle = make().start()
        assert mod.b == 20
        handle.stop()
        handle.stop()

        @make()
        def read() -> int:
            return int(mod.b)

        assert read() == 20
        assert (mod.a, mod.b, mod.c) == (1, 2, 3) and patchscope.active() == ()
    assert log == ["stop own"] * 9


def test_combine_rejects_non_redirects() -> None:
    """combine() names what it was given."""
    with pytest.raises(TypeError, match="int"):
        combine(1)  # type: ignore[arg-type]


@pytest.mark.parametrize("scope", ["process", "context"])
def test_a_group_warns_after_every_part_is_entered(scope: str) -> None:
    """A group's conflict warnings come after all its parts are in place, in this context too."""
    mod = types.ModuleType("m")
    mod.a, mod.b = "a0", "b0"
    outer = redirect_attr(mod, "a", "outer").start()
    mod.a = "intruder"  # what entering the group's first part finds
    seen: list[tuple[object, object]] = []
    group = combine(
        redirect_attr(mod, "a", "A", scope=scope), redirect_attr(mod, "b", "B", scope=scope)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("always", RedirectConflictWarning)
        original_show = warnings.showwarning

        def record(*args: object, **kwargs: object) -> None:
            seen.append((mod.a, mod.b))

        warnings.showwarning = record  # type: ignore[assignment]
        try:
            with group:
                assert (mod.a, mod.b) == ("A", "B")
        finally:
            warnings.showwarning = original_show
    outer.stop()
    assert seen[0] == ("A", "B")  # the second part was in place when the first one warned
    assert (mod.a, mod.b) == ("a0", "b0") and patchscope.active() == ()


def test_core_runs_decides_how_a_group_is_entered() -> None:
    """Groups of fixed-target redirects are the core's; a part that activates itself is not."""
    from patchscope import _group

    mod = types.ModuleType("m")
    mod.a = 1
    fixed = redirect_attr(mod, "a", 2)
    path = redirect_attr("types.SimpleNamespace", "x", 1, create=True)
    late = patchscope.deferred(lambda: fixed)
    assert _group.core_runs(fixed) and _group.core_runs(combine(fixed, combine(fixed)))
    for own in (path, late, combine(fixed, late), combine(combine(path))):
        assert not _group.core_runs(own)
    assert type(combine(fixed)) is _group.Combined
    assert type(combine(fixed, late)) is _group.PartwiseCombined


@pytest.mark.parametrize("scope", ["process", "context"])
def test_a_group_warns_after_every_part_is_ended(scope: str) -> None:
    """Ending a group ends every part under one lock; its conflict warnings come after."""
    mod = types.ModuleType("m")
    mod.a, mod.b = "a0", "b0"
    group = combine(redirect_attr(mod, "a", "A", scope=scope), redirect_attr(mod, "b", "B"))
    seen: list[tuple[object, object]] = []
    for end in ("with", "stop"):
        with warnings.catch_warnings():
            warnings.simplefilter("always", RedirectConflictWarning)
            original_show = warnings.showwarning

            def record(*args: object, **kwargs: object) -> None:
                seen.append((mod.a, mod.b))

            warnings.showwarning = record  # type: ignore[assignment]
            try:
                if end == "with":
                    with group:
                        mod.b = "intruder"  # what ending the last part, the first ended, finds
                else:
                    handle = group.start()
                    mod.b = "intruder"
                    handle.stop()
            finally:
                warnings.showwarning = original_show
    assert seen == [("a0", "b0"), ("a0", "b0")]  # the first part was ended when the last warned
    assert patchscope.active() == ()


class _Refused(patchscope.Redirect):
    """A Redirect whose activation always fails."""

    __slots__ = ()

    def _args(self) -> tuple[object, ...]:
        return ()

    def _activate(self, code: object, lasti: int) -> object:
        raise ValueError("refused")


def test_a_group_whose_later_part_cannot_start_ends_the_parts_it_entered() -> None:
    """All or nothing with a part that activates itself: what was entered is ended, then raised."""
    mod = types.ModuleType("m")
    mod.a, mod.b = 1, 2
    group = combine(redirect_attr(mod, "a", 10), redirect_attr(mod, "b", 20), _Refused())
    for enter in ("start", "with"):
        with pytest.raises(ValueError, match="refused"):
            if enter == "start":
                group.start()
            else:
                with group:
                    pytest.fail("the body must not run")
        assert (mod.a, mod.b) == (1, 2)
        assert patchscope.active() == ()


def test_a_group_with_a_part_of_no_fixed_value_gives_each_activations_value() -> None:
    """A part whose value is made per activation (during's wrapper): ``with`` gives that one."""

    class Klass:
        def method(self) -> str:
            return "orig"

    mod = types.ModuleType("m")
    mod.a = 1
    holder = types.SimpleNamespace(x=1)
    group = combine(
        redirect_attr(mod, "a", 10),
        patchscope.during(Klass, "method", redirect_attr(holder, "x", 2)),
    )
    with group as values:
        assert values == (10, vars(Klass)["method"])
    handle = group.start()
    try:
        assert handle.value == (10, vars(Klass)["method"])
    finally:
        handle.stop()
    assert mod.a == 1 and patchscope.active() == ()


def test_core_runs_fixed_target_redirects_and_groups_of_them_only() -> None:
    """The one test of which redirects the core enters itself (one lock section for a whole
    group; the decorators' C guards): fixed-target redirects of either scope, constructions,
    and groups made only of such; not deferred, during, dotted paths or groups holding them."""
    from patchscope._group import core_runs

    mod = types.ModuleType("core_runs_target")
    mod.a, mod.b = 1, 2

    class K:
        def method(self) -> None:
            pass

    single = redirect_attr(mod, "a", 10)
    runs = [
        single,
        redirect_attr(mod, "a", 10, scope="context"),
        patchscope.redirect_construction(K, K),
        combine(single, redirect_attr(mod, "b", 20)),
    ]
    not_runs = [
        patchscope.deferred(lambda: single),
        patchscope.during(K, "method", single),
        redirect_attr("os.sep", "/"),
        combine(single, patchscope.deferred(lambda: None)),
    ]
    assert [core_runs(r) for r in runs] == [True] * len(runs)
    assert [core_runs(r) for r in not_runs] == [False] * len(not_runs)
    assert type(combine(single, redirect_attr(mod, "b", 20))).__name__ == "Combined"
