"""Enter+exit cost of patchscope against the alternatives, as ratios in one run.

Run: python benchmarks/bench_redirect.py  (prints a table; no assertions).
The floor is a minimal class-based context manager doing the same two setattrs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import timeit
import types
import unittest.mock
from typing import ClassVar

import patchscope

N = 100_000
REPEAT = 7

mod = types.ModuleType("bench_target")
# Importable, for the forms that take one dotted string ("bench_target.func").
sys.modules[mod.__name__] = mod


def _original() -> int:
    return 1


def _replacement() -> int:
    return 2


class Trivial:
    pass


class WithMethod:
    """A class whose method and attribute are redirected in context scope."""

    attr = 1

    def method(self) -> int:
        return 1


instance = WithMethod()


mod.func = _original
mod.Trivial = Trivial


class Floor:
    """The minimal correct-for-LIFO swap: save, set, restore."""

    __slots__ = ("name", "old", "target", "value")

    def __init__(self, target: object, name: str, value: object) -> None:
        self.target, self.name, self.value = target, name, value

    def __enter__(self) -> object:
        self.old = getattr(self.target, self.name)
        setattr(self.target, self.name, self.value)
        return self.value

    def __exit__(self, *exc: object) -> None:
        setattr(self.target, self.name, self.old)


def per_op(fn, number: int = N) -> float:
    """Best-of-REPEAT nanoseconds per call of *fn*."""
    return min(timeit.repeat(fn, number=number, repeat=REPEAT)) / number * 1e9


class LockedFloor:
    """The floor plus a lock and a table, written in Python.

    No handle, no entry site, no pairing, no conflict check, LIFO only: what
    the least thread-safe registry costs in pure Python, not a usable tool.
    patchscope's C accelerator does all of that and still comes in below it.
    """

    __slots__ = ("key", "name", "target", "value")
    lock = threading.RLock()
    table: ClassVar[dict[tuple[int, str], object]] = {}

    def __init__(self, target: object, name: str, value: object) -> None:
        self.target, self.name, self.value = target, name, value
        self.key = (id(target), name)

    def __enter__(self) -> object:
        self.lock.acquire()
        try:
            self.table[self.key] = self.target.__dict__[self.name]
            setattr(self.target, self.name, self.value)
        finally:
            self.lock.release()
        return self.value

    def __exit__(self, *exc: object) -> None:
        self.lock.acquire()
        try:
            setattr(self.target, self.name, self.table.pop(self.key))
        finally:
            self.lock.release()


locked_floor_cm = LockedFloor(mod, "func", _replacement)


class _Handle:
    __slots__ = ("code", "entry", "frame", "lasti", "open", "redirect", "thread_id", "value")

    def __init__(self, redirect: object, value: object, code: object, lasti: int) -> None:
        self.redirect, self.value, self.code, self.lasti = redirect, value, code, lasti
        self.thread_id = threading.get_ident()
        self.open, self.entry, self.frame = False, None, None


class _Entry:
    __slots__ = ("installed", "original", "stack")

    def __init__(self, original: object) -> None:
        self.original = self.installed = original
        self.stack: list[_Handle] = []


class MinimalRegistry:
    """What a correct registry cannot do without, in Python: the lower bound.

    The lock (taken by ``with``, which a signal cannot leave held), the
    table, a handle per activation (what ``active()`` lists) and an entry per
    attribute, a with-block paired by its frame, the conflict check on exit.
    No nesting, no context scope, no recycling: LIFO single activations only.
    """

    __slots__ = ("handles", "key", "name", "target", "value")
    lock = threading.RLock()
    table: ClassVar[dict[tuple[int, str], _Entry]] = {}

    def __init__(self, target: object, name: str, value: object) -> None:
        self.target, self.name, self.value = target, name, value
        self.key = (id(target), name)
        self.handles: list[_Handle] = []

    def __enter__(self) -> object:
        frame = sys._getframe(1)
        handle = _Handle(self, self.value, frame.f_code, frame.f_lasti)
        with self.lock:
            entry = _Entry(self.target.__dict__[self.name])
            self.table[self.key] = entry
            handle.entry = entry
            entry.stack.append(handle)
            handle.open = True
            setattr(self.target, self.name, self.value)
            entry.installed = self.value
            handle.frame = frame
            self.handles.append(handle)
        return self.value

    def __exit__(self, *exc: object) -> None:
        with self.lock:
            handle = self.handles.pop()
            handle.frame = None
            handle.open = False
            entry = handle.entry
            if self.target.__dict__[self.name] is not entry.installed:
                raise AssertionError("conflict")
            setattr(self.target, self.name, entry.original)
            entry.stack.pop()
            del self.table[self.key]


minimal_registry_cm = MinimalRegistry(mod, "func", _replacement)


def minimal_registry() -> None:
    with minimal_registry_cm:
        pass


def locked_floor() -> None:
    with locked_floor_cm:
        pass


def hand_written() -> None:
    orig = mod.func
    mod.func = _replacement
    try:
        pass
    finally:
        mod.func = orig


floor_cm = Floor(mod, "func", _replacement)


def floor() -> None:
    with floor_cm:
        pass


reused = patchscope.redirect_attr(mod, "func", _replacement)


def ps_reused() -> None:
    with reused:
        pass


def ps_fresh() -> None:
    with patchscope.redirect_attr(mod, "func", _replacement):
        pass


reused_ctx = patchscope.redirect_attr(mod, "func", _replacement, scope="context")


def ps_context() -> None:
    with reused_ctx:
        pass


def ps_context_fresh() -> None:
    with patchscope.redirect_attr(mod, "func", _replacement, scope="context"):
        pass


# Six redirects of one module, as device_namespace() makes them.
for _i in range(6):
    setattr(mod, f"f{_i}", _original)
group_process = patchscope.combine(
    *(patchscope.redirect_attr(mod, f"f{i}", _replacement) for i in range(6))
)
group_context = patchscope.combine(
    *(patchscope.redirect_attr(mod, f"f{i}", _replacement, scope="context") for i in range(6))
)


def ps_group_process() -> None:
    with group_process:
        pass


def ps_group_context() -> None:
    with group_context:
        pass


def mock_patch() -> None:
    with unittest.mock.patch.object(mod, "func", _replacement):
        pass


def monkeypatch() -> None:
    import pytest

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mod, "func", _replacement)


def ps_dotted() -> None:
    with patchscope.redirect_attr("bench_target.func", _replacement):
        pass


def mock_patch_dotted() -> None:
    with unittest.mock.patch("bench_target.func", _replacement):
        pass


def monkeypatch_dotted() -> None:
    import pytest

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("bench_target.func", _replacement)


def ps_delete() -> None:
    with patchscope.redirect_attr(mod, "func", patchscope.DELETE):
        pass


def monkeypatch_delattr() -> None:
    import pytest

    with pytest.MonkeyPatch.context() as mp:
        mp.delattr(mod, "func")


def _construction_rows() -> list[tuple[str, float, float]]:
    """(case, undecorated ns, decorated ns) for class construction."""
    rows = []

    class Plain:
        def __init__(self) -> None:
            self.x = 1

    @patchscope.redirect_attr(mod, "func", _replacement)
    class Decorated:
        def __init__(self) -> None:
            self.x = 1

    rows.append(("trivial class", per_op(Plain), per_op(Decorated)))
    try:
        import torch
    except ImportError:
        print("(torch not installed: nn.Linear rows skipped)")
        return rows

    torch.manual_seed(0)

    class Linear(torch.nn.Linear):
        pass

    @patchscope.redirect_attr(mod, "func", _replacement)
    class DecoratedLinear(torch.nn.Linear):
        pass

    n = 2_000
    rows.append(
        (
            "torch.nn.Linear(64, 64)",
            per_op(lambda: Linear(64, 64), n),
            per_op(lambda: DecoratedLinear(64, 64), n),
        )
    )
    return rows


def _side_by_side(call, baseline) -> tuple[float, float]:
    """Best-of-REPEAT ns of *baseline* and of *call*, their samples taken alternately.

    Each is a callable, or a ``timeit.Timer`` (a statement timed as it is).
    Taken in the same window, the two see the same machine load.
    """
    base: list[float] = []
    ours: list[float] = []
    for _ in range(REPEAT):
        base.append(_time(baseline))
        ours.append(_time(call))
    return min(base) / N * 1e9, min(ours) / N * 1e9


def _time(what) -> float:
    if isinstance(what, timeit.Timer):
        return what.timeit(number=N)
    return timeit.timeit(what, number=N)


def _while_held(redirect: patchscope.Redirect, call, baseline, label: str):
    """(label, ns of *baseline*, ns of *call*) while another thread holds *redirect* open.

    *baseline* makes the same call on an untouched twin of the target.
    """
    entered, release = threading.Event(), threading.Event()

    def holder() -> None:
        with redirect:
            entered.set()
            release.wait(60)

    thread = threading.Thread(target=holder)
    thread.start()
    if not entered.wait(60):
        raise RuntimeError("the holder thread did not enter its redirect")
    try:
        return (label, *_side_by_side(call, baseline))
    finally:
        release.set()
        thread.join(60)


#: Untouched twins of the targets below: the baselines, measured alongside.
plain_mod = types.ModuleType("bench_plain")
plain_mod.func = _original


class PlainTrivial:
    pass


class PlainWithMethod:
    attr = 1

    def method(self) -> int:
        return 1


plain_mod.Trivial = PlainTrivial
plain_instance = PlainWithMethod()


def _other_context_rows() -> list[tuple[str, float, float]]:
    """(case, baseline ns, redirected-elsewhere ns) for calls from a context without activation.

    Each row has exactly the redirect it names live in one other thread, and
    its baseline is the same call of an untouched twin, timed alternately with
    it; "attr + construction" has both redirects of Trivial live at once.
    """
    attr_func = patchscope.redirect_attr(mod, "func", _replacement, scope="context")
    attr_cls = patchscope.redirect_attr(mod, "Trivial", object, scope="context")
    construction = patchscope.redirect_construction(Trivial, object)
    rows = [
        _while_held(
            attr_func, lambda: mod.func(), lambda: plain_mod.func(), "mod.func() [redirect_attr]"
        ),
        _while_held(
            attr_cls,
            lambda: mod.Trivial(),
            lambda: plain_mod.Trivial(),
            "mod.Trivial() [redirect_attr]",
        ),
        _while_held(
            construction,
            lambda: Trivial(),
            lambda: PlainTrivial(),
            "Trivial() [redirect_construction]",
        ),
        _while_held(
            patchscope.redirect_attr(WithMethod, "method", lambda self: 2, scope="context"),
            lambda: instance.method(),
            lambda: plain_instance.method(),
            "obj.method() [class redirect_attr]",
        ),
        _while_held(
            patchscope.redirect_attr(WithMethod, "attr", 2, scope="context"),
            lambda: WithMethod.attr,
            lambda: PlainWithMethod.attr,
            "WithMethod.attr [class redirect_attr]",
        ),
        _while_held(
            patchscope.combine(attr_cls, construction),
            lambda: mod.Trivial(),
            lambda: plain_mod.Trivial(),
            "mod.Trivial() [attr + construction]",
        ),
    ]
    # Nothing installed any more: the same calls must cost what they cost before.
    rows.append(
        (
            "mod.func(), no activation anywhere",
            *_side_by_side(lambda: mod.func(), lambda: plain_mod.func()),
        )
    )
    rows.append(
        (
            "Trivial(), no activation anywhere",
            *_side_by_side(lambda: Trivial(), lambda: PlainTrivial()),
        )
    )
    return rows


def call_plain(x: int) -> int:
    return x


def call_redirected(x: int) -> int:
    return x


def call_ended(x: int) -> int:
    return x


def _call_rows() -> list[tuple[str, float, float]]:
    """(case, plain-call ns, ns) for calls of a function that redirect_call reaches.

    The baseline is a plain call of an untouched function of the same shape,
    timed alternately: first with a context-scope redirect_call of it live in
    one other thread, then after the last activation of it ended. The first
    row times the call statement itself; the second through a lambda, like
    the other rows of this table, whose own frame is in both columns.
    """
    names = {"call_redirected": call_redirected, "call_plain": call_plain}
    rows = [
        _while_held(
            patchscope.redirect_call(call_redirected, lambda x: -x),
            timeit.Timer("call_redirected(1)", globals=names),
            timeit.Timer("call_plain(1)", globals=names),
            "func(1) [redirect_call]",
        ),
        _while_held(
            patchscope.redirect_call(call_redirected, lambda x: -x),
            lambda: call_redirected(1),
            lambda: call_plain(1),
            "lambda: func(1) [redirect_call]",
        ),
    ]
    with patchscope.redirect_call(call_ended, lambda x: -x):
        pass
    names["call_ended"] = call_ended
    rows.append(
        (
            "func(1), after its last redirect_call ended",
            *_side_by_side(
                timeit.Timer("call_ended(1)", globals=names),
                timeit.Timer("call_plain(1)", globals=names),
            ),
        )
    )
    return rows


#: (figure, measured, target, "<=" or ">=") for the summary.
Target = tuple[str, float, float, str]


def enter_exit_rows() -> list[tuple[str, float]]:
    """Nanoseconds per enter+exit of each case; the floor first."""
    return [
        ("floor: class-based CM, two setattrs", per_op(floor)),
        ("hand-written try/finally", per_op(hand_written)),
        ("floor + lock + table, in Python", per_op(locked_floor)),
        ("minimal correct registry, in Python", per_op(minimal_registry)),
        ("patchscope process, reused object", per_op(ps_reused)),
        ("patchscope process, inline redirect_attr(...)", per_op(ps_fresh)),
        ("patchscope context, reused object", per_op(ps_context)),
        ("patchscope context, inline redirect_attr(...)", per_op(ps_context_fresh)),
        ("patchscope combine of 6, process", per_op(ps_group_process, N // 5)),
        ("patchscope combine of 6, context", per_op(ps_group_context, N // 5)),
        ("unittest.mock.patch.object", per_op(mock_patch, N // 5)),
        ("pytest MonkeyPatch.context", per_op(monkeypatch, N // 5)),
        ('patchscope redirect_attr("mod.name", v)', per_op(ps_dotted, N // 5)),
        ('unittest.mock.patch("mod.name", v)', per_op(mock_patch_dotted, N // 5)),
        ('MonkeyPatch.context, setattr("mod.name", v)', per_op(monkeypatch_dotted, N // 5)),
        ("patchscope redirect_attr(mod, name, DELETE)", per_op(ps_delete, N // 5)),
        ("MonkeyPatch.context, delattr(mod, name)", per_op(monkeypatch_delattr, N // 5)),
    ]


def print_enter_exit(rows: list[tuple[str, float]]) -> dict[str, float]:
    f = rows[0][1]
    print("enter+exit of one redirect")
    print(f"{'case':48} {'ns/op':>9} {'x floor':>8}")
    for name, ns in rows:
        print(f"{name:48} {ns:9.0f} {ns / f:8.2f}")
    return {name: ns / f for name, ns in rows} | {"_ns:" + name: ns for name, ns in rows}


def pure_python_ratios() -> dict[str, float] | None:
    """The same rows measured in a pure-Python interpreter (a child process)."""
    env = {**os.environ, "PATCHSCOPE_PURE_PYTHON": "1"}
    out = subprocess.run(
        [sys.executable, __file__, "--pure-rows"], env=env, capture_output=True, text=True
    )
    if out.returncode != 0:
        print(out.stderr)
        return None
    return json.loads(out.stdout)


def print_other_rows(rows: list[tuple[str, float, float]]) -> None:
    print("calls from a context without activation while another thread holds one")
    print(f"{'case':44} {'twin ns':>9} {'redir ns':>9} {'ratio':>7}")
    for name, direct, redirected in rows:
        print(f"{name:44} {direct:9.0f} {redirected:9.0f} {redirected / direct:7.2f}")


def main() -> None:
    if "--pure-rows" in sys.argv:
        rows = enter_exit_rows()
        f = rows[0][1]
        print(json.dumps({name: ns / f for name, ns in rows}))
        return
    accelerated = "C accelerator" if patchscope.ACCELERATED else "pure Python"
    print(f"Python {sys.version.split()[0]}, patchscope {accelerated}, best of {REPEAT} samples")
    print()
    if "--other-threads" in sys.argv:  # only the table of reads from other threads
        print_other_rows(_other_context_rows() + _call_rows())
        return
    table = print_enter_exit(enter_exit_rows())
    for other in ("unittest.mock.patch.object", "pytest MonkeyPatch.context"):
        print(
            f"{other} / patchscope inline: "
            f"{table[other] / table['patchscope process, inline redirect_attr(...)']:.2f}x"
        )
    for other, ours in (
        ('unittest.mock.patch("mod.name", v)', 'patchscope redirect_attr("mod.name", v)'),
        ('MonkeyPatch.context, setattr("mod.name", v)', 'patchscope redirect_attr("mod.name", v)'),
        ("MonkeyPatch.context, delattr(mod, name)", "patchscope redirect_attr(mod, name, DELETE)"),
    ):
        print(f"{other} / {ours}: {table[other] / table[ours]:.2f}x")
    print()
    print("construction, class decorated with a redirect (active during __init__)")
    print(f"{'case':44} {'plain ns':>9} {'decor ns':>9} {'ratio':>7}")
    for name, plain, decorated in _construction_rows():
        print(f"{name:44} {plain:9.0f} {decorated:9.0f} {decorated / plain:7.2f}")
    print()
    other_rows = _other_context_rows()
    call_rows = _call_rows()
    print_other_rows(other_rows + call_rows)
    pure = pure_python_ratios() if patchscope.ACCELERATED else table
    print()
    inline = table["patchscope process, inline redirect_attr(...)"]
    reused = table["patchscope process, reused object"]
    targets: list[Target] = [
        ("inline with redirect_attr(...), x floor", inline, 3.0, "<="),
        ("mock.patch.object / inline", table["unittest.mock.patch.object"] / inline, 2.5, ">="),
        ("MonkeyPatch.context / inline", table["pytest MonkeyPatch.context"] / inline, 2.5, ">="),
        (
            "inline context scope, x floor",
            table["patchscope context, inline redirect_attr(...)"],
            5.0,
            "<=",
        ),
        ("reused redirect, x floor", reused, 2.5, "<="),
        (
            "combine of 6 / one reused, process",
            table["patchscope combine of 6, process"] / reused,
            2.5,
            "<=",
        ),
        (
            "combine of 6 / one reused, context",
            table["patchscope combine of 6, context"] / table["patchscope context, reused object"],
            2.5,
            "<=",
        ),
    ]
    if pure is not None:
        # Pure Python is the plain reference: it must simply cost no more than
        # mock.patch.object used the same way, measured in the same interpreter.
        targets.append(
            (
                "pure Python inline / mock.patch.object inline",
                pure["patchscope process, inline redirect_attr(...)"]
                / pure["unittest.mock.patch.object"],
                1.0,
                "<=",
            )
        )
    for name, direct, redirected in other_rows[:-2]:
        targets.append((f"other threads: {name}", redirected / direct, 1.5, "<="))
    for name, direct, redirected in call_rows[:-1]:
        targets.append((f"calls: {name}", redirected / direct, 2.0, "<="))
    print("targets")
    print(f"{'figure':52} {'measured':>9} {'target':>9}")
    for name, got, want, how in targets:
        ok = got <= want if how == "<=" else got >= want
        verdict = "met" if ok else "MISSED"
        print(f"{name:52} {got:9.2f} {how + ' ' + format(want, 'g'):>9}  {verdict}")


if __name__ == "__main__":
    main()
