"""transfer_to_device: unmodified CUDA-written scripts on the active device, for one scope.

Two mechanisms, entered together at each activation:

* Redirects (context-scoped by default): ``device_namespace()``'s names, the
  ``torch.cuda`` runtime queries (``_runtime``), ``__init__`` of autocast,
  GradScaler, DistributedDataParallel and DeviceMesh, and ``init_process_group``.
* A ``TorchFunctionMode`` (``_DeviceMode``), as ``torch.utils._device.DeviceContext``
  uses, that maps CUDA device arguments wherever torch takes one, instead of
  patching every factory and method. torch's mode stack is per thread, not per
  asyncio task: a mode acts only in the contexts that activated it (a
  ContextVar) and passes every call through elsewhere, so tasks sharing the
  thread keep torch's own behaviour.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import multiprocessing
import multiprocessing.process
import os
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

import torch
import torch.utils._device as _torch_device
from torch.overrides import TorchFunctionMode

import patchscope
from patchscope import (
    Redirect,
    combine,
    deferred,
    exclusive,
    original,
    redirect_attr,
    redirect_call,
)

from . import _host
from ._detect import device_type_of
from ._events import event_class_of
from ._namespace import _check, _dynamo_cuda_interface, _namespace_redirect
from ._reach import Scope, defined, reaching_every_name
from ._runtime import (
    MEMORY_NAMES,
    NVTX_NAMES,
    OOM_OBSERVER,
    RUNTIME_NAMES,
    device_mapper,
    memory_functions,
    nvtx_functions,
    oom_observer,
    runtime_functions,
)

_push_mode = torch._C._push_on_torch_function_stack
_pop_mode = torch._C._pop_torch_function_stack
_stack_len = torch._C._len_torch_function_stack
_stack_at = torch._C._get_function_stack_at
_get_ident = threading.get_ident

# Dynamo's frame callback: set while code torch.compile produced runs.
# Swapped through torch's C module (``set_eval_frame`` returns the one it
# replaces), so that torch._dynamo, slow to import, is never imported here.
_eval_frame = getattr(getattr(torch._C, "_dynamo", None), "eval_frame", None)
_set_dynamo_callback: Any = getattr(_eval_frame, "set_eval_frame", None)


def _skip_frames(code: Any) -> bool:
    """Dynamo never compiles a frame of *code* (what ``torch._dynamo.eval_frame.skip_code`` does).

    Through torch's C module, in the spelling of the installed release;
    nothing where it has neither. Returns whether the mark was made.
    """
    try:
        skip = getattr(_eval_frame, "skip_code", None)
        if skip is not None:
            skip(code)
            return True
        setter = getattr(_eval_frame, "set_code_exec_strategy", None)
        strategy = getattr(_eval_frame, "_FrameExecStrategy", None)
        action = getattr(_eval_frame, "_FrameAction", None)
        if setter is not None and strategy is not None and action is not None:
            setter(code, strategy(action.SKIP, action.DEFAULT))
            return True
    except (TypeError, AttributeError, RuntimeError):
        pass
    # A release that spells it otherwise: Dynamo may compile the mode's own
    # frame, which it sees before its first line runs; the callback swap in
    # __torch_function__ still keeps Dynamo off everything that frame calls.
    return False


# The modes the current context activated and has not ended.
_owned: contextvars.ContextVar[tuple[_DeviceMode, ...]] = contextvars.ContextVar(
    "patchscope.torch.transfer_modes", default=()
)


def transfer_to_device(
    device: str | torch.device | None = None,
    *,
    scope: Scope = "context",
    device_count: int | None = None,
) -> Redirect:
    """Run CUDA-written code on ``device`` (the active device when None) while active.

    Inside the scope:

    * everything :func:`device_namespace` covers;
    * ``"cuda"``, ``"cuda:N"``, ``torch.device("cuda"[, N])`` and integer
      ordinals name ``device`` wherever torch takes a device: tensor
      factories, ``Tensor.to``/``cuda``/``new_*``, ``Module.to``/``cuda``,
      module constructors with ``device=``, ``with torch.device("cuda")``,
      ``torch.Generator(device="cuda")``, ``torch.load(map_location="cuda")``; on
      the CPU the index is dropped and ``pin_memory()`` returns the tensor;
    * ``torch.cuda``'s runtime queries (``is_available``, ``device_count``,
      ``current_device``, ``set_device``, ``device``, ``get_device_name``,
      ``get_device_properties``, ``get_device_capability``,
      ``is_bf16_supported``, the memory queries and resets, ``init``,
      ``ipc_collect``, ``manual_seed[_all]``, NVML's monitors such as
      ``utilization``, the sync debug mode, the allocator's history and
      snapshots in ``torch.cuda.memory``) answer for ``device``, and so do
      the RNG-state functions; on the CPU with the stand-ins the
      ``patchscope.torch`` guide lists (``device_count`` logical devices,
      each the host; host memory; capability ``(0, 0)``; ``is_bf16_supported()``
      True only where the CPU computes bfloat16 natively);
      ``torch.cuda.nvtx``'s ranges and marks record nothing;
    * ``torch.autocast("cuda")``, ``torch.amp.autocast(device_type="cuda")``,
      ``torch.cuda.amp.autocast``, ``torch.amp.GradScaler("cuda")`` and
      ``torch.cuda.amp.GradScaler`` act for ``device``, and
      ``torch.is_autocast_enabled``, ``torch.get_autocast_dtype`` and
      ``torch.get_autocast_gpu_dtype`` answer "cuda" (or no device) for it;
    * ``torch.distributed.init_process_group(backend="nccl")`` and
      ``new_group(backend="nccl")`` use the device's backend (gloo on the
      CPU), ``DistributedDataParallel`` takes
      CUDA-style ``device_ids``/``output_device``, and FSDP (when the program
      imported it) a CUDA-style ``device_id``; a ``DeviceMesh`` of "cuda"
      (``init_device_mesh("cuda", ...)``, for FSDP2's ``fully_shard``) is one
      of ``device``; ``DataParallel`` passes calls through to the model on
      the one device, as torch does on the CPU;
    * the profiler's CUDA activity (``ProfilerActivity.CUDA``,
      ``use_device="cuda"``) profiles the device's own activity, or on the
      CPU and MPS the CPU's only;
    * a ``multiprocessing`` process started in the scope (``mp.spawn``,
      ``torch.multiprocessing.start_processes``, a spawn or forkserver
      context's ``Process`` or ``Pool``) runs its target inside the same
      ``transfer_to_device()``, ``device_count`` included; a forked one
      inherits the scope.

    torch's Python functions among these (the runtime queries, seeding,
    ``torch.load``, ``init_process_group``, ``new_group``, the stream
    functions) are redirected by call (:func:`patchscope.redirect_call`):
    names bound to them before the scope (``from torch.cuda import
    is_available`` at the top of a script) are reached too.

    ``device_count``: how many logical devices ``torch.cuda.device_count()``
    answers on the CPU, each of them the host, for a job of that many ranks
    on one machine (gloo underneath); None means one per local rank
    (``LOCAL_WORLD_SIZE``, which torchrun sets, else 1). ``set_device(i)``
    selects index ``i`` for the calling thread, as on CUDA, where the
    selection lasts as long as the thread. Where the active device is not the CPU the
    count is the device's own and ``device_count`` is ignored, so the same
    line runs on a machine with the devices. A count is refused with
    ValueError (nothing changed) where it is not an int of at least 1, or
    together with a ``device`` named that is not the CPU.

    The device is resolved at each activation; on CUDA nothing is installed
    (``patchscope.active()`` stays empty). ``with transfer_to_device() as
    device`` gives the ``torch.device`` the code runs on (None on CUDA).
    Usable in every form a Redirect has: ``with``, a function, method,
    generator or coroutine decorator, a class decorator (active during
    ``__init__``), ``start()``/``stop()``.

    Thread safety: with ``scope="context"`` (the default) only the thread or
    asyncio task that activated it (and tasks it creates meanwhile) sees any
    of this; every other thread and task keeps torch's CUDA semantics at the
    same time. ``scope="process"`` makes the redirects visible to all
    threads; device arguments are mapped in the activating thread only (torch
    keeps function modes per thread). Call ``stop()`` in the thread that
    called ``start()``: from another thread the mapping ends at once, but the
    inert mode leaves that thread's mode stack only when the thread next
    enters or ends a ``transfer_to_device()`` scope.
    """
    _check(device, scope)
    _check_count(device, device_count)
    return deferred(functools.partial(_resolve, device, scope, device_count), scope)


def _check_count(device: str | torch.device | None, device_count: object) -> None:
    """Reject a bad ``device_count`` when the redirect is made."""
    if device_count is None:
        return
    if not isinstance(device_count, int) or isinstance(device_count, bool) or device_count < 1:
        raise ValueError(
            f"transfer_to_device(device_count={device_count!r}): the number of logical "
            "devices must be an int of at least 1, or None for one device per local rank"
        )
    if device is not None and device_type_of(device) != "cpu":
        raise ValueError(
            f"transfer_to_device({device!r}, device_count={device_count}): logical devices "
            "stand only on the CPU; on another device torch.cuda.device_count() answers the "
            "device's own count, so leave device_count out"
        )


def _local_ranks() -> int:
    """The logical devices of a scope on the CPU that names none: one per local rank.

    ``LOCAL_WORLD_SIZE`` is what torchrun (and torch.distributed.elastic)
    sets in every rank: the ranks on this host, one GPU each on a cluster.
    Anything else, or nothing, gives one device.
    """
    try:
        count = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    except ValueError:
        return 1
    return count if count >= 1 else 1


def _resolve(
    device: str | torch.device | None, scope: Scope, device_count: int | None = None
) -> Redirect | None:
    """The redirect for the device named now; None on CUDA."""
    device_type = device_type_of(device)
    if device_type == "cuda":
        return None
    if device_type != "cpu":
        # The active device's own count: the same script runs where there is one.
        count, device_count = 1, None
    else:
        count = _local_ranks() if device_count is None else device_count
    return _transfer_redirect(
        device_type,
        event_class_of(device_type),
        getattr(torch, device_type, None),
        scope,
        _dynamo_cuda_interface(),
        _loaded_fsdp(),
        count,
        device_count,
    )


def _loaded_fsdp() -> type | None:
    """FSDP's class, if the program imported it (never imported here: it is slow to import)."""
    module = sys.modules.get("torch.distributed.fsdp.fully_sharded_data_parallel")
    fsdp = getattr(module, "FullyShardedDataParallel", None)
    return fsdp if isinstance(fsdp, type) else None


