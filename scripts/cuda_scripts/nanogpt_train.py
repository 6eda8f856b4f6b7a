"""Training in the shape of nanoGPT's ``train.py``: module-level code written for one GPU.

The config as globals (``device = 'cuda'``, the dtype chosen by
``torch.cuda.is_bf16_supported()``), ``torch.backends.cuda.matmul.allow_tf32``,
autocast on ``device_type``, ``torch.cuda.amp.GradScaler`` enabled for
float16, batches moved with ``pin_memory().to(device, non_blocking=True)``,
``torch.cuda.manual_seed`` and a checkpoint saved and loaded back with
``map_location=device``. Written for CUDA and not changed, except a small
model and ``compile = False`` (nanoGPT's own switch where there is no Triton).
"""

import math
import os
import tempfile
import time
from contextlib import nullcontext

import torch
import torch.nn as nn
from torch.nn import functional as F

# -----------------------------------------------------------------------------
batch_size = 8
block_size = 32
n_layer, n_head, n_embd, vocab_size = 2, 4, 64, 65
learning_rate = 1e-3
max_iters = 40
eval_interval = 20
device = 'cuda'
dtype = 'bfloat16' if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else 'float16'
compile = False
# -----------------------------------------------------------------------------

torch.manual_seed(1337)
torch.cuda.manual_seed(1337)
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
device_type = 'cuda' if 'cuda' in device else 'cpu'
ptdtype = {'float32': torch.float32, 'bfloat16': torch.bfloat16, 'float16': torch.float16}[dtype]
ctx = (nullcontext() if device_type == 'cpu'
       else torch.amp.autocast(device_type=device_type, dtype=ptdtype))

data = torch.randint(vocab_size, (20000,), dtype=torch.int64)
data[1::2] = (data[::2] * 7 + 3) % vocab_size  # something to learn


def get_batch():
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([data[i:i + block_size] for i in ix])
    y = torch.stack([data[i + 1:i + 1 + block_size] for i in ix])
    if device_type == 'cuda':
        x = x.pin_memory().to(device, non_blocking=True)
        y = y.pin_memory().to(device, non_blocking=True)
    else:
        x, y = x.to(device), y.to(device)
    return x, y


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(
            nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd)
        )

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(self.ln_1(x)).split(n_embd, dim=2)
        q, k, v = (t.view(B, T, n_head, C // n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.h = nn.ModuleList(Block() for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)

    def forward(self, idx, targets):
        pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


model = GPT()
model.to(device)
scaler = torch.cuda.amp.GradScaler(enabled=(dtype == 'float16'))
optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, fused=device_type == 'cuda')
if compile:
    model = torch.compile(model)

X, Y = get_batch()
t0 = time.time()
losses = []
for iter_num in range(max_iters):
    with ctx:
        logits, loss = model(X, Y)
    X, Y = get_batch()
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    losses.append(loss.item())
    if iter_num % eval_interval == 0:
        t1 = time.time()
        print(f"iter {iter_num}: loss {losses[-1]:.4f}, time {(t1 - t0) * 1000:.2f}ms")
        t0 = t1

with tempfile.TemporaryDirectory() as out_dir:
    path = os.path.join(out_dir, 'ckpt.pt')
    torch.save({'model': model.state_dict(), 'optimizer': optimizer.state_dict()}, path)
    checkpoint = torch.load(path, map_location=device)
    model.load_state_dict(checkpoint['model'])

assert math.isfinite(losses[-1]) and losses[-1] < losses[0], losses
print(f"dtype {dtype} loss {losses[0]:.3f} -> {losses[-1]:.3f}, "
      f"peak memory {torch.cuda.max_memory_allocated() / 2**20:.1f} MiB")
