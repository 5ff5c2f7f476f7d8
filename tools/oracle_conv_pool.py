#!/usr/bin/env python3
"""Oracle for conv2d / max_pool2d / avg_pool2d / global_avg_pool2d forward values (and, for the
cases added later, gradients).

Writes testdata/ops/conv_pool.safetensors: for each case `<name>.x` (and `.w`, `.bias`),
`<name>.params` (int32 attributes, layout below), the expected output `<name>.y` computed by
PyTorch on the CPU in float32, and for max pooling PyTorch's `return_indices` as `<name>.idx`.
Inputs are numpy-seeded. Run with a PyTorch environment (used: torch 2.15.0):

    /tmp/torch/bin/python tools/oracle_conv_pool.py

params layouts:
  conv*:    [sH, sW, padT, padL, padB, padR, dH, dW, groups]
  maxpool*: [kH, kW, sH, sW, padH, padW, dH, dW]
  avgpool*: [kH, kW, sH, sW, padH, padW, countIncludePad]
  gap*:     [0]

Added later, drawn after every earlier input (so those stay bit-identical), with underscore
names `<name>_x` (`_w`, `_bias`), `<name>_params`, `<name>_y`, a seeded weight `<name>_r` and
the gradients `<name>_g<input>` of `sum(y * r)`:
  pool_*:   [kind (0 max, 1 avg, 2 global), kH, kW, sH, sW, padH, padW, dH, dW, ceilMode,
             countIncludePad] — ceil_mode and unbatched [C, H, W] pooling
  uconv_*:  the conv* layout — unbatched [C, H, W] convolutions
"""
import torch
import torch.nn.functional as F
from oracle_common import Oracle

O = Oracle("conv_pool", seed=20240607, one_thread=True)
out, normal = O.out, O.normal


def params(*values):
    return torch.tensor(values, dtype=torch.int32)


def conv(name, x_shape, w_shape, bias, stride, padding, dilation, groups):
    x, w = normal(x_shape), normal(w_shape)
    b = normal(w_shape[0]) if bias else None
    top, left, bottom, right = padding
    xp = F.pad(x, (left, right, top, bottom))  # asymmetric zero padding first
    y = F.conv2d(xp, w, b, stride=stride, padding=0, dilation=dilation, groups=groups)
    out[f"{name}.x"], out[f"{name}.w"] = x, w
    if b is not None:
        out[f"{name}.bias"] = b
    out[f"{name}.params"] = params(*stride, *padding, *dilation, groups)
    out[f"{name}.y"] = y


def maxpool(name, x_shape, kernel, stride, padding, dilation):
    x = normal(x_shape)
    y, idx = F.max_pool2d(x, kernel, stride, padding, dilation, ceil_mode=False, return_indices=True)
    out[f"{name}.x"] = x
    out[f"{name}.params"] = params(*kernel, *stride, *padding, *dilation)
    out[f"{name}.y"] = y
    out[f"{name}.idx"] = idx.to(torch.int32)


def avgpool(name, x_shape, kernel, stride, padding, count_include_pad):
    x = normal(x_shape)
    y = F.avg_pool2d(x, kernel, stride, padding, ceil_mode=False, count_include_pad=count_include_pad)
    out[f"{name}.x"] = x
    out[f"{name}.params"] = params(*kernel, *stride, *padding, int(count_include_pad))
    out[f"{name}.y"] = y


def gap(name, x_shape):
    x = normal(x_shape)
    out[f"{name}.x"] = x
    out[f"{name}.params"] = params(0)
    out[f"{name}.y"] = F.adaptive_avg_pool2d(x, 1)


conv("conv_plain", (2, 8, 16, 16), (16, 8, 3, 3), True, (1, 1), (1, 1, 1, 1), (1, 1), 1)
conv("conv_groups", (2, 4, 7, 6), (6, 2, 3, 3), True, (2, 1), (1, 0, 2, 1), (1, 2), 2)
conv("conv_depthwise", (1, 3, 6, 6), (3, 1, 3, 3), False, (1, 1), (1, 1, 1, 1), (1, 1), 3)
conv("conv_depthwise_mult", (2, 4, 9, 8), (8, 1, 5, 3), True, (2, 2), (2, 1, 2, 1), (1, 1), 4)
conv("conv_1x1_stride", (3, 5, 6, 7), (4, 5, 1, 1), False, (2, 3), (0, 0, 0, 0), (1, 1), 1)
conv("conv_dilated_asym", (1, 6, 10, 9), (9, 2, 2, 3), True, (1, 2), (0, 3, 1, 0), (3, 2), 3)

