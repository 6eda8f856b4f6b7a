"""Decorated code in other processes: a spawned torch.distributed job, cloudpickle, Ray.

Spawn pickles by reference (the worker imports the decorated class); cloudpickle,
which Ray and Dask use for code defined in a driver script or notebook, ships it
by value. Either way the worker's constructions run with the decoration.
"""

import multiprocessing
import os
import queue
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
# Imported before any scope: transfer_to_device() reaches FSDP once it is loaded.
from torch.distributed.fsdp import FullyShardedDataParallel  # noqa: E402

import patchscope  # noqa: E402
from patchscope.torch import (  # noqa: E402
    device_event_class,
    device_events,
    device_namespace,
    transfer_to_device,
)
from patchscope.torch._transfer import _InScope  # noqa: E402

WORLD_SIZE = 2
TIMEOUT_S = 60


@device_events()
class TinyModel(torch.nn.Module):
    """CUDA-written: constructs a torch.cuda.Event in __init__."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 1)
        self.event = torch.cuda.Event(enable_timing=True)


def _plain_event() -> str:
    """Return what an undecorated torch.cuda.Event() gives here: its class name or its error."""
    try:
        return type(torch.cuda.Event()).__name__
    except RuntimeError as exc:
        return str(exc)


def _rank_main(rank: int, store: str, model_class: type, results: Any) -> None:
    """One rank: build the decorated model, all-reduce a tensor, report what it saw."""
    active_at_start = len(patchscope.active())
    dist.init_process_group(
        "gloo",
        init_method=f"file://{store}",
        rank=rank,
        world_size=WORLD_SIZE,
        timeout=timedelta(seconds=TIMEOUT_S),
    )
    try:
        model = model_class()
        value = model.linear(torch.ones(1, 4)).detach() * 0 + (rank + 1)
        dist.all_reduce(value)
        results.put(
            {
                "rank": rank,
                "same_class": model_class is TinyModel,
                "event": type(model.event).__name__,
                "sum": value.item(),
                "active": (active_at_start, len(patchscope.active())),
                "plain_event": _plain_event(),
            }
        )
    finally:
        dist.destroy_process_group()


def _rank_process(target: Any, rank: int, store: str, *args: Any) -> None:
    """Run ``target(rank, store, *args)`` in a rank, then leave once its reports are sent.

    Without the interpreter's finalization: torch's gloo threads now and then
    abort it (SIGABRT, "terminate called without an active exception"), with
    or without patchscope. An exception still ends the rank as usual.
    """
    target(rank, store, *args)
    results = args[-1]
    results.close()
    results.join_thread()
    os._exit(0)


def _start_ranks(tmp_path: Path, target: Any, *args: Any) -> tuple[list[Any], Any]:
    """Spawn WORLD_SIZE processes running ``target(rank, store, *args, results)``.

    Returns them and the queue they report on; *store* is a rendezvous file
    under *tmp_path*.
    """
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    store = str(tmp_path / "store")
    ranks = [
        context.Process(target=_rank_process, args=(target, rank, store, *args, results))
        for rank in range(WORLD_SIZE)
    ]
    for process in ranks:
        process.start()
    return ranks, results


def _collect(ranks: list[Any], results: Any) -> list[dict[str, Any]]:
    """Every rank's report, sorted by rank, once all exited cleanly; hung ranks are killed."""
    reports = []
    try:
        for _ in ranks:
            reports.append(results.get(timeout=TIMEOUT_S))
    except queue.Empty:
        pytest.fail(f"ranks reported {len(reports)} of {WORLD_SIZE} results")
    finally:
        for process in ranks:
            process.join(timeout=TIMEOUT_S)
            if process.is_alive():
                process.kill()
                process.join(timeout=TIMEOUT_S)
    assert [process.exitcode for process in ranks] == [0] * WORLD_SIZE
    return sorted(reports, key=lambda report: report["rank"])


