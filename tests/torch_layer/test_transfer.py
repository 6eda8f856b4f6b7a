"""transfer_to_device(): unmodified CUDA-written code on the active device, for one scope.

The active device is faked as in conftest.py; on this CPU-only build, CUDA
code outside the scope fails as torch makes it fail.
"""

import asyncio
import os
import pickle
import subprocess
import sys
import types
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from _threads import in_other_thread

torch = pytest.importorskip("torch")

import patchscope  # noqa: E402
from patchscope.torch import (  # noqa: E402
    HostEvent,
    HostStream,
    _runtime,
    _transfer,
    device_events,
    device_namespace,
    transfer_to_device,
)
from patchscope.torch._runtime import (  # noqa: E402
    HOST_CAPABILITY,
    RUNTIME_NAMES,
    HostDeviceProperties,
    device_mapper,
    host_bf16,
)

CPU = torch.device("cpu")
needs_no_cuda = pytest.mark.skipif(
    torch.cuda._is_compiled(), reason="needs a torch on which CUDA calls fail"
)


@pytest.fixture(autouse=True)
def _on_cpu(devices: Any) -> None:
    """Run every test here with "cpu" active unless it fakes another device."""
    devices.active("cpu")


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run *code* in a fresh interpreter (with *env* added); it must exit 0."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    return done


def _stack() -> int:
    """The depth of this thread's torch function-mode stack."""
    return int(torch._C._len_torch_function_stack())


def _names() -> dict[str, Any]:
    """Every name transfer_to_device rebinds, raw, to compare by identity."""
    from torch.amp.autocast_mode import autocast
    from torch.amp.grad_scaler import GradScaler
    from torch.distributed import distributed_c10d
    from torch.nn.parallel import DistributedDataParallel

    names = {f"torch.cuda.{name}": vars(torch.cuda)[name] for name in RUNTIME_NAMES}
    for cls in (autocast, GradScaler, DistributedDataParallel):
        names[f"{cls.__name__}.__init__"] = vars(cls)["__init__"]
    names["dist.init_process_group"] = vars(torch.distributed)["init_process_group"]
    names["c10d.init_process_group"] = vars(distributed_c10d)["init_process_group"]
    names["torch.cuda.Event.__new__"] = vars(torch.cuda.Event).get("__new__")
    from torch.distributed.fsdp import FullyShardedDataParallel

    names["FSDP.__init__"] = vars(FullyShardedDataParallel)["__init__"]
    # Functions redirected by call keep their name and change their code.
    names |= {
        f"{name}.__code__": value.__code__
        for name, value in list(names.items())
        if isinstance(value, types.FunctionType)
    }
    return names


def _cuda_fails() -> None:
    """Assert that CUDA calls here fail as torch makes them fail without CUDA."""
    assert torch.cuda.is_available() is False
    with pytest.raises((AssertionError, RuntimeError)):
        torch.ones(1, device="cuda")


def _cuda_runs() -> None:
    """Assert that CUDA device arguments run on the CPU here."""
    assert torch.cuda.is_available() is True
    assert torch.ones(1, device="cuda").device == CPU


@needs_no_cuda
def test_device_arguments_reach_the_cpu() -> None:
    """Every CUDA device spelling, in factories, Tensor and Module methods, lands on the CPU."""
    with transfer_to_device() as device:
        assert device == CPU
        specs = ["cuda", "cuda:0", "cuda:1", torch.device("cuda"), torch.device("cuda", 1), 0, 1]
        for spec in specs:
            assert torch.ones(2, device=spec).device == CPU
            assert torch.zeros(2).to(spec).device == CPU
            assert torch.zeros(2).to(device=spec, non_blocking=True).device == CPU
            assert torch.zeros(2).to(spec, torch.float16).dtype == torch.float16
            assert torch.zeros(2).new_zeros(3, device=spec).device == CPU
            assert torch.zeros(2).cuda(spec).device == CPU
            assert torch.tensor([1.0], device=spec).device == CPU
            module = torch.nn.Linear(2, 2)
            assert module.to(spec).weight.device == CPU
            assert module.to(spec, torch.float64).weight.dtype == torch.float64
            assert module.to(device=spec).weight.device == CPU
            assert module.cuda(spec).weight.device == CPU
        assert torch.zeros(2).cuda().device == CPU
        assert torch.zeros(2).cuda(non_blocking=True).device == CPU
        model = torch.nn.Linear(2, 2, device="cuda").cuda().to("cuda:0")
        assert model(torch.ones(2, device="cuda")).device == CPU
        with torch.device("cuda"):
            assert torch.empty(1).device == CPU
        generator_free = torch.randn(2, device="cuda")
        assert generator_free.device == CPU


@needs_no_cuda
def test_generators_take_a_cuda_device() -> None:
    """torch.Generator(device="cuda") builds torch's own CPU generator; isinstance holds for all."""
    before = torch.Generator()
    own = vars(torch)["Generator"]
    with transfer_to_device():
        for spec in ("cuda", "cuda:1", torch.device("cuda", 0), 0):
            generator = torch.Generator(device=spec)
            assert type(generator) is own and generator.device == CPU
        seeded = torch.Generator("cuda").manual_seed(7)
        assert torch.equal(
            torch.randn(3, generator=seeded), torch.randn(3, generator=own().manual_seed(7))
        )
        assert isinstance(before, torch.Generator) and issubclass(own, torch.Generator)
        assert in_other_thread(lambda: vars(torch)["Generator"] is own)
        with pytest.raises(RuntimeError):
            in_other_thread(lambda: torch.Generator(device="cuda"))
    assert vars(torch)["Generator"] is own and torch.Generator is own


@needs_no_cuda
def test_checkpoints_load_with_a_cuda_map_location(tmp_path: Any) -> None:
    """torch.load(map_location="cuda") puts the tensors on the device (torch checks the class)."""
    path = tmp_path / "ckpt.pt"
    torch.save({"w": torch.arange(3.0)}, path)
    with transfer_to_device():
        for location in ("cuda", "cuda:0", torch.device("cuda")):
            loaded = torch.load(path, map_location=location)
            assert loaded["w"].device == CPU and torch.equal(loaded["w"], torch.arange(3.0))


@needs_no_cuda
def test_pin_memory_is_a_no_op_on_the_cpu() -> None:
    """pin_memory() returns the tensor itself, and factories drop pin_memory=True."""
    with transfer_to_device():
        tensor = torch.ones(3)
        assert tensor.pin_memory() is tensor
        assert torch.empty(3, pin_memory=True).is_pinned() is False
        moved = tensor.pin_memory().to("cuda", non_blocking=True)
        assert moved.device == CPU
    with pytest.raises(RuntimeError):
        torch.ones(3).pin_memory()


