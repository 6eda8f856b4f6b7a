"""The lint over the installed torch package, with two files verified by hand.

torch is read as source only (never imported). The two files were checked
line by line against torch 2.13.0:

* ``torch/random.py``: ``import torch.cuda`` inside two functions, then
  ``torch.cuda.manual_seed_all(seed)`` in each (PS004); ``torch.cuda.
  _is_in_bad_fork()`` is not a rule API; "cuda" in a docstring, a comment and a
  string literal is not code.
* ``torch/cuda/streams.py``: two ``with torch.cuda.device(device):`` (PS003)
  and two ``stream = torch.cuda.current_stream()`` (PS001); the error message
  string ``"torch.cuda.Stream requires CUDA support"``, the f-string
  ``f"<torch.cuda.Event {...}>"``, the ``"<torch.cuda.Event uninitialized>"``
  literal and docstrings naming ``torch.cuda.current_stream()`` are not
  reported; ``torch.backends.cuda.is_built()`` is not ``torch.cuda``.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os

import pytest

from patchscope.lint import LintConfig, lint_paths
from patchscope.lint._rules import PATCH_CODES as PATCHES

EXPECTED = {
    "random.py": [
        (67, 9, "PS004", "torch.cuda.manual_seed_all"),
        (97, 9, "PS004", "torch.cuda.manual_seed_all"),
    ],
    "cuda/streams.py": [
        (45, 18, "PS003", "torch.cuda.device"),
        (155, 14, "PS003", "torch.cuda.device"),
        (207, 22, "PS001", "torch.cuda.current_stream"),
        (221, 22, "PS001", "torch.cuda.current_stream"),
    ],
}


@pytest.fixture(scope="module")
def torch_dir() -> str:
    """The installed torch package's directory, found without importing it."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("torch is not installed")
    version = importlib.metadata.version("torch")
    if not version.startswith("2.13."):
        pytest.skip(f"findings were verified against torch 2.13, found {version}")
    return next(iter(spec.submodule_search_locations))


def test_two_hand_verified_torch_files(torch_dir: str) -> None:
    """A run over all of torch reports exactly the verified findings in two files."""
    result = lint_paths([torch_dir], LintConfig(root=torch_dir))
    assert result.files_checked > 2000
    found: dict[str, list[tuple[int, int, str, str | None]]] = {name: [] for name in EXPECTED}
    for f in result.findings:
        name = os.path.relpath(f.path, torch_dir).replace(os.sep, "/")
        if name in found:
            found[name].append((f.line, f.column, f.code, f.api))
    assert found == EXPECTED
    # Every finding is a rule API under torch.cuda, or a file this Python cannot parse.
    codes = {f.code for f in result.findings}
    assert codes <= {"PS000", "PS001", "PS002", "PS003", "PS004", "PS006", "PS009", *PATCHES}
    assert all(f.api and f.api.startswith("torch.cuda.") for f in result.findings if f.api)
