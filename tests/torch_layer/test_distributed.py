"""A decorated model in a 2-process torch.distributed job: spawn pickling and no leaked patches."""

import multiprocessing
import queue
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

import patchscope  # noqa: E402
from patchscope.torch import device_event_class, device_events  # noqa: E402

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


@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not built")
def test_decorated_model_in_spawned_gloo_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spawned ranks build the decorated model with device events, all-reduce, leak nothing."""
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    store = str(tmp_path / "store")
    # The parent holds a redirect while it spawns: a leak would show up in the ranks.
    with device_events():
        ranks = [
            context.Process(target=_rank_main, args=(rank, store, TinyModel, results))
            for rank in range(WORLD_SIZE)
        ]
        for process in ranks:
            process.start()
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
    assert [process.exitcode for process in ranks] == [0, 0]
    for report in sorted(reports, key=lambda report: report["rank"]):
        assert report["same_class"]
        assert report["event"] == device_event_class().__name__
        assert report["sum"] == 3.0
        assert report["active"] == (0, 0)
        assert report["plain_event"] == _plain_event()
