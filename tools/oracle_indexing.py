"""Oracle for the indexing operators of om-ops/src/indexing.rs (PyTorch CPU, black box).

Runs torch.gather (index smaller than the input in the other dimensions, repeated
positions, a rank-3 case along the last dimension), torch.index_select (repeated rows,
columns), Tensor.masked_fill (a broadcast Int32 mask) and (added later, drawn after those)
Python slices with negative, clamped, empty and open bounds (om-ops/src/views.rs) on seeded
inputs, and writes
inputs, outputs and the gradients of `sum(y * r)` (r seeded) to
testdata/ops/indexing.safetensors.

Usage: /tmp/torch/bin/python tools/oracle_indexing.py   (PyTorch 2.15.0, numpy, safetensors)
"""

import torch
from oracle_common import Oracle

O = Oracle("indexing", seed=20261202)
rng, leaf, grads, store = O.rng, O.leaf, O.grads, O.store


def positions(shape, high):
    return torch.tensor(rng.integers(0, high, shape), dtype=torch.int32)


for name, xshape, dim, ishape in [
    ("gather_dim1", (3, 5), 1, (2, 7)),
    ("gather_dim0", (4, 3), 0, (6, 2)),
    ("gather_rank3", (2, 3, 4), -1, (2, 2, 5)),
]:
    x = leaf(rng.standard_normal(xshape))
    i = positions(ishape, xshape[dim])
    y = torch.gather(x, dim, i.long())
    store(name, x=x, index=i, y=y)
    grads(name, y, [("x", x)])

for name, xshape, dim, n in [("index_select_dim0", (4, 3), 0, 6), ("index_select_dim1", (2, 5, 3), 1, 7)]:
    x = leaf(rng.standard_normal(xshape))
    i = positions((n,), xshape[dim])
    y = torch.index_select(x, dim, i.long())
    store(name, x=x, index=i, y=y)
    grads(name, y, [("x", x)])

x = leaf(rng.standard_normal((3, 4, 5)))
mask = torch.tensor(rng.integers(0, 2, (4, 1)), dtype=torch.int32)
y = x.masked_fill(mask.bool(), -1.5)
store("masked_fill", x=x, mask=mask, y=y)
grads("masked_fill", y, [("x", x)])

# ----- added later: drawn after everything above, so the earlier tensors stay identical -----
# slice with Python bounds: negative, past the end, empty, steps
x = leaf(rng.standard_normal((4, 7)))
store("slice", x=x)
for name, axis, start, end, step in [
    ("neg", 1, -5, -1, 2),
    ("clamped", 0, -10, 100, 1),
    ("empty", 1, 5, 2, 1),
    ("open_end", 1, 2, None, 3),
]:
    sl = slice(start, end, step)
    y = x[:, sl] if axis == 1 else x[sl]
    store(f"slice_{name}", y=y.clone())
    if y.numel() > 0:
        grads(f"slice_{name}", y, [("x", x)])

O.save({"torch": torch.__version__, "script": "tools/oracle_indexing.py"})
