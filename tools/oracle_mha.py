"""Oracle for torch.nn.MultiheadAttention (PyTorch CPU, black box, batch_first=True).

Builds seeded modules (embed_dim 8, 2 heads), overwrites every parameter with seeded numpy
values (the zero biases of PyTorch's init would leave the bias paths untested), runs
the forward (need_weights=False) on seeded inputs — cross-attention with Tq != Tk and an
additive float mask [Tq, Tk], and self-attention without a mask or biases — and writes the
state dict, inputs, outputs and the gradients of `sum(y * r)` (r seeded) with respect to
the inputs and parameters to testdata/ops/mha.safetensors. The `#[cfg(test)]` module of
om-ops/src/nn/attention.rs reads it.

Usage: /tmp/torch/bin/python tools/oracle_mha.py   (PyTorch 2.15.0, numpy, safetensors)
"""
import os

import numpy as np
import torch
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata", "ops", "mha.safetensors")
rng = np.random.default_rng(20261204)
out = {}


def f32(a):
    return torch.tensor(np.asarray(a, dtype=np.float32))


def leaf(a):
    return f32(a).requires_grad_(True)


def case(prefix, bias, tq, tk, mask, self_attn):
    torch.manual_seed(0)
    m = torch.nn.MultiheadAttention(8, 2, bias=bias, batch_first=True)
    with torch.no_grad():
        for _, p in m.named_parameters():
            p.copy_(f32(rng.standard_normal(p.shape) * 0.5))
    q = leaf(rng.standard_normal((2, tq, 8)))
    if self_attn:
        k = v = q
    else:
        k, v = leaf(rng.standard_normal((2, tk, 8))), leaf(rng.standard_normal((2, tk, 8)))
    am = f32(rng.standard_normal((tq, tk))) if mask else None
    y, _ = m(q, k, v, attn_mask=am, need_weights=False)
    for n, p in m.named_parameters():
        out[f"{prefix}_{n}"] = p.detach().contiguous()
    out[f"{prefix}_q"] = q.detach()
    if not self_attn:
        out[f"{prefix}_k"] = k.detach()
        out[f"{prefix}_v"] = v.detach()
    if am is not None:
        out[f"{prefix}_mask"] = am
    out[f"{prefix}_y"] = y.detach().contiguous()
    r = f32(rng.standard_normal(y.shape))
    out[f"{prefix}_r"] = r
    inputs = [("q", q)] if self_attn else [("q", q), ("k", k), ("v", v)]
    inputs += list(m.named_parameters())
    gs = torch.autograd.grad((y * r).sum(), [t for _, t in inputs])
    for (n, _), g in zip(inputs, gs):
        out[f"{prefix}_g{n}"] = g.detach().contiguous()


# cross-attention, biases, Tq=4, Tk=5, additive mask [4, 5]
case("cross", True, 4, 5, True, False)
# self-attention, no biases, no mask
case("self", False, 3, 3, False, True)

save_file(out, OUT, metadata={"torch": torch.__version__, "tool": "tools/oracle_mha.py"})
print(f"wrote {OUT}: {len(out)} tensors")
