"""Parity: the C build and the pure-Python build behave the same, step for step.

With the accelerator built, ``tests/_pure.py`` loads a second copy of the
package in pure Python (``patchscope_pure``: its own registry, lock, slot
classes and caches), so both real builds run in one process. A hypothesis
state machine builds two identical worlds of targets, one per build, applies
the same operations to both through public API only (``redirect_attr`` in
both scopes and by dotted path, ``redirect_construction``, ``combine``,
``during``, ``start``/``stop``, ``with`` blocks held open and ended out of
order, decorated functions and generators, decorated coroutines and async
generators run by asyncio beside another task, decorated classes and their
subclasses constructed, conflicts, bad targets and names, failing writes and
restores, conflict warnings turned into errors), and compares everything a
user can observe, through the map between the worlds' corresponding
objects: what each operation returned or raised (type, message, and the
same of its ``__cause__`` and of the ``__context__`` a traceback shows),
the warnings it raised (category, message, where they point),
``vars()`` and ``type()`` of every owner, what this thread and another
thread read, and what ``active()`` lists. Nothing here re-implements either
build: a rule broken in one of them shows as a difference.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import re
import sys
import types
import warnings
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any

import pytest
from _pure import load as load_pure
from _threads import in_other_thread
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule

import patchscope
from patchscope.testing import _snapshot

pytestmark = pytest.mark.skipif(
    not patchscope.ACCELERATED, reason="needs the C accelerator: there is one twin without it"
)

#: The pure-Python build (None without the accelerator: nothing to compare with).
PURE: Any = load_pure() if patchscope.ACCELERATED else None


#: Where the builds' messages are known to differ, and what both are compared as.
#: Creating an attribute on an object without a ``__dict__``: the C twin
#: reports its own TypeError as the target's refusal, the Python twin the
#: AttributeError that reading ``__dict__`` raised; each chains its own as
#: the ``__cause__`` (compared as "(Type: message)", so the same pattern
#: applies). The rest of the message (target, attribute, fix) is compared
#: as it is.
KNOWN_DIFFERENCES = [
    (
        r"\((TypeError: patchscope: the target has no __dict__|"
        r"AttributeError: '\w+' object has no attribute '__dict__')\)",
        "(the target has no __dict__)",
    ),
]


class Token:
    """An original or replacement value; its label ties the twin worlds together."""

    def __init__(self, label: str) -> None:
        self.label = label

    def __repr__(self) -> str:
        return f"<{self.label}>"


class Locked(Exception):
    """What a fussy object's setattr raises while it is locked."""


