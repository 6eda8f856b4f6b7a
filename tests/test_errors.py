"""patchscope._errors: the exception hierarchy, each class's bases, and what the messages say."""

from __future__ import annotations

import pickle
import threading
import types
import warnings
from collections.abc import Callable

import pytest

import patchscope
from patchscope import (
    AttributeMissingError,
    PatchscopeError,
    RedirectConflictWarning,
    RestoreError,
    TargetNotWritableError,
    TargetResolutionError,
    UnsupportedTargetError,
    redirect_attr,
    redirect_construction,
)

# Each class and its bases, as the module docstrings document them: the
# package's base first, then the builtin the same mistake raises without it.
BASES: dict[type[BaseException], tuple[type, ...]] = {
    PatchscopeError: (Exception,),
    TargetResolutionError: (PatchscopeError, ImportError),
    AttributeMissingError: (PatchscopeError, AttributeError),
    TargetNotWritableError: (PatchscopeError, TypeError),
    UnsupportedTargetError: (PatchscopeError, TypeError),
    RestoreError: (PatchscopeError,),
    RedirectConflictWarning: (UserWarning,),
}


@pytest.mark.parametrize("cls", list(BASES), ids=lambda c: c.__name__)
def test_each_class_has_the_documented_bases(cls: type[BaseException]) -> None:
    """Every exception and warning derives from exactly the bases its docstring names."""
    assert cls.__bases__ == BASES[cls]
    assert cls.__module__ == "patchscope._errors"
    assert getattr(patchscope, cls.__name__) is cls
    assert cls.__doc__ and cls.__doc__.strip()


def test_every_error_is_a_patchscope_error_and_the_warning_is_not() -> None:
    """``except PatchscopeError`` catches every error class; the conflict warning is not one."""
    errors = [cls for cls in BASES if cls is not RedirectConflictWarning]
    assert all(issubclass(cls, PatchscopeError) for cls in errors)
    assert not issubclass(RedirectConflictWarning, PatchscopeError)
    assert not issubclass(RestoreError, (ImportError, AttributeError, TypeError))


def test_restore_error_keeps_its_message_and_errors_in_order() -> None:
    """RestoreError's str is its message and ``errors`` is the very list passed, in order."""
    first, second = ValueError("one"), KeyError("two")
    errors: list[BaseException] = [first, second]
    exc = RestoreError("2 restore(s) failed", errors)
    assert str(exc) == "2 restore(s) failed"
    assert exc.args == ("2 restore(s) failed",)
    assert exc.errors is errors and exc.errors == [first, second]


def test_an_error_may_be_handed_to_another_thread() -> None:
    """An error raised in one thread keeps its message and errors when read in another."""
    inner = AttributeError("locked")
    exc = RestoreError("1 restore(s) failed", [inner])
    seen: list[tuple[str, list[BaseException]]] = []
    thread = threading.Thread(target=lambda: seen.append((str(exc), exc.errors)))
    thread.start()
    thread.join(60)
    assert not thread.is_alive()
    assert seen == [("1 restore(s) failed", [inner])]


def test_restore_error_survives_pickling() -> None:
    """A RestoreError crosses a process boundary with its message and errors."""
    exc = RestoreError("1 restore(s) failed", [ValueError("v")])
    copy = pickle.loads(pickle.dumps(exc))
    assert str(copy) == str(exc) and [str(e) for e in copy.errors] == ["v"]


class _Plain:
    """An instance target: context scope refuses it."""

    x = 0


def _bad_inputs() -> list[tuple[str, Callable[[], object], type[BaseException], type, list[str]]]:
    """(id, what fails, class raised, builtin that also catches it, text the message names)."""
    obj = _Plain()
    obj.x = 1
    module = types.ModuleType("errors_target")
    module.present = 1
    return [
        (
            "path",
            lambda: redirect_attr("json.no_such_thing", "x", 1).start(),
            TargetResolutionError,
            ImportError,
            ["'json.no_such_thing'", "'no_such_thing'"],
        ),
        (
            "missing",
            lambda: redirect_attr(module, "absent", 1).start(),
            AttributeMissingError,
            AttributeError,
            ["'errors_target'", "'absent'", "create=True"],
        ),
        (
            "immutable",
            lambda: redirect_attr(int, "real", 1).start(),
            TargetNotWritableError,
            TypeError,
            ["<class 'builtins.int'>", "'real'", "redirect the attribute where it is defined"],
        ),
        (
            "construction",
            lambda: redirect_construction(int, dict).start(),
            TargetNotWritableError,
            TypeError,
            ["<class 'builtins.int'>", "redirect_attr()"],
        ),
        (
            "scope",
            lambda: redirect_attr(obj, "x", 2, scope="context").start(),
            UnsupportedTargetError,
            TypeError,
            ["_Plain object", "'x'", "scope='context'", "scope='process'"],
        ),
    ]


@pytest.mark.parametrize("case", _bad_inputs(), ids=lambda c: c[0])
def test_each_error_names_target_and_attribute_and_the_fix(
    case: tuple[str, Callable[[], object], type[BaseException], type, list[str]],
) -> None:
    """Bad input raises its documented class, caught by its builtin too, naming what to fix."""
    _, fail, cls, builtin, names = case
    with pytest.raises(builtin) as info:  # existing ``except <builtin>`` code still catches it
        fail()
    assert type(info.value) is cls and isinstance(info.value, PatchscopeError)
    message = str(info.value)
    for text in names:
        assert text in message, (text, message)
    assert patchscope.active() == ()


def test_conflict_warning_names_target_attribute_and_value_found() -> None:
    """The conflict warning says which target and attribute were rebound, and to what."""
    mod = types.ModuleType("conflict_target")
    mod.value = 1
    with pytest.warns(RedirectConflictWarning) as record:
        with redirect_attr(mod, "value", 2):
            mod.value = "intruder"
    (warning,) = record
    message = str(warning.message)
    assert "'conflict_target'" in message and "'value'" in message and "'intruder'" in message
    assert mod.value == 1


def test_conflict_warning_is_a_warning_not_error_by_default() -> None:
    """RedirectConflictWarning is a UserWarning; a clean redirect issues none of it."""
    assert issubclass(RedirectConflictWarning, UserWarning)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mod = types.ModuleType("m")
        mod.v = 1
        with redirect_attr(mod, "v", 2):
            pass
