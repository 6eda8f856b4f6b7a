"""redirect_attr: restoration by identity for every target kind, errors, dotted strings, DELETE."""

from __future__ import annotations

import dataclasses
import sys
import types
import unittest.mock
import warnings
from collections.abc import Iterator

import pytest
from _targets import FACTORIES, Case
from _threads import in_other_thread

import patchscope
from patchscope import (
    AttributeMissingError,
    PatchscopeError,
    RedirectConflictWarning,
    TargetNotWritableError,
    TargetResolutionError,
    redirect_attr,
)
from patchscope.testing import RedirectFixture

KINDS = sorted(FACTORIES)


def _same(a: dict[str, object], b: dict[str, object]) -> bool:
    return a.keys() == b.keys() and all(a[k] is b[k] for k in a)


@pytest.fixture(params=KINDS)
def case(request: pytest.FixtureRequest) -> Case:
    """A fresh target of each kind."""
    return FACTORIES[request.param]()


def test_with_installs_and_restores_raw_value(case: Case) -> None:
    """Inside the block the replacement is visible; afterwards vars() is identical."""
    before = case.raw()
    replacement = object()
    with redirect_attr(case.target, case.name, replacement, create=case.create) as value:
        assert value is replacement
        assert vars(case.target)[case.name] is replacement
    assert _same(case.raw(), before)
    assert patchscope.active() == ()


def test_start_stop_restores(case: Case) -> None:
    """start()/stop() is an activation like a with-block; stop() twice is harmless."""
    before = case.raw()
    handle = redirect_attr(case.target, case.name, 42, create=case.create).start()
    assert getattr(case.target, case.name) == 42
    handle.stop()
    handle.stop()
    assert _same(case.raw(), before)


def test_non_lifo_exits_restore_original(case: Case) -> None:
    """Enter A, enter B, exit A, exit B: B stays visible, then the original returns."""
    before = case.raw()
    a = redirect_attr(case.target, case.name, "A", create=case.create).start()
    b = redirect_attr(case.target, case.name, "B", create=case.create).start()
    a.stop()
    assert vars(case.target)[case.name] == "B"
    b.stop()
    assert _same(case.raw(), before)


def test_mock_patch_leaks_where_patchscope_does_not() -> None:
    """The anchor bug: mock.patch leaks A's value on enter A, enter B, exit A, exit B."""
    mod = types.ModuleType("m")
    mod.value = original = object()
    p1 = unittest.mock.patch.object(mod, "value", "A")
    p2 = unittest.mock.patch.object(mod, "value", "B")
    p1.start()
    p2.start()
    p1.stop()
    p2.stop()
    assert mod.value == "A"  # mock's leak
    mod.value = original
    a = redirect_attr(mod, "value", "A").start()
    b = redirect_attr(mod, "value", "B").start()
    a.stop()
    b.stop()
    assert mod.value is original


def test_most_recent_live_activation_wins() -> None:
    """With several live, the visible value is the most recently entered still-live one."""
    mod = types.ModuleType("m")
    mod.value = "orig"
    hs = [redirect_attr(mod, "value", v).start() for v in "ABC"]
    hs[2].stop()
    assert mod.value == "B"
    hs[0].stop()
    assert mod.value == "B"
    hs[1].stop()
    assert mod.value == "orig"


def test_staticmethod_and_classmethod_keep_binding_after_restore() -> None:
    """The raw staticmethod/classmethod objects come back, so binding is unchanged."""

    class C:
        @staticmethod
        def s() -> int:
            return 1

        @classmethod
        def c(cls) -> type:
            return cls

    raw_s, raw_c = vars(C)["s"], vars(C)["c"]
    with redirect_attr(C, "s", lambda: 2), redirect_attr(C, "c", classmethod(lambda cls: 3)):
        assert C.s() == 2
        assert C().c() == 3
    assert vars(C)["s"] is raw_s and vars(C)["c"] is raw_c
    assert C().s() == 1 and C().c() is C


def test_inherited_attribute_is_deleted_not_copied() -> None:
    """An inherited attribute is deleted on restore, so later base changes show through."""

    class Base:
        value = 1

    class Sub(Base):
        pass

    with redirect_attr(Sub, "value", 2):
        assert Sub.value == 2 and Base.value == 1
    assert "value" not in vars(Sub)
    Base.value = 3
    assert Sub.value == 3


def test_instance_attribute_inherited_from_class_is_deleted() -> None:
    """An instance reading a class attribute gets no instance copy after restore (pytest #10644)."""

    class C:
        value = 1

    obj = C()
    with redirect_attr(obj, "value", 2):
        assert obj.value == 2
    assert "value" not in vars(obj)


