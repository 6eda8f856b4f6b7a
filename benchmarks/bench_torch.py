"""What patchscope.torch costs, measured in one run.

1. Constructing the example attention module (examples/device_agnostic_attention.py)
   decorated vs. undecorated, at the example's size and at a production-like
   width; the target is a ratio of at most 1.10. The decorators add a fixed
   cost per construction, so the ratio shrinks as the module grows. Where
   the undecorated class cannot construct (no CUDA), its baseline runs with
   ``torch.cuda.Event`` rebound once, by hand, outside the timed loop: what
   the module costs with no per-construction patching at all.
2. A function decorated with ``@device_namespace()`` or ``@device_events()``:
   microseconds per call over the bare function (target for
   ``@device_namespace()``: at most 2.5 us on a non-CUDA device).
3. HostEvent: ``record()`` and ``elapsed_time()``, in nanoseconds per call.
4. A forward+backward step of a small MLP written for CUDA (``device="cuda"``,
   ``.to("cuda", non_blocking=True)``) inside ``transfer_to_device()``, vs.
   the same step written for the CPU; the target is a ratio of at most 1.10.
   Also with the scope entered for each step (``@transfer_to_device()``).
5. What reaching torch's functions by call costs: a ``transfer_to_device()``
   scope entered and ended, against the same functions rebound by name; and
   a call of ``torch.cuda.is_available`` (a name imported first) where no
   scope is active, in this thread while another thread holds a scope (its
   call runs torch's own function through the redirect's check), and in the
   scope.

    python benchmarks/bench_torch.py
"""

from __future__ import annotations

import contextvars
import functools
import importlib.util
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

import patchscope
from patchscope.torch import (
    HostEvent,
    active_device_type,
    device_event_class,
    device_events,
    device_namespace,
    transfer_to_device,
)

TARGET_RATIO = 1.10
TARGET_CALL_US = 2.5
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "device_agnostic_attention.py"


