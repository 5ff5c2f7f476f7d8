"""Oracle for ctc_loss (PyTorch CPU, black box).

Builds seeded logits z, log-probabilities lp = log_softmax(z) (float32) and targets, runs
torch.nn.functional.ctc_loss with every reduction, with and without zero_infinity, and
writes to testdata/ops/ctc.safetensors:

- `<case>_lp`, `_targets` (int64, padded [B, S] or concatenated 1-d), `_il`, `_tl`, and
  `_blank` (one int64 value);
- `<case>_<red>[_zi]_y`: the loss for reduction none/sum/mean (`_zi`: zero_infinity);
- `<case>_<red>_gz`: the gradient of `sum(y * r)` (r = `<case>_none_r` for reduction none,
  1 otherwise) with respect to the LOGITS z through torch's log_softmax, with
  zero_infinity for cases holding an impossible alignment;
- `<case>_<red>_glp`: PyTorch's own gradient with respect to lp, which adds exp(lp)·w on
  every used frame to the true partial derivative;
- `<case>_<red>_glp64`, `_gz64`: the same two gradients computed by PyTorch in float64 on
  the same float32 values (rounded to float32 when stored).

The `#[cfg(test)]` module of om-ops/src/losses/ctc.rs reads it.

Usage: /tmp/torch/bin/python tools/oracle_ctc.py   (PyTorch 2.15.0, numpy, safetensors)
"""
import torch
import torch.nn.functional as F
from oracle_common import Oracle

O = Oracle("ctc", seed=20240717)
out = O.out

CASES = {
    # Repeated labels, unequal input and target lengths, an empty target, padded targets.
    "pad": dict(T=12, B=4, C=6, blank=0, il=[12, 9, 7, 4], tl=[5, 3, 0, 2],
                targets=[[1, 1, 2, 5, 5], [3, 4, 3, 0, 0], [0, 0, 0, 0, 0], [2, 2, 0, 0, 0]]),
    # Non-zero blank, concatenated targets; sequence 1 is impossible ([1, 1] needs 3 frames,
    # it has 2), sequence 2 has input length 0 and an empty target (loss 0), sequence 3
    # has input length 0 and a target (impossible).
    "cat": dict(T=7, B=5, C=5, blank=3, il=[7, 2, 0, 0, 6], tl=[3, 2, 0, 1, 4],
                targets=[0, 4, 4, 1, 1, 2, 2, 0, 2, 1]),
}

for name, c in CASES.items():
    T, B, C = c["T"], c["B"], c["C"]
    z = O.normal((T, B, C), scale=1.5)
    lp = torch.log_softmax(z, dim=2)
    targets = torch.tensor(c["targets"], dtype=torch.int64)
    il = torch.tensor(c["il"], dtype=torch.int64)
    tl = torch.tensor(c["tl"], dtype=torch.int64)
    out.update({f"{name}_lp": lp, f"{name}_targets": targets, f"{name}_il": il, f"{name}_tl": tl,
                f"{name}_blank": torch.tensor([c["blank"]], dtype=torch.int64)})
    r = O.normal(B)
    out[f"{name}_none_r"] = r
    for red in ["none", "sum", "mean"]:
        for zi in [False, True]:
            y = F.ctc_loss(lp, targets, il, tl, blank=c["blank"], reduction=red, zero_infinity=zi)
            out[f"{name}_{red}{'_zi' if zi else ''}_y"] = y.reshape(-1) if red == "none" else y.reshape(())
        w = r if red == "none" else torch.tensor(1.0)
        # Gradient with respect to the logits through log_softmax.
        zl = z.clone().requires_grad_(True)
        y = F.ctc_loss(torch.log_softmax(zl, dim=2), targets, il, tl, blank=c["blank"], reduction=red, zero_infinity=True)
        O.grads_of((y * w).sum(), [("gz", zl)], f"{name}_{red}_")
        # PyTorch's own gradient with respect to lp.
        lpl = lp.clone().requires_grad_(True)
        y = F.ctc_loss(lpl, targets, il, tl, blank=c["blank"], reduction=red, zero_infinity=True)
        O.grads_of((y * w).sum(), [("glp", lpl)], f"{name}_{red}_")
        # The same in float64 on the same (float32) log-probabilities: PyTorch's float32
        # kernel itself deviates from it by up to 1.5e-6 scaled here, so the 1e-6 agreement
        # is checked against this one. The logits gradient applies PyTorch's log_softmax
        # backward (in float64) to it, at lp = log_softmax(z).
        lp64 = lp.double().requires_grad_(True)
        y = F.ctc_loss(lp64, targets, il, tl, blank=c["blank"], reduction=red, zero_infinity=True)
        g64 = torch.autograd.grad((y * w.double()).sum(), [lp64])[0]
        out[f"{name}_{red}_glp64"] = g64.float()
        out[f"{name}_{red}_gz64"] = torch._log_softmax_backward_data(g64, lp.double(), 2, torch.float64).float()

O.save({"torch": torch.__version__, "tool": "tools/oracle_ctc.py"})
for k in sorted(out):
    if k.endswith("_y"):
        print(k, out[k].tolist())