@needs_no_cuda
def test_record_stream_is_a_no_op_for_host_tensors() -> None:
    """tensor.record_stream(stream) of a host tensor records nothing, for every host stream.

    torch has no CPU kernel for it, even for its own ``torch.Stream("cpu")``.
    """
    with transfer_to_device():
        tensor = torch.ones(3, device="cuda")
        for stream in (torch.cuda.current_stream(), torch.cuda.Stream(), torch.Stream("cpu")):
            assert tensor.record_stream(stream) is None
            assert tensor.record_stream(s=stream) is None
        assert torch.equal(tensor, torch.ones(3))
    with pytest.raises(NotImplementedError, match="record_stream"):
        torch.ones(3).record_stream(torch.Stream("cpu"))


@needs_no_cuda
def test_combined_with_other_redirects_it_ends_in_full() -> None:
    """combine(transfer_to_device(), ...) as with, start/stop and decorator leaves nothing."""
    for make in (
        lambda: patchscope.combine(transfer_to_device()),
        lambda: patchscope.combine(device_events(), transfer_to_device()),
    ):
        with make():
            assert torch.cuda.is_available() and torch.ones(1, device="cuda").device == CPU
        handle = make().start()
        handle.stop()
        handle.stop()
        decorated = make()(lambda: torch.ones(1, device="cuda").device)
        assert decorated() == CPU
        assert patchscope.active() == ()
        _cuda_fails()


@needs_no_cuda
def test_outside_the_scope_cuda_fails_as_before() -> None:
    """Before and after the scope, torch.cuda and device="cuda" behave as torch defines."""
    _cuda_fails()
    with transfer_to_device():
        _cuda_runs()
    _cuda_fails()


def test_runtime_queries_answer_for_the_host() -> None:
    """is_available, counts, device selection, names, properties and memory answer for the CPU."""
    with transfer_to_device():
        assert torch.cuda.is_available() is True
        assert torch.cuda.device_count() == 1
        assert torch.cuda.current_device() == 0
        torch.cuda.set_device(0)
        torch.cuda.set_device("cuda:0")
        with torch.cuda.device(0):
            pass
        torch.cuda.set_device(1)  # a rank's device: the host too
        assert torch.cuda.current_device() == 1  # what this thread selected last
        with torch.cuda.device("cuda:2"):
            assert torch.cuda.current_device() == 2
        assert torch.cuda.current_device() == 1
        with pytest.raises(ValueError, match=r"torch.cuda.set_device\('xpu'\).*CUDA device"):
            torch.cuda.set_device("xpu")
        with torch.cuda.device(-1), torch.cuda.device(torch.zeros(1).get_device()):
            torch.cuda.set_device(-1)  # a negative index selects nothing, as in torch
        assert torch.cuda.current_device() == 1
        with pytest.raises(ValueError, match=r"torch.cuda.device\('xpu'\)"):
            torch.cuda.device("xpu")
        assert isinstance(torch.cuda.device(0), torch.cuda.device)
        assert isinstance(torch.cuda.get_device_name(), str) and torch.cuda.get_device_name()
        assert torch.cuda.get_device_capability() == HOST_CAPABILITY == (0, 0)
        properties = torch.cuda.get_device_properties(0)
        assert isinstance(properties, HostDeviceProperties)
        free, total = torch.cuda.mem_get_info()
        assert 0 < free <= total == properties.total_memory
        assert (properties.major, properties.minor) == HOST_CAPABILITY
        assert properties.multi_processor_count >= 1
        assert torch.cuda.is_bf16_supported() is host_bf16()
        assert torch.cuda.memory_allocated() == torch.cuda.max_memory_allocated() == 0
        assert torch.cuda.memory_reserved() == 0
        assert torch.cuda.memory_stats() == {}
        torch.cuda.reset_peak_memory_stats()
        torch.cuda.empty_cache()
        assert "no caching allocator" in torch.cuda.memory_summary(0, abbreviated=True)
        torch.cuda.reset_max_memory_allocated()
        torch.cuda.reset_accumulated_memory_stats("cuda:0")
        torch.cuda.set_per_process_memory_fraction(0.5)
        torch.cuda.set_per_process_memory_fraction(0.5, "cuda:1")
        with pytest.raises(ValueError, match="fraction"):
            torch.cuda.set_per_process_memory_fraction(1.5)
        with pytest.raises(TypeError, match="float"):
            torch.cuda.set_per_process_memory_fraction(1)
        with pytest.raises(ValueError, match="CUDA device"):
            torch.cuda.set_per_process_memory_fraction(0.5, "xpu:3")
        torch.cuda.init()
        torch.cuda.ipc_collect()


@needs_no_cuda
def test_monitoring_debug_and_snapshot_queries_answer_for_the_host(tmp_path: Any) -> None:
    """NVML's monitors, the sync debug mode, peer access and allocator snapshots on the CPU.

    megatron's straggler detector reads the four monitors at every report,
    and memory-snapshot profilers record the allocator's history; outside the
    scope each of these raises on a CPU-only torch.
    """
    names = ("temperature", "power_draw", "utilization", "clock_rate", "memory_usage")
    outside = [getattr(torch.cuda, name) for name in names]
    with pytest.raises(AttributeError):  # torch._C has no CUDA allocator
        torch.cuda.memory._record_memory_history(max_entries=10)
    with transfer_to_device():
        assert [getattr(torch.cuda, name)() for name in names] == [0] * len(names)
        assert torch.cuda.utilization("cuda:1") == torch.cuda.memory_usage(device=0) == 0
        assert torch.cuda.memory_allocated(torch.cuda.device(0)) == 0  # torch takes one too
        with pytest.raises(ValueError, match=r"torch.cuda.utilization\('xpu:3'\)"):
            torch.cuda.utilization("xpu:3")
        with pytest.raises(ValueError, match=r"torch.cuda.memory._snapshot\('mps'\)"):
            torch.cuda.memory._snapshot(device="mps")
        total = torch.cuda.mem_get_info()[1]
        assert 0 < torch.cuda.device_memory_used(0) <= total
        try:
            torch.cuda.set_sync_debug_mode("warn")
            assert torch.cuda.get_sync_debug_mode() == 1
            with pytest.raises(RuntimeError, match="debug_mode"):
                torch.cuda.set_sync_debug_mode("loud")
            torch.cuda.set_per_process_memory_fraction(0.25, 0)
            assert torch.cuda.get_per_process_memory_fraction("cuda:0") == 0.25
        finally:  # process-wide, as on CUDA: back to torch's defaults for other tests
            torch.cuda.set_sync_debug_mode(0)
            torch.cuda.set_per_process_memory_fraction(1.0)
        assert torch.cuda.get_sync_debug_mode() == 0
        assert torch.cuda.can_device_access_peer(0, 1) is False
        with pytest.raises(ValueError, match="can_device_access_peer"):
            torch.cuda.can_device_access_peer("xpu", 0)
        torch.cuda.memory._record_memory_history(max_entries=10)
        torch.cuda.memory._record_memory_history(True, trace_alloc_max_entries=10)  # legacy
        with pytest.raises(TypeError, match=r"_record_memory_history\(\): .*'max_entrie'"):
            torch.cuda.memory._record_memory_history(max_entrie=10)
        snapshot = torch.cuda.memory._snapshot()
        assert snapshot == {"segments": [], "device_traces": [[]]}
        assert torch.cuda.memory_snapshot() == torch.cuda.memory.memory_snapshot() == []
        torch.cuda.memory._dump_snapshot(str(tmp_path / "snapshot.pickle"))
        torch.cuda.memory._record_memory_history(enabled=None)
        assert torch.cuda._memory_viz.trace_plot(snapshot)
        torch._C._cuda_attach_out_of_memory_observer(lambda *info: None)
    assert not hasattr(torch._C, "_cuda_attach_out_of_memory_observer")
    with (tmp_path / "snapshot.pickle").open("rb") as dumped:
        assert pickle.load(dumped) == snapshot
    assert [getattr(torch.cuda, name) for name in names] == outside
    with pytest.raises(AttributeError):
        torch.cuda.memory._snapshot()
    assert patchscope.active() == ()