class World:
    """One build's set of targets and redirects of them (the same in both worlds)."""

    def __init__(self, ps: Any, tag: str) -> None:
        self.ps = ps
        self.tag = tag
        self.labels: dict[int, str] = {}
        self.keep: list[object] = []  # everything labelled stays alive (ids stay unique)
        self.strict = False  # conflict warnings are errors
        world = self

        mod = types.ModuleType(f"parity_{tag}_mod")
        mod.attr = self.token("mod.attr")
        mod.other = self.token("mod.other")

        def module_getattr(name: str) -> object:
            if name == "lazy":
                return world.token("mod.lazy")
            raise AttributeError(f"module {mod.__name__!r} has no attribute {name!r}")

        mod.__getattr__ = self.name(module_getattr, "mod.__getattr__")  # type: ignore[method-assign]
        self.modname = mod.__name__
        sys.modules[self.modname] = mod

        def fn(label: str) -> Callable[..., str]:
            def f(*args: object) -> str:
                return label

            f.__qualname__ = label
            self.name(f, label)
            return f

        class Base:
            plain = self.token("Base.plain")
            inherited = self.token("Base.inherited")
            sm = staticmethod(fn("Base.sm"))
            cm = classmethod(fn("Base.cm"))
            prop = property(fn("Base.prop"))

            def method(self) -> object:
                return ("method", world.label(getattr(mod, "attr", None)))

            world.name(method, "Base.method")

        class Sub(Base):
            pass

        class Built:
            def __init__(self, *args: object) -> None:
                self.args = args

        class SubBuilt(Built):
            pass

        class Replacement:
            def __init__(self, *args: object) -> None:
                self.args = args

        class Fussy:
            """Accepts writes until it is locked; then every write and delete fails."""

            locked = False

            def __setattr__(self, name: str, value: object) -> None:
                if type(self).locked:
                    raise Locked(f"{name} is locked")
                object.__setattr__(self, name, value)

            def __delattr__(self, name: str) -> None:
                if type(self).locked:
                    raise Locked(f"{name} is locked")
                object.__delattr__(self, name)

        class Slotted:
            __slots__ = ("slot",)

        @dataclasses.dataclass(frozen=True)
        class Frozen:
            field: int = 0

        obj = Base()
        obj.attr = self.token("obj.attr")
        fussy = Fussy()
        fussy.attr = self.token("fussy.attr")
        slotted = Slotted()
        slotted.slot = self.token("slotted.slot")
        self.mod, self.base, self.sub, self.built, self.sub_built = mod, Base, Sub, Built, SubBuilt
        self.replacement, self.fussy_cls, self.obj, self.fussy = Replacement, Fussy, obj, fussy
        self.slotted, self.frozen = slotted, Frozen()
        self.owners: list[Any] = [mod, Base, Sub, Built, SubBuilt, obj, fussy, slotted, self.frozen]
        for i, owner in enumerate(self.owners):
            self.name(owner, f"owner {i}")
            for key, value in vars(owner).items() if hasattr(owner, "__dict__") else ():
                self.name(value, f"original {i}.{key}")
        self.name(Replacement, "Replacement")
        self.reads_of: list[tuple[Any, str]] = [
            (mod, "attr"),
            (mod, "other"),
            (mod, "ghost"),
            (mod, "lazy"),
            (Base, "plain"),
            (Base, "sm"),
            (Base, "cm"),
            (Sub, "plain"),
            (Sub, "inherited"),
            (obj, "attr"),
            (obj, "prop"),
            (obj, "plain"),
            (fussy, "attr"),
            (slotted, "slot"),
        ]
        self.redirects: dict[int, Any] = {}
        self.classes: dict[int, dict[str, type]] = {}

    def redirect(self, i: int) -> Any:
        """Catalogue redirect *i* of this world (made once, unless making it raises)."""
        if i not in self.redirects:
            self.redirects[i] = CATALOGUE[i][1](self)
        return self.redirects[i]

    def r(self, label: str) -> Any:
        """The catalogue redirect called *label*."""
        return self.redirect(CATALOGUE_INDEX[label])

    def decorated_classes(self, i: int) -> dict[str, type]:
        """Classes decorated with redirect *i* (made once), and a subclass of one, by kind."""
        if i not in self.classes:
            redirect = self.redirect(i)
            world = self

            class Made:
                def __init__(self, *args: object) -> None:
                    self.args = args
                    self.seen = world.reads()

            class OnlyNew:
                def __new__(cls, *args: object) -> OnlyNew:
                    made = super().__new__(cls)
                    made.seen = world.reads()  # type: ignore[attr-defined]
                    return made

            class NoInit:
                pass

            made = redirect(Made)
            kinds: dict[str, type] = {
                "__init__": made,
                "subclass": type("SubMade", (made,), {}),
                "only __new__": redirect(OnlyNew),
                "no __init__": redirect(NoInit),
            }
            self.classes[i] = kinds
        return self.classes[i]

    # -- labels -----------------------------------------------------------

    def token(self, label: str) -> Token:
        """A new value labelled *label* (the same label in the twin world)."""
        return self.name(Token(label), label)

    def name(self, value: Any, label: str) -> Any:
        """Label *value* (the first label given to an object stays)."""
        self.labels.setdefault(id(value), label)
        self.keep.append(value)
        return value

    def label(self, value: object) -> object:
        """What *value* is, in terms both worlds share."""
        if id(value) in self.labels:
            return self.labels[id(value)]
        if isinstance(value, str):
            return self.norm(value)
        if isinstance(value, (int, bool, type(None))):
            return value
        if isinstance(value, (tuple, list)):
            return tuple(self.label(v) for v in value)
        if isinstance(value, Hold):
            return ("hold", self.label(value.value))
        if isinstance(value, types.MethodType):
            return ("bound", self.label(value.__func__))
        if isinstance(value, (staticmethod, classmethod)):
            return (type(value).__name__, self.label(value.__func__))
        if isinstance(value, type):
            return ("class", value.__qualname__)
        if isinstance(value, (self.ps.Activation, self.ps.ActivationGroup)):
            return self.label_handle(value)
        return ("other", _kind(type(value).__name__))

    def label_handle(self, handle: Any) -> object:
        """A handle: its leaf activations (target, name, scope, replacement, open)."""
        return tuple(
            (self.label(a.target), a.name, a.scope, self.label(a.replacement), a.open)
            for a in handle.activations
        )

    def norm(self, text: str) -> str:
        """*text* with this world's names (and addresses) made the twin world's."""
        text = text.replace(PURE.__name__, "patchscope").replace(self.modname, "parity_W_mod")
        text = re.sub(r"0x[0-9a-fA-F]+", "0x?", text)
        for pattern, same in KNOWN_DIFFERENCES:
            text = re.sub(pattern, same, text)
        return text

    # -- what is observable ----------------------------------------------

    def reads(self) -> list[object]:
        """What this thread reads of every target, and what constructions build."""
        seen: list[object] = []
        for owner, name in self.reads_of:
            try:
                seen.append(self.label(getattr(owner, name)))
            except AttributeError:
                seen.append("<absent>")
        for owner, name in [(self.obj, "method"), (self.base, "sm"), (self.base, "cm")]:
            seen.append(self.call(lambda owner=owner, name=name: getattr(owner, name)()))
        for cls in (self.built, self.sub_built):
            seen.append(self.call(lambda cls=cls: (type(made := cls(1)).__qualname__, made.args)))
        return seen

    def call(self, do: Callable[[], object]) -> object:
        """What ``do()`` returns, or the type of what it raised."""
        try:
            return self.label(do())
        except Exception as exc:
            return ("raised", type(exc).__name__)

    def state(self) -> list[object]:
        """Everything the state shows: classes and vars of owners, reads here and elsewhere."""
        seen: list[object] = []
        for owner in self.owners:
            kind = type(owner)
            seen.append((_kind(kind.__name__), kind in (types.ModuleType, type)))
            if hasattr(owner, "__dict__"):
                seen.append([(k, self.label(v)) for k, v in vars(owner).items()])
        seen.append(self.watched(self.reads))
        seen.append(in_other_thread(lambda: self.watched(self.reads)))
        seen.append(self.active())
        return seen

    def active(self) -> list[object]:
        """What ``active()`` lists of this world's targets, in its order."""
        return [
            (self.label(a.target), a.name, a.scope, self.label(a.replacement), a.open)
            for a in self.ps.active()
            if any(a.target is owner for owner in self.owners)
        ]

    @contextlib.contextmanager
    def watching(self) -> Iterator[list[warnings.WarningMessage]]:
        """Warnings recorded, and this world's conflict warnings errors while it is strict.

        Everything either world does or reads runs under it: a filter from
        outside that names one build's warning class (the suite's
        ``error::patchscope.RedirectConflictWarning``) would otherwise make
        the same warning an error in one world and a warning in the other.
        """
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if self.strict:
                warnings.simplefilter("error", self.ps.RedirectConflictWarning)
            yield caught

    def shown(self, caught: list[warnings.WarningMessage]) -> list[object]:
        """The warnings *caught*: category, message and where they point, in shared terms."""
        return [
            (w.category.__name__, self.norm(str(w.message)), os.path.basename(w.filename))
            for w in caught
        ]

    def watched(self, do: Callable[[], object]) -> tuple[object, object]:
        """What ``do()`` returns, and the warnings it raised (see :meth:`watching`)."""
        with self.watching() as caught:
            result = do()
        return result, self.shown(caught)

    def outcome(self, do: Callable[[], object]) -> tuple[object, object]:
        """``do()``'s result or exception, and the warnings it raised, in shared terms."""
        with self.watching() as caught:
            try:
                result: object = ("returned", self.label(do()))
            except StopIteration:
                result = ("stopped",)
            except Exception as exc:
                result = ("raised", *self.exception(exc))
        return result, self.shown(caught)

    def exception(self, exc: BaseException, depth: int = 0) -> tuple[object, ...]:
        """*exc* in shared terms, with what it was raised from or during.

        "(Type: message)", whether the type is the package's, and the same of
        its ``__cause__`` and of the ``__context__`` its traceback shows (none
        where ``raise ... from`` hides it).
        """
        kind = type(exc)
        ours = kind.__module__.split(".")[0] in ("patchscope", PURE.__name__)
        chained: list[object] = []
        for link in (exc.__cause__, None if exc.__suppress_context__ else exc.__context__):
            if link is None or depth == 3:  # deep enough, and cycles end
                chained.append(None)
            else:
                chained.append(self.exception(link, depth + 1))
        return (self.norm(f"({kind.__name__}: {exc})"), ours, *chained)


