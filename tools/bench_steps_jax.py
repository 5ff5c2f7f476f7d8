"""The three benchmark training steps of shared/BENCHMARKS.md in JAX (CPU, float32).

The same models, shapes, batch and loss as tools/bench_steps_torch.py and `om bench step`,
written functionally: the timed step is `jax.jit(jax.value_and_grad(loss))` on the
parameters, waited for with `block_until_ready`. A BENCHMARKS.md step has no optimizer
update (clear the gradients, forward, loss, backward), so the timed step has none either;
`--sgd` adds a plain SGD update inside the jitted step (`p - lr * g`) for a training-loop
figure. Weights are drawn like PyTorch's defaults (uniform ±1/sqrt(fan_in)), not the same
values as ours or PyTorch's: the models match in shape, parameter count and FLOPs.

- LSTM: `lax.scan` over time, gates i, f, g, o as in PyTorch, two layers, the backward
  direction scanned with `reverse=True`.
- CTC: `optax.ctc_loss` on the `Linear` outputs (it takes the log-softmax itself), each
  sequence's loss divided by its target length and averaged over the batch (PyTorch's
  `reduction="mean"`).
- Batch norm: training mode (batch statistics, biased variance, eps 1e-5); the running
  statistics are not tracked (they do not enter the loss or the gradients).

Prints one line in the format of `om bench step`:
    MODEL threads=T mode=jax median_ms=X min_ms=Y compile_ms=C params=N loss0=L loss_after=L2
(`loss_after`: the loss after `--check-steps` SGD steps from the same start, lr 0.05, to show
the step trains; the timed steps do not update the weights unless `--sgd`.)

Thread count: XLA's CPU client has no per-process thread setting that holds for every
operation, so run it pinned to T cores (`taskset -c 0-(T-1)`, as tools/compare_steps.sh
does); `--threads 1` also sets `--xla_cpu_multi_thread_eigen=false
intra_op_parallelism_threads=1` in XLA_FLAGS before JAX loads, `--threads T` sets
`--xla_cpu_multi_thread_eigen=true intra_op_parallelism_threads=T`.

    taskset -c 0 /tmp/torch/bin/python tools/bench_steps_jax.py --model convnet --threads 1
"""

import argparse
import math
import os
import sys
import time


def set_xla_threads(threads):
    flags = os.environ.get("XLA_FLAGS", "")
    if threads == 1:
        flags += " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    else:
        flags += f" --xla_cpu_multi_thread_eigen=true intra_op_parallelism_threads={threads}"
    os.environ["XLA_FLAGS"] = flags.strip()


