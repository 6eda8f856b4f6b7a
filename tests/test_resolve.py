"""patchscope._resolve: dotted paths, raw lookups along the MRO, naming targets, checking names."""

from __future__ import annotations

import importlib
import json
import json.decoder
import os
import os.path
import re
import sys
import textwrap
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchscope import TargetResolutionError, redirect_attr
from patchscope._resolve import (
    ABSENT,
    OBJECT_INIT,
    OBJECT_NEW,
    bind,
    check_name,
    describe,
    is_data_descriptor,
    lookup_mro,
    resolve,
)


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh package on sys.path: ``sub`` (not imported by ``__init__``) and ``broken``."""
    name = f"resolve_pkg_{tmp_path.name.replace('-', '_')}"
    root = tmp_path / name
    root.mkdir()
    (root / "__init__.py").write_text("VALUE = 1\n")
    (root / "sub.py").write_text(
        textwrap.dedent(
            """
            class Holder:
                class Inner:
                    attr = "deep"
            """
        )
    )
    (root / "broken.py").write_text("import resolve_no_such_dependency_xyz\n")
    (root / "raising.py").write_text("raise ImportError('refused on purpose')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield name
    for module in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[module]


# -- resolve ---------------------------------------------------------------


def test_a_non_string_target_is_returned_as_is() -> None:
    """Objects are their own target: resolve() hands back the very object."""
    mod = types.ModuleType("m")
    assert resolve(mod) is mod
    assert resolve(json.JSONDecoder) is json.JSONDecoder
    assert resolve(None) is None


def test_a_dotted_path_names_a_module_or_what_it_holds() -> None:
    """Module paths import the module; the rest of the path is walked with getattr."""
    assert resolve("json") is json
    assert resolve("json.decoder") is json.decoder
    assert resolve("json.decoder.JSONDecoder") is json.decoder.JSONDecoder
    assert resolve("json.decoder.JSONDecoder.decode") is json.decoder.JSONDecoder.decode
    assert resolve("os.path.join") is os.path.join


def test_the_longest_importable_prefix_is_imported(package: str) -> None:
    """A submodule the package does not import itself is imported, then walked into."""
    assert f"{package}.sub" not in sys.modules
    inner = resolve(f"{package}.sub.Holder.Inner")
    assert f"{package}.sub" in sys.modules
    assert inner is sys.modules[f"{package}.sub"].Holder.Inner  # type: ignore[attr-defined]
    assert resolve(f"{package}.VALUE") == 1


@pytest.mark.parametrize("path", ["", "json.", ".json", "json..decoder", "1json", "json.de-coder"])
def test_a_path_that_is_not_dotted_identifiers_is_refused(path: str) -> None:
    """Empty parts, leading digits or punctuation: TargetResolutionError naming the path."""
    with pytest.raises(TargetResolutionError) as info:
        resolve(path)
    message = str(info.value)
    assert repr(path) in message and "not a dotted path of identifiers" in message
    assert "'torch.cuda'" in message  # says what a good path looks like


def test_a_missing_top_level_package_says_to_install_it() -> None:
    """No importable prefix at all: the message names the first part and the fix."""
    with pytest.raises(TargetResolutionError) as info:
        resolve("resolve_no_such_pkg_xyz.mod.Class")
    message = str(info.value)
    assert "'resolve_no_such_pkg_xyz.mod.Class'" in message
    assert "no module named 'resolve_no_such_pkg_xyz'" in message
    assert "install the package" in message


def test_a_missing_attribute_names_the_object_and_the_attribute() -> None:
    """Past the imported prefix, a missing part names what lacked it; the cause is kept."""
    with pytest.raises(TargetResolutionError) as info:
        resolve("json.decoder.JSONDecoder.no_such_method")
    message = str(info.value)
    assert "'json.decoder.JSONDecoder.no_such_method'" in message
    assert "<class 'json.decoder.JSONDecoder'> has no attribute 'no_such_method'" in message
    assert isinstance(info.value.__cause__, AttributeError)


def test_a_module_whose_own_import_fails_is_reported_not_skipped(package: str) -> None:
    """A missing dependency inside the target module is its failure, not a shorter path."""
    with pytest.raises(TargetResolutionError) as info:
        resolve(f"{package}.broken.thing")
    message = str(info.value)
    assert f"importing '{package}.broken" in message and "failed" in message
    assert "resolve_no_such_dependency_xyz" in message
    assert isinstance(info.value.__cause__, ModuleNotFoundError)


def test_an_import_error_raised_by_the_module_is_reported(package: str) -> None:
    """A module that raises ImportError while importing gives a TargetResolutionError naming it."""
    with pytest.raises(TargetResolutionError) as info:
        resolve(f"{package}.raising")
    message = str(info.value)
    assert f"importing '{package}.raising' failed" in message and "refused on purpose" in message
    assert isinstance(info.value.__cause__, ImportError)


def test_dotted_path_target_resolved_at_activation() -> None:
    """A string target is imported at each activation, then restored."""
    import json

    original = json.dumps
    r = redirect_attr("json", "dumps", "patched")
    with r:
        assert json.dumps == "patched"
    assert json.dumps is original
    with redirect_attr("json.decoder.JSONDecoder", "decode", "x"):
        assert json.decoder.JSONDecoder.decode == "x"


def test_bad_dotted_path_names_the_path() -> None:
    """A path that does not import gives TargetResolutionError naming it; nothing changes."""
    with pytest.raises(TargetResolutionError, match="no_such_pkg_xyz"):
        with redirect_attr("no_such_pkg_xyz.mod", "x", 1):
            pass
    with pytest.raises(TargetResolutionError, match=r"'json\.nope'"):
        with redirect_attr("json.nope", "x", 1):
            pass
    assert isinstance(TargetResolutionError("x"), ImportError)


@pytest.mark.parametrize("name", [1, None, b"x"])
def test_name_must_be_str(name: object) -> None:
    """A non-string name is a TypeError naming what was passed."""
    with pytest.raises(TypeError, match=repr(name).replace("(", r"\(")):
        redirect_attr(types.ModuleType("m"), name, 1)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["a.b", "", "1x", "class", "a b"])
def test_name_must_be_identifier(name: str) -> None:
    """Dotted or non-identifier names are a ValueError naming what was passed."""
    with pytest.raises(ValueError, match=repr(name)):
        redirect_attr(types.ModuleType("m"), name, 1)


# -- check_name ------------------------------------------------------------


@pytest.mark.parametrize("name", ["x", "_private", "__new__", "café", "CamelCase9"])
def test_a_plain_identifier_is_returned_unchanged(name: str) -> None:
    """check_name gives back the very string it was passed when it is an identifier."""
    assert check_name(name) is name


@pytest.mark.parametrize("name", [1, None, b"x", ("a",)])
def test_check_name_refuses_non_strings_naming_type_and_value(name: object) -> None:
    """A non-string name is a TypeError naming its type and its repr."""
    with pytest.raises(TypeError) as info:
        check_name(name)
    message = str(info.value)
    assert type(name).__name__ in message and repr(name) in message


@pytest.mark.parametrize("name", ["a.b", "", "1x", "class", "None", "a b", "x-y"])
def test_check_name_refuses_non_identifiers_and_points_at_the_target(name: str) -> None:
    """Keywords, dotted and other non-identifier names are a ValueError saying where paths go."""
    with pytest.raises(ValueError) as info:
        check_name(name)
    message = str(info.value)
    assert repr(name) in message and "dotted paths go in the target" in message


# -- describe --------------------------------------------------------------


class _Outer:
    """A class with a nested class, for qualified names."""

    class Nested:
        """Described by its qualified name."""


class _Default:
    """Keeps object's repr."""


