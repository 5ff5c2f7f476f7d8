"""Oracle for the element-wise math operators of om-ops/src/pointwise.rs and activations.rs (PyTorch CPU, black box).

Builds seeded numpy inputs, runs torch.exp, log, sin, cos, sqrt, rsqrt, abs, clamp, maximum,
minimum, F.leaky_relu, F.silu, F.softplus, torch.where, pow with a scalar exponent and
Python's arithmetic operators with a float operand, and writes inputs, outputs and the gradients of `sum(y * r)` (r seeded) to
testdata/ops/math.safetensors. Inputs include PyTorch's odd cases: abs and leaky_relu at
exactly 0, clamp inputs exactly on its bounds, maximum/minimum ties, softplus beyond its
threshold, pow with exponent 0 at a zero base. The `#[cfg(test)]` module of
om-ops/src/pointwise.rs reads it.

Usage: /tmp/torch/bin/python tools/oracle_math.py   (PyTorch 2.15.0, numpy, safetensors)
"""

import torch
import torch.nn.functional as F
from oracle_common import Oracle

O = Oracle("math", seed=20261201)
rng, out = O.rng, O.out
leaf, grads, store = O.leaf, O.grads, O.store


def unary(name, x, f):
    x = leaf(x)
    y = f(x)
    store(name, x=x, y=y)
    grads(name, y, [("x", x)])


signed = rng.standard_normal((4, 6)) * 2.0
positive = rng.uniform(0.1, 4.0, (4, 6))
with_zeros = rng.standard_normal((4, 6))
with_zeros[0, :3] = 0.0

unary("exp", signed, torch.exp)
unary("log", positive, torch.log)
unary("sqrt", positive, torch.sqrt)
unary("rsqrt", positive, torch.rsqrt)
unary("abs", with_zeros, torch.abs)  # the gradient at 0 is 0

on_bounds = rng.standard_normal((4, 6))
on_bounds[0, :2] = -0.5
on_bounds[1, :2] = 0.5
unary("clamp_both", on_bounds, lambda x: torch.clamp(x, -0.5, 0.5))  # bounds inclusive
unary("clamp_min", on_bounds, lambda x: torch.clamp(x, min=-0.5))
unary("clamp_max", on_bounds, lambda x: torch.clamp(x, max=0.5))
unary("clamp_crossed", on_bounds, lambda x: torch.clamp(x, 0.5, -0.5))  # min > max

for name, f in [("maximum", torch.maximum), ("minimum", torch.minimum)]:
    a = rng.standard_normal((3, 4))
    b = rng.standard_normal(4)
    a[0, :2] = b[:2]  # ties: PyTorch 2.x gives g/2 to each
    a[2, 3] = b[3]
    a, b = leaf(a), leaf(b)
    y = f(a, b)
    store(name, a=a, b=b, y=y)
    grads(name, y, [("a", a), ("b", b)])

unary("leaky_relu", with_zeros, lambda x: F.leaky_relu(x, 0.1))
unary("silu", signed, F.silu)
soft = rng.standard_normal((4, 6)) * 3.0
soft[0, 0], soft[0, 1], soft[0, 2] = 4.0, -30.0, 1.5  # beyond the threshold, far left, exactly at it
unary("softplus", soft, lambda x: F.softplus(x, beta=2.0, threshold=3.0))

cond = torch.tensor(rng.integers(0, 2, (3, 4)), dtype=torch.int32)
a, b = leaf(rng.standard_normal(4)), leaf(rng.standard_normal((3, 1)))
y = torch.where(cond.bool(), a, b)
out["where_cond"] = cond
store("where", a=a, b=b, y=y)
grads("where", y, [("a", a), ("b", b)])

unary("pow_frac", positive, lambda x: x**2.5)
unary("pow_cube", signed, lambda x: x**3.0)
unary("pow_zero", with_zeros, lambda x: x**0.0)  # gradient 0 even at x = 0
unary("pow_neg", positive, lambda x: x**-1.5)

# ----- scalar operands (Python's operators on a tensor and a float) -----
unary("add_scalar", signed, lambda x: x + 1.5)
unary("radd_scalar", signed, lambda x: 1.5 + x)
unary("sub_scalar", signed, lambda x: x - 0.75)
unary("rsub_scalar", signed, lambda x: 2.0 - x)
unary("mul_scalar", signed, lambda x: x * -2.5)
unary("rmul_scalar", signed, lambda x: -2.5 * x)
unary("div_scalar", signed, lambda x: x / 3.0)
unary("rdiv_scalar", positive, lambda x: 2.0 / x)

# ----- added later: drawn after everything above, so the earlier tensors stay identical -----
elu_x = rng.standard_normal((4, 6)) * 2.0
elu_x[0, :2] = 0.0  # PyTorch's gradient at 0 is alpha
unary("elu", elu_x, lambda x: F.elu(x, alpha=0.7))
ls = rng.standard_normal((4, 6)) * 4.0
ls[0, 0], ls[0, 1], ls[0, 2] = 30.0, -30.0, 0.0
unary("log_sigmoid", ls, F.logsigmoid)
a = rng.uniform(0.2, 3.0, (3, 4))
a[0, 0] = 0.0  # 0^b: gradient to b is 0 for b >= 0
b = rng.uniform(-1.5, 2.5, 4)
b[0] = 1.5
a, b = leaf(a), leaf(b)
y = torch.pow(a, b)
store("pow_tensor", a=a, b=b, y=y)
grads("pow_tensor", y, [("a", a), ("b", b)])

# sin / cos: moderate arguments and large ones (the integer argument reduction)
trig = rng.standard_normal((4, 6)) * 5.0
trig[0, :4] = [4096.0, -1e5, 3.0e8, 1.0e30]
trig[1, 0], trig[1, 1] = 0.0, -0.0
unary("sin", trig, torch.sin)
unary("cos", trig, torch.cos)

O.save(metadata={"torch": torch.__version__, "tool": "tools/oracle_math.py"})