@functools.cache
def _transfer_redirect(
    device_type: str,
    event_class: type,
    module: Any,
    scope: Scope,
    dynamo: type | None,
    fsdp: type | None,
    count: int = 1,
    device_count: int | None = None,
) -> Redirect:
    """One cached Redirect per device (see _namespace_redirect's cache for why).

    ``count`` is what ``device_count()`` answers on the CPU; ``device_count``
    what the scope was asked for, which processes it starts are given.
    """
    namespace = _namespace_redirect(device_type, event_class, module, scope, dynamo)
    assert namespace is not None  # only CUDA has no namespace redirect
    functions = runtime_functions(device_type, count)
    memory = memory_functions(device_type)
    seen: set[int] = set()

    def by_call(owner: Any, name: str, replacement: Any, create: bool = False) -> list[Redirect]:
        return reaching_every_name(owner, name, replacement, scope, seen, create)

    parts = [
        namespace,
        redirect_attr(torch, "Generator", _generator_class(device_type), scope=scope),
        *by_call(torch, "load", _load_onto(device_type)),
        *(
            redirect_attr(torch, name, function, scope=scope)
            for name, function in _autocast_queries(device_type).items()
        ),
        *(
            part
            for name in RUNTIME_NAMES
            if hasattr(torch.cuda, name)  # torch releases add names
            for part in by_call(torch.cuda, name, functions[name])
        ),
        *(
            part
            for name in MEMORY_NAMES
            if hasattr(torch.cuda.memory, name)
            for part in by_call(torch.cuda.memory, name, memory[name])
        ),
        *by_call(torch._C, OOM_OBSERVER, oom_observer(device_type), create=True),
        *(
            part
            for name in NVTX_NAMES
            if hasattr(torch.cuda.nvtx, name)
            for part in by_call(torch.cuda.nvtx, name, nvtx_functions()[name])
        ),
        *(
            redirect_attr(
                owner, "__init__", wrap(defined(owner, "__init__"), device_type), scope=scope
            )
            for owner, wrap in _init_wrappers(fsdp)
        ),
        redirect_call(
            _PROCESS_START, _starting_in_scope(device_type, device_count, scope), scope=scope
        ),
    ]
    if torch.distributed.is_available():
        from torch.distributed import distributed_c10d

        for name in ("init_process_group", "new_group"):
            function = defined(distributed_c10d, name)
            if isinstance(function, types.FunctionType):
                parts += by_call(distributed_c10d, name, _on_backend(function, device_type))
    redirects = combine(*parts)
    # Without Dynamo loaded now, an import of it in the scope binds the
    # stand-ins into CudaInterface: the handle takes them out again (see
    # _unbind_stand_ins). With it loaded, its names are redirected instead.
    return _Transfer(redirects, device_type, unbind=dynamo is None)


