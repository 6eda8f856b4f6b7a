"""torch's functions are reached through every name bound to them, imports made first included.

The names below are imported at the top of this module, before any scope
starts, as scripts import them: rebinding ``torch.cuda``'s attributes would
not reach them; the scope redirects the functions' calls.
"""

from __future__ import annotations

import threading
import types
from typing import Any

import pytest
from _threads import JOIN, in_other_thread

torch = pytest.importorskip("torch")

from torch.cuda import (  # noqa: E402
    current_device,
    current_stream,
    device_count,
    get_device_name,
    is_available,
    manual_seed,
    memory_allocated,
    set_device,
    synchronize,
)

import patchscope  # noqa: E402
from patchscope.torch import HostStream, device_namespace, transfer_to_device  # noqa: E402
from patchscope.torch._reach import called_as, reaching_every_name  # noqa: E402

needs_no_cuda = pytest.mark.skipif(
    torch.cuda._is_compiled(), reason="needs a torch on which CUDA calls fail"
)
# Every torch.cuda function imported above.
IMPORTED = tuple(
    value
    for value in list(globals().values())
    if isinstance(value, types.FunctionType) and value.__module__.startswith("torch.cuda")
)


def _codes() -> list[types.CodeType]:
    return [function.__code__ for function in IMPORTED]


@needs_no_cuda
def test_names_imported_before_the_scope_answer_for_the_host() -> None:
    """from torch.cuda import ... made first: the scope's answers inside, torch's after."""
    codes = _codes()
    assert is_available() is False
    with transfer_to_device(device_count=2):
        assert is_available() is True
        assert device_count() == 2
        set_device(1)
        assert current_device() == 1
        assert isinstance(current_stream(), HostStream)
        synchronize()
        manual_seed(3)
        assert torch.initial_seed() == 3
        assert memory_allocated() == 0
        assert get_device_name() == torch.cuda.get_device_name()
    assert is_available() is False and device_count() == 0
    assert [code is before for code, before in zip(_codes(), codes, strict=True)] == [True] * len(
        codes
    )
    assert patchscope.active() == ()


@needs_no_cuda
def test_device_namespace_reaches_the_stream_functions_imported_first() -> None:
    """device_namespace() alone: synchronize and current_stream imported first are the host's."""
    with device_namespace():
        assert isinstance(current_stream(), HostStream)
        synchronize()
        assert is_available() is False  # the runtime queries are transfer_to_device()'s
    with pytest.raises((AssertionError, RuntimeError)):
        synchronize()


@transfer_to_device()
def _main() -> str:
    """A decorated main() of a script whose imports ran first."""
    assert is_available(), "needs a CUDA device"
    return get_device_name(current_device())


@needs_no_cuda
def test_a_decorated_main_reaches_the_names_its_script_imported() -> None:
    """@transfer_to_device() on main(): its first assert is_available() holds."""
    name = _main()
    assert isinstance(name, str) and name
    assert is_available() is False
    assert patchscope.active() == ()


@needs_no_cuda
def test_other_threads_call_torchs_own_functions_meanwhile() -> None:
    """While this thread holds the scope, another calling the same names gets torch's answers."""
    with transfer_to_device():
        assert is_available() is True
        assert in_other_thread(lambda: (is_available(), device_count())) == (False, 0)
        with pytest.raises((AssertionError, RuntimeError)):
            in_other_thread(synchronize)
        assert is_available() is True


@needs_no_cuda
def test_torch_compile_of_code_calling_imported_names_gives_eagers_results() -> None:
    """Compiled code calling redirected functions through names bound first: eager's results."""

    def step(x: torch.Tensor) -> torch.Tensor:
        synchronize()
        y = x * device_count() + float(is_available())
        current_stream().synchronize()
        return y + current_device()

    x = torch.arange(4.0)
    # Dynamo builds its table of torch functions it handles itself (it knows
    # torch.cuda.synchronize by identity) at its first trace: here, outside.
    torch._dynamo.reset()
    assert torch.equal(torch.compile(torch.add, backend="eager")(x, 1), x + 1)
    with transfer_to_device(device_count=3):
        expected = step(x)
        compiled = torch.compile(step, backend="eager")
        assert torch.equal(compiled(x), expected)
        assert torch.equal(compiled(x + 1), step(x + 1))
    assert expected.tolist() == [1.0, 4.0, 7.0, 10.0]


def test_a_function_shared_by_two_names_is_redirected_once() -> None:
    """torch.cuda re-exports torch.cuda.memory's functions: one call redirect serves both names."""
    assert torch.cuda.memory_allocated is torch.cuda.memory.memory_allocated
    seen: set[int] = set()
    first = reaching_every_name(
        torch.cuda, "memory_allocated", lambda device=None: 7, "context", seen
    )
    again = reaching_every_name(
        torch.cuda.memory, "memory_allocated", lambda device=None: 8, "context", seen
    )
    assert len(first) == 1 and again == []
    # A function standing in for itself is left alone (a call redirect would recurse).
    assert reaching_every_name(torch.cuda, "init", torch.cuda.init, "context", set()) == []
    with first[0]:
        assert torch.cuda.memory.memory_allocated() == 7 == memory_allocated()


