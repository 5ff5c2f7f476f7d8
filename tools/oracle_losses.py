"""Oracle for the losses of om-ops/src/losses/ (regression.rs, classification.rs) (PyTorch CPU, black box).

Builds seeded numpy inputs and runs torch.nn.functional.mse_loss, l1_loss,
smooth_l1_loss (beta), huber_loss (delta), binary_cross_entropy,
binary_cross_entropy_with_logits (with and without pos_weight) and kl_div (log_target
false and true), each with reduction none, sum and mean, and writes inputs, outputs and
the gradients of `sum(y * r)` (r seeded) to testdata/ops/losses.safetensors. Odd cases:
l1_loss at zero difference (gradient 0), binary_cross_entropy at inputs 0 and 1 (the log
clamped at -100, the input gradient divided by max(x(1-x), 1e-12)).

Usage: /tmp/torch/bin/python tools/oracle_losses.py   (PyTorch 2.15.0, numpy, safetensors)
"""

import torch
import torch.nn.functional as F
from oracle_common import Oracle

O = Oracle("losses", seed=20261201)
rng = O.rng
f32, leaf, grads, store = O.f32, O.leaf, O.grads, O.store
REDUCTIONS = ["none", "sum", "mean"]


def pair(prefix, fn, x, t, **kw):
    """Stores x, t and, per reduction, y and the gradients of x and t."""
    store(prefix, x=x, t=t)
    for red in REDUCTIONS:
        y = fn(x, t, reduction=red, **kw)
        store(f"{prefix}_{red}", y=y)
        grads(f"{prefix}_{red}", y, [("x", x), ("t", t)])


# ----- regression losses: [4, 6] input, target broadcast from [6] in the *_bc sets -----
# (PyTorch broadcasts them with a warning; om-ops refuses mismatched shapes, so its tests
# expand the [6] target to [4, 6] explicitly, which gives the same values and gradients.)
def uniform(shape, lo, hi):
    return rng.uniform(lo, hi, shape)


for name, fn, kw in [
    ("mse", F.mse_loss, {}),
    ("l1", F.l1_loss, {}),
    ("sl1", F.smooth_l1_loss, {"beta": 0.5}),
    ("sl1b0", F.smooth_l1_loss, {"beta": 0.0}),
    ("hub", F.huber_loss, {"delta": 0.7}),
]:
    x = uniform((4, 6), -2.0, 2.0)
    t = uniform((4, 6), -2.0, 2.0)
    if name == "l1":
        t[0, :3] = x[0, :3]  # zero differences: PyTorch's gradient there is 0 (sign(0))
    pair(name, fn, leaf(x), leaf(t), **kw)
    pair(name + "_bc", fn, leaf(uniform((4, 6), -2.0, 2.0)), leaf(uniform((6,), -2.0, 2.0)), **kw)

# ----- binary cross-entropy: probabilities in (0, 1), soft targets -----
pair("bce", F.binary_cross_entropy, leaf(uniform((5, 4), 0.02, 0.98)), leaf(uniform((5, 4), 0.0, 1.0)))
# Inputs exactly 0 and 1: the log is clamped at -100; only forward and the input gradient.
x = leaf([0.0, 1.0, 0.0, 1.0, 0.5])
t = f32([0.3, 0.6, 0.0, 1.0, 0.2])
store("bce_edge", x=x, t=t)
y = F.binary_cross_entropy(x, t, reduction="none")
store("bce_edge", y=y)
grads("bce_edge", y, [("x", x)])

# ----- binary cross-entropy with logits, with and without pos_weight (broadcast [C]) -----
pair("bcel", F.binary_cross_entropy_with_logits, leaf(uniform((5, 4), -20.0, 20.0)), leaf(uniform((5, 4), 0.0, 1.0)))
pw = f32(uniform((4,), 0.3, 3.0))
store("bcelpw", pw=pw)
pair("bcelpw", F.binary_cross_entropy_with_logits, leaf(uniform((5, 4), -6.0, 6.0)), leaf(uniform((5, 4), 0.0, 1.0)), pos_weight=pw)

# ----- kl_div: log-probabilities against probabilities (log_target False) or log-probabilities -----
xin = torch.log_softmax(f32(rng.standard_normal((3, 5))), -1)
tp = torch.softmax(f32(rng.standard_normal((3, 5))), -1)
pair("kl", F.kl_div, leaf(xin), leaf(tp))
xin = torch.log_softmax(f32(rng.standard_normal((3, 5))), -1)
tl = torch.log_softmax(f32(rng.standard_normal((3, 5))), -1)
pair("kllog", F.kl_div, leaf(xin), leaf(tl), log_target=True)
xin = torch.log_softmax(f32(rng.standard_normal((3, 5))), -1)
pair("kl_bc", F.kl_div, leaf(xin), leaf(torch.softmax(f32(rng.standard_normal(5)), -1)))

O.save()
