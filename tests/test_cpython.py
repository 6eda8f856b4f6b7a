"""patchscope._cpython: the tp_new slot CPython leaves behind when ``__new__`` is deleted.

These call the module's functions directly, so they run against the C
accelerator's twins of ``preset_new``/``repair_new`` in the accelerated build
and against the ctypes writer with ``PATCHSCOPE_PURE_PYTHON=1``.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

import pytest

from patchscope._cpython import (
    OBJECT_NEW_STANDIN,
    delete_new,
    inherits_object_new,
    object_new,
    preset_new,
    repair_new,
)

cpython_only = pytest.mark.skipif(
    sys.implementation.name != "cpython", reason="the tp_new slot is CPython's"
)


def _own_new(cls: type, *args: Any, **kwargs: Any) -> Any:
    """A Python ``__new__`` that builds through object's."""
    return object.__new__(cls)


def _takes_arg() -> type:
    """A fresh class that inherits object.__new__ and takes one argument."""

    class TakesArg:
        def __init__(self, x: int) -> None:
            self.x = x

    return TakesArg


@cpython_only
def test_cpython_keeps_the_generic_slot_after_deleting_new() -> None:
    """The premise: without help, set-then-delete ``__new__`` breaks construction with arguments."""
    cls = _takes_arg()
    cls.__new__ = staticmethod(_own_new)  # type: ignore[assignment]
    del cls.__new__
    with pytest.raises(TypeError, match="takes exactly one argument"):
        cls(1)


def test_delete_new_leaves_a_class_that_inherits_object_new_as_before() -> None:
    """After delete_new the class and its subclasses construct with arguments, with no residue."""
    cls = _takes_arg()
    sub = type("Sub", (cls,), {})
    cls.__new__ = staticmethod(_own_new)  # type: ignore[assignment]
    delete_new(cls)
    assert "__new__" not in vars(cls) and inherits_object_new(cls)
    assert cls(1).x == 1 and sub(2).x == 2
    assert type(sub(3)) is sub


@pytest.mark.parametrize(
    ("base", "args", "expected"),
    [(dict, ({"a": 1},), {"a": 1}), (list, ([1, 2],), [1, 2]), (int, (7,), 7), (str, ("s",), "s")],
    ids=lambda v: getattr(v, "__name__", None),
)
def test_delete_new_gives_a_builtin_subclass_its_builtins_new_back(
    base: type, args: tuple[Any, ...], expected: object
) -> None:
    """A dict/list/int/str subclass constructs as the builtin does once ``__new__`` is gone."""
    cls = type("Builtin", (base,), {})
    grandchild = type("Grandchild", (cls,), {})
    cls.__new__ = staticmethod(lambda c, *a, **k: base.__new__(c))  # type: ignore[assignment]
    delete_new(cls)
    assert "__new__" not in vars(cls)
    for klass in (cls, grandchild):
        built = klass(*args)
        assert type(built) is klass and built == expected


def test_delete_new_leaves_subclasses_with_a_new_of_their_own_alone() -> None:
    """A subclass with its own ``__new__`` keeps it; one with another base's follows that base."""
    cls = _takes_arg()
    calls: list[type] = []

    class Own(cls):  # type: ignore[valid-type,misc]
        def __new__(klass, *args: Any) -> Any:
            calls.append(klass)
            return object.__new__(klass)

    class Mixin:
        def __new__(klass, *args: Any) -> Any:
            calls.append(Mixin)
            return object.__new__(klass)

    class Mixed(cls, Mixin):  # type: ignore[valid-type,misc]
        pass

    cls.__new__ = staticmethod(_own_new)  # type: ignore[assignment]
    delete_new(cls)
    assert Own(1).x == 1 and Mixed(2).x == 2 and cls(3).x == 3
    assert calls == [Own, Mixin]


