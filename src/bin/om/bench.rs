//! `om bench`: kernel benchmarks printing one `key=value` line per measurement (median of
//! repetitions), for same-run comparison with PyTorch by the scripts in `tools/`.
//!
//! - `om bench gemm --m M --k K --n N --threads T --mode fast|exact [--path P] [--reps R]
//!   [--ta] [--tb]`: `--ta` stores A as the transpose of a row-major `k × m` matrix (as in
//!   `xᵀ·g`), `--tb` B as the transpose of a row-major `n × k` matrix (as in `x·Wᵀ`); the
//!   GEMM reads them in place (`tools/compare.sh`).
//! - `om bench step --model convnet|encoder|crnn_ctc --threads T --mode fast|exact
//!   [--steps N] [--warmup W]`: the training steps of `shared/BENCHMARKS.md`, printing
//!   `MODEL threads=T mode=M median_ms=X min_ms=Y` (`tools/compare_steps.sh`).
//! - `om bench conv ...`: the convnet benchmark's convolutions (`bench_conv.rs`).
//! - `om bench norm-pool ...`: pooling and normalisation on the benchmark shapes
//!   ([`norm_pool`]).
//! - `om bench lstm|attention ...`: crnn_ctc's LSTM stack and the encoder's attention
//!   (`bench_layers.rs`, `tools/bench_layers_torch.py`).
//! - `om bench memory --model convnet|encoder|crnn_ctc ...`: pool, heap and RSS figures of a
//!   warm step inside an activation scope (`bench_memory.rs`, `docs/memory.md`).

use onemodel::core::kernels::gemm::{gemm_mat, MatMut, MatRef};
use onemodel::ops::models::benchmarks::{time_steps, BenchModel, BenchStep};
use onemodel::Compute;
use onemodel::{compute::Settings, Error, KernelPath, Mode, Result};
use std::time::Instant;

mod norm_pool;

/// Runs `om bench <what> ...`.
pub fn run(args: &[String]) -> Result<()> {
    match args.first().map(String::as_str) {
        Some("gemm") => gemm_bench(&args[1..]),
        Some("step") => step_bench(&args[1..]),
        Some("conv") => super::bench_conv::run(&args[1..]),
        Some("norm-pool") => norm_pool::run(&args[1..]),
        Some("memory") => crate::bench_memory::run(&args[1..]),
        Some(what @ ("lstm" | "attention")) => crate::bench_layers::run(what, &args[1..]),
        other => Err(Error::argument(
            "bench",
            format!("unknown benchmark {other:?}; available: gemm, step, conv, norm-pool, lstm, attention, memory"),
        )),
    }
}

fn gemm_bench(args: &[String]) -> Result<()> {
    let (mut m, mut k, mut n, mut reps) = (512usize, 512usize, 512usize, 15usize);
    let mut settings = Settings { mode: Mode::Fast, threads: 1, path: KernelPath::best() };
    let (mut ta, mut tb) = (false, false);
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        if flag == "--ta" || flag == "--tb" {
            (ta, tb) = (ta || flag == "--ta", tb || flag == "--tb");
            continue;
        }
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
    let am = if ta { MatRef::row_major(&a, k, m).t() } else { MatRef::row_major(&a, m, k) };
    let bm = if tb { MatRef::row_major(&b, n, k).t() } else { MatRef::row_major(&b, k, n) };
    let mut call = || gemm_mat(settings, am, bm, MatMut::row_major(&mut c, m, n));
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
        "gemm m={m} k={k} n={n}{}{} threads={} mode={} path={} gflops={:.1}",
        if ta { " ta=1" } else { "" },
        if tb { " tb=1" } else { "" },
        settings.threads,
        settings.mode,
        settings.path,
        rates[rates.len() / 2]
    );
    Ok(())
}

/// `om bench step`: median and minimum wall time of the benchmark training steps.
fn step_bench(args: &[String]) -> Result<()> {
    let (mut model, mut threads, mut mode, mut steps, mut warmup) = (None, 1usize, Mode::Fast, 20usize, 5usize);
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let v = it.next().ok_or_else(|| Error::argument("bench", format!("{flag} needs a value")))?;
        let bad = || Error::argument("bench", format!("invalid value `{v}` for {flag}"));
        let num = || v.parse::<usize>().map_err(|_| bad());
        match flag.as_str() {
            "--model" => model = Some(BenchModel::parse(v).ok_or_else(bad)?),
            "--threads" => threads = num()?,
            "--mode" => mode = Mode::parse(v).ok_or_else(bad)?,
            "--steps" => steps = num()?,
            "--warmup" => warmup = num()?,
            _ => return Err(Error::argument("bench", format!("unknown option `{flag}`"))),
        }
    }
    let model = model.ok_or_else(|| Error::argument("bench", "--model convnet|encoder|crnn_ctc is required"))?;
    Compute::set_threads(threads)?;
    Compute::set_mode(mode);
    let step = BenchStep::new(model, 0)?;
    let mut times = time_steps(&step, warmup, steps)?;
    times.sort_by(f64::total_cmp);
    println!("{} threads={threads} mode={mode} median_ms={:.2} min_ms={:.2}", model.name(), times[times.len() / 2], times[0]);
    Ok(())
}
