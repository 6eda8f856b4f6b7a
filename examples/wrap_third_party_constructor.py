"""Make a class you do not own build with different dependencies, without editing it.

`during(owner, "__init__", ...)` wraps the third-party constructor so the
redirects are active while it runs, and restores the exact original method
afterwards. `redirect_construction` reaches names bound with `from ... import`.

Run: python examples/wrap_third_party_constructor.py
"""

from __future__ import annotations

import types

import patchscope

# --- pretend this is a third-party package --------------------------------
vendor = types.ModuleType("vendor")


class CudaTimer:
    def __init__(self) -> None:
        raise RuntimeError("Tried to instantiate dummy base class Event")


vendor.CudaTimer = CudaTimer
Timer = CudaTimer  # as `from vendor import CudaTimer as Timer` would bind it


class VendorModel:
    """Builds timers in its constructor; we cannot edit it."""

    def __init__(self, layers: int) -> None:
        self.layers = layers
        self.start, self.end = Timer(), vendor.CudaTimer()


# --- our code ----------------------------------------------------------------
class HostTimer:
    def __repr__(self) -> str:
        return "HostTimer()"


try:
    VendorModel(2)
except RuntimeError as exc:
    print("unpatched:", exc)

host_timers = patchscope.redirect_construction(CudaTimer, HostTimer)
original_init = vars(VendorModel)["__init__"]

with patchscope.during(VendorModel, "__init__", host_timers):
    model = VendorModel(2)
    print("built:", model.layers, "layers with timers", model.start, model.end)

assert vars(VendorModel)["__init__"] is original_init
print("constructor restored:", vars(VendorModel)["__init__"] is original_init)
print("CudaTimer identity kept:", vendor.CudaTimer is CudaTimer)
