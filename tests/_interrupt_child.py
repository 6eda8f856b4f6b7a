"""The child process of the Ctrl-C tests: loops over one shape until interrupted.

Run as ``python _interrupt_child.py TRIALS SHAPE [SHAPE ...]``. For every
trial the child prints ``ready``, runs the shape in a tight loop until a
SIGINT from the parent raises KeyboardInterrupt at a random moment, and
prints ``<shape> <verdict>``:

* ``clean``: nothing is installed and ``patchscope.active()`` is empty;
* ``recoverable``: something was left, and stopping every activation that
  ``active()`` lists removed all of it;
* ``leaked``: something is still installed after that;
* ``error``: the loop raised something other than KeyboardInterrupt.

The verdict's details follow on the same line. Each trial uses fresh targets.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
import types
import warnings
from collections.abc import Callable, Generator
from typing import Any

import patchscope


class Token:
    """An original or replacement value; only its identity matters."""

    def __init__(self, label: str) -> None:
        self.label = label

    def __repr__(self) -> str:
        return f"<{self.label}>"


class Targets:
    """A fresh module, class, constructed class and called function, and their originals."""

    def __init__(self) -> None:
        self.mod = types.ModuleType("interrupt_target")
        self.mod.attr = Token("mod.attr")

        class Klass:
            attr = Token("Klass.attr")

        class Built:
            def __init__(self, *args: object) -> None:
                self.args = args

        def called() -> object:
            return "called"

        self.cls = Klass
        self.built = Built
        self.called = called
        self.called_code = called.__code__
        self.before = [(o, dict(vars(o)), type(o)) for o in (self.mod, Klass, Built)]

    def problems(self) -> list[str]:
        """What differs from the state before the trial (empty when clean)."""
        found = []
        for owner, raw, tp in self.before:
            now = dict(vars(owner))
            if type(owner) is not tp:
                found.append(f"type({owner!r}) is {type(owner)!r}")
            for key in raw.keys() | now.keys():
                if key == "__weakref__":
                    continue
                if now.get(key, "<absent>") is not raw.get(key, "<absent>"):
                    found.append(f"vars({owner!r})[{key!r}] is {now.get(key, '<absent>')!r}")
        for owner, raw, _ in self.before[:2]:
            try:
                read = owner.attr
            except Exception as exc:
                read = exc
            if read is not raw["attr"]:
                found.append(f"{owner!r}.attr reads {read!r}")
        try:
            built: object = type(self.built(1))
        except Exception as exc:
            built = exc
        if built is not self.built:
            found.append(f"Built(1) builds {built!r}")
        seen: list[object] = []

        def construct() -> None:
            try:
                seen.append(type(self.built(2)))
            except Exception as exc:
                seen.append(exc)

        def call() -> None:
            try:
                seen.append(self.called())
            except Exception as exc:
                seen.append(exc)

        for run in (construct, call):
            thread = threading.Thread(target=run)
            thread.start()
            thread.join(10)
        if seen != [self.built, "called"]:
            found.append(f"Built(2), called() in another thread give {seen!r}")
        if self.called.__code__ is not self.called_code:
            found.append(f"called.__code__ is {self.called.__code__!r}")
        try:
            result: object = self.called()
        except Exception as exc:
            result = exc
        if result != "called":
            found.append(f"called() gives {result!r}")
        live = self.live()
        if live:
            found.append(f"active() lists {len(live)}")
        return found

    def live(self) -> list[patchscope.Activation]:
        """The live activations of this trial's targets (a leaked trial keeps its own)."""
        owners = [id(owner) for owner, _, _ in self.before] + [id(self.called)]
        live = []
        for act in patchscope.active():
            try:
                target = act.target
            except Exception as exc:
                raise Broken(f"active() lists an activation whose target raises {exc!r}") from exc
            if id(target) in owners:
                live.append(act)
        return live


class Broken(Exception):
    """The registry itself is inconsistent: reported as a leak, with the reason."""


class Replacement:
    """What constructions build instead."""

    def __init__(self, *args: object) -> None:
        self.args = args


