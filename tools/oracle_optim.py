"""Oracle for om_ops::optim (PyTorch CPU, black box): optimizer steps, learning-rate
schedules and gradient clipping.

- Optimizers: for each case a parameter `p0` [3, 5] and five gradients `g` [5, 3, 5] (seeded),
  five steps of torch.optim.{SGD, Adam, AdamW, RMSprop, Adagrad} with the case's settings; the
  parameter after each step is `CASE_p` [5, 3, 5]. The settings are listed in `OPTIMIZERS`
  below and mirrored in tests/optim_oracle.rs.
- Schedulers: for each case the rate of every epoch (`get_last_lr()[0]` from construction on)
  of a torch.optim.lr_scheduler scheduler over SGD, as float64 bits split into `CASE_hi` and
  `CASE_lo` (int32 views of the two halves; safetensors readers here narrow float64 to
  float32). Base rates are exact in float32, so a scheduler starting from an f32 rate sees
  the same base as PyTorch.
- Clipping: gradients of three parameters (`clip_g0..2`), then clip_grad_norm_ (norm 2, inf,
  1; one case below the limit) and clip_grad_value_: each case's total norm `CASE_norm` and
  clipped gradients `CASE_g0..2`.

- A state dict of torch.nn.Sequential(Conv2d(2, 3, 1), BatchNorm2d(3)) after two training-mode
  forwards, with batch norm's `1.num_batches_tracked` (int64), as PyTorch writes it:
  testdata/ops/batchnorm_state.safetensors.

Writes testdata/ops/optim.safetensors. Usage: /tmp/torch/bin/python tools/oracle_optim.py
(PyTorch 2.15.0, numpy, safetensors)
"""

import numpy as np
import torch
from oracle_common import Oracle
from safetensors.torch import save_file

O = Oracle("optim", seed=20261202, one_thread=True)
rng, out, f32 = O.rng, O.out, O.f32

# ----- optimizers: (case, constructor, settings) -----
OPTIMIZERS = [
    ("sgd", torch.optim.SGD, dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01)),
    ("sgd_nesterov", torch.optim.SGD, dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1)),
    ("adam", torch.optim.Adam, dict(lr=0.01, weight_decay=0.1)),
    ("adamw", torch.optim.AdamW, dict(lr=0.02, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.1)),
    ("rmsprop", torch.optim.RMSprop, dict(lr=0.01)),
    ("rmsprop_momentum", torch.optim.RMSprop, dict(lr=0.01, alpha=0.9, eps=1e-6, weight_decay=0.1, momentum=0.8)),
    ("rmsprop_centered", torch.optim.RMSprop, dict(lr=0.005, alpha=0.95, centered=True, momentum=0.5)),
    ("rmsprop_centered_plain", torch.optim.RMSprop, dict(lr=0.02, alpha=0.3, centered=True, weight_decay=0.05)),
    ("adagrad", torch.optim.Adagrad, dict(lr=0.1)),
    ("adagrad_all", torch.optim.Adagrad, dict(lr=0.1, lr_decay=0.05, weight_decay=0.1, initial_accumulator_value=0.5, eps=1e-6)),
]
STEPS = 5
for case, make, settings in OPTIMIZERS:
    p0 = O.normal((3, 5))
    g = O.normal((STEPS, 3, 5))
    p = p0.clone().requires_grad_(True)
    opt = make([p], **settings)
    after = []
    for k in range(STEPS):
        p.grad = g[k].clone()
        opt.step()
        after.append(p.detach().clone())
    O.store(case, p0=p0, g=g, p=torch.stack(after))