def test_delete_new_falls_back_to_a_python_new_of_a_base() -> None:
    """Deleting a ``__new__`` that shadowed an inherited Python ``__new__`` falls back to it."""
    seen: list[str] = []

    class Base:
        def __new__(cls, *args: Any) -> Any:
            seen.append("base")
            return object.__new__(cls)

        def __init__(self, x: int) -> None:
            self.x = x

    class Child(Base):
        pass

    Child.__new__ = staticmethod(_own_new)  # type: ignore[assignment]
    assert preset_new(Child) is False  # not a builtin's __new__ that follows
    delete_new(Child)
    assert Child(1).x == 1 and seen == ["base"]


def test_delete_new_keeps_the_class_working_where_no_slot_can_be_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where neither preset nor repair is possible, a stand-in behaves as object.__new__."""
    import patchscope._cpython as cpython

    monkeypatch.setattr(cpython, "preset_new", lambda cls: False)
    monkeypatch.setattr(cpython, "repair_new", lambda cls: False)
    cls = _takes_arg()
    cls.__new__ = staticmethod(_own_new)  # type: ignore[assignment]
    delete_new(cls)
    assert vars(cls)["__new__"] is OBJECT_NEW_STANDIN
    assert cls(1).x == 1


@cpython_only
def test_repair_new_gives_object_tp_new_back_to_the_class_and_its_subclasses() -> None:
    """After a plain ``del``, repair_new makes the class and its followers (theirs too) take
    arguments again."""
    cls = _takes_arg()
    sub = type("Sub", (cls,), {})
    grand = type("Grand", (sub,), {})
    cls.__new__ = staticmethod(_own_new)  # type: ignore[assignment]
    del cls.__new__
    with pytest.raises(TypeError):
        sub(1)
    with pytest.raises(TypeError):
        grand(1)
    assert repair_new(cls) is True
    assert cls(1).x == 1 and sub(2).x == 2 and grand(4).x == 4
    assert repair_new(cls) is True  # nothing left to do: still fine
    assert cls(3).x == 3


@cpython_only
def test_repair_new_skips_subclasses_that_do_not_inherit_object_new() -> None:
    """A subclass with its own ``__new__`` keeps it through a repair of its base."""
    cls = _takes_arg()

    class Own(cls):  # type: ignore[valid-type,misc]
        def __new__(klass, *args: Any) -> Any:
            instance = object.__new__(klass)
            instance.tag = "own"
            return instance

    cls.__new__ = staticmethod(_own_new)  # type: ignore[assignment]
    del cls.__new__
    assert repair_new(cls) is True
    built = Own(1)
    assert built.tag == "own" and built.x == 1 and cls(2).x == 2


@cpython_only
def test_preset_new_prepares_the_slot_so_a_plain_delete_is_safe() -> None:
    """preset_new before ``del`` leaves class and inheriting subclasses constructing as before."""
    cls = _takes_arg()
    sub = type("Sub", (cls,), {})
    cls.__new__ = staticmethod(_own_new)  # type: ignore[assignment]
    assert preset_new(cls) is True
    assert cls(1).x == 1  # still goes through the class's __new__ until it is deleted
    del cls.__new__
    assert cls(2).x == 2 and sub(3).x == 3


@cpython_only
def test_preset_new_leaves_a_subclass_whose_next_new_is_a_python_one_alone() -> None:
    """A subclass that inherits the deleted ``__new__`` but has a Python ``__new__`` after
    the class in its MRO (a mixin's) is not given a builtin's slot: it builds through the
    mixin's once the class's is gone."""
    cls = _takes_arg()
    built: list[type] = []

    class Mixin:
        def __new__(klass, *args: Any, **kwargs: Any) -> Any:
            built.append(klass)
            return object.__new__(klass)

    sub = type("Sub", (cls, Mixin), {})
    cls.__new__ = staticmethod(_own_new)  # type: ignore[assignment]
    assert preset_new(cls) is True
    # Until the delete, both still build through the class's own __new__.
    assert cls(1).x == 1 and sub(2).x == 2 and built == []
    del cls.__new__
    assert cls(3).x == 3 and built == []
    assert sub(4).x == 4 and built == [sub]


@cpython_only
def test_other_threads_construct_with_arguments_throughout_a_delete() -> None:
    """While delete_new runs again and again, constructions in another thread never fail."""
    cls = _takes_arg()
    stop = threading.Event()
    started = threading.Event()
    failures: list[BaseException] = []

    def construct() -> None:
        started.set()
        while not stop.is_set():
            try:
                assert cls(1).x == 1
            except BaseException as exc:
                failures.append(exc)
                return

    worker = threading.Thread(target=construct)
    worker.start()
    assert started.wait(60)
    try:
        for _ in range(2000):
            cls.__new__ = staticmethod(_own_new)  # type: ignore[assignment]
            delete_new(cls)
    finally:
        stop.set()
        worker.join(60)
    assert not worker.is_alive()
    assert failures == []


def test_inherits_object_new() -> None:
    """True only where ``__new__`` resolves to object's own."""
    assert inherits_object_new(_takes_arg()) is True
    assert inherits_object_new(type("D", (dict,), {})) is False
    cls = _takes_arg()
    cls.__new__ = staticmethod(_own_new)  # type: ignore[assignment]
    assert inherits_object_new(cls) is False


@pytest.mark.parametrize(
    ("raw", "owner"),
    [
        (object.__new__, object),
        (dict.__new__, dict),
        (type("D", (dict,), {}).__new__, dict),
        (int.from_bytes, None),  # a builtin bound to a type, but not its __new__
        (len, None),  # a builtin bound to a module
        (_own_new, None),  # a Python function
    ],
    ids=["object", "dict", "dict-subclass", "classmethod", "module-builtin", "python"],
)
def test_builtin_owner_names_the_type_whose_own_new_it_is(raw: object, owner: type | None) -> None:
    """Only a builtin ``__new__`` has an owner whose tp_new a delete can give back."""
    from patchscope._cpython import _builtin_owner

    assert _builtin_owner(raw) is owner


class _NoInit:
    """Keeps object's ``__init__``."""


class _WithInit:
    """Overrides ``__init__``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args, self.kwargs = args, kwargs


def test_object_new_behaves_as_object_new_does_through_type_call() -> None:
    """object_new builds the class; arguments are refused exactly when ``__init__`` is object's."""
    with pytest.raises(TypeError) as plain:
        _NoInit(1)  # what CPython says without any __new__ in the class
    with pytest.raises(TypeError) as ours:
        object_new(_NoInit, 1)
    assert str(ours.value) == str(plain.value) == "_NoInit() takes no arguments"
    with pytest.raises(TypeError, match=r"_NoInit\(\) takes no arguments"):
        object_new(_NoInit, key=1)
    assert type(object_new(_NoInit)) is _NoInit
    assert type(object_new(_WithInit, 1, key=2)) is _WithInit


def test_the_stand_in_constructs_like_a_class_without_new() -> None:
    """A class given OBJECT_NEW_STANDIN as ``__new__`` constructs and refuses as it did before."""
    with_init = type("WithInit", (_WithInit,), {"__new__": OBJECT_NEW_STANDIN})
    built = with_init(1, key=2)
    assert type(built) is with_init and built.args == (1,) and built.kwargs == {"key": 2}
    no_init = type("NoInit", (), {"__new__": OBJECT_NEW_STANDIN})
    assert type(no_init()) is no_init
    with pytest.raises(TypeError, match=r"NoInit\(\) takes no arguments"):
        no_init(1)


def test_no_slot_writer_where_the_c_api_cannot_be_reached(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without PyType_GetSlot (another runtime, a stripped build) the slot is not located."""
    import ctypes

    import patchscope._cpython as cpython

    monkeypatch.setattr(ctypes, "pythonapi", object())
    assert cpython._locate() is None


def test_the_python_twins_do_nothing_where_the_slot_was_not_found(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With no slot writer, preset and repair say False and leave the class as it is."""
    import patchscope._cpython as cpython

    monkeypatch.setattr(cpython, "_slot_writer", lambda: None)
    cls = _takes_arg()
    assert cpython._py_preset_new(cls) is False
    assert cpython._py_repair_new(cls) is False
    assert "__new__" not in vars(cls) and cls(1).x == 1