def _kind(name: str) -> str:
    """A type's name, the same for the C twin and the Python one (``_PyClassSlot``)."""
    return name.removeprefix("_Py")


# ---------------------------------------------------------------------------
# The catalogue: every redirect both worlds make, by index.


def _attr(
    label: str, owner: str, name: str, *, scope: str = "process", create: bool = False
) -> Callable[[World], Any]:
    """``redirect_attr(world.<owner>, name, <a value labelled label>, ...)``."""
    return lambda w: w.ps.redirect_attr(
        getattr(w, owner), name, w.token(label), create=create, scope=scope
    )


def _path(label: str, path: str, name: str, scope: str) -> Callable[[World], Any]:
    """``redirect_attr("<the world's module>.<path>", name, ...)``: resolved at each activation."""
    return lambda w: w.ps.redirect_attr(f"{w.modname}{path}", name, w.token(label), scope=scope)


def _descriptor(kind: type, label: str, scope: str) -> Callable[[World], Any]:
    """``Base.<sm|cm|prop>`` redirected to another staticmethod, classmethod or property."""
    name = {staticmethod: "sm", classmethod: "cm", property: "prop"}[kind]
    return lambda w: w.ps.redirect_attr(
        w.base, name, kind(w.name(lambda *args: label, f"{label} fn")), scope=scope
    )


