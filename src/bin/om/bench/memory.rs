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

use super::ModelArg;
use crate::args::{parse_count, threads_parser, Failure, ModeArg, Outcome};
use clap::Args;
use om_models::benchmarks::{BenchModel, BenchStep};
use onemodel::core::{alloc_count, pool, ActivationScope};
use onemodel::{Compute, Mode};
use std::io::Write;

/// Options of `om bench memory`.
#[derive(Args, Debug)]
pub struct MemoryArgs {
    /// The benchmark model
    #[arg(long, value_enum)]
    model: ModelArg,
    /// Then run a second model and report what the pool still caches
    #[arg(long, value_enum)]
    then: Option<ModelArg>,
    /// Measured steps
    #[arg(long, default_value_t = 5, value_parser = parse_count)]
    steps: usize,
    /// Warm-up steps before measuring
    #[arg(long, default_value_t = 10)]
    warmup: usize,
    /// The pool's cache limit: auto, unlimited or a number of bytes
    #[arg(long, default_value = "auto", value_parser = parse_cache_limit)]
    cache_limit: CacheLimit,
    /// Kernel threads, 1 to 256
    #[arg(long, default_value_t = 1, value_parser = threads_parser())]
    threads: usize,
    /// Arithmetic mode
    #[arg(long, value_enum, default_value_t = ModeArg::Fast)]
    mode: ModeArg,
}

/// `--cache-limit`: the pool's own choice, none, or a number of bytes.
#[derive(Clone, Copy, Debug)]
struct CacheLimit(Option<u64>);

fn parse_cache_limit(v: &str) -> Result<CacheLimit, String> {
    match v {
        "auto" => Ok(CacheLimit(None)),
        "unlimited" => Ok(CacheLimit(Some(u64::MAX))),
        n => n.parse().map(|b| CacheLimit(Some(b))).map_err(|_| "expected auto, unlimited or a number of bytes".into()),
    }
}

/// Runs `om bench memory ...`.
pub fn run(o: &MemoryArgs) -> Outcome {
    let (model, threads, mode, steps, warmup) = (BenchModel::from(o.model), o.threads, Mode::from(o.mode), o.steps as u64, o.warmup);
    let (limit, then) = (o.cache_limit.0, o.then.map(BenchModel::from));
    if !alloc_count::is_installed() {
        return Err(Failure::Run("heap figures need the counting allocator installed in the binary".into()));
    }
    Compute::set_threads(threads)?;
    Compute::set_mode(mode);
    pool::set_cache_limit(limit);
    let step = BenchStep::new(model, 0)?;
    let scoped = || -> onemodel::Result<_> {
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
            return Err(Failure::Run(format!("a step left {} tensors alive", s.live_tensors_created)));
        }
        peak = peak.max(s.peak_outstanding_bytes);
    }
    let (pool1, heap) = (pool::stats(), alloc_count::process().since(heap0));
    outln!(
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
        outln!("then={} pooled_bytes_kept={} process_rss_kib={}", next.name(), pool::stats().pooled_bytes, proc_status_kib("VmRSS:"));
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
