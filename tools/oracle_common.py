"""Helpers shared by the PyTorch oracle scripts of `tools/`: one seeded numpy generator,
the dictionary of named tensors a script writes to `testdata/ops/NAME.safetensors`, and the
standard way to record gradients (a fixed random weighting `r` of the output, saved as
`NAME_r`, and the gradient of `sum(y * r)` for each input, saved as `NAME_gINPUT`).

    from oracle_common import Oracle
    o = Oracle("math", seed=20261201)
    x = o.leaf(o.rng.standard_normal((3, 4)))
    o.grads("exp", torch.exp(x), [("x", x)])
    o.save("tools/oracle_math.py")
"""
import os

import numpy as np
import torch
from safetensors.torch import save_file


class Oracle:
    def __init__(self, name, seed):
        self.path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata", "ops", f"{name}.safetensors")
        self.rng = np.random.default_rng(seed)
        self.out = {}

    @staticmethod
    def f32(a):
        return torch.tensor(np.asarray(a, dtype=np.float32))

    def leaf(self, a):
        return self.f32(a).requires_grad_(True)

    def grads(self, name, y, inputs):
        r = self.f32(self.rng.standard_normal(y.shape))
        self.out[name + "_r"] = r
        gs = torch.autograd.grad((y * r).sum(), [t for _, t in inputs])
        for (n, _), g in zip(inputs, gs):
            self.out[f"{name}_g{n}"] = g.detach().contiguous()

    def store(self, prefix, **tensors):
        for k, v in tensors.items():
            self.out[f"{prefix}_{k}"] = v.detach().contiguous()

    def save(self, metadata=None):
        """Writes the tensors. Metadata is folded into one key: safetensors writes several
        keys in a random order, which would change the file's bytes from run to run."""
        if metadata:
            metadata = {"generator": ", ".join(f"{k} {v}" for k, v in sorted(metadata.items()))}
        save_file(self.out, self.path, metadata=metadata)
