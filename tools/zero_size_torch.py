"""Which zero-size calls PyTorch accepts and which it rejects: the evidence behind the
`EXPECTED_ERRORS` table of tests/zero_size.rs. Run with /tmp/torch/bin/python; prints one
line per call, `ok <shape>` or `raises <message>`."""
import torch
import torch.nn.functional as F

def probe(name, f):
    try:
        out = f()
        if isinstance(out, tuple):
            out = out[0]
        print(f"{name}: ok {list(out.shape)} {out.flatten()[:2].tolist()}")
    except Exception as e:
        print(f"{name}: raises {type(e).__name__}: {str(e).splitlines()[0][:110]}")

z = lambda *s: torch.zeros(*s, requires_grad=True)
probe("mean of empty", lambda: z(0, 4).mean())
probe("mean axis empty", lambda: z(3, 0).mean(1))
probe("var of empty", lambda: z(3, 0).var(1))
probe("std of empty", lambda: z(3, 0).std(1))
probe("logsumexp empty axis", lambda: z(3, 0).logsumexp(1))
probe("amax empty axis", lambda: z(3, 0).amax(1))
probe("vector_norm inf over no elements", lambda: torch.linalg.vector_norm(z(3, 0), float("inf")))
probe("vector_norm 2 over an empty axis", lambda: torch.linalg.vector_norm(z(3, 0), 2, dim=1))
probe("argmax empty axis", lambda: z(3, 0).argmax(1))
probe("max_dim empty axis", lambda: z(3, 0).max(1))
probe("mse mean empty", lambda: F.mse_loss(z(0, 4), z(0, 4)))
probe("layer_norm empty axis", lambda: F.layer_norm(z(3, 0), [0]))
probe("batch_norm train N=0", lambda: F.batch_norm(z(0, 3, 4, 4), torch.zeros(3), torch.ones(3), training=True))
probe("batch_norm train H=0", lambda: F.batch_norm(z(2, 3, 0, 4), torch.zeros(3), torch.ones(3), training=True))
probe("batch_norm eval N=0", lambda: F.batch_norm(z(0, 3, 4, 4), torch.zeros(3), torch.ones(3), training=False))
probe("conv2d batch 0", lambda: F.conv2d(z(0, 2, 5, 5), z(4, 2, 3, 3), padding=1))
probe("conv2d in_channels 0", lambda: F.conv2d(z(1, 0, 5, 5), z(4, 0, 3, 3), padding=1))
probe("conv2d out_channels 0", lambda: F.conv2d(z(1, 2, 5, 5), z(0, 2, 3, 3), padding=1))
probe("conv2d H 0", lambda: F.conv2d(z(1, 2, 0, 5), z(4, 2, 3, 3), padding=1))
probe("conv2d kernel 0", lambda: F.conv2d(z(1, 2, 5, 5), z(4, 2, 0, 3)))
probe("conv_transpose2d batch 0", lambda: F.conv_transpose2d(z(0, 2, 5, 5), z(2, 4, 3, 3)))
probe("conv_transpose2d in 0", lambda: F.conv_transpose2d(z(1, 0, 5, 5), z(0, 4, 3, 3)))
probe("conv_transpose2d out 0", lambda: F.conv_transpose2d(z(1, 2, 5, 5), z(2, 0, 3, 3)))
probe("conv_transpose2d H 0", lambda: F.conv_transpose2d(z(1, 2, 0, 5), z(2, 4, 3, 3)))
probe("max_pool2d batch 0", lambda: F.max_pool2d(z(0, 2, 5, 5), 2))
probe("max_pool2d channels 0", lambda: F.max_pool2d(z(1, 0, 5, 5), 2))
probe("max_pool2d H 0", lambda: F.max_pool2d(z(1, 2, 0, 5), 2))
probe("avg_pool2d channels 0", lambda: F.avg_pool2d(z(1, 0, 5, 5), 2))
probe("avg_pool2d H 0 pad", lambda: F.avg_pool2d(z(1, 2, 0, 5), 3, padding=1))
probe("adaptive_avg_pool2d H 0", lambda: F.adaptive_avg_pool2d(z(1, 2, 0, 5), 1))
probe("interpolate H 0", lambda: F.interpolate(z(1, 2, 0, 5), size=(3, 3), mode="bilinear"))
probe("lstm T 0", lambda: torch.nn.LSTM(3, 4)(z(0, 2, 3)))
probe("lstm batch 0", lambda: torch.nn.LSTM(3, 4)(z(5, 0, 3)))
probe("lstm input 0", lambda: torch.nn.LSTM(0, 4)(z(5, 2, 0)))
probe("gru T 0", lambda: torch.nn.GRU(3, 4)(z(0, 2, 3)))
probe("gru batch 0", lambda: torch.nn.GRU(3, 4)(z(5, 0, 3)))
probe("embedding 0 ids", lambda: F.embedding(torch.zeros(0, 3, dtype=torch.long), z(10, 4)))
probe("cross_entropy batch 0", lambda: F.cross_entropy(z(0, 5), torch.zeros(0, dtype=torch.long)))
probe("nll batch 0", lambda: F.nll_loss(z(0, 5), torch.zeros(0, dtype=torch.long)))
probe("softmax empty axis", lambda: F.softmax(z(3, 0), -1))
probe("linear in 0", lambda: F.linear(z(3, 0), z(4, 0), z(4)))
probe("attention seq 0", lambda: F.scaled_dot_product_attention(z(2, 0, 4), z(2, 0, 4), z(2, 0, 4)))
probe("attention kv 0", lambda: F.scaled_dot_product_attention(z(2, 3, 4), z(2, 0, 4), z(2, 0, 4)))
probe("ctc batch 0", lambda: F.ctc_loss(z(5, 0, 4).log_softmax(2), torch.zeros(0, 3, dtype=torch.long), torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long)))
