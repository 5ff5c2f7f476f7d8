#!/usr/bin/env python3
"""Oracle for conv_transpose2d and resize2d (PyTorch CPU, float32, black box).

Writes testdata/ops/spatial.safetensors. For each case `<name>`: the inputs `<name>_x`
(and `_w`, `_bias`), int32 attributes `<name>_params` (layouts below), the output `<name>_y`,
a seeded weight `<name>_r` and the gradients `<name>_g<input>` of `sum(y * r)`.
The `#[cfg(test)]` modules of om-ops/src/conv.rs and om-ops/src/resize.rs read it (fast and exact mode).

params layouts:
  ct_*:     [sH, sW, padH, padW, outPadH, outPadW, dH, dW, groups]
  resize_*: [outH, outW, mode (0 nearest, 1 bilinear, 2 nearest-exact), alignCorners]
  rscale_*: [mode, alignCorners, recomputeScaleFactor, numH, denH, numW, denW]
            (interpolate(scale_factor=(numH/denH, numW/denW)), the factors as f64 ratios)
plus `nearest_src`: PyTorch's nearest source index for every in, out in 1..=24, and (added
later) `nearest_exact_src` likewise for nearest-exact, and `scale_src`: both nearest modes'
source indices by scale factor (the layout above `scale_src` below).
Cases added later (unbatched [C, H, W] inputs, nearest-exact, scale factors) are drawn after
every earlier one, so the earlier tensors stay bit-identical; unbatched resizes are compared
with `interpolate(x[None])[0]` (interpolate itself reads a 3-d tensor as [N, C, L]).

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


MODES = {"nearest": 0, "bilinear": 1, "nearest-exact": 2}


def interpolate(x, **kw):
    """F.interpolate, reading an unbatched [C, H, W] image as a batch of one."""
    if x.dim() == 3:
        return F.interpolate(x[None], **kw)[0]
    return F.interpolate(x, **kw)


def resize_case(name, x_shape, params, mode, align_corners, **kw):
    """One interpolate case: `kw` gives the size or the scale factor; `params` the stored
    attributes."""
    x = leaf(*x_shape)
    if mode == "bilinear":
        kw["align_corners"] = align_corners
    y = interpolate(x, mode=mode, **kw)
    out[f"{name}_params"] = torch.tensor(params, dtype=torch.int32)
    grads(name, y, [("x", x)])


def resize(name, x_shape, size, mode, align_corners):
    resize_case(name, x_shape, [*size, MODES[mode], int(align_corners)], mode, align_corners, size=size)


def rscale(name, x_shape, scale, mode, align_corners, recompute):
    factors = tuple(n / d for n, d in scale)
    params = [MODES[mode], int(align_corners), int(recompute), *[v for nd in scale for v in nd]]
    resize_case(name, x_shape, params, mode, align_corners, scale_factor=factors, recompute_scale_factor=recompute)


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

# ---- Added later (drawn after everything above).

ct("ct_unbatched", (4, 3, 4), (4, 3, 3, 3), True, (2, 2), (1, 1), (1, 1), (1, 1), 2)
ct("ct_unbatched_no_bias", (2, 5, 3), (2, 3, 2, 3), False, (1, 2), (0, 1), (0, 1), (1, 1), 1)

resize("resize_exact_up", (2, 3, 5, 7), (13, 10), "nearest-exact", False)
resize("resize_exact_up2x", (1, 2, 4, 6), (8, 12), "nearest-exact", False)
resize("resize_exact_down", (1, 3, 11, 9), (4, 6), "nearest-exact", False)
resize("resize_exact_mixed", (2, 2, 6, 5), (6, 17), "nearest-exact", False)
resize("resize_exact_to_one", (1, 2, 5, 3), (1, 2), "nearest-exact", False)
resize("resize_exact_odd", (1, 1, 29, 31), (37, 23), "nearest-exact", False)
for mode, align, tag in (("nearest", False, "nearest"), ("bilinear", False, "bilinear"), ("bilinear", True, "align"), ("nearest-exact", False, "exact")):
    resize(f"resize_{tag}_unbatched", (3, 5, 7), (9, 4), mode, align)
for mode, align, tag in (("nearest", False, "nearest"), ("bilinear", False, "bilinear"), ("bilinear", True, "align"), ("nearest-exact", False, "exact")):
    for recompute in (False, True):
        r = "_recomputed" if recompute else ""
        rscale(f"rscale_{tag}_up{r}", (2, 3, 5, 7), ((17, 10), (5, 2)), mode, align, recompute)
        rscale(f"rscale_{tag}_down{r}", (1, 3, 11, 9), ((3, 5), (9, 20)), mode, align, recompute)
        rscale(f"rscale_{tag}_same_size{r}", (1, 2, 6, 5), ((11, 10), (2, 1)), mode, align, recompute)
        rscale(f"rscale_{tag}_unbatched{r}", (3, 7, 9), ((13, 10), (7, 10)), mode, align, recompute)
        rscale(f"rscale_{tag}_odd{r}", (1, 1, 29, 31), ((7, 3), (3, 7)), mode, align, recompute)

# nearest-exact's source index for every in, out in 1..=24, as `nearest_src`.
src = []
for n_in in range(1, 25):
    for n_out in range(1, 25):
        xs = torch.arange(n_in, dtype=torch.float32).reshape(1, 1, 1, n_in)
        src.append(F.interpolate(xs, size=(1, n_out), mode="nearest-exact").reshape(-1).to(torch.int32))
out["nearest_exact_src"] = torch.cat(src)

# `scale_src`: for mode in (nearest, nearest-exact), in in 1..=24, and each scale factor
# num/den of SCALES, the source indices of interpolate(scale_factor=num/den) along the width
# (floor(in·num/den) of them; none when that is 0), concatenated in that order.
SCALES = [(1, 4), (3, 10), (9, 20), (1, 2), (3, 5), (7, 10), (9, 10), (1, 1), (21, 20), (11, 10), (13, 10), (3, 2),
          (17, 10), (2, 1), (9, 4), (5, 2), (3, 1), (7, 2), (4, 1)]
src = []
for mode in ("nearest", "nearest-exact"):
    for n_in in range(1, 25):
        for num, den in SCALES:
            if (n_in * num) // den == 0:
                continue
            xs = torch.arange(n_in, dtype=torch.float32).reshape(1, 1, 1, n_in)
            src.append(F.interpolate(xs, scale_factor=(1.0, num / den), mode=mode).reshape(-1).to(torch.int32))
out["scale_src"] = torch.cat(src)
out["scale_src_factors"] = torch.tensor([v for nd in SCALES for v in nd], dtype=torch.int32)

O.save({"torch": torch.__version__})
