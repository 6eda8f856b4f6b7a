"""HostEvent and HostStream: torch.cuda's event and stream API on the CPU."""

import threading
import time

import pytest

torch = pytest.importorskip("torch")

from patchscope.torch import HostEvent, HostStream, _host  # noqa: E402

TIMING_MESSAGE = "Both events must be created with argument 'enable_timing=True'."
RECORD_MESSAGE = "Both events must be recorded before calculating elapsed time."


def _busy(seconds: float) -> None:
    """Spin the CPU for ``seconds`` (work, not a sleep: host events time work)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((), {}),
        ((True,), {}),
        ((True, True, True, True), {}),
        ((), {"enable_timing": True, "blocking": True, "interprocess": True, "external": True}),
    ],
)
def test_takes_cuda_event_constructor(args: tuple[bool, ...], kwargs: dict[str, bool]) -> None:
    """HostEvent accepts every form of torch.cuda.Event's constructor."""
    event = HostEvent(*args, **kwargs)
    assert event.query()


def test_rejects_arguments_cuda_does_not_take() -> None:
    """A keyword torch.cuda.Event does not know is a TypeError, as there."""
    with pytest.raises(TypeError):
        HostEvent(enable_timing=True, device="cpu")  # type: ignore[call-arg]


def test_elapsed_time_measures_work_between_records() -> None:
    """elapsed_time() is the milliseconds of the work done between the two records."""
    start, end = HostEvent(enable_timing=True), HostEvent(enable_timing=True)
    before = time.perf_counter()
    start.record()
    _busy(0.02)
    end.record()
    outer_ms = (time.perf_counter() - before) * 1e3
    elapsed = start.elapsed_time(end)
    assert isinstance(elapsed, float)
    assert 20.0 <= elapsed <= outer_ms


def test_elapsed_time_uses_the_latest_record() -> None:
    """Recording again moves the event, as re-recording a CUDA event does."""
    start, end = HostEvent(enable_timing=True), HostEvent(enable_timing=True)
    start.record()
    _busy(0.02)
    start.record()
    end.record()
    assert start.elapsed_time(end) < 20.0


def test_elapsed_time_is_negative_when_end_came_first() -> None:
    """Events recorded in the opposite order give a negative time rather than an error."""
    first, second = HostEvent(enable_timing=True), HostEvent(enable_timing=True)
    first.record()
    _busy(0.001)
    second.record()
    assert second.elapsed_time(first) < 0


@pytest.mark.parametrize(
    ("start_timing", "end_timing", "start_recorded", "end_recorded", "message"),
    [
        (False, True, True, True, TIMING_MESSAGE),
        (True, False, True, True, TIMING_MESSAGE),
        # Timing is checked before recording, as torch.cuda.Event does.
        (False, False, False, False, TIMING_MESSAGE),
        (True, True, False, True, RECORD_MESSAGE),
        (True, True, True, False, RECORD_MESSAGE),
        (True, True, False, False, RECORD_MESSAGE),
    ],
)
def test_elapsed_time_errors_match_cuda(
    start_timing: bool, end_timing: bool, start_recorded: bool, end_recorded: bool, message: str
) -> None:
    """elapsed_time() raises torch.cuda.Event's ValueError messages, in the same order."""
    start, end = HostEvent(enable_timing=start_timing), HostEvent(enable_timing=end_timing)
    if start_recorded:
        start.record()
    if end_recorded:
        end.record()
    with pytest.raises(ValueError) as info:
        start.elapsed_time(end)
    assert str(info.value) == message


def test_elapsed_time_needs_a_host_event() -> None:
    """Timing against something that is not a HostEvent is a TypeError naming its type."""
    start = HostEvent(enable_timing=True)
    start.record()
    with pytest.raises(TypeError, match="'float'"):
        start.elapsed_time(1.0)  # type: ignore[arg-type]


def test_query_wait_synchronize_before_record() -> None:
    """An event never recorded is complete and waits for nothing, as on CUDA."""
    event = HostEvent()
    assert event.query() is True
    event.wait()
    event.synchronize()


def _cuda_stream() -> torch.Stream:
    """A device-generic stream of CUDA, built without a GPU."""
    return torch.Stream(stream_id=0, device_index=0, device_type=1)


def test_record_and_wait_take_a_host_stream() -> None:
    """record() and wait() accept host and generic CPU streams, and reject another device's."""
    event = HostEvent()
    for stream in (HostStream(), torch.Stream("cpu"), None):
        event.record(stream)
        event.wait(stream)
    with pytest.raises(TypeError, match=r"torch.Stream of the CPU or None.*cuda"):
        event.record(_cuda_stream())
    with pytest.raises(TypeError, match=r"HostStream, a torch\.Stream of the CPU or None"):
        event.wait(object())  # type: ignore[arg-type]


def test_ipc_handle_says_host_events_stay_in_process() -> None:
    """interprocess=True constructs, but ipc_handle() explains that host events cannot be shared."""
    event = HostEvent(interprocess=True)
    event.record()
    with pytest.raises(RuntimeError, match="host events cannot be shared between processes"):
        event.ipc_handle()


