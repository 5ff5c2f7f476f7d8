"""PyTorch side of `om bench lstm|attention`: the same forward + backward, timed the same way.

usage: python tools/bench_layers_torch.py lstm|attention --threads T [--reps R]
prints `BENCH threads=T mode=torch median_ms=X min_ms=Y`.

- lstm: x [32, 8, 512] through torch.nn.LSTM(512, 128, num_layers=2, bidirectional=True),
  backward from a fixed gradient of y (crnn_ctc's recurrent stack).
- attention: q, k, v [16, 4, 64, 64] split from [16, 64, 256] projections by view and
  permute, explicit softmax(q kᵀ / 8 + mask) v with an additive [64, 64] zero mask (the
  math PyTorch's MultiheadAttention runs on CPU for training), heads joined, backward from
  a fixed gradient. `--sdpa` uses F.scaled_dot_product_attention instead.
"""

import argparse
import time

import torch
import torch.nn.functional as F


def lstm_step():
    t, b, i, h = 32, 8, 512, 128
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(i, h, num_layers=2, bidirectional=True)
    x = torch.rand(t, b, i).mul(2).sub(1).requires_grad_()
    gy = torch.rand(t, b, 2 * h).mul(2).sub(1)

    def step():
        x.grad = None
        lstm.zero_grad(set_to_none=True)
        y, _ = lstm(x)
        y.backward(gy)

    return step


def attention_step(sdpa):
    b, t, e, heads = 16, 64, 256, 4
    d = e // heads
    torch.manual_seed(0)
    projections = [torch.rand(b, t, e).mul(2).sub(1).requires_grad_() for _ in range(3)]
    mask = torch.zeros(t, t)
    gy = torch.rand(b, t, e).mul(2).sub(1)

    def split(p):
        return p.view(b, t, heads, d).permute(0, 2, 1, 3)

    def step():
        for p in projections:
            p.grad = None
        q, k, v = (split(p) for p in projections)
        if sdpa:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1.0 / d**0.5)
        else:
            y = torch.softmax(q @ k.transpose(-2, -1) * (1.0 / d**0.5) + mask, dim=-1) @ v
        y = y.permute(0, 2, 1, 3).reshape(b, t, e)
        y.backward(gy)

    return step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["lstm", "attention"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--sdpa", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    step = lstm_step() if a.what == "lstm" else attention_step(a.sdpa)
    for _ in range(3):
        step()
    ms = []
    for _ in range(a.reps):
        start = time.perf_counter()
        step()
        ms.append((time.perf_counter() - start) * 1e3)
    ms.sort()
    print(f"{a.what} threads={a.threads} mode=torch median_ms={ms[len(ms) // 2]:.3f} min_ms={ms[0]:.3f}")


if __name__ == "__main__":
    main()
