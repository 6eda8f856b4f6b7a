"""patchscope._resolve: dotted paths, raw lookups along the MRO, and how targets are named."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchscope import TargetResolutionError
from patchscope._resolve import describe, is_data_descriptor, resolve


class _Repr:
    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


class _BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


@pytest.fixture
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder first on sys.path whose modules are forgotten after the test."""
    monkeypatch.syspath_prepend(str(tmp_path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        del sys.modules[name]


def test_describe_keeps_a_repr_of_80_characters() -> None:
    """A repr of up to 80 characters is shown whole."""
    assert describe(_Repr("x" * 80)) == "x" * 80


def test_describe_cuts_a_longer_repr_to_80_characters() -> None:
    """A repr of 81 characters is cut to its first 77 characters and an ellipsis."""
    text = "0123456789" * 8 + "X"
    assert describe(_Repr(text)) == text[:77] + "..."


def test_describe_falls_back_when_repr_raises() -> None:
    """An object whose repr raises is named by its type and address."""
    target = _BadRepr()
    assert describe(target) == f"<_BadRepr object at {id(target):#x}>"


def test_resolve_returns_a_non_string_target_itself() -> None:
    """A target that is not a string is the object itself."""
    target = object()
    assert resolve(target) is target


@pytest.mark.parametrize("path", ["os..path", ".os", "os.", "os.1path", ""])
def test_resolve_rejects_what_is_not_a_dotted_path(path: str) -> None:
    """A string that is not identifiers joined by dots is refused, naming it."""
    with pytest.raises(TargetResolutionError, match="is not a dotted path of identifiers"):
        resolve(path)


def test_resolve_names_a_missing_top_level_module() -> None:
    """A path whose first part imports nothing says which module is missing."""
    with pytest.raises(TargetResolutionError, match="no module named 'patchscope_no_such_mod'"):
        resolve("patchscope_no_such_mod")
    with pytest.raises(TargetResolutionError, match="no module named 'patchscope_no_such_mod'"):
        resolve("patchscope_no_such_mod.attr")


def test_resolve_reports_a_module_whose_own_import_fails(modules: Path) -> None:
    """A module that exists but imports a missing one is reported, not skipped."""
    (modules / "ps_needs_missing.py").write_text("import ps_missing_dependency\n")
    with pytest.raises(
        TargetResolutionError,
        match=re.escape(
            "importing 'ps_needs_missing.attr' failed: No module named 'ps_missing_dependency'"
        ),
    ):
        resolve("ps_needs_missing.attr")


def test_resolve_takes_an_unnamed_module_not_found_as_the_module_missing(modules: Path) -> None:
    """A ModuleNotFoundError without a module name counts as the path's module missing."""
    (modules / "ps_unnamed_missing.py").write_text("raise ModuleNotFoundError('gone')\n")
    with pytest.raises(TargetResolutionError, match="no module named 'ps_unnamed_missing'"):
        resolve("ps_unnamed_missing")


def test_resolve_reports_an_import_error(modules: Path) -> None:
    """A module that raises ImportError while importing is reported with the error."""
    (modules / "ps_import_error.py").write_text("from os import ps_no_such_name\n")
    with pytest.raises(TargetResolutionError, match="importing 'ps_import_error' failed"):
        resolve("ps_import_error")


def test_resolve_takes_the_longest_importable_prefix(modules: Path) -> None:
    """A submodule shadowed by a same-named attribute of its package is the module."""
    package = modules / "ps_shadowed"
    package.mkdir()
    (package / "__init__.py").write_text("from .sub import sub\n")
    (package / "sub.py").write_text("def sub():\n    pass\n")
    found = resolve("ps_shadowed.sub")
    assert found is sys.modules["ps_shadowed.sub"]
    assert os.path.basename(getattr(found, "__file__", "")) == "sub.py"


class _SetOnly:
    def __set__(self, instance: object, value: object) -> None:
        pass


class _DeleteOnly:
    def __delete__(self, instance: object) -> None:
        pass


@pytest.mark.parametrize("descriptor", [_SetOnly(), _DeleteOnly(), property()])
def test_is_data_descriptor_needs_either_set_or_delete(descriptor: object) -> None:
    """A type defining __set__ or __delete__ (not necessarily both) makes a data descriptor."""
    assert is_data_descriptor(descriptor)