def test_module_getattr_attribute_is_deleted() -> None:
    """A name served by a module __getattr__ is deleted again, so __getattr__ serves it."""
    case = FACTORIES["module __getattr__"]()
    served = getattr(case.target, case.name)
    with redirect_attr(case.target, case.name, "x"):
        assert case.target.value == "x"
    assert "value" not in vars(case.target)
    assert case.target.value is served


def test_created_attribute_is_deleted() -> None:
    """create=True adds the attribute for the activation and deletes it again."""
    mod = types.ModuleType("m")
    with redirect_attr(mod, "new_name", 1, create=True):
        assert mod.new_name == 1
    assert not hasattr(mod, "new_name")


def test_slots_attribute_restored_through_setattr() -> None:
    """A __slots__ member is restored through the object's own setattr."""

    class S:
        __slots__ = ("a",)

        def __init__(self) -> None:
            self.a = 1

    s = S()
    with redirect_attr(s, "a", 2):
        assert s.a == 2
    assert s.a == 1


def test_property_with_setter_on_instance() -> None:
    """A data descriptor with a setter is restored through it, with the getter's value."""

    class P:
        def __init__(self) -> None:
            self._v = 1

        @property
        def v(self) -> int:
            return self._v

        @v.setter
        def v(self, value: int) -> None:
            self._v = value

    p = P()
    with redirect_attr(p, "v", 5):
        assert p.v == 5
    assert p.v == 1 and "v" not in vars(p)


def test_bad_scope() -> None:
    """Only 'process' and 'context' are scopes."""
    with pytest.raises(ValueError, match="'thread'"):
        redirect_attr(types.ModuleType("m"), "x", 1, scope="thread")


def test_missing_attribute_suggests_create() -> None:
    """A missing attribute names target and name and suggests create=True; nothing changes."""
    mod = types.ModuleType("torch_cuda_like")
    before = dict(vars(mod))
    with pytest.raises(AttributeMissingError) as info:
        redirect_attr(mod, "Evnt", 1).start()
    message = str(info.value)
    assert "torch_cuda_like" in message and "'Evnt'" in message and "create=True" in message
    assert isinstance(info.value, AttributeError) and isinstance(info.value, PatchscopeError)
    assert vars(mod) == before and patchscope.active() == ()


@dataclasses.dataclass(frozen=True)
class _Frozen:
    x: int = 1


class _ReadOnly:
    @property
    def x(self) -> int:
        return 1


class _Slots:
    __slots__ = ("a",)


@pytest.mark.parametrize(
    ("target", "name", "create"),
    [
        (int, "real", False),
        (_ReadOnly(), "x", False),
        (_Slots(), "b", True),
        (_Frozen(), "x", False),
    ],
    ids=["immutable type", "read-only property", "slots without slot", "frozen dataclass"],
)
def test_unwritable_targets_raise_and_change_nothing(
    target: object, name: str, create: bool
) -> None:
    """Targets refusing the write raise TargetNotWritableError naming target and name."""
    before = dict(getattr(target, "__dict__", {}))
    with pytest.raises(TargetNotWritableError) as info:
        with redirect_attr(target, name, 5, create=create):
            pass
    assert repr(name) in str(info.value)
    assert dict(getattr(target, "__dict__", {})) == before
    assert patchscope.active() == ()


def test_conflict_warning_names_the_value_and_still_restores() -> None:
    """Someone else rebinding during the redirect gets a RedirectConflictWarning; restore runs."""
    mod = types.ModuleType("m")
    mod.value = original = object()
    with pytest.warns(RedirectConflictWarning, match="'value'.*'intruder'"):
        with redirect_attr(mod, "value", "mine"):
            mod.value = "intruder"
    assert mod.value is original


