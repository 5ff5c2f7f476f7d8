#!/usr/bin/env python3
"""Oracle for conv2d / max_pool2d / avg_pool2d / global_avg_pool2d forward values.

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

O.save({"torch": torch.__version__})
