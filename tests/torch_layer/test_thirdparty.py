"""Real third-party CUDA-written code, unmodified, under the decorators on a CPU-only torch.

The packages are pinned in ``tests/requirements-thirdparty.txt`` (CI installs
them on the Python that has torch); each test skips where its package is
missing. Each test first shows the piece failing without patchscope, so a
torch that no longer fails there is noticed.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

import patchscope  # noqa: E402
from patchscope.torch import HostEvent, HostStream, device_events, device_namespace  # noqa: E402

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