# ----- schedulers: (case, base lr, epochs, constructor of the scheduler over an optimizer) -----
S = torch.optim.lr_scheduler
SCHEDULERS = [
    ("step", 0.5, 12, lambda o: S.StepLR(o, step_size=3, gamma=0.1)),
    ("multistep", 0.25, 12, lambda o: S.MultiStepLR(o, milestones=[2, 5, 5, 8], gamma=0.3)),
    ("exponential", 0.125, 20, lambda o: S.ExponentialLR(o, gamma=0.9)),
    ("cosine", 0.5, 35, lambda o: S.CosineAnnealingLR(o, T_max=10, eta_min=0.001)),
    ("cosine_to_zero", 0.0625, 13, lambda o: S.CosineAnnealingLR(o, T_max=12)),
    ("linear", 0.5, 8, lambda o: S.LinearLR(o, start_factor=0.25, end_factor=1.0, total_iters=4)),
    ("linear_down", 0.25, 9, lambda o: S.LinearLR(o, start_factor=1.0 / 3, end_factor=0.5, total_iters=5)),
    ("onecycle", 1.0, 21, lambda o: S.OneCycleLR(o, max_lr=0.1, total_steps=20, cycle_momentum=False)),
    ("onecycle_linear", 1.0, 18, lambda o: S.OneCycleLR(o, max_lr=0.05, total_steps=17, pct_start=0.25, anneal_strategy="linear", cycle_momentum=False)),
    ("onecycle_three", 1.0, 31, lambda o: S.OneCycleLR(o, max_lr=0.2, total_steps=30, three_phase=True, div_factor=10.0, final_div_factor=100.0, cycle_momentum=False)),
    ("onecycle_three_linear", 1.0, 25, lambda o: S.OneCycleLR(o, max_lr=0.3, total_steps=24, pct_start=0.4, three_phase=True, anneal_strategy="linear", cycle_momentum=False)),
    # added later (schedulers draw nothing from the generator, so the data after them is unchanged)
    ("sequential_warmup_cosine", 0.5, 16, lambda o: S.SequentialLR(o, [S.LinearLR(o, start_factor=0.25, total_iters=4), S.CosineAnnealingLR(o, T_max=8, eta_min=0.01)], milestones=[4])),
    ("sequential_three", 0.25, 18, lambda o: S.SequentialLR(o, [S.StepLR(o, step_size=2, gamma=0.5), S.ExponentialLR(o, gamma=0.9), S.MultiStepLR(o, milestones=[1, 3], gamma=0.1)], milestones=[5, 11])),
    ("sequential_same_milestone", 0.125, 10, lambda o: S.SequentialLR(o, [S.ExponentialLR(o, gamma=0.5), S.LinearLR(o, start_factor=0.5, total_iters=2), S.StepLR(o, step_size=3, gamma=0.1)], milestones=[3, 3])),
]
for case, base, epochs, make in SCHEDULERS:
    assert float(np.float32(base)) == base, "base rates must be exact in float32"
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=base)
    sched = make(opt)
    rates = [sched.get_last_lr()[0]]
    for _ in range(epochs - 1):
        opt.step()
        sched.step()
        rates.append(sched.get_last_lr()[0])
    bits = np.array(rates, dtype=np.float64).view(np.uint64)
    out[f"{case}_hi"] = torch.from_numpy((bits >> np.uint64(32)).astype(np.uint32).view(np.int32))
    out[f"{case}_lo"] = torch.from_numpy((bits & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.int32))


# ----- clipping -----
shapes = [(3, 4), (5,), (2, 2)]
grads = [O.normal(s, scale=0.7) for s in shapes]
for i, g in enumerate(grads):
    out[f"clip_g{i}"] = g
CLIPS = [("norm2", 1.0, 2.0), ("norm_inf", 0.5, float("inf")), ("norm1", 2.0, 1.0), ("norm2_below", 100.0, 2.0)]
for case, max_norm, norm_type in CLIPS:
    ps = [torch.zeros(s, requires_grad=True) for s in shapes]
    for p, g in zip(ps, grads):
        p.grad = g.clone()
    total = torch.nn.utils.clip_grad_norm_(ps, max_norm, norm_type=norm_type)
    out[f"{case}_norm"] = total.reshape(1)
    for i, p in enumerate(ps):
        out[f"{case}_g{i}"] = p.grad
ps = [torch.zeros(s, requires_grad=True) for s in shapes]
for p, g in zip(ps, grads):
    p.grad = g.clone()
torch.nn.utils.clip_grad_value_(ps, 0.3)
for i, p in enumerate(ps):
    out[f"value_g{i}"] = p.grad

O.save({"torch": torch.__version__, "tool": "tools/oracle_optim.py"})

# ----- a PyTorch state dict with batch norm's num_batches_tracked (int64 scalar) -----
model = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 1), torch.nn.BatchNorm2d(3))
with torch.no_grad():
    for _ in range(2):
        model(O.normal((4, 2, 3, 3)))
bn_path = O.path.replace("optim.safetensors", "batchnorm_state.safetensors")
save_file({k: v.contiguous() for k, v in model.state_dict().items()}, bn_path, metadata={"tool": "tools/oracle_optim.py"})
print(f"wrote {bn_path}: {sorted(model.state_dict())}")
