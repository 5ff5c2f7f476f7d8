"""The header shared by the PyTorch oracle scripts of `tools/` (oracle_*.py, autograd_oracle.py,
rnn_oracle.py): one seeded numpy generator, the dictionary of named tensors a script writes to
`testdata/<folder>/NAME.safetensors`, seeded float32 inputs, the standard way to record
gradients, and a save that gives the same bytes on every run.

Gradients: `grads` draws a fixed random weighting `r` of an output `y` (saved as `NAME_r`) and
saves the gradient of `sum(y * r)` for each input (`NAME_gINPUT`); scripts with another loss
draw their weights with `weight` and record with `grads_of`.

Every value comes from the one generator, so the order of the draws is part of the data: a
script must keep it when it is rewritten. `one_thread=True` pins PyTorch to one thread, so the
results do not depend on the machine's core count; the scripts written without it keep
PyTorch's default (their committed data was made so: e.g. mha's self-attention values change
with the thread count).

    from oracle_common import Oracle
    o = Oracle("math", seed=20261201)
    x = o.leaf(o.rng.standard_normal((3, 4)))
    o.grads("exp", torch.exp(x), [("x", x)])
    o.save({"torch": torch.__version__, "tool": "tools/oracle_math.py"})
"""
import os

import numpy as np
import torch
from safetensors.torch import save_file


class Oracle:
    """One output file (`testdata/<folder>/<name>.safetensors`) and the generator of its values."""

    def __init__(self, name, seed, folder="ops", one_thread=False):
        if one_thread:
            torch.set_num_threads(1)
        tools = os.path.dirname(os.path.abspath(__file__))
        self.path = os.path.normpath(os.path.join(tools, "..", "testdata", folder, f"{name}.safetensors"))
        self.rng = np.random.default_rng(seed)
        self.out = {}

    @staticmethod
    def f32(a):
        """A float32 tensor of `a` (numbers, lists or a float64 array, rounded to nearest)."""
        return torch.tensor(np.asarray(a, dtype=np.float32))

    def leaf(self, a):
        """`f32(a)` as a leaf that records gradients."""
        return self.f32(a).requires_grad_(True)

    def normal(self, shape, scale=1.0, offset=0.0):
        """Standard normal draws of `shape`, scaled and offset in float64, then rounded to float32."""
        return self.f32(self.rng.standard_normal(shape) * scale + offset)

    def weight(self, key, y):
        """Draws a standard normal weighting of `y`'s shape and saves it as `key`."""
        r = self.normal(tuple(y.shape))
        self.out[key] = r
        return r

    def grads_of(self, loss, inputs, prefix):
        """Saves the gradient of the scalar `loss` for each `(name, tensor)` of `inputs` as
        `prefix + name`; returns the gradients."""
        gs = torch.autograd.grad(loss, [t for _, t in inputs])
        for (n, _), g in zip(inputs, gs):
            self.out[prefix + n] = g
        return gs

    def grads(self, name, y, inputs):
        """Saves a weighting `NAME_r` of `y` and the gradients `NAME_gINPUT` of `sum(y * r)`."""
        r = self.weight(name + "_r", y)
        self.grads_of((y * r).sum(), inputs, f"{name}_g")

    def store(self, prefix, **tensors):
        """Saves each keyword's tensor as `PREFIX_KEYWORD`."""
        for k, v in tensors.items():
            self.out[f"{prefix}_{k}"] = v

    def save(self, metadata=None):
        """Writes the tensors (detached, contiguous) and prints a line saying so. Metadata of one
        key is written as given; several keys are folded into one `generator` key: safetensors
        writes several keys in a random order, which would change the file's bytes from run to
        run."""
        if metadata and len(metadata) > 1:
            metadata = {"generator": ", ".join(f"{k} {v}" for k, v in sorted(metadata.items()))}
        tensors = {k: v.detach().contiguous() for k, v in self.out.items()}
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        save_file(tensors, self.path, metadata=metadata)
        size = os.path.getsize(self.path)
        print(f"wrote {self.path}: {len(tensors)} tensors, {size} bytes, torch {torch.__version__}")
