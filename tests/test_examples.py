"""Every script in examples/ runs to completion (smoke test)."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

EXAMPLES = sorted((pathlib.Path(__file__).parent.parent / "examples").glob("*.py"))
NEEDS_TORCH = {
    "device_agnostic_attention.py",
    "time_cuda_code_anywhere.py",
    "train_cuda_script_anywhere.py",
    "train_ddp_cuda_script_anywhere.py",
}


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs(path: pathlib.Path) -> None:
    """The example exits 0 and prints something."""
    if path.name in NEEDS_TORCH:
        pytest.importorskip("torch")
    if path.name.startswith("test_"):
        # pytest-style examples are run through pytest itself
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(path)]
    else:
        cmd = [sys.executable, str(path)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip()


def test_examples_exist() -> None:
    """The quickstart and the third-party-constructor examples are present."""
    names = {p.name for p in EXAMPLES}
    assert {"quickstart.py", "wrap_third_party_constructor.py"} <= names