def test_monitors_and_snapshots_reach_a_backends_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """On another backend they are its own functions, with CUDA devices mapped to it."""
    calls: list[tuple[str, Any]] = []

    def recorder(name: str) -> Any:
        def record(*args: Any, **kwargs: Any) -> str:
            calls.append((name, args))
            return name

        return record

    for name in ("utilization", "can_device_access_peer"):
        monkeypatch.setattr(torch.xpu, name, recorder(name), raising=False)
    monkeypatch.delattr(torch.xpu, "get_sync_debug_mode", raising=False)
    monkeypatch.setattr(torch.xpu.memory, "_snapshot", recorder("_snapshot"), raising=False)
    monkeypatch.delattr(torch.xpu.memory, "_dump_snapshot", raising=False)
    functions = _runtime.runtime_functions("xpu")
    memory = _runtime.memory_functions("xpu")
    assert functions["utilization"]("cuda:1") == "utilization"
    functions["can_device_access_peer"](0, "cuda:1")
    assert memory["_snapshot"](1) == "_snapshot"
    assert calls == [
        ("utilization", (torch.device("xpu", 1),)),
        ("can_device_access_peer", (torch.device("xpu", 0), torch.device("xpu", 1))),
        ("_snapshot", (torch.device("xpu", 1),)),
    ]
    assert functions["get_sync_debug_mode"]() == 0  # none there: nothing to report
    with pytest.raises(RuntimeError, match="debug_mode"):
        functions["set_sync_debug_mode"]("loud")
    with pytest.raises(NotImplementedError, match=r"torch.xpu.memory has no _dump_snapshot\(\)"):
        memory["_dump_snapshot"]("x.pickle")
    recorded: list[dict[str, Any]] = []

    def xpu_record_memory_history(
        enabled: Any = "all",
        context: Any = "all",
        stacks: str = "all",
        max_entries: int = 1,
        clear_history: bool = False,
        skip_actions: Any = None,
    ) -> None:
        recorded.append({"enabled": enabled, "max_entries": max_entries, "clear": clear_history})

    monkeypatch.setattr(
        torch.xpu.memory, "_record_memory_history", xpu_record_memory_history, raising=False
    )
    record = _runtime.memory_functions("xpu")["_record_memory_history"]
    record("all", "all", "all", 10, 0, True, compile_context=True)  # CUDA's order
    record(enabled=None, device="cuda:1")
    assert recorded == [
        {"enabled": "all", "max_entries": 10, "clear": True},
        {"enabled": None, "max_entries": 1, "clear": False},
    ]
    # What CUDA's refuses is refused, not dropped: a misspelt or repeated argument.
    with pytest.raises(TypeError, match=r"_record_memory_history\(\): .*'max_entrie'"):
        record("all", max_entrie=10)
    with pytest.raises(TypeError, match="multiple values for argument 'enabled'"):
        record("all", enabled="state")
    assert len(recorded) == 2
    snapshots: list[Any] = []

    def xpu_memory_snapshot(mempool_id: Any = None) -> list[Any]:
        snapshots.append(mempool_id)
        return []

    monkeypatch.setattr(torch.xpu, "memory_snapshot", xpu_memory_snapshot, raising=False)
    monkeypatch.setattr(torch.xpu.memory, "memory_snapshot", xpu_memory_snapshot, raising=False)
    for snapshot in (
        _runtime.runtime_functions("xpu")["memory_snapshot"],
        _runtime.memory_functions("xpu")["memory_snapshot"],
    ):
        assert snapshot((1, 2), False) == snapshot(include_traces=False) == []
        with pytest.raises(TypeError, match=r"memory_snapshot\(\): .*'traces'"):
            snapshot(traces=False)
    assert snapshots == [(1, 2), None, (1, 2), None]
    monkeypatch.setattr(torch._C, "_xpu_attach_out_of_memory_observer", print, raising=False)
    assert _runtime.oom_observer("xpu") is print
    monkeypatch.delattr(torch._C, "_xpu_attach_out_of_memory_observer")
    with pytest.raises(NotImplementedError, match="no out-of-memory observer for 'xpu'"):
        _runtime.oom_observer("xpu")(print)


def test_memory_fraction_reaches_a_backends_own_setter() -> None:
    """The device argument is mapped for a backend that takes one, dropped for MPS's."""
    calls: list[tuple[Any, ...]] = []
    _runtime._fraction_setter(lambda fraction: calls.append((fraction,)), "mps")(0.5, 0)
    xpu = _runtime._fraction_setter(
        lambda fraction, device=None: calls.append((fraction, device)), "xpu"
    )
    xpu(0.25, "cuda:1")
    xpu(0.75)
    assert calls == [(0.5,), (0.25, torch.device("xpu", 1)), (0.75, None)]


@needs_no_cuda
def test_nvtx_ranges_and_marks_record_nothing() -> None:
    """torch.cuda.nvtx's ranges and marks run and record nothing; outside they raise again."""
    with pytest.raises(RuntimeError):
        torch.cuda.nvtx.range_push("step")
    with transfer_to_device():
        assert torch.cuda.nvtx.range_push("step") == -1
        assert torch.cuda.nvtx.range_pop() == -1
        torch.cuda.nvtx.range_end(torch.cuda.nvtx.range_start("span"))
        torch.cuda.nvtx.mark("here")
        with torch.cuda.nvtx.range("forward {}", 1):
            pass
    with pytest.raises(RuntimeError):
        torch.cuda.nvtx.mark("here")


