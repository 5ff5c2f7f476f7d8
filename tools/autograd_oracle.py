"""Oracle models for the autograd engine (PyTorch CPU, black box; spec section 6).

Builds two small models from seeded numpy weights, runs one training step's forward and
backward in PyTorch and writes weights, inputs, loss and every parameter and input gradient
to testdata/autograd/<model>.safetensors:

- `convnet`: conv (bias) -> BatchNorm2d (training) -> ReLU -> MaxPool -> grouped dilated
  conv -> ReLU -> AvgPool -> global average pool -> Linear -> cross-entropy. The bias of the
  first conv feeds the batch norm: its gradient is zero in theory.
- `encoder`: Embedding -> 2 post-norm transformer encoder layers (q, k, v, o linears,
  multi-head scaled dot-product attention with an additive -inf padding mask on padded key
  positions, residual + LayerNorm, FFN Linear -> GELU(erf) -> Linear, residual + LayerNorm)
  -> mean over tokens -> Linear -> cross-entropy. The key biases have zero gradient in theory.

Key convention (shared with tools/rnn_oracle.py and tests/models/mod.rs):
`p.<name>` parameters and `x.<name>` float inputs (leaves requiring gradients),
`c.<name>` constants (masks, targets, ids as int64), `loss` (scalar), `out.<name>` extra
outputs, and `grad.<key>` the gradient of `loss` for every `p.`/`x.` key.
The models are written explicitly with torch.nn.functional so the Rust side
(tests/models/mod.rs, checked by tests/oracle_models.rs) matches them structurally.

Usage: /tmp/torch/bin/python tools/autograd_oracle.py   (PyTorch 2.15.0, numpy, safetensors)
Running it twice gives bit-identical files.
"""
import math

import numpy as np
import torch
import torch.nn.functional as F
from oracle_common import Oracle


class Model(Oracle):
    """Seeded leaves and constants of one model, written to testdata/autograd/<name>.safetensors.
    Each model starts from torch.manual_seed(0) (module initialisers draw from it; every
    parameter is then overwritten from the numpy generator), one thread and deterministic
    algorithms."""

    def __init__(self, name, seed, tool="autograd_oracle.py"):
        super().__init__(name, seed, folder="autograd", one_thread=True)
        torch.manual_seed(0)
        torch.use_deterministic_algorithms(True)
        # One metadata key only: safetensors writes several keys in hash order (not reproducible).
        self.generator = f"tools/{tool}, torch {torch.__version__.split('+')[0]}"
        self.leaves = {}

    def p(self, name, shape, scale=1.0, offset=0.0):
        return self.add_leaf(f"p.{name}", self.normal(shape, scale, offset).requires_grad_(True))

    def x(self, name, shape, scale=1.0):
        return self.add_leaf(f"x.{name}", self.normal(shape, scale).requires_grad_(True))

    def add_leaf(self, key, t):
        self.leaves[key] = t
        self.out[key] = t
        return t

    def c(self, name, value, dtype):
        t = torch.tensor(value, dtype=dtype)
        self.out[f"c.{name}"] = t
        return t

    def write(self, loss):
        keys = sorted(self.leaves)
        grads = self.grads_of(loss, [(k, self.leaves[k]) for k in keys], "grad.")
        self.out["loss"] = loss.reshape(())
        self.save({"generator": self.generator})
        worst = max(g.abs().max().item() for g in grads)
        print(f"  loss {loss.item():.6f}, max |grad| {worst:.3e}")


