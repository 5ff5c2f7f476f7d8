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
import torch
from oracle_common import Oracle

O = Oracle("mha", seed=20261204)
out, leaf, normal, rng = O.out, O.leaf, O.normal, O.rng


def case(prefix, bias, tq, tk, mask, self_attn):
    torch.manual_seed(0)
    m = torch.nn.MultiheadAttention(8, 2, bias=bias, batch_first=True)
    with torch.no_grad():
        for _, p in m.named_parameters():
            p.copy_(normal(p.shape, scale=0.5))
    q = leaf(rng.standard_normal((2, tq, 8)))
    if self_attn:
        k = v = q
    else:
        k, v = leaf(rng.standard_normal((2, tk, 8))), leaf(rng.standard_normal((2, tk, 8)))
    am = normal((tq, tk)) if mask else None
    y, _ = m(q, k, v, attn_mask=am, need_weights=False)
    for n, p in m.named_parameters():
        out[f"{prefix}_{n}"] = p
    out[f"{prefix}_q"] = q
    if not self_attn:
        out[f"{prefix}_k"] = k
        out[f"{prefix}_v"] = v
    if am is not None:
        out[f"{prefix}_mask"] = am
    out[f"{prefix}_y"] = y
    inputs = [("q", q)] if self_attn else [("q", q), ("k", k), ("v", v)]
    O.grads(prefix, y, inputs + list(m.named_parameters()))


# cross-attention, biases, Tq=4, Tk=5, additive mask [4, 5]
case("cross", True, 4, 5, True, False)
# self-attention, no biases, no mask
case("self", False, 3, 3, False, True)

O.save({"torch": torch.__version__, "tool": "tools/oracle_mha.py"})
