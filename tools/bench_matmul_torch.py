"""Prints `gemm m=M k=K n=N threads=T mode=torch path=mkl gflops=X` for torch.matmul,
the same line format as `gemmbench` (median of repetitions, each >= ~20 ms of calls).

Usage: bench_matmul_torch.py [--threads T] [--reps R] [--cpu-clock] [--ta | --tb] [MxKxN ...]

--ta / --tb time a transposed operand read in place, as `om bench gemm --ta/--tb`:
A is the `.t()` view of a k x m tensor (`g.t() @ x`), or B the `.t()` view of an n x k one
(`x @ W.t()`).

--cpu-clock times by the process's CPU time divided by T (time.process_time) instead of
the wall clock: on a shared machine, the rate as if each
thread had a core to itself (MKL's OpenMP threads spin between calls, which counts).
"""
import argparse
import time

import torch


def bench(m, k, n, reps, clock=time.perf_counter, threads=1, ta=False, tb=False):
    a = torch.randn(k, m, dtype=torch.float32).t() if ta else torch.randn(m, k, dtype=torch.float32)
    b = torch.randn(n, k, dtype=torch.float32).t() if tb else torch.randn(k, n, dtype=torch.float32)
    c = torch.empty(m, n, dtype=torch.float32)
    torch.matmul(a, b, out=c)
    start = time.perf_counter()
    torch.matmul(a, b, out=c)
    once = max(time.perf_counter() - start, 1e-7)
    inner = min(max(int(0.02 / once), 1), 10_000)
    rates = []
    for _ in range(reps):
        start = clock()
        for _ in range(inner):
            torch.matmul(a, b, out=c)
        spent = max((clock() - start) / threads, 1e-9)
        rates.append(2.0 * m * n * k * inner / spent / 1e9)
    rates.sort()
    return rates[len(rates) // 2]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--cpu-clock", action="store_true")
    layout = parser.add_mutually_exclusive_group()
    layout.add_argument("--ta", action="store_true")
    layout.add_argument("--tb", action="store_true")
    parser.add_argument("shapes", nargs="*",
                        default=["64x64x64", "256x256x256", "512x512x512", "1024x1024x1024"])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for shape in args.shapes:
        m, k, n = (int(x) for x in shape.split("x"))
        if args.cpu_clock:
            gflops = bench(m, k, n, args.reps, time.process_time, args.threads, args.ta, args.tb)
        else:
            gflops = bench(m, k, n, args.reps, ta=args.ta, tb=args.tb)
        clock = " clock=cpu" if args.cpu_clock else ""
        trans = " ta=1" if args.ta else " tb=1" if args.tb else ""
        print(f"gemm m={m} k={k} n={n} threads={args.threads} mode=torch path=mkl{trans}{clock} gflops={gflops:.1f}")


if __name__ == "__main__":
    main()
