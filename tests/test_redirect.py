"""redirect_attr: restoration by identity for every target kind, errors, one dotted string,
DELETE, combine, during."""

from __future__ import annotations

import dataclasses
import sys
import threading
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
    RestoreError,
    TargetNotWritableError,
    TargetResolutionError,
    combine,
    during,
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


def test_same_redirect_nested_and_recursive() -> None:
    """One Redirect object entered many times at once: each with is independent."""
    mod = types.ModuleType("m")
    mod.value = "orig"
    r = redirect_attr(mod, "value", "new")

    def recurse(n: int) -> int:
        with r:
            assert mod.value == "new"
            return n if n == 0 else recurse(n - 1) + 1

    assert recurse(20) == 20
    assert mod.value == "orig"
    assert patchscope.active() == ()


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


def test_during_wraps_a_third_party_constructor() -> None:
    """during(owner, '__init__', r): r is active while the constructor runs, then gone."""
    mod = types.ModuleType("device")
    mod.kind = "cuda"

    class ThirdParty:
        def __init__(self) -> None:
            self.seen = mod.kind

    raw = vars(ThirdParty)["__init__"]
    with during(ThirdParty, "__init__", redirect_attr(mod, "kind", "cpu")):
        assert ThirdParty().seen == "cpu"
        assert mod.kind == "cuda"
    assert vars(ThirdParty)["__init__"] is raw
    assert ThirdParty().seen == "cuda"


def test_during_inherited_method_deletes_the_shadow() -> None:
    """Wrapping an inherited method puts a shadow in the owner, deleted on exit."""
    mod = types.ModuleType("m")
    mod.flag = False

    class Base:
        def run(self) -> bool:
            return bool(mod.flag)

    class Sub(Base):
        pass

    handle = during(Sub, "run", redirect_attr(mod, "flag", True)).start()
    assert Sub().run() is True and Base().run() is False
    handle.stop()
    assert "run" not in vars(Sub) and Sub().run() is False


def test_during_staticmethod_keeps_binding() -> None:
    """A wrapped staticmethod still binds as one."""
    mod = types.ModuleType("m")
    mod.x = 1

    class C:
        @staticmethod
        def f(a: int) -> int:
            return a + int(mod.x)

    with during(C, "f", redirect_attr(mod, "x", 10)):
        assert C.f(1) == 11 and C().f(1) == 11
    assert C.f(1) == 2


@pytest.mark.parametrize("owner_kind", ["class", "inherited", "staticmethod"])
def test_during_with_context_redirects_leaves_other_threads_alone(owner_kind: str) -> None:
    """Context-scoped redirects: only the activating context's calls are wrapped."""
    mod = types.ModuleType("m")
    mod.kind = "orig"

    class Base:
        def __init__(self) -> None:
            self.seen = mod.kind

        @staticmethod
        def probe() -> str:
            return str(mod.kind)

    class Sub(Base):
        pass

    owner, name = {
        "class": (Base, "__init__"),
        "inherited": (Sub, "__init__"),
        "staticmethod": (Base, "probe"),
    }[owner_kind]
    call = (lambda: owner().seen) if name == "__init__" else (lambda: owner.probe())
    before = dict(vars(owner))
    wrapped = during(owner, name, redirect_attr(mod, "kind", "new", scope="context"))
    with wrapped:
        assert call() == "new"
        assert in_other_thread(call) == "orig"
    assert dict(vars(owner)) == before
    assert call() == "orig" and patchscope.active() == ()


def test_during_scope_follows_its_redirects() -> None:
    """The wrapper is context-scoped only when everything it activates is."""
    mod = types.ModuleType("m")
    mod.x = mod.y = 0

    class C:
        def run(self) -> int:
            return int(mod.x) + int(mod.y)

    ctx = redirect_attr(mod, "x", 1, scope="context")
    proc = redirect_attr(mod, "y", 2)
    with during(C, "run", ctx):
        assert C().run() == 1 and in_other_thread(lambda: C().run()) == 0
    with during(C, "run", ctx, proc):  # a process-scoped part reaches every thread
        assert C().run() == 3 and in_other_thread(lambda: C().run()) == 3
    instance = C()
    with during(instance, "run", ctx):  # on the instance for every thread, gated
        assert instance.run() == 1 and in_other_thread(instance.run) == 0
        with during(instance, "run", proc):  # a process-scoped one runs everywhere
            assert instance.run() == 3 and in_other_thread(instance.run) == 2
    assert C().run() == 0 and "run" not in vars(instance)
    holder = types.ModuleType("patchscope_during_holder")
    holder.C, holder.instance = C, instance
    sys.modules[holder.__name__] = holder
    try:  # a path: the scope follows what it names at each activation
        with during(f"{holder.__name__}.C", "run", ctx):
            assert C().run() == 1 and in_other_thread(lambda: C().run()) == 0
        with during(f"{holder.__name__}.instance", "run", ctx):
            assert instance.run() == 1 and in_other_thread(instance.run) == 0
    finally:
        del sys.modules[holder.__name__]
    assert C().run() == 0 and patchscope.active() == ()