# id(stand-in) -> (the stand-in, the torch.cuda names it stands in for): one
# stand-in may serve several names (a query that answers 0).
_StandIns = dict[int, tuple[Any, frozenset[str]]]


def _cuda_stand_ins(redirects: Redirect) -> _StandIns:
    """The values that *redirects* put in place of ``torch.cuda``'s names, by identity."""
    found: _StandIns = {}
    nothing: frozenset[str] = frozenset()
    pending = [redirects]
    while pending:
        redirect: Any = pending.pop()
        parts = getattr(redirect, "_parts", None)
        if parts is not None:
            pending.extend(parts)
        elif getattr(redirect, "_target", None) is torch.cuda:
            value = redirect._replacement
            names = found.get(id(value), (value, nothing))[1]
            found[id(value)] = (value, names | {redirect._name})
    return found


# Stand-ins that ended scopes left bound in Dynamo's CudaInterface because
# activations still open relied on them; each later end of a scope tries
# again. Guarded by the registry's lock.
_stand_ins_left: _StandIns = {}


def _unbind_stand_ins(stand_ins: _StandIns | None) -> None:
    """Give Dynamo's CudaInterface torch.cuda's own functions where a scope bound stand-ins.

    ``torch._dynamo.device_interface`` binds ``torch.cuda``'s functions into
    CudaInterface once, when it is first imported (``device_count =
    staticmethod(torch.cuda.device_count)``). Imported inside a scope, as the
    first ``torch.compile`` there does, it binds the stand-ins, which would
    answer for the device ever after. Called when a scope has ended, with
    that scope's stand-ins: each attribute of CudaInterface holding one gets
    what ``torch.cuda`` names, bound as it was; except where an activation
    still open, in any thread, puts that stand-in (or another value) in
    place of a ``torch.cuda`` name: those are kept, and the end of a later
    scope tries again. Under the registry's lock, so no activation starts or
    ends meanwhile.
    """
    if stand_ins is None and not _stand_ins_left:
        return
    interface = _dynamo_cuda_interface()
    if interface is None:
        return
    with exclusive():
        for key, (value, names) in (stand_ins or {}).items():
            _stand_ins_left[key] = (value, _stand_ins_left.get(key, (value, names))[1] | names)
        in_use = {id(act.replacement) for act in patchscope.active() if act.target is torch.cuda}
        own = vars(torch.cuda)
        kept: _StandIns = {}
        for attr, value in list(vars(interface).items()):
            bound = value.__func__ if isinstance(value, staticmethod) else value
            value_names = _stand_ins_left.get(id(bound))
            if value_names is None or value_names[0] is not bound:
                continue
            # CudaInterface binds torch.cuda's names as its own (``device_count
            # = staticmethod(torch.cuda.device_count)``); a stand-in serving
            # several names is unbound only where the name says which.
            names = value_names[1]
            if attr in names:
                name = attr
            elif len(names) == 1:
                (name,) = names
            else:
                continue
            original = own.get(name)
            if id(bound) in in_use or original is None or id(original) in in_use:
                kept[id(bound)] = value_names
                continue
            setattr(interface, attr, staticmethod(original) if bound is not value else original)
        _stand_ins_left.clear()
        _stand_ins_left.update(kept)


