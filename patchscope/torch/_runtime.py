"""Stand-ins for torch.cuda's runtime queries, answering for another device.

``runtime_functions(device_type)`` gives, for each ``torch.cuda`` name that
:func:`~patchscope.torch.transfer_to_device` rebinds, the function that answers
for ``device_type``: the device module's own where it has one, else
``torch.accelerator``'s, else a stand-in documented here. On the CPU the
stand-ins report the logical devices the scope stands (``device_count()``;
every one of them is the host), host memory where that is a real figure
(``mem_get_info``, ``get_device_properties().total_memory``), and 0 or an empty
dict where torch keeps no host figure (the caching allocator's counters,
NVML's monitors). ``memory_functions`` does the same for the allocator's
history and snapshots in ``torch.cuda.memory``, and ``oom_observer`` for
torch's out-of-memory hook. ``set_device`` and ``device`` take any CUDA
index, which names the host, so that one process per rank
(``torch.cuda.set_device(local_rank)``) runs; ``current_device()`` answers
the index this thread selected last, as on CUDA. ``is_bf16_supported()``
answers whether the CPU computes bfloat16 natively (:func:`host_bf16`).
The RNG functions (``manual_seed``, ``get_rng_state``, ...) work on the CPU's
default generator: with ``is_available()`` True, torch itself (Dynamo saving
and restoring RNG state around tracing) calls them.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import pickle
import platform
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch

from ._namespace import missing_function

# What transfer_to_device rebinds on torch.cuda, besides device_namespace's names.
RUNTIME_NAMES = (
    "can_device_access_peer",
    "clock_rate",
    "current_device",
    "device",
    "device_count",
    "device_memory_used",
    "empty_cache",
    "get_device_capability",
    "get_device_name",
    "get_device_properties",
    "get_per_process_memory_fraction",
    "get_rng_state",
    "get_rng_state_all",
    "get_sync_debug_mode",
    "init",
    "initial_seed",
    "ipc_collect",
    "is_available",
    "is_bf16_supported",
    "manual_seed",
    "manual_seed_all",
    "max_memory_allocated",
    "mem_get_info",
    "memory_allocated",
    "memory_reserved",
    "memory_snapshot",
    "memory_stats",
    "memory_summary",
    "memory_usage",
    "power_draw",
    "reset_accumulated_memory_stats",
    "reset_max_memory_allocated",
    "reset_peak_memory_stats",
    "set_device",
    "set_per_process_memory_fraction",
    "set_rng_state",
    "set_rng_state_all",
    "set_sync_debug_mode",
    "temperature",
    "utilization",
)

#: What transfer_to_device rebinds on ``torch.cuda.memory``: the allocator's
#: history and snapshots, which the memory-snapshot tools of training loops use.
MEMORY_NAMES = ("_dump_snapshot", "_record_memory_history", "_snapshot", "memory_snapshot")

#: The ``torch.cuda.nvtx`` annotations: NVIDIA's profiler ranges and marks,
#: which mean nothing on another device and record nothing there.
NVTX_NAMES = ("mark", "range", "range_end", "range_pop", "range_push", "range_start")

#: ``get_device_capability()`` on the CPU: no CUDA compute capability, so code
#: that enables a kernel from ``capability >= (8, 0)`` on keeps the portable path.
HOST_CAPABILITY = (0, 0)


@dataclass(frozen=True)
class HostDeviceProperties:
    """What ``torch.cuda.get_device_properties()`` answers on the CPU.

    ``name`` is the processor, ``total_memory`` the host's physical memory in
    bytes, ``multi_processor_count`` the CPUs this process may run on;
    ``major``/``minor`` are :data:`HOST_CAPABILITY`. ``gcnArchName`` is
    empty: Inductor reads it (ROCm's name) where torch has no CUDA version.
    """

    name: str
    total_memory: int
    multi_processor_count: int
    major: int = HOST_CAPABILITY[0]
    minor: int = HOST_CAPABILITY[1]
    is_integrated: bool = True
    gcnArchName: str = ""  # torch's spelling


def _host_memory() -> tuple[int, int]:
    """Return (available, total) host memory in bytes, as ``mem_get_info`` orders them."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            fields = dict(line.split(":", 1) for line in meminfo)
        total = int(fields["MemTotal"].split()[0]) * 1024
        available = int(fields["MemAvailable"].split()[0]) * 1024
        return available, total
    except (OSError, KeyError, ValueError):
        page = os.sysconf("SC_PAGE_SIZE")
        total = page * os.sysconf("SC_PHYS_PAGES")
        try:
            available = page * os.sysconf("SC_AVPHYS_PAGES")
        except (ValueError, OSError):  # macOS has no SC_AVPHYS_PAGES
            available = total
        return available, total


def _host_cpus() -> int:
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def _host_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def _host_properties(device: object = None) -> HostDeviceProperties:
    return HostDeviceProperties(_host_name(), _host_memory()[1], _host_cpus())


def _check_host_index(device: object, name: str) -> None:
    """Accept any CUDA or CPU device spec: every index names the host (one process per rank).

    A negative index is a no-op, as in torch (``t.get_device()`` is -1 for a
    tensor on the host, which every "cuda" tensor in the scope is).
    """
    if device is None or (isinstance(device, int) and not isinstance(device, bool)):
        return
    if isinstance(device, _CUDA_DEVICE):  # ``with torch.cuda.device(0) as d``: torch takes it
        return
    if isinstance(device, (str, torch.device)):
        try:
            parsed = torch.device(device)
        except (RuntimeError, ValueError):
            parsed = None
        if parsed is not None and parsed.type in ("cuda", "cpu"):
            return
    raise ValueError(
        f"torch.cuda.{name}({device!r}): transfer_to_device() on the CPU takes a CUDA "
        "device (0, 'cuda', 'cuda:N', torch.device('cuda', N)) or 'cpu'"
    )


# The logical device each thread last selected (``set_device``), as CUDA keeps
# a current device per thread, for the thread's life; every one of them is
# the host.
_selected = threading.local()


def _host_current_device() -> int:
    return int(getattr(_selected, "index", 0))


def _host_set_device(device: object) -> None:
    """Selects a logical device: its index is what ``current_device()`` answers in this thread.

    Every index names the host (see _check_host_index), so one process per
    rank (``torch.cuda.set_device(local_rank)``) runs with any number of
    ranks; a negative index selects nothing, as in torch.
    """
    index = _index_of(device)
    if index is not None and index >= 0:
        _selected.index = index


def _index_of(device: object) -> int | None:
    """The CUDA index a device spec names (None for "cuda" without one, or "cpu")."""
    if isinstance(device, _CUDA_DEVICE):
        return int(getattr(device, "idx", -1))
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    if isinstance(device, (str, torch.device)):
        parsed = torch.device(device)
        return parsed.index if parsed.type == "cuda" else None
    return None


_CUDA_DEVICE = torch.cuda.device  # the class, whatever torch.cuda.device names later


class _HostDevice(_CUDA_DEVICE):
    """``torch.cuda.device`` on the host: selects a logical device while entered.

    A class, a subclass of torch's, so that torch's own
    ``isinstance(device, torch.cuda.device)`` checks keep working while the
    name stands for it (``torch.load(map_location="cuda")`` makes one). As
    on CUDA, ``current_device()`` answers its index inside the ``with`` and
    the previous one after it; every index is the host.
    """

    def __init__(self, device: Any) -> None:
        _check_host_index(device, "device")
        index = _index_of(device)
        self.idx = -1 if index is None else index
        self.prev_idx = -1

    def __enter__(self) -> None:
        self.prev_idx = _host_current_device()
        if self.idx >= 0:
            _selected.index = self.idx
        return None

    def __exit__(self, *exc_info: object) -> None:
        if self.idx >= 0:
            _selected.index = self.prev_idx
        return None


_host_device = _HostDevice


def _zero(device: object = None) -> int:
    return 0


def _nothing(device: object = None) -> None:
    return None


def _host_snapshot(device: object = None, augment_with_fx_traces: bool = False) -> dict[str, Any]:
    """``torch.cuda.memory._snapshot()`` on the host: no allocator segments, no trace entries."""
    _check_host_index(device, "memory._snapshot")
    return {"segments": [], "device_traces": [[]]}


def _host_dump_snapshot(
    filename: str = "dump_snapshot.pickle", augment_with_fx_traces: bool = False
) -> None:
    with open(filename, "wb") as f:
        pickle.dump(_host_snapshot(), f)


def _host_record_memory_history(*args: Any, **kwargs: Any) -> None:
    """Recording starts and stops as asked; the host has no allocator events to record.

    The arguments are checked as CUDA's function checks them.
    """
    _bound(_HISTORY_CALL, _history_signature(args, kwargs), args, kwargs)


def _host_memory_snapshot(mempool_id: object = None, include_traces: bool = True) -> list[Any]:
    return []


def _host_memory_used(device: object = None) -> int:
    available, total = _host_memory()
    return total - available


#: What the host stand-ins were last told, for their getters: process-wide,
#: as torch keeps them on CUDA; nothing on the host acts on them.
_host_settings: dict[str, Any] = {"sync_debug_mode": 0, "memory_fraction": 1.0}
_SYNC_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def _host_set_sync_debug_mode(debug_mode: int | str) -> None:
    # torch.cuda's own check; the host has no device synchronization to report.
    if isinstance(debug_mode, str):
        if debug_mode not in _SYNC_DEBUG_MODES:
            raise RuntimeError(
                "invalid value of debug_mode, expected one of `default`, `warn`, `error`"
            )
        debug_mode = _SYNC_DEBUG_MODES[debug_mode]
    _host_settings["sync_debug_mode"] = int(debug_mode)


def _host_get_sync_debug_mode() -> int:
    return int(_host_settings["sync_debug_mode"])


def _host_can_device_access_peer(device: object, peer_device: object) -> bool:
    """Every index names the host, which has no peer device."""
    _check_host_index(device, "can_device_access_peer")
    _check_host_index(peer_device, "can_device_access_peer")
    return False


#: What torchtnt's and others' out-of-memory snapshot hooks call on ``torch._C``;
#: a CPU-only torch has no such name, so transfer_to_device creates it in its scope.
OOM_OBSERVER = "_cuda_attach_out_of_memory_observer"


def _host_attach_oom_observer(observer: Callable[..., Any]) -> None:
    """The host's allocator raises its own error when memory runs out and calls no observer."""


def oom_observer(device_type: str) -> Callable[..., Any]:
    """What ``torch._C._cuda_attach_out_of_memory_observer`` becomes for ``device_type``."""
    if device_type == "cpu":
        return _host_attach_oom_observer
    own = getattr(torch._C, f"_{device_type}_attach_out_of_memory_observer", None)
    if own is None:
        own = getattr(getattr(torch, device_type, None), "attach_out_of_memory_observer", None)
    if own is not None:
        return own  # type: ignore[no-any-return]
    return missing_function(
        OOM_OBSERVER,
        f"torch has no out-of-memory observer for {device_type!r}, so transfer_to_device() "
        f"cannot stand in for torch._C.{OOM_OBSERVER} there",
    )


#: The host stand-ins of :data:`MEMORY_NAMES`.
HOST_MEMORY: dict[str, Callable[..., Any]] = {
    "_dump_snapshot": _host_dump_snapshot,
    "_record_memory_history": _host_record_memory_history,
    "_snapshot": _host_snapshot,
    "memory_snapshot": _host_memory_snapshot,
}


def host_bf16() -> bool:
    """Whether this CPU computes bfloat16 natively, so that it is faster than float32.

    x86: AVX512-BF16 or AMX; arm64: the BF16 extension (``bf16`` among the
    kernel's CPU features on Linux, ``FEAT_BF16`` on macOS). Without it torch
    emulates bfloat16 on the CPU, many times slower than float32.
    """
    cpu = getattr(torch, "cpu", None)
    for probe in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"):
        check = getattr(cpu, probe, None)
        if check is not None and check():
            return True
    machine = platform.machine().lower()
    if machine not in ("aarch64", "arm64"):
        return False
    if sys.platform == "darwin":
        import subprocess

        try:
            answer = subprocess.run(
                ["sysctl", "-n", "hw.optional.arm.FEAT_BF16"],
                capture_output=True,
                text=True,
                timeout=5,
                check=False,
            ).stdout
        except (OSError, subprocess.SubprocessError):
            return False
        return answer.strip() == "1"
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            return any(
                line.startswith("Features") and "bf16" in line.split(":", 1)[1].split()
                for line in cpuinfo
            )
    except OSError:
        return False


@functools.cache
def _host_bf16_answer() -> bool:
    return host_bf16()


def _host_is_bf16_supported(including_emulation: bool = True) -> bool:
    """``torch.cuda.is_bf16_supported()`` on the CPU: True only where bfloat16 is native.

    Code asks to choose a fast dtype (nanoGPT: bfloat16 if supported, else
    float16). torch emulates bfloat16 on a CPU without native support, many
    times slower than float32, so that is answered False even with
    ``including_emulation=True``, CUDA's default.
    """
    return _host_bf16_answer()


def _host_runtime(count: int = 1) -> dict[str, Callable[..., Any]]:
    def seed(seed: int) -> None:
        torch.default_generator.manual_seed(int(seed))

    generator = torch.default_generator

    def get_rng_state(device: object = "cuda") -> torch.Tensor:
        return generator.get_state()

    def set_rng_state(new_state: torch.Tensor, device: object = "cuda") -> None:
        generator.set_state(new_state)

    def set_rng_state_all(new_states: list[torch.Tensor]) -> None:
        for state in new_states:
            generator.set_state(state)

    def mem_get_info(device: object = None) -> tuple[int, int]:
        return _host_memory()

    def memory_stats(device: object = None) -> dict[str, Any]:
        return {}

    def memory_summary(device: object = None, abbreviated: bool = False) -> str:
        available, total = _host_memory()
        return (
            "Host memory: the CPU has no caching allocator, so there are no CUDA "
            f"memory statistics to report ({available} of {total} bytes available).\n"
        )

    def set_per_process_memory_fraction(fraction: float, device: object = None) -> None:
        # torch.cuda's own checks; then nothing to limit (no caching allocator).
        _check_host_index(device, "set_per_process_memory_fraction")
        if not isinstance(fraction, float):
            raise TypeError("Invalid type for fraction argument, must be `float`")
        if not 0 <= fraction <= 1:
            raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
        _host_settings["memory_fraction"] = fraction

    def get_per_process_memory_fraction(device: object = None) -> float:
        return float(_host_settings["memory_fraction"])

    return _checking_devices(
        {
            "can_device_access_peer": _host_can_device_access_peer,
            "clock_rate": _zero,
            "current_device": _host_current_device,
            "device": _host_device,
            "device_count": lambda: count,
            "device_memory_used": _host_memory_used,
            "empty_cache": lambda: None,
            "get_device_capability": lambda device=None: HOST_CAPABILITY,
            "get_device_name": lambda device=None: _host_name(),
            "get_device_properties": _host_properties,
            "get_per_process_memory_fraction": get_per_process_memory_fraction,
            "get_rng_state": get_rng_state,
            "get_rng_state_all": lambda: [generator.get_state()],
            "get_sync_debug_mode": _host_get_sync_debug_mode,
            "init": _nothing,
            "initial_seed": generator.initial_seed,
            "ipc_collect": _nothing,
            "is_available": lambda: True,
            "is_bf16_supported": _host_is_bf16_supported,
            "manual_seed": seed,
            "manual_seed_all": seed,
            "max_memory_allocated": _zero,
            "mem_get_info": mem_get_info,
            "memory_allocated": _zero,
            "memory_reserved": _zero,
            "memory_snapshot": _host_memory_snapshot,
            "memory_stats": memory_stats,
            "memory_summary": memory_summary,
            "memory_usage": _zero,
            "power_draw": _zero,
            "reset_accumulated_memory_stats": _nothing,
            "reset_max_memory_allocated": _nothing,
            "reset_peak_memory_stats": _nothing,
            "set_device": _host_set_device,
            "set_per_process_memory_fraction": set_per_process_memory_fraction,
            "set_rng_state": set_rng_state,
            "set_rng_state_all": set_rng_state_all,
            "set_sync_debug_mode": _host_set_sync_debug_mode,
            "temperature": _zero,
            "utilization": _zero,
        }
    )


def _checking_devices(functions: dict[str, Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
    """The host stand-ins, those of :data:`_TAKES_DEVICE` refusing what is not a CUDA device.

    As ``torch.cuda.utilization("xpu:1")`` raises on CUDA, so does its stand-in
    (see _check_host_index); each gets a function of its own, named as the
    one it stands in for. A class (``device``) checks in its ``__init__``.
    """

    def checking(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            _check_host_index(args[0] if args else kwargs.get("device"), name)
            return function(*args, **kwargs)

        call.__name__ = call.__qualname__ = name
        call.__doc__ = function.__doc__
        return call

    return {
        name: checking(name, function)
        if name in _TAKES_DEVICE and not isinstance(function, type)
        else function
        for name, function in functions.items()
    }


# torch.accelerator's spelling of a torch.cuda name, where it differs.
_ACCELERATOR_NAMES = {
    "current_device": "current_device_index",
    "device": "device_index",
    "mem_get_info": "get_memory_info",
    "set_device": "set_device_index",
}


# The functions whose first argument (or ``device=``) names a device.
_TAKES_DEVICE = frozenset(
    {
        "_snapshot",
        "clock_rate",
        "device",
        "device_memory_used",
        "get_device_capability",
        "get_device_name",
        "get_device_properties",
        "get_per_process_memory_fraction",
        "get_rng_state",
        "max_memory_allocated",
        "mem_get_info",
        "memory_allocated",
        "memory_reserved",
        "memory_stats",
        "memory_summary",
        "memory_usage",
        "power_draw",
        "reset_accumulated_memory_stats",
        "reset_max_memory_allocated",
        "reset_peak_memory_stats",
        "set_device",
        "temperature",
        "utilization",
    }
)


@functools.cache
def device_mapper(device_type: str) -> Callable[[Any], Any]:
    """Return the function that maps a CUDA device spec to ``device_type``'s device.

    ``"cuda"``, ``"cuda:N"``, ``torch.device("cuda"[, N])`` and integer
    ordinals map to ``device_type`` (keeping the index, except on the CPU,
    which has one device); everything else is returned as it is, for torch to
    accept or reject.
    """
    cache: dict[Any, Any] = {}
    host = device_type == "cpu"

    def on(index: int | None) -> torch.device:
        if host or index is None:
            return torch.device(device_type)
        return torch.device(device_type, index)

    def mapped(device: Any) -> Any:
        if device.__class__ is bool:
            return device
        try:
            return cache[device]
        except KeyError:
            pass
        except TypeError:  # unhashable: not a device spec
            return device
        result = device
        if isinstance(device, int):
            result = on(device)
        elif isinstance(device, (str, torch.device)):
            try:
                parsed = torch.device(device)
            except (RuntimeError, ValueError):
                parsed = None  # torch raises its own error where it is used
            if parsed is not None and parsed.type == "cuda":
                result = on(parsed.index)
        if len(cache) < 256:
            cache[device] = result
        return result

    return mapped


def _taking_mapped_device(function: Callable[..., Any], device_type: str) -> Callable[..., Any]:
    """Wrap a backend function so that a CUDA device argument names the backend's device."""
    mapped = device_mapper(device_type)

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        if args:
            args = (mapped(args[0]), *args[1:])
        elif "device" in kwargs:
            kwargs["device"] = mapped(kwargs["device"])
        return function(*args, **kwargs)

    return call


def _taking_mapped_devices(function: Callable[..., Any], device_type: str) -> Callable[..., Any]:
    """Wrap ``can_device_access_peer(device, peer_device)``: both arguments name devices."""
    mapped = device_mapper(device_type)

    @functools.wraps(function)
    def call(device: Any, peer_device: Any) -> Any:
        return function(mapped(device), mapped(peer_device))

    return call


def runtime_functions(device_type: str, count: int = 1) -> dict[str, Callable[..., Any]]:
    """Return what each of :data:`RUNTIME_NAMES` becomes for ``device_type`` (not "cuda").

    On the CPU, ``count`` is how many logical devices ``device_count()``
    answers; every one of them is the host.
    """
    if device_type == "cpu":
        return _host_runtime(count)
    module: ModuleType | None = getattr(torch, device_type, None)
    accelerator = getattr(torch, "accelerator", None)
    functions: dict[str, Callable[..., Any]] = {}
    for name in RUNTIME_NAMES:
        function = getattr(module, name, None)
        if function is None:
            function = getattr(accelerator, _ACCELERATOR_NAMES.get(name, name), None)
        if function is None and name in _SAME_AS:
            function = getattr(module, _SAME_AS[name], None)
        if function is None and name in _WHERE_ABSENT:
            function = _WHERE_ABSENT[name]
        if function is None:
            function = _unsupported(device_type, name)
        elif name == "device" and isinstance(function, type):
            function = _mapped_device_class(function, device_type)
        elif name == "set_per_process_memory_fraction":
            function = _fraction_setter(function, device_type)
        elif name == "can_device_access_peer":
            function = _taking_mapped_devices(function, device_type)
        elif name == "memory_snapshot":
            function = _snapshot_taker(function)
        elif name in _TAKES_DEVICE:
            function = _taking_mapped_device(function, device_type)
        functions[name] = function
    functions["is_available"] = lambda: True
    if not hasattr(module, "is_bf16_supported"):
        functions["is_bf16_supported"] = lambda including_emulation=True: True
    return functions


def memory_functions(device_type: str) -> dict[str, Callable[..., Any]]:
    """Return what each of :data:`MEMORY_NAMES` becomes for ``device_type`` (not "cuda").

    The backend's own ``torch.<device>.memory`` functions, else the host's
    stand-ins on the CPU, else functions that say the backend lacks them.
    """
    if device_type == "cpu":
        return dict(HOST_MEMORY)
    memory = getattr(getattr(torch, device_type, None), "memory", None)
    functions: dict[str, Callable[..., Any]] = {}
    for name in MEMORY_NAMES:
        function = getattr(memory, name, None)
        if function is None:
            function = _unsupported(device_type, name, f"torch.{device_type}.memory")
        elif name == "_record_memory_history":
            function = _history_recorder(function)
        elif name == "memory_snapshot":
            function = _snapshot_taker(function)
        elif name in _TAKES_DEVICE:
            function = _taking_mapped_device(function, device_type)
        functions[name] = function
    return functions


#: ``torch.cuda.memory._record_memory_history``'s parameters, in order, where
#: torch does not say them (only the names matter: arguments are bound, and
#: defaults are left to the function called).
_HISTORY_PARAMETERS = (
    "enabled",
    "context",
    "stacks",
    "max_entries",
    "device",
    "clear_history",
    "compile_context",
    "global_record_annotations",
    "skip_actions",
)


def _signature_of(owner: object, name: str, names: tuple[str, ...] = ()) -> inspect.Signature:
    """``owner.name``'s signature; made from *names* where it cannot be had."""
    try:
        return inspect.signature(getattr(owner, name))
    except (AttributeError, TypeError, ValueError):
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        return inspect.Signature([inspect.Parameter(n, kind, default=None) for n in names])


def _legacy_history(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a ``_record_memory_history`` call is the legacy form (``enabled`` a bool)."""
    return isinstance(args[0] if args else kwargs.get("enabled"), bool)


def _history_signature(args: tuple[Any, ...], kwargs: dict[str, Any]) -> inspect.Signature:
    """What CUDA's ``_record_memory_history`` takes for these arguments.

    The legacy form has parameters of its own.
    """
    memory = torch.cuda.memory
    if _legacy_history(args, kwargs):
        return _signature_of(memory, "_record_memory_history_legacy", ("enabled",))
    return _signature_of(memory, "_record_memory_history_impl", _HISTORY_PARAMETERS)


_HISTORY_CALL = "torch.cuda.memory._record_memory_history()"


def _bound(
    call: str, signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    """The arguments given, by name, as *signature* binds them; a TypeError naming *call* if not."""
    try:
        return dict(signature.bind(*args, **kwargs).arguments)
    except TypeError as exc:
        raise TypeError(f"{call}: {exc}") from None


def _called_as_cuda(
    function: Callable[..., Any],
    call: str,
    cuda: Callable[[tuple[Any, ...], dict[str, Any]], inspect.Signature | None],
) -> Callable[..., Any]:
    """A backend's *function* called with the arguments of CUDA's function of the same name.

    They are bound to CUDA's signature (``cuda(args, kwargs)``), so what CUDA
    refuses raises a TypeError that names *call*; then they are passed by
    name, without those the backend's function does not take (XPU's
    ``_record_memory_history`` takes neither ``device`` nor the
    compile-context flags, its ``memory_snapshot`` no ``include_traces``).
    Where ``cuda`` gives None they go through as they are.
    """
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return function
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return function

    @functools.wraps(function)
    def as_cuda(*args: Any, **kwargs: Any) -> Any:
        signature = cuda(args, kwargs)
        if signature is None:
            return function(*args, **kwargs)
        given = _bound(call, signature, args, kwargs)
        return function(**{name: value for name, value in given.items() if name in parameters})

    return as_cuda


def _history_recorder(function: Callable[..., Any]) -> Callable[..., Any]:
    """A backend's ``_record_memory_history`` called with CUDA's arguments.

    The legacy form (``enabled`` a bool) goes through as it is.
    """

    def cuda(args: tuple[Any, ...], kwargs: dict[str, Any]) -> inspect.Signature | None:
        return None if _legacy_history(args, kwargs) else _history_signature(args, kwargs)

    return _called_as_cuda(function, _HISTORY_CALL, cuda)


def _snapshot_taker(function: Callable[..., Any]) -> Callable[..., Any]:
    """A backend's ``memory_snapshot`` called with CUDA's arguments."""
    signature = _signature_of(torch.cuda.memory, "memory_snapshot", ("mempool_id",))
    return _called_as_cuda(function, "torch.cuda.memory_snapshot()", lambda *_: signature)


# torch.cuda names whose work a backend does under another name.
_SAME_AS = {"reset_max_memory_allocated": "reset_peak_memory_stats"}
# What a torch.cuda name becomes where the backend has no such function and
# there is nothing to do: lazy initialisation, freeing memory shared with
# other CUDA processes, and reporting synchronizations as CUDA's debug mode does.
_WHERE_ABSENT: dict[str, Callable[..., Any]] = {
    "get_sync_debug_mode": _host_get_sync_debug_mode,
    "init": _nothing,
    "ipc_collect": _nothing,
    "set_sync_debug_mode": _host_set_sync_debug_mode,
}


def _fraction_setter(function: Callable[..., Any], device_type: str) -> Callable[..., Any]:
    """``set_per_process_memory_fraction(fraction, device=None)`` for a backend's own.

    The device argument is mapped, or dropped where the backend has one device
    and its function takes none (MPS).
    """
    mapped = device_mapper(device_type)
    try:
        takes_device = "device" in inspect.signature(function).parameters
    except (TypeError, ValueError):
        takes_device = True

    @functools.wraps(function)
    def set_per_process_memory_fraction(fraction: float, device: Any = None) -> None:
        if not takes_device or device is None:
            function(fraction)
        else:
            function(fraction, mapped(device))

    return set_per_process_memory_fraction


def _mapped_device_class(device_class: Any, device_type: str) -> type:
    """A subclass of the backend's ``device`` context manager that takes CUDA device specs."""
    mapped = device_mapper(device_type)
    own_init = device_class.__init__

    def __init__(self: Any, device: Any) -> None:
        own_init(self, mapped(device))

    return type(device_class.__name__, (device_class,), {"__init__": __init__})


def _unsupported(device_type: str, name: str, where: str = "") -> Callable[..., Any]:
    """Return a stand-in for ``torch.cuda.<name>`` that says the backend lacks it."""
    if where:
        looked = f"{where} has no {name}()"
        cuda = f"torch.cuda.memory.{name}"
    else:
        looked = f"neither torch.{device_type} nor torch.accelerator has {name}()"
        cuda = f"torch.cuda.{name}"
    return missing_function(
        name,
        f"{looked}, so transfer_to_device() cannot stand in for {cuda} on {device_type!r}",
    )


@contextlib.contextmanager
def _no_range(msg: str, *args: Any, **kwargs: Any) -> Iterator[None]:
    yield


@functools.cache
def nvtx_functions() -> dict[str, Callable[..., Any]]:
    """What each of :data:`NVTX_NAMES` becomes off CUDA: annotations that record nothing.

    ``range_push``/``range_pop`` return the depth CUDA would report once NVTX
    is not recording (-1); ``range_start`` returns a handle for ``range_end``.
    """
    return {
        "mark": lambda msg: None,
        "range": _no_range,
        "range_end": lambda range_id: None,
        "range_pop": lambda: -1,
        "range_push": lambda msg: -1,
        "range_start": lambda msg: 0,
    }