def build(model_name, jax, jnp, lax):
    """Returns (params, loss(params)) for one benchmark model with its fixed batch."""
    key = [jax.random.PRNGKey(0)]

    def next_key():
        key[0], k = jax.random.split(key[0])
        return k

    def uniform(shape, fan_in):
        bound = 1.0 / math.sqrt(fan_in)
        return jax.random.uniform(next_key(), shape, jnp.float32, -bound, bound)

    def linear_p(fin, fout):
        return {"w": uniform((fout, fin), fin), "b": uniform((fout,), fin)}

    def conv_p(cin, cout):
        return {"w": uniform((cout, cin, 3, 3), cin * 9), "b": uniform((cout,), cin * 9)}

    def linear(p, x):
        return x @ p["w"].T + p["b"]

    def conv(p, x):
        y = lax.conv_general_dilated(x, p["w"], (1, 1), ((1, 1), (1, 1)), dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return y + p["b"][None, :, None, None]

    def max_pool_2x2(x):
        return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

    def batch_norm(p, x):
        mean = x.mean((0, 2, 3), keepdims=True)
        var = ((x - mean) ** 2).mean((0, 2, 3), keepdims=True)
        y = (x - mean) * lax.rsqrt(var + 1e-5)
        return y * p["g"][None, :, None, None] + p["b"][None, :, None, None]

    def layer_norm(p, x):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) * lax.rsqrt(var + 1e-5) * p["g"] + p["b"]

    def cross_entropy(logits, y):
        logp = jax.nn.log_softmax(logits, -1)
        return -jnp.take_along_axis(logp, y[:, None], 1).mean()

    if model_name == "convnet":
        params = {
            "conv1": conv_p(3, 32),
            "bn1": {"g": jnp.ones(32), "b": jnp.zeros(32)},
            "conv2": conv_p(32, 64),
            "bn2": {"g": jnp.ones(64), "b": jnp.zeros(64)},
            "conv3": conv_p(64, 128),
            "fc": linear_p(128, 10),
        }
        x = jax.random.normal(next_key(), (32, 3, 32, 32), jnp.float32)
        y = jax.random.randint(next_key(), (32,), 0, 10)

        def loss(p):
            h = max_pool_2x2(jax.nn.relu(batch_norm(p["bn1"], conv(p["conv1"], x))))
            h = max_pool_2x2(jax.nn.relu(batch_norm(p["bn2"], conv(p["conv2"], h))))
            h = jax.nn.relu(conv(p["conv3"], h)).mean((2, 3))
            return cross_entropy(linear(p["fc"], h), y)

        return params, loss

    if model_name == "encoder":
        b, t, e, heads, ff = 16, 64, 256, 4, 1024
        d = e // heads

        def layer_p():
            return {
                "q": linear_p(e, e), "k": linear_p(e, e), "v": linear_p(e, e), "o": linear_p(e, e),
                "norm1": {"g": jnp.ones(e), "b": jnp.zeros(e)},
                "ff1": linear_p(e, ff), "ff2": linear_p(ff, e),
                "norm2": {"g": jnp.ones(e), "b": jnp.zeros(e)},
            }

        params = {
            "embed": jax.random.normal(next_key(), (1000, e), jnp.float32),
            "layers": [layer_p(), layer_p()],
            "head": linear_p(e, 10),
        }
        ids = jax.random.randint(next_key(), (b, t), 0, 1000)
        mask = jnp.zeros((t, t), jnp.float32)
        y = jax.random.randint(next_key(), (b,), 0, 10)

        def split(z):
            return z.reshape(b, t, heads, d).transpose(0, 2, 1, 3)

        def layer(p, x):
            q, k, v = split(linear(p["q"], x)), split(linear(p["k"], x)), split(linear(p["v"], x))
            s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + mask
            a = (jax.nn.softmax(s, -1) @ v).transpose(0, 2, 1, 3).reshape(b, t, e)
            x = layer_norm(p["norm1"], x + linear(p["o"], a))
            return layer_norm(p["norm2"], x + linear(p["ff2"], jax.nn.gelu(linear(p["ff1"], x), approximate=False)))

        def loss(p):
            x = p["embed"][ids]
            for lp in p["layers"]:
                x = layer(lp, x)
            return cross_entropy(linear(p["head"], x.mean(1)), y)

        return params, loss

    if model_name == "crnn_ctc":
        import optax

        hidden, batch, frames, classes = 128, 8, 32, 37

        def lstm_dir_p(fin):
            return {
                "w_ih": uniform((4 * hidden, fin), hidden), "w_hh": uniform((4 * hidden, hidden), hidden),
                "b_ih": uniform((4 * hidden,), hidden), "b_hh": uniform((4 * hidden,), hidden),
            }

        params = {
            "conv1": conv_p(1, 32),
            "conv2": conv_p(32, 64),
            "rnn": [[lstm_dir_p(64 * 8), lstm_dir_p(64 * 8)], [lstm_dir_p(2 * hidden), lstm_dir_p(2 * hidden)]],
            "fc": linear_p(2 * hidden, classes),
        }
        x = jax.random.normal(next_key(), (batch, 1, 32, 128), jnp.float32)
        lengths = jax.random.randint(next_key(), (batch,), 5, 12)
        max_len = 11
        labels = jax.random.randint(next_key(), (batch, max_len), 1, classes)
        label_paddings = (jnp.arange(max_len)[None, :] >= lengths[:, None]).astype(jnp.float32)
        logit_paddings = jnp.zeros((batch, frames), jnp.float32)

        def lstm_dir(p, xs, reverse):
            # the input projection of every step at once, the recurrence in a scan
            xw = xs @ p["w_ih"].T + p["b_ih"] + p["b_hh"]

            def cell(carry, xw_t):
                h, c = carry
                gates = xw_t + h @ p["w_hh"].T
                i, f, g, o = jnp.split(gates, 4, -1)
                c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
                h = jax.nn.sigmoid(o) * jnp.tanh(c)
                return (h, c), h

            zeros = jnp.zeros((xs.shape[1], hidden), jnp.float32)
            _, hs = lax.scan(cell, (zeros, zeros), xw, reverse=reverse)
            return hs

        def loss(p):
            h = max_pool_2x2(jax.nn.relu(conv(p["conv1"], x)))
            h = max_pool_2x2(jax.nn.relu(conv(p["conv2"], h)))
            seq = h.transpose(3, 0, 1, 2).reshape(frames, batch, -1)
            for fwd, bwd in p["rnn"]:
                seq = jnp.concatenate([lstm_dir(fwd, seq, False), lstm_dir(bwd, seq, True)], -1)
            logits = linear(p["fc"], seq).transpose(1, 0, 2)  # [B, T, K]
            per_seq = optax.ctc_loss(logits, logit_paddings, labels, label_paddings, blank_id=0)
            return (per_seq / lengths).mean()

        return params, loss

    raise SystemExit(f"unknown model {model_name}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, choices=["convnet", "encoder", "crnn_ctc"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--sgd", action="store_true", help="include an SGD update (lr 0.05) in the timed step")
    ap.add_argument("--check-steps", type=int, default=3, help="SGD steps for loss_after (0: skip)")
    args = ap.parse_args()
    set_xla_threads(args.threads)
    try:
        import jax
        import jax.numpy as jnp
        from jax import lax
    except ImportError:
        print("note: jax is not installed (pip install -r tools/requirements.txt); no JAX column", file=sys.stderr)
        sys.exit(3)
    jax.config.update("jax_platforms", "cpu")

    params, loss = build(args.model, jax, jnp, lax)
    n_params = sum(int(leaf.size) for leaf in jax.tree_util.tree_leaves(params))
    value_and_grad = jax.value_and_grad(loss)
    lr = 0.05

    @jax.jit
    def grad_step(p):
        return value_and_grad(p)

    @jax.jit
    def sgd_step(p):
        value, g = value_and_grad(p)
        return value, jax.tree_util.tree_map(lambda w, dw: w - lr * dw, p, g)

    start = time.perf_counter()
    loss0, _ = jax.block_until_ready(grad_step(params))
    compile_ms = (time.perf_counter() - start) * 1e3

    loss_after = float("nan")
    if args.check_steps > 0:
        p = params
        for _ in range(args.check_steps):
            _, p = sgd_step(p)
        loss_after = float(jax.block_until_ready(loss(p)))

    if args.sgd:
        state = [params]

        def step():
            _, state[0] = jax.block_until_ready(sgd_step(state[0]))

        step()  # compile outside the warm-up count (already done if check_steps > 0)
    else:

        def step():
            jax.block_until_ready(grad_step(params))

    for _ in range(args.warmup):
        step()
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    print(
        f"{args.model} threads={args.threads} mode=jax median_ms={times[len(times) // 2]:.2f} min_ms={times[0]:.2f} "
        f"compile_ms={compile_ms:.0f} params={n_params} loss0={float(loss0):.4f} loss_after={loss_after:.4f}"
    )


if __name__ == "__main__":
    main()