def test_repr_shows_timing_and_state() -> None:
    """repr names the class, whether it times, and whether it was recorded."""
    event = HostEvent(enable_timing=True)
    assert repr(event) == "<patchscope.torch.HostEvent enable_timing=True not recorded>"
    event.record()
    assert repr(event) == "<patchscope.torch.HostEvent enable_timing=True recorded>"


def test_events_recorded_in_threads_time_the_host() -> None:
    """Events recorded by different threads share one clock, so they time across threads."""
    start, end = HostEvent(enable_timing=True), HostEvent(enable_timing=True)
    start.record()
    worker = threading.Thread(target=lambda: (_busy(0.01), end.record()))
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive()
    assert start.elapsed_time(end) >= 10.0


def test_stream_api() -> None:
    """HostStream has torch.cuda.Stream's methods; all its work is already done."""
    stream, other = HostStream(priority=-1), HostStream(device="cuda:1")
    assert stream.priority == -1
    assert stream.query() is True and stream.is_capturing() is False
    stream.synchronize()
    stream.wait_stream(other)
    event = stream.record_event()
    assert isinstance(event, HostEvent)
    assert "recorded" in repr(event) and "not recorded" not in repr(event)
    timed = HostEvent(enable_timing=True)
    assert stream.record_event(timed) is timed
    stream.wait_event(timed)
    assert f"HostStream stream_id={stream.stream_id} priority=-1" in repr(stream)


def test_streams_are_torch_streams_of_the_cpu() -> None:
    """Each HostStream is a torch.Stream with an id of its own; the default one is torch's."""
    first, second = HostStream(), HostStream()
    assert isinstance(first, torch.Stream)
    assert first.stream_id != second.stream_id and first != second
    assert first == first and hash(first) == hash(first)
    assert len({first, second, _host.default_stream()}) == 3
    assert _host.default_stream() == torch.Stream("cpu")
    assert hash(_host.default_stream()) == hash(torch.Stream("cpu"))


def test_generic_cpu_streams_and_events_are_accepted() -> None:
    """Half-migrated code mixes torch.Stream/torch.Event of the CPU with host ones."""
    host = HostStream()
    host.wait_stream(torch.Stream("cpu"))
    host.wait_event(torch.Event("cpu"))
    generic_event = torch.Event("cpu")
    assert host.record_event(generic_event) is generic_event
    with pytest.raises(TypeError, match=r"HostStream\.wait_stream"):
        host.wait_stream(_cuda_stream())
    with pytest.raises(TypeError, match=r"HostEvent or a torch\.Event of the CPU"):
        host.wait_event(object())


def test_with_stream_makes_it_current_and_nests() -> None:
    """``with stream:`` is torch.Stream's context manager: current inside, restored after."""
    outer, inner = HostStream(), HostStream()
    default = _host.current_stream()
    with outer as entered:
        assert entered is outer and _host.current_stream() is outer
        with inner:
            assert _host.current_stream() is inner
            with outer:
                assert _host.current_stream() is outer
            assert _host.current_stream() is inner
        assert _host.current_stream() is outer
    assert _host.current_stream() is default


def test_set_stream_and_capture_query() -> None:
    """set_stream() changes this thread's current stream; nothing is ever being captured."""
    aux = HostStream()
    default = _host.current_stream()
    try:
        _host.set_stream(aux)
        assert _host.current_stream() is aux
        _host.set_stream(None)
        assert _host.current_stream() is aux
        generic = torch.Stream("cpu")
        _host.set_stream(generic)
        assert _host.current_stream() is generic
    finally:
        _host.set_stream(default)
    assert _host.is_current_stream_capturing() is False
    with pytest.raises(TypeError, match=r"torch\.cuda\.set_stream"):
        _host.set_stream(_cuda_stream())


def test_stream_context_sets_the_current_stream_per_thread() -> None:
    """stream_context() makes a stream current in this thread only, then restores the last one."""
    aux, inner = HostStream(), HostStream()
    default = _host.default_stream()
    seen_in_thread: list[HostStream] = []
    assert _host.current_stream() is default
    with _host.stream_context(aux):
        assert _host.current_stream() is aux
        worker = threading.Thread(target=lambda: seen_in_thread.append(_host.current_stream()))
        worker.start()
        worker.join(timeout=10)
        with _host.stream_context(inner):
            assert _host.current_stream() is inner
        assert _host.current_stream() is aux
        with _host.stream_context(None):
            assert _host.current_stream() is aux
    assert _host.current_stream() is default
    assert seen_in_thread == [default]


def test_stream_context_restores_after_an_error() -> None:
    """An exception inside the block still restores the previous stream."""
    with pytest.raises(KeyError):
        with _host.stream_context(HostStream()):
            raise KeyError("boom")
    assert _host.current_stream() is _host.default_stream()


def test_stream_context_rejects_other_streams() -> None:
    """torch.cuda.stream's stand-in takes host and generic CPU streams only."""
    with pytest.raises(TypeError, match=r"torch.cuda.StreamContext"):
        _host.stream_context(_cuda_stream())
    context = _host.HostStreamContext(torch.Stream("cpu"))
    with context:
        assert _host.current_stream() is context.stream
    with _host.HostStreamContext(None):
        assert _host.current_stream() is _host.default_stream()