def load_example() -> ModuleType:
    """Import the attention example as a module."""
    spec = importlib.util.spec_from_file_location("device_agnostic_attention", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def mean_ns(call: Callable[[], object], number: int) -> float:
    """Return the mean nanoseconds per call over ``number`` calls."""
    start = time.perf_counter_ns()
    for _ in range(number):
        call()
    return (time.perf_counter_ns() - start) / number


def best_ns(call: Callable[[], object], number: int, repeat: int = 7) -> float:
    """Return the best mean nanoseconds per call over ``repeat`` runs of ``number`` calls."""
    return min(mean_ns(call, number) for _ in range(repeat))


def undecorated_ns(attention: Callable[[], object], number: int) -> float:
    """Time the undecorated class, rebinding torch.cuda.Event once if CUDA is absent."""
    event_class = device_event_class()
    if event_class is torch.cuda.Event:
        return mean_ns(attention, number)
    original = torch.cuda.Event
    torch.cuda.Event = event_class  # type: ignore[misc,assignment]
    try:
        return mean_ns(attention, number)
    finally:
        torch.cuda.Event = original  # type: ignore[misc]


def bench_construction(
    example: ModuleType, dim: int, heads: int, number: int, repeat: int = 15
) -> None:
    """Print construction times of the attention module, undecorated and decorated."""
    print(
        f"Attention(dim={dim}, heads={heads}) construction on {active_device_type()}, "
        f"best of {repeat} x {number}:"
    )
    make = {
        name: functools.partial(getattr(example, name), dim=dim, heads=heads)
        for name in ("Attention", "EventsOnlyAttention", "PortableAttention")
    }
    # Round-robin, so that changing machine load hits every variant alike.
    times = dict.fromkeys(make, float("inf"))
    for _ in range(repeat):
        times["Attention"] = min(times["Attention"], undecorated_ns(make["Attention"], number))
        for name in ("EventsOnlyAttention", "PortableAttention"):
            times[name] = min(times[name], mean_ns(make[name], number))
    baseline = times["Attention"]
    print(f"  undecorated          {baseline / 1e3:10.1f} us")
    for name, decorator in [
        ("EventsOnlyAttention", "@device_events()"),
        ("PortableAttention", "@device_namespace()"),
    ]:
        ratio = times[name] / baseline
        verdict = "ok" if ratio <= TARGET_RATIO else f"above the {TARGET_RATIO:.2f} target"
        extra = (times[name] - baseline) / 1e3
        print(
            f"  {decorator:20s} {times[name] / 1e3:10.1f} us  ratio {ratio:.3f} "
            f"({extra:+.1f} us, {verdict})"
        )


def bench_decorated_call(number: int = 20_000, repeat: int = 15) -> None:
    """Print what each decorator adds to one call of a trivial function."""

    def bare() -> None:
        pass

    decorated = {
        "@device_namespace()": device_namespace()(bare),
        "@device_events()": device_events()(bare),
    }
    times = dict.fromkeys(["bare", *decorated], float("inf"))
    for _ in range(repeat):  # round-robin, as above
        times["bare"] = min(times["bare"], mean_ns(bare, number))
        for name, fn in decorated.items():
            times[name] = min(times[name], mean_ns(fn, number))
    print(f"A decorated call on {active_device_type()}, best of {repeat} x {number}:")
    print(f"  bare function        {times['bare'] / 1e3:8.2f} us")
    for name in decorated:
        extra = (times[name] - times["bare"]) / 1e3
        verdict = ""
        if name == "@device_namespace()":
            verdict = (
                ", ok" if extra <= TARGET_CALL_US else f", above the {TARGET_CALL_US} us target"
            )
        print(f"  {name:20s} {times[name] / 1e3:8.2f} us  ({extra:+.2f} us per call{verdict})")
    floor = floor_ns(number, repeat)
    print("  of which, for @device_namespace(), the writes a cold call must make, timed alone:")
    for name, ns in floor.items():
        print(f"    {name:44s} {ns / 1e3:6.2f} us")
    total = sum(floor.values())
    spent = (times["@device_namespace()"] - times["bare"]) / 1e3
    with device_namespace():
        parts = len(patchscope.active())
    print(f"    {'together':44s} {total / 1e3:6.2f} us; the rest, {spent - total / 1e3:.2f} us, is")
    print(f"    resolving the device and the registry's work for the {parts} redirects")


def floor_ns(number: int = 20_000, repeat: int = 15) -> dict[str, float]:
    """Time, alone, the writes one cold ``@device_namespace()`` call cannot avoid.

    Nothing of patchscope's stays on torch between calls, so each call with
    no other activation open installs its context slots and takes them out
    again: the dispatcher set as ``__new__`` of ``torch.cuda``'s Event, Stream
    and StreamContext and their own put back, ``torch.cuda``'s class swapped to a private
    subclass and back, and the one context variable every slot reads set on
    entry and on exit. The rest of a call is the registry's own work.
    """
    classes: tuple[type, ...] = (
        torch.cuda.streams.Event,
        torch.cuda.streams.Stream,
        torch.cuda.StreamContext,
    )
    own: dict[type, Any] = {cls: vars(cls).get("__new__") for cls in classes}  # None: inherited
    dispatcher = staticmethod(lambda cls, *args, **kwargs: object.__new__(cls))

    def restore(cls: type) -> None:
        if own[cls] is None:
            delattr(cls, "__new__")
        else:
            cls.__new__ = own[cls]  # type: ignore[method-assign]

    module = torch.cuda
    module_class = type(module)
    private = type("_Private", (module_class,), {"__slots__": ()})
    variable: contextvars.ContextVar[tuple[object, ...]] = contextvars.ContextVar(
        "floor", default=()
    )

    def new_slots() -> None:
        for cls in classes:
            cls.__new__ = dispatcher  # type: ignore[method-assign,assignment]
        for cls in classes:
            restore(cls)

    def module_swap() -> None:
        module.__class__ = private
        module.__class__ = module_class

    def context_variable() -> None:
        variable.set((None,))
        variable.set(())

    writes = {
        "__new__ replaced and restored on 3 classes": new_slots,
        "torch.cuda class swapped and back": module_swap,
        "1 context variable set twice": context_variable,
    }
    times = dict.fromkeys(writes, float("inf"))
    try:
        for _ in range(repeat):
            for name, write in writes.items():
                times[name] = min(times[name], mean_ns(write, number))
    finally:
        module.__class__ = module_class
        for cls in classes:
            if vars(cls).get("__new__") is dispatcher:
                restore(cls)
    return times


def bench_host_event(number: int = 100_000) -> None:
    """Print HostEvent record() and elapsed_time() costs."""
    start, end = HostEvent(enable_timing=True), HostEvent(enable_timing=True)
    start.record()
    end.record()
    record = best_ns(end.record, number)
    elapsed = best_ns(lambda: start.elapsed_time(end), number)
    print(f"HostEvent (best of 7 x {number}):")
    print(f"  record()                     {record:8.0f} ns")
    print(f"  elapsed_time()               {elapsed:8.0f} ns")
    print(f"  record() + elapsed_time()    {record + elapsed:8.0f} ns")


def _mlp_step(device: str, width: int, batch: int) -> Callable[[], object]:
    """One forward+backward step of a small MLP, written for ``device``."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(width, 4 * width), torch.nn.GELU(), torch.nn.Linear(4 * width, width)
    ).to(device)
    data = torch.randn(batch, width)

    def step() -> object:
        model.zero_grad(set_to_none=True)
        x = data.to(device, non_blocking=True)
        loss = model(x).square().mean()
        loss.backward()
        return loss

    return step


def bench_transfer_step(
    width: int = 256, batch: int = 64, number: int = 50, repeat: int = 15
) -> None:
    """Print a CUDA-written step inside transfer_to_device() against the same step for the CPU."""
    if active_device_type() != "cpu":
        print("transfer_to_device() step: skipped, the comparison is with the CPU")
        return
    cpu_step = _mlp_step("cpu", width, batch)
    with transfer_to_device():
        cuda_step = _mlp_step("cuda", width, batch)
    per_step = transfer_to_device()(cuda_step)
    times = {"cpu": float("inf"), "scope": float("inf"), "per_step": float("inf")}
    for _ in range(repeat):  # round-robin, as above
        times["cpu"] = min(times["cpu"], mean_ns(cpu_step, number))
        with transfer_to_device():
            times["scope"] = min(times["scope"], mean_ns(cuda_step, number))
        times["per_step"] = min(times["per_step"], mean_ns(per_step, number))
    print(f"MLP({width}) forward+backward, batch {batch}, on cpu, best of {repeat} x {number}:")
    baseline = times["cpu"]
    print(f"  written for the CPU                 {baseline / 1e3:8.1f} us")
    for name, label in [
        ("scope", "CUDA-written, in the scope"),
        ("per_step", "CUDA-written, @transfer_to_device()"),
    ]:
        ratio = times[name] / baseline
        verdict = "ok" if ratio <= TARGET_RATIO else f"above the {TARGET_RATIO:.2f} target"
        if name == "per_step":
            verdict = "the scope entered and ended per step"
        print(f"  {label:35s} {times[name] / 1e3:8.1f} us  ratio {ratio:.3f} ({verdict})")


def bench_reached_by_call(number: int = 200, calls: int = 200_000, repeat: int = 9) -> None:
    """Print the scope's activation, by call vs. by name, and a call's cost around a scope."""
    from torch.cuda import is_available

    redirect = transfer_to_device()
    with redirect:
        live = patchscope.active()
    by_call = [act for act in live if act.name == "__code__"]
    # The same functions, rebound by name on the module that defines them.
    by_name = patchscope.combine(
        *(
            patchscope.redirect_attr(module, act.target.__name__, act.replacement)
            for act in by_call
            for module in [sys.modules[act.target.__module__]]
            if getattr(module, act.target.__name__, None) is act.target
        )
    )

    def enter_exit(scope: Any) -> Callable[[], None]:
        def once() -> None:
            with scope:
                pass

        return once

    def plain() -> bool:
        return False

    # The scope's call redirects alone, against the same functions by name.
    call_part = patchscope.combine(
        *(patchscope.redirect_call(act.target, act.replacement) for act in by_call)
    )
    scopes = {"scope": redirect, "by_call": call_part, "by_name": by_name}
    times = dict.fromkeys(scopes, float("inf"))
    for _ in range(repeat):
        for key, scope in scopes.items():
            times[key] = min(times[key], mean_ns(enter_exit(scope), number))
    print(f"Entered and ended (best of {repeat} x {number}):")
    rows = [
        (f"transfer_to_device(), {len(live)} redirects", times["scope"], ""),
        (f"its {len(by_call)} functions, by call", times["by_call"], ""),
        (
            "the same functions, rebound by name",
            times["by_name"],
            f"  (by call: {times['by_call'] / times['by_name']:.2f}x)",
        ),
    ]
    for label, ns, note in rows:
        print(f"  {label:38s} {ns / 1e3:8.1f} us{note}")

    calls_ns = {"plain": float("inf"), "none": float("inf"), "other": float("inf")}
    for _ in range(repeat):
        calls_ns["plain"] = min(calls_ns["plain"], mean_ns(plain, calls))
        calls_ns["none"] = min(calls_ns["none"], mean_ns(is_available, calls))
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with transfer_to_device():
            holding.set()
            release.wait(600)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        if not holding.wait(60):
            raise RuntimeError("the thread holding the scope did not start")
        for _ in range(repeat):
            calls_ns["other"] = min(calls_ns["other"], mean_ns(is_available, calls))
    finally:
        release.set()
        holder.join(60)
    with transfer_to_device():
        inside = min(mean_ns(is_available, calls) for _ in range(repeat))
    base = calls_ns["none"]
    print(f"A call of torch.cuda.is_available, imported first (best of {repeat} x {calls}):")
    for label, ns, note in [
        ("a trivial Python function", calls_ns["plain"], ""),
        ("no scope active anywhere", base, "  ratio 1.00"),
        (
            "another thread holds a scope",
            calls_ns["other"],
            f"  ratio {calls_ns['other'] / base:.2f} (torch's own answer)",
        ),
        ("in the scope", inside, "  (the host's answer)"),
    ]:
        print(f"  {label:38s} {ns:8.0f} ns{note}")

if __name__ == "__main__":
    example = load_example()
    bench_construction(example, dim=64, heads=4, number=100)  # the example's defaults
    bench_construction(example, dim=1024, heads=16, number=3)
    bench_decorated_call()
    bench_host_event()
    bench_transfer_step()
    bench_reached_by_call()
