"""Prints `gemm m=M k=K n=N threads=T mode=torch path=mkl gflops=X` for torch.matmul,
the same line format as `gemmbench` (median of repetitions, each >= ~20 ms of calls).

Usage: bench_matmul_torch.py [--threads T] [--reps R] [MxKxN ...]
"""
import argparse
import time

import torch


def bench(m, k, n, reps):
    a = torch.randn(m, k, dtype=torch.float32)
    b = torch.randn(k, n, dtype=torch.float32)
    c = torch.empty(m, n, dtype=torch.float32)
    torch.matmul(a, b, out=c)
    start = time.perf_counter()
    torch.matmul(a, b, out=c)
    once = max(time.perf_counter() - start, 1e-7)
    inner = min(max(int(0.02 / once), 1), 10_000)
    rates = []
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(inner):
            torch.matmul(a, b, out=c)
        rates.append(2.0 * m * n * k * inner / (time.perf_counter() - start) / 1e9)
    rates.sort()
    return rates[len(rates) // 2]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("shapes", nargs="*",
                        default=["64x64x64", "256x256x256", "512x512x512", "1024x1024x1024"])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for shape in args.shapes:
        m, k, n = (int(x) for x in shape.split("x"))
        gflops = bench(m, k, n, args.reps)
        print(f"gemm m={m} k={k} n={n} threads={args.threads} mode=torch path=mkl gflops={gflops:.1f}")


if __name__ == "__main__":
    main()
