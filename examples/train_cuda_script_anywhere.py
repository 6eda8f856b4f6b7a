"""Train with a CUDA-written script, in nanoGPT's style, on whatever this machine has.

``train`` is written for CUDA and left as it is: ``device = 'cuda'``,
``torch.cuda.is_bf16_supported()`` to choose the dtype, autocast, batches
moved with ``pin_memory().to(device, non_blocking=True)``, a ``GradScaler``,
``torch.cuda.Event`` timing and ``torch.cuda.max_memory_allocated()``. One
``with transfer_to_device():`` runs it on the active device; on a CPU-only
machine the script first shows how it fails without it.

    python examples/train_cuda_script_anywhere.py
"""

from __future__ import annotations

from contextlib import nullcontext

import torch
from torch import nn
from torch.nn import functional as F

import patchscope
from patchscope.torch import active_device_type, transfer_to_device

block_size, batch_size, vocab_size, n_embd = 16, 8, 64, 32


class TinyLM(nn.Module):
    """A one-block causal language model, small enough to train in a second."""

    def __init__(self) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab_size, n_embd)
        self.pos = nn.Embedding(block_size, n_embd)
        self.attn = nn.MultiheadAttention(n_embd, 4, batch_first=True)
        self.mlp = nn.Sequential(
            nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd)
        )
        self.head = nn.Linear(n_embd, vocab_size)

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        t = idx.size(1)
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool, device=idx.device), diagonal=1)
        x = x + self.attn(x, x, x, attn_mask=mask, need_weights=False)[0]
        x = x + self.mlp(x)
        logits = self.head(x)
        return logits, F.cross_entropy(logits.view(-1, vocab_size), targets.view(-1))


def train(steps: int = 30) -> tuple[float, float]:
    """The CUDA-written loop, unmodified; return the first and the last loss."""
    device = "cuda"
    dtype = (
        "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"
    )
    ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[
        dtype
    ]
    torch.manual_seed(1337)
    torch.cuda.manual_seed(1337)
    device_type = "cuda" if "cuda" in device else "cpu"
    ctx = (
        nullcontext()
        if device_type == "cpu"
        else torch.amp.autocast(device_type=device_type, dtype=ptdtype)
    )
    data = torch.randint(vocab_size, (4096,))
    data[1::2] = (data[::2] + 1) % vocab_size  # something to learn

    def get_batch() -> tuple[torch.Tensor, torch.Tensor]:
        ix = torch.randint(len(data) - block_size - 1, (batch_size,))
        x = torch.stack([data[i : i + block_size] for i in ix])
        y = torch.stack([data[i + 1 : i + 1 + block_size] for i in ix])
        return x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(
            device, non_blocking=True
        )

    model = TinyLM().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    scaler = torch.amp.GradScaler("cuda", enabled=(dtype == "float16"))
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    losses = []
    for it in range(steps):
        X, Y = get_batch()
        start.record()
        with ctx:
            _, loss = model(X, Y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        end.record()
        torch.cuda.synchronize()
        losses.append(loss.item())
        if it % 10 == 0:
            print(f"iter {it}: loss {losses[-1]:.4f}, time {start.elapsed_time(end):.2f}ms")
    print(f"dtype {dtype}, peak memory {torch.cuda.max_memory_allocated() / 2**20:.1f} MiB")
    return losses[0], losses[-1]


def main() -> None:
    print(f"active device: {active_device_type()}")
    if not torch.cuda.is_available():
        try:
            train(steps=1)
        except (AssertionError, RuntimeError) as exc:
            print(f"without transfer_to_device(): {type(exc).__name__}: {exc}")
    with transfer_to_device() as device:
        # None on CUDA, where transfer_to_device() installs nothing.
        print(f"running on: {'cuda, unchanged' if device is None else device}")
        first, last = train()
    print(f"loss {first:.3f} -> {last:.3f}")
    print(f"redirects active now: {len(patchscope.active())}")


if __name__ == "__main__":
    main()
