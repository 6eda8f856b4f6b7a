"""The registry's orchestration (patchscope._registry): its lock sections and all-or-nothing entry.

Run in both builds (see test_accel).
"""

from __future__ import annotations

import sys
import threading
import types

import pytest
from _targets import FailingWrites
from _threads import in_other_thread

import patchscope
from patchscope import _registry
from patchscope._resolve import describe as _describe


class _Lock:
    """A re-entrant lock that counts its holds; *interrupt* raises after one acquire."""

    def __init__(self) -> None:
        self.inner = threading.Lock()
        self.count = 0
        self.interrupt = False

    def acquire(self) -> bool:
        if not self.count:
            self.inner.acquire()
        self.count += 1
        if self.interrupt:
            raise KeyboardInterrupt  # what CPython 3.14's gap can do after the acquire
        return True

    def release(self) -> None:
        self.count -= 1
        if not self.count:
            self.inner.release()

    def _recursion_count(self) -> int:
        return self.count


@pytest.mark.parametrize("held", [0, 1])
def test_a_section_never_keeps_a_hold_its_entry_was_interrupted_in(held: int) -> None:
    lock = _Lock()
    for _ in range(held):  # an outer section's hold stays
        lock.acquire()
    lock.interrupt = True
    with pytest.raises(KeyboardInterrupt):
        with _registry._Section(lock):
            pytest.fail("the body must not run")
    assert lock.count == held


def test_the_python_twins_take_the_lock_through_a_section_on_3_14_only() -> None:
    """On 3.14 (the with-entry gap) the twins take the lock through a _Section; else directly."""
    if sys.version_info[:2] == (3, 14):
        assert isinstance(_registry.section, _registry._Section)
        assert _registry.section.lock is _registry.lock
    else:
        assert _registry.section is _registry.lock


def test_a_section_takes_and_gives_back_its_lock() -> None:
    lock = _Lock()
    with _registry._Section(lock):
        assert lock.count == 1
    assert lock.count == 0


@pytest.mark.parametrize("form", ["with", "start"])
@pytest.mark.parametrize("scope", ["process", "context"])
def test_an_entry_whose_warning_is_an_error_leaves_nothing_behind(form: str, scope: str) -> None:
    """A conflict warning turned into an error on entry: raised, and the entry undone."""
    mod = types.ModuleType("m")
    mod.attr = "orig"
    outer = patchscope.redirect_attr(mod, "attr", "outer", scope="process")
    inner = patchscope.redirect_attr(mod, "attr", "inner", scope=scope)
    with outer:
        mod.attr = "someone else's"  # the inner entry finds a conflict
        with pytest.raises(patchscope.RedirectConflictWarning):  # an error in this suite
            if form == "with":
                with inner:
                    pytest.fail("the body must not run")
            else:
                inner.start()
        assert [a.replacement for a in patchscope.active()] == ["outer"]
        assert type(mod) is types.ModuleType
        assert mod.attr == "outer"  # what the live activations say, shown again
    assert mod.attr == "orig"
    assert patchscope.active() == ()


def test_a_during_whose_warning_is_an_error_leaves_nothing_behind() -> None:
    """The same for during(): its wrapper does not stay on the method."""

    class Klass:
        def method(self) -> str:
            return "orig"

    own = vars(Klass)["method"]
    holder = types.SimpleNamespace(x=1)
    wrapped = patchscope.during(Klass, "method", patchscope.redirect_attr(holder, "x", 2))
    with patchscope.redirect_attr(Klass, "method", lambda self: "outer"):
        Klass.method = lambda self: "someone else's"  # type: ignore[method-assign]
        with pytest.raises(patchscope.RedirectConflictWarning):  # an error in this suite
            wrapped.start()
        assert len(patchscope.active()) == 1
        assert Klass().method() == "outer"  # what the live activation says, shown again
    assert vars(Klass)["method"] is own
    assert patchscope.active() == ()


def test_exclusive_holds_other_threads_redirects_until_its_block_ends() -> None:
    """No activation starts in another thread while exclusive()'s block runs; it does after."""
    target = types.ModuleType("exclusive_target")
    target.attr = "original"
    started = threading.Event()
    entered = threading.Event()

    def other() -> None:
        started.set()
        with patchscope.redirect_attr(target, "attr", "other"):
            entered.set()

    with patchscope.exclusive():
        thread = threading.Thread(target=other)
        thread.start()
        assert started.wait(60)
        # The other thread is blocked on the registry's lock, not merely slow:
        # it cannot get in for as long as the block runs.
        assert not entered.wait(0.2)
        assert patchscope.active() == ()
        with patchscope.redirect_attr(target, "attr", "mine"):  # re-entrant in this thread
            assert target.attr == "mine"
    thread.join(60)
    assert not thread.is_alive()
    assert entered.is_set()
    assert target.attr == "original"