@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not built")
def test_decorated_model_in_spawned_gloo_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spawned ranks build the decorated model with device events, all-reduce, leak nothing."""
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    # The parent holds a redirect while it spawns: a leak would show up in the ranks.
    with device_events():
        ranks, results = _start_ranks(tmp_path, _rank_main, TinyModel)
    for report in _collect(ranks, results):
        assert report["same_class"]
        assert report["event"] == device_event_class().__name__
        assert report["sum"] == 3.0
        assert report["active"] == (0, 0)
        assert report["plain_event"] == _plain_event()


@transfer_to_device()
def _cuda_written_rank(rank: int, store: str) -> dict[str, Any]:
    """A CUDA-written rank: nccl, set_device(local_rank), DDP device_ids, FSDP device_id, FSDP2."""
    dist.init_process_group(
        backend="nccl",
        init_method=f"file://{store}",
        rank=rank,
        world_size=WORLD_SIZE,
        timeout=timedelta(seconds=TIMEOUT_S),
    )
    try:
        local_rank = rank
        device = f"cuda:{local_rank}"
        torch.cuda.set_device(device)
        model = torch.nn.Linear(4, 1, bias=False).to(device)
        ddp = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[local_rank], output_device=local_rank
        )
        ddp(torch.full((2, 4), float(rank + 1), device=device)).sum().backward()
        sharded = FullyShardedDataParallel(
            torch.nn.Linear(4, 2).to(device), device_id=local_rank, use_orig_params=True
        )
        sharded(torch.ones(1, 4, device=device)).sum().backward()
        # FSDP2 on a "cuda" device mesh, as torchtitan-style scripts build it.
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh("cuda", (WORLD_SIZE,))
        layer = fully_shard(torch.nn.Linear(4, 2).to(device), mesh=mesh)
        layer(torch.ones(1, 4, device=device)).sum().backward()
        return {
            "backend": dist.get_backend(),
            "device": str(model.weight.device),
            "grad": model.weight.grad.tolist() if model.weight.grad is not None else None,
            "fsdp": str(sharded.compute_device),
            "mesh": mesh.device_type,
            "fsdp2_grad": layer.weight.grad is not None,
        }
    finally:
        dist.destroy_process_group()


def _transfer_rank_main(rank: int, store: str, results: Any) -> None:
    """Run the CUDA-written rank, then report what it saw and what is left afterwards."""
    report = _cuda_written_rank(rank, store)
    report.update(rank=rank, active=len(patchscope.active()), cuda=torch.cuda.is_available())
    results.put(report)


@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not built")
@pytest.mark.skipif(torch.cuda._is_compiled(), reason="needs a torch without CUDA")
def test_cuda_written_ddp_and_fsdp_job_runs_on_gloo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two spawned ranks with nccl, DDP device_ids and FSDP device_id run on gloo on the CPU."""
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    ranks, results = _start_ranks(tmp_path, _transfer_rank_main)
    for report in _collect(ranks, results):
        assert report["backend"] == "gloo"
        assert report["device"] == report["fsdp"] == report["mesh"] == "cpu"
        assert report["fsdp2_grad"]
        # Each rank's gradient is 2 * (rank + 1) per weight; DDP averages them.
        assert report["grad"] == [[3.0, 3.0, 3.0, 3.0]]
        assert (report["active"], report["cuda"]) == (0, False)


def _shipped() -> tuple[type, Any]:
    """A decorated model class and function, defined locally: cloudpickle ships them by value."""

    @device_events()
    class DriverModel(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.event = torch.cuda.Event(enable_timing=True)

    @device_namespace()
    def overlap() -> str:
        aux = torch.cuda.Stream()
        with torch.cuda.stream(aux):
            done = torch.cuda.Event()
            done.record()
        torch.cuda.current_stream().wait_stream(aux)
        return type(aux).__name__

    return DriverModel, overlap


def _worker_report(model_class: type, overlap: Any) -> dict[str, Any]:
    """What a worker sees: the event class built, the stream class used, what is left active."""
    return {
        "event": type(model_class().event).__name__,
        "stream": overlap(),
        "active": len(patchscope.active()),
        "plain_event": _plain_event(),
    }


def _expected() -> dict[str, Any]:
    return {
        "event": device_event_class().__name__,
        "stream": "HostStream",
        "active": 0,
        "plain_event": _plain_event(),
    }


_WORKER = """
import pickle, sys
report, model_class, overlap = pickle.loads(sys.stdin.buffer.read())
print(repr(report(model_class, overlap)))
"""


@pytest.mark.skipif(torch.cuda._is_compiled(), reason="needs a torch without CUDA")
def test_decorations_shipped_by_value_work_in_a_fresh_interpreter() -> None:
    """cloudpickle by value: the worker constructs device events and runs host streams."""
    cloudpickle = pytest.importorskip("cloudpickle")
    model_class, overlap = _shipped()
    payload = cloudpickle.dumps((_worker_report, model_class, overlap))
    worker = subprocess.run(
        [sys.executable, "-c", _WORKER],
        input=payload,
        capture_output=True,
        timeout=TIMEOUT_S,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        check=False,
    )
    assert worker.returncode == 0, worker.stderr.decode()
    assert eval(worker.stdout.decode()) == _expected()


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    """A local one-CPU Ray cluster for this module's tests."""
    ray = pytest.importorskip("ray")
    # Everything this module defines travels by value, as a driver script's does.
    this_module = sys.modules[__name__]
    ray.cloudpickle.register_pickle_by_value(this_module)
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()
        ray.cloudpickle.unregister_pickle_by_value(this_module)


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda._is_compiled(), reason="needs a torch without CUDA")
def test_decorations_work_in_ray_tasks_and_actors(ray_cluster: Any) -> None:
    """A Ray task and a Ray actor built from driver-defined decorated code use device events."""
    ray = ray_cluster
    model_class, overlap = _shipped()

    @ray.remote
    def task() -> dict[str, Any]:
        return _worker_report(model_class, overlap)

    @ray.remote
    class Holder:
        def __init__(self) -> None:
            self.model = model_class()

        def report(self) -> dict[str, Any]:
            return {
                "event": type(self.model.event).__name__,
                "stream": overlap(),
                "active": len(patchscope.active()),
                "plain_event": _plain_event(),
            }

    assert ray.get(task.remote(), timeout=TIMEOUT_S) == _expected()
    holder = Holder.remote()  # type: ignore[attr-defined]
    assert ray.get(holder.report.remote(), timeout=TIMEOUT_S) == _expected()


