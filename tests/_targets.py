"""Factories of fresh redirect targets of every kind, shared by the test modules."""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class Case:
    """A target, the attribute to redirect, and how to read it back."""

    kind: str
    target: Any
    name: str
    create: bool = False

    def raw(self) -> dict[str, Any]:
        """A copy of the target's raw attribute dictionary."""
        return dict(vars(self.target))


class FailingWrites:
    """An instance target whose writes are logged (into *log*, if given) and can be made to
    fail per attribute: a write, or a restore, that raises."""

    def __init__(self, log: list[str] | None = None, **values: object) -> None:
        object.__setattr__(self, "_log", [] if log is None else log)
        object.__setattr__(self, "_fail", {})
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def fail(self, name: str, error: BaseException) -> None:
        """Make every later write of *name* raise *error*."""
        self._fail[name] = error  # type: ignore[attr-defined]

    def __setattr__(self, name: str, value: object) -> None:
        self._log.append(name)  # type: ignore[attr-defined]
        if name in self._fail:  # type: ignore[attr-defined]
            raise self._fail[name]  # type: ignore[attr-defined]
        object.__setattr__(self, name, value)


def _module() -> Case:
    mod = types.ModuleType("fake_mod")
    mod.value = object()
    return Case("module", mod, "value")


def _class_attr() -> Case:
    class C:
        value = object()

    return Case("class", C, "value")


def _staticmethod() -> Case:
    class C:
        @staticmethod
        def value() -> int:
            return 1

    return Case("staticmethod", C, "value")


def _classmethod() -> Case:
    class C:
        @classmethod
        def value(cls) -> str:
            return cls.__name__

    return Case("classmethod", C, "value")


def _property() -> Case:
    class C:
        @property
        def value(self) -> int:
            return 1

    return Case("property", C, "value")


def _inherited() -> Case:
    class Base:
        value = object()

    class Sub(Base):
        pass

    return Case("inherited", Sub, "value")


def _instance() -> Case:
    class C:
        pass

    obj = C()
    obj.value = object()
    return Case("instance", obj, "value")


def _module_getattr() -> Case:
    mod = types.ModuleType("lazy_mod")
    served = object()

    def __getattr__(name: str) -> object:
        if name == "value":
            return served
        raise AttributeError(name)

    mod.__getattr__ = __getattr__  # type: ignore[method-assign]
    return Case("module __getattr__", mod, "value")


def _absent() -> Case:
    mod = types.ModuleType("empty_mod")
    return Case("absent, create=True", mod, "value", create=True)


FACTORIES: dict[str, Callable[[], Case]] = {
    "module": _module,
    "class": _class_attr,
    "staticmethod": _staticmethod,
    "classmethod": _classmethod,
    "property": _property,
    "inherited": _inherited,
    "instance": _instance,
    "module __getattr__": _module_getattr,
    "absent": _absent,
}
#: kinds that scope="context" supports (module and class attributes)
CONTEXT_KINDS = [
    "module",
    "class",
    "staticmethod",
    "classmethod",
    "property",
    "inherited",
    "module __getattr__",
    "absent",
]
