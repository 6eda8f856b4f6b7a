"""The core's objects carry no instance ``__dict__``, in both builds (the C types too).

Redirects, activations, group handles, entries, slots and dispatchers are
made per redirect, per activation or per redirected name, and read on every
access of a redirected attribute: each class declares ``__slots__`` (its
subclasses too, or they get a ``__dict__`` back), so an instance holds what
its fields hold and nothing more, and a misspelt field is an error. The few
classes with a dictionary are listed here with the reason.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import types

import pytest

import patchscope
from patchscope import _accel

#: The core: every private module of the package (a new one is checked as it lands); the C
#: extension's types are taken below, where the build uses them.
CORE = sorted(
    info.name
    for info in pkgutil.iter_modules(patchscope.__path__)
    if info.name.startswith("_")
    and not info.name.startswith("__")
    and not info.ispkg
    and info.name != "_speedups"
)

#: Classes whose instances do have a ``__dict__``, and why.
WITH_DICT = {
    "_resolve._Absent": "an enum: its one member is made at import",
    "_resolve._OnePath": "an enum: its one member is made at import",
    "_decorate._Wrapper": "a wrapt FunctionWrapper, which keeps the wrapped object's attributes",
    "_slots._PyDispatcher": "one per class, not per activation: the __new__ installed on it "
    "carries a function's __name__, __qualname__, __module__, __doc__ and __signature__",
    "_speedups.Dispatcher": "the C twin of _slots._PyDispatcher, for the same reason",
    "_speedups.AttrFactory": "one, redirect_attr itself: it carries the Python function's "
    "__doc__, __signature__ and __wrapped__",
}


def _classes() -> list[tuple[str, type]]:
    found = []
    for name in CORE:
        module = importlib.import_module(f"patchscope.{name}")
        for attr, value in vars(module).items():
            if (
                inspect.isclass(value)
                and value.__module__ == module.__name__
                and not issubclass(value, BaseException)  # exceptions carry a __dict__
            ):
                found.append((f"{name}.{attr}", value))
    for attr, value in vars(_accel.speedups or types.ModuleType("none")).items():
        if inspect.isclass(value) and not issubclass(value, BaseException):
            found.append((f"_speedups.{attr}", value))  # the C twins, where they are built
    return found


@pytest.mark.parametrize(("where", "cls"), _classes(), ids=[w for w, _ in _classes()])
def test_core_objects_have_no_instance_dict(where: str, cls: type) -> None:
    """Instances of each core class have no ``__dict__``, save the listed exceptions and the
    classes made from them (a twin's public name, in pure Python)."""
    listed = {f"{k.__module__.removeprefix('patchscope.')}.{k.__qualname__}" for k in cls.__mro__}
    assert (cls.__dictoffset__ != 0) == bool(listed & set(WITH_DICT)), where


def test_the_exceptions_are_still_core_classes() -> None:
    """Every listed exception names a class that exists (a renamed one would pass unseen)."""
    names = {where for where, _ in _classes()}
    built = _accel.speedups is not None
    missing = {w for w in WITH_DICT if w not in names and (built or "_speedups." not in w)}
    assert not missing
