"""Spread per-file work over processes, in byte-balanced chunks.

``ast.parse`` holds the GIL, so threads would not help; a process pool with
one worker per core does. ``benchmarks/bench_lint.py`` runs its ``ast.parse``
and regex baselines through :func:`run_chunked` too, so the linter and the
baselines share the pool kind, chunking and scheduling.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

# Below this much source, starting worker processes costs more than it saves
# (a pre-commit run usually passes a handful of files).
SERIAL_BYTES = 512 * 1024

# Chunks per worker: enough for the pool to even out uneven files, few enough
# that pickling the chunks and their results stays negligible.
_CHUNKS_PER_WORKER = 8


def default_jobs() -> int:
    """The number of cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def _threads() -> int:
    """How many threads this process runs (the interpreter's own count where the OS has none)."""
    try:
        return len(os.listdir("/proc/self/task"))  # C threads (OpenMP, a server's) count too
    except OSError:
        import threading

        return threading.active_count()


def _start_method() -> str | None:
    """How the pool starts its workers: None for the platform's default.

    A fork copies only the thread that calls it: a lock another thread held
    then stays held in the child, and Python 3.12+ warns about it. A process
    with more than one thread (a test runner's worker, an editor's language
    server) starts its workers from a fork server instead, the default from
    Python 3.14; a single-threaded one keeps the faster fork.
    """
    import multiprocessing

    if _threads() > 1 and "forkserver" in multiprocessing.get_all_start_methods():
        return "forkserver"
    return None


def run_chunked(
    work: Callable[[list[T]], list[R]],
    items: Sequence[T],
    weights: Sequence[int],
    jobs: int | None = None,
) -> list[R]:
    """``work`` applied to chunks of ``items``; one result per item, in order.

    ``work`` takes a list of items and returns one result per item; it must be
    picklable (a module-level function or a :func:`functools.partial` of one).
    ``weights`` (file sizes) balance the chunks: the heaviest items are sent
    first, so a large file never starts last. With ``jobs == 1`` or less than
    :data:`SERIAL_BYTES` of input, everything runs in this process. Each call
    owns its pool; calls from several threads do not share state.
    """
    jobs = default_jobs() if jobs is None else jobs
    total = sum(weights)
    if jobs <= 1 or total < SERIAL_BYTES or len(items) < 2:
        return work(list(items))
    order = sorted(range(len(items)), key=lambda i: -weights[i])
    target = max(1, total // (jobs * _CHUNKS_PER_WORKER))
    chunks: list[list[int]] = []
    current: list[int] = []
    size = 0
    for index in order:
        current.append(index)
        size += weights[index]
        if size >= target:
            chunks.append(current)
            current, size = [], 0
    if current:
        chunks.append(current)
    # Imported here: a run small enough to stay in process (pre-commit's
    # handful of files) does not pay for multiprocessing's import.
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context(_start_method())  # None: the default
    results: dict[int, R] = {}
    with ProcessPoolExecutor(max_workers=min(jobs, len(chunks)), mp_context=context) as pool:
        batches = [[items[i] for i in chunk] for chunk in chunks]
        for chunk, outcome in zip(chunks, pool.map(work, batches), strict=True):
            results.update(zip(chunk, outcome, strict=True))
    return [results[index] for index in range(len(items))]