# The class itself: inside a scope ``torch.Generator`` names the stand-in below.
_TorchGenerator = torch.Generator


class _IsGenerator(type(_TorchGenerator)):  # type: ignore[misc]
    """``isinstance``/``issubclass`` against the stand-in ask about torch's own class."""

    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, _TorchGenerator)

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, _TorchGenerator)


@functools.cache
def _generator_class(device_type: str) -> type:
    """What ``torch.Generator`` names inside a scope: it builds torch's own generator.

    ``torch.Generator`` is an immutable C type whose construction cannot be
    redirected and which does not dispatch through function modes, so its
    *name* is rebound on ``torch``: calling it maps a CUDA ``device`` and
    returns a real ``torch.Generator``, and ``isinstance(g, torch.Generator)``
    holds for every generator, made inside the scope or not.
    """
    mapped = device_mapper(device_type)

    def __new__(cls: type, device: Any = "cpu") -> Any:
        return _TorchGenerator(mapped(device))

    return _IsGenerator(
        "Generator",
        (_TorchGenerator,),
        {"__new__": __new__, "__module__": "torch", "__doc__": _TorchGenerator.__doc__},
    )


# What torch.load runs when nothing redirects it (a scope redirects its calls).
_TORCH_LOAD = original(torch.load) if isinstance(torch.load, types.FunctionType) else torch.load


@functools.cache
def _load_onto(device_type: str) -> Callable[..., Any]:
    """``torch.load`` whose CUDA ``map_location`` names the device.

    Loading moves storages, which do not dispatch through function modes. A
    dict or callable ``map_location`` is passed on unchanged.
    """
    mapped = device_mapper(device_type)

    @functools.wraps(_TORCH_LOAD)
    def load(f: Any, map_location: Any = None, *args: Any, **kwargs: Any) -> Any:
        return _TORCH_LOAD(f, mapped(map_location), *args, **kwargs)

    return load


class _Transfer(Redirect):
    """The redirects of one device, and a device mode entered after them."""

    __slots__ = ("__weakref__", "_device", "_handles", "_redirects", "_stand_ins")

    def __init__(self, redirects: Redirect, device_type: str, unbind: bool = False) -> None:
        self._redirects = redirects
        self._device = device_type
        self._handles: list[Any] = []
        # By identity, so never pickled: rebuilt from the redirects instead.
        self._stand_ins = _cuda_stand_ins(redirects) if unbind else None

    def _args(self) -> tuple[Any, ...]:
        return (self._redirects, self._device, self._stand_ins is not None)

    def _activate(self, code: Any, lasti: int) -> _TransferHandle:
        # Everything that can fail comes before the mode is pushed: the
        # redirects (all or nothing), then the handle and the mode objects;
        # pushing the mode is the last step, and its undo comes first.
        inner = mode = None
        try:
            inner = self._redirects._activate(code, lasti)
            mode = _DeviceMode(self._device)
            handle = _TransferHandle(inner, mode, self._stand_ins)
            _enter(mode)
        except BaseException:
            try:
                if mode is not None:
                    _leave(mode)
            finally:
                if inner is not None:
                    inner.stop()
            raise
        return handle

    def __repr__(self) -> str:
        return f"transfer_to_device({self._device!r})"


class _TransferHandle:
    """The handle of one activation: the redirects' handle and the mode."""

    __slots__ = (
        "__weakref__",
        "_frame",
        "_inner",
        "_mode",
        "_modes",
        "_pushed",
        "_stand_ins",
        "thread_id",
    )

    def __init__(self, inner: Any, mode: _DeviceMode, stand_ins: _StandIns | None) -> None:
        self._inner = inner
        self._mode = mode
        self._stand_ins = stand_ins
        self._modes = [mode]  # emptied once a stop() has ended both parts
        self.thread_id = _get_ident()
        self._pushed = False
        self._frame: Any = None

    @property
    def value(self) -> torch.device:
        """The device the code in the scope runs on."""
        return torch.device(self._mode._device_type)

    @property
    def activations(self) -> Any:
        """The redirects' activations."""
        return self._inner.activations

    def stop(self) -> None:
        """End the mode, then the redirects; harmless if already stopped.

        Both steps may run again (each is idempotent), so a stop() that an
        exception interrupts can simply be called again.
        """
        if not self._modes:
            return
        try:
            _leave(self._mode)
        finally:
            self._modes.clear()
            try:
                self._inner.stop()
            finally:
                _unbind_stand_ins(self._stand_ins)


