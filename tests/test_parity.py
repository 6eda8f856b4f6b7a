"""Parity: the C twins and the Python twins give the same states, step for step.

With the accelerator built, both implementations of the registry's
operations exist in one process and work on the same records: the C ones
(``RedirectCore._c_activate``, ``_c_with_enter``, ``_c_with_exit``,
``ActivationBase.stop``, the group methods) and the Python reference
(``_redirect._py_activate``, ``_py_with_enter``, ``_py_with_exit``,
``_registry._py_exit``, ``_py_group_activate``). A hypothesis state machine
builds two identical worlds of targets, applies every operation to one world
through the C twins and to the other through the Python twins, and after
each step compares every observable: ``vars()`` and the class of every
owner, what this thread and another thread read, the registry's entries for
each target (kind, original, what is installed, the stack), and what
``active()`` lists. Values are compared through the map between the worlds'
corresponding objects.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from _threads import in_other_thread
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, invariant, rule

import patchscope
from patchscope import _accel, _group, _redirect, _registry
from patchscope._resolve import ABSENT
from patchscope.testing import _snapshot

pytestmark = pytest.mark.skipif(
    not _accel.ACCELERATED, reason="needs the C accelerator: there is one twin without it"
)


class Token:
    """An original or replacement value; its label ties the twin worlds together."""

    def __init__(self, label: str) -> None:
        self.label = label

    def __repr__(self) -> str:
        return f"<{self.label}>"


def _returns(label: str) -> Callable[..., str]:
    def fn(*args: object) -> str:
        return label

    fn.__qualname__ = label
    return fn


class Replacement:
    """What constructions build."""

    def __init__(self, *args: object) -> None:
        self.args = args


class World:
    """One set of targets, and the redirects of them (the same in both worlds)."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        mod = types.ModuleType(f"parity_{tag}")
        mod.attr = Token("mod.attr")
        mod.other = Token("mod.other")

        class Base:
            plain = Token("Base.plain")
            inherited = Token("Base.inherited")
            sm = staticmethod(_returns("Base.sm"))
            prop = property(_returns("Base.prop"), lambda self, v: None)

        class Sub(Base):
            pass

        class Built:
            def __init__(self, *args: object) -> None:
                self.args = args

        obj = Base()
        obj.attr = Token("obj.attr")
        self.mod, self.base, self.sub, self.built, self.obj = mod, Base, Sub, Built, obj
        self.owners: list[Any] = [mod, Base, Sub, Built, obj]
        # (owner, name, make-replacement, create, context allowed)
        targets: list[tuple[Any, str, Callable[[str], object], bool, bool]] = [
            (mod, "attr", Token, False, True),
            (mod, "other", Token, False, True),
            (mod, "ghost", Token, True, True),
            (Base, "plain", Token, False, True),
            (Base, "sm", lambda t: staticmethod(_returns(t)), False, True),
            (Base, "prop", lambda t: property(_returns(t)), False, True),
            (Sub, "inherited", Token, False, True),
            (obj, "attr", Token, False, False),
        ]
        self.redirects: list[patchscope.Redirect] = []
        self.labels: dict[int, str] = {}  # id(value) -> label, for comparing worlds
        for owner, name, make, create, context_ok in targets:
            for scope in ("process", "context") if context_ok else ("process",):
                for i in range(2):
                    value = make(f"{name}#{scope[0]}{i}")
                    self.labels[id(value)] = f"{type(owner).__name__}.{name}#{scope[0]}{i}"
                    self.redirects.append(
                        patchscope.redirect_attr(owner, name, value, create=create, scope=scope)
                    )
        for scope in ("process", "context"):
            self.redirects.append(patchscope.redirect_construction(Built, Replacement, scope=scope))
        self.redirects.append(
            patchscope.combine(self.redirects[0], self.redirects[6], self.redirects[-1])
        )
        for owner in self.owners:
            for key, value in vars(owner).items():
                self.labels.setdefault(id(value), f"original {key}")

    def label(self, value: object) -> object:
        """What *value* is, in terms both worlds share."""
        if value is ABSENT:
            return "<absent>"
        if id(value) in self.labels:
            return self.labels[id(value)]
        name = type(value).__name__
        if name in ("ClassSlot", "DataClassSlot", "_PyClassSlot", "_PyDataClassSlot"):
            return f"slot {value.name}"  # type: ignore[attr-defined]
        if isinstance(value, staticmethod) and type(value.__func__).__name__ == "Dispatcher":
            return "dispatcher"
        if isinstance(value, types.MethodType):
            return ("bound", self.label(value.__func__))
        if isinstance(value, (str, int, type(None))):
            return value
        if isinstance(value, type):
            return ("class", value.__name__)
        return ("other", type(value).__name__)

    def observe(self) -> list[object]:
        """Everything the state shows: vars, classes, reads here and elsewhere, registry."""
        seen: list[object] = []
        for owner in self.owners:
            kind = type(owner)
            seen.append(("class", kind.__name__, kind in (types.ModuleType, type)))
            seen.append(sorted((k, self.label(v)) for k, v in vars(owner).items()))
        seen.append(self._reads())
        seen.append(in_other_thread(self._reads))
        for owner in self.owners:
            for entry in list(_registry.entries.values()):
                if entry.target is owner:
                    seen.append(
                        (
                            entry.name,
                            entry.kind,
                            self.label(entry.original),
                            self.label(entry.installed),
                            [(a.open, a._ctx, self.label(a._value)) for a in entry.stack],
                        )
                    )
        seen.append(
            sorted(
                (type(a.target).__name__, a.name, a.scope, a.open)
                for a in patchscope.active()
                if any(a.target is o for o in self.owners)
            )
        )
        return seen

    def _reads(self) -> list[object]:
        reads: list[object] = []
        for owner, name in [
            (self.mod, "attr"),
            (self.mod, "other"),
            (self.mod, "ghost"),
            (self.base, "plain"),
            (self.base, "sm"),
            (self.sub, "inherited"),
            (self.obj, "attr"),
            (self.obj, "prop"),
        ]:
            try:
                value = getattr(owner, name)
            except AttributeError:
                value = ABSENT
            reads.append(self.label(value))
        reads.append(type(self.built()).__name__)
        return reads


