"""Real third-party CUDA-written code, unmodified, under the decorators on a CPU-only torch.

The packages are pinned in ``tests/requirements-thirdparty.txt`` (CI installs
them on the Python that has torch); each test skips where its package is
missing. Each test first shows the piece failing without patchscope, so a
torch that no longer fails there is noticed.
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import patchscope  # noqa: E402
from patchscope.torch import (  # noqa: E402
    HostEvent,
    HostStream,
    device_events,
    device_namespace,
    transfer_to_device,
)

needs_no_cuda = pytest.mark.skipif(
    torch.cuda._is_compiled(), reason="needs a torch whose torch.cuda API cannot run"
)
pytestmark = needs_no_cuda


@pytest.fixture(autouse=True)
def _on_cpu(devices: Any) -> None:
    """CPU is the active device, whatever this machine has."""
    devices.active("cpu")


def test_transformers_offloaded_dynamic_cache_updates() -> None:
    """transformers' DynamicCache(offloading=True): torch.Stream() mixed with torch.cuda streams.

    ``torch.cuda.default_stream(device).wait_stream(torch.Stream())`` is reached by
    device_namespace(). The cache's own ``torch.Stream()`` is torch's CPU stream,
    whose native ``wait_stream`` raises on every CPU-only torch ("cpu backend
    doesn't support events"), with or without patchscope; torch.Stream is an
    immutable builtin, so only its name can be redirected: the one extra
    redirect this piece needs, while the cache is built.
    """
    cache_utils = pytest.importorskip("transformers.cache_utils")
    keys, values = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4)

    def fill() -> Any:
        cache = cache_utils.DynamicCache(offloading=True)
        for layer in range(3):
            cache.update(keys + layer, values - layer, layer)
        return cache

    with pytest.raises((RuntimeError, AssertionError)):
        fill()
    with device_namespace(), pytest.raises(RuntimeError, match="cpu backend doesn't support"):
        fill()
    host_streams = patchscope.during(
        cache_utils.DynamicCache,
        "__init__",
        patchscope.redirect_attr(torch, "Stream", HostStream, scope="context"),
    )
    with device_namespace(), host_streams:
        cache = fill()
    assert isinstance(cache.prefetch_stream, HostStream)
    for layer in range(3):
        stored_keys, stored_values = cache.layers[layer].keys, cache.layers[layer].values
        assert torch.equal(stored_keys, keys + layer) and torch.equal(stored_values, values - layer)
    assert torch.Stream is vars(torch)["Stream"] and patchscope.active() == ()


def test_megatron_timer_times_on_the_host() -> None:
    """megatron-core's Timer synchronizes with torch.cuda.synchronize around each interval."""
    timers = pytest.importorskip("megatron.core.timers")
    timer = timers.Timer("step")
    with pytest.raises((RuntimeError, AssertionError)):
        timer.start()
    timer.reset()

    @device_namespace()
    def timed() -> float:
        timer.start()
        torch.randn(32, 32) @ torch.randn(32, 32)
        timer.stop()
        return float(timer.elapsed(reset=True))

    assert timed() >= 0.0
    assert patchscope.active() == ()


def test_megatron_straggler_detector_reports_on_the_host(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """megatron-core's StragglerDetector: timing events, then NVML's monitors at each report.

    A CUDA-written rank (nccl) of one; the detector's singleton state is put
    back afterwards.
    """
    utils = pytest.importorskip("megatron.core.utils")
    dist = pytest.importorskip("torch.distributed")
    detector_class = utils.StragglerDetector
    monkeypatch.setattr(detector_class, "_configured", False)
    monkeypatch.delattr(detector_class, "_instance", raising=False)
    with transfer_to_device():
        dist.init_process_group(
            "nccl", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1
        )
        try:
            detector = detector_class()
            # Rank 0 would also start its control server; rank 1 of the report does not.
            detector.configure(world=1, rank=1, prefill=4, enabled=True)
            assert detector.enabled
            for _ in range(3):
                with detector():
                    torch.randn(32, 32) @ torch.randn(32, 32)
            delta, batch_delta, temp, power, util, clock = detector.elapsed()
        finally:
            dist.destroy_process_group()
    assert delta > 0.0 and batch_delta == 0.0
    assert (temp, power, util, clock) == (0, 0, 0, 0)
    assert patchscope.active() == ()


def test_megatron_offload_groups_construct() -> None:
    """megatron-core's activation-offload group and manager build CUDA events and streams."""
    offload = pytest.importorskip("megatron.core.pipeline_parallel.fine_grained_activation_offload")
    with pytest.raises(RuntimeError):
        offload.OffloadTensorGroup("attn")

    own = {
        cls: vars(cls)["__init__"]
        for cls in (offload.OffloadTensorGroup, offload.PipelineOffloadManager)
    }
    with patchscope.during(offload.OffloadTensorGroup, "__init__", device_events()):
        group = offload.OffloadTensorGroup("attn")
    assert isinstance(group._offload_event, HostEvent)
    assert isinstance(group._reload_event, HostEvent)
    with patchscope.during(offload.PipelineOffloadManager, "__init__", device_namespace()):
        manager = offload.PipelineOffloadManager()
    assert isinstance(manager._d2h_stream, HostStream)
    assert isinstance(manager._h2d_stream, HostStream)
    assert {cls: vars(cls)["__init__"] for cls in own} == own
    assert patchscope.active() == ()


# torchtnt 0.2.4 imports pkg_resources, which warns that it is deprecated.
_TORCHTNT_IMPORT = pytest.mark.filterwarnings("ignore:pkg_resources is deprecated:UserWarning")


def _mse(module: Any, inputs: Any, targets: Any) -> float:
    with torch.no_grad():
        return float(torch.nn.functional.mse_loss(module(inputs), targets))


@_TORCHTNT_IMPORT
def test_torchtnt_auto_unit_trains_with_its_prefetch_stream() -> None:
    """torchtnt's AutoUnit on ``torch.device("cuda")``: prefetch stream, record_stream, autocast.

    With a CUDA device it moves the module there, copies each batch on a
    ``torch.cuda.Stream()`` inside ``torch.cuda.stream(...)``, makes the
    current stream wait for it, and calls ``tensor.record_stream`` on the
    batch; with ``precision="bf16"`` it trains under ``torch.autocast("cuda")``.
    """
    auto_unit = pytest.importorskip("torchtnt.framework.auto_unit")
    train = pytest.importorskip("torchtnt.framework.train").train

    class Regression(auto_unit.AutoUnit):  # type: ignore[misc]
        def compute_loss(self, state: Any, data: Any) -> Any:
            inputs, targets = data
            outputs = self.module(inputs)
            return torch.nn.functional.mse_loss(outputs.float(), targets), outputs

        def configure_optimizers_and_lr_scheduler(self, module: Any) -> Any:
            return torch.optim.SGD(module.parameters(), lr=0.1), None

    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(64, 8, generator=generator)
    targets = inputs @ torch.randn(8, 1, generator=generator)
    batches = [(inputs[i : i + 8], targets[i : i + 8]) for i in range(0, 64, 8)]
    cuda = torch.device("cuda")
    with pytest.raises((RuntimeError, AssertionError)):
        Regression(module=torch.nn.Linear(8, 1), device=cuda)

    for precision in (None, "bf16"):
        with transfer_to_device():
            unit = Regression(module=torch.nn.Linear(8, 1), device=cuda, precision=precision)
            assert isinstance(unit._prefetch_stream, HostStream)

            before = _mse(unit.module, inputs, targets)
            train(unit, batches, max_epochs=5)
            after = _mse(unit.module, inputs, targets)
        assert after < before / 10, (precision, before, after)
        assert next(unit.module.parameters()).device == torch.device("cpu")
        assert patchscope.active() == ()


@_TORCHTNT_IMPORT
def test_torchtnt_cuda_data_prefetcher_and_synchronizing_timer() -> None:
    """torchtnt's CudaDataPrefetcher (events on a side stream) and Timer(cuda_sync=True)."""
    prefetcher = pytest.importorskip("torchtnt.utils.data.data_prefetcher")
    timer = pytest.importorskip("torchtnt.utils.timer")
    batches = [(torch.full((4, 3), float(i)), torch.arange(4) + i) for i in range(5)]
    with pytest.raises(ValueError, match="CUDA must be available"):
        timer.Timer(cuda_sync=True)

    with transfer_to_device():
        fetched = list(prefetcher.CudaDataPrefetcher(batches, torch.device("cuda"), 2))
        clock = timer.Timer(cuda_sync=True)
        with clock.time("step"):
            torch.randn(16, 16) @ torch.randn(16, 16)
    assert len(fetched) == len(batches)
    for (got_x, got_y), (x, y) in zip(fetched, batches, strict=True):
        assert torch.equal(got_x, x) and torch.equal(got_y, y)
    assert len(clock.recorded_durations["step"]) == 1
    assert clock.recorded_durations["step"][0] >= 0.0
    assert patchscope.active() == ()


@_TORCHTNT_IMPORT
def test_torchtnt_memory_snapshot_profiler_records_and_writes_its_snapshot(tmp_path: Any) -> None:
    """torchtnt's MemorySnapshotProfiler records the allocator's history and writes a snapshot.

    Outside the scope it finds no CUDA and writes nothing; inside, it starts
    recording at step 0 and at its stop step writes the pickle and both plots.
    """
    profiler = pytest.importorskip("torchtnt.utils.memory_snapshot_profiler")
    params = profiler.MemorySnapshotParams(start_step=0, stop_step=2)

    def profile(output: Any) -> None:
        snapshots = profiler.MemorySnapshotProfiler(str(output), params)
        for _ in range(2):
            torch.randn(8, 8) @ torch.randn(8, 8)
            snapshots.step()

    profile(tmp_path / "outside")
    assert not (tmp_path / "outside").exists()
    with transfer_to_device():
        profile(tmp_path / "inside")
    written = tmp_path / "inside" / "step_2_rank0"
    assert sorted(p.name for p in written.iterdir()) == [
        "segment_plot.html",
        "snapshot.pickle",
        "trace_plot.html",
    ]
    with (written / "snapshot.pickle").open("rb") as dumped:
        assert pickle.load(dumped) == {"segments": [], "device_traces": [[]]}
    assert patchscope.active() == ()
