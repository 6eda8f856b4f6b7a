"""Property tests: a model of what every thread sees, under random activation orders.

The targets cover every kind of attribute the registry tells apart: a module
attribute, an absent module attribute (``create=True``), a plain class
attribute, a staticmethod, a classmethod, a property, an attribute a subclass
inherits (and the base class attribute it inherits), and an instance
attribute. Each example builds fresh targets, so a failure cannot leak into
the next one.

* ``ProcessScopeMachine``: ``start()``/``stop()`` in any order, with-blocks
  whose body raises, entries that fail. After every step the visible value is
  the replacement of the most recently entered live activation, else the
  original; at the end every ``vars()`` is as it was, by identity.
* ``SuspendedWithMachine``: the same, plus with-blocks held open in suspended
  generators and left in any order (non-LIFO exits of with-blocks in one
  thread).
* ``ContextScopeMachine``: context and process activations entered and ended
  from long-lived worker threads; each thread sees its own innermost live
  context activation, else the latest live process activation, else the
  original.
* A differential test against ``unittest.mock.patch.object`` on LIFO
  schedules, where mock is correct; it agrees on every target kind.
* Single-behaviour tests: failures the machines shrank to, a with-block left
  in another thread, and data descriptors (property setters, ``__slots__``)
  redirected in context scope.
"""

from __future__ import annotations

import contextlib
import dataclasses
import queue
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    rule,
)

import patchscope

TIMEOUT = 10.0  # seconds; only reached when something hangs


class Missing:
    """Marks "no such attribute" in the model and in observations."""

    def __repr__(self) -> str:
        return "<missing>"


MISSING: Any = Missing()


class Token:
    """An original or replacement value; only its identity matters."""

    def __init__(self, label: str) -> None:
        self.label = label

    def __repr__(self) -> str:
        return f"<{self.label}>"


class Boom(Exception):
    """Raised inside with-blocks to check that errors propagate untouched."""


def _returns(label: str) -> Callable[..., str]:
    def fn(*args: object) -> str:
        return label

    fn.__qualname__ = label
    return fn


# ---------------------------------------------------------------------------
# targets and the model


class Target:
    """One ``(owner, name)`` under test and how to build replacements for it."""

    def __init__(
        self,
        label: str,
        kind: str,
        owner: Any,
        name: str,
        make: Callable[[str], object],
        *,
        create: bool = False,
        parent: Target | None = None,
        context_ok: bool = True,
    ) -> None:
        self.label = label
        self.kind = kind
        self.owner = owner
        self.name = name
        self.make = make
        self.create = create
        self.parent = parent  # where the value comes from when owner has none
        self.context_ok = context_ok  # scope="context" is supported here
        self.original = vars(owner).get(name, MISSING)
        self.read = site_reader(name)  # one attribute-read site of this target's own

    def __repr__(self) -> str:
        return self.label


def site_reader(name: str) -> Callable[[object], object]:
    """``owner.<name>`` (MISSING if absent) as one attribute-read site in its own code.

    Called on every check, the site stays warm: since 3.14 the specializing
    interpreter rewrites a warm site to read the owner's ``__dict__`` directly
    when it believes that is safe (CPython gh-156399), so reads through such a
    site catch what ``getattr()`` cannot.
    """
    namespace: dict[str, Any] = {"MISSING": MISSING}
    source = (
        "def read(owner):\n"
        "    try:\n"
        f"        return owner.{name}\n"
        "    except AttributeError:\n"
        "        return MISSING\n"
    )
    exec(compile(source, f"<read {name}>", "exec"), namespace)
    return namespace["read"]  # type: ignore[no-any-return]


#: Reads through each warm site per check; the first ones also warm it.
WARM_READS = 4


