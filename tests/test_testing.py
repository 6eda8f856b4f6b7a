"""Tests of patchscope.testing: snapshots."""

from __future__ import annotations

import subprocess
import sys
import types
from unittest import mock

import pytest

from patchscope.testing import ABSENT, Difference, snapshot


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