class _Short:
    """A repr of its own."""

    def __repr__(self) -> str:
        return "Short(1)"


class _Long:
    """A repr longer than a message can carry."""

    def __repr__(self) -> str:
        return "L" * 200


class _BadRepr:
    """A repr that raises."""

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def test_describe_a_module_by_its_name() -> None:
    """A module is ``<module 'name'>``; a module without a str ``__name__`` is ``<module '?'>``."""
    assert describe(json) == "<module 'json'>"
    nameless = types.ModuleType("gone")
    del nameless.__name__
    assert describe(nameless) == "<module '?'>"
    odd = types.ModuleType("odd")
    odd.__name__ = 5  # type: ignore[assignment]
    assert describe(odd) == "<module '?'>"


def test_describe_a_class_by_module_and_qualified_name() -> None:
    """A class is ``<class 'module.Qual.Name'>``; ``'?.Qual.Name'`` without ``__module__``."""
    assert describe(json.JSONDecoder) == "<class 'json.decoder.JSONDecoder'>"
    assert describe(_Outer.Nested) == f"<class '{__name__}._Outer.Nested'>"

    class Moduleless(type):
        @property
        def __module__(cls) -> str:  # type: ignore[override]
            raise AttributeError("__module__")

    class Loose(metaclass=Moduleless):
        pass

    assert describe(Loose) == f"<class '?.{Loose.__qualname__}'>"
    assert Loose.__qualname__.endswith("<locals>.Loose")


def test_describe_an_instance_by_its_repr_short_and_safe() -> None:
    """Instances: the short default form, their own repr, cut to 80 characters, never raising."""
    plain = _Default()
    assert describe(plain) == f"<_Default object at {id(plain):#x}>"
    assert describe(_Short()) == "Short(1)"
    long = describe(_Long())
    assert len(long) == 80 and long == "L" * 77 + "..."
    bad = _BadRepr()
    assert describe(bad) == f"<_BadRepr object at {id(bad):#x}>"


# -- raw lookups -----------------------------------------------------------


