"""Oracle for the recurrent operators (PyTorch CPU, black box).

Builds torch.nn.LSTM / torch.nn.GRU stacks from seeded numpy weights (one layer, multi-layer,
bidirectional, batch-first, with and without biases and initial states), runs them on seeded
inputs and writes inputs, parameters (state-dict names), the outputs y and h_n, and the
gradients of `sum(y * ry) + sum(h_n * rh)` (ry, rh seeded) with respect to the input, the
initial states and every parameter to testdata/ops/rnn.safetensors.
The `#[cfg(test)]` module om-ops/src/recurrent/tests.rs reads it.

Keys, for a case `<c>`: `<c>_x`, `<c>_h0`, `<c>_c0`, `<c>_<param>` (e.g. `<c>_weight_ih_l0_reverse`),
`<c>_y`, `<c>_hn`, `<c>_ry`, `<c>_rh`, and the gradients `<c>_g_<name>` (`x`, `h0`, `c0`, params).
The `lstm_cn_*` cases (drawn after all others) also save the final cell states `<c>_cn` and
their weighting `<c>_rc`, and their loss adds `sum(c_n * rc)`.

Usage: /tmp/torch/bin/python tools/oracle_rnn_ops.py   (PyTorch 2.15.0, numpy, safetensors)
"""
import torch
from oracle_common import Oracle

O = Oracle("rnn", seed=20241129)
rng, out, f32, normal = O.rng, O.out, O.f32, O.normal


def case(name, kind, T, B, I, H, layers, bidirectional, batch_first, bias, states, scale=0.5, with_cn=False):
    cls = torch.nn.LSTM if kind == "lstm" else torch.nn.GRU
    m = cls(I, H, num_layers=layers, bias=bias, batch_first=batch_first, bidirectional=bidirectional)
    dirs = 2 if bidirectional else 1
    with torch.no_grad():
        for pname, p in m.named_parameters():
            p.copy_(f32(rng.uniform(-scale, scale, tuple(p.shape))))
    x_shape = (B, T, I) if batch_first else (T, B, I)
    x = normal(x_shape).requires_grad_(True)
    out[f"{name}_x"] = x.clone()
    inputs = [("x", x)]
    h0 = c0 = None
    if states:
        h0 = normal((layers * dirs, B, H), scale=0.5).requires_grad_(True)
        out[f"{name}_h0"] = h0.clone()
        inputs.append(("h0", h0))
        if kind == "lstm":
            c0 = normal((layers * dirs, B, H), scale=0.5).requires_grad_(True)
            out[f"{name}_c0"] = c0.clone()
            inputs.append(("c0", c0))
    for pname, p in m.named_parameters():
        out[f"{name}_{pname}"] = p.clone()
        inputs.append((pname, p))
    if kind == "lstm":
        y, (hn, cn) = m(x, None if h0 is None else (h0, c0))
    else:
        y, hn = m(x, h0)
    out[f"{name}_y"] = y
    out[f"{name}_hn"] = hn
    ry = O.weight(f"{name}_ry", y)
    rh = O.weight(f"{name}_rh", hn)
    loss = (y * ry).sum() + (hn * rh).sum()
    if with_cn:
        out[f"{name}_cn"] = cn
        loss = loss + (cn * O.weight(f"{name}_rc", cn)).sum()
    O.grads_of(loss, inputs, f"{name}_g_")


for kind in ("lstm", "gru"):
    case(f"{kind}_one", kind, 7, 3, 4, 5, 1, False, False, True, False)
    case(f"{kind}_two_states", kind, 5, 2, 3, 4, 2, False, False, True, True)
    case(f"{kind}_bi_nobias", kind, 6, 2, 3, 3, 1, True, False, False, False)
    case(f"{kind}_bi2_bf_states", kind, 5, 3, 4, 4, 2, True, True, True, True)
    case(f"{kind}_long", kind, 40, 2, 3, 6, 1, False, False, True, True)

# The final cell states and their gradients (drawn after every earlier case).
case("lstm_cn_one", "lstm", 7, 3, 4, 5, 1, False, False, True, False, with_cn=True)
case("lstm_cn_two_states", "lstm", 5, 2, 3, 4, 2, False, False, True, True, with_cn=True)
case("lstm_cn_bi_nobias", "lstm", 6, 2, 3, 3, 1, True, False, False, False, with_cn=True)
case("lstm_cn_bi2_bf_states", "lstm", 5, 3, 4, 4, 2, True, True, True, True, with_cn=True)
case("lstm_cn_long", "lstm", 40, 2, 3, 6, 1, False, False, True, True, with_cn=True)

O.save({"torch": torch.__version__})
