"""active_device_type() and device-name parsing, across the torch releases' detection rules.

Other torch releases and absent accelerators are simulated by faking the
lowest-level query each rule reads (the ``devices`` fixture, conftest.py):
``torch._C._accelerator_getAccelerator`` (what
``torch.accelerator.current_accelerator`` asks on 2.7+), the per-backend
device counts below ``torch.<backend>.device_count()``, or the absence of
``torch.accelerator`` itself (2.1-2.5).
"""

import inspect
import multiprocessing
import sys
import types
from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from patchscope.torch import active_device_type  # noqa: E402
from patchscope.torch._detect import device_type_of, known_device_types  # noqa: E402


def _forbid_fork_poisoning(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make every query that poisons fork fail loudly; return the list of attempted calls."""
    called: list[str] = []

    def forbidden(name: str) -> Callable[..., object]:
        def call(*args: object, **kwargs: object) -> object:
            called.append(name)
            raise AssertionError(f"{name} poisons fork")

        return call

    monkeypatch.setattr(torch._C, "_get_accelerator", forbidden("_get_accelerator"))
    monkeypatch.setattr(torch.cuda, "is_available", forbidden("torch.cuda.is_available"))
    monkeypatch.setattr(torch.cuda, "_lazy_init", forbidden("torch.cuda._lazy_init"))
    monkeypatch.setattr(torch.cuda, "init", forbidden("torch.cuda.init"))
    return called


def test_no_accelerator_is_cpu(devices: Any) -> None:
    """A torch built without an accelerator runs on "cpu"."""
    devices.compiled_with(None)
    assert active_device_type() == "cpu"


def test_compiled_in_but_absent_is_cpu(devices: Any) -> None:
    """A CUDA wheel on a machine without a GPU answers "cpu", not the compiled-in "cuda"."""
    devices.compiled_with("cuda")
    devices.cuda_wheel_without_gpu()
    current = torch.accelerator.current_accelerator
    if "check_available" in inspect.signature(current).parameters:  # torch 2.7 on
        assert current(check_available=False).type == "cuda"
    assert active_device_type() == "cpu"


def test_compiled_in_and_present(devices: Any) -> None:
    """An accelerator that is compiled in and has a device is the answer."""
    devices.compiled_with("xpu")
    devices.xpu_present()
    assert active_device_type() == "xpu"


def test_torch_2_6_rule(monkeypatch: pytest.MonkeyPatch, devices: Any) -> None:
    """On 2.6 current_accelerator() takes no check_available and raises: torch's order is probed."""

    def current_accelerator() -> torch.device:
        raise RuntimeError("no accelerator")

    monkeypatch.setattr(torch.accelerator, "current_accelerator", current_accelerator)
    assert active_device_type() == "cpu"
    devices.xpu_present()
    assert active_device_type() == "xpu"


def test_torch_before_2_6_probes_in_torch_order(
    monkeypatch: pytest.MonkeyPatch, devices: Any
) -> None:
    """Without torch.accelerator (2.1-2.5) the probe order is cuda, xpu, mps, mtia, privateuse1."""
    monkeypatch.delattr(torch, "accelerator")
    assert active_device_type() == "cpu"
    npu = types.ModuleType("torch.npu")
    npu.device_count = lambda: 2  # type: ignore[attr-defined]
    monkeypatch.setattr(torch, "npu", npu, raising=False)
    monkeypatch.setattr(torch._C, "_get_privateuse1_backend_name", lambda: "npu")
    assert active_device_type() == "npu"
    devices.xpu_present()
    assert active_device_type() == "xpu"
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert active_device_type() == "cuda"


def test_broken_backend_driver_is_absent(monkeypatch: pytest.MonkeyPatch, devices: Any) -> None:
    """A backend whose device_count() raises counts as absent rather than breaking detection."""
    devices.compiled_with("xpu")

    def broken() -> int:
        raise RuntimeError("driver failed to initialise")

    monkeypatch.setattr(torch.xpu, "device_count", broken)
    assert active_device_type() == "cpu"


@pytest.mark.parametrize("rule", ["2.7+", "2.6", "2.1-2.5", "compiled-but-absent"])
def test_never_calls_fork_poisoning_queries(
    monkeypatch: pytest.MonkeyPatch, rule: str, devices: Any
) -> None:
    """No detection rule calls torch._C._get_accelerator, torch.cuda.is_available or CUDA init."""
    called = _forbid_fork_poisoning(monkeypatch)
    if rule == "2.6":
        monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda: torch.device("cpu"))
    elif rule == "2.1-2.5":
        monkeypatch.delattr(torch, "accelerator")
    elif rule == "compiled-but-absent":
        devices.compiled_with("cuda")
        devices.cuda_wheel_without_gpu()
    assert active_device_type() == "cpu"
    assert called == []