def test_during_missing_method() -> None:
    """during() on a missing method names owner and method."""

    class C:
        pass

    with pytest.raises(AttributeMissingError, match="'nope'") as info:
        during(C, "nope", redirect_attr(types.ModuleType("m"), "x", 1, create=True)).start()
    assert "create=True" not in str(info.value)


def test_active_reports_target_name_scope_site_thread() -> None:
    """active() lists live activations with where and by whom they were entered."""
    mod = types.ModuleType("m")
    mod.value = 1
    handle = redirect_attr(mod, "value", 2).start()
    line = sys._getframe().f_lineno - 1
    try:
        (act,) = patchscope.active()
        assert act.target is mod and act.name == "value" and act.replacement == 2
        assert act.scope == "process"
        assert act.site == f"{__file__}:{line}"
        assert act.thread_name == "MainThread"
        assert act.thread is threading.current_thread()
        assert "live" in repr(act)
    finally:
        handle.stop()
    assert patchscope.active() == ()
    assert "ended" in repr(act)


def test_active_stop_from_listing_ends_it() -> None:
    """An activation found through active() can be stopped; the with-block exit is then a no-op."""
    mod = types.ModuleType("m")
    mod.value = original = object()
    with redirect_attr(mod, "value", 2):
        patchscope.active()[0].stop()
        assert mod.value is original
    assert mod.value is original


def test_exit_without_enter_is_an_error() -> None:
    """__exit__ with no matching __enter__ is a RuntimeError, not a silent no-op."""
    r = redirect_attr(types.ModuleType("m"), "x", 1, create=True)
    with pytest.raises(RuntimeError, match="without a matching"):
        r.__exit__(None, None, None)


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


def test_conflict_warning_is_a_warning_not_error_by_default() -> None:
    """RedirectConflictWarning is a UserWarning subclass."""
    assert issubclass(RedirectConflictWarning, UserWarning)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mod = types.ModuleType("m")
        mod.v = 1
        with redirect_attr(mod, "v", 2):
            pass


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


def test_exitstack_pairs_nested_activations_of_one_redirect() -> None:
    """enter_context() from ExitStack (enter and exit in other frames) still pairs exactly."""
    import contextlib

    mod = types.ModuleType("m")
    mod.value = "orig"
    r = redirect_attr(mod, "value", "r")
    s = redirect_attr(mod, "value", "s")
    with contextlib.ExitStack() as stack:
        stack.enter_context(r)
        stack.enter_context(s)
        stack.enter_context(r)
        assert mod.value == "r"
        assert len(patchscope.active()) == 3
    assert mod.value == "orig" and patchscope.active() == ()


def test_exitstack_exit_from_another_thread_ends_the_exitstack_activation() -> None:
    """An ExitStack entered in a worker and closed elsewhere ends its own activation only."""
    import contextlib

    mod = types.ModuleType("m")
    mod.value = "orig"
    r = redirect_attr(mod, "value", "new", scope="context")
    stack = contextlib.ExitStack()
    worker = threading.Thread(target=lambda: stack.enter_context(r))
    worker.start()
    worker.join(10)
    assert not worker.is_alive()
    with r:
        assert mod.value == "new"
        stack.close()
        assert mod.value == "new"  # this block's activation is still live
        (act,) = patchscope.active()
        assert act.site.startswith(__file__)  # not contextlib.py
    assert mod.value == "orig" and patchscope.active() == ()


def test_exitstack_entry_site_is_the_callers_line() -> None:
    """Entered through ExitStack.enter_context, the site is the caller's line, not contextlib's."""
    import contextlib

    mod = types.ModuleType("m")
    mod.value = 1
    with contextlib.ExitStack() as stack:
        stack.enter_context(redirect_attr(mod, "value", 2))
        line = sys._getframe().f_lineno - 1
        assert patchscope.active()[0].site == f"{__file__}:{line}"


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
    import warnings

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
def test_one_dotted_string_is_target_and_name(
    importable: types.ModuleType, scope: str
) -> None:
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