def _enter(mode: _DeviceMode) -> None:
    """Push ``mode`` on this thread's mode stack, then make it act in this context.

    Pushed first: until this context owns it, the mode passes every call
    through, so a failure between the two steps changes nothing that runs.
    """
    _push_mode(mode)
    # Modes stopped from another context are still listed in this one: drop them.
    _owned.set((*(other for other in _owned.get() if other._live), mode))


def _leave(mode: _DeviceMode) -> None:
    """Turn ``mode`` off everywhere and take it (and other ended modes) off this thread's stack."""
    mode._live = False
    owned = _owned.get()
    if mode in owned:
        _owned.set(tuple(other for other in owned if other is not mode))
    if mode._thread == _get_ident():
        _sweep()


def _sweep() -> None:
    """Remove ended device modes from this thread's stack, keeping every other mode in order.

    Read first, then pop only down to the lowest ended mode: in the common
    case (this scope's mode on top) one pop, so an interruption has no
    window in which other modes are off the stack.
    """
    depth = _stack_len()
    ended = [i for i in range(depth) if _ended(_stack_at(i))]
    if not ended:
        return
    if ended == [depth - 1]:
        _pop_mode()
        return
    above = [_pop_mode() for _ in range(depth - ended[0])]
    for mode in reversed(above):
        if not _ended(mode):
            _push_mode(mode)


def _ended(mode: object) -> bool:
    return isinstance(mode, _DeviceMode) and not mode._live


class _DeviceMode(TorchFunctionMode):
    """Maps CUDA device arguments to one device, in the contexts that entered it."""

    def __init__(self, device_type: str) -> None:
        super().__init__()
        self._device_type = device_type
        self._map = device_mapper(device_type)
        self._host = device_type == "cpu"
        self._thread = _get_ident()
        self._live = True

    def __torch_function__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        if _set_dynamo_callback is not None:
            # Set while code torch.compile made runs: map the call eagerly,
            # as torch.compiler.disable() would, with Dynamo off meanwhile.
            # (Only setting it is used: torch 2.6 and 2.7's getter returns a
            # reference it does not own.)
            prior = _set_dynamo_callback(None)
            if prior is not None:
                try:
                    return self.__torch_function__(func, types, args, kwargs)
                finally:
                    _set_dynamo_callback(prior)
        if kwargs is None:
            kwargs = {}
        if not self._live or self not in _owned.get():
            return func(*args, **kwargs)
        special = _SPECIAL.get(func)
        if special is None and type(func) in _OP_TYPES:
            special = _SPECIAL_OPS.get(_op_name(func))
        if special is not None:
            return special(self, args, kwargs)
        device = kwargs.get("device")
        if device is not None:
            mapped = self._map(device)
            if mapped is not device:
                kwargs = {**kwargs, "device": mapped}
        else:
            default = _torch_device.CURRENT_DEVICE
            if (
                default is not None
                and default.type == "cuda"
                and func in _torch_device._device_constructors()
            ):
                # ``with torch.device("cuda"):``: that mode sits below this
                # one and fills the device in after this one ran.
                kwargs = {**kwargs, "device": self._map(default)}
        if self._host and kwargs.get("pin_memory"):
            kwargs = {**kwargs, "pin_memory": False}
        return func(*args, **kwargs)

    # Dynamo must not trace the mode. Its contextvars read is a graph break,
    # and where Dynamo compiled __torch_function__ with a graph break in it,
    # torch 2.13 ran the compiled code's ops on wrong values
    # (``((x * 2) + 1) * 3`` gave ``(x + 2) * 2``, silently). So it is marked
    # as torch.compiler.disable() marks what it wraps (Dynamo does not inline
    # it), its frames are never compiled (_skip_frames, below), and it turns
    # Dynamo off while it runs: each op of compiled code in the scope runs
    # eagerly, through the mode, on the right values.
    __torch_function__._torchdynamo_disable = True  # type: ignore[attr-defined]
    __torch_function__._torchdynamo_disable_msg = (  # type: ignore[attr-defined]
        "patchscope's transfer_to_device() maps device arguments eagerly"
    )


_skip_frames(_DeviceMode.__torch_function__.__code__)


