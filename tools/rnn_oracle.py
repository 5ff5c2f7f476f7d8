"""Oracle models for the recurrent, CTC and spatial operators (PyTorch CPU, black box; spec section 6).

Builds three small models from seeded numpy weights, runs one training step's forward and
backward in PyTorch and writes weights, inputs, loss and every parameter and input gradient
to testdata/autograd/<model>.safetensors (key convention: see tools/autograd_oracle.py):

- `crnn`: two conv-relu-pool stages -> collapse height into channels ([W, B, C*H]) ->
  2-layer bidirectional LSTM -> Linear -> log-softmax -> CTC loss (blank 0, unequal input
  and target lengths, a repeated label; the training loss is reduction mean). Also stores
  the CTC losses of the same log-probabilities for reductions none/mean/sum
  (`out.ctc_<reduction>`), and for a batch with an impossible alignment
  (`c.zi_*`) the losses with and without zero_infinity (`out.zi_none`, `out.zi_none_inf`).
- `gru`: bidirectional 2-layer batch-first GRU with initial states; loss
  `sum(y * c.ry) + sum(h_n * c.rh)`.
- `decoder`: conv -> ReLU -> ConvTranspose2d (stride 2, padding 1, output padding 1,
  groups 2) -> ReLU -> ConvTranspose2d (kernel 2, stride 1) -> nearest, bilinear and
  bilinear-align-corners resizes; loss `sum(y * c.r) + sum(y * y)`.

Recurrent parameters keep PyTorch's names (`p.lstm.weight_ih_l0_reverse`, ...).

Usage: /tmp/torch/bin/python tools/rnn_oracle.py   (PyTorch 2.15.0, numpy, safetensors)
Running it twice gives bit-identical files.
"""
import torch
import torch.nn.functional as F

from autograd_oracle import Model

TOOL = "rnn_oracle.py"


def rnn_params(m, module, prefix, scale):
    """Seeds the module's parameters and registers them as leaves `p.<prefix>.<name>`."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(m.f32(m.rng.uniform(-scale, scale, tuple(p.shape))))
            m.add_leaf(f"p.{prefix}.{name}", p)


def crnn():
    m = Model("crnn", 20250603, TOOL)
    B, C = 2, 5
    x = m.x("image", (B, 1, 8, 20))
    w1, b1 = m.p("conv1_w", (4, 1, 3, 3), 0.4), m.p("conv1_b", (4,), 0.1)
    w2, b2 = m.p("conv2_w", (6, 4, 3, 3), 0.25), m.p("conv2_b", (6,), 0.1)
    lstm = torch.nn.LSTM(12, 8, num_layers=2, bidirectional=True)
    rnn_params(m, lstm, "lstm", 0.35)
    fw, fb = m.p("fc_w", (C, 16), 0.4), m.p("fc_b", (C,), 0.1)
    targets = m.c("targets", [[1, 2, 2, 3], [4, 1, 0, 0]], torch.int64)
    il = m.c("input_lengths", [10, 7], torch.int64)
    tl = m.c("target_lengths", [4, 2], torch.int64)
    h = F.max_pool2d(F.relu(F.conv2d(x, w1, b1, padding=1)), 2, 2)  # [2, 4, 4, 10]
    h = F.max_pool2d(F.relu(F.conv2d(h, w2, b2, padding=1)), (2, 1), (2, 1))  # [2, 6, 2, 10]
    n, c, hh, w = h.shape
    seq = h.permute(3, 0, 1, 2).reshape(w, n, c * hh)  # [10, 2, 12]
    y, _ = lstm(seq)  # [10, 2, 16]
    lp = F.log_softmax(F.linear(y, fw, fb), dim=2)  # [10, 2, 5]
    for red in ("none", "mean", "sum"):
        m.out[f"out.ctc_{red}"] = F.ctc_loss(lp, targets, il, tl, blank=0, reduction=red).reshape(-1)
    # Sequence 1 needs 4 frames for [4, 4, 1] (a blank between the repeated 4s) and has 3.
    zt = m.c("zi_targets", [[1, 2, 2, 3], [4, 4, 1, 0]], torch.int64)
    zil = m.c("zi_input_lengths", [10, 3], torch.int64)
    ztl = m.c("zi_target_lengths", [4, 3], torch.int64)
    m.out["out.zi_none"] = F.ctc_loss(lp, zt, zil, ztl, blank=0, reduction="none", zero_infinity=True)
    m.out["out.zi_none_inf"] = F.ctc_loss(lp, zt, zil, ztl, blank=0, reduction="none", zero_infinity=False)
    loss = F.ctc_loss(lp, targets, il, tl, blank=0, reduction="mean")
    m.write(loss)


def gru():
    m = Model("gru", 20250604, TOOL)
    B, T, I, H, L = 3, 5, 4, 6, 2
    x = m.x("seq", (B, T, I))
    h0 = m.x("h0", (2 * L, B, H), 0.5)
    net = torch.nn.GRU(I, H, num_layers=L, bidirectional=True, batch_first=True)
    rnn_params(m, net, "gru", 0.4)
    ry = m.c("ry", m.rng.standard_normal((B, T, 2 * H)), torch.float32)
    rh = m.c("rh", m.rng.standard_normal((2 * L, B, H)), torch.float32)
    y, hn = net(x, h0)
    loss = (y * ry).sum() + (hn * rh).sum()
    m.write(loss)


def decoder():
    m = Model("decoder", 20250605, TOOL)
    z = m.x("z", (2, 4, 5, 5))
    w0, b0 = m.p("conv_w", (6, 4, 3, 3), 0.3), m.p("conv_b", (6,), 0.1)
    w1, b1 = m.p("up1_w", (6, 3, 3, 3), 0.3), m.p("up1_b", (6,), 0.1)
    w2, b2 = m.p("up2_w", (6, 3, 2, 2), 0.3), m.p("up2_b", (3,), 0.1)
    r = m.c("r", m.rng.standard_normal((2, 3, 6, 8)), torch.float32)
    h = F.relu(F.conv2d(z, w0, b0, padding=1))  # [2, 6, 5, 5]
    h = F.relu(F.conv_transpose2d(h, w1, b1, stride=2, padding=1, output_padding=1, groups=2))  # [2, 6, 10, 10]
    h = F.conv_transpose2d(h, w2, b2, stride=1)  # [2, 3, 11, 11]
    h = F.interpolate(h, size=(7, 9), mode="nearest")
    h = F.interpolate(h, size=(13, 10), mode="bilinear", align_corners=False)
    h = F.interpolate(h, size=(6, 8), mode="bilinear", align_corners=True)
    loss = (h * r).sum() + (h * h).sum()
    m.write(loss)


if __name__ == "__main__":
    crnn()
    gru()
    decoder()