class _Meta(type):
    """A metaclass with an attribute of its own and a data descriptor protocol."""

    on_meta = "meta"

    def __set__(cls, instance: object, value: object) -> None:
        """Makes classes of this metaclass data descriptors."""


class _Base(metaclass=_Meta):
    """Defines the raw values the lookups find."""

    shared = "base"
    only_base = "base only"

    @staticmethod
    def static() -> str:
        return "static"

    @classmethod
    def klass(cls) -> str:
        return cls.__name__

    def method(self) -> str:
        return "method"

    def __getattr__(self, name: str) -> str:
        return "dynamic"


class _Child(_Base):
    """Overrides one attribute of its base."""

    shared = "child"


def test_lookup_mro_finds_the_raw_value_of_the_first_defining_class() -> None:
    """The first class in the MRO wins, and the value is the raw one, not what getattr binds."""
    assert lookup_mro(_Child, "shared") == "child"
    assert lookup_mro(_Base, "shared") == "base"
    assert lookup_mro(_Child, "only_base") == "base only"
    assert isinstance(lookup_mro(_Child, "static"), staticmethod)
    assert isinstance(lookup_mro(_Child, "klass"), classmethod)
    assert lookup_mro(_Child, "method") is vars(_Base)["method"]
    assert lookup_mro(_Child, "__new__") is OBJECT_NEW
    assert lookup_mro(_Child, "__init__") is OBJECT_INIT


def test_lookup_mro_ignores_metaclass_getattr_and_instance_dicts() -> None:
    """What only the metaclass or ``__getattr__`` supplies is ABSENT."""
    assert _Child.on_meta == "meta"  # type: ignore[attr-defined]
    assert lookup_mro(_Child, "on_meta") is ABSENT
    assert _Child().anything == "dynamic"
    assert lookup_mro(_Child, "anything") is ABSENT


def test_absent_is_one_marker_that_says_so() -> None:
    """ABSENT is a single value, falsy to nothing, and shows as ``<absent>``."""
    assert repr(ABSENT) == "<absent>"
    assert ABSENT is type(ABSENT)("ABSENT")
    assert ABSENT is not None and ABSENT != "ABSENT"


def test_object_new_and_init_are_the_raw_values_of_object() -> None:
    """OBJECT_NEW and OBJECT_INIT are what ``vars(object)`` holds."""
    assert OBJECT_NEW is vars(object)["__new__"]
    assert OBJECT_INIT is vars(object)["__init__"]


class _SetOnly:
    """Defines only ``__set__``."""

    def __set__(self, instance: object, value: object) -> None:
        """Data descriptor protocol."""


class _DeleteOnly:
    """Defines only ``__delete__``."""

    def __delete__(self, instance: object) -> None:
        """Data descriptor protocol."""


class _InheritsSet(_SetOnly):
    """Inherits ``__set__``."""


class _GetOnly:
    """Defines only ``__get__``."""

    def __get__(self, instance: object, owner: type | None = None) -> object:
        return self


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (property(lambda self: 1), True),
        (_SetOnly(), True),
        (_DeleteOnly(), True),
        (_InheritsSet(), True),
        (vars(type)["__name__"], True),  # a getset descriptor
        (_GetOnly(), False),
        (vars(_Base)["static"], False),
        (vars(_Base)["method"], False),
        (1, False),
        (_Base(), False),  # its metaclass defines __set__, its type does not
    ],
    ids=lambda v: type(v).__name__,
)
def test_is_data_descriptor_reads_the_type_not_the_metaclass(value: object, expected: bool) -> None:
    """True exactly when the value's type defines ``__set__`` or ``__delete__`` along its MRO."""
    assert is_data_descriptor(value) is expected


def test_is_data_descriptor_ignores_an_instance_attribute_named_set() -> None:
    """A ``__set__`` stored on the instance is not the protocol."""
    value = _GetOnly()
    value.__set__ = lambda *a: None  # type: ignore[attr-defined]
    assert is_data_descriptor(value) is False


def test_bind_gives_what_attribute_lookup_gives() -> None:
    """Functions bind, staticmethods unwrap, classmethods bind to the owner, plain values stay."""
    obj = _Child()
    assert bind(vars(_Base)["method"], obj, _Child)() == "method"
    assert bind(vars(_Base)["static"], None, _Child)() == "static"
    assert bind(vars(_Base)["klass"], None, _Child)() == "_Child"
    assert bind(vars(_Base)["klass"], obj, _Child)() == "_Child"
    marker = object()
    assert bind(marker, obj, _Child) is marker
    assert bind(property(lambda self: self), obj, _Child) is obj


class _Repr:
    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


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


@pytest.mark.parametrize("descriptor", [_SetOnly(), _DeleteOnly(), property()])
def test_is_data_descriptor_needs_either_set_or_delete(descriptor: object) -> None:
    """A type defining __set__ or __delete__ (not necessarily both) makes a data descriptor."""
    assert is_data_descriptor(descriptor)