def _during(owner: str, name: str, scope: str) -> Callable[[World], Any]:
    """``during(world.<owner>, name, <mod.attr redirected in scope>)``."""
    return lambda w: w.ps.during(
        getattr(w, owner),
        name,
        w.ps.redirect_attr(w.mod, "attr", w.token(f"during {owner}.{name} {scope}"), scope=scope),
    )


def _group(*labels: str) -> Callable[[World], Any]:
    """``combine()`` of the catalogue redirects called *labels*."""
    return lambda w: w.ps.combine(*(w.r(label) for label in labels))


#: (what it is, how a world makes it). Each is made once per world, when first
#: used, and reused (so with-blocks of one Redirect pair up); one whose
#: construction raises is made again at each use.
CATALOGUE: list[tuple[str, Callable[[World], Any]]] = []
for _scope in ("process", "context"):
    _s = _scope[0]
    CATALOGUE += [
        (f"mod.attr {_s}0", _attr(f"mod.attr {_s}0", "mod", "attr", scope=_scope)),
        (f"mod.attr {_s}1", _attr(f"mod.attr {_s}1", "mod", "attr", scope=_scope)),
        (f"Base.plain {_s}0", _attr(f"Base.plain {_s}0", "base", "plain", scope=_scope)),
        (f"Base.plain {_s}1", _attr(f"Base.plain {_s}1", "base", "plain", scope=_scope)),
        (f"mod.ghost {_s}", _attr(f"mod.ghost {_s}", "mod", "ghost", scope=_scope, create=True)),
        (f"mod.lazy {_s}", _attr(f"mod.lazy {_s}", "mod", "lazy", scope=_scope)),
        (f"Sub.inherited {_s}", _attr(f"Sub.inherited {_s}", "sub", "inherited", scope=_scope)),
        (f"Base.sm {_s}", _descriptor(staticmethod, f"sm {_s}", _scope)),
        (f"Base.cm {_s}", _descriptor(classmethod, f"cm {_s}", _scope)),
        (f"Base.prop {_s}", _descriptor(property, f"prop {_s}", _scope)),
        (f"path mod.other {_s}", _path(f"path mod.other {_s}", "", "other", _scope)),
        (f"path Base.plain {_s}", _path(f"path Base.plain {_s}", ".Base", "plain", _scope)),
        (
            f"construction {_s}",
            lambda w, sc=_scope: w.ps.redirect_construction(w.built, w.replacement, scope=sc),
        ),
        (
            f"construction+sub {_s}",
            lambda w, sc=_scope: w.ps.redirect_construction(
                w.built, w.replacement, scope=sc, include_subclasses=True
            ),
        ),
        (f"during Base.method {_s}", _during("base", "method", _scope)),
    ]
