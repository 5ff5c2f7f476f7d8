//! `om bench memory --model convnet|encoder|crnn_ctc [--threads T] [--mode M] [--steps N]
//! [--warmup W] [--cache-limit auto|unlimited|BYTES]`: the memory of the benchmark training
//! steps (`shared/BENCHMARKS.md`), each run inside an [`ActivationScope`] after `W` (10)
//! warm-up steps (enough for the kernels' helper threads to have grown their thread-local
//! packing scratch: they join calls opportunistically), printing
//!
//! `MODEL pool_allocs_per_step=A outstanding_delta=B heap_allocs_per_step=C
//! heap_bytes_per_step=D peak_outstanding_bytes=E peak_rss_kib=F pooled_bytes_kept=G`
//!
//! A and C/D are means over the `N` measured steps (heap figures count every thread of the
//! process, through the counting allocator `om` installs); B is the change of the pool's
//! outstanding bytes over them; E is the largest step peak; F is the process's peak
//! resident set (`VmHWM`, Linux; 0 elsewhere); G is what the pool keeps cached after the
//! last step. `--cache-limit unlimited` reproduces the pool before it had a limit.
//!
//! `--then MODEL2` then runs `pool::RECENT_STEPS + 2` scoped steps of a second model (after
//! dropping the first) and prints `then=MODEL2 pooled_bytes_kept=G2 process_rss_kib=R`: what
//! the pool still caches once a process has moved on (`VmRSS` now).

use onemodel::core::{alloc_count, pool, ActivationScope};
use onemodel::ops::models::benchmarks::{BenchModel, BenchStep};
use onemodel::{Compute, Error, Mode, Result};

/// Runs `om bench memory ...`.
pub fn run(args: &[String]) -> Result<()> {
    let (mut model, mut threads, mut mode, mut steps, mut warmup) = (None, 1usize, Mode::Fast, 5u64, 10usize);
    let (mut limit, mut then) = (None, None);
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let v = it.next().ok_or_else(|| Error::argument("bench", format!("{flag} needs a value")))?;
        let bad = || Error::argument("bench", format!("invalid value `{v}` for {flag}"));
        match flag.as_str() {
            "--model" => model = Some(BenchModel::parse(v).ok_or_else(bad)?),
            "--threads" => threads = v.parse().map_err(|_| bad())?,
            "--mode" => mode = Mode::parse(v).ok_or_else(bad)?,
            "--steps" => steps = v.parse().ok().filter(|&n| n > 0).ok_or_else(bad)?,
            "--warmup" => warmup = v.parse().map_err(|_| bad())?,
            "--then" => then = Some(BenchModel::parse(v).ok_or_else(bad)?),
            "--cache-limit" => {
                limit = match v.as_str() {
                    "auto" => None,
                    "unlimited" => Some(u64::MAX),
                    n => Some(n.parse().map_err(|_| bad())?),
                }
            }
            _ => return Err(Error::argument("bench", format!("unknown option `{flag}`"))),
        }
    }
    let model = model.ok_or_else(|| Error::argument("bench", "--model convnet|encoder|crnn_ctc is required"))?;
    if !alloc_count::is_installed() {
        return Err(Error::argument("bench", "heap figures need the counting allocator installed in the binary"));
    }
    Compute::set_threads(threads)?;
    Compute::set_mode(mode);
    pool::set_cache_limit(limit);
    let step = BenchStep::new(model, 0)?;
    let scoped = || -> Result<_> {
        let scope = ActivationScope::new();
        step.step()?;
        Ok(scope.finish())
    };
    for _ in 0..warmup {
        scoped()?;
    }
    let (pool0, heap0) = (pool::stats(), alloc_count::process());
    let mut peak = 0;
    for _ in 0..steps {
        let s = scoped()?;
        if s.live_tensors_created != 0 {
            return Err(Error::argument("bench", format!("a step left {} tensors alive", s.live_tensors_created)));
        }
        peak = peak.max(s.peak_outstanding_bytes);
    }
    let (pool1, heap) = (pool::stats(), alloc_count::process().since(heap0));
    println!(
        "{} pool_allocs_per_step={} outstanding_delta={} heap_allocs_per_step={} heap_bytes_per_step={} peak_outstanding_bytes={peak} peak_rss_kib={} pooled_bytes_kept={}",
        model.name(),
        (pool1.native_allocations - pool0.native_allocations) / steps,
        pool1.outstanding_bytes as i64 - pool0.outstanding_bytes as i64,
        heap.allocations / steps,
        heap.bytes / steps,
        peak_rss_kib(),
        pool1.pooled_bytes
    );
    if let Some(next) = then {
        drop(step);
        let step = BenchStep::new(next, 1)?;
        for _ in 0..pool::RECENT_STEPS + 2 {
            let _scope = ActivationScope::new();
            step.step()?;
        }
        println!("then={} pooled_bytes_kept={} process_rss_kib={}", next.name(), pool::stats().pooled_bytes, proc_status_kib("VmRSS:"));
    }
    Ok(())
}

/// The process's peak resident set in KiB (`VmHWM` of `/proc/self/status`), 0 if unknown.
fn peak_rss_kib() -> u64 {
    proc_status_kib("VmHWM:")
}

/// A `kB` field of `/proc/self/status`, 0 if unknown.
fn proc_status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix(field)).and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok()).unwrap_or(0)
}
