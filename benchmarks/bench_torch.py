"""What patchscope.torch costs, measured in one run.

1. Constructing the example attention module (examples/device_agnostic_attention.py)
   decorated vs. undecorated; the target is a ratio of at most 1.10. Where
   the undecorated class cannot construct (no CUDA), its baseline runs with
   ``torch.cuda.Event`` rebound once, by hand, outside the timed loop: what
   the module costs with no per-construction patching at all.
2. HostEvent: ``record()`` and ``elapsed_time()``, in nanoseconds per call.

    python benchmarks/bench_torch.py
"""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import torch

from patchscope.torch import HostEvent, active_device_type, device_event_class

TARGET_RATIO = 1.10
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "device_agnostic_attention.py"


def load_example() -> ModuleType:
    """Import the attention example as a module."""
    spec = importlib.util.spec_from_file_location("device_agnostic_attention", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def best_ns(call: Callable[[], object], number: int, repeat: int = 7) -> float:
    """Return the best mean nanoseconds per call over ``repeat`` runs of ``number`` calls."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter_ns()
        for _ in range(number):
            call()
        best = min(best, (time.perf_counter_ns() - start) / number)
    return best


def undecorated_ns(attention: type, number: int) -> float:
    """Time the undecorated class, rebinding torch.cuda.Event once if CUDA is absent."""
    event_class = device_event_class()
    if event_class is torch.cuda.Event:
        return best_ns(attention, number)
    original = torch.cuda.Event
    torch.cuda.Event = event_class  # type: ignore[misc]
    try:
        return best_ns(attention, number)
    finally:
        torch.cuda.Event = original  # type: ignore[misc]


def bench_construction(number: int = 300) -> None:
    """Print construction times of the attention module, undecorated and decorated."""
    example = load_example()
    print(f"attention module construction ({active_device_type()}, best of 7 x {number}):")
    # Interleave runs so that drifting machine load hits both sides alike.
    baseline = min(undecorated_ns(example.Attention, number) for _ in range(3))
    print(f"  undecorated Attention        {baseline / 1e3:8.1f} us")
    for name in ("EventsOnlyAttention", "PortableAttention"):
        decorated = min(best_ns(getattr(example, name), number) for _ in range(3))
        ratio = decorated / baseline
        verdict = "ok" if ratio <= TARGET_RATIO else f"above the {TARGET_RATIO:.2f} target"
        decorator = "device_events" if name == "EventsOnlyAttention" else "device_namespace"
        print(
            f"  @{decorator + '()':19s} {decorated / 1e3:8.1f} us  "
            f"ratio {ratio:.3f}  ({verdict})"
        )


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


if __name__ == "__main__":
    bench_construction()
    bench_host_event()
