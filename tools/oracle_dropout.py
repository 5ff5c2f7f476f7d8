"""Oracle for dropout (PyTorch CPU, black box): what can be compared although PyTorch's mask
is not ours (it draws from its own generator, ours from `om_core::rng::uniform_at`).

For each p of `PS` (float32 values, as our `p: f32` receives them) it runs
F.dropout(x, p, training=True) on seeded float32 inputs (with ±inf, so that a dropped
infinity shows PyTorch's `x * 0 = NaN`, and negative values, so that a dropped one shows
`-0`) and saves p (`dropK_p`, K the index in `PS`), the output `dropK_y` and the gradient
`dropK_gx` of `sum(y * r)` (r seeded, never zero, so the gradient is non-zero exactly where
PyTorch kept the element), and PyTorch's factor itself (`dropK_scale`, the kept value of
dropout on ones). PyTorch's factor is `1 / f32(1 - p)` in float32 (`noise.div_(1 - p)`);
0.8 and 0.1756556 are p where that is one ulp away from `f32(1 / (1 - p))` (13% of all
float32 p are). The Rust test (`om-ops/src/random.rs`) compares, at the positions where
both masks keep or both drop, every output and gradient bit. Also the documented
identities: `training=False` and `p = 0` return `x`, `p = 1` returns `x * 0` (gradient
`r * 0`).

Usage: /tmp/torch/bin/python tools/oracle_dropout.py   (PyTorch 2.15.0, numpy, safetensors)
"""

import torch
import torch.nn.functional as F
import numpy as np
from oracle_common import Oracle

O = Oracle("dropout", seed=20261202, one_thread=True)
rng, out = O.rng, O.out

N = 4000
x = O.normal((N,))
x[7], x[100], x[2001] = float("inf"), float("-inf"), float("inf")
out["x"] = x
# The weighting of the gradient: magnitudes in [0.5, 1.5) with random signs, never zero.
r = O.f32(rng.uniform(0.5, 1.5, N) * rng.choice([-1.0, 1.0], N))
out["r"] = r

torch.manual_seed(20261202)
PS = [float(np.float32(v)) for v in (0.2, 0.3, 0.5, 0.8, 0.17565561830997467)]
for k, p in enumerate(PS):
    tag = f"drop{k}"
    out[f"{tag}_p"] = O.f32(p).reshape(())
    leaf = x.clone().requires_grad_(True)
    y = F.dropout(leaf, p, training=True)
    (gx,) = torch.autograd.grad((y * r).sum(), [leaf])
    out[f"{tag}_y"] = y.detach()
    out[f"{tag}_gx"] = gx
    out[f"{tag}_scale"] = F.dropout(torch.ones(64), p, training=True).max().reshape(())

# The identities: evaluation, p = 0 and p = 1 (all in training but the first).
for tag, p, training in (("eval", 0.5, False), ("p0", 0.0, True), ("p1", 1.0, True)):
    leaf = x.clone().requires_grad_(True)
    y = F.dropout(leaf, p, training=training)
    (gx,) = torch.autograd.grad((y * r).sum(), [leaf])
    out[f"{tag}_y"] = y.detach()
    out[f"{tag}_gx"] = gx

O.save({"torch": torch.__version__, "tool": "tools/oracle_dropout.py"})
