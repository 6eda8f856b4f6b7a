"""The patchscope.torch examples run and print what they resolved."""

import runpy
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _run(name: str, capsys: pytest.CaptureFixture[str]) -> str:
    """Run an example as __main__ and return what it printed."""
    runpy.run_path(str(EXAMPLES / name), run_name="__main__")
    return capsys.readouterr().out


def test_device_agnostic_attention(capsys: pytest.CaptureFixture[str]) -> None:
    """The attention example builds and runs the decorated model and restores everything."""
    from patchscope.torch import active_device_type

    out = _run("device_agnostic_attention.py", capsys)
    assert f"active device: {active_device_type()}\n" in out
    assert "forward overlapped on the aux stream: output (2, 16, 64)" in out
    assert "max |difference| to the sequential forward: 0.0e+00" in out
    assert out.endswith("redirects active now: 0\n")
    if not torch.cuda._is_compiled():
        assert "RuntimeError: Tried to instantiate dummy base class Event" in out
        assert (
            "PortableAttention events: ['HostEvent', 'HostEvent'], indexer event: HostEvent" in out
        )


def test_time_cuda_code_anywhere(capsys: pytest.CaptureFixture[str]) -> None:
    """The timing example prints one positive timing per matrix size."""
    out = _run("time_cuda_code_anywhere.py", capsys)
    timings = [line for line in out.splitlines() if "matmul:" in line]
    assert len(timings) == 3
    for line in timings:
        assert float(line.split("matmul:")[1].split()[0]) > 0.0


def test_train_cuda_script_anywhere(capsys: pytest.CaptureFixture[str]) -> None:
    """The CUDA-written training script runs under transfer_to_device(), learns, leaves nothing."""
    from patchscope.torch import active_device_type

    out = _run("train_cuda_script_anywhere.py", capsys)
    assert f"active device: {active_device_type()}\n" in out
    if not torch.cuda._is_compiled():
        assert "without transfer_to_device(): AssertionError: Torch not compiled with CUDA" in out
        assert "running on: cpu\n" in out
        # nanoGPT's choice: bfloat16 where is_bf16_supported(), which on the
        # CPU answers whether bfloat16 is native there.
        from patchscope.torch._runtime import host_bf16

        assert f"dtype {'bfloat16' if host_bf16() else 'float16'}," in out
    first, last = out.split("\nloss ")[1].split("\n")[0].split(" -> ")
    assert float(last) < float(first)
    assert len([line for line in out.splitlines() if line.startswith("iter ")]) == 3
    assert out.endswith("redirects active now: 0\n")


@pytest.mark.skipif(torch.cuda._is_compiled(), reason="needs a torch without CUDA")
def test_train_ddp_cuda_script_anywhere() -> None:
    """The CUDA-written DDP job runs two gloo ranks on the CPU whose weights stay in sync."""
    # In a fresh interpreter: spawned ranks import the example as __main__ by its path.
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "train_ddp_cuda_script_anywhere.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "backend gloo, parameters on cpu\n" in out
    reports = [line.split(": mean loss ")[1] for line in out.splitlines() if "mean loss" in line]
    assert len(reports) == 2
    losses, checksums = zip(
        *(report.split(", weights checksum ") for report in reports), strict=True
    )
    # Different data on each rank: equal weights mean the gradients were averaged.
    assert checksums[0] == checksums[1]
    first, *_, last = (float(loss) for loss in losses[0].split(" -> "))
    assert last < first
    assert out.endswith("exit codes: [0, 0]\n")
