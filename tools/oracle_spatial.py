#!/usr/bin/env python3
"""Oracle for conv_transpose2d and resize2d (PyTorch CPU, float32, black box).

Writes testdata/ops/spatial.safetensors. For each case `<name>`: the inputs `<name>_x`
(and `_w`, `_bias`), int32 attributes `<name>_params` (layouts below), the output `<name>_y`,
a seeded weight `<name>_r` and the gradients `<name>_g<input>` of `sum(y * r)`.
The `#[cfg(test)]` modules of om-ops/src/conv.rs and om-ops/src/resize.rs read it (fast and exact mode).

params layouts:
  ct_*:     [sH, sW, padH, padW, outPadH, outPadW, dH, dW, groups]
  resize_*: [outH, outW, mode (0 nearest, 1 bilinear), alignCorners]
plus `nearest_src`: PyTorch's nearest source index for every in, out in 1..=24.

Usage: /tmp/torch/bin/python tools/oracle_spatial.py   (PyTorch 2.15.0, numpy, safetensors)
"""
import torch
import torch.nn.functional as F
from oracle_common import Oracle

O = Oracle("spatial", seed=20240701, one_thread=True)
out = O.out


def leaf(*shape):
    return O.normal(shape).requires_grad_(True)


def grads(name, y, inputs):
    """Stores the output, the inputs, the weight r and the gradients of sum(y * r)."""
    O.store(name, y=y, **dict(inputs))
    O.grads(name, y, inputs)


def ct(name, x_shape, w_shape, bias, stride, padding, output_padding, dilation, groups):
    x, w = leaf(*x_shape), leaf(*w_shape)
    inputs = [("x", x), ("w", w)]
    b = None
    if bias:
        b = leaf(w_shape[1] * groups)
        inputs.append(("bias", b))
    y = F.conv_transpose2d(x, w, b, stride=stride, padding=padding, output_padding=output_padding, groups=groups, dilation=dilation)
    out[f"{name}_params"] = torch.tensor([*stride, *padding, *output_padding, *dilation, groups], dtype=torch.int32)
    grads(name, y, inputs)


def resize(name, x_shape, size, mode, align_corners):
    x = leaf(*x_shape)
    kw = {} if mode == "nearest" else {"align_corners": align_corners}
    y = F.interpolate(x, size=size, mode=mode, **kw)
    out[f"{name}_params"] = torch.tensor([*size, int(mode == "bilinear"), int(align_corners)], dtype=torch.int32)
    grads(name, y, [("x", x)])


ct("ct_plain", (2, 4, 5, 5), (4, 3, 3, 3), True, (1, 1), (1, 1), (0, 0), (1, 1), 1)
ct("ct_stride2_outpad", (2, 3, 4, 5), (3, 4, 3, 3), True, (2, 2), (1, 1), (1, 1), (1, 1), 1)
ct("ct_groups_dilation", (1, 4, 5, 4), (4, 3, 3, 2), False, (2, 1), (1, 0), (1, 0), (2, 2), 2)
ct("ct_depthwise", (2, 6, 4, 4), (6, 1, 3, 3), True, (2, 2), (0, 1), (1, 1), (1, 1), 6)
ct("ct_outpad_below_dilation", (1, 2, 4, 3), (2, 4, 2, 3), True, (1, 1), (0, 1), (1, 1), (2, 3), 1)
ct("ct_crop_stride3", (3, 2, 3, 4), (2, 2, 3, 4), False, (3, 2), (2, 3), (2, 1), (1, 1), 1)
ct("ct_unet_up", (1, 8, 6, 6), (8, 4, 2, 2), True, (2, 2), (0, 0), (0, 0), (1, 1), 1)

for mode, align, tag in (("nearest", False, "nearest"), ("bilinear", False, "bilinear"), ("bilinear", True, "align")):
    resize(f"resize_{tag}_up", (2, 3, 5, 7), (13, 10), mode, align)
    resize(f"resize_{tag}_up2x", (1, 2, 4, 6), (8, 12), mode, align)
    resize(f"resize_{tag}_down", (1, 3, 11, 9), (4, 6), mode, align)
    resize(f"resize_{tag}_mixed", (2, 2, 6, 5), (6, 17), mode, align)
    resize(f"resize_{tag}_to_one", (1, 2, 5, 3), (1, 2), mode, align)
    resize(f"resize_{tag}_odd", (1, 1, 29, 31), (37, 23), mode, align)

# PyTorch's nearest source index for every in, out in 1..=24 (x = 0, 1, .., in-1 along the
# width), concatenated in (in, out) order: `nearest_src`.
src = []
for n_in in range(1, 25):
    for n_out in range(1, 25):
        xs = torch.arange(n_in, dtype=torch.float32).reshape(1, 1, 1, n_in)
        src.append(F.interpolate(xs, size=(1, n_out), mode="nearest").reshape(-1).to(torch.int32))
out["nearest_src"] = torch.cat(src)

O.save({"torch": torch.__version__})