def test_what_is_not_a_python_function_is_rebound_by_name() -> None:
    """A class or a builtin cannot be redirected by call: its name is rebound."""

    class Owner:
        builtin = len

    redirects = reaching_every_name(Owner, "builtin", lambda value: 0, "context", set())
    with redirects[0]:
        assert Owner.builtin([1, 2]) == 0
    assert Owner.builtin is len


def _documented(device: Any = None, *, abbreviated: bool = False) -> tuple[Any, bool]:
    return device, abbreviated


def test_a_replacement_taking_fewer_parameters_gets_those_it_has() -> None:
    """A call redirect passes every parameter; a stand-in of an older signature gets its own."""
    taken: list[tuple[Any, ...]] = []

    def older(device: Any = None) -> str:
        taken.append((device,))
        return "older"

    def same(device: Any = None, *, abbreviated: bool = False) -> str:
        return "same"

    assert called_as(_documented, same) is same  # takes what is passed: unchanged
    adapted = called_as(_documented, older)
    assert adapted is not older and adapted.__name__ == "older"
    with patchscope.redirect_call(_documented, adapted):
        assert _documented("cuda:1", abbreviated=True) == "older"
        assert _documented() == "older"
    assert taken == [("cuda:1",), (None,)]
    assert _documented(2) == (2, False)


def _two(a: Any, b: Any = None) -> str:
    return "torch's"


def _open(a: Any, **options: Any) -> str:
    return "torch's"


def test_a_replacement_of_another_signature_gets_its_parameters_by_name() -> None:
    """Keyword-only in the stand-in, a name it lacks, **kwargs it does not take: by name."""

    def keyword_only(a: Any, *, b: Any = None) -> tuple[Any, ...]:
        return ("keyword-only", a, b)

    def second_only(b: Any = None) -> tuple[Any, ...]:
        return ("second only", b)

    def first_only(a: Any) -> tuple[Any, ...]:
        return ("first only", a)

    with patchscope.redirect_call(_two, called_as(_two, keyword_only)):
        assert _two(1, b=2) == ("keyword-only", 1, 2)
        assert _two(1, 2) == ("keyword-only", 1, 2)
    with patchscope.redirect_call(_two, called_as(_two, second_only)):
        assert _two("X", b="Y") == ("second only", "Y")
    with patchscope.redirect_call(_open, called_as(_open, first_only)):
        assert _open(1, extra=2) == ("first only", 1)  # what it does not take is dropped
    assert _two(1) == _open(1) == "torch's"



_OOM = "_cuda_attach_out_of_memory_observer"


@needs_no_cuda
def test_a_scope_first_built_inside_another_reaches_torchs_own_functions() -> None:
    """Built while an outer scope has names rebound: it redirects torch's, not the stand-ins.

    A count no other test uses makes this the first activation of its
    redirect, inside the outer scope; afterwards it must work alone.
    """
    with transfer_to_device(), transfer_to_device(device_count=17):
        assert isinstance(current_stream(), HostStream) and device_count() == 17
    assert not hasattr(torch._C, _OOM)
    for _ in range(2):
        with transfer_to_device(device_count=17):
            assert isinstance(torch.cuda.current_stream(), HostStream)
            assert isinstance(current_stream(), HostStream)
            assert hasattr(torch._C, _OOM) and device_count() == 17
    assert not hasattr(torch._C, _OOM)
    assert patchscope.active() == ()


@needs_no_cuda
def test_a_scope_first_built_while_another_thread_holds_one_for_the_process() -> None:
    """Another thread's scope="process" scope has the names rebound while this one is built."""
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with transfer_to_device(scope="process", device_count=19):
            holding.set()
            release.wait(JOIN)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(JOIN)
        with transfer_to_device(device_count=23):
            assert isinstance(current_stream(), HostStream) and device_count() == 23
    finally:
        release.set()
        holder.join(JOIN)
    assert not holder.is_alive()
    with transfer_to_device(device_count=23):
        assert isinstance(current_stream(), HostStream) and device_count() == 23
        assert hasattr(torch._C, _OOM)  # created by this scope, not the holder's
    assert patchscope.active() == ()


def test_a_stand_in_wrapping_a_backend_function_takes_what_that_function_takes() -> None:
    """A device-mapping wrapper (functools.wraps) of an older backend signature is adapted."""
    from patchscope.torch._runtime import _taking_mapped_device

    def backend_memory_summary(device: Any = None) -> tuple[str, Any]:
        return "backend", device

    stand_in = _taking_mapped_device(backend_memory_summary, "xpu")
    with patchscope.redirect_call(_documented, called_as(_documented, stand_in)):
        assert _documented("cuda:1", abbreviated=True) == ("backend", torch.device("xpu", 1))