class Twin:
    """The operations of one implementation."""

    def __init__(
        self,
        activate: Callable[..., Any],
        enter: Callable[..., Any],
        exit_: Callable[..., Any],
        stop: Callable[[Any], None],
        group_activate: Callable[..., Any],
    ) -> None:
        self.activate, self.enter, self.exit, self.stop = activate, enter, exit_, stop
        self.group_activate = group_activate

    def start(self, redirect: Any) -> Any:
        code = self.start.__code__
        if isinstance(redirect, _group.Combined):
            return self.group_activate(redirect, code, 0)
        return self.activate(redirect, code, 0)

    def hold(self, redirect: Any) -> Iterator[None]:
        """A with-block held open in a generator's frame: next() enters, next() again exits."""
        self.enter(redirect)
        yield
        self.exit(redirect, None, None, None)


def _py_stop(handle: Any) -> None:
    if isinstance(handle, patchscope.ActivationGroup):
        for part in reversed(handle._parts):
            _py_stop(part)
    else:
        _registry._py_exit(handle)


def _c_stop(handle: Any) -> None:
    handle.stop()


def _c_group_enter(group: Any) -> Any:
    return _accel.speedups.GroupCore._c_with_enter(group)


def _c_group_exit(group: Any, *exc: object) -> Any:
    return _accel.speedups.GroupCore._c_with_exit(group, *exc)


def _c_enter(redirect: Any) -> Any:
    if isinstance(redirect, _group.Combined):
        return _accel.speedups.GroupCore._c_with_enter(redirect)
    return _accel.speedups.RedirectCore._c_with_enter(redirect)


