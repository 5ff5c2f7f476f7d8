//! `om bench gemm --m M --k K --n N [--threads T] [--mode fast|exact] [--path P] [--reps R]
//! [--ta] [--tb]`: GFLOP/s of one product: the median of R repetitions of about 20 ms each
//! (`gflops`) and the fastest of them (`gflops_best`, the one a busy machine interrupted least).
//! `--ta` stores A as the transpose of a row-major `k × m` matrix (as in `xᵀ·g`), `--tb` B
//! as the transpose of a row-major `n × k` matrix (as in `x·Wᵀ`); the GEMM reads them in
//! place. Prints `gemm m=M k=K n=N [ta=1] [tb=1] threads=T mode=M path=P gflops=G
//! gflops_best=B`.

use super::{calls_per_20ms, time_ms};
use crate::args::{parse_count, Failure, KernelArgs, Outcome};
use clap::Args;
use onemodel::core::kernels::gemm::{gemm, MatMut, MatRef};
use std::io::Write;

/// Options of `om bench gemm`.
#[derive(Args, Debug)]
pub struct GemmArgs {
    /// Rows of A and C
    #[arg(long, default_value_t = 512, value_parser = parse_count)]
    m: usize,
    /// Columns of A, rows of B
    #[arg(long, default_value_t = 512, value_parser = parse_count)]
    k: usize,
    /// Columns of B and C
    #[arg(long, default_value_t = 512, value_parser = parse_count)]
    n: usize,
    /// Timed repetitions (the median is printed)
    #[arg(long, default_value_t = 15, value_parser = parse_count)]
    reps: usize,
    /// Store A as the transpose of a row-major k × m matrix (as in xᵀ·g)
    #[arg(long)]
    ta: bool,
    /// Store B as the transpose of a row-major n × k matrix (as in x·Wᵀ)
    #[arg(long)]
    tb: bool,
    #[command(flatten)]
    kernel: KernelArgs,
}

/// The three matrices' sizes checked before anything is allocated: each product of sizes
/// must fit, and the matrices together must fit the memory limit of the tensor pool
/// (`onemodel::core::pool::max_buffer_bytes`, the machine's memory by default) — a usage
/// error naming the sizes otherwise.
fn check_sizes(m: usize, k: usize, n: usize) -> Outcome {
    let limit = onemodel::core::pool::max_buffer_bytes();
    let bytes = [(m, k), (k, n), (m, n)].iter().try_fold(0usize, |acc, &(r, c)| r.checked_mul(c)?.checked_mul(4)?.checked_add(acc));
    match bytes {
        Some(b) if b <= limit => Ok(()),
        _ => Err(Failure::Usage(format!(
            "--m {m} --k {k} --n {n}: the matrices A (m×k), B (k×n) and C (m×n) take {} bytes, more than the memory limit of {limit} bytes",
            bytes.map_or("more than 2^64".to_string(), |b| b.to_string())
        ))),
    }
}

/// Runs `om bench gemm ...`.
pub fn run(o: &GemmArgs) -> Outcome {
    let (m, k, n, reps, ta, tb) = (o.m, o.k, o.n, o.reps, o.ta, o.tb);
    let settings = o.kernel.settings()?;
    check_sizes(m, k, n)?;
    let a: Vec<f32> = (0..m * k).map(|i| ((i * 7 % 13) as f32 - 6.0) / 8.0).collect();
    let b: Vec<f32> = (0..k * n).map(|i| ((i * 5 % 11) as f32 - 5.0) / 8.0).collect();
    let mut c = vec![0.0f32; m * n];
    let am = if ta { MatRef::row_major(&a, k, m).t() } else { MatRef::row_major(&a, m, k) };
    let bm = if tb { MatRef::row_major(&b, n, k).t() } else { MatRef::row_major(&b, k, n) };
    let mut call = || {
        gemm(settings, am, bm, MatMut::row_major(&mut c, m, n));
        Ok(())
    };
    let inner = calls_per_20ms(10_000, &mut call)?;
    let times = time_ms(0, reps, inner, call)?;
    let gflops = |ms: f64| 2.0 * (m * n * k) as f64 / (ms * 1e-3) / 1e9;
    outln!(
        "gemm m={m} k={k} n={n}{}{} threads={} mode={} path={} gflops={:.1} gflops_best={:.1}",
        if ta { " ta=1" } else { "" },
        if tb { " tb=1" } else { "" },
        settings.threads,
        settings.mode,
        settings.path,
        gflops(times.median()),
        gflops(times.min())
    );
    Ok(())
}