def test_manual_seed_seeds_the_cpu_generator() -> None:
    """torch.cuda.manual_seed(_all) make the CPU's random numbers repeatable."""
    with transfer_to_device():
        for seed in (torch.cuda.manual_seed, torch.cuda.manual_seed_all):
            seed(1234)
            first = torch.randn(4, device="cuda")
            seed(1234)
            assert torch.equal(first, torch.randn(4, device="cuda"))


@needs_no_cuda
def test_covers_device_namespace_and_composes_with_it() -> None:
    """Events and streams work inside, also nested with device_namespace() either way."""
    with transfer_to_device():
        aux = torch.cuda.Stream()
        assert isinstance(aux, HostStream)
        with torch.cuda.stream(aux):
            start = torch.cuda.Event(enable_timing=True)
            start.record()
        assert isinstance(start, HostEvent)
        torch.cuda.synchronize()
        with device_namespace():
            assert isinstance(torch.cuda.Event(), HostEvent)
            assert torch.ones(1, device="cuda").device == CPU
    with device_namespace():
        with transfer_to_device():
            assert torch.ones(1, device="cuda").device == CPU
        assert isinstance(torch.cuda.Event(), HostEvent)
        assert torch.cuda.is_available() is False
    assert patchscope.active() == ()


def test_restores_every_name_and_the_mode_stack() -> None:
    """After the scope: no mode on the stack, no activation, every name back by identity."""
    before = _names()
    depth = _stack()
    with transfer_to_device():
        assert _stack() == depth + 1
        assert len(patchscope.active()) > 0
        assert torch.cuda.is_available() is True  # redirected by call: the name is kept
        assert torch.cuda.is_available is before["torch.cuda.is_available"]
        assert torch.cuda.is_available.__code__ is not before["torch.cuda.is_available.__code__"]
    assert _stack() == depth
    assert patchscope.active() == ()
    after = _names()
    for name, value in before.items():
        assert after[name] is value, name


