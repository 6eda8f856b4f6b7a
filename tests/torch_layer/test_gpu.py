"""On a CUDA machine patchscope.torch stays out of the way (run with scripts/gpu_check.sh)."""

import multiprocessing
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import patchscope  # noqa: E402
from patchscope.torch import (  # noqa: E402
    active_device_type,
    device_event_class,
    device_events,
    device_namespace,
    transfer_to_device,
)

# device_count() asks NVML, so collecting this file does not initialise CUDA.
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(torch.cuda.device_count() == 0, reason="needs a CUDA device"),
]

ROOT = Path(__file__).resolve().parents[2]


def test_active_device_is_cuda() -> None:
    """A CUDA machine is detected as "cuda", and its event class is torch.cuda.Event itself."""
    assert active_device_type() == "cuda"
    assert device_event_class() is torch.cuda.Event


@pytest.mark.parametrize("make", [device_events, device_namespace])
def test_redirects_are_no_ops(make: Any) -> None:
    """device_events()/device_namespace() install nothing; code gets real CUDA objects."""
    with make():
        assert patchscope.active() == ()
        event = torch.cuda.Event(enable_timing=True)
        stream = torch.cuda.Stream()
    assert type(event) is torch.cuda.Event
    assert type(stream) is torch.cuda.Stream

    @make()
    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.active_during_init = patchscope.active()
            self.event = torch.cuda.Event()

    model = Model()
    assert model.active_during_init == ()
    assert type(model.event) is torch.cuda.Event


def _child_uses_cuda(results: Any) -> None:
    """In the forked child: run a CUDA op and report the result."""
    results.put(float(torch.ones(3, device="cuda").sum().item()))


def test_fork_after_detection_can_use_cuda() -> None:
    """A child forked after active_device_type() can still initialise and use CUDA."""
    if torch.cuda.is_initialized():
        pytest.skip("CUDA was initialised earlier in this process; fork cannot be checked")
    assert active_device_type() == "cuda"
    assert not torch.cuda.is_initialized()
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    child = context.Process(target=_child_uses_cuda, args=(results,))
    child.start()
    try:
        assert results.get(timeout=120) == 3.0
    finally:
        child.join(timeout=120)
    assert child.exitcode == 0


def test_attention_example_runs() -> None:
    """The attention example builds the undecorated model too and runs on CUDA."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "device_agnostic_attention.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "active device: cuda" in done.stdout
    assert "undecorated Attention(): built" in done.stdout
    assert "redirects active now: 0" in done.stdout


def test_transfer_to_device_is_a_no_op() -> None:
    """transfer_to_device() installs nothing on CUDA: no activation, no mode, real CUDA tensors."""
    depth = torch._C._len_torch_function_stack()
    with transfer_to_device() as device:
        assert device is None
        assert patchscope.active() == ()
        assert torch._C._len_torch_function_stack() == depth
        assert torch.ones(1, device="cuda").is_cuda


def test_train_example_runs_on_cuda() -> None:
    """The CUDA-written training example runs on the GPU and leaves nothing behind."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "train_cuda_script_anywhere.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "running on: cuda, unchanged\n" in result.stdout
    assert result.stdout.endswith("redirects active now: 0\n")
