"""patchscope in one screen: scoped, thread-safe, exactly restored redirects.

Run: python examples/quickstart.py
"""

from __future__ import annotations

import threading
import types

import patchscope

# A stand-in for a library module whose behaviour we want to change for a while.
backend = types.ModuleType("backend")
backend.device = "cuda"


def describe() -> str:
    return f"running on {backend.device}"


# 1. A context manager: the original comes back by identity afterwards.
with patchscope.redirect_attr(backend, "device", "cpu") as value:
    print("inside with:     ", describe(), f"(value={value!r})")
print("after with:      ", describe())

# 2. A decorator: active for each call only.
@patchscope.redirect_attr(backend, "device", "xpu")
def on_xpu() -> str:
    return describe()


print("decorated call:  ", on_xpu(), "| outside:", describe())

# 3. Overlapping activations may end in any order: no leak (mock.patch leaks here).
a = patchscope.redirect_attr(backend, "device", "A").start()
b = patchscope.redirect_attr(backend, "device", "B").start()
a.stop()
print("A stopped first: ", describe())
b.stop()
print("both stopped:    ", describe())

# 4. scope="context": only this thread sees the change, at the same moment.
seen_elsewhere: list[str] = []
ready, checked = threading.Event(), threading.Event()


def other_thread() -> None:
    ready.wait(10)
    seen_elsewhere.append(describe())
    checked.set()


worker = threading.Thread(target=other_thread)
worker.start()
with patchscope.redirect_attr(backend, "device", "mps", scope="context"):
    ready.set()
    checked.wait(10)
    print("this thread:     ", describe())
worker.join(10)
print("other thread:    ", seen_elsewhere[0])

# 5. Live activations are introspectable (for leak hunting).
handle = patchscope.redirect_attr(backend, "device", "npu").start()
(activation,) = patchscope.active()
print("active():        ", activation.name, "->", activation.replacement, "at", activation.site)
handle.stop()
assert patchscope.active() == ()