CATALOGUE += [
    ("obj.attr", _attr("obj.attr r", "obj", "attr")),
    ("obj.plain", _attr("obj.plain r", "obj", "plain")),
    ("fussy.attr", _attr("fussy.attr r", "fussy", "attr")),
    ("fussy.new", _attr("fussy.new r", "fussy", "new", create=True)),
    ("slotted.slot", _attr("slotted r", "slotted", "slot")),
    ("during obj.method", _during("obj", "method", "context")),
    ("during Built.__init__", _during("built", "__init__", "context")),
    # Groups, of groups, and groups whose parts fail half way.
    ("combine", _group("mod.attr p0", "Base.plain p1", "construction c")),
    ("combine ctx", _group("mod.attr c0", "Base.plain c0", "Base.sm c")),
    ("combine of combine", _group("combine", "mod.attr c1", "obj.attr")),
    ("combine failing", _group("mod.attr p1", "fussy.attr", "missing")),
    ("combine failing late", _group("combine ctx", "ctx on instance")),
    ("combine paths", _group("path mod.other p", "mod.ghost p")),
    # Bad targets, names and arguments: each must fail the same way, changing nothing.
    ("missing", _attr("missing r", "mod", "missing")),
    ("ctx on instance", _attr("ctx obj r", "obj", "attr", scope="context")),
    ("frozen", _attr("frozen r", "frozen", "field")),
    ("no dict", _attr("no dict r", "slotted", "other", create=True)),
    ("bad path", _path("bad path r", ".Nope", "x", "process")),
    ("bad path syntax", lambda w: w.ps.redirect_attr("not a path", "x", w.token("r"))),
    ("bad name", _attr("r", "mod", "not valid")),
    ("keyword name", _attr("r", "mod", "class")),
    ("int name", lambda w: w.ps.redirect_attr(w.mod, 3, w.token("r"))),
    ("bad scope", _attr("r", "mod", "attr", scope="thread")),
    ("construct builtin", lambda w: w.ps.redirect_construction(int, w.replacement)),
    ("construct non-class", lambda w: w.ps.redirect_construction(w.obj, w.replacement)),
    ("construct non-callable", lambda w: w.ps.redirect_construction(w.built, 3)),
    ("combine non-redirect", lambda w: w.ps.combine(w.r("mod.attr p0"), "mod.attr")),
    ("during missing", lambda w: w.ps.during(w.base, "nope", w.r("mod.attr p0"))),
    ("during nothing", lambda w: w.ps.during(w.base, "method")),
]
CATALOGUE_INDEX = {label: i for i, (label, _) in enumerate(CATALOGUE)}
assert len(CATALOGUE_INDEX) == len(CATALOGUE)
N = len(CATALOGUE)


def _probe(w: World) -> Callable[[], object]:
    def probe() -> object:
        return w.reads()

    return probe


def _steps(w: World) -> Callable[[], Iterator[object]]:
    def steps() -> Iterator[object]:
        yield w.reads()
        yield w.reads()

    return steps


def _coroutine(w: World) -> Callable[[], Coroutine[Any, Any, object]]:
    async def probe() -> object:
        first = w.reads()
        await asyncio.sleep(0)  # suspended: the redirect stays active (the other task reads)
        return (first, w.reads())

    return probe


def _async_steps(w: World) -> Callable[[], AsyncIterator[object]]:
    async def steps() -> AsyncIterator[object]:
        yield w.reads()
        await asyncio.sleep(0)
        yield w.reads()

    return steps


