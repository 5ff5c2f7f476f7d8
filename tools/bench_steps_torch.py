"""The three benchmark training steps of shared/BENCHMARKS.md in PyTorch (CPU, float32).

Prints one line in the format of `om bench step`:
    MODEL threads=T mode=torch median_ms=X min_ms=Y params=N loss0=L loss_after=L2

(`loss0`: the first step's loss; `loss_after`: the loss after `--check-steps` SGD steps,
lr 0.05, taken after the timed steps, to show the step trains.)

A step is: clear the parameter gradients (set to None), forward, loss, backward.

`--compile`: the forward and loss compiled with `torch.compile` (inductor, default mode;
the backward is the compiled graph's, through AOTAutograd), printed as `mode=compiled` with
`compile_ms=C`: the wall time of the first step (tracing, compilation of forward and
backward, and the step itself). The warm-up steps come after it, so compilation never enters
the step median.

    /tmp/torch/bin/python tools/bench_steps_torch.py --model convnet --threads 1 [--compile]
"""

import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Convnet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(32)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(64)
        self.conv3 = nn.Conv2d(64, 128, 3, padding=1)
        self.fc = nn.Linear(128, 10)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        h = F.max_pool2d(F.relu(self.bn2(self.conv2(h))), 2)
        h = F.adaptive_avg_pool2d(F.relu(self.conv3(h)), 1).flatten(1)
        return self.fc(h)


class EncoderLayer(nn.Module):
    def __init__(self, e=256, heads=4, ff=1024):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(e, e) for _ in range(4))
        self.norm1 = nn.LayerNorm(e)
        self.ff1 = nn.Linear(e, ff)
        self.ff2 = nn.Linear(ff, e)
        self.norm2 = nn.LayerNorm(e)

    def forward(self, x, mask):
        b, t, e = x.shape
        d = e // self.heads

        def split(y):
            return y.reshape(b, t, self.heads, d).permute(0, 2, 1, 3)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        a = a.permute(0, 2, 1, 3).reshape(b, t, e)
        x = self.norm1(x + self.o(a))
        return self.norm2(x + self.ff2(F.gelu(self.ff1(x))))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(1000, 256)
        self.layers = nn.ModuleList([EncoderLayer(), EncoderLayer()])
        self.head = nn.Linear(256, 10)

    def forward(self, ids, mask):
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x, mask)
        return self.head(x.mean(1))


class CrnnCtc(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.rnn = nn.LSTM(64 * 8, 128, num_layers=2, bidirectional=True)
        self.fc = nn.Linear(256, 37)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv1(x)), 2)
        h = F.max_pool2d(F.relu(self.conv2(h)), 2)
        frames = h.permute(3, 0, 1, 2).reshape(32, x.shape[0], -1)
        y, _ = self.rnn(frames)
        return F.log_softmax(self.fc(y), dim=-1)


def make_step(model_name, gen):
    if model_name == "convnet":
        net = Convnet()
        x = torch.randn(32, 3, 32, 32, generator=gen)
        y = torch.randint(0, 10, (32,), generator=gen)
        return net, lambda: F.cross_entropy(net(x), y)
    if model_name == "encoder":
        net = Encoder()
        ids = torch.randint(0, 1000, (16, 64), generator=gen)
        mask = torch.zeros(64, 64)
        y = torch.randint(0, 10, (16,), generator=gen)
        return net, lambda: F.cross_entropy(net(ids, mask), y)
    if model_name == "crnn_ctc":
        net = CrnnCtc()
        x = torch.randn(8, 1, 32, 128, generator=gen)
        target_lengths = torch.randint(5, 12, (8,), generator=gen)
        targets = torch.randint(1, 37, (int(target_lengths.sum()),), generator=gen)
        input_lengths = torch.full((8,), 32, dtype=torch.long)
        return net, lambda: F.ctc_loss(net(x), targets, input_lengths, target_lengths, blank=0, reduction="mean")
    raise SystemExit(f"unknown model {model_name}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, choices=["convnet", "encoder", "crnn_ctc"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--check-steps", type=int, default=3, help="SGD steps for loss_after (0: skip)")
    ap.add_argument("--compile", action="store_true", help="torch.compile the forward and loss (inductor, default mode)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    net, loss_fn = make_step(args.model, gen)
    net.train()
    n_params = sum(p.numel() for p in net.parameters())
    if args.compile:
        loss_fn = torch.compile(loss_fn)

    def step():
        net.zero_grad(set_to_none=True)
        loss = loss_fn()
        loss.backward()
        return loss

    start = time.perf_counter()
    loss0 = step().item()
    first_ms = (time.perf_counter() - start) * 1e3
    for _ in range(args.warmup):
        step()
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        step()
        times.append((time.perf_counter() - start) * 1e3)
    times.sort()
    loss_after = float("nan")
    if args.check_steps > 0:
        opt = torch.optim.SGD(net.parameters(), lr=0.05)
        for _ in range(args.check_steps):
            step()
            opt.step()
        loss_after = step().item()  # with gradients, so a compiled step is not recompiled
    mode, extra = ("compiled", f" compile_ms={first_ms:.0f}") if args.compile else ("torch", "")
    print(
        f"{args.model} threads={args.threads} mode={mode} median_ms={times[len(times) // 2]:.2f} min_ms={times[0]:.2f}"
        f"{extra} params={n_params} loss0={loss0:.4f} loss_after={loss_after:.4f}"
    )


if __name__ == "__main__":
    main()
