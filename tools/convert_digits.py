#!/usr/bin/env python3
"""Converts the UCI optical digits set shipped in the scikit-learn wheel
(sklearn/datasets/data/digits.csv.gz: 1,797 8x8 images of pixels 0..16, last column the
label) into testdata/digits.safetensors with a fixed train/test split.

Usage: python tools/convert_digits.py [path/to/digits.csv.gz]
(default: the file inside an installed scikit-learn). Needs numpy and safetensors.
Writes: images u8 [1797, 8, 8], labels u8 [1797], train_idx / test_idx i32 (a seeded
permutation: 1,437 training and 360 test images).
"""
import gzip
import pathlib
import sys

import numpy as np
from safetensors.numpy import save_file


def main() -> None:
    if len(sys.argv) > 1:
        src = pathlib.Path(sys.argv[1])
    else:
        import sklearn  # noqa: PLC0415

        src = pathlib.Path(sklearn.__file__).parent / "datasets" / "data" / "digits.csv.gz"
    rows = np.loadtxt(gzip.open(src, "rt"), delimiter=",", dtype=np.int64)
    assert rows.shape == (1797, 65), rows.shape
    images = rows[:, :64].reshape(-1, 8, 8)
    labels = rows[:, 64]
    assert images.min() >= 0 and images.max() <= 16 and set(labels.tolist()) == set(range(10))
    perm = np.random.RandomState(0).permutation(len(labels))
    n_test = 360
    out = pathlib.Path(__file__).resolve().parent.parent / "testdata" / "digits.safetensors"
    save_file(
        {
            "images": images.astype(np.uint8),
            "labels": labels.astype(np.uint8),
            "train_idx": np.sort(perm[n_test:]).astype(np.int32),
            "test_idx": np.sort(perm[:n_test]).astype(np.int32),
        },
        str(out),
    )
    print(f"wrote {out}: {len(labels)} images, {len(labels) - n_test} train / {n_test} test")


if __name__ == "__main__":
    main()