async def _beside(first: Coroutine[Any, Any, object], w: World) -> object:
    """*first* run as a task beside another that reads while *first* is suspended.

    The other task is made in this context (not the one *first* activates
    its redirect in): it sees a process-scope redirect of *first*, never a
    context-scope one. What *first* raised is raised here, once both ended.
    """

    async def other() -> object:
        seen = w.reads()
        await asyncio.sleep(0)
        return seen

    done = await asyncio.gather(first, other(), return_exceptions=True)
    for result in done:
        if isinstance(result, BaseException):
            raise result
    return done


async def _consume(steps: AsyncIterator[object], w: World) -> object:
    """Every item of *steps*, each with what its caller reads between items."""
    return [(item, w.reads()) async for item in steps]


#: How a with-block is entered: ``__enter__`` called by hand (exited by hand
#: from another frame), through ``ExitStack.enter_context``, or by a with
#: statement in a generator suspended inside the block.
HOW = ["by hand", "exit stack", "with"]


class Hold:
    """A with-block of a redirect held open, entered one of several ways, to be left later."""

    def __init__(self, w: World, redirect: Any, how: str) -> None:
        self.redirect, self.how = redirect, how
        self.stack: contextlib.ExitStack | None = None
        self.gen: Iterator[object] | None = None
        self.left = False
        if how == "by hand":
            self.value = redirect.__enter__()
        elif how == "exit stack":
            self.stack = contextlib.ExitStack()
            self.value = self.stack.enter_context(redirect)
        else:  # a real with statement, suspended in a generator's frame
            self.gen = self._held()
            self.value = next(self.gen)

    def _held(self) -> Iterator[object]:
        with self.redirect as value:
            yield value
        yield None

    def leave(self) -> object:
        """End the block (again: nothing more happens)."""
        if self.left:
            return "left already"
        self.left = True
        if self.stack is not None:
            self.stack.close()
        elif self.gen is not None:
            next(self.gen)
        else:
            self.redirect.__exit__(None, None, None)
        return "left"


def _differ(c_seen: object, py_seen: object) -> str:
    """The first place where what the two builds show differs."""
    if isinstance(c_seen, (list, tuple)) and isinstance(py_seen, (list, tuple)):
        for i, (a, b) in enumerate(zip(c_seen, py_seen, strict=False)):
            if a != b:
                return f"[{i}] " + _differ(a, b)
    return f"\n  C:    {c_seen!r}\n  pure: {py_seen!r}"


def _close(held: Any) -> object:
    """End a with-block held open, or close a generator (what was left open at the end)."""
    if isinstance(held, Hold):
        return held.leave()
    if held is not None:
        held.close()
    return None