@pytest.mark.parametrize("error", [RuntimeError("boom"), KeyboardInterrupt()])
def test_failed_entry_leaves_nothing(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> None:
    """If pushing the mode fails (or Ctrl-C lands there), the redirects are ended too."""
    before = _names()

    def fail(mode: Any) -> None:
        raise error

    monkeypatch.setattr(_transfer, "_push_mode", fail)
    with pytest.raises(type(error)):
        with transfer_to_device():
            pytest.fail("entered")
    assert patchscope.active() == ()
    assert _stack() == 0
    assert _transfer._owned.get() == ()
    assert all(_names()[name] is value for name, value in before.items())


def test_inner_modes_survive_the_scope_ending_under_them() -> None:
    """A mode entered inside the scope and still open when it ends stays on the stack."""

    class Recorder(torch.overrides.TorchFunctionMode):
        def __torch_function__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            return func(*args, **(kwargs or {}))

    handle = transfer_to_device().start()
    recorder = Recorder().__enter__()
    handle.stop()
    assert _stack() == 1
    assert torch.overrides._get_current_function_mode() is recorder
    recorder.__exit__(None, None, None)
    assert _stack() == 0


@needs_no_cuda
def test_other_threads_keep_cuda_semantics() -> None:
    """While one thread holds the scope, another sees torch's own CUDA behaviour and objects."""
    with transfer_to_device():
        live = patchscope.active()
        assert live and {act.scope for act in live} == {"context"}
        # Constructions share a dispatcher as __new__, and functions redirected
        # by call one as __code__, in every thread (it runs the original there:
        # _cuda_fails below); every other name reads as the original.
        shared = ("__new__", "__code__")
        names = [(act.target, act.name) for act in live if act.name not in shared]
        assert any(act.name == "__code__" for act in live)
    # Names the scope creates (torch._C's OOM observer hook) stay absent elsewhere.
    absent = object()
    originals = [getattr(target, name, absent) for target, name in names]
    with transfer_to_device():
        seen = in_other_thread(lambda: [getattr(target, name, absent) for target, name in names])
        assert all(a is b for a, b in zip(seen, originals, strict=True))
        assert any(getattr(t, n) is not o for (t, n), o in zip(names, originals, strict=True))
        in_other_thread(_cuda_fails)
        _cuda_runs()


@needs_no_cuda
def test_process_scope_rebinds_for_every_thread() -> None:
    """scope="process": other threads see the runtime queries; device arguments stay per thread."""
    with transfer_to_device(scope="process"):

        def check() -> None:
            assert torch.cuda.is_available() is True
            with pytest.raises((AssertionError, RuntimeError)):
                torch.ones(1, device="cuda")

        in_other_thread(check)
        _cuda_runs()
    _cuda_fails()


@needs_no_cuda
def test_asyncio_tasks_sharing_the_thread_are_isolated() -> None:
    """A task outside the scope keeps CUDA semantics while a task in the scope is suspended."""

    async def main() -> None:
        entered, checked = asyncio.Event(), asyncio.Event()

        async def inside() -> None:
            with transfer_to_device():
                entered.set()
                await checked.wait()
                _cuda_runs()

        async def outside() -> None:
            await entered.wait()
            assert _stack() == 1  # the other task's mode is on this thread's stack
            _cuda_fails()
            checked.set()

        await asyncio.gather(inside(), outside())

    asyncio.run(main())
    assert _stack() == 0


@needs_no_cuda
def test_interleaved_tasks_end_in_any_order() -> None:
    """Two tasks' scopes ending in entry order leave the later one working, then nothing."""

    async def main() -> None:
        first_in, second_in, first_out = asyncio.Event(), asyncio.Event(), asyncio.Event()

        async def first() -> None:
            with transfer_to_device():
                first_in.set()
                await second_in.wait()
            first_out.set()

        async def second() -> None:
            await first_in.wait()
            with transfer_to_device():
                second_in.set()
                await first_out.wait()
                assert _stack() == 1
                _cuda_runs()

        await asyncio.gather(first(), second())

    asyncio.run(main())
    assert _stack() == 0
    assert patchscope.active() == ()


@needs_no_cuda
def test_every_redirect_form() -> None:
    """Functions, generators, coroutines, classes (during __init__) and start()/stop() work."""
    redirect = transfer_to_device()

    @redirect
    def make() -> Any:
        return torch.ones(1, device="cuda")

    @redirect
    def make_many() -> Iterator[Any]:
        yield torch.ones(1, device="cuda")
        yield torch.cuda.is_available()

    @redirect
    async def make_async() -> Any:
        await asyncio.sleep(0)
        return torch.ones(1, device="cuda")

    @redirect
    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(2, 2, device="cuda")
            self.gpus = torch.cuda.device_count()

    assert make().device == CPU
    items = make_many()
    assert next(items).device == CPU
    _cuda_fails()  # between items the caller is outside the scope
    assert next(items) is True
    assert asyncio.run(make_async()).device == CPU
    model = Model()
    assert (model.linear.weight.device, model.gpus) == (CPU, 1)
    handle = redirect.start()
    try:
        _cuda_runs()
    finally:
        handle.stop()
    handle.stop()
    _cuda_fails()
    assert _stack() == 0
    assert patchscope.active() == ()


@needs_no_cuda
def test_stop_from_another_thread_ends_the_mapping_at_once() -> None:
    """stop() elsewhere turns the mode off now; it leaves the stack at this thread's next scope."""
    handle = transfer_to_device().start()
    in_other_thread(handle.stop)
    _cuda_fails()
    assert _stack() == 1
    with transfer_to_device():
        _cuda_runs()
    assert _stack() == 0


def test_on_cuda_nothing_is_installed(devices: Any) -> None:
    """With CUDA active, the scope installs nothing and gives None."""
    devices.active("cuda")
    with transfer_to_device() as value:
        assert value is None
        assert patchscope.active() == ()
        assert _stack() == 0


def test_bad_arguments_are_refused_when_made() -> None:
    """An unknown device or scope is refused by transfer_to_device() itself."""
    with pytest.raises(ValueError, match=r"unknown device 'tpu'.*'cpu'"):
        transfer_to_device("tpu")
    with pytest.raises(ValueError, match="scope must be 'context' or 'process'"):
        transfer_to_device(scope="thread")  # type: ignore[arg-type]


def test_device_mapper_keeps_the_index_on_accelerators() -> None:
    """CUDA specs name the same index of another accelerator; other specs pass unchanged."""
    xpu = device_mapper("xpu")
    assert xpu("cuda:1") == torch.device("xpu", 1)
    assert xpu(torch.device("cuda", 2)) == torch.device("xpu", 2)
    assert xpu(3) == torch.device("xpu", 3)
    assert xpu("cuda") == torch.device("xpu")
    for other in ("cpu", "meta", torch.device("cpu"), True, "not a device"):
        assert xpu(other) is other
    assert device_mapper("cpu")("cuda:1") == CPU


def test_autocast_acts_for_the_cpu() -> None:
    """torch.autocast("cuda"), torch.amp.autocast and torch.cuda.amp.autocast cast on the CPU."""
    a, b = torch.ones(2, 2), torch.ones(2, 2)
    with transfer_to_device():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            assert (a @ b).dtype == torch.bfloat16
        with torch.amp.autocast(device_type="cuda", dtype=torch.float16):
            assert (a @ b).dtype == torch.float16
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            with torch.cuda.amp.autocast():
                assert (a @ b).dtype == torch.float16
        context = torch.autocast("cuda")
        assert context.device == "cpu"
    assert (a @ b).dtype == torch.float32


def test_autocast_queries_answer_for_the_cpu() -> None:
    """is_autocast_enabled and get_autocast_dtype of "cuda" (or no device) say what autocast set."""
    outside = (torch.is_autocast_enabled(), torch.is_autocast_enabled("cuda"))
    with transfer_to_device():
        assert torch.is_autocast_enabled() is False
        with torch.autocast("cuda", dtype=torch.bfloat16):
            assert torch.is_autocast_enabled() is True
            assert torch.is_autocast_enabled("cuda") is True
            assert torch.is_autocast_enabled(device_type="cuda") is True
            assert torch.is_autocast_enabled("cpu") is True
            assert torch.get_autocast_dtype("cuda") == torch.bfloat16
            assert torch.get_autocast_dtype(device_type="cuda") == torch.bfloat16
            assert torch.get_autocast_gpu_dtype() == torch.bfloat16
        with torch.autocast("cuda", dtype=torch.float16):
            assert torch.get_autocast_dtype("cuda") == torch.float16
        assert torch.is_autocast_enabled("cuda") is False
    assert (torch.is_autocast_enabled(), torch.is_autocast_enabled("cuda")) == outside
    assert torch.is_autocast_enabled is torch._C.is_autocast_enabled


def test_custom_fwd_runs_its_forward_without_autocast_and_uncast() -> None:
    """custom_fwd(device_type="cuda", cast_inputs=float32) in autocast("cuda"): a documented limit.

    It sees autocast on and turns it off for the forward, as on CUDA; its
    cast helper is called by its global name inside torch, which a
    context-scoped redirect does not reach, so the inputs keep their dtype.
    """
    seen: list[tuple[torch.dtype, bool]] = []

    class Identity(torch.autograd.Function):
        @staticmethod
        @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
        def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
            seen.append((x.dtype, torch.is_autocast_enabled("cuda")))
            return x * 2

        @staticmethod
        @torch.amp.custom_bwd(device_type="cuda")
        def backward(ctx: Any, grad: torch.Tensor) -> Any:
            return grad * 2

    with transfer_to_device(), torch.autocast("cuda", dtype=torch.bfloat16):
        half = torch.ones(2, 2, device="cuda") @ torch.ones(2, 2, device="cuda")
        assert Identity.apply(half).dtype == torch.bfloat16
    assert seen == [(torch.bfloat16, False)]
    assert patchscope.active() == ()


def test_grad_scaler_acts_for_the_cpu() -> None:
    """GradScaler("cuda") and torch.cuda.amp.GradScaler scale and step on the CPU."""
    with transfer_to_device():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            scalers = [torch.amp.GradScaler("cuda"), torch.cuda.amp.GradScaler(init_scale=8.0)]
        for scaler in scalers:
            assert scaler.is_enabled()
            model = torch.nn.Linear(2, 1, device="cuda")
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            before = model.weight.detach().clone()
            loss = model(torch.ones(1, 2, device="cuda")).sum()
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            assert not torch.equal(before, model.weight)


@needs_no_cuda
def test_grad_scaler_outside_keeps_torch_behaviour() -> None:
    """Outside the scope, GradScaler("cuda") disables itself with torch's warning."""
    with pytest.warns(UserWarning, match="CUDA is not available"):
        scaler = torch.amp.GradScaler("cuda")
    assert not scaler.is_enabled()


@pytest.mark.parametrize(
    ("device_type", "backend", "device_id"),
    [("cpu", "gloo", None), ("xpu", "xccl", torch.device("xpu", 1)), ("npu", "hccl", None)],
)
def test_nccl_becomes_the_device_backend(device_type: str, backend: str, device_id: Any) -> None:
    """init_process_group("nccl", device_id=cuda:1) gets the device's backend and device."""
    calls: list[tuple[Any, ...]] = []

    def init(backend: Any = None, init_method: Any = None, *, device_id: Any = None) -> None:
        calls.append((backend, init_method, device_id))

    wrapped = _transfer._on_backend(init, device_type)
    given_id = torch.device("cuda", 1) if device_type != "npu" else None
    wrapped("nccl", "env://", device_id=given_id)
    wrapped(backend="NCCL")
    wrapped("gloo")
    assert calls == [(backend, "env://", device_id), (backend, None, None), ("gloo", None, None)]
    with pytest.raises(TypeError):  # torch's function's own error for a call it refuses
        wrapped("nccl", unknown=1)
    calls.clear()
    wrapped("cpu:gloo,cuda:nccl")
    wrapped("cuda:nccl")
    wrapped("CUDA:NCCL, CPU:mpi")  # what is written for a device outright is kept
    own = {"cpu": "cpu:gloo", "xpu": "xpu:xccl,cpu:gloo", "npu": "npu:hccl,cpu:gloo"}
    mpi = {"cpu": "cpu:mpi", "xpu": "xpu:xccl,cpu:mpi", "npu": "npu:hccl,cpu:mpi"}
    assert [call[0] for call in calls] == [
        own[device_type],
        f"{device_type}:{backend}",
        mpi[device_type],
    ]


def test_ddp_device_ids_name_the_device() -> None:
    """DDP's CUDA device_ids become the accelerator's indices, and None on the CPU."""
    calls: list[tuple[Any, ...]] = []

    def init(self: Any, module: Any, device_ids: Any = None, output_device: Any = None) -> None:
        calls.append((device_ids, output_device))

    _transfer._ddp_init(init, "xpu")(None, None, [torch.device("cuda", 1)], "cuda:1")
    _transfer._ddp_init(init, "cpu")(None, None, [1], 1)
    assert calls == [([1], 1), (None, None)]


@needs_no_cuda
def test_data_parallel_passes_calls_through_on_the_cpu() -> None:
    """nn.DataParallel(model).cuda() keeps the model and calls it, as torch does on the CPU."""
    model = torch.nn.Linear(2, 3)
    inputs = torch.ones(4, 2)
    with transfer_to_device():
        for wrapped in (
            torch.nn.DataParallel(model).cuda(),
            torch.nn.DataParallel(model, device_ids=[0, 1], output_device=0),
        ):
            assert wrapped.module is model and wrapped.device_ids == []
            assert torch.equal(wrapped(inputs.cuda()), model(inputs))
    assert patchscope.active() == ()


@needs_no_cuda
def test_cuda_profiling_profiles_the_host_only() -> None:
    """ProfilerActivity.CUDA / use_device="cuda" record CPU activity only, as torch without CUDA."""
    from torch.profiler import ProfilerActivity, profile

    with transfer_to_device():
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as kineto:
            (torch.ones(3, device="cuda") + 1).sum()
        assert kineto.profiler is not None
        assert kineto.profiler.kineto_activities == {ProfilerActivity.CPU}
        assert any(event.key == "aten::add" for event in kineto.key_averages())
        for options in ({"use_device": "cuda"}, {"use_cuda": True}):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)  # use_cuda's deprecation
                legacy = torch.autograd.profiler.profile(**options)  # type: ignore[arg-type]
            assert legacy.use_device is None and legacy.kineto_activities == {ProfilerActivity.CPU}
    with pytest.warns(UserWarning, match="CUDA is not available"):
        plain = torch.autograd.profiler.profile(use_device="cuda")  # what torch does alone
    assert plain.use_device is None
    assert patchscope.active() == ()


