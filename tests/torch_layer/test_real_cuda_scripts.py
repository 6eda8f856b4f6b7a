"""scripts/real_cuda_scripts.py: CUDA-written scripts, unmodified, run under the scope."""

from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "real_cuda_scripts.py"
if not SCRIPT.exists():  # a wheel's test run copies tests/ without scripts/
    pytest.skip("scripts/ is not in this copy of the project", allow_module_level=True)


#: The scripts the runner knows, in its order (read from it, so a new one is tested too).
NAMES = [script.name for script in runpy.run_path(str(SCRIPT), run_name="cuda_scripts")["SCRIPTS"]]


def test_the_runner_checks_the_four_shapes() -> None:
    """nanoGPT, DDP with mp.spawn, tensor parallel on 2 ranks, and imports made first."""
    assert NAMES[:4] == ["nanogpt_train", "ddp_spawn", "tensor_parallel", "imports_first"]


@pytest.mark.skipif(torch.cuda._is_compiled(), reason="needs a torch on which CUDA calls fail")
@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed is not built")
@pytest.mark.parametrize("name", NAMES)
def test_a_script_fails_without_the_scope_and_runs_inside_it(name: str) -> None:
    """One script per test, so that a parallel test run spreads them over its workers."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--only", name],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    runs = [line.split()[0] for line in lines if "in the scope" in line and " runs " in line]
    fails = [line.split()[0] for line in lines if "without the scope" in line and " fails " in line]
    assert runs == fails == [name]
    assert lines[-1] == "1 of 1 run under transfer_to_device()"


def test_an_unknown_script_name_is_refused() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--only", "nope"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "no script named ['nope']" in done.stderr