class Spec:
    """A redirect of one target, with the raw value it installs."""

    def __init__(self, target: Target, scope: str, index: int) -> None:
        self.target = target
        self.scope = scope
        self.value = target.make(f"{target.label}#{scope[0]}{index}")
        self.redirect = patchscope.redirect_attr(
            target.owner, target.name, self.value, create=target.create, scope=scope
        )

    def __repr__(self) -> str:
        return f"<{self.scope} {self.target!r} -> {self.value!r}>"


@dataclasses.dataclass(eq=False)
class Live:
    """A live activation in the model: what ends it, what it installs and where."""

    handle: Any  # has stop(); None for a with-block running now
    activation: patchscope.Activation
    spec: Spec
    thread: int | None  # the entering worker, for context scope


def make_targets() -> list[Target]:
    """Fresh objects of every target kind (a new module and classes per call)."""
    mod = types.ModuleType("patchscope_model_target")
    mod.attr = Token("mod.attr")

    class Base:
        plain = Token("Base.plain")
        inherited = Token("Base.inherited")
        sm = staticmethod(_returns("Base.sm"))
        cm = classmethod(_returns("Base.cm"))
        prop = property(_returns("Base.prop"))

    class Sub(Base):
        pass

    obj = Base()
    obj.attr = Token("obj.attr")
    base_inherited = Target("Base.inherited", "base", Base, "inherited", Token)
    return [
        Target("mod.attr", "module", mod, "attr", Token),
        Target("mod.ghost", "absent", mod, "ghost", Token, create=True),
        Target("Base.plain", "class", Base, "plain", Token),
        Target("Base.sm", "staticmethod", Base, "sm", lambda t: staticmethod(_returns(t))),
        Target("Base.cm", "classmethod", Base, "cm", lambda t: classmethod(_returns(t))),
        Target("Base.prop", "property", Base, "prop", lambda t: property(_returns(t))),
        base_inherited,
        Target("Sub.inherited", "inherited", Sub, "inherited", Token, parent=base_inherited),
        Target("obj.attr", "instance", obj, "attr", Token, context_ok=False),
    ]


def make_specs(targets: list[Target], scope: str, per_target: int) -> list[Spec]:
    """*per_target* redirects of every target that supports *scope*."""
    return [
        Spec(target, scope, i)
        for target in targets
        if scope == "process" or target.context_ok
        for i in range(per_target)
    ]


# Strategies over the running machine's own (fresh) redirects.
SPEC = st.runner().flatmap(lambda machine: st.sampled_from(machine.specs))
SPECS = st.runner().flatmap(
    lambda machine: st.lists(st.sampled_from(machine.specs), min_size=1, max_size=3)
)


def expected_raw(live: list[Live], target: Target, thread: int | None) -> object:
    """Raw value *thread* should see: own innermost context, latest process, original."""
    for act in reversed(live):
        if act.spec.target is target and act.spec.scope == "context" and act.thread == thread:
            return act.spec.value
    for act in reversed(live):
        if act.spec.target is target and act.spec.scope == "process":
            return act.spec.value
    return target.original


def bind(raw: object, owner: object) -> object:
    """What ``getattr(owner, name)`` returns for the raw class-dict value *raw*."""
    get = getattr(type(raw), "__get__", None)
    if raw is MISSING or get is None or not isinstance(owner, type):
        return raw
    return get(raw, None, owner)


def expected_read(live: list[Live], target: Target, thread: int | None) -> object:
    """What ``getattr(target.owner, target.name)`` should return in *thread*."""
    source: Target | None = target
    raw: object = MISSING
    while source is not None and raw is MISSING:
        raw = expected_raw(live, source, thread)
        source = source.parent
    return bind(raw, target.owner)


def read_all(targets: list[Target]) -> list[object]:
    """``getattr`` of every target in the calling thread (MISSING if absent)."""
    return [getattr(t.owner, t.name, MISSING) for t in targets]


def check_warm_reads(targets: list[Target], expected: list[object], who: str) -> None:
    """Every read through each target's warm site gives what ``getattr`` should."""
    for target, want in zip(targets, expected, strict=True):
        for i in range(WARM_READS):
            got = target.read(target.owner)
            assert same_read(got, want), (
                f"{who}: {target!r} read #{i} through a warm site gives {got!r}, expected {want!r}"
            )