class ParityMachine(RuleBasedStateMachine):
    """The same public operations on two worlds, one per build."""

    handles = Bundle("handles")
    holds = Bundle("holds")
    generators = Bundle("generators")

    def __init__(self) -> None:
        super().__init__()
        self.worlds = (World(patchscope, "c"), World(PURE, "py"))
        self.open: list[tuple[Any, ...]] = []  # holds and generators, ended at teardown
        self.loop: asyncio.AbstractEventLoop | None = None  # made for the first coroutine

    def run(self, main: Coroutine[Any, Any, object]) -> object:
        """*main* run through by this machine's event loop (a task in a copy of this context)."""
        if self.loop is None:
            self.loop = asyncio.new_event_loop()
        return self.loop.run_until_complete(main)

    def _both(self, do: Callable[[World], object]) -> tuple[Any, ...]:
        """``do`` in each world; both must return or raise the same, with the same warnings."""
        outcomes = []
        results: list[Any] = []
        for world in self.worlds:
            box: list[Any] = []

            def run(world: World = world, box: list[Any] = box) -> object:
                box.append(do(world))
                return box[-1]

            outcomes.append(world.outcome(run))
            results.append(box[0] if box else None)
        assert outcomes[0] == outcomes[1], _differ(*outcomes)
        return tuple(results)

    @rule(target=handles, i=st.integers(0, N - 1))
    def start(self, i: int) -> tuple[Any, ...]:
        """``start()`` of the same redirect in both worlds."""
        return self._both(lambda w: w.redirect(i).start())

    @rule(pair=handles)
    def stop(self, pair: tuple[Any, ...]) -> None:
        """``stop()`` of a pair of handles, in any order, any number of times."""
        self._both(lambda w: None if (h := pair[self.worlds.index(w)]) is None else h.stop())

    @rule(target=holds, i=st.integers(0, N - 1), how=st.sampled_from(HOW))
    def enter(self, i: int, how: str) -> tuple[Any, ...]:
        """A with-block of the same redirect entered in both worlds and held open."""
        pair = self._both(lambda w: Hold(w, w.redirect(i), how))
        self.open.append(pair)
        return pair

    @rule(pair=holds)
    def leave(self, pair: tuple[Any, ...]) -> None:
        """The with-blocks end, in whatever order the bundle gives them."""
        self._both(lambda w: None if (h := pair[self.worlds.index(w)]) is None else h.leave())

    @rule(i=st.integers(0, N - 1))
    def call(self, i: int) -> None:
        """A function decorated with the redirect runs: what it reads inside."""
        self._both(lambda w: w.redirect(i)(_probe(w))())

    @rule(i=st.integers(0, N - 1), generator=st.booleans())
    def await_(self, i: int, generator: bool) -> None:
        """A decorated coroutine (or async generator) runs in asyncio beside another task.

        What it reads inside, across a suspension (a coroutine keeps its
        redirect for the whole call; an async generator only while its own
        code runs, so its caller reads without it between items), and what
        the other task reads while it is suspended.
        """

        def do(w: World) -> object:
            if generator:
                return self.run(_beside(_consume(w.redirect(i)(_async_steps(w))(), w), w))
            return self.run(_beside(w.redirect(i)(_coroutine(w))(), w))

        self._both(do)

    @rule(
        i=st.integers(0, N - 1),
        kind=st.sampled_from(["__init__", "subclass", "only __new__", "no __init__"]),
    )
    def construct(self, i: int, kind: str) -> None:
        """A class decorated with the redirect, or a subclass of one, is constructed.

        What is read while it is built (in ``__init__``, or in ``__new__``
        where the class has only that), and after.
        """

        def do(w: World) -> object:
            made = w.decorated_classes(i)[kind](2)
            return (type(made).__qualname__, getattr(made, "seen", None), w.reads())

        self._both(do)

    @rule(i=st.integers(0, N - 1))
    def inline(self, i: int) -> None:
        """A fresh redirect used inline, ``with make() as value:``: what is read inside."""

        def do(w: World) -> object:
            with CATALOGUE[i][1](w) as value:
                return (value, w.reads())

        self._both(do)

    @rule(target=generators, i=st.integers(0, N - 1))
    def generate(self, i: int) -> tuple[Any, ...]:
        """A generator function decorated with the redirect is called (not yet run)."""
        pair = (*self._both(lambda w: w.redirect(i)(_steps(w))()), i)
        self.open.append(pair)
        return pair

    @rule(i=st.integers(0, N - 1))
    def stray_exit(self, i: int) -> None:
        """``__exit__`` called by hand (it pairs with a with-block held open, or fails)."""
        self._both(lambda w: w.redirect(i).__exit__(None, None, None))

    @rule(pair=generators)
    def advance(self, pair: tuple[Any, ...]) -> None:
        """A decorated generator runs one step: what it reads inside."""
        self._both(lambda w: None if (g := pair[self.worlds.index(w)]) is None else next(g))

    @rule(
        owner=st.integers(0, 8),
        name=st.sampled_from(["attr", "plain", "ghost", "inherited", "sm", "__new__", "method"]),
        delete=st.booleans(),
    )
    def intrude(self, owner: int, name: str, delete: bool) -> None:
        """Someone else rebinds or deletes an attribute, maybe one that is redirected."""

        def do(w: World) -> None:
            target = w.owners[owner]
            if delete:
                delattr(target, name)
            else:
                setattr(target, name, w.token(f"intruder {owner}.{name}"))

        self._both(do)

    @rule(pair=handles, delete=st.booleans())
    def intrude_on(self, pair: tuple[Any, ...], delete: bool) -> None:
        """Someone else rebinds or deletes what a handle redirects (a conflict, if it is live)."""

        def do(w: World) -> None:
            handle = pair[self.worlds.index(w)]
            if handle is None or not handle.activations:
                return
            act = handle.activations[-1]
            if delete:
                delattr(act.target, act.name)
            else:
                setattr(act.target, act.name, w.token(f"intruder on {act.name}"))

        self._both(do)

    @rule(locked=st.booleans())
    def lock(self, locked: bool) -> None:
        """The fussy object starts (or stops) refusing writes and deletes."""
        for world in self.worlds:
            world.fussy_cls.locked = locked

    @rule(strict=st.booleans())
    def warnings_as_errors(self, strict: bool) -> None:
        """Conflict warnings become errors (or warnings again) for what follows."""
        for world in self.worlds:
            world.strict = strict

    @invariant()
    def same_state(self) -> None:
        """Every observable is the same in both worlds."""
        c_state, py_state = (world.state() for world in self.worlds)
        assert c_state == py_state, _differ(c_state, py_state)

    def teardown(self) -> None:
        """End everything; both worlds end the same, with nothing of theirs left active."""
        if self.loop is not None:
            self.loop.close()  # what ran in it has ended: nothing asynchronous is held open
        for world in self.worlds:
            world.fussy_cls.locked = False
            world.strict = False
        try:
            for pair in self.open:
                self._both(lambda w, pair=pair: _close(pair[self.worlds.index(w)]))
        finally:
            # Also after a difference: the next example (and the shrinker's
            # replays) starts with nothing of this one's active.
            for world in self.worlds:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", world.ps.RedirectConflictWarning)
                    for act in reversed(world.ps.active()):
                        if any(act.target is owner for owner in world.owners):
                            act.stop()
                sys.modules.pop(world.modname, None)
        c_state, py_state = (world.state() for world in self.worlds)
        assert c_state == py_state, _differ(c_state, py_state)
        assert self.worlds[0].active() == []


