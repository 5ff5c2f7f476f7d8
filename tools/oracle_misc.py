"""Oracle for linear, concat, softmax, log_softmax, cross_entropy and attention (PyTorch
CPU, black box).

Builds seeded numpy inputs, runs torch.nn.functional.linear, torch.cat, softmax,
log_softmax, cross_entropy (ignore_index, mean and sum) and
scaled_dot_product_attention (additive float mask, Tq != Tk, explicit scale); added later
(drawn after those): softmax/log_softmax along every axis, cross_entropy over [N, C, d1, d2]
with class weights, label smoothing and every reduction, weighted nll_loss and unbatched
cross_entropy; and writes
inputs, outputs and the gradients of `sum(y * r)` (r seeded) to
testdata/ops/misc.safetensors. The `#[cfg(test)]` modules of
om-ops/src/{linalg,probability,loss,transformer}.rs read it.

Usage: /tmp/torch/bin/python tools/oracle_misc.py   (PyTorch 2.15.0, numpy, safetensors)
"""

import numpy as np
import torch
import torch.nn.functional as F
from oracle_common import Oracle

O = Oracle("misc", seed=20261129)
rng, out = O.rng, O.out
f32, leaf, grads, store = O.f32, O.leaf, O.grads, O.store


# ----- linear: [2, 3, 5] x [4, 5]^T + [4] -----
x, w, b = leaf(rng.standard_normal((2, 3, 5))), leaf(rng.standard_normal((4, 5))), leaf(rng.standard_normal(4))
y = F.linear(x, w, b)
store("lin", x=x, w=w, b=b, y=y)
grads("lin", y, [("x", x), ("w", w), ("b", b)])

# ----- concat along axis 1 -----
a, c = leaf(rng.standard_normal((2, 3, 4))), leaf(rng.standard_normal((2, 1, 4)))
y = torch.cat([a, c], dim=1)
store("cat", a=a, c=c, y=y)
grads("cat", y, [("a", a), ("c", c)])

# ----- softmax / log_softmax over the last axis, with a wide row -----
x = leaf(rng.standard_normal((3, 4, 37)) * 3.0)
y = F.softmax(x, dim=-1)
store("sm", x=x, y=y)
grads("sm", y, [("x", x)])
x2 = leaf(rng.standard_normal((5, 300)) * 4.0)
y = F.log_softmax(x2, dim=-1)
store("lsm", x=x2, y=y)
grads("lsm", y, [("x", x2)])

# ----- cross_entropy with ignored rows, mean and sum -----
logits = leaf(rng.standard_normal((6, 7)) * 2.0)
targets = torch.tensor([3, 0, -100, 6, 2, -100], dtype=torch.int32)
out["ce_logits"] = logits.detach()
out["ce_targets"] = targets
for red in ["mean", "sum"]:
    y = F.cross_entropy(logits, targets.long(), ignore_index=-100, reduction=red)
    out[f"ce_{red}_y"] = y.detach().reshape(())
    grads(f"ce_{red}", y, [("logits", logits)])

# ----- attention: B=2, H=3, Tq=4, Tk=6, D=8, Dv=5, mask [4, 6] broadcast -----
q = leaf(rng.standard_normal((2, 3, 4, 8)))
k = leaf(rng.standard_normal((2, 3, 6, 8)))
v = leaf(rng.standard_normal((2, 3, 6, 5)))
mask = f32(rng.standard_normal((4, 6)))
mask[1, 2] = float("-inf")
scale = 0.3
y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
store("att", q=q, k=k, v=v, mask=mask, y=y)
grads("att", y, [("q", q), ("k", k), ("v", v)])
y = F.scaled_dot_product_attention(q, k, v, scale=1.0 / np.sqrt(8.0))
out["att_nomask_y"] = y.detach().contiguous()

# ----- added later: drawn after everything above, so the earlier tensors stay identical -----
# softmax / log_softmax along every axis of a rank-4 tensor, and a middle axis whose lines
# are 37 wide (full vectors and a tail)
x = leaf(rng.standard_normal((3, 5, 4, 2)) * 3.0)
out["smax_x"] = x.detach()
for name, f in [("sm", F.softmax), ("lsm", F.log_softmax)]:
    for axis in range(4):
        y = f(x, dim=axis)
        store(f"{name}_ax{axis}", y=y)
        grads(f"{name}_ax{axis}", y, [("x", x)])
xw = leaf(rng.standard_normal((2, 9, 37)) * 3.0)
out["smaxw_x"] = xw.detach()
for name, f in [("sm", F.softmax), ("lsm", F.log_softmax)]:
    y = f(xw, dim=1)
    store(f"{name}_wide", y=y)
    grads(f"{name}_wide", y, [("x", xw)])

# cross_entropy over [N, C, d1, d2] with class weights, label smoothing and ignored
# elements, every reduction; targets stored as int64 (PyTorch's ids; narrowed on load)
logits = leaf(rng.standard_normal((3, 5, 2, 4)) * 2.0)
t = rng.integers(0, 5, (3, 2, 4))
t[0, 0, 1] = t[2, 1, 3] = t[1, 0, 0] = -100
t = torch.tensor(t, dtype=torch.int64)
w = f32(rng.uniform(0.2, 2.0, 5))
out.update(ceo_logits=logits.detach(), ceo_t=t, ceo_w=w)
for red in ["none", "mean", "sum"]:
    for eps in [0.0, 0.2]:
        for wname, weight in [("", None), ("w", w)]:
            key = f"ceo_{red}_{int(eps * 10)}{wname}"
            y = F.cross_entropy(logits, t, weight=weight, reduction=red, label_smoothing=eps)
            out[key + "_y"] = y.detach()
            grads(key, y, [("logits", logits)])
# nll_loss with class weights on [N, C] log-probabilities, ignore_index 2
lp = leaf(torch.log_softmax(f32(rng.standard_normal((6, 4))), -1))
t = torch.tensor(rng.integers(0, 4, 6), dtype=torch.int64)
w = f32(rng.uniform(0.2, 2.0, 4))
out.update(nllw_lp=lp.detach(), nllw_t=t, nllw_w=w)
for red in ["none", "mean", "sum"]:
    y = F.nll_loss(lp, t, weight=w, ignore_index=2, reduction=red)
    out[f"nllw_{red}_y"] = y.detach()
    grads(f"nllw_{red}", y, [("lp", lp)])
# unbatched: [C] logits and a scalar target
logits = leaf(rng.standard_normal(5))
y = F.cross_entropy(logits, torch.tensor(3), label_smoothing=0.1)
out.update(ce1_logits=logits.detach(), ce1_t=torch.tensor(3, dtype=torch.int64), ce1_y=y.detach())
grads("ce1", y, [("logits", logits)])

O.save(metadata={"torch": torch.__version__, "tool": "tools/oracle_misc.py"})