def same_read(actual: object, expected: object) -> bool:
    """Identity, except bound classmethods, which are new objects on every read."""
    if isinstance(expected, types.MethodType):
        return actual == expected
    return actual is expected


Snapshot = list[tuple[Any, type, dict[str, object]]]


def snapshot(targets: list[Target]) -> Snapshot:
    """The class and a copy of ``vars()`` of every distinct owner."""
    owners: dict[int, Any] = {id(t.owner): t.owner for t in targets}
    return [(owner, type(owner), dict(vars(owner))) for owner in owners.values()]


def assert_same_snapshot(before: Snapshot, after: Snapshot) -> None:
    """Same owner classes, same keys, and every value the identical object."""
    for (owner, tp_before, d_before), (_, tp_after, d_after) in zip(before, after, strict=True):
        assert tp_after is tp_before, f"type({owner!r}) changed: {tp_before} -> {tp_after}"
        assert d_after.keys() == d_before.keys(), (
            f"vars({owner!r}) keys changed: added {d_after.keys() - d_before.keys()}, "
            f"removed {d_before.keys() - d_after.keys()}"
        )
        changed = {k: (d_before[k], d_after[k]) for k in d_before if d_after[k] is not d_before[k]}
        assert not changed, f"vars({owner!r}) values changed (before, after): {changed}"


def check_process_view(targets: list[Target], live: list[Live]) -> None:
    """Raw ``vars()`` values and ``getattr`` of every target match the model."""
    for target in targets:
        raw = expected_raw(live, target, None)
        actual_raw = vars(target.owner).get(target.name, MISSING)
        assert actual_raw is raw, f"vars({target!r}) holds {actual_raw!r}, expected {raw!r}"
        expected = expected_read(live, target, None)
        actual = getattr(target.owner, target.name, MISSING)
        assert same_read(actual, expected), f"{target!r} reads {actual!r}, expected {expected!r}"
        check_warm_reads([target], [expected], "the main thread")


def live_ids() -> set[int]:
    """Ids of the activations live now."""
    return {id(a) for a in patchscope.active()}


def entered_since(before: set[int]) -> patchscope.Activation:
    """The one activation that became live after *before* was taken."""
    (act,) = (a for a in patchscope.active() if id(a) not in before)
    return act


def check_active(live: list[Live]) -> None:
    """``patchscope.active()`` lists exactly the model's live activations."""
    actual = {id(a) for a in patchscope.active()}
    assert actual == {id(a.activation) for a in live}, (patchscope.active(), live)


def stop_everything(live: list[Live]) -> tuple[patchscope.Activation, ...]:
    """Stop the model's live activations, then any others; return those others.

    Stopping leaked activations too keeps one failing example from failing
    every later one.
    """
    for act in live:
        act.handle.stop()
    leaked = patchscope.active()
    for act in leaked:
        act.stop()
    return leaked


# ---------------------------------------------------------------------------
# process scope


