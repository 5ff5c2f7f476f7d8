"""Oracle for the normalisation, embedding and loss operators (PyTorch CPU, black box).

Builds seeded numpy inputs, runs torch.nn.functional.layer_norm, batch_norm (training with
running-stat updates and momentum, and eval), embedding (padding_idx, repeated ids) and
nll_loss (ignore_index, mean and sum) on them, and writes inputs, outputs, updated running
stats and the gradients of `sum(y * r)` (r seeded) to testdata/ops/norm_loss.safetensors.
The `#[cfg(test)]` modules of om-ops/src/{norm,embedding,loss}.rs read it.

Usage: /tmp/torch/bin/python tools/oracle_norm_loss.py   (PyTorch 2.15.0, numpy, safetensors)
"""
import torch
import torch.nn.functional as F
from oracle_common import Oracle

O = Oracle("norm_loss", seed=20240615)
rng, out = O.rng, O.out
f32, leaf, grads = O.f32, O.leaf, O.grads


# ----- layer_norm -----
x = leaf(rng.standard_normal((2, 3, 8)) * 2.0 + 0.5)
g = leaf(rng.standard_normal(8))
b = leaf(rng.standard_normal(8))
out.update(ln_x=x.detach(), ln_gamma=g.detach(), ln_beta=b.detach())
y = F.layer_norm(x, (8,), g, b, 1e-5)
out["ln_affine_y"] = y.detach()
grads("ln_affine", y, [("x", x), ("gamma", g), ("beta", b)])
y = F.layer_norm(x, (8,), None, None, 1e-3)
out["ln_plain_y"] = y.detach()
grads("ln_plain", y, [("x", x)])
# A transposed view: rows of xt.T, normalised over 6, gamma only.
xt = leaf(rng.standard_normal((6, 5)))
g6 = leaf(rng.standard_normal(6))
out.update(ln_t_x=xt.detach(), ln_t_gamma=g6.detach())
y = F.layer_norm(xt.t(), (6,), g6, None, 1e-5)
out["ln_t_y"] = y.detach()
grads("ln_t", y, [("x", xt), ("gamma", g6)])
# Long rows with a large offset (tests the accumulation of the statistics).
xb = f32(rng.standard_normal((4, 300)) * 3.0 + 100.0)
out["ln_big_x"] = xb
out["ln_big_y"] = F.layer_norm(xb, (300,), None, None, 1e-5)

# ----- batch_norm2d -----
x = leaf(rng.standard_normal((4, 3, 5, 5)) * 2.0 + 1.0)
g = leaf(rng.standard_normal(3))
b = leaf(rng.standard_normal(3))
rm0 = f32(rng.standard_normal(3) * 0.5)
rv0 = f32(rng.uniform(0.5, 2.0, 3))
out.update(bn_x=x.detach(), bn_gamma=g.detach(), bn_beta=b.detach(), bn_rm0=rm0, bn_rv0=rv0)
rm, rv = rm0.clone(), rv0.clone()
y = F.batch_norm(x, rm, rv, g, b, training=True, momentum=0.1, eps=1e-5)
out.update(bn_train_y=y.detach(), bn_train_rm=rm, bn_train_rv=rv)
grads("bn_train", y, [("x", x), ("gamma", g), ("beta", b)])
y = F.batch_norm(x, rm0, rv0, g, b, training=False, momentum=0.1, eps=1e-5)
out["bn_eval_y"] = y.detach()
grads("bn_eval", y, [("x", x), ("gamma", g), ("beta", b)])
# Training without affine parameters or running stats, another eps.
y = F.batch_norm(x, None, None, None, None, training=True, momentum=0.3, eps=1e-3)
out["bn_plain_y"] = y.detach()
grads("bn_plain", y, [("x", x)])
# Training with running stats but no affine, momentum 0.3.
rm, rv = rm0.clone(), rv0.clone()
out["bn_m3_y"] = F.batch_norm(x.detach(), rm, rv, None, None, training=True, momentum=0.3, eps=1e-5)
out.update(bn_m3_rm=rm, bn_m3_rv=rv)

# ----- embedding -----
w = leaf(rng.standard_normal((10, 4)))
ids = torch.tensor([[1, 2, 7, 2, 0], [9, 7, 7, 2, 3], [4, 1, 1, 8, 2]], dtype=torch.int64)
out.update(emb_w=w.detach(), emb_ids=ids)
y = F.embedding(ids, w, padding_idx=2)
out["emb_pad_y"] = y.detach()
grads("emb_pad", y, [("w", w)])
y = F.embedding(ids, w)
out["emb_nopad_y"] = y.detach()
grads("emb_nopad", y, [("w", w)])

# ----- nll_loss -----
logits = rng.standard_normal((7, 5)) * 2.0
lp = leaf(torch.log_softmax(f32(logits), dim=1).numpy())
t = torch.tensor([1, -100, 4, 0, -100, 3, 1], dtype=torch.int64)
out.update(nll_logp=lp.detach(), nll_t=t)
for red in ["mean", "sum"]:
    y = F.nll_loss(lp, t, reduction=red, ignore_index=-100)
    out[f"nll_{red}_y"] = y.detach().reshape(())
    O.grads_of(y, [("glogp", lp)], f"nll_{red}_")
# A valid class as ignore index.
y = F.nll_loss(lp, t.clamp(min=0), reduction="mean", ignore_index=1)
out["nll_ign1_t"] = t.clamp(min=0)
out["nll_ign1_y"] = y.detach().reshape(())
# Every row ignored: mean is NaN (0/0), sum is 0.
tall = torch.full((7,), -100, dtype=torch.int64)
out["nll_all_t"] = tall
out["nll_all_mean_y"] = F.nll_loss(lp.detach(), tall, reduction="mean").reshape(())
out["nll_all_sum_y"] = F.nll_loss(lp.detach(), tall, reduction="sum").reshape(())

O.save({"torch": torch.__version__, "tool": "tools/oracle_norm_loss.py"})
print("nll_all_mean_y =", out["nll_all_mean_y"].item())