def test_pure_python_exits_quietly_after_a_scope() -> None:
    """No "Exception ignored" from patchscope's callbacks as the interpreter tears down."""
    code = (
        "import torch\n"
        "from patchscope.torch import transfer_to_device\n"
        "with transfer_to_device():\n"
        "    torch.ones(1, device='cuda')\n"
    )
    done = _python(code, PATCHSCOPE_PURE_PYTHON="1")
    assert "Exception ignored" not in done.stderr, done.stderr


@needs_no_cuda
def test_a_cuda_default_device_is_reached() -> None:
    """torch.set_default_device("cuda") made outside the scope puts factories on the CPU inside."""
    torch.set_default_device("cuda")
    try:
        with transfer_to_device():
            assert torch.empty(2).device == CPU
            assert torch.nn.Linear(2, 2).weight.device == CPU
        with pytest.raises((AssertionError, RuntimeError)):
            torch.empty(2)
    finally:
        torch.set_default_device(None)
    assert _stack() == 0


def test_rng_state_round_trips_on_the_cpu_generator() -> None:
    """torch.cuda.get/set_rng_state(_all) and initial_seed work on the CPU's generator."""
    with transfer_to_device():
        torch.cuda.manual_seed(7)
        assert torch.cuda.initial_seed() == 7
        state = torch.cuda.get_rng_state()
        first = torch.rand(3)
        torch.cuda.set_rng_state(state)
        assert torch.equal(first, torch.rand(3))
        torch.cuda.set_rng_state_all(torch.cuda.get_rng_state_all())