def _mapped_device(
    mode: _DeviceMode, args: tuple[Any, ...], kwargs: dict[str, Any], position: int
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The arguments with the device mapped: positional at ``position``, or ``device=``."""
    if len(args) > position and isinstance(args[position], (str, torch.device, int)):
        args = (*args[:position], mode._map(args[position]), *args[position + 1 :])
    device = kwargs.get("device")
    if device is not None:
        kwargs = {**kwargs, "device": mode._map(device)}
    return args, kwargs


def _to(mode: _DeviceMode, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``Tensor.to(device, ...)``: the device may come first after the tensor, or as a keyword."""
    args, kwargs = _mapped_device(mode, args, kwargs, 1)
    return torch.Tensor.to(*args, **kwargs)


def _parse_to(mode: _DeviceMode, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``Module.to``'s argument parser: the device may come first, as in ``module.to(0)``."""
    args, kwargs = _mapped_device(mode, args, kwargs, 0)
    return torch._C._nn._parse_to(*args, **kwargs)


def _cuda(mode: _DeviceMode, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``Tensor.cuda(device=None, non_blocking=False, memory_format=...)``: a ``to`` the device."""
    tensor, *rest = args
    names = ("device", "non_blocking", "memory_format")
    given = {**dict(zip(names, rest, strict=False)), **kwargs}
    device = given.pop("device", None)
    target = mode._map("cuda" if device is None else device)
    return torch.Tensor.to(tensor, target, **given)


def _pin_memory(mode: _DeviceMode, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``Tensor.pin_memory()``: the tensor itself where the device has no pinned memory."""
    if mode._host:
        return args[0]
    return torch.Tensor.pin_memory(*args, **kwargs)


def _record_stream(mode: _DeviceMode, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``Tensor.record_stream(stream)``: nothing to record for host tensors or host streams.

    Only a device's caching allocator tracks streams, and torch has no CPU
    kernel for it (even ``torch.Stream("cpu")`` is refused). Host work runs
    in program order, so no host tensor's memory is reused while a stream
    still reads it. A device tensor and one of the device's own streams
    reach torch.
    """
    tensor = args[0]
    stream = args[1] if len(args) > 1 else kwargs.get("s")
    if tensor.device.type == "cpu" or _host._is_host_stream(stream):
        return None
    return torch.Tensor.record_stream(*args, **kwargs)


def _synchronize_device(mode: _DeviceMode, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Dynamo's ``streams::synchronize_device(device_type, index)``: the device's own.

    Compiled code gets it for ``torch.cuda.synchronize()`` (Dynamo knows the
    function by identity, so also through a name bound before the scope);
    "cuda" names the device, and the host has nothing to wait for.
    """
    names = ("device_type", "device_index")
    given = {**dict(zip(names, args, strict=False)), **kwargs}
    device = torch.device(given["device_type"], given["device_index"])
    if device.type == "cuda":
        device = mode._map(device)
    if device.type == "cpu":
        return None
    return torch.ops.streams.synchronize_device(device.type, device.index or 0)


_Special = Callable[[_DeviceMode, tuple[Any, ...], dict[str, Any]], Any]
_SPECIAL: dict[Any, _Special] = {
    torch.Tensor.to: _to,
    torch.Tensor.cuda: _cuda,
    torch.Tensor.pin_memory: _pin_memory,
    torch.Tensor.record_stream: _record_stream,
    torch._C._nn._parse_to: _parse_to,
}
# Operators that exist only once what registers them is loaded (Dynamo's
# stream operators), by name.
_SPECIAL_OPS: dict[str, _Special] = {"streams::synchronize_device": _synchronize_device}
_OP_TYPES = (torch._ops.OpOverloadPacket, torch._ops.OpOverload)


def _op_name(op: Any) -> str:
    return str(getattr(op, "_overloadpacket", op)._qualified_op_name)


# ---------------------------------------------------------------------------
# __init__ wrappers: mixed precision and DDP


def _autocast_init(init: Callable[..., None], target: str) -> Callable[..., None]:
    @functools.wraps(init)
    def __init__(
        self: Any,
        device_type: str,
        dtype: torch.dtype | None = None,
        enabled: bool = True,
        cache_enabled: bool | None = None,
    ) -> None:
        init(
            self,
            target if device_type == "cuda" else device_type,
            dtype,
            enabled,
            cache_enabled,
        )

    return __init__


# torch's own autocast queries, as defined: a scope rebinds their names on torch.
_IS_AUTOCAST_ENABLED = torch._C.is_autocast_enabled
_GET_AUTOCAST_DTYPE = torch._C.get_autocast_dtype


@functools.cache
def _autocast_queries(target: str) -> dict[str, Callable[..., Any]]:
    """torch's autocast queries, where "cuda" (or no device: the GPU's) names ``target``.

    ``torch.autocast("cuda")`` acts for ``target`` in the scope, so these say
    what that autocast set.
    """

    def device(device_type: str) -> str:
        return target if device_type == "cuda" else device_type

    def is_autocast_enabled(device_type: str | None = None) -> bool:
        return bool(_IS_AUTOCAST_ENABLED(target if device_type is None else device(device_type)))

    def get_autocast_dtype(device_type: str) -> torch.dtype:
        return _GET_AUTOCAST_DTYPE(device(device_type))

    def get_autocast_gpu_dtype() -> torch.dtype:
        return _GET_AUTOCAST_DTYPE(target)

    functions: dict[str, Callable[..., Any]] = {
        "is_autocast_enabled": is_autocast_enabled,
        "get_autocast_dtype": get_autocast_dtype,
        "get_autocast_gpu_dtype": get_autocast_gpu_dtype,
    }
    for name, function in functions.items():
        function.__doc__ = getattr(torch, name, function).__doc__
        function.__module__ = "torch"
    # Only the names this torch has (a later release may drop the deprecated one).
    return {name: function for name, function in functions.items() if hasattr(torch, name)}


def _scaler_init(init: Callable[..., None], device_type: str) -> Callable[..., None]:
    @functools.wraps(init)
    def __init__(self: Any, device: str = "cuda", *args: Any, **kwargs: Any) -> None:
        init(self, device_type if device == "cuda" else device, *args, **kwargs)

    return __init__


def _ddp_init(init: Callable[..., None], device_type: str) -> Callable[..., None]:
    mapped = device_mapper(device_type)

    def index(device: Any) -> Any:
        return getattr(mapped(device), "index", device)

    @functools.wraps(init)
    def __init__(
        self: Any,
        module: Any,
        device_ids: Any = None,
        output_device: Any = None,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        if device_type == "cpu":
            # DDP takes no device_ids for CPU modules.
            device_ids = output_device = None
        else:
            if device_ids is not None:
                device_ids = [index(device) for device in device_ids]
            if output_device is not None:
                output_device = index(output_device)
        init(self, module, device_ids, output_device, *args, **kwargs)

    return __init__


def _data_parallel_init(init: Callable[..., None], device_type: str) -> Callable[..., None]:
    """DataParallel keeps the module and passes every call through, on the one device.

    That is what torch does on the CPU and MPS. Inside the scope torch would
    find "cuda" available (``torch.cuda.is_available()`` says True) and take
    its CUDA path, which expects the parameters on ``cuda:0``; on other
    accelerators the model then runs on one device instead of being
    replicated.
    """

    @functools.wraps(init)
    def __init__(
        self: Any,
        module: Any,
        device_ids: Any = None,
        output_device: Any = None,
        dim: int = 0,
    ) -> None:
        torch.nn.Module.__init__(self)
        self.module = module
        self.device_ids = []

    return __init__


def _profiler_init(init: Callable[..., None], device_type: str) -> Callable[..., None]:
    """torch.autograd.profiler.profile (under torch.profiler.profile too): CUDA profiling off CUDA.

    ``use_cuda=True``/``use_device="cuda"`` (``ProfilerActivity.CUDA``) profile
    the device's own activity where torch has one, and nothing more on the
    host, as torch does without CUDA; torch would otherwise try to record a
    CUDA event at every operator, since ``torch.cuda.is_available()`` says True.
    """
    own = None if device_type in ("cpu", "mps") else device_type

    @functools.wraps(init)
    def __init__(
        self: Any, *args: Any, use_cuda: bool = False, use_device: Any = None, **kwargs: Any
    ) -> None:
        if use_cuda or use_device == "cuda":
            use_cuda, use_device = False, own
        init(self, *args, use_cuda=use_cuda, use_device=use_device, **kwargs)

    return __init__


def _fsdp_init(init: Callable[..., None], device_type: str) -> Callable[..., None]:
    mapped = device_mapper(device_type)

    @functools.wraps(init)
    def __init__(self: Any, module: Any, *args: Any, **kwargs: Any) -> None:
        device_id = kwargs.get("device_id")
        if device_id is not None:
            kwargs["device_id"] = mapped(device_id)
        elif device_type == "cpu":
            # CUDA code leaves it to the current CUDA device; FSDP refuses
            # None without an accelerator, and takes the CPU by name.
            kwargs["device_id"] = torch.device("cpu")
        init(self, module, *args, **kwargs)

    return __init__


def _device_mesh_init(init: Callable[..., None], device_type: str) -> Callable[..., None]:
    """DeviceMesh (so ``init_device_mesh``, however imported): a "cuda" mesh is one of the device.

    FSDP2's ``fully_shard``, tensor parallelism and DTensor take the device
    from the mesh; a "cuda" mesh made them expect the parameters on "cuda:0".
    """

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if args and args[0] == "cuda":
            args = (device_type, *args[1:])
        elif kwargs.get("device_type") == "cuda":
            kwargs["device_type"] = device_type
        init(self, *args, **kwargs)

    return __init__


def _init_wrappers(
    fsdp: type | None,
) -> list[tuple[type, Callable[[Callable[..., None], str], Any]]]:
    """The classes whose ``__init__`` is wrapped, with the wrapper for each."""
    from torch.amp.autocast_mode import autocast
    from torch.amp.grad_scaler import GradScaler

    wrappers: list[tuple[type, Callable[[Callable[..., None], str], Any]]] = [
        (autocast, _autocast_init),
        (GradScaler, _scaler_init),
    ]
    wrappers.append((torch.autograd.profiler.profile, _profiler_init))
    wrappers.append((torch.nn.DataParallel, _data_parallel_init))
    if torch.distributed.is_available():
        from torch.nn.parallel import DistributedDataParallel

        wrappers.append((DistributedDataParallel, _ddp_init))
        from torch.distributed.device_mesh import DeviceMesh

        wrappers.append((DeviceMesh, _device_mesh_init))
    if fsdp is not None:
        wrappers.append((fsdp, _fsdp_init))
    return wrappers


# The process-group backend of each device type, where it is not gloo.
_BACKENDS = {"xpu": "xccl", "npu": "hccl"}


def _on_backend(function: types.FunctionType, device_type: str) -> Callable[..., Any]:
    """``init_process_group``/``new_group`` with ``backend="nccl"`` on the device's backend.

    A CUDA ``device_id`` names the device (gloo, on the CPU, takes none).
    Called as a call redirect calls it (by the function's own parameters,
    however torch's decorators spell them); the arguments are bound to the
    signature torch documents, the backend and device mapped, and torch's
    function run as it is when nothing redirects it.
    """
    backend_of_device = _BACKENDS.get(device_type, "gloo")
    mapped = device_mapper(device_type)
    run = original(function)
    signature = inspect.signature(function)  # follows torch's decorators' __wrapped__

    # Not functools.wraps: what it takes is (*args, **kwargs), and
    # called_as reads that through __wrapped__ otherwise.
    def on_backend(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return run(*args, **kwargs)  # torch's own error
        given = bound.arguments
        backend = given.get("backend")
        if isinstance(backend, str):
            given["backend"] = _mapped_backend(backend, device_type, backend_of_device)
        device_id = given.get("device_id")
        if device_id is not None:
            # gloo takes no device; an accelerator takes its own.
            given["device_id"] = None if device_type == "cpu" else mapped(device_id)
        return run(*bound.args, **bound.kwargs)

    on_backend.__name__ = on_backend.__qualname__ = function.__name__
    on_backend.__doc__ = function.__doc__
    return on_backend


def _mapped_backend(backend: str, device_type: str, backend_of_device: str) -> str:
    """``backend`` with nccl the device's backend: "nccl", or per device, "cpu:gloo,cuda:nccl".

    Per device, "cuda" names the device where it has a backend of its own
    (xccl, hccl), else the CPU; an entry written for a device outright wins
    over one mapped to it.
    """
    if backend.lower() == "nccl":
        return backend_of_device
    if ":" not in backend:
        return backend
    target = device_type if device_type in _BACKENDS else "cpu"
    written: dict[str, str] = {}
    mapped: dict[str, str] = {}
    for part in backend.split(","):
        device, _, name = (piece.strip().lower() for piece in part.partition(":"))
        if device == "cuda":
            mapped.setdefault(target, backend_of_device if name == "nccl" else name)
        else:
            written.setdefault(device, backend_of_device if name == "nccl" else name)
    per_device = {**mapped, **written}
    return ",".join(f"{device}:{name}" for device, name in per_device.items())


# ---------------------------------------------------------------------------
# Processes the scope starts

#: What every ``multiprocessing`` process's ``start()`` runs (torch's
#: ``mp.spawn``/``start_processes`` start theirs with it).
_PROCESS_START = multiprocessing.process.BaseProcess.start


class _InScope:
    """A process's target, run inside ``transfer_to_device()`` in the process it starts.

    Pickled by reference to this class, with the target, the device and the
    logical device count: a process started by spawn or forkserver is a fresh
    interpreter, which has no scope of the process that started it.
    """

    __slots__ = ("device", "device_count", "scope", "target")

    def __init__(
        self, target: Callable[..., Any], device: str, device_count: int | None, scope: Scope
    ) -> None:
        self.target = target
        self.device = device
        self.device_count = device_count
        self.scope = scope

    def __getstate__(self) -> tuple[Any, ...]:
        return (self.target, self.device, self.device_count, self.scope)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self.target, self.device, self.device_count, self.scope = state

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with transfer_to_device(self.device, scope=self.scope, device_count=self.device_count):
            return self.target(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<{self.target!r} inside transfer_to_device({self.device!r})>"


def _start_method(process: Any) -> str:
    """How ``process`` will be started: its context's method, else the default one."""
    method = getattr(type(process), "_start_method", None)
    if method is None:
        method = multiprocessing.get_start_method()
    return str(method)


def _starting_in_scope(
    device_type: str, device_count: int | None, scope: Scope
) -> Callable[[Any], None]:
    """``BaseProcess.start`` in the scope: the process runs its target inside the same scope.

    A forked process is a copy of the thread that started it, scope
    included, so only a process that a fresh interpreter runs (spawn,
    forkserver) is given its target wrapped in :class:`_InScope` while it
    is started (that is when it is pickled); the process object is left
    as ``start()`` leaves it.
    """
    start = original(_PROCESS_START)

    def start_in_scope(self: Any) -> None:
        target = getattr(self, "_target", None)
        if target is None or isinstance(target, _InScope) or _start_method(self) == "fork":
            start(self)
            return
        wrapped = self._target = _InScope(target, device_type, device_count, scope)
        try:
            start(self)
        finally:
            # A started process has dropped its target (CPython, bpo-30775);
            # one that failed to start gets its own back.
            if getattr(self, "_target", None) is wrapped:
                self._target = target

    start_in_scope.__name__ = start_in_scope.__qualname__ = "start"
    start_in_scope.__doc__ = _PROCESS_START.__doc__
    return start_in_scope