maxpool("maxpool_k3s2p1", (2, 3, 9, 8), (3, 3), (2, 2), (1, 1), (1, 1))
maxpool("maxpool_k3x2_s2x3_dil", (2, 3, 9, 8), (3, 2), (2, 3), (1, 1), (1, 2))
maxpool("maxpool_k2s2", (1, 4, 8, 6), (2, 2), (2, 2), (0, 0), (1, 1))

for cip in (True, False):
    tag = "incl" if cip else "excl"
    avgpool(f"avgpool_k3x2_s2x1_p1_{tag}", (2, 3, 9, 8), (3, 2), (2, 1), (1, 1), cip)
    avgpool(f"avgpool_k3_s3_p1_{tag}", (1, 4, 10, 7), (3, 3), (3, 3), (1, 1), cip)

gap("gap", (2, 3, 5, 4))



# ---- Added later: ceil_mode and unbatched inputs, with gradients (drawn after all of the above).


def leaf(shape):
    return O.normal(shape).requires_grad_(True)


def pool_grad(name, kind, x_shape, kernel=(1, 1), stride=(1, 1), padding=(0, 0), dilation=(1, 1), ceil=False, cip=True):
    x = leaf(x_shape)
    if kind == 0:
        y = F.max_pool2d(x, kernel, stride, padding, dilation, ceil_mode=ceil)
    elif kind == 1:
        y = F.avg_pool2d(x, kernel, stride, padding, ceil_mode=ceil, count_include_pad=cip)
    else:
        y = F.adaptive_avg_pool2d(x, 1)
    out[f"{name}_params"] = params(kind, *kernel, *stride, *padding, *dilation, int(ceil), int(cip))
    O.store(name, x=x, y=y)
    O.grads(name, y, [("x", x)])


def conv_grad(name, x_shape, w_shape, bias, stride, padding, dilation, groups):
    x, w = leaf(x_shape), leaf(w_shape)
    inputs = [("x", x), ("w", w)]
    b = None
    if bias:
        b = leaf(w_shape[0])
        inputs.append(("bias", b))
    top, left, bottom, right = padding
    y = F.conv2d(F.pad(x, (left, right, top, bottom)), w, b, stride=stride, padding=0, dilation=dilation, groups=groups)
    out[f"{name}_params"] = params(*stride, *padding, *dilation, groups)
    O.store(name, y=y, **dict(inputs))
    O.grads(name, y, inputs)


pool_grad("pool_max_ceil_k3s2p1", 0, (2, 3, 9, 8), (3, 3), (2, 2), (1, 1), ceil=True)
pool_grad("pool_max_ceil_k2s2_odd", 0, (1, 2, 7, 9), (2, 2), (2, 2), ceil=True)
pool_grad("pool_max_ceil_dilated", 0, (1, 2, 8, 7), (2, 3), (3, 2), (1, 1), (2, 1), ceil=True)
pool_grad("pool_max_ceil_last_window_dropped", 0, (1, 2, 5, 5), (2, 2), (3, 3), (1, 1), ceil=True)
pool_grad("pool_max_unbatched", 0, (3, 6, 5), (2, 2), (1, 2), (1, 0))
pool_grad("pool_max_unbatched_ceil", 0, (3, 7, 6), (3, 3), (2, 2), (1, 1), ceil=True)
for cip in (True, False):
    tag = "incl" if cip else "excl"
    pool_grad(f"pool_avg_ceil_k3s2p1_{tag}", 1, (2, 3, 9, 8), (3, 3), (2, 2), (1, 1), ceil=True, cip=cip)
    pool_grad(f"pool_avg_ceil_k2x3_s3x2_{tag}", 1, (1, 2, 7, 8), (2, 3), (3, 2), (0, 1), ceil=True, cip=cip)
    pool_grad(f"pool_avg_ceil_last_window_dropped_{tag}", 1, (1, 2, 5, 5), (2, 2), (3, 3), (1, 1), ceil=True, cip=cip)
    pool_grad(f"pool_avg_ceil_k2s2_odd_{tag}", 1, (1, 3, 5, 7), (2, 2), (2, 2), ceil=True, cip=cip)
    pool_grad(f"pool_avg_unbatched_ceil_{tag}", 1, (3, 5, 6), (2, 2), (2, 2), (1, 1), ceil=True, cip=cip)
    pool_grad(f"pool_avg_unbatched_{tag}", 1, (2, 6, 7), (3, 2), (2, 1), (1, 1), cip=cip)
pool_grad("pool_gap_unbatched", 2, (3, 4, 5))

conv_grad("uconv_groups_dilated", (4, 7, 6), (6, 2, 3, 3), True, (2, 1), (1, 0, 2, 1), (1, 2), 2)
conv_grad("uconv_plain", (3, 5, 5), (4, 3, 1, 2), False, (1, 1), (0, 1, 0, 0), (1, 1), 1)

O.save({"torch": torch.__version__})
