//! `om bench`: kernel benchmarks printing one `key=value` line per measurement (median of
//! repetitions), for same-run comparison with PyTorch by `tools/compare.sh`.
//!
//! `om bench gemm --m M --k K --n N --threads T --mode fast|exact [--path P] [--reps R]`;
//! `om bench lstm|attention` are in `bench_layers.rs`.

use onemodel::core::kernels::gemm::gemm;
use onemodel::{compute::Settings, Error, KernelPath, Mode, Result};
use std::time::Instant;

/// Runs `om bench <what> ...`.
pub fn run(args: &[String]) -> Result<()> {
    match args.first().map(String::as_str) {
        Some("gemm") => gemm_bench(&args[1..]),
        Some(what @ ("lstm" | "attention")) => crate::bench_layers::run(what, &args[1..]),
        other => Err(Error::argument("bench", format!("unknown benchmark {other:?}; available: gemm, lstm, attention"))),
    }
}

fn gemm_bench(args: &[String]) -> Result<()> {
    let (mut m, mut k, mut n, mut reps) = (512usize, 512usize, 512usize, 15usize);
    let mut settings = Settings { mode: Mode::Fast, threads: 1, path: KernelPath::best() };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let v = it.next().ok_or_else(|| Error::argument("bench", format!("{flag} needs a value")))?;
        let bad = || Error::argument("bench", format!("invalid value `{v}` for {flag}"));
        let num = || v.parse::<usize>().map_err(|_| bad());
        match flag.as_str() {
            "--m" => m = num()?,
            "--k" => k = num()?,
            "--n" => n = num()?,
            "--reps" => reps = num()?.max(1),
            "--threads" => settings.threads = num()?.clamp(1, onemodel::compute::MAX_THREADS),
            "--mode" => settings.mode = Mode::parse(v).ok_or_else(bad)?,
            "--path" => {
                settings.path = KernelPath::parse(v).ok_or_else(bad)?;
                if !settings.path.is_supported() {
                    return Err(Error::argument("bench", format!("path {v} is not supported by this CPU")));
                }
            }
            _ => return Err(Error::argument("bench", format!("unknown option `{flag}`"))),
        }
    }
    let a: Vec<f32> = (0..m * k).map(|i| ((i * 7 % 13) as f32 - 6.0) / 8.0).collect();
    let b: Vec<f32> = (0..k * n).map(|i| ((i * 5 % 11) as f32 - 5.0) / 8.0).collect();
    let mut c = vec![0.0f32; m * n];
    let mut call = || gemm(settings, m, k, n, &a, k, &b, n, &mut c, n);
    let flops = 2.0 * (m * n * k) as f64;
    let start = Instant::now();
    call();
    let once = start.elapsed().as_secs_f64().max(1e-7);
    let inner = ((0.02 / once) as usize).clamp(1, 10_000);
    let mut rates: Vec<f64> = (0..reps)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..inner {
                call();
            }
            flops * inner as f64 / start.elapsed().as_secs_f64() / 1e9
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    println!(
        "gemm m={m} k={k} n={n} threads={} mode={} path={} gflops={:.1}",
        settings.threads,
        settings.mode,
        settings.path,
        rates[rates.len() / 2]
    );
    Ok(())
}
