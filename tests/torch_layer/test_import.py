"""Importing patchscope.torch needs torch and says how to get it; the core never imports torch."""

import subprocess
import sys


def _run(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter and return its result."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )


def test_without_torch_the_error_names_the_extra() -> None:
    """Without torch, importing patchscope.torch raises ImportError telling to install the extra."""
    done = _run("import sys; sys.modules['torch'] = None; import patchscope.torch")
    assert done.returncode == 1
    assert "ImportError: patchscope.torch needs PyTorch" in done.stderr
    assert "pip install 'patchscope[torch]'" in done.stderr


def test_core_does_not_import_torch() -> None:
    """import patchscope leaves torch unimported; only patchscope.torch imports it."""
    done = _run("import sys, patchscope; assert 'torch' not in sys.modules, 'core imported torch'")
    assert done.returncode == 0, done.stderr
