"""Oracle for `tril`/`triu` (om-ops/src/triangular.rs; PyTorch CPU, black box).

Runs torch.tril and torch.triu on seeded inputs: a square matrix on the main diagonal, a
batch of wide matrices above it, a tall matrix and a wide one below it, a diagonal past the
matrix, and a matrix of special values (NaN, infinities, signed zeros) whose dropped elements
must become +0.0; writes inputs, outputs and the gradients of `sum(y * r)` (r seeded) to
testdata/ops/triangular.safetensors (no gradient for the special values).

Usage: /tmp/torch/bin/python tools/oracle_triangular.py   (PyTorch 2.15.0, numpy, safetensors)
"""

import math

import torch
from oracle_common import Oracle

O = Oracle("triangular", seed=20261202)

for name, shape, k in [
    ("square", (4, 4), 0),
    ("batch_above", (2, 3, 5), 2),
    ("tall_below", (5, 3), -1),
    ("wide_below", (3, 6), -3),
    ("past", (3, 4), 9),
]:
    x = O.leaf(O.rng.standard_normal(shape))
    O.store(name, x=x)
    for op, f in [("tril", torch.tril), ("triu", torch.triu)]:
        y = f(x, k)
        O.store(f"{name}_{op}", y=y)
        O.grads(f"{name}_{op}", y, [("x", x)])

special = [math.nan, -math.inf, math.inf, -0.0, 0.0, 1.5, -math.nan, 2.0, -0.0]
x = O.f32(special).reshape(3, 3)
O.store("special", x=x)
for op, f in [("tril", torch.tril), ("triu", torch.triu)]:
    O.store(f"special_{op}", y=f(x, 0))

O.save({"torch": torch.__version__, "script": "tools/oracle_triangular.py"})
