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
import os

import numpy as np
import torch
from safetensors.torch import save_file

torch.set_num_threads(1)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata", "ops", "reductions.safetensors")
rng = np.random.default_rng(20261201)
out = {}
ALL = -99


def data(shape, kind):
    v = rng.standard_normal(shape).astype(np.float32)
    if kind == "ties":
        v = np.round(v * 1.5).astype(np.float32)  # few distinct values: many exact ties
    if kind == "nan":
        flat = v.reshape(-1)
        flat[rng.choice(flat.size, size=max(2, flat.size // 6), replace=False)] = np.nan
    return torch.tensor(v)


def case(name, fn, shape, axis, keep, kind):
    x = data(shape, kind).requires_grad_(True)
    out[f"{name}_x"] = x.detach().clone()
    out[f"{name}_params"] = torch.tensor([axis, int(keep)], dtype=torch.int32)
    res = fn(x, axis, keep)
    if isinstance(res, tuple):
        y, i = res
        out[f"{name}_i"] = i.to(torch.int32).contiguous()
    else:
        y = res
    if y.dtype == torch.int64:
        out[f"{name}_i"] = y.to(torch.int32).contiguous()
        return
    r = torch.tensor(rng.standard_normal(tuple(y.shape)).astype(np.float32))
    out[f"{name}_r"] = r
    out[f"{name}_y"] = y.detach().contiguous()
    (g,) = torch.autograd.grad((y * r).sum(), [x])
    out[f"{name}_gx"] = g.detach().contiguous()


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
smooth = {
    "logsumexp": lambda x, a, k: torch.logsumexp(x, tuple(range(x.dim())) if a == ALL else a, k),
}
for n, (axis, keep, shape, scale) in enumerate([(1, False, (4, 7), 1.0), (0, True, (3, 5, 6), 1.0), (-1, False, (4, 7), 30.0), (ALL, False, (3, 4), 1.0), (ALL, True, (2, 3, 2), 1.0)]):
    x = (data(shape, "plain") * scale).requires_grad_(True)
    out[f"logsumexp_plain_{n}_x"] = x.detach().clone()
    out[f"logsumexp_plain_{n}_params"] = torch.tensor([axis, int(keep)], dtype=torch.int32)
    y = smooth["logsumexp"](x, axis, keep)
    r = torch.tensor(rng.standard_normal(tuple(y.shape)).astype(np.float32))
    out[f"logsumexp_plain_{n}_r"] = r
    out[f"logsumexp_plain_{n}_y"] = y.detach().contiguous()
    out[f"logsumexp_plain_{n}_gx"] = torch.autograd.grad((y * r).sum(), [x])[0].contiguous()
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
        name = f"{op}_plain_{n}"
        x = (data(shape, "plain") * 3.0 + 100.0).requires_grad_(True)
        out[f"{name}_x"] = x.detach().clone()
        out[f"{name}_params"] = torch.tensor([axis, int(keep), int(unbiased)], dtype=torch.int32)
        y = fn(x, dim=None if axis == ALL else axis, correction=int(unbiased), keepdim=keep)
        r = torch.tensor(rng.standard_normal(tuple(y.shape)).astype(np.float32))
        out[f"{name}_r"] = r
        out[f"{name}_y"] = y.detach().contiguous()
        out[f"{name}_gx"] = torch.autograd.grad((y * r).sum(), [x])[0].contiguous()

# sum/mean over several axes: params = [keep_dim, axes...].
for op, fn in (("sum_axes", torch.sum), ("mean_axes", torch.mean)):
    for n, (axes, keep, shape) in enumerate([((0, 2), False, (3, 4, 5)), ((-1, -2), True, (2, 3, 4, 5)), ((1,), False, (4, 6)), ((2, 0, 3), False, (2, 3, 4, 5))]):
        name = f"{op}_{n}"
        x = data(shape, "plain").requires_grad_(True)
        out[f"{name}_x"] = x.detach().clone()
        out[f"{name}_params"] = torch.tensor([int(keep), *axes], dtype=torch.int32)
        y = fn(x, dim=axes, keepdim=keep)
        r = torch.tensor(rng.standard_normal(tuple(y.shape)).astype(np.float32))
        out[f"{name}_r"] = r
        out[f"{name}_y"] = y.detach().contiguous()
        out[f"{name}_gx"] = torch.autograd.grad((y * r).sum(), [x])[0].contiguous()

os.makedirs(os.path.dirname(OUT), exist_ok=True)
save_file(out, OUT)
print(f"wrote {len(out)} tensors to {OUT}")