def _c_exit(redirect: Any, *exc: object) -> Any:
    if isinstance(redirect, _group.Combined):
        return _accel.speedups.GroupCore._c_with_exit(redirect, *exc)
    return _accel.speedups.RedirectCore._c_with_exit(redirect, *exc)


def _py_enter(redirect: Any) -> Any:
    if isinstance(redirect, _group.Combined):
        return _redirect._generic_enter(redirect)
    return _redirect._py_with_enter(redirect)


def _py_exit(redirect: Any, *exc: object) -> Any:
    if isinstance(redirect, _group.Combined):
        return _redirect._generic_exit(redirect, *exc)
    return _redirect._py_with_exit(redirect, *exc)


def _py_group_activate(group: Any, code: Any, lasti: int) -> Any:
    handles = [
        _redirect._py_activate(part, code, lasti)
        if not isinstance(part, _group.Combined)
        else _py_group_activate(part, code, lasti)
        for part in group._parts
    ]
    return patchscope.ActivationGroup(handles, group._value)


C_TWIN = Twin(
    lambda r, code, lasti: (
        _accel.speedups.RedirectCore._c_activate(r, code, lasti) if _accel.ACCELERATED else None
    ),
    _c_enter,
    _c_exit,
    _c_stop,
    lambda g, code, lasti: (
        _accel.speedups.GroupCore._c_activate(g, code, lasti) if _accel.ACCELERATED else None
    ),
)
PY_TWIN = Twin(_redirect._py_activate, _py_enter, _py_exit, _py_stop, _py_group_activate)

N_REDIRECTS = len(World("count").redirects)


class ParityMachine(RuleBasedStateMachine):
    """The same operations on two worlds, through the two twins."""

    handles = Bundle("handles")
    holds = Bundle("holds")

    def __init__(self) -> None:
        super().__init__()
        self.worlds = (World("c"), World("py"))
        self.twins = (C_TWIN, PY_TWIN)

    def _both(self, do: Callable[[World, Twin], Any]) -> tuple[Any, Any]:
        return tuple(do(w, t) for w, t in zip(self.worlds, self.twins, strict=True))  # type: ignore[return-value]

    @rule(target=handles, i=st.integers(0, N_REDIRECTS - 1))
    def start(self, i: int) -> Any:
        """start() of the same redirect in both worlds."""
        return self._both(lambda w, t: t.start(w.redirects[i]))

    @rule(pair=consumes(handles))
    def stop(self, pair: tuple[Any, Any]) -> None:
        """stop() of a pair of handles, each through its own twin."""
        for handle, twin in zip(pair, self.twins, strict=True):
            twin.stop(handle)

    @rule(target=holds, i=st.integers(0, N_REDIRECTS - 1))
    def enter(self, i: int) -> Any:
        """A with-block of the same redirect entered in both worlds (held open)."""
        gens = self._both(lambda w, t: t.hold(w.redirects[i]))
        for gen in gens:
            next(gen)
        return gens

    @rule(pair=consumes(holds))
    def leave(self, pair: tuple[Iterator[None], Iterator[None]]) -> None:
        """The with-blocks end (in whatever order the bundle gives)."""
        for gen in pair:
            with pytest.raises(StopIteration):
                next(gen)

    @rule(i=st.integers(0, N_REDIRECTS - 1))
    def rebind(self, i: int) -> None:
        """Someone else rebinds the name of a redirect's target (a conflict)."""
        for world in self.worlds:
            redirect = world.redirects[i]
            if isinstance(redirect, _redirect.AttrRedirect) and not isinstance(
                redirect._target, patchscope.ActivationGroup
            ):
                value = Token(f"intruder {redirect._name}")
                world.labels[id(value)] = value.label
                try:
                    setattr(redirect._target, redirect._name, value)
                except (AttributeError, TypeError):
                    pass

    @invariant()
    def same_state(self) -> None:
        """Every observable is the same in both worlds."""
        c_world, py_world = self.worlds
        assert c_world.observe() == py_world.observe()

    def teardown(self) -> None:
        """End everything; both worlds end the same, with nothing of ours left."""
        for world in self.worlds:
            for act in patchscope.active():
                if any(act.target is o for o in world.owners):
                    act.stop()
        c_world, py_world = self.worlds
        assert c_world.observe() == py_world.observe()


ParityMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestParity = pytest.mark.filterwarnings("ignore::patchscope.RedirectConflictWarning")(
    ParityMachine.TestCase
)


_NAMESPACE_EDITS: dict[str, Callable[[dict[str, object]], None]] = {
    "unchanged": lambda d: None,
    "rebound": lambda d: d.update(b=Token("other")),
    "rebound-equal": lambda d: d.update(n=10**30 + int("0")),
    "added": lambda d: d.update(z=1),
    "removed": lambda d: d.pop("a"),
    "same-value-other-name": lambda d: (d.pop("c"), d.update(d=d["b"])),
    "reordered": lambda d: d.update(a=d.pop("a")),
}


@pytest.mark.parametrize("edit", list(_NAMESPACE_EDITS))
def test_same_namespace_twins_agree(edit: str) -> None:
    """The C and Python quick checks of a snapshot's namespace give the same answer."""
    shared = Token("shared")
    current: dict[str, object] = {"a": shared, "b": Token("b"), "n": 10**30, "c": shared}
    saved, names = dict(current), list(current)
    _NAMESPACE_EDITS[edit](current)
    c_answer = _accel.speedups.same_namespace(current, saved, names)
    assert c_answer is (edit == "unchanged")
    assert c_answer is _snapshot._py_same_namespace(current, saved, names)
    # A class's namespace is a mappingproxy: C refuses it, Python serves it.
    assert _accel.speedups.same_namespace(vars(Token), dict(vars(Token)), list(vars(Token))) is None


class Name(str):
    """A str subclass: the same dict key as an equal str, but not an exact str."""


#: Names a namespace may hold: strs, and big ints (a module's dict takes any key).
_KEYS = st.one_of(st.text(min_size=2, max_size=3), st.integers(2**70, 2**70 + 3))


def _equal_key(key: object, how: str) -> object:
    """*key* itself, or an equal key (so the same dict entry) that is another object."""
    if how == "same":
        return key
    if isinstance(key, int):
        return int(str(key))
    assert isinstance(key, str)
    return Name(key) if how == "subclass" else key[:1] + key[1:]


@st.composite
def _namespaces(draw: st.DrawFn) -> tuple[dict[object, object], dict[object, object]]:
    """A current and a saved namespace: the saved names, some as equal other objects, edited."""
    values = [Token(f"value {i}") for i in range(3)]
    saved: dict[object, object] = {
        key: draw(st.sampled_from(values)) for key in draw(st.lists(_KEYS, unique=True))
    }
    hows = st.sampled_from(["same", "copy", "subclass"])
    current: dict[object, object] = {
        _equal_key(key, draw(hows)): value for key, value in saved.items()
    }
    edits = st.lists(st.sampled_from(["rebind", "remove", "add", "move"]), max_size=2)
    for edit in draw(edits):
        if edit == "add" or not current:
            current[draw(_KEYS)] = draw(st.sampled_from(values))
            continue
        key = draw(st.sampled_from(list(current)))
        if edit == "rebind":
            current[key] = draw(st.sampled_from(values))
        elif edit == "remove":
            del current[key]
        else:
            current[key] = current.pop(key)
    return current, saved


@given(_namespaces())
def test_same_namespace_twins_agree_on_generated_namespaces(
    namespaces: tuple[dict[object, object], dict[object, object]],
) -> None:
    """The C and Python quick checks agree, also on equal keys that are other objects."""
    current, saved = namespaces
    names = list(saved)
    c_answer = _accel.speedups.same_namespace(current, saved, names)
    assert c_answer is _snapshot._py_same_namespace(current, saved, names)  # type: ignore[arg-type]
