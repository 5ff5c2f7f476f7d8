"""Oracle for the loss options of om-ops/src/losses/ added in issue 21 (PyTorch CPU, black box).

Builds seeded numpy inputs and runs torch.nn.functional.binary_cross_entropy and
binary_cross_entropy_with_logits with a rescaling `weight` (per column [4], per row [5, 1],
full [5, 4]; with logits also together with `pos_weight`), and kl_div with
reduction='batchmean' (log_target false and true, a [3, 5] and a [2, 3, 4] input, and a 0-d
one), writing inputs, outputs and the gradients of `sum(y * r)` (r seeded) of the input and
target to testdata/ops/loss_options.safetensors. A new file with its own seed: the data of
tools/oracle_losses.py is untouched.

Usage: /tmp/torch/bin/python tools/oracle_loss_options.py   (PyTorch 2.15.0, numpy, safetensors)
"""

import torch
import torch.nn.functional as F
from oracle_common import Oracle

O = Oracle("loss_options", seed=20261202, one_thread=True)
rng = O.rng
f32, leaf, grads, store = O.f32, O.leaf, O.grads, O.store
REDUCTIONS = ["none", "sum", "mean"]


def uniform(shape, lo, hi):
    return rng.uniform(lo, hi, shape)


def case(prefix, fn, x, t, **kw):
    """Stores x, t and, per reduction, y and the gradients of x and t."""
    store(prefix, x=x, t=t)
    for red in REDUCTIONS:
        y = fn(x, t, reduction=red, **kw)
        store(f"{prefix}_{red}", y=y)
        grads(f"{prefix}_{red}", y, [("x", x), ("t", t)])


# ----- binary_cross_entropy with a rescaling weight -----
for name, shape in [("col", (4,)), ("row", (5, 1)), ("full", (5, 4))]:
    w = f32(uniform(shape, 0.0, 2.0))
    store(f"bcew_{name}", w=w)
    case(f"bcew_{name}", F.binary_cross_entropy, leaf(uniform((5, 4), 0.02, 0.98)), leaf(uniform((5, 4), 0.0, 1.0)), weight=w)

# ----- binary_cross_entropy_with_logits with a rescaling weight, with and without pos_weight -----
for name, shape in [("col", (4,)), ("row", (5, 1))]:
    w = f32(uniform(shape, 0.0, 2.0))
    store(f"bcelw_{name}", w=w)
    case(f"bcelw_{name}", F.binary_cross_entropy_with_logits, leaf(uniform((5, 4), -6.0, 6.0)), leaf(uniform((5, 4), 0.0, 1.0)), weight=w)
w = f32(uniform((5, 1), 0.0, 2.0))
pw = f32(uniform((4,), 0.3, 3.0))
store("bcelwpw", w=w, pw=pw)
case("bcelwpw", F.binary_cross_entropy_with_logits, leaf(uniform((5, 4), -6.0, 6.0)), leaf(uniform((5, 4), 0.0, 1.0)), weight=w, pos_weight=pw)

# ----- kl_div with reduction='batchmean' -----
for name, shape, log_target in [("kl", (3, 5), False), ("kllog", (3, 5), True), ("kl3", (2, 3, 4), False)]:
    x = leaf(torch.log_softmax(f32(rng.standard_normal(shape)), -1))
    t = torch.softmax(f32(rng.standard_normal(shape)), -1)
    t = leaf(torch.log(t) if log_target else t)
    store(f"bm_{name}", x=x, t=t)
    y = F.kl_div(x, t, reduction="batchmean", log_target=log_target)
    store(f"bm_{name}", y=y)
    grads(f"bm_{name}", y, [("x", x), ("t", t)])
x, t = leaf(-0.7), leaf(0.4)
store("bm_0d", x=x, t=t)
y = F.kl_div(x, t, reduction="batchmean")
store("bm_0d", y=y)
grads("bm_0d", y, [("x", x), ("t", t)])

O.save(metadata={"torch": torch.__version__, "tool": "tools/oracle_loss_options.py"})
