#!/usr/bin/env python3
"""Oracle for the selecting reductions (PyTorch CPU, float32, black box).

Writes testdata/ops/reductions.safetensors. For each case `<name>`: the input `<name>_x`,
int32 attributes `<name>_params` = [axis (or -99 for all), keep_dim], the forward values
`<name>_y` (and Int32 `<name>_i` for max/min with dim and argmax/argmin), a seeded weight
`<name>_r` and the gradient `<name>_gx` of `sum(y * r)`. Case names start with the op:
max_dim_*, min_dim_*, argmax_*, argmin_*, amax_*, amin_*, logsumexp_*,
var_*, std_*, sum_axes_*, mean_axes_* (var/std and *_axes params are laid out below). Inputs with `ties` hold exact
repeated extremes, `nan` hold NaNs (PyTorch's tie and NaN rules are pinned by these).
The `#[cfg(test)]` module of om-ops/src/reductions.rs reads it (fast and exact mode).

Usage: /tmp/torch/bin/python tools/oracle_reductions.py   (PyTorch 2.15.0, numpy, safetensors)
"""
import numpy as np
import torch
from oracle_common import Oracle

O = Oracle("reductions", seed=20261201, one_thread=True)
rng, out = O.rng, O.out
ALL = -99


def data(shape, kind):
    v = rng.standard_normal(shape).astype(np.float32)
    if kind == "ties":
        v = np.round(v * 1.5).astype(np.float32)  # few distinct values: many exact ties
    if kind == "nan":
        flat = v.reshape(-1)
        flat[rng.choice(flat.size, size=max(2, flat.size // 6), replace=False)] = np.nan
    return torch.tensor(v)


def record(name, x, params, y):
    """Stores the input, the int32 attributes and, for a float output `y` (not None), `y`,
    its weight r and the gradient."""
    out[f"{name}_x"] = x.clone()
    out[f"{name}_params"] = torch.tensor(params, dtype=torch.int32)
    if y is not None:
        out[f"{name}_y"] = y
        O.grads(name, y, [("x", x)])


def case(name, fn, shape, axis, keep, kind):
    x = data(shape, kind).requires_grad_(True)
    res = fn(x, axis, keep)
    if isinstance(res, tuple):
        y, i = res  # values and indices
    elif res.dtype == torch.int64:
        y, i = None, res  # argmax/argmin: indices only
    else:
        y, i = res, None
    if i is not None:
        out[f"{name}_i"] = i.to(torch.int32)
    record(name, x, [axis, int(keep)], y)


ops = {
    "max_dim": lambda x, a, k: tuple(torch.max(x, a, k)),
    "min_dim": lambda x, a, k: tuple(torch.min(x, a, k)),
    "argmax": lambda x, a, k: torch.argmax(x, None if a == ALL else a, k),
    "argmin": lambda x, a, k: torch.argmin(x, None if a == ALL else a, k),
    "amax": lambda x, a, k: torch.amax(x, () if a == ALL else a, k),
    "amin": lambda x, a, k: torch.amin(x, () if a == ALL else a, k),
}
for op, fn in ops.items():
    axes = [(1, False), (0, True), (-1, False)] + ([(ALL, False), (ALL, True)] if op not in ("max_dim", "min_dim") else [])
    for kind in ("plain", "ties", "nan"):
        for n, (axis, keep) in enumerate(axes):
            shape = (4, 7) if n % 2 == 0 else (3, 5, 6)
            case(f"{op}_{kind}_{n}", fn, shape, axis, keep, kind)

# logsumexp (`inf` inputs hold ±inf entries and a row of -inf) and var/std (params =
# [axis, keep_dim, unbiased]).
for n, (axis, keep, shape, scale) in enumerate([(1, False, (4, 7), 1.0), (0, True, (3, 5, 6), 1.0), (-1, False, (4, 7), 30.0), (ALL, False, (3, 4), 1.0), (ALL, True, (2, 3, 2), 1.0)]):
    x = (data(shape, "plain") * scale).requires_grad_(True)
    y = torch.logsumexp(x, tuple(range(x.dim())) if axis == ALL else axis, keep)
    record(f"logsumexp_plain_{n}", x, [axis, int(keep)], y)
xi = data((3, 4), "plain")
xi[0, 1] = float("inf")
xi[1, :] = float("-inf")
xi[2, 2] = float("-inf")
out["logsumexp_inf_x"] = xi
out["logsumexp_inf_y"] = torch.logsumexp(xi, 1)

for op, fn in (("var", torch.var), ("std", torch.std)):
    for n, (axis, keep, unbiased, shape) in enumerate(
        [(1, False, True, (4, 7)), (0, True, False, (3, 5, 6)), (-1, False, False, (4, 7)), (ALL, False, True, (3, 4)), (ALL, True, False, (2, 3, 2)), (1, False, False, (5, 1))]
    ):
        x = (data(shape, "plain") * 3.0 + 100.0).requires_grad_(True)
        y = fn(x, dim=None if axis == ALL else axis, correction=int(unbiased), keepdim=keep)
        record(f"{op}_plain_{n}", x, [axis, int(keep), int(unbiased)], y)

# sum/mean over several axes: params = [keep_dim, axes...].
for op, fn in (("sum_axes", torch.sum), ("mean_axes", torch.mean)):
    for n, (axes, keep, shape) in enumerate([((0, 2), False, (3, 4, 5)), ((-1, -2), True, (2, 3, 4, 5)), ((1,), False, (4, 6)), ((2, 0, 3), False, (2, 3, 4, 5))]):
        x = data(shape, "plain").requires_grad_(True)
        record(f"{op}_{n}", x, [int(keep), *axes], fn(x, dim=axes, keepdim=keep))

# vector norms (added after everything above, so the earlier tensors stay identical):
# params = [ord (-1 for inf), keep_dim, axes... or -99 for all]; ties and an all-zero row
# in the inf and 2 cases.
for n, (ord_, axes, keep, shape) in enumerate(
    [(1, None, False, (3, 4)), (1, (0, 2), True, (2, 3, 4)), (1, (-1,), False, (4, 5)),
     (2, None, False, (3, 4)), (2, (1,), True, (3, 5)), (2, (0, 2), False, (2, 3, 4)),
     (-1, None, False, (3, 4)), (-1, (1,), False, (4, 5)), (-1, (0, 2), True, (2, 3, 4))]
):
    v = data(shape, "ties" if ord_ == -1 else "plain")
    if ord_ == 2 and axes == (1,):
        v[0] = 0.0  # a zero vector: gradient 0
    x = v.requires_grad_(True)
    o = float("inf") if ord_ == -1 else float(ord_)
    y = torch.linalg.vector_norm(x, o, dim=axes, keepdim=keep)
    record(f"vector_norm_{n}", x, [ord_, int(keep), *(axes if axes else (-99,))], y)

O.save()
