//! `om bench gemm --m M --k K --n N [--threads T] [--mode fast|exact] [--path P] [--reps R]
//! [--ta] [--tb]`: GFLOP/s of one product (median of R repetitions of about 20 ms each).
//! `--ta` stores A as the transpose of a row-major `k × m` matrix (as in `xᵀ·g`), `--tb` B
//! as the transpose of a row-major `n × k` matrix (as in `x·Wᵀ`); the GEMM reads them in
//! place. Prints `gemm m=M k=K n=N [ta=1] [tb=1] threads=T mode=M path=P gflops=G`.

use super::{calls_per_20ms, time_ms, Flags};
use onemodel::core::kernels::gemm::{gemm, MatMut, MatRef};
use onemodel::Result;

pub fn run(args: &[String]) -> Result<()> {
    let flags = Flags::parse(args, &["--m", "--k", "--n", "--threads", "--mode", "--path", "--reps"], &["--ta", "--tb"])?;
    let (m, k, n) = (flags.usize_or("--m", 512)?, flags.usize_or("--k", 512)?, flags.usize_or("--n", 512)?);
    let (reps, settings) = (flags.usize_or("--reps", 15)?, flags.settings()?);
    let (ta, tb) = (flags.switch("--ta"), flags.switch("--tb"));
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
    let ms = time_ms(0, reps, inner, call)?.median();
    println!(
        "gemm m={m} k={k} n={n}{}{} threads={} mode={} path={} gflops={:.1}",
        if ta { " ta=1" } else { "" },
        if tb { " tb=1" } else { "" },
        settings.threads,
        settings.mode,
        settings.path,
        2.0 * (m * n * k) as f64 / (ms * 1e-3) / 1e9
    );
    Ok(())
}