class ProcessScopeMachine(RuleBasedStateMachine):
    """Process-scope activations started, stopped and raised through in any order."""

    handles = Bundle("handles")
    stopped = Bundle("stopped")

    def __init__(self) -> None:
        super().__init__()
        self.targets = make_targets()
        self.specs = make_specs(self.targets, "process", per_target=2)
        self.live: list[Live] = []
        self.before = snapshot(self.targets)

    @rule(target=handles, spec=SPEC)
    def start(self, spec: Spec) -> Any:
        """``start()`` makes the replacement visible until stopped."""
        handle = spec.redirect.start()
        self.live.append(Live(handle, handle, spec, None))
        return handle

    @rule(target=stopped, handle=consumes(handles))
    def stop(self, handle: Any) -> Any:
        """``stop()`` in any order leaves the latest live activation visible."""
        handle.stop()
        self.live = [act for act in self.live if act.handle is not handle]
        return handle

    @rule(handle=stopped)
    def stop_again(self, handle: Any) -> None:
        """Stopping an ended activation changes nothing."""
        handle.stop()

    @rule(specs=SPECS)
    def with_blocks_that_raise(self, specs: list[Spec]) -> None:
        """Nested with-blocks show their replacement; an error inside propagates and undoes them."""
        before = snapshot(self.targets)
        with pytest.raises(Boom):
            self._nest(specs)
        assert_same_snapshot(before, snapshot(self.targets))

    def _nest(self, specs: list[Spec]) -> None:
        if not specs:
            raise Boom
        spec = specs[0]
        before = live_ids()
        with spec.redirect as value:
            assert value is spec.value
            act = entered_since(before)
            self.live.append(Live(None, act, spec, None))
            try:
                check_process_view(self.targets, self.live)
                self._nest(specs[1:])
            finally:
                self.live.pop()

    @rule(
        why=st.sampled_from(["missing attribute", "context scope on an instance"]),
        valid=st.one_of(st.just([]), SPECS),
        use_with=st.booleans(),
    )
    def failed_entry_changes_nothing(self, why: str, valid: list[Spec], use_with: bool) -> None:
        """An entry that fails changes nothing, also combined after parts that succeed."""
        owners = {t.kind: t.owner for t in self.targets}
        redirect: patchscope.Redirect
        if why == "missing attribute":
            redirect = patchscope.redirect_attr(owners["module"], "no_such_name", Token("x"))
            error: type[Exception] = patchscope.AttributeMissingError
        else:
            redirect = patchscope.redirect_attr(
                owners["instance"], "attr", Token("x"), scope="context"
            )
            error = patchscope.UnsupportedTargetError
        if valid:
            redirect = patchscope.combine(*(s.redirect for s in valid), redirect)
        before = snapshot(self.targets)
        with pytest.raises(error):
            if use_with:
                with redirect:
                    pytest.fail("the with-block ran although its entry failed")
            else:
                redirect.start()
        assert_same_snapshot(before, snapshot(self.targets))

    @invariant()
    def visible_values_follow_the_model(self) -> None:
        """Every target shows the latest live replacement, else its original."""
        check_process_view(self.targets, self.live)
        check_active(self.live)

    def teardown(self) -> None:
        """Stop everything still live; every ``vars()`` is back, by identity."""
        assert stop_everything(self.live) == ()
        assert_same_snapshot(self.before, snapshot(self.targets))


# One shrunk example per machine keeps a failing run short; the machines are
# split so that each bug class fails its own test.
ProcessScopeMachine.TestCase.settings = settings(stateful_step_count=40, report_multiple_bugs=False)
TestProcessScope = ProcessScopeMachine.TestCase


class SuspendedWith:
    """A with-block held open in a suspended generator; ``stop()`` leaves it."""

    def __init__(self, redirect: patchscope.Redirect) -> None:
        def body() -> Iterator[None]:
            with redirect:
                yield

        self._gen = body()
        before = live_ids()
        next(self._gen)
        self.activation = entered_since(before)

    def stop(self) -> None:
        next(self._gen, None)

    def __repr__(self) -> str:
        return f"<with-block of {self.activation!r}>"


class SuspendedWithMachine(ProcessScopeMachine):
    """As ProcessScopeMachine, plus with-blocks left in any order in one thread."""

    def __init__(self) -> None:
        super().__init__()
        # Fewer redirects, so the same one is often held open twice: that is
        # where with-blocks must be told apart.
        kinds = ("module", "inherited", "staticmethod")
        self.specs = [s for s in self.specs if s.target.kind in kinds]

    @rule(target=ProcessScopeMachine.handles, spec=SPEC)
    def enter_suspended_with(self, spec: Spec) -> Any:
        """A with-block suspended in a generator counts like any other activation."""
        block = SuspendedWith(spec.redirect)
        self.live.append(Live(block, block.activation, spec, None))
        return block