# ---------------------------------------------------------------------------
# Processes a transfer_to_device() scope starts


def _scope_report() -> dict[str, Any]:
    """What torch.cuda answers in this process, and whether a scope is active here."""
    return {
        "pid": os.getpid(),
        "available": torch.cuda.is_available(),
        "count": torch.cuda.device_count(),
        "active": len(patchscope.active()) > 0,
    }


def _report_to(results: Any) -> None:
    results.put(_scope_report())


def _spawned_rank(rank: int, results: Any) -> None:
    """An mp.spawn rank: selects its device, as a CUDA rank does, then reports."""
    torch.cuda.set_device(rank)
    results.put({**_scope_report(), "rank": rank, "current": torch.cuda.current_device()})


def _reports(results: Any, count: int) -> list[dict[str, Any]]:
    try:
        return [results.get(timeout=TIMEOUT_S) for _ in range(count)]
    except queue.Empty:
        pytest.fail(f"children reported fewer than {count} results")


@pytest.mark.skipif(torch.cuda._is_compiled(), reason="needs a torch without CUDA")
def test_mp_spawn_children_run_inside_the_same_scope() -> None:
    """mp.spawn(nprocs=torch.cuda.device_count()) in the scope: every rank is in it too."""
    context = multiprocessing.get_context("spawn")
    results = context.SimpleQueue()
    with transfer_to_device(device_count=2):
        nprocs = torch.cuda.device_count()
        torch.multiprocessing.spawn(_spawned_rank, args=(results,), nprocs=nprocs, join=True)
    reports = sorted((results.get() for _ in range(nprocs)), key=lambda r: r["rank"])
    assert nprocs == 2
    for rank, report in enumerate(reports):
        assert report["pid"] != os.getpid()
        assert (report["available"], report["count"], report["active"]) == (True, 2, True)
        assert report["current"] == rank
    assert torch.cuda.is_available() is False and patchscope.active() == ()


@pytest.mark.skipif(torch.cuda._is_compiled(), reason="needs a torch without CUDA")
@pytest.mark.parametrize("method", ["spawn", "forkserver", "fork"])
def test_a_process_started_in_the_scope_runs_its_target_in_it(method: str) -> None:
    """multiprocessing's Process started in the scope, by any start method, runs in the scope.

    A forked child is a copy of the thread that started it, scope included;
    a spawned one is a fresh interpreter, given its target wrapped. The
    process object is left with no target of the scope's; one started
    outside runs outside.
    """
    context = multiprocessing.get_context(method)
    results = context.Queue()
    inside = context.Process(target=_report_to, args=(results,))
    with transfer_to_device(device_count=3):
        inside.start()
        # Whatever start() left in the process object, it is not the scope's wrapper.
        assert not isinstance(getattr(inside, "_target", None), _InScope)
        outside = context.Process(target=_report_to, args=(results,))
    outside.start()
    reports = {report["pid"]: report for report in _reports(results, 2)}
    for process in (inside, outside):
        process.join(TIMEOUT_S)
        assert process.exitcode == 0
    assert reports[inside.pid] | {"pid": 0} == {
        "pid": 0,
        "available": True,
        "count": 3,
        "active": True,
    }
    assert reports[outside.pid] | {"pid": 0} == {
        "pid": 0,
        "available": False,
        "count": 0,
        "active": False,
    }


def _pool_task(value: int) -> tuple[int, bool, int]:
    return value * 2, torch.cuda.is_available(), torch.cuda.device_count()


@pytest.mark.skipif(torch.cuda._is_compiled(), reason="needs a torch without CUDA")
def test_a_spawn_pool_made_in_the_scope_runs_its_tasks_in_it() -> None:
    """A Pool's workers are processes it starts: made in the scope, its tasks run in the scope."""
    with transfer_to_device(), multiprocessing.get_context("spawn").Pool(2) as pool:
        done = pool.map(_pool_task, [1, 2, 3])
    assert done == [(2, True, 1), (4, True, 1), (6, True, 1)]


@pytest.mark.skipif(torch.cuda._is_compiled(), reason="needs a torch without CUDA")
def test_a_process_that_fails_to_start_keeps_its_own_target() -> None:
    """A spawn whose arguments cannot be pickled raises as outside; the target is its own again."""
    process = multiprocessing.get_context("spawn").Process(target=_report_to, args=(lambda: 0,))
    with transfer_to_device(), pytest.raises((AttributeError, TypeError, ValueError)):
        process.start()
    assert process._target is _report_to  # type: ignore[attr-defined]
    assert patchscope.active() == ()
