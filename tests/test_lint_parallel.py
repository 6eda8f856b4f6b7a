"""Tests for patchscope.lint._parallel: chunking over processes keeps results in order."""

from __future__ import annotations

import multiprocessing
import threading
import warnings
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


def test_a_process_with_other_threads_starts_workers_without_forking_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While another thread runs, the pool is started from a fork server, and nothing warns.

    Python 3.12+ warns when a multi-threaded process forks; with one thread
    the platform's default (a fork on Linux up to 3.13) is kept.
    """
    if "forkserver" not in multiprocessing.get_all_start_methods():
        pytest.skip("this platform has no fork server")
    with monkeypatch.context() as single:
        single.setattr(_parallel, "_threads", lambda: 1)
        assert _parallel._start_method() is None
    monkeypatch.setattr(_parallel, "SERIAL_BYTES", 0)
    release = threading.Event()
    other = threading.Thread(target=release.wait, args=(30,))
    other.start()
    try:
        assert _parallel._start_method() == "forkserver"
        items = [f"item{i}" for i in range(20)]
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            assert run_chunked(list, items, [3] * 20, jobs=2) == items
        assert [str(w.message) for w in seen if "fork" in str(w.message)] == []
    finally:
        release.set()
        other.join(timeout=30)
    assert not other.is_alive()


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
