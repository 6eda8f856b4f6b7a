"""Tests for patchscope.lint._parallel: chunking over processes keeps results in order."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchscope.lint import LintConfig, _parallel, lint_paths
from patchscope.lint._parallel import default_jobs, run_chunked

PROJECT = Path(__file__).parent / "lint_fixtures" / "project"


def test_default_jobs_is_positive() -> None:
    """There is always at least one worker."""
    assert default_jobs() >= 1


@pytest.mark.parametrize("jobs", [1, 2, 3])
def test_results_come_back_in_item_order(monkeypatch: pytest.MonkeyPatch, jobs: int) -> None:
    """Uneven weights reorder the chunks, never the results."""
    monkeypatch.setattr(_parallel, "SERIAL_BYTES", 0)
    items = [f"item{i}" for i in range(50)]
    weights = [(i * 7919) % 101 for i in range(50)]
    assert run_chunked(list, items, weights, jobs) == items


def test_small_inputs_run_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Below the threshold no pool is started (pre-commit passes few files)."""

    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("a process pool was started")

    import concurrent.futures

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", fail)
    assert run_chunked(list, ["a", "b"], [10, 10], jobs=4) == ["a", "b"]


def test_parallel_lint_equals_serial_lint(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fixture project gives identical findings through the pool and in process."""
    config = LintConfig(
        root=str(PROJECT),
        allow=("fakeserve/platforms/cuda.py",),
        exclude=("third_party",),
        extend_apis=("is_available",),
    )
    serial = lint_paths([str(PROJECT)], config, jobs=1)
    monkeypatch.setattr(_parallel, "SERIAL_BYTES", 0)
    parallel = lint_paths([str(PROJECT)], config, jobs=2)
    assert parallel == serial
    assert len(serial.findings) == 16
