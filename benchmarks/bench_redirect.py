"""Enter+exit cost of patchscope against the alternatives, as ratios in one run.

Run: python benchmarks/bench_redirect.py  (prints a table; no assertions).
The floor is a minimal class-based context manager doing the same two setattrs.
"""

from __future__ import annotations

import sys
import threading
import timeit
import types
import unittest.mock

import patchscope

N = 100_000
REPEAT = 7

mod = types.ModuleType("bench_target")


def _original() -> int:
    return 1


def _replacement() -> int:
    return 2


class Trivial:
    pass


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


def mock_patch() -> None:
    with unittest.mock.patch.object(mod, "func", _replacement):
        pass


def monkeypatch() -> None:
    import pytest

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mod, "func", _replacement)


def main() -> None:
    rows: list[tuple[str, float]] = []
    f = per_op(floor)
    rows.append(("floor: class-based CM, two setattrs", f))
    rows.append(("hand-written try/finally", per_op(hand_written)))
    rows.append(("patchscope process, reused object", per_op(ps_reused)))
    rows.append(("patchscope process, fresh object", per_op(ps_fresh)))
    rows.append(("patchscope context, reused object", per_op(ps_context)))
    rows.append(("unittest.mock.patch.object", per_op(mock_patch, N // 5)))
    try:
        rows.append(("pytest MonkeyPatch.context", per_op(monkeypatch, N // 5)))
    except ImportError:
        pass
    print(f"Python {sys.version.split()[0]}, {N} enter+exit per sample, best of {REPEAT}")
    print(f"{'case':44} {'ns/op':>9} {'x floor':>8}")
    for name, ns in rows:
        print(f"{name:44} {ns:9.0f} {ns / f:8.2f}")
    ps = dict(rows)["patchscope process, reused object"]
    for other in ("unittest.mock.patch.object", "pytest MonkeyPatch.context"):
        if other in dict(rows):
            print(f"{other} / patchscope reused: {dict(rows)[other] / ps:.2f}x")


if __name__ == "__main__":
    main()