def convnet():
    m = Model("convnet", 20250601)
    x = m.x("image", (4, 3, 10, 10))
    w1, b1 = m.p("conv1_w", (8, 3, 3, 3), 0.3), m.p("conv1_b", (8,), 0.2)
    gamma, beta = m.p("bn_gamma", (8,), 0.2, 1.0), m.p("bn_beta", (8,), 0.2)
    w2, b2 = m.p("conv2_w", (8, 2, 3, 3), 0.3), m.p("conv2_b", (8,), 0.2)
    fw, fb = m.p("fc_w", (5, 8), 0.4), m.p("fc_b", (5,), 0.1)
    targets = m.c("targets", [1, 4, 0, 3], torch.int64)
    h = F.conv2d(x, w1, b1, stride=1, padding=1)  # [4, 8, 10, 10]
    h = F.batch_norm(h, None, None, gamma, beta, training=True, momentum=0.1, eps=1e-5)
    h = F.max_pool2d(F.relu(h), 2, 2)  # [4, 8, 5, 5]
    h = F.relu(F.conv2d(h, w2, b2, stride=1, padding=2, dilation=2, groups=4))  # [4, 8, 5, 5]
    h = F.avg_pool2d(h, 2, 1)  # [4, 8, 4, 4]
    h = h.mean(dim=(2, 3))  # global average pool [4, 8]
    loss = F.cross_entropy(F.linear(h, fw, fb), targets)
    m.write(loss)


def encoder():
    m = Model("encoder", 20250602)
    B, T, V, D, H, FF, K = 3, 6, 11, 16, 2, 32, 4
    dh = D // H
    table = m.p("embed", (V, D), 0.8)
    ids = m.c("ids", [[1, 5, 7, 2, 9, 3], [4, 4, 10, 6, 0, 0], [8, 2, 3, 1, 5, 0]], torch.int64)
    lengths = [6, 4, 5]
    mask = np.zeros((B, 1, 1, T), dtype=np.float32)
    for b, n in enumerate(lengths):
        mask[b, 0, 0, n:] = -np.inf
    mask = m.c("mask", mask, torch.float32)
    targets = m.c("targets", [2, 0, 3], torch.int64)
    layers = []
    for l in range(2):
        p = {}
        for n in ("q", "k", "v", "o"):
            p[n + "_w"] = m.p(f"l{l}.{n}_w", (D, D), 1.0 / math.sqrt(D))
            p[n + "_b"] = m.p(f"l{l}.{n}_b", (D,), 0.1)
        p["ln1_g"], p["ln1_b"] = m.p(f"l{l}.ln1_g", (D,), 0.1, 1.0), m.p(f"l{l}.ln1_b", (D,), 0.1)
        p["ff1_w"], p["ff1_b"] = m.p(f"l{l}.ff1_w", (FF, D), 1.0 / math.sqrt(D)), m.p(f"l{l}.ff1_b", (FF,), 0.1)
        p["ff2_w"], p["ff2_b"] = m.p(f"l{l}.ff2_w", (D, FF), 1.0 / math.sqrt(FF)), m.p(f"l{l}.ff2_b", (D,), 0.1)
        p["ln2_g"], p["ln2_b"] = m.p(f"l{l}.ln2_g", (D,), 0.1, 1.0), m.p(f"l{l}.ln2_b", (D,), 0.1)
        layers.append(p)
    hw, hb = m.p("head_w", (K, D), 0.4), m.p("head_b", (K,), 0.1)

    def heads(t):  # [B, T, D] -> [B, H, T, dh]
        return t.reshape(B, T, H, dh).permute(0, 2, 1, 3)

    x = F.embedding(ids, table)
    for p in layers:
        q, k, v = (heads(F.linear(x, p[n + "_w"], p[n + "_b"])) for n in ("q", "k", "v"))
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1.0 / math.sqrt(dh))
        a = F.linear(a.permute(0, 2, 1, 3).reshape(B, T, D), p["o_w"], p["o_b"])
        x = F.layer_norm(x + a, (D,), p["ln1_g"], p["ln1_b"], 1e-5)
        f = F.linear(F.gelu(F.linear(x, p["ff1_w"], p["ff1_b"]), approximate="none"), p["ff2_w"], p["ff2_b"])
        x = F.layer_norm(x + f, (D,), p["ln2_g"], p["ln2_b"], 1e-5)
    loss = F.cross_entropy(F.linear(x.mean(dim=1), hw, hb), targets)
    m.write(loss)


if __name__ == "__main__":
    convnet()
    encoder()
