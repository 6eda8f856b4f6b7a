"""Thread stress: many overlapping activations of shared targets, ended in any order.

Every thread holds several activations at once and ends them in a shuffled
order. Barriers between "everyone entered" and "everyone exited" force the
interleaving that leaks with hand-written patches and ``mock.patch``
(enter A, enter B, exit A, exit B) across all threads in every round; the
barrier actions check the registry at those quiet points. A free-running
phase follows, with with-blocks of Redirect objects shared by all threads.
"""

from __future__ import annotations

import random
import sys
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import patchscope

N_THREADS = 8
ROUNDS = 300  # lock-step rounds per thread
FREE_ITERATIONS = 1500  # free-running iterations per thread
TIMEOUT = 30.0  # seconds; only reached when something hangs


@pytest.fixture(autouse=True)
def frequent_thread_switches() -> Iterator[None]:
    """Switch threads every few bytecodes instead of every 5 ms, so threads interleave."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)


class Token:
    """A replacement or original value; only its identity matters."""

    def __init__(self, label: str) -> None:
        self.label = label

    def __repr__(self) -> str:
        return f"<{self.label}>"


def make_targets() -> tuple[types.ModuleType, type]:
    """A fresh module and class, each with one attribute ``attr``."""
    mod = types.ModuleType("patchscope_stress_target")
    mod.attr = Token("mod.attr")

    class Shared:
        attr = Token("Shared.attr")

    return mod, Shared


def run_threads(work: Callable[[int], None], failures: list[BaseException]) -> None:
    """Run ``work(i)`` in N_THREADS threads; every thread must finish in time."""
    threads = [
        threading.Thread(target=work, args=(i,), name=f"stress-{i}") for i in range(N_THREADS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT)
    stuck = [thread.name for thread in threads if thread.is_alive()]
    assert not stuck, f"threads did not finish (deadlock?): {stuck}"
    assert not failures, failures


def guarded(
    failures: list[BaseException], barriers: list[threading.Barrier], body: Callable[[int], None]
) -> Callable[[int], None]:
    """Wrap a thread body: record its error and break the barriers so no one waits forever."""

    def work(i: int) -> None:
        try:
            body(i)
        except BaseException as exc:
            failures.append(exc)
            for barrier in barriers:
                barrier.abort()

    return work


def checked(failures: list[BaseException], check: Callable[[], None]) -> Callable[[], None]:
    """A barrier action that records a failed check instead of breaking the barrier."""

    def action() -> None:
        try:
            check()
        except BaseException as exc:
            failures.append(exc)

    return action


def newest_per_attribute() -> dict[tuple[int, str], Any]:
    """The most recently entered live activation of every redirected attribute."""
    newest: dict[tuple[int, str], Any] = {}
    for act in patchscope.active():  # oldest first within each attribute
        newest[id(act.target), act.name] = act
    return newest


def test_overlapping_process_activations_restore_originals() -> None:
    """8 threads overlap process activations and end them shuffled: originals come back exactly."""
    mod, cls = make_targets()
    cls_dict = dict(vars(cls))
    originals = {mod: mod.attr, cls: cls.attr}
    failures: list[BaseException] = []
    mine = [
        [
            patchscope.redirect_attr(target, "attr", Token(f"t{i}:{name}{j}"))
            for target, name in ((mod, "mod"), (cls, "cls"))
            for j in range(2)
        ]
        for i in range(N_THREADS)
    ]
    shared = [patchscope.redirect_attr(target, "attr", Token("shared")) for target in originals]

    def all_entered() -> None:
        live = patchscope.active()
        assert len(live) == N_THREADS * 4, live
        for act in newest_per_attribute().values():
            assert vars(act.target)["attr"] is act.replacement, act

    def all_exited() -> None:
        assert patchscope.active() == ()
        for target, original in originals.items():
            assert vars(target)["attr"] is original, target

    entered = threading.Barrier(N_THREADS, checked(failures, all_entered), TIMEOUT)
    exited = threading.Barrier(N_THREADS, checked(failures, all_exited), TIMEOUT)

    def body(i: int) -> None:
        rng = random.Random(i)
        for _ in range(ROUNDS):
            handles = [r.start() for r in rng.sample(mine[i], len(mine[i]))]
            entered.wait()
            rng.shuffle(handles)
            for handle in handles:
                handle.stop()
            exited.wait()
        for _ in range(FREE_ITERATIONS):
            handles = [r.start() for r in rng.sample(mine[i], 3)]
            with shared[0], shared[1]:
                handles.pop(rng.randrange(3)).stop()
                handles.append(rng.choice(mine[i]).start())
            rng.shuffle(handles)
            for handle in handles:
                handle.stop()

    run_threads(guarded(failures, [entered, exited], body), failures)
    assert patchscope.active() == ()
    assert vars(mod)["attr"] is originals[mod]
    assert dict(vars(cls)) == cls_dict
    assert all(vars(cls)[k] is v for k, v in cls_dict.items())


def test_context_activations_stay_private_among_process_churn() -> None:
    """8 threads mix scopes: a thread holding a context activation always sees its own value."""
    mod, cls = make_targets()
    cls_dict = dict(vars(cls))
    originals = {mod: mod.attr, cls: cls.attr}
    failures: list[BaseException] = []
    own = [{t: Token(f"t{i}:ctx:{t.__name__}") for t in originals} for i in range(N_THREADS)]
    context = [
        {t: patchscope.redirect_attr(t, "attr", own[i][t], scope="context") for t in originals}
        for i in range(N_THREADS)
    ]
    process = [
        {t: patchscope.redirect_attr(t, "attr", Token(f"t{i}:proc")) for t in originals}
        for i in range(N_THREADS)
    ]
    shared_value = Token("shared:ctx")
    shared_context = patchscope.redirect_attr(mod, "attr", shared_value, scope="context")
    context_values = {id(v) for per in own for v in per.values()} | {id(shared_value)}

    def sees_no_other_context(target: Any) -> None:
        value = target.attr
        assert id(value) not in context_values, f"{threading.current_thread().name} sees {value}"

    def all_exited() -> None:
        assert patchscope.active() == ()
        assert type(mod) is types.ModuleType
        for target, original in originals.items():
            assert vars(target)["attr"] is original, target

    entered = threading.Barrier(N_THREADS, timeout=TIMEOUT)
    checked_own = threading.Barrier(N_THREADS, timeout=TIMEOUT)
    exited = threading.Barrier(N_THREADS, checked(failures, all_exited), TIMEOUT)

    def body(i: int) -> None:
        rng = random.Random(i)
        redirects = [*context[i].values(), *process[i].values()]
        for _ in range(ROUNDS):
            handles = [r.start() for r in rng.sample(redirects, len(redirects))]
            entered.wait()
            for target, value in own[i].items():
                assert target.attr is value
            checked_own.wait()
            rng.shuffle(handles)
            for handle in handles:
                handle.stop()
                for target in originals:
                    if not any(
                        h.open and h.target is target and h.scope == "context" for h in handles
                    ):
                        sees_no_other_context(target)
            exited.wait()
        for _ in range(FREE_ITERATIONS):
            handles = [r.start() for r in rng.sample(redirects, 3)]
            for target, value in own[i].items():
                if any(h.open and h.target is target and h.scope == "context" for h in handles):
                    # Own context beats every process activation, whoever entered it.
                    assert target.attr is value
            with shared_context:
                assert mod.attr is shared_value
                handles.pop(rng.randrange(3)).stop()
            rng.shuffle(handles)
            for handle in handles:
                handle.stop()
            for target in originals:
                sees_no_other_context(target)

    run_threads(guarded(failures, [entered, checked_own, exited], body), failures)
    assert patchscope.active() == ()
    assert type(mod) is types.ModuleType
    assert vars(mod)["attr"] is originals[mod]
    assert dict(vars(cls)) == cls_dict
    assert all(vars(cls)[k] is v for k, v in cls_dict.items())