def test_an_entry_left_empty_is_cleared_by_the_next_entry_even_one_that_fails() -> None:
    """An exit interrupted after it unregistered its activation leaves an empty entry; the
    next entry on that attribute drops it, also when it then fails, keeping nothing alive."""
    import gc
    import weakref

    from patchscope import _entry

    mod = types.ModuleType("m")
    handle = patchscope.redirect_attr(mod, "extra", 1, create=True).start()
    entry = handle._entry  # type: ignore[union-attr]
    with _registry.section:  # what the interrupted exit got done
        handle.open = False
        _entry.show(entry)
        entry.stack.remove(handle)
    key = (id(mod), "extra")
    assert key in _registry.entries and not hasattr(mod, "extra")
    with pytest.raises(patchscope.AttributeMissingError):
        patchscope.redirect_attr(mod, "extra", 2).start()  # create=False: the name is gone
    assert key not in _registry.entries and patchscope.active() == ()
    ref = weakref.ref(mod)
    del mod, handle, entry
    gc.collect()
    assert ref() is None


@pytest.mark.parametrize("form", ["with", "stop"])
def test_one_failed_restore_is_raised_with_its_own_message_from_its_error(form: str) -> None:
    """One redirect whose restore fails: its message names the attribute, chained from the error."""
    obj = FailingWrites(a=1)
    error = AttributeError("locked a")
    redirect = patchscope.redirect_attr(obj, "a", 10)
    with pytest.raises(patchscope.RestoreError) as info:
        if form == "with":
            with redirect:
                obj.fail("a", error)
        else:
            handle = redirect.start()
            obj.fail("a", error)
            handle.stop()
    assert str(info.value) == f"restoring attribute 'a' of {_describe(obj)} failed: locked a"
    assert info.value.errors == [error]
    assert info.value.__cause__ is error
    assert patchscope.active() == ()


def test_one_failed_restore_of_a_group_is_counted() -> None:
    """A group's end with one failed restore: the message counts it, and names it."""
    obj = FailingWrites(a=1)
    mod = types.ModuleType("m")
    mod.b = 2
    error = AttributeError("locked a")
    handle = patchscope.combine(
        patchscope.redirect_attr(obj, "a", 10), patchscope.redirect_attr(mod, "b", 20)
    ).start()
    obj.fail("a", error)
    with pytest.raises(patchscope.RestoreError) as info:
        handle.stop()
    message = f"restoring attribute 'a' of {_describe(obj)} failed: locked a"
    assert str(info.value) == "1 restore(s) failed: " + message
    assert info.value.errors == [error]
    assert vars(mod)["b"] == 2 and patchscope.active() == ()


@pytest.mark.parametrize("order", ["process first", "context first"])
def test_a_group_of_both_scopes_shows_every_part(order: str) -> None:
    """A process-scope part entered beside a context-scope one: both are seen, and both end."""
    mod = types.ModuleType("m")
    mod.a, mod.b = 1, 2
    parts = [
        patchscope.redirect_attr(mod, "a", 10, scope="process"),
        patchscope.redirect_attr(mod, "b", 20, scope="context"),
    ]
    if order == "context first":
        parts.reverse()
    with patchscope.combine(*parts):
        assert (mod.a, mod.b) == (10, 20)
        # The process part in every thread, the context part here only.
        assert in_other_thread(lambda: (mod.a, mod.b)) == (10, 2)
    assert (mod.a, mod.b) == (1, 2) and patchscope.active() == ()


def test_ending_another_contexts_activation_writes_nothing_in_this_context() -> None:
    """A context activation stopped from another thread is not in that thread's context:
    the activations listed there stay the same object (no write), and its own go on."""
    from patchscope import _slots

    mod = types.ModuleType("m")
    mod.a, mod.b = 1, 1
    elsewhere = in_other_thread(
        lambda: patchscope.redirect_attr(mod, "a", 2, scope="context").start()
    )
    with patchscope.redirect_attr(mod, "b", 2, scope="context"):
        before = _slots.ACTIVATIONS.get()
        elsewhere.stop()
        assert _slots.ACTIVATIONS.get() is before
        assert (mod.a, mod.b) == (1, 2)
    assert patchscope.active() == ()