SuspendedWithMachine.TestCase.settings = settings(
    stateful_step_count=30, report_multiple_bugs=False
)
TestSuspendedWith = SuspendedWithMachine.TestCase


# ---------------------------------------------------------------------------
# context scope, from worker threads


class Worker:
    """A long-lived thread that runs one submitted callable at a time, in its own context."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, box, done = job
            try:
                box.append((True, fn()))
            except BaseException as exc:
                box.append((False, exc))
            done.set()

    def run(self, fn: Callable[[], Any]) -> Any:
        """Run *fn* in this worker's thread and return its result (or raise its error)."""
        box: list[tuple[bool, Any]] = []
        done = threading.Event()
        self._jobs.put((fn, box, done))
        assert done.wait(TIMEOUT), f"{self._thread.name} did not answer"
        ok, value = box[0]
        if not ok:
            raise value
        return value

    def close(self) -> None:
        self._jobs.put(None)
        self._thread.join(TIMEOUT)
        assert not self._thread.is_alive(), f"{self._thread.name} did not stop"


N_WORKERS = 3
THREAD = st.integers(0, N_WORKERS - 1)


class ContextScopeMachine(RuleBasedStateMachine):
    """Context and process activations entered and ended from several threads."""

    handles = Bundle("handles")

    def __init__(self) -> None:
        super().__init__()
        self.targets = [t for t in make_targets() if t.context_ok]
        self.specs = make_specs(self.targets, "context", per_target=2) + make_specs(
            self.targets, "process", per_target=2
        )
        self.live: list[Live] = []
        self.before = snapshot(self.targets)
        self.workers = [Worker(f"model-worker-{k}") for k in range(N_WORKERS)]

    def _check_thread(self, thread: int | None) -> None:
        """Run in *thread*'s own context: each target reads as the model says."""
        actual = read_all(self.targets)
        expected = [expected_read(self.live, target, thread) for target in self.targets]
        for target, value, want in zip(self.targets, actual, expected, strict=True):
            assert same_read(value, want), (
                f"thread {thread}: {target!r} reads {value!r}, expected {want!r}"
            )
        check_warm_reads(self.targets, expected, f"thread {thread}")

    @rule(target=handles, k=THREAD, spec=SPEC)
    def start(self, k: int, spec: Spec) -> Any:
        """Thread k starts an activation (context or process scope)."""
        handle = self.workers[k].run(spec.redirect.start)
        self.live.append(Live(handle, handle, spec, k if spec.scope == "context" else None))
        return handle

    @rule(handle=consumes(handles), j=THREAD)
    def stop(self, handle: Any, j: int) -> None:
        """Thread j (not necessarily the one that entered) stops an activation."""
        self.workers[j].run(handle.stop)
        self.live = [act for act in self.live if act.handle is not handle]

    @rule(k=THREAD, specs=SPECS)
    def with_blocks_that_raise(self, k: int, specs: list[Spec]) -> None:
        """Thread k's nested with-blocks show the model's value; an error undoes them."""

        def nest(rest: list[Spec]) -> None:
            if not rest:
                raise Boom
            spec = rest[0]
            before = live_ids()
            with spec.redirect as value:
                assert value is spec.value
                act = entered_since(before)
                self.live.append(Live(None, act, spec, k if spec.scope == "context" else None))
                try:
                    self._check_thread(k)
                    nest(rest[1:])
                finally:
                    self.live.pop()

        def body() -> None:
            with pytest.raises(Boom):
                nest(specs)

        self.workers[k].run(body)

    @rule(k=THREAD)
    def context_scope_on_instance_fails(self, k: int) -> None:
        """scope="context" on an instance attribute raises and changes nothing."""
        obj = types.SimpleNamespace(attr=Token("ns.attr"))
        redirect = patchscope.redirect_attr(obj, "attr", Token("x"), scope="context")
        with pytest.raises(patchscope.UnsupportedTargetError):
            self.workers[k].run(redirect.start)
        assert vars(obj) == {"attr": obj.attr}

    @invariant()
    def every_thread_sees_its_own_view(self) -> None:
        """Each worker and the main thread read what the model predicts for them."""
        for k, worker in enumerate(self.workers):
            worker.run(lambda k=k: self._check_thread(k))
        self._check_thread(None)
        check_active(self.live)

    @invariant()
    def nothing_left_where_no_context_activation_is_live(self) -> None:
        """Without a live context activation, ``vars()`` holds the process value by identity."""
        contexts = {id(a.spec.target) for a in self.live if a.spec.scope == "context"}
        for target in self.targets:
            if id(target) not in contexts:
                raw = vars(target.owner).get(target.name, MISSING)
                assert raw is expected_raw(self.live, target, None), (target, raw)
        mod = next(t.owner for t in self.targets if t.kind == "module")
        if not any(t.owner is mod for t in self.targets if id(t) in contexts):
            assert type(mod) is types.ModuleType

    def teardown(self) -> None:
        """Stop everything from the main thread; every ``vars()`` is back; workers end."""
        try:
            assert stop_everything(self.live) == ()
            assert_same_snapshot(self.before, snapshot(self.targets))
        finally:
            for worker in self.workers:
                worker.close()