def shapes(t: Targets) -> dict[str, Callable[[], Any]]:
    """Each shape: a callable whose repeated calls make up the loop."""
    rp = patchscope.redirect_attr(t.mod, "attr", Token("rp"))
    rc = patchscope.redirect_attr(t.mod, "attr", Token("rc"), scope="context")
    rcp = patchscope.redirect_attr(t.cls, "attr", Token("rcp"))
    rcc = patchscope.redirect_attr(t.cls, "attr", Token("rcc"), scope="context")
    cons_c = patchscope.redirect_construction(t.built, Replacement)
    cons_p = patchscope.redirect_construction(t.built, Replacement, scope="process")
    group = patchscope.combine(rp, rcc, cons_c)
    call_c = patchscope.redirect_call(t.called, Replacement)
    call_p = patchscope.redirect_call(t.called, Replacement, scope="process")

    def with_process() -> None:
        with rp:
            pass

    def with_context() -> None:
        with rc:
            pass

    def with_class_process() -> None:
        with rcp:
            pass

    def with_class_context() -> None:
        with rcc:
            pass

    def with_process_then_context() -> None:
        with rp:
            with rc:
                pass

    def with_context_nested_same() -> None:
        with rc:
            with rc:
                pass

    def with_process_nested_same() -> None:
        with rp:
            with rp:
                pass

    def inline_process() -> None:
        with patchscope.redirect_attr(t.mod, "attr", 1):
            pass

    def inline_context() -> None:
        with patchscope.redirect_attr(t.mod, "attr", 1, scope="context"):
            pass

    def combined() -> None:
        with group:
            pass

    def construction_context() -> None:
        with cons_c:
            t.built()

    def construction_process() -> None:
        with cons_p:
            t.built()

    def call_context() -> None:
        with call_c:
            t.called()

    def call_process() -> None:
        with call_p:
            t.called()

    def call_nested() -> None:
        with call_p:
            with call_c:
                t.called()

    def call_inline() -> None:
        with patchscope.redirect_call(t.called, Replacement):
            t.called()

    @call_c
    def decorated_call() -> object:
        return t.called()

    @rp
    def decorated_process() -> object:
        return t.mod.attr

    @rcc
    def decorated_context() -> object:
        return t.cls.attr

    @rc
    def decorated_generator() -> Generator[object, None, None]:
        yield t.mod.attr
        yield t.mod.attr

    def generator() -> None:
        for _ in decorated_generator():
            pass

    @rp
    async def decorated_coroutine() -> object:
        await asyncio.sleep(0)
        return t.mod.attr

    def coroutine() -> None:
        coro = decorated_coroutine()
        try:
            while True:
                coro.send(None)
        except StopIteration:
            pass

    return {
        "with_process": with_process,
        "with_context": with_context,
        "with_class_process": with_class_process,
        "with_class_context": with_class_context,
        "with_process_then_context": with_process_then_context,
        "with_context_nested_same": with_context_nested_same,
        "with_process_nested_same": with_process_nested_same,
        "inline_process": inline_process,
        "inline_context": inline_context,
        "combine": combined,
        "construction_context": construction_context,
        "construction_process": construction_process,
        "call_context": call_context,
        "call_process": call_process,
        "call_nested": call_nested,
        "call_inline": call_inline,
        "call_decorated": decorated_call,
        "decorated_call_process": decorated_process,
        "decorated_call_context": decorated_context,
        "decorated_generator": generator,
        "decorated_coroutine": coroutine,
    }


SHAPES = tuple(shapes(Targets()))


def _loop(body: Callable[[], object]) -> None:
    """Run *body* until SIGINT.

    The flag ends the loop even when the KeyboardInterrupt was raised, and
    swallowed, inside a garbage-collector callback. The loop sits in a function
    of its own because CPython 3.13 leaves a while loop's backward jump outside
    the enclosing ``try`` (gh-130279): a signal handled there escapes the
    ``except``. Raised here, it reaches the caller's ``try`` at the call.
    """
    while not _signalled:
        body()


def trial(shape: str) -> str:
    """One interrupted loop of *shape*; its verdict line."""
    t = Targets()
    body = shapes(t)[shape]
    _signalled.clear()
    try:
        print("ready", flush=True)
        _loop(body)
    except KeyboardInterrupt:
        pass
    except BaseException as exc:
        return f"{shape} error {type(exc).__name__}: {exc}"
    try:
        found = t.problems()
        if not found:
            return f"{shape} clean"
        with warnings.catch_warnings():
            # Stopping what an interrupted exit left may meet our own slot: warned, restored.
            warnings.simplefilter("ignore", patchscope.RedirectConflictWarning)
            for act in t.live():
                try:
                    act.stop()
                except Exception as exc:
                    found.append(f"stop() raised {type(exc).__name__}: {exc}")
        left = t.problems()
    except Broken as exc:
        return f"{shape} leaked {exc}"
    verdict = "leaked" if left else "recoverable"
    return f"{shape} {verdict} {'; '.join(left or found)}"


_signalled: list[bool] = []


def _on_sigint(signum: int, frame: object) -> None:
    _signalled.append(True)
    raise KeyboardInterrupt


def main(argv: list[str]) -> None:
    signal.signal(signal.SIGINT, _on_sigint)
    trials = int(argv[0])
    for shape in argv[1:]:
        for _ in range(trials):
            print(trial(shape), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