@needs_no_cuda
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compiled_code_in_the_scope_gives_eager_results(backend: str) -> None:
    """torch.compile in the scope gives eager's values: Dynamo does not trace the mode.

    Dynamo saves the CUDA RNG state once is_available() holds. Where it
    compiled the mode's __torch_function__ with a graph break in it, torch
    2.13 computed ``((x * 2) + 1) * 3`` as ``(x + 2) * 2``.
    """

    def step(x: Any) -> Any:
        return (x.to("cuda") * 2 + torch.ones(2, device="cuda")).sum()

    def chain(x: Any) -> Any:
        return ((x * 2) + 1) * 3

    def attention(q: Any, k: Any, v: Any) -> Any:
        return torch.softmax(q @ k.transpose(-1, -2) / 8, -1) @ v

    x = torch.arange(4.0)
    q, k, v = torch.randn(3, 2, 4, 8, generator=torch.Generator().manual_seed(0))
    cache_entries = torch._C._dynamo.eval_frame._debug_get_cache_entry_list
    mapper = device_mapper(patchscope.torch.active_device_type())
    mode_codes = (
        _transfer._DeviceMode.__torch_function__.__code__,
        _transfer._to.__code__,
        _transfer._mapped_device.__code__,
        mapper.__code__,
    )
    torch._dynamo.reset()
    with transfer_to_device(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert torch.compile(step, backend=backend)(torch.ones(2)).item() == 6.0
        # Dynamo compiled none of the mode's frames, nor those it calls to
        # map step's devices.
        for code in mode_codes:
            assert cache_entries(code) == [], code.co_name
        for fn, args in [(chain, (x,)), (chain, (x + 1,)), (attention, (q, k, v))]:
            torch._dynamo.reset()
            compiled = torch.compile(fn, backend=backend)
            assert torch.equal(compiled(*args), fn(*args))
            assert torch.equal(compiled(*args), fn(*args))  # and from its cache
            for code in mode_codes:
                assert cache_entries(code) == [], (fn.__name__, code.co_name)
    torch._dynamo.reset()
    assert _stack() == 0


@needs_no_cuda
def test_dynamo_is_on_again_after_each_op_of_compiled_code() -> None:
    """The mode turns Dynamo off while it maps one op, and back on for the frames after it.

    Without the callback put back, Dynamo would see only the compiled
    function's own frame, and nothing it calls after its first op.
    """
    from torch._dynamo.utils import counters

    def inner(n: int) -> int:
        return sum(i * i for i in range(n))

    def outer(x: Any) -> Any:
        return x.to("cuda") + 1, inner(50)

    def failing(x: Any) -> Any:
        return x.to("cuda") @ torch.ones(3, device="cuda")  # shapes that do not match

    set_callback = torch._C._dynamo.eval_frame.set_eval_frame
    torch._dynamo.reset()
    counters.clear()
    with transfer_to_device(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y, total = torch.compile(outer, backend="eager")(torch.ones(2))
        assert torch.equal(y, torch.full((2,), 2.0)) and total == sum(i * i for i in range(50))
        assert counters["frames"]["total"] >= 2, dict(counters["frames"])
        with pytest.raises(RuntimeError):
            torch.compile(failing, backend="eager")(torch.ones(2))
    assert set_callback(None) is None  # no callback left behind, even after the error
    torch._dynamo.reset()
    assert _stack() == 0


def test_the_installed_torch_lets_dynamo_skip_the_mode() -> None:
    """The mode's frame is marked for Dynamo to skip in the installed release's spelling."""
    assert _transfer._skip_frames(_transfer._DeviceMode.__torch_function__.__code__)


# What Dynamo's CudaInterface binds from torch.cuda when it is first imported.
_DYNAMO_BOUND = (
    "current_device",
    "current_stream",
    "device_count",
    "get_device_properties",
    "is_bf16_supported",
    "memory_allocated",
    "set_device",
    "set_stream",
    "stream",
    "synchronize",
)


@needs_no_cuda
def test_dynamo_first_imported_in_a_scope_binds_torch_cuda_after_it() -> None:
    """The first torch.compile in a scope imports Dynamo; its interface holds no stand-in after.

    CudaInterface binds torch.cuda's functions once, at import: in the scope
    it binds the stand-ins. They stay while any scope is open (the outer one
    here relies on them), and the last one to end binds torch.cuda's own.
    """
    code = f"""
import sys, torch
from patchscope.torch import transfer_to_device
assert "torch._dynamo.device_interface" not in sys.modules
with transfer_to_device():
    with transfer_to_device():
        compiled = torch.compile(lambda x: x * 2, backend="eager")
        assert compiled(torch.ones(2)).tolist() == [2.0, 2.0]
    from torch._dynamo.device_interface import CudaInterface
    assert CudaInterface.device_count() == 1  # still the stand-in: a scope is open
    assert compiled(torch.ones(2)).tolist() == [2.0, 2.0]
assert CudaInterface.device_count() == torch.cuda.device_count() == 0
assert CudaInterface.device is torch.cuda.device
for name in {_DYNAMO_BOUND!r}:
    assert isinstance(vars(CudaInterface)[name], staticmethod), name
    assert getattr(CudaInterface, name) is getattr(torch.cuda, name), name
print("bound", len({_DYNAMO_BOUND!r}))
"""
    assert _python(code).stdout.split() == ["bound", str(len(_DYNAMO_BOUND))]


@needs_no_cuda
def test_dynamo_gets_torch_cuda_back_after_a_failed_end_beside_other_redirects() -> None:
    """A scope whose end raises still unbinds; a redirect of another name does not hold it."""
    code = """
import warnings, torch
from patchscope import RedirectConflictWarning, redirect_attr
from patchscope.torch import transfer_to_device
with redirect_attr(torch.cuda, "_lazy_call", lambda callback: callback(), scope="context"):
    handle = transfer_to_device().start()
    from torch._dynamo.device_interface import CudaInterface
    assert CudaInterface.device_count() == 1
    # Its code replaced while redirected by call: the scope's end warns.
    torch.cuda.empty_cache.__code__ = (lambda: None).__code__
    with warnings.catch_warnings():
        warnings.simplefilter("error", RedirectConflictWarning)
        try:
            handle.stop()
        except RedirectConflictWarning:
            print("conflict")
    assert CudaInterface.device_count() == torch.cuda.device_count() == 0
    assert CudaInterface.current_stream is torch.cuda.current_stream
print("unbound")
"""
    assert _python(code).stdout.split() == ["conflict", "unbound"]


@needs_no_cuda
def test_nested_scopes_unwind_one_at_a_time() -> None:
    """A scope inside a scope adds one mode; ending the inner one leaves the outer one working."""
    redirect = transfer_to_device()
    with redirect:
        with redirect:
            assert _stack() == 2
            _cuda_runs()
        assert _stack() == 1
        _cuda_runs()
    assert _stack() == 0
    _cuda_fails()


_BF16 = torch.cuda.is_bf16_supported


def test_on_a_faked_xpu_the_queries_and_autocast_name_the_xpu(devices: Any) -> None:
    """With XPU active, torch.cuda's queries ask torch.xpu and autocast("cuda") targets "xpu"."""
    devices.active("xpu")
    with transfer_to_device() as device:
        assert device == torch.device("xpu")
        assert torch.cuda.is_available() is True
        assert torch.cuda.device_count() == 1
        # Redirected by call, to torch.xpu's own query.
        bf16 = [(a.name, a.replacement) for a in patchscope.active() if a.target is _BF16]
        assert bf16 == [("__code__", torch.xpu.is_bf16_supported)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert torch.autocast("cuda").device == "xpu"
    assert patchscope.active() == ()
    assert _stack() == 0


def test_fsdp_device_id_names_the_device() -> None:
    """FSDP's CUDA device_id names the accelerator's device; on the CPU, also when left out."""
    calls: list[Any] = []

    def init(self: Any, module: Any, *args: Any, **kwargs: Any) -> None:
        calls.append(kwargs.get("device_id"))

    _transfer._fsdp_init(init, "xpu")(None, None, device_id=1)
    _transfer._fsdp_init(init, "xpu")(None, None)
    _transfer._fsdp_init(init, "cpu")(None, None, device_id=torch.device("cuda", 1))
    _transfer._fsdp_init(init, "cpu")(None, None)
    assert calls == [torch.device("xpu", 1), None, CPU, CPU]


def test_fsdp_is_reached_once_imported() -> None:
    """With FSDP imported, its __init__ is redirected in the scope and restored by identity."""
    from torch.distributed.fsdp import FullyShardedDataParallel

    original = vars(FullyShardedDataParallel)["__init__"]
    with transfer_to_device():
        assert FullyShardedDataParallel.__init__ is not original
    assert vars(FullyShardedDataParallel)["__init__"] is original


# ---------------------------------------------------------------------------
# Logical devices on the CPU: device_count=N


@needs_no_cuda
def test_device_count_stands_that_many_logical_devices_on_the_host() -> None:
    """device_count=N: N devices, each index selectable, every one the host."""
    with transfer_to_device(device_count=3):
        assert torch.cuda.device_count() == 3
        for index in range(3):
            torch.cuda.set_device(index)
            assert torch.cuda.current_device() == index
            assert torch.ones(1, device=f"cuda:{index}").device == CPU
        with torch.cuda.device(1):
            assert torch.cuda.current_device() == 1
        assert torch.cuda.current_device() == 2
    with transfer_to_device():
        assert torch.cuda.device_count() == 1


@needs_no_cuda
def test_the_selection_lasts_as_long_as_the_thread() -> None:
    """As on CUDA: across nested and later scopes and a decorated generator's steps."""
    with transfer_to_device(device_count=4):
        torch.cuda.set_device(3)
        with transfer_to_device(device_count=4):
            assert torch.cuda.current_device() == 3
            torch.cuda.set_device(2)
        assert torch.cuda.current_device() == 2
    with transfer_to_device(device_count=4):
        assert torch.cuda.current_device() == 2

    @transfer_to_device(device_count=4)
    def steps() -> Iterator[int]:
        torch.cuda.set_device(1)
        yield torch.cuda.current_device()
        yield torch.cuda.current_device()

    assert list(steps()) == [1, 1]


@needs_no_cuda
def test_each_thread_has_its_own_current_device() -> None:
    """As on CUDA, set_device selects for the calling thread only."""
    with transfer_to_device(scope="process", device_count=2):
        torch.cuda.set_device(1)

        def other() -> tuple[int, int]:
            before = torch.cuda.current_device()
            torch.cuda.set_device(0)
            return before, torch.cuda.current_device()

        assert in_other_thread(other) == (0, 0)
        assert torch.cuda.current_device() == 1


@needs_no_cuda
@pytest.mark.parametrize(("value", "count"), [("4", 4), ("1", 1), ("0", 1), ("two", 1)])
def test_local_world_size_is_the_default_count(
    monkeypatch: pytest.MonkeyPatch, value: str, count: int
) -> None:
    """Without device_count, one logical device per local rank (torchrun's LOCAL_WORLD_SIZE)."""
    monkeypatch.setenv("LOCAL_WORLD_SIZE", value)
    with transfer_to_device():
        assert torch.cuda.device_count() == count
    with transfer_to_device(device_count=2):
        assert torch.cuda.device_count() == 2


@pytest.mark.parametrize("count", [0, -1, True, 1.5, "2"])
def test_a_bad_device_count_is_refused_when_made(count: Any) -> None:
    """A count that is not an int of at least 1: ValueError naming it, nothing changed."""
    with pytest.raises(ValueError, match=rf"device_count={count!r}.*int of at least 1"):
        transfer_to_device(device_count=count)
    assert patchscope.active() == ()


def test_a_device_count_off_the_cpu(devices: Any) -> None:
    """Named with another device, a count is refused; with another device active, ignored."""
    with pytest.raises(ValueError, match=r"transfer_to_device\('xpu', device_count=2\).*CPU"):
        transfer_to_device("xpu", device_count=2)
    devices.active("xpu")
    with transfer_to_device(device_count=2) as device:
        assert device == torch.device("xpu")
        assert torch.cuda.device_count() == torch.xpu.device_count() == 1
    assert patchscope.active() == ()
    assert _stack() == 0


# ---------------------------------------------------------------------------
# is_bf16_supported(): what the CPU does natively


@needs_no_cuda
@pytest.mark.parametrize("native", [True, False])
def test_is_bf16_supported_answers_whether_the_cpu_has_native_bf16(
    monkeypatch: pytest.MonkeyPatch, native: bool
) -> None:
    """True only on a CPU with native bfloat16, including_emulation or not."""
    monkeypatch.setattr(_runtime, "host_bf16", lambda: native)
    _runtime._host_bf16_answer.cache_clear()
    try:
        with transfer_to_device():
            assert torch.cuda.is_bf16_supported() is native
            assert torch.cuda.is_bf16_supported(including_emulation=True) is native
            assert torch.cuda.is_bf16_supported(False) is native
    finally:
        _runtime._host_bf16_answer.cache_clear()


@pytest.mark.parametrize(
    ("machine", "avx512_bf16", "amx", "features", "native"),
    [
        ("x86_64", True, False, "", True),
        ("x86_64", False, True, "", True),
        ("x86_64", False, False, "", False),
        ("aarch64", False, False, "fp asimd sve bf16 i8mm", True),
        ("aarch64", False, False, "fp asimd sve i8mm", False),
    ],
)
def test_host_bf16_reads_the_cpus_features(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Any,
    machine: str,
    avx512_bf16: bool,
    amx: bool,
    features: str,
    native: bool,
) -> None:
    """x86: AVX512-BF16 or AMX, as torch probes them; Linux arm64: bf16 in the CPU's Features."""
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    monkeypatch.setattr(_runtime.platform, "machine", lambda: machine)
    monkeypatch.setattr(_runtime.sys, "platform", "linux")
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nFeatures\t: {features}\n", encoding="utf-8")
    real_open = open

    def fake_open(path: Any, *args: Any, **kwargs: Any) -> Any:
        return real_open(cpuinfo if path == "/proc/cpuinfo" else path, *args, **kwargs)

    monkeypatch.setattr(_runtime, "open", fake_open, raising=False)
    assert _runtime.host_bf16() is native


# ---------------------------------------------------------------------------
# Process groups made through names imported first


@needs_no_cuda
@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed is not built")
def test_nccl_groups_are_made_on_gloo_through_names_imported_first(tmp_path: Any) -> None:
    """init_process_group and new_group imported before the scope: nccl becomes gloo."""
    from torch.distributed import destroy_process_group, get_backend, init_process_group, new_group

    with transfer_to_device():
        init_process_group("nccl", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
        try:
            group = new_group(ranks=[0], backend="nccl")
            assert get_backend() == get_backend(group) == "gloo"
            total = torch.ones(2, device="cuda")
            torch.distributed.all_reduce(total, group=group)
            assert total.tolist() == [1.0, 1.0]
        finally:
            destroy_process_group()
    assert patchscope.active() == ()