ContextScopeMachine.TestCase.settings = settings(stateful_step_count=30, report_multiple_bugs=False)
TestContextScope = ContextScopeMachine.TestCase


# ---------------------------------------------------------------------------
# differential test against unittest.mock.patch.object


def _node(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.tuples(st.integers(0, N_SPECS - 1), st.lists(children, max_size=3))


N_SPECS = len(make_specs(make_targets(), "process", per_target=2))
SCHEDULES = st.lists(
    st.recursive(st.tuples(st.integers(0, N_SPECS - 1), st.just([])), _node, max_leaves=10),
    max_size=4,
)

Observation = tuple[object, list[tuple[dict[str, object], object]]]


def observe(value: object, targets: list[Target]) -> Observation:
    """The with-block's value, and a copy of ``vars()`` and ``getattr`` of every target."""
    return value, [(dict(vars(t.owner)), getattr(t.owner, t.name, MISSING)) for t in targets]


def run_schedule(
    schedule: list[Any],
    targets: list[Target],
    specs: list[Spec],
    enter: Callable[[Spec], Any],
) -> list[Observation]:
    """Enter and leave nested with-blocks as *schedule* says; observe after every step."""
    log: list[Observation] = []

    def walk(nodes: list[Any]) -> None:
        for index, children in nodes:
            with enter(specs[index]) as value:
                log.append(observe(value, targets))
                walk(children)
            log.append(observe(None, targets))

    walk(schedule)
    return log


def _mock_patch(spec: Spec) -> contextlib.AbstractContextManager[Any]:
    target = spec.target
    return mock.patch.object(target.owner, target.name, spec.value, create=target.create)


@given(schedule=SCHEDULES)
def test_lifo_schedules_match_mock_patch_object(schedule: list[Any]) -> None:
    """On nested single-thread with-blocks every observation equals mock.patch.object's."""
    targets = make_targets()
    specs = make_specs(targets, "process", per_target=2)
    expected = run_schedule(schedule, targets, specs, _mock_patch)
    actual = run_schedule(schedule, targets, specs, lambda spec: spec.redirect)
    assert len(actual) == len(expected)
    steps = enumerate(zip(actual, expected, strict=True))
    for step, ((value, views), (mock_value, mock_views)) in steps:
        assert value is mock_value, f"step {step}: with-value {value!r} != {mock_value!r}"
        for target, (d, got), (mock_d, mock_got) in zip(targets, views, mock_views, strict=True):
            assert d.keys() == mock_d.keys(), f"step {step}: {target!r} vars keys differ"
            assert all(d[k] is mock_d[k] for k in d), f"step {step}: {target!r} vars differ"
            assert same_read(got, mock_got), f"step {step}: {target!r} reads {got!r}"


# ---------------------------------------------------------------------------
# single behaviours: shrunk failures of the machines above kept as named
# regression tests, and with-block and descriptor cases the machines do not
# exercise


def test_with_blocks_of_one_redirect_may_end_out_of_order_in_one_thread() -> None:
    """A with-block left out of order (its generator resumed later) ends its own activation."""
    mod = types.ModuleType("patchscope_model_target")
    mod.attr = original = Token("mod.attr")
    mine, other = Token("mine"), Token("other")
    redirect = patchscope.redirect_attr(mod, "attr", mine)

    def held() -> Iterator[None]:
        with redirect:
            yield

    gen = held()
    next(gen)  # the generator's with-block is open
    with patchscope.redirect_attr(mod, "attr", other), redirect:
        next(gen, None)  # the generator leaves its with-block; this one stays open
        assert len(patchscope.active()) == 2
        assert mod.attr is mine, "the most recently entered live activation is this block's"
    assert mod.attr is original
    assert patchscope.active() == ()


def test_with_block_may_end_in_another_thread() -> None:
    """A with-block left in another thread (its generator resumed there) ends its own activation."""
    mod = types.ModuleType("patchscope_model_target")
    mod.attr = original = Token("mod.attr")
    redirect = patchscope.redirect_attr(mod, "attr", Token("mine"))

    def held() -> Iterator[None]:
        with redirect:
            yield

    gen = held()
    next(gen)  # entered in this thread
    holder, finisher = Worker("holder"), Worker("finisher")
    # Another thread is inside its own with-block of the same redirect.
    block = holder.run(lambda: SuspendedWith(redirect))
    try:
        finisher.run(lambda: next(gen, None))  # e.g. a thread pool driving the generator
        assert patchscope.active() == (block.activation,)
    finally:
        holder.run(block.stop)
        holder.close()
        finisher.close()
        leaked = stop_everything([])
    assert leaked == ()
    assert mod.attr is original


def test_context_redirect_of_a_module_attribute_after_another_attribute() -> None:
    """A module attribute can be context-redirected again while another one of it is."""
    mod = types.ModuleType("patchscope_model_target")
    mod.first = original = Token("mod.first")
    mod.second = Token("mod.second")
    first = patchscope.redirect_attr(mod, "first", Token("first"), scope="context")
    second = patchscope.redirect_attr(mod, "second", Token("second"), scope="context")
    with first:
        pass
    with second, first as value:
        assert mod.first is value
    assert type(mod) is types.ModuleType
    assert vars(mod)["first"] is original


class WithProperty:
    """``value`` is a property with a setter."""

    def __init__(self) -> None:
        self._value = 0

    @property
    def value(self) -> int:
        return self._value

    @value.setter
    def value(self, new: int) -> None:
        self._value = new


class WithSlots:
    """``value`` is a ``__slots__`` member (a data descriptor in the class)."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0


@pytest.mark.parametrize("cls", [WithProperty, WithSlots])
def test_context_redirect_of_a_data_descriptor_leaves_it_working_elsewhere(cls: type) -> None:
    """Other threads still write through a data descriptor another thread context-redirects."""
    obj = cls()
    original = vars(cls)["value"]
    replacement = property(_returns("replaced"))
    redirect = patchscope.redirect_attr(cls, "value", replacement, scope="context")
    worker = Worker("descriptor-holder")
    handle = worker.run(redirect.start)
    try:
        assert worker.run(lambda: obj.value) == "replaced"
        obj.value = 5  # this thread has no activation: the original descriptor applies
        assert obj.value == 5
    finally:
        worker.run(handle.stop)
        worker.close()
    assert vars(cls)["value"] is original
    assert obj.value == 5, "the write did not go through the original descriptor"
    assert "value" not in getattr(obj, "__dict__", {})
