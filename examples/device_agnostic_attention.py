"""Run an attention layer written for CUDA on whatever device this machine has.

The layer below is written the way inference engines write it: the module
and its indexer create ``torch.cuda.Event`` objects in ``__init__``, and
``forward`` overlaps two branches on an auxiliary stream with
``maybe_execute_in_parallel``. On a machine without CUDA, constructing it
fails with "Tried to instantiate dummy base class Event". Decorating a
subclass makes it build and run on the active device (CUDA: unchanged; CPU:
HostEvent/HostStream; XPU/MPS/NPU: their own events), with no edit to the
CUDA code and no effect on other threads.

    python examples/device_agnostic_attention.py
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from patchscope import active
from patchscope.torch import (
    active_device_type,
    device_event_class,
    device_events,
    device_namespace,
)


# --- CUDA-written code, unchanged -------------------------------------------------
def maybe_execute_in_parallel(
    fn0: Callable[[], Any],
    fn1: Callable[[], Any],
    event0: Any,
    event1: Any,
    aux_stream: Any = None,
) -> tuple[Any, Any]:
    """Run fn0 on the current stream and fn1 on aux_stream, overlapped; in order without one."""
    if aux_stream is None:
        return fn0(), fn1()
    event0.record()
    result0 = fn0()
    with torch.cuda.stream(aux_stream):
        event0.wait()
        result1 = fn1()
        event1.record()
    event1.wait()
    return result0, result1


class Indexer(nn.Module):
    """Scores each token for the sparse-attention branch."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.score = nn.Linear(dim, 1)
        self.weights_ready = torch.cuda.Event()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.score(x))


class Attention(nn.Module):
    """Multi-head self-attention whose indexer runs on an auxiliary stream."""

    def __init__(self, dim: int = 64, heads: int = 4, aux_stream: Any = None) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.indexer = Indexer(dim)
        self.aux_stream = aux_stream
        self.events = [torch.cuda.Event(), torch.cuda.Event()]

    def attend(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, dim = x.shape
        q, k, v = self.qkv(x).view(batch, tokens, 3, self.heads, -1).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        y = nn.functional.scaled_dot_product_attention(q, k, v)
        return self.out(y.transpose(1, 2).reshape(batch, tokens, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        attended, scores = maybe_execute_in_parallel(
            lambda: self.attend(x), lambda: self.indexer(x), *self.events, self.aux_stream
        )
        return attended * scores


# --- The only additions: decorated subclasses ----------------------------------------
@device_events()
class EventsOnlyAttention(Attention):
    """Enough for a model that only constructs events and runs without an aux stream."""


@device_namespace()
class PortableAttention(Attention):
    """Attention on the active device: torch.cuda's events and streams are the device's
    while it is constructed and while it runs forward."""

    forward = device_namespace()(Attention.forward)


def main() -> None:
    torch.manual_seed(0)
    device = active_device_type()
    x = torch.randn(2, 16, 64, device=device)
    print(f"active device: {device}")
    print(f"torch.cuda.Event stands for: {device_event_class().__qualname__}")

    try:
        Attention()
    except RuntimeError as exc:
        print(f"undecorated Attention(): RuntimeError: {exc}")
    else:
        print("undecorated Attention(): built (this machine has CUDA)")

    with device_namespace():
        aux = torch.cuda.Stream()  # also CUDA code: the caller owns the aux stream
    overlapped = PortableAttention(aux_stream=aux).to(device)
    sequential = EventsOnlyAttention().to(device)
    sequential.load_state_dict(overlapped.state_dict())
    print(
        f"PortableAttention events: {[type(e).__qualname__ for e in overlapped.events]}, "
        f"indexer event: {type(overlapped.indexer.weights_ready).__qualname__}, "
        f"aux stream: {type(aux).__qualname__}"
    )
    print(f"EventsOnlyAttention events: {[type(e).__qualname__ for e in sequential.events]}")

    with torch.no_grad():
        y = overlapped(x)
        reference = sequential(x)
    difference = (y - reference).abs().max().item()
    print(
        f"forward overlapped on the aux stream: output {tuple(y.shape)}, "
        f"max |difference| to the sequential forward: {difference:.1e}"
    )
    print(f"redirects active now: {len(active())}")


if __name__ == "__main__":
    main()
