"""`om bench sweep` in PyTorch (CPU, float32): cost as the work grows.

- mlp: one training step of Linear(W, W) -> ReLU -> Linear(W, 10), cross-entropy on a seeded
  batch [B, W], SGD (lr 0.01) or Adam (lr 0.001): zero the gradients (set to None), forward,
  loss, backward, optimizer step; GFLOP/s counts the matrix products, 4*B*W^2 + 6*B*W*10.
- chain: 64 element-wise operators on a [N] leaf cycling x*1.01, +0.01, tanh, *x, then sum
  and backward; us_per_op = step time / 64.

Prints the lines of `om bench sweep` with mode=torch; each median is over --reps timed runs
of about 20 ms each (several steps per run when a step is short), after warm-up steps.

    /tmp/torch/bin/python tools/bench_sweep_torch.py --threads 1 [--optim adam] [--case mlp]
"""

import argparse
import time

import torch
import torch.nn.functional as F

CLASSES = 10
CHAIN_OPS = 64


def timed(step, warmup, reps):
    for _ in range(warmup):
        step()
    start = time.perf_counter()
    step()
    once = max(time.perf_counter() - start, 1e-7)
    inner = min(max(int(0.02 / once), 1), 10_000)
    ms = []
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(inner):
            step()
        ms.append((time.perf_counter() - start) * 1e3 / inner)
    ms.sort()
    return ms[len(ms) // 2], ms[0]


def mlp_step(batch, width, optim):
    gen = torch.Generator().manual_seed(0)
    fc1 = torch.nn.Linear(width, width)
    fc2 = torch.nn.Linear(width, CLASSES)
    x = torch.randn(batch, width, generator=gen)
    y = torch.tensor([(i * 7 + 3) % CLASSES for i in range(batch)])
    params = list(fc1.parameters()) + list(fc2.parameters())
    opt = torch.optim.SGD(params, lr=0.01) if optim == "sgd" else torch.optim.Adam(params, lr=0.001)

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(fc2(F.relu(fc1(x))), y).backward()
        opt.step()

    return step


def chain_step(length):
    x = (torch.rand(length, generator=torch.Generator().manual_seed(0)) * 2 - 1).requires_grad_()

    def step():
        x.grad = None
        y = x
        for i in range(CHAIN_OPS):
            k = i % 4
            if k == 0:
                y = y * 1.01
            elif k == 1:
                y = y + 0.01
            elif k == 2:
                y = torch.tanh(y)
            else:
                y = y * x
        y.sum().backward()

    return step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", choices=["all", "mlp", "chain"], default="all")
    ap.add_argument("--sizes", default="1x32,16x128,64x512,256x1024,1024x2048")
    ap.add_argument("--optim", choices=["sgd", "adam"], default="sgd")
    ap.add_argument("--chain-len", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    tag = f"threads={a.threads} mode=torch"
    if a.case != "chain":
        for size in a.sizes.split(","):
            batch, width = (int(v) for v in size.split("x"))
            med, low = timed(mlp_step(batch, width, a.optim), a.warmup, a.reps)
            flops = 4 * batch * width * width + 6 * batch * width * CLASSES
            print(
                f"mlp batch={batch} width={width} optim={a.optim} {tag} median_ms={med:.4f} min_ms={low:.4f} "
                f"gflops={flops / (med * 1e6):.1f}",
                flush=True,
            )
    if a.case != "mlp":
        med, low = timed(chain_step(a.chain_len), a.warmup, a.reps)
        print(
            f"chain ops={CHAIN_OPS} len={a.chain_len} {tag} median_ms={med:.4f} min_ms={low:.4f} "
            f"us_per_op={med * 1e3 / CHAIN_OPS:.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