def test_import_does_not_pull_optional_dependencies() -> None:
    """import patchscope imports neither torch nor pytest nor hypothesis."""
    import subprocess

    code = (
        "import sys, patchscope; "
        "bad = [m for m in ('torch', 'pytest', 'hypothesis') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("name", ["weight", "bias"])
def test_nn_module_parameter_restored_in_place(name: str) -> None:
    """An nn.Module parameter comes back as the same Parameter, same state_dict order."""
    torch = pytest.importorskip("torch")
    lin = torch.nn.Linear(3, 3)
    original = getattr(lin, name)
    order = list(lin.state_dict())
    replacement = torch.nn.Parameter(torch.zeros_like(original))
    with redirect_attr(lin, name, replacement):
        assert getattr(lin, name) is replacement
    assert getattr(lin, name) is original
    assert lin._parameters[name] is original
    assert list(lin.state_dict()) == order
    assert name not in vars(lin)


def test_nn_module_buffer_and_submodule_restored() -> None:
    """Buffers and sub-modules go back through Module.__setattr__, order kept."""
    torch = pytest.importorskip("torch")
    net = torch.nn.Module()
    net.proj = torch.nn.Linear(2, 2)
    net.bn = bn = torch.nn.BatchNorm1d(2)
    mean = bn.running_mean
    sub = net.proj
    order = list(net.state_dict())
    with (
        redirect_attr(bn, "running_mean", torch.ones(2)),
        redirect_attr(net, "proj", torch.nn.Identity()),
    ):
        assert isinstance(net.proj, torch.nn.Identity)
        assert bn.running_mean.sum().item() == 2
    assert bn.running_mean is mean and net._modules["proj"] is sub
    assert list(net.state_dict()) == order


def test_nn_module_wrong_type_refused_nothing_changed() -> None:
    """Module.__setattr__ refusing a plain tensor as parameter surfaces as not writable."""
    torch = pytest.importorskip("torch")
    lin = torch.nn.Linear(2, 2)
    weight = lin.weight
    with pytest.raises(TargetNotWritableError, match="'weight'"):
        redirect_attr(lin, "weight", torch.zeros(2, 2)).start()
    assert lin.weight is weight and patchscope.active() == ()


def test_start_stacklevel_reports_the_callers_caller() -> None:
    """start(stacklevel=2) records the line that called the helper."""
    mod = types.ModuleType("m")
    mod.value = 1

    def helper() -> patchscope.Activation | patchscope.ActivationGroup:
        return redirect_attr(mod, "value", 2).start(stacklevel=2)

    handle = helper()
    line = sys._getframe().f_lineno - 1
    try:
        assert patchscope.active()[0].site == f"{__file__}:{line}"
        assert patchscope.active()[0].open is True
    finally:
        handle.stop()


class PickledTarget:
    """A class target that pickle finds by name."""

    value = "orig"


def test_copies_and_pickles_are_independent_redirects() -> None:
    """copy.copy, deepcopy and pickle give a new redirect; live handles stay with the original."""
    import copy
    import pickle

    replacement = ["r"]
    r = redirect_attr(PickledTarget, "value", replacement)
    with r:
        for twin in (copy.copy(r), copy.deepcopy(r), pickle.loads(pickle.dumps(r))):
            assert twin is not r and repr(twin) == repr(r)
            assert twin._handles is not r._handles and twin._handles == []
            with twin:
                assert PickledTarget.value == replacement
            assert PickledTarget.value is replacement  # the original's activation is live
            assert len(patchscope.active()) == 1
    assert PickledTarget.value == "orig" and patchscope.active() == ()
    # Copies keep the target and the replacement themselves: a module cannot be
    # deep-copied, and a copied replacement would not be the one asked for.
    mod = types.ModuleType("m")
    mod.value = "orig"
    on_module = redirect_attr(mod, "value", replacement)
    for twin in (copy.copy(on_module), copy.deepcopy(on_module)):
        with twin:
            assert mod.value is replacement
    assert mod.value == "orig"
    construction = patchscope.redirect_construction(PickledTarget, dict, include_subclasses=True)
    twin = pickle.loads(pickle.dumps(construction))
    assert repr(twin) == repr(construction)
    with twin:
        assert PickledTarget() == {}
    assert isinstance(PickledTarget(), PickledTarget)


def test_conflict_warning_points_at_the_users_line() -> None:
    """The conflict warning names the with statement or the stop() call, not patchscope."""

    mod = types.ModuleType("m")
    mod.value = "orig"
    r = redirect_attr(mod, "value", "r")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with r:  # the with statement's line is reported for its exit
            line_with = sys._getframe().f_lineno - 1
            mod.value = "someone else"
        handle = r.start()
        mod.value = "someone else again"
        handle.stop()
        line_stop = sys._getframe().f_lineno - 1
    found = [(w.filename, w.lineno) for w in caught if w.category is RedirectConflictWarning]
    assert found == [(__file__, line_with), (__file__, line_stop)]
    assert mod.value == "orig"


# ---------------------------------------------------------------------------
# One dotted string: redirect_attr("pkg.mod.name", replacement)


@pytest.fixture
def importable() -> Iterator[types.ModuleType]:
    """A fresh module importable as ``ps_dotted_target``, with ``value = 1``."""
    module = types.ModuleType("ps_dotted_target")
    module.value = 1  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    try:
        yield module
    finally:
        del sys.modules[module.__name__]


@pytest.mark.parametrize("scope", ["process", "context"])
def test_one_dotted_string_is_target_and_name(importable: types.ModuleType, scope: str) -> None:
    """redirect_attr("mod.name", v) splits at the last dot, as mock.patch does, in either scope."""
    r = redirect_attr("ps_dotted_target.value", 2, scope=scope)
    assert repr(r) == f"redirect_attr(ps_dotted_target, 'value', 2, scope={scope!r})"
    with r as value:
        assert value == 2 and importable.value == 2  # type: ignore[attr-defined]
    assert vars(importable)["value"] == 1


def test_one_dotted_string_resolves_at_each_activation(importable: types.ModuleType) -> None:
    """The owner is imported when the redirect is entered, not when it is made."""
    r = redirect_attr("ps_dotted_target.value", 2)
    replacement_module = types.ModuleType("ps_dotted_target")
    replacement_module.value = 1  # type: ignore[attr-defined]
    sys.modules["ps_dotted_target"] = replacement_module
    with r:
        assert replacement_module.value == 2  # type: ignore[attr-defined]
        assert importable.value == 1  # type: ignore[attr-defined]
    assert replacement_module.value == 1  # type: ignore[attr-defined]


def test_one_dotted_string_walks_attributes_after_the_module() -> None:
    """A path through a class, as mock.patch("pkg.mod.Class.method") takes it, is restored."""
    import json.decoder

    original = vars(json.decoder.JSONDecoder)["decode"]
    with redirect_attr("json.decoder.JSONDecoder.decode", "x", create=False):
        assert json.decoder.JSONDecoder.decode == "x"
    assert vars(json.decoder.JSONDecoder)["decode"] is original


def test_one_dotted_string_takes_create_for_a_missing_name(importable: types.ModuleType) -> None:
    """A missing last component is AttributeMissingError naming it, unless create=True."""
    with pytest.raises(AttributeMissingError, match=r"'missing'.*create=True"):
        with redirect_attr("ps_dotted_target.missing", 2):
            pass
    with redirect_attr("ps_dotted_target.missing", 2, create=True):
        assert importable.missing == 2  # type: ignore[attr-defined]
    assert "missing" not in vars(importable)


@pytest.mark.parametrize(
    ("path", "error", "match"),
    [
        ("no_such_pkg_xyz.name", TargetResolutionError, "no_such_pkg_xyz"),
        ("json.nope.name", TargetResolutionError, r"'json\.nope'.*'nope'"),
    ],
)
def test_one_dotted_string_that_does_not_resolve_names_it(
    path: str, error: type[Exception], match: str
) -> None:
    """An owner that does not import or has no such attribute is an error naming the path."""
    r = redirect_attr(path, 1)
    with pytest.raises(error, match=match):
        with r:
            pass
    assert patchscope.active() == ()


@pytest.mark.parametrize(
    ("path", "error", "match"),
    [
        ("json", ValueError, r"'json'.*dotted path 'module\.name'"),
        (".dumps", ValueError, r"'\.dumps'.*dotted path"),
        ("json.", ValueError, r"'json\.'.*dotted path"),
        ("json.1x", ValueError, r"'json\.1x'.*dotted path"),
        ("json.class", ValueError, r"'json\.class'.*dotted path"),
        (sys, TypeError, r"<module 'sys'>.*redirect_attr\('pkg\.mod\.name', replacement\)"),
    ],
)
def test_malformed_one_dotted_string_is_refused_at_the_call(
    path: object, error: type[Exception], match: str
) -> None:
    """A path without a module and a name, or not a string, fails at once, saying how to fix it."""
    with pytest.raises(error, match=match):
        redirect_attr(path, 1)  # type: ignore[call-overload]


def test_one_dotted_string_and_path_with_name_agree(importable: types.ModuleType) -> None:
    """The one-string form makes the redirect the path-and-name form makes."""
    one = redirect_attr("ps_dotted_target.value", 2, scope="context")
    two = redirect_attr("ps_dotted_target", "value", 2, scope="context")
    assert type(one) is type(two) and repr(one) == repr(two)
    with one, two:
        assert [(a.name, a.scope) for a in patchscope.active()] == [("value", "context")] * 2


# ---------------------------------------------------------------------------
# patchscope.DELETE: hiding an attribute for a scope


def test_delete_is_the_testing_absent_marker() -> None:
    """patchscope.DELETE and patchscope.testing.ABSENT are one object."""
    import patchscope.testing

    assert patchscope.DELETE is patchscope.testing.ABSENT


def test_delete_hides_a_module_attribute_in_process_scope() -> None:
    """Every thread sees no attribute while active; the raw original is back by identity."""
    module = types.ModuleType("m")
    original = object()
    module.name = original  # type: ignore[attr-defined]
    with redirect_attr(module, "name", patchscope.DELETE) as value:
        assert value is patchscope.DELETE
        assert not hasattr(module, "name")
        assert in_other_thread(lambda: hasattr(module, "name")) is False
        with pytest.raises(AttributeError, match="'name'"):
            module.name  # type: ignore[attr-defined]  # noqa: B018
    assert vars(module)["name"] is original


def test_delete_hides_a_module_attribute_in_context_scope_only() -> None:
    """Only the activating context sees no attribute; another thread reads the original."""
    module = types.ModuleType("m")
    original = object()
    module.name = original  # type: ignore[attr-defined]
    with redirect_attr(module, "name", patchscope.DELETE, scope="context"):
        assert not hasattr(module, "name")
        with pytest.raises(AttributeError, match="'name'"):
            module.name  # type: ignore[attr-defined]  # noqa: B018
        assert in_other_thread(lambda: getattr(module, "name", None)) is original
    assert module.name is original  # type: ignore[attr-defined]
    assert type(module) is types.ModuleType


@pytest.mark.parametrize("scope", ["process", "context"])
def test_delete_hides_a_class_attribute(scope: str) -> None:
    """A class's own attribute is gone from the class and its instances while active."""

    class C:
        flag = True

    with redirect_attr(C, "flag", patchscope.DELETE, scope=scope):
        assert not hasattr(C, "flag") and not hasattr(C(), "flag")
        assert in_other_thread(lambda: hasattr(C, "flag")) is (scope == "context")
    assert vars(C)["flag"] is True


def test_delete_of_a_missing_attribute_needs_create() -> None:
    """Hiding a name that does not exist is AttributeMissingError, as monkeypatch.delattr raises."""
    module = types.ModuleType("m")
    with pytest.raises(AttributeMissingError, match="'absent_name'"):
        with redirect_attr(module, "absent_name", patchscope.DELETE):
            pass
    with redirect_attr(module, "absent_name", patchscope.DELETE, create=True):
        assert not hasattr(module, "absent_name")
    assert vars(module).keys() == types.ModuleType("m").__dict__.keys()


def test_delete_with_one_dotted_string(importable: types.ModuleType) -> None:
    """redirect_attr("mod.name", DELETE) hides it, like monkeypatch.delattr("mod.name")."""
    with redirect_attr("ps_dotted_target.value", patchscope.DELETE):
        assert not hasattr(importable, "value")
    assert importable.value == 1  # type: ignore[attr-defined]


def test_delete_nested_under_a_replacement_restores_both() -> None:
    """A deletion inside a replacement, ended out of order, leaves the original."""
    module = types.ModuleType("m")
    module.name = 1  # type: ignore[attr-defined]
    outer = redirect_attr(module, "name", 2).start()
    inner = redirect_attr(module, "name", patchscope.DELETE).start()
    assert not hasattr(module, "name")
    outer.stop()
    assert not hasattr(module, "name")
    inner.stop()
    assert module.name == 1  # type: ignore[attr-defined]


def test_fixture_attr_takes_delete(redirect: RedirectFixture, importable: types.ModuleType) -> None:
    """The pytest fixture hides an attribute until teardown, in both call forms."""
    redirect.attr("ps_dotted_target.value", patchscope.DELETE)
    assert not hasattr(importable, "value")
    redirect.undo()
    assert importable.value == 1  # type: ignore[attr-defined]
    redirect.attr(importable, "value", patchscope.DELETE, scope="context")
    assert not hasattr(importable, "value")
    redirect.undo()
    assert importable.value == 1  # type: ignore[attr-defined]


def test_a_group_holding_a_group_gives_the_nested_values() -> None:
    """``with`` of a group whose part is a group gives that part's own tuple in its place."""
    mod = types.ModuleType("m")
    mod.a, mod.b, mod.c = 1, 2, 3
    inner = patchscope.combine(redirect_attr(mod, "a", 10), redirect_attr(mod, "b", 20))
    outer = patchscope.combine(inner, redirect_attr(mod, "c", 30))
    with outer as values:
        assert values == ((10, 20), 30)
    handle = outer.start()
    try:
        assert handle.value == ((10, 20), 30)
    finally:
        handle.stop()
    assert (mod.a, mod.b, mod.c) == (1, 2, 3) and patchscope.active() == ()