def _child_uses_torch(queue: "multiprocessing.Queue[tuple[bool, float]]") -> None:
    """In the forked child: run a torch op and report whether torch thinks the fork is bad."""
    total = float((torch.arange(4.0) * 2).sum())
    queue.put((bool(torch.cuda._is_in_bad_fork()), total))


def _counts_through_the_cuda_runtime() -> bool:
    """A CUDA build without NVML: torch's own device_count() then poisons fork."""
    nvml_count = getattr(torch.cuda, "_device_count_nvml", None)
    return bool(torch.cuda._is_compiled()) and nvml_count is not None and nvml_count() < 0


@pytest.mark.skipif(sys.platform == "win32", reason="fork is POSIX only")
@pytest.mark.skipif(
    _counts_through_the_cuda_runtime(), reason="torch's device_count() itself poisons fork here"
)
def test_child_forked_after_detection_can_use_torch() -> None:
    """A child forked after active_device_type() runs torch and is not in a bad fork."""
    active_device_type()
    context = multiprocessing.get_context("fork")
    queue: multiprocessing.Queue[tuple[bool, float]] = context.Queue()
    child = context.Process(target=_child_uses_torch, args=(queue,))
    child.start()
    try:
        bad_fork, total = queue.get(timeout=60)
    finally:
        child.join(timeout=60)
    assert not child.is_alive()
    assert child.exitcode == 0
    assert (bad_fork, total) == (False, 12.0)


@pytest.mark.parametrize(
    ("device", "expected"),
    [
        ("cpu", "cpu"),
        ("cuda", "cuda"),
        ("cuda:1", "cuda"),
        ("xpu:0", "xpu"),
        ("mps", "mps"),
        (torch.device("xpu", 1), "xpu"),
        (torch.device("cuda"), "cuda"),
    ],
)
def test_device_type_of_accepts_names_indices_and_devices(device: object, expected: str) -> None:
    """Strings with or without an index and torch.device objects name their device type."""
    assert device_type_of(device) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize("device", ["meta", "cuda:x", "", "gpu", torch.device("meta")])
def test_unknown_device_lists_the_known_ones(device: object) -> None:
    """An unknown device raises ValueError naming it and listing every known type."""
    with pytest.raises(ValueError) as info:
        device_type_of(device)  # type: ignore[arg-type]
    message = str(info.value)
    assert repr(str(device)) in message
    for known in known_device_types():
        assert repr(known) in message


def test_device_type_of_rejects_other_types() -> None:
    """An int is not a device here (torch.cuda's index form is ambiguous across backends)."""
    with pytest.raises(TypeError, match="'int'"):
        device_type_of(0)  # type: ignore[arg-type]


def test_renamed_privateuse1_backend_is_known(monkeypatch: pytest.MonkeyPatch) -> None:
    """An out-of-tree backend that renamed privateuse1 ("npu") becomes a known device."""
    assert "npu" not in known_device_types()
    monkeypatch.setattr(torch._C, "_get_privateuse1_backend_name", lambda: "npu")
    assert "npu" in known_device_types()
    assert device_type_of("npu:3") == "npu"


def test_none_is_the_active_device(devices: Any) -> None:
    """device_type_of(None) asks active_device_type() at each call."""
    devices.compiled_with(None)
    assert device_type_of(None) == "cpu"
    devices.compiled_with("xpu")
    devices.xpu_present()
    assert device_type_of(None) == "xpu"