ParityMachine.TestCase.settings = settings(stateful_step_count=30)
TestParity = ParityMachine.TestCase


def test_a_filter_naming_one_build_treats_both_worlds_alike() -> None:
    """A warning filter that names one build's class does not split the worlds' reads.

    A during() wrapper that meets a conflict warns while the state is read;
    the suite's own filter makes ``patchscope.RedirectConflictWarning`` an
    error, which the pure world's warning class is not.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("error", category=patchscope.RedirectConflictWarning)
        machine = ParityMachine()
        machine.enter(i=CATALOGUE_INDEX["mod.attr p0"], how="by hand")
        machine.intrude(owner=0, name="attr", delete=False)
        machine.start(i=CATALOGUE_INDEX["during Base.method p"])
        machine.same_state()
        machine.teardown()


# ---------------------------------------------------------------------------
# The namespace quick check of snapshots (a C twin of a Python function).


_NAMESPACE_EDITS: dict[str, Callable[[dict[str, object]], None]] = {
    "unchanged": lambda d: None,
    "rebound": lambda d: d.update(b=Token("other")),
    "rebound-equal": lambda d: d.update(n=10**30 + int("0")),
    "added": lambda d: d.update(z=1),
    "removed": lambda d: d.pop("a"),
    "same-value-other-name": lambda d: (d.pop("c"), d.update(d=d["b"])),
    "reordered": lambda d: d.update(a=d.pop("a")),
}


def _c_same_namespace(*args: object) -> object:
    return patchscope._accel.speedups.same_namespace(*args)


@pytest.mark.parametrize("edit", list(_NAMESPACE_EDITS))
def test_same_namespace_twins_agree(edit: str) -> None:
    """The C and Python quick checks of a snapshot's namespace give the same answer."""
    shared = Token("shared")
    current: dict[str, object] = {"a": shared, "b": Token("b"), "n": 10**30, "c": shared}
    saved, names = dict(current), list(current)
    _NAMESPACE_EDITS[edit](current)
    c_answer = _c_same_namespace(current, saved, names)
    assert c_answer is (edit == "unchanged")
    assert c_answer is _snapshot._py_same_namespace(current, saved, names)
    # A class's namespace is a mappingproxy: C refuses it, Python serves it.
    assert _c_same_namespace(vars(Token), dict(vars(Token)), list(vars(Token))) is None


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
    c_answer = _c_same_namespace(current, saved, names)
    assert c_answer is _snapshot._py_same_namespace(current, saved, names)  # type: ignore[arg-type]
